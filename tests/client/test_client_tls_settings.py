"""A client's TLS settings as a Java client takes them when the application names no file: ``TlsHelper`` reads the
``tls.client.*`` and ``tls.test.mode.enable`` system properties (environment variables here, as ``tls.enable`` is
``TLS_ENABLE``) and then ``tls.config.file``, so ``mqadmin`` and any client with TLS on can present a certificate to a
server that requires one, and check the server's."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio
import trustme

from client.config import ClientConfig
from remoting.client import RemotingClient
from remoting.codec.codes import ResponseCode
from remoting.codec.command import request
from remoting.dispatch import Dispatcher, ProcessorPool
from remoting.errors import RemotingConnectError
from remoting.server import RemotingServer, ServerConfig
from remoting.tls import ENFORCING, TlsSettings, server_context
from tests.remoting.helpers import EchoProcessor


@pytest.fixture
async def nursery() -> AsyncIterator[trio.Nursery]:
    async with trio.open_nursery() as n:
        yield n
        n.cancel_scope.cancel()


def _pem_pair(ca: trustme.CA, directory: Path, name: str, *identities: str) -> tuple[str, str]:
    issued = ca.issue_cert(*identities)
    cert, key = directory / f"{name}.pem", directory / f"{name}.key"
    issued.cert_chain_pems[0].write_to_path(str(cert))
    issued.private_key_pem.write_to_path(str(key))
    return str(cert), str(key)


async def _serve(nursery: trio.Nursery, ca: trustme.CA, tmp_path: Path, *, auth_client: bool = True) -> str:
    """An enforcing server whose certificate ``ca`` issued and which (``auth_client``) requires a client certificate
    ``ca`` issued."""
    trust = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(trust))
    cert, key = _pem_pair(ca, tmp_path, "server", "127.0.0.1")
    settings = TlsSettings(
        tls_test_mode_enable=False,
        tls_server_cert_path=cert,
        tls_server_key_path=key,
        tls_server_auth_client=auth_client,
        tls_server_need_client_auth="require" if auth_client else "none",
        tls_server_trust_cert_path=str(trust),
        tls_config_file=str(tmp_path / "absent.properties"),
    )
    dispatcher = Dispatcher()
    dispatcher.register(1000, EchoProcessor(), ProcessorPool("echo", 1, 10))
    config = ServerConfig(tls_mode=ENFORCING, ssl_context=lambda: server_context(settings))
    host, port = await nursery.start(RemotingServer(dispatcher, config).serve, "127.0.0.1", 0)
    return f"{host}:{port}"


async def _served(config: ClientConfig, addr: str) -> bool:
    """Whether a client with ``config``'s TLS context gets an answer from ``addr``."""
    async with RemotingClient(ssl_context=config.ssl_context()) as client:
        try:
            answer = await client.invoke(addr, request(1000, {}, b"ping"), 5)
        except RemotingConnectError:
            return False
    return answer.code == ResponseCode.SUCCESS


async def test_a_client_presents_the_certificate_its_tls_config_file_names(
    nursery: trio.Nursery, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``-Dtls.enable=true -Dtls.config.file=...`` on a Java client (mqadmin's ``JAVA_OPT``): 4.9.8's
    ``NettyRemotingClient`` builds its context with ``TlsHelper.buildSslContext(true)``, which reads the file's
    ``tls.test.mode.enable=false`` and ``tls.client.certPath``/``keyPath`` and presents that certificate. Before: ours
    read neither the file nor the properties, so mqadmin could not reach a server requiring client certificates."""
    ca = trustme.CA()
    addr = await _serve(nursery, ca, tmp_path)
    cert, key = _pem_pair(ca, tmp_path, "client", "admin")
    tls_file = tmp_path / "tls.properties"
    tls_file.write_text(f"tls.test.mode.enable=false\ntls.client.certPath={cert}\ntls.client.keyPath={key}\n")
    monkeypatch.setenv("TLS_CONFIG_FILE", str(tls_file))
    assert await _served(ClientConfig(namesrv_addr="127.0.0.1:1", tls=True), addr)
    monkeypatch.setenv("TLS_CONFIG_FILE", str(tmp_path / "absent.properties"))
    # Test mode, Java's default: no certificate presented.
    assert not await _served(ClientConfig(namesrv_addr="127.0.0.1:1", tls=True), addr)


async def test_a_client_checks_the_server_as_its_tls_client_properties_say(
    nursery: trio.Nursery, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``-Dtls.test.mode.enable=false -Dtls.client.authServer=true -Dtls.client.trustCertPath=...``: TlsHelper checks
    the server's chain against the trust file, so a server another CA issued is refused (and one ``ca`` issued
    served). Before: ours ignored them and trusted any server."""
    ca = trustme.CA()
    addr = await _serve(nursery, ca, tmp_path, auth_client=False)
    other = tmp_path / "other-ca.pem"
    trustme.CA().cert_pem.write_to_path(str(other))
    monkeypatch.setenv("TLS_CONFIG_FILE", str(tmp_path / "absent.properties"))
    for name, value in {"TEST_MODE_ENABLE": "false", "CLIENT_AUTH_SERVER": "true",
                        "CLIENT_TRUST_CERT_PATH": str(other)}.items():  # fmt: skip
        monkeypatch.setenv(f"TLS_{name}", value)
    assert not await _served(ClientConfig(namesrv_addr="127.0.0.1:1", tls=True), addr)
    monkeypatch.setenv("TLS_CLIENT_TRUST_CERT_PATH", str(tmp_path / "ca.pem"))
    assert await _served(ClientConfig(namesrv_addr="127.0.0.1:1", tls=True), addr)
