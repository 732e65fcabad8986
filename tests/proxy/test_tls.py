"""The gRPC endpoint over TLS: a certificate from ``tls.server.certPath`` / ``tls.server.keyPath`` opens the TLS port
beside the plaintext one, and the official 5.x client with ``tls_enable=True`` (verifying the certificate) sends and
receives through it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from client import Admin
from tests.e2e.harness import REPO_ROOT, kill_all
from tests.proxy.cluster import GrpcCluster

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


async def test_official_client_over_tls(tmp_path: Path, nursery: trio.Nursery) -> None:
    cert, key = self_signed(tmp_path)
    cluster = GrpcCluster(tmp_path / "cluster", ["--tls.server.certPath", str(cert), "--tls.server.keyPath", str(key)])
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
