"""The server's TLS files watched and the SSL context reloaded when they change, as RocketMQ 4.9.8's broker and name
server do (``FileWatchService`` every 500 ms over ``tls.server.certPath``, ``keyPath`` and ``trustCertPath``:
the trust file alone, or the certificate and the key both, reload the context; a reload that fails keeps the old)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio
import trio.testing
import trustme

from remoting.client import RemotingClient
from remoting.codec.codes import ResponseCode
from remoting.codec.command import request
from remoting.dispatch import Dispatcher, ProcessorPool
from remoting.errors import RemotingConnectError
from remoting.server import ListenerSettings, RemotingServer
from remoting.tls import client_context
from tests.remoting.helpers import EchoProcessor


def _issue(ca: trustme.CA, cert_path: Path, key_path: Path) -> None:
    cert = ca.issue_cert("127.0.0.1", "localhost")
    cert.cert_chain_pems[0].write_to_path(str(cert_path))
    cert.private_key_pem.write_to_path(str(key_path))


def _ca_file(ca: trustme.CA, path: Path) -> str:
    ca.cert_pem.write_to_path(str(path))
    return str(path)


async def _serves_tls(addr: str, ctx_args: tuple[str, ...]) -> bool:
    async with RemotingClient(ssl_context=client_context(*ctx_args), connect_timeout=5) as client:
        try:
            answer = await client.invoke(addr, request(1000, {}, b"x"), 5)
        except RemotingConnectError:
            return False
        return answer.code == ResponseCode.SUCCESS


@pytest.fixture
async def nursery() -> AsyncIterator[trio.Nursery]:
    async with trio.open_nursery() as n:
        yield n
        n.cancel_scope.cancel()


async def _serve(nursery: trio.Nursery, settings: ListenerSettings) -> str:
    dispatcher = Dispatcher()
    dispatcher.register(1000, EchoProcessor(), ProcessorPool("echo", 2, 100))
    server = RemotingServer(dispatcher, settings.listener_config(120.0))
    host, port = await nursery.start(server.serve, "127.0.0.1", 0)
    return f"{host}:{port}"


async def test_a_renewed_certificate_and_key_are_served_without_a_restart(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery, tmp_path: Path
) -> None:
    old_ca, new_ca = trustme.CA(), trustme.CA()
    old_trust, new_trust = _ca_file(old_ca, tmp_path / "old-ca.pem"), _ca_file(new_ca, tmp_path / "new-ca.pem")
    cert, key = tmp_path / "server.pem", tmp_path / "server.key"
    _issue(old_ca, cert, key)
    settings = ListenerSettings(
        tls_test_mode_enable=False,
        tls_server_cert_path=str(cert),
        tls_server_key_path=str(key),
        tls_config_file=str(tmp_path / "absent.properties"),
    )
    addr = await _serve(nursery, settings)
    assert await _serves_tls(addr, (old_trust,))

    # Only the certificate changed: RocketMQ waits for the key too (a half-written pair is not loaded).
    _issue(new_ca, cert, tmp_path / "next.key")
    await trio.sleep(2)
    assert await _serves_tls(addr, (old_trust,))

    # The key follows: the pair is reloaded within a watch round (500 ms).
    key.write_bytes((tmp_path / "next.key").read_bytes())
    await trio.sleep(2)
    assert await _serves_tls(addr, (new_trust,)), "the renewed certificate was not loaded"
    assert not await _serves_tls(addr, (old_trust,))

    # A renewal that does not load (a broken pair) keeps the context in use.
    cert.write_text("not a certificate")
    key.write_text("not a key")
    await trio.sleep(2)
    assert await _serves_tls(addr, (new_trust,))


async def test_a_changed_trust_file_is_reloaded_for_client_authentication(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery, tmp_path: Path
) -> None:
    server_ca, client_ca, other_ca = trustme.CA(), trustme.CA(), trustme.CA()
    server_trust = _ca_file(server_ca, tmp_path / "server-ca.pem")
    cert, key = tmp_path / "server.pem", tmp_path / "server.key"
    _issue(server_ca, cert, key)
    trust = tmp_path / "trusted-clients.pem"
    other_ca.cert_pem.write_to_path(str(trust))
    client = client_ca.issue_cert("client")
    client_chain, client_key = tmp_path / "client.pem", tmp_path / "client.key"
    client.cert_chain_pems[0].write_to_path(str(client_chain))
    client.private_key_pem.write_to_path(str(client_key))
    settings = ListenerSettings(
        tls_server_mode="enforcing",
        tls_test_mode_enable=False,
        tls_server_cert_path=str(cert),
        tls_server_key_path=str(key),
        tls_server_auth_client=True,
        tls_server_need_client_auth="require",
        tls_server_trust_cert_path=str(trust),
        tls_config_file=str(tmp_path / "absent.properties"),
    )
    addr = await _serve(nursery, settings)
    with_cert = (server_trust, str(client_chain), str(client_key))
    assert not await _serves_tls(addr, with_cert)

    client_ca.cert_pem.write_to_path(str(trust))
    await trio.sleep(2)
    assert await _serves_tls(addr, with_cert), "the changed trust file was not loaded"


async def test_a_disabled_listener_never_reads_the_tls_config_file(nursery: trio.Nursery, tmp_path: Path) -> None:
    """With ``tls.server.mode=disabled`` RocketMQ 4.9.8 builds no server context
    (``NettyRemotingServer.loadSslContext``) and watches no file (``BrokerController`` / ``NamesrvController`` start
    ``FileWatchService`` only when the mode is not disabled), so ``tls.config.file`` is never read: one
    ``Properties.load`` refuses (a malformed ``\\u`` escape) cannot stop such a broker or name server, which build
    their listeners with ``listener_config``."""
    props = tmp_path / "tls.properties"
    props.write_text("tls.server.certPath=\\uZZZZ\n")
    settings = ListenerSettings(tls_server_mode="disabled", tls_config_file=str(props))
    addr = await _serve(nursery, settings)
    async with RemotingClient(connect_timeout=5) as client:
        answer = await client.invoke(addr, request(1000, {}, b"x"), 5)
    assert answer.code == ResponseCode.SUCCESS


async def test_a_connection_open_across_a_reload_keeps_its_session(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery, tmp_path: Path
) -> None:
    """Netty's SslHandler of an open channel keeps the engine it was built with: 4.9.8's reload
    (``NettyRemotingServer.loadSslContext``) only replaces the context later channels get, so a connection made
    before a renewal is served on, not closed; new ones get the renewed certificate."""
    old_ca, new_ca = trustme.CA(), trustme.CA()
    old_trust = _ca_file(old_ca, tmp_path / "old-ca.pem")
    cert, key = tmp_path / "server.pem", tmp_path / "server.key"
    _issue(old_ca, cert, key)
    settings = ListenerSettings(
        tls_test_mode_enable=False, tls_server_cert_path=str(cert), tls_server_key_path=str(key),
        tls_config_file=str(tmp_path / "absent.properties"),
    )  # fmt: skip
    addr = await _serve(nursery, settings)
    async with RemotingClient(ssl_context=client_context(old_trust)) as client:
        assert (await client.invoke(addr, request(1000, {}, b"before"), 5)).code == ResponseCode.SUCCESS
        [before] = client.connections.values()
        _issue(new_ca, cert, key)
        await trio.sleep(2)
        assert not await _serves_tls(addr, (old_trust,)), "the renewed certificate was not loaded"
        answer = await client.invoke(addr, request(1000, {}, b"after"), 5)
        assert answer.code == ResponseCode.SUCCESS and bytes(answer.body) == b"after"
        assert list(client.connections.values()) == [before]
