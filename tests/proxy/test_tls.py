"""The gRPC endpoint over TLS: a certificate from ``tls.server.certPath`` / ``tls.server.keyPath`` opens the TLS-only
port, and the official 5.x client with ``tls_enable=True`` (verifying the certificate) sends and receives through it;
``grpcServerPort`` serves TLS and plaintext clients alike in ``permissive`` mode (the default), TLS only in
``enforcing``, plaintext only in ``disabled``, and junk on it closes that connection only."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import grpc
import pytest
import trio
import trustme

from client import Admin, ClientConfig
from proxy.pb import definition, service, service_grpc
from tests.e2e.harness import REPO_ROOT, kill_all
from tests.proxy.cluster import GrpcCluster
from tests.proxy.official import drain, make_message, start_consumer, start_producer

pytestmark = pytest.mark.timeout(120)


def self_signed(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 made with the ``openssl`` command (``make test``'s scripts/setup-system installs
    it, so its absence fails the test)."""
    if shutil.which("openssl") is None:
        pytest.fail("openssl is missing: make test installs it (scripts/setup-system)")
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return cert, key


@pytest.mark.parametrize("mode", ["permissive", "disabled"])
async def test_official_client_over_tls(tmp_path: Path, nursery: trio.Nursery, mode: str) -> None:
    """Through the TLS-only port whatever the mode: with ``disabled`` the main port is plaintext only, so the routes
    must name the TLS-only port to a client that came in on it."""
    cert, key = self_signed(tmp_path)
    files = ["--tls.server.certPath", str(cert), "--tls.server.keyPath", str(key), "--tlsTestModeEnable", "false"]
    files += ["--tls.server.mode", mode]
    cluster = GrpcCluster(tmp_path / "cluster", files)
    try:
        await cluster.start(nursery)
        assert cluster.tls_port and cluster.tls_port != cluster.grpc_port
        async with Admin(cluster.namesrv_addr) as admin:
            await admin.create_topic("Tls", read_queue_nums=4, write_queue_nums=4)
        env = dict(os.environ, GRPC_DEFAULT_SSL_ROOTS_FILE_PATH=str(cert))
        argv = [sys.executable, "-m", "tests.proxy.tls_client", f"127.0.0.1:{cluster.tls_port}"]
        done = await trio.run_process(argv, env=env, cwd=REPO_ROOT, capture_stdout=True, capture_stderr=True)
        [result] = [line for line in done.stdout.decode().splitlines() if line.startswith("RESULT")]
        _, message_id, body = result.split(" ", 2)
        assert message_id.startswith("01") and body == "over tls"
    finally:
        await kill_all()


async def _tls_client(cert: Path, port: int) -> str:
    """The official client over TLS in a child process (tls_client.py); returns its received body."""
    env = dict(os.environ, GRPC_DEFAULT_SSL_ROOTS_FILE_PATH=str(cert))
    argv = [sys.executable, "-m", "tests.proxy.tls_client", f"127.0.0.1:{port}"]
    done = await trio.run_process(argv, env=env, cwd=REPO_ROOT, capture_stdout=True, capture_stderr=True, check=False)
    results = [line for line in done.stdout.decode().splitlines() if line.startswith("RESULT")]
    assert results, done.stderr.decode()[-2000:]
    _, message_id, body = results[0].split(" ", 2)
    assert message_id.startswith("01")
    return body


def _plaintext_round_trip(endpoint: str) -> list[bytes]:
    producer = start_producer(endpoint, ["Plain"])
    producer.send(make_message("Plain", b"in the clear"))
    consumer = start_consumer(endpoint, "G-plain", "Plain")
    got = [m.body for m in drain(consumer, 1)]
    consumer.shutdown()
    producer.shutdown()
    return got


def _query_route(port: int, cert: bytes | None) -> grpc.StatusCode:
    """One raw QueryRoute over plaintext (``cert`` None) or TLS trusting ``cert``: OK or the failure's status."""
    target = f"127.0.0.1:{port}"
    channel = (
        grpc.insecure_channel(target)
        if cert is None
        else grpc.secure_channel(target, grpc.ssl_channel_credentials(root_certificates=cert))
    )
    request = service.QueryRouteRequest(topic=definition.Resource(name="Plain"))
    try:
        service_grpc.MessagingServiceStub(channel).QueryRoute(request, timeout=10, metadata=[("x-mq-client-id", "t")])
    except grpc.RpcError as exc:
        return exc.code()  # type: ignore[no-any-return]
    finally:
        channel.close()
    return grpc.StatusCode.OK


def _garbage(port: int) -> None:
    """Connections that end before a byte, after the sniffed byte, or send junk either way; each must close alone."""
    for payload in (b"", b"\x16", b"\x16\x03\x01\x00\x05junk!", b"GET / HTTP/1.1\r\n\r\n", bytes(range(256)) * 8):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(payload)
            sock.shutdown(socket.SHUT_WR)
            with contextlib.suppress(OSError):
                while sock.recv(65536):
                    pass


async def _cluster(tmp_path: Path, nursery: trio.Nursery, cert: Path, key: Path, *extra: str) -> GrpcCluster:
    # Test mode (on by default) wins over the files, as in RocketMQ: off, so the test's certificate is served.
    argv = [
        "--tls.server.certPath",
        str(cert),
        "--tls.server.keyPath",
        str(key),
        "--tlsTestModeEnable",
        "false",
        *extra,
    ]
    cluster = GrpcCluster(tmp_path / "cluster", argv)
    await cluster.start(nursery)
    tls = ClientConfig(namesrv_addr=cluster.namesrv_addr, tls="enforcing" in extra)  # the broker's port sniffs too
    async with Admin(config=tls) as admin:
        for topic in ("Tls", "Plain"):
            await admin.create_topic(topic, read_queue_nums=4, write_queue_nums=4)
    return cluster


async def test_permissive_serves_tls_and_plaintext_on_grpc_server_port(tmp_path: Path, nursery: trio.Nursery) -> None:
    cert, key = self_signed(tmp_path)
    try:
        cluster = await _cluster(tmp_path, nursery, cert, key)  # tls.server.mode defaults to permissive
        await trio.to_thread.run_sync(_garbage, cluster.grpc_port)
        assert await _tls_client(cert, cluster.grpc_port) == "over tls"
        assert await trio.to_thread.run_sync(_plaintext_round_trip, cluster.endpoint) == [b"in the clear"]
        await trio.to_thread.run_sync(_garbage, cluster.grpc_port)
        assert await trio.to_thread.run_sync(_query_route, cluster.grpc_port, None) == grpc.StatusCode.OK
        assert await trio.to_thread.run_sync(_query_route, cluster.grpc_port, cert.read_bytes()) == grpc.StatusCode.OK
        assert await trio.to_thread.run_sync(_query_route, cluster.tls_port, cert.read_bytes()) == grpc.StatusCode.OK
        assert cluster.broker is not None and cluster.broker.running
    finally:
        await kill_all()


@pytest.mark.parametrize(("mode", "tls_ok", "plain_ok"), [("enforcing", True, False), ("disabled", False, True)])
async def test_enforcing_and_disabled(
    tmp_path: Path, nursery: trio.Nursery, mode: str, tls_ok: bool, plain_ok: bool
) -> None:
    cert, key = self_signed(tmp_path)
    try:
        cluster = await _cluster(tmp_path, nursery, cert, key, "--tls.server.mode", mode)
        over_tls = await trio.to_thread.run_sync(_query_route, cluster.grpc_port, cert.read_bytes())
        plain = await trio.to_thread.run_sync(_query_route, cluster.grpc_port, None)
        assert (over_tls == grpc.StatusCode.OK, plain == grpc.StatusCode.OK) == (tls_ok, plain_ok)
        assert grpc.StatusCode.UNAVAILABLE in (over_tls, plain)
        # The TLS-only port is there whatever the mode.
        assert await trio.to_thread.run_sync(_query_route, cluster.tls_port, cert.read_bytes()) == grpc.StatusCode.OK
    finally:
        await kill_all()


def _write_unloadable_pair(directory: Path, kind: str) -> tuple[Path, Path]:
    """A certificate and key file that do not load: not PEM, a key of another certificate, or a missing key."""
    cert, key = directory / "cert.pem", directory / "key.pem"
    if kind == "missing key":
        trustme.CA().issue_cert("127.0.0.1").cert_chain_pems[0].write_to_path(str(cert))
        return cert, key
    if kind == "junk":
        cert.write_text("not a certificate\n")
        key.write_text("not a key\n")
        return cert, key
    ca = trustme.CA()
    ca.issue_cert("127.0.0.1").cert_chain_pems[0].write_to_path(str(cert))
    ca.issue_cert("127.0.0.1").private_key_pem.write_to_path(str(key))
    return cert, key


@pytest.mark.parametrize("kind", ["junk", "mismatched", "missing key"])
async def test_a_grpc_certificate_that_does_not_load_stops_the_start_naming_it(tmp_path: Path, kind: str) -> None:
    """5.3.3's proxy/.../grpc/ProxyAndTlsProtocolNegotiator.java loadSslContext: Netty's GrpcSslContexts refuses the
    files and the start fails with "grpc tls set failed: <why>". Ours exited with grpcio's "Failed to bind to address
    0.0.0.0:0", as if the port were taken, the certificate's fault only in grpcio's C log lines."""
    cert, key = _write_unloadable_pair(tmp_path, kind)
    argv = [sys.executable, "-m", "broker.cli", "--enable-proxy", "-n", "127.0.0.1:1", "--listenPort", "0",
            "--grpcServerPort", "0", "--storePathRootDir", str(tmp_path / "store"), "--tlsTestModeEnable", "false",
            "--tls.server.mode", "disabled", "--tlsCertPath", str(cert), "--tlsKeyPath", str(key)]  # fmt: skip
    with trio.fail_after(90):
        done = await trio.run_process(
            argv, stdin=subprocess.DEVNULL, cwd=REPO_ROOT, capture_stdout=True, capture_stderr=True, check=False
        )
    err = done.stderr.decode()
    assert done.returncode == 1, err[-2000:]
    [line] = [line for line in err.splitlines() if line.startswith("mqbroker:")]
    assert "grpc tls set failed" in line and "bind" not in line, line
    if kind == "missing key":
        assert str(key) in line, line
