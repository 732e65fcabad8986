"""The proxy's settings come from the broker's ``-c`` file and ``--name value`` arguments (later wins), with
RocketMQ's property names; the broker does not call them unknown; ``mqbroker -c`` serves gRPC on the file's port."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest
import trio

from broker.cli import build_config, build_proxy_config
from proxy.startup import certificate
from tests.e2e.harness import Process, kill_all


def test_file_then_arguments(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerName=b1\ngrpcServerPort=9001\nminInvisibleTimeMillsForRecv=2000\ntls.server.certPath=/c\n")
    proxy = build_proxy_config(str(conf), ["--grpcServerPort", "9002"], enable=True)
    assert (proxy.enable_proxy, proxy.grpc_server_port, proxy.min_invisible_time_mills_for_recv) == (True, 9002, 2000)
    assert (proxy.tls_server_cert_path, proxy.tls_port) == ("/c", 9003)
    assert not build_proxy_config(str(conf), [], enable=False).enable_proxy
    build_config(str(conf), ["--grpcServerPort", "9002", "--noSuchKey", "1"], None)
    warnings = capsys.readouterr().err
    assert "noSuchKey" in warnings and "grpcServerPort" not in warnings and "tls.server" not in warnings


def test_tls_settings_of_the_grpc_port(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    default = build_proxy_config(None, [], enable=True)
    assert (default.tls_server_mode, default.has_certificate, default.tls_port) == ("permissive", True, None)
    plain = build_proxy_config(None, ["--tlsTestModeEnable", "false"], enable=True)
    assert (plain.has_certificate, plain.tls_port, certificate(plain)) == (False, None, None)
    args = ["--tls.server.mode", "enforcing", "--grpcTlsServerPort", "0"]
    test_mode = build_proxy_config(None, args, enable=True)
    assert (test_mode.tls_server_mode, test_mode.has_certificate, test_mode.tls_port) == ("enforcing", True, 0)
    cert, key = certificate(test_mode) or (b"", b"")
    assert cert.startswith(b"-----BEGIN CERTIFICATE") and b"PRIVATE KEY" in key
    (tmp_path / "c.pem").write_bytes(cert)
    (tmp_path / "k.pem").write_bytes(key)
    named = build_proxy_config(
        None,
        [
            "--tlsCertPath",
            str(tmp_path / "c.pem"),
            "--tlsKeyPath",
            str(tmp_path / "k.pem"),
            "--tlsTestModeEnable",
            "false",
        ],
        True,
    )
    assert (named.tls_port, certificate(named)) == (8082, (cert, key))
    build_config(None, ["--tlsTestModeEnable", "true", "--tlsCertPath", "/c", "--tlsKeyPath", "/k"], None)
    assert "tls" not in capsys.readouterr().err


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_mqbroker_serves_grpc_on_the_port_of_its_config_file(tmp_path: Path, nursery: trio.Nursery) -> None:
    port = free_port()
    conf = tmp_path / "broker.conf"
    conf.write_text(
        f"grpcServerPort={port}\nlistenPort=0\nlistenHost=127.0.0.1\nstorePathRootDir={tmp_path / 'store'}\n"
    )
    argv = [sys.executable, "-m", "broker.cli", "-c", str(conf), "--enable-proxy"]
    broker = Process("broker", argv, tmp_path / "broker.log")
    try:
        await broker.start(nursery)
        line = f"The proxy[grpcServerPort={port}, tlsPort=0] boot success."
        await broker.wait_until(lambda: line in broker.lines, 60, "the proxy's boot line")
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
    finally:
        await kill_all()


async def test_enable_proxy_in_the_config_file_serves_grpc_without_the_flag(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    """``enableProxy=true`` (docs/grpc.md#settings: "serve gRPC at all; ``--enable-proxy`` sets it") in the ``-c`` file
    runs the proxy as the flag does: a start that runs no proxy reads none of its settings, but this one decides
    whether it runs. Ours took it for a broker without a proxy, in silence, once the proxy's settings were read only
    with the flag."""
    port = free_port()
    conf = tmp_path / "broker.conf"
    conf.write_text(
        f"enableProxy=true\ngrpcServerPort={port}\nlistenPort=0\nlistenHost=127.0.0.1\n"
        f"storePathRootDir={tmp_path / 'store'}\n"
    )
    proxy = build_proxy_config(str(conf), [], enable=False)
    assert (proxy.enable_proxy, proxy.grpc_server_port) == (True, port)
    broker = Process("broker", [sys.executable, "-m", "broker.cli", "-c", str(conf)], tmp_path / "broker.log")
    try:
        await broker.start(nursery)
        line = f"The proxy[grpcServerPort={port}, tlsPort=0] boot success."
        await broker.wait_until(lambda: line in broker.lines, 60, "the proxy's boot line")
    finally:
        await kill_all()
