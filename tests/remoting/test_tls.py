"""TLS on the same port as plaintext, RocketMQ's way: the first byte decides; modes disabled, permissive and enforcing;
certificates from files (issued by a throwaway trustme CA) or generated in test mode; our client over TLS."""

from __future__ import annotations

import contextlib
import socket
import ssl
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import attrs
import pytest
import trio
import trio.testing
import trustme
from cryptography.hazmat.primitives import serialization

from remoting.client import RemotingClient
from remoting.codec.codes import ResponseCode
from remoting.codec.command import request
from remoting.connection import CLOSE_TIMEOUT, Connection
from remoting.dispatch import Dispatcher, ProcessorPool
from remoting.errors import RemotingConnectError
from remoting.server import RemotingServer, ServerConfig
from remoting.tls import (
    DISABLED,
    ENFORCING,
    PERMISSIVE,
    TlsSettings,
    client_context,
    self_signed_pem,
    server_context,
    settings_client_context,
    tls_mode,
)
from tests.remoting.helpers import EchoProcessor, RawPeer, ignore_requests


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def cert_files(ca: trustme.CA, tmp_path: Path) -> TlsSettings:
    """Settings naming a server certificate for 127.0.0.1 and its key, issued by ``ca``; test mode off."""
    cert = ca.issue_cert("127.0.0.1", "localhost")
    cert_path, key_path = tmp_path / "server.pem", tmp_path / "server.key"
    cert.cert_chain_pems[0].write_to_path(str(cert_path))
    cert.private_key_pem.write_to_path(str(key_path))
    return TlsSettings(
        tls_test_mode_enable=False,
        tls_server_cert_path=str(cert_path),
        tls_server_key_path=str(key_path),
        tls_config_file=str(tmp_path / "absent.properties"),
    )


@pytest.fixture
def ca_file(ca: trustme.CA, tmp_path: Path) -> str:
    path = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return str(path)


async def _serve(nursery: trio.Nursery, mode: str, settings: TlsSettings) -> tuple[RemotingServer, str]:
    dispatcher = Dispatcher()
    dispatcher.register(1000, EchoProcessor(), ProcessorPool("echo", 2, 100))
    server = RemotingServer(dispatcher, ServerConfig(tls_mode=mode, ssl_context=lambda: server_context(settings)))
    host, port = await nursery.start(server.serve, "127.0.0.1", 0)
    return server, f"{host}:{port}"


@pytest.fixture
async def nursery() -> AsyncIterator[trio.Nursery]:
    async with trio.open_nursery() as n:
        yield n
        n.cancel_scope.cancel()


async def _echo(client: RemotingClient, addr: str) -> bytes:
    answer = await client.invoke(addr, request(1000, {"k": "v"}, b"over the wire"), 5)
    assert answer.code == ResponseCode.SUCCESS
    return bytes(answer.body)


@pytest.mark.parametrize("mode", [PERMISSIVE, ENFORCING])
async def test_our_client_over_tls_checks_the_servers_certificate(
    nursery: trio.Nursery, cert_files: TlsSettings, ca_file: str, mode: str
) -> None:
    server, addr = await _serve(nursery, mode, cert_files)
    async with RemotingClient(ssl_context=client_context(ca_file)) as client:
        assert await _echo(client, addr) == b"over the wire"
        assert all(c.remote_address[0] == "127.0.0.1" for c in server.connections)
    other_ca = trustme.CA()
    wrong = Path(ca_file).with_name("other-ca.pem")
    other_ca.cert_pem.write_to_path(str(wrong))
    async with RemotingClient(ssl_context=client_context(str(wrong))) as client:
        with pytest.raises(RemotingConnectError):
            await _echo(client, addr)


async def test_permissive_serves_plaintext_and_tls_on_one_port(
    nursery: trio.Nursery, cert_files: TlsSettings, ca_file: str
) -> None:
    _, addr = await _serve(nursery, PERMISSIVE, cert_files)
    async with RemotingClient() as plain, RemotingClient(ssl_context=client_context(ca_file)) as secure:
        assert await _echo(plain, addr) == await _echo(secure, addr) == b"over the wire"


async def test_enforcing_closes_plaintext_without_a_frame(nursery: trio.Nursery, cert_files: TlsSettings) -> None:
    server, addr = await _serve(nursery, ENFORCING, cert_files)
    host, port = addr.rsplit(":", 1)
    peer = await RawPeer.connect((host, int(port)))
    await peer.send(request(1000, {}, b"plaintext"))
    try:
        answer = await peer.receive()
    except trio.BrokenResourceError:  # closed with our frame unread: a reset
        answer = None
    assert answer is None  # closed, no answer
    assert server.refused_connections == 1
    async with RemotingClient() as client:
        with pytest.raises(RemotingConnectError):
            await _echo(client, addr)


async def test_a_tls_client_against_disabled_fails_cleanly_and_plaintext_still_works(
    nursery: trio.Nursery, cert_files: TlsSettings, ca_file: str
) -> None:
    server, addr = await _serve(nursery, DISABLED, cert_files)
    async with RemotingClient(ssl_context=client_context(ca_file), connect_timeout=5) as client:
        with pytest.raises(RemotingConnectError):
            await _echo(client, addr)
    async with RemotingClient() as client:
        assert await _echo(client, addr) == b"over the wire"
    assert server.refused_connections == 1


async def test_garbage_after_the_handshake_byte_closes_only_that_connection(
    nursery: trio.Nursery, cert_files: TlsSettings, ca_file: str
) -> None:
    server, addr = await _serve(nursery, PERMISSIVE, cert_files)
    async with RemotingClient(ssl_context=client_context(ca_file)) as secure, RemotingClient() as plain:
        assert await _echo(secure, addr) == b"over the wire"
        host, port = addr.rsplit(":", 1)
        for junk in (b"\x16" + b"\x00" * 64, b"\x16\x03\x01\xff\xffnot a client hello at all", b"\x16"):
            stream = await trio.open_tcp_stream(host, int(port))
            await stream.send_all(junk)
            await stream.send_eof()
            with trio.fail_after(10):  # the server closes it (after a TLS alert, if it sent one)
                while await stream.receive_some(100):
                    pass
            await stream.aclose()
        # The server and the live connections are unaffected.
        assert await _echo(secure, addr) == await _echo(plain, addr) == b"over the wire"
    assert server.refused_connections == 3


async def test_test_mode_generates_a_certificate_and_a_default_client_connects(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    settings = TlsSettings(tls_config_file=str(tmp_path / "absent.properties"))  # RocketMQ's defaults: test mode on
    _, addr = await _serve(nursery, tls_mode("nonsense"), settings)  # unknown mode: permissive
    async with RemotingClient(ssl_context=client_context()) as client:
        assert await _echo(client, addr) == b"over the wire"
    (tmp_path / "ca.pem").write_bytes(trustme.CA().cert_pem.bytes())  # a CA that did not sign it
    async with RemotingClient(ssl_context=client_context(str(tmp_path / "ca.pem"))) as client:
        with pytest.raises(RemotingConnectError):
            await _echo(client, addr)


async def test_the_tls_config_file_overrides_the_paths_but_not_the_mode(
    nursery: trio.Nursery, cert_files: TlsSettings, ca_file: str, tmp_path: Path
) -> None:
    props = tmp_path / "tls.properties"
    props.write_text(
        f"tls.test.mode.enable=false\ntls.server.certPath={cert_files.tls_server_cert_path}\n"
        f"tls.server.keyPath={cert_files.tls_server_key_path}\ntls.server.mode=disabled\n"
    )
    settings = TlsSettings(tls_config_file=str(props), tls_server_cert_path="/nonexistent.pem")
    ctx = server_context(settings)
    assert isinstance(ctx, ssl.SSLContext)
    _, addr = await _serve(nursery, tls_mode(settings.tls_server_mode), settings)
    async with RemotingClient(ssl_context=client_context(ca_file)) as client:  # checked against the trustme CA
        assert await _echo(client, addr) == b"over the wire"


async def test_an_unbuildable_context_closes_tls_connections_only(nursery: trio.Nursery, tmp_path: Path) -> None:
    settings = TlsSettings(
        tls_test_mode_enable=False,
        tls_server_cert_path=str(tmp_path / "missing.pem"),
        tls_config_file=str(tmp_path / "absent.properties"),
    )
    server, addr = await _serve(nursery, PERMISSIVE, settings)
    async with RemotingClient(ssl_context=client_context()) as secure, RemotingClient() as plain:
        with pytest.raises(RemotingConnectError):
            await _echo(secure, addr)
        assert await _echo(plain, addr) == b"over the wire"
    assert server.refused_connections == 1


async def test_required_client_auth_without_a_trust_file_refuses_a_client_without_a_certificate(
    nursery: trio.Nursery, cert_files: TlsSettings, ca: trustme.CA, ca_file: str
) -> None:
    """``tls.server.authClient`` with ``need.client.auth=require`` and no ``trustCertPath``: RocketMQ's TlsHelper
    checks client certificates against the default CAs; we used to ask for none, and served a client without one."""
    settings = attrs.evolve(cert_files, tls_server_auth_client=True, tls_server_need_client_auth="require")
    assert server_context(settings).verify_mode == ssl.CERT_REQUIRED
    _, addr = await _serve(nursery, ENFORCING, settings)
    async with RemotingClient(ssl_context=client_context(ca_file)) as client:
        with pytest.raises(RemotingConnectError):
            await _echo(client, addr)
    # A client certificate from a CA the platform does not trust is refused too.
    cert = ca.issue_cert("client")
    chain, key = Path(ca_file).with_name("client.pem"), Path(ca_file).with_name("client.key")
    cert.cert_chain_pems[0].write_to_path(str(chain))
    cert.private_key_pem.write_to_path(str(key))
    async with RemotingClient(ssl_context=client_context(ca_file, str(chain), str(key))) as client:
        with pytest.raises(RemotingConnectError):
            await _echo(client, addr)


async def test_required_client_auth_without_auth_client_refuses_a_client_without_a_certificate(
    nursery: trio.Nursery, cert_files: TlsSettings, ca: trustme.CA, ca_file: str
) -> None:
    """RocketMQ's TLS guide (docs/en/Configuration_TLS.md, 4.9.8) sets ``tls.server.need.client.auth=require`` with
    ``tls.server.authClient=false``: TlsHelper then gives Netty an insecure trust manager and ``ClientAuth.REQUIRE``,
    so a client without a certificate fails the handshake and one with a certificate is served. Before: ours asked
    for no certificate without ``authClient`` and served a client without one."""
    settings = attrs.evolve(cert_files, tls_server_need_client_auth="require", tls_server_trust_cert_path=ca_file)
    _, addr = await _serve(nursery, ENFORCING, settings)
    async with RemotingClient(ssl_context=client_context(ca_file)) as client:
        with pytest.raises(RemotingConnectError):
            await _echo(client, addr)
    cert = ca.issue_cert("client")
    chain, key = Path(ca_file).with_name("client.pem"), Path(ca_file).with_name("client.key")
    cert.cert_chain_pems[0].write_to_path(str(chain))
    cert.private_key_pem.write_to_path(str(key))
    async with RemotingClient(ssl_context=client_context(ca_file, str(chain), str(key))) as client:
        assert await _echo(client, addr) == b"over the wire"


def test_a_client_told_to_check_the_server_without_a_trust_file_uses_the_default_cas(tmp_path: Path) -> None:
    """``tls.client.authServer`` without ``tls.client.trustCertPath`` (the broker towards its name servers): the
    server is checked against the platform's CAs, as TlsHelper does, not left unchecked."""
    settings = TlsSettings(tls_enable=True, tls_test_mode_enable=False, tls_client_auth_server=True,
                           tls_config_file=str(tmp_path / "absent.properties"))  # fmt: skip
    ctx = settings_client_context(settings, use_tls=True)
    assert ctx is not None and ctx.verify_mode == ssl.CERT_REQUIRED and not ctx.check_hostname  # as Netty
    unchecked = settings_client_context(attrs.evolve(settings, tls_client_auth_server=False), use_tls=True)
    assert unchecked is not None and unchecked.verify_mode == ssl.CERT_NONE


async def test_a_tls_connection_whose_peer_stopped_reading_closes_after_nettys_close_notify_timeout(
    autojump_clock: trio.testing.MockClock, cert_files: TlsSettings, ca_file: str
) -> None:
    """Closing a TLS connection sends close_notify, which a peer that stopped reading (the socket's buffer full of
    answers it never read) never takes: the close gives up after ``CLOSE_TIMEOUT`` (Netty's ``SslHandler``
    ``closeNotifyFlushTimeout``) and closes the socket, instead of holding the connection's task, and so the
    server's shutdown, for ever."""
    # A Unix socket pair: what the peer has not read stays in the sender's buffer (TCP on loopback moves it on).
    left, right = socket.socketpair()
    ours = trio.SocketStream(trio.socket.from_stdlib_socket(left))
    server_side = trio.SSLStream(ours, server_context(cert_files), server_side=True)
    theirs = trio.SocketStream(trio.socket.from_stdlib_socket(right))
    peer = trio.SSLStream(theirs, client_context(ca_file), server_hostname="127.0.0.1")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(server_side.do_handshake)
        nursery.start_soon(peer.do_handshake)
    conn = Connection(server_side, ("127.0.0.1", 1), ("127.0.0.1", 2))
    ended = trio.Event()

    async def run() -> None:
        await conn.run(ignore_requests)
        ended.set()

    took: float | None = None
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        await trio.testing.wait_all_tasks_blocked()
        _fill_send_buffer(left)
        start = trio.current_time()
        conn.close()
        with trio.move_on_after(60):  # virtual seconds
            await ended.wait()
            took = trio.current_time() - start
        right.close()  # ends a close still blocked, so that a failure does not hang the test
    assert took is not None and round(took, 3) == CLOSE_TIMEOUT
    assert left.fileno() == -1


def _fill_send_buffer(sock: socket.socket) -> None:
    """Write to ``sock`` until its send buffer takes no more, as answers its peer never reads would."""
    with sock.dup() as filler:
        filler.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            while True:
                filler.send(b"\0" * 65536)


def _broken(settings: TlsSettings, how: str) -> TlsSettings:
    """``settings`` with a certificate, key or trust file that opens but does not load as ``how`` says."""
    folder = Path(settings.tls_server_cert_path).parent
    if how == "not a certificate":
        (folder / "junk.pem").write_text("not a certificate\n")
        return attrs.evolve(settings, tls_server_cert_path=str(folder / "junk.pem"))
    if how in ("wrong key password", "encrypted key without a password"):
        key = serialization.load_pem_private_key(Path(settings.tls_server_key_path).read_bytes(), None)
        locked = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.BestAvailableEncryption(b"pw")
        )
        Path(settings.tls_server_key_path).write_bytes(locked)
        return attrs.evolve(settings, tls_server_key_password="not pw" if how == "wrong key password" else "")
    assert how == "missing trust file"
    return attrs.evolve(settings, tls_server_auth_client=True, tls_server_trust_cert_path=str(folder / "none.pem"))


@pytest.mark.parametrize(
    "how", ["not a certificate", "wrong key password", "encrypted key without a password", "missing trust file"]
)
async def test_a_certificate_key_or_trust_file_that_does_not_load_fails_the_start(
    nursery: trio.Nursery, cert_files: TlsSettings, how: str
) -> None:
    """RocketMQ's NettyRemotingServer.loadSslContext logs only an IOException or CertificateException (a file it
    cannot open); Netty's SslContextBuilder throws IllegalArgumentException for a certificate or key that does not
    parse, a wrong key password or a trust file it cannot read, which escapes the constructor, so the broker or name
    server does not start. Ours logged it and served on, closing every TLS connection (found by a review); then an
    encrypted key without a password crashed the start with an AttributeError traceback (found by a second review)."""
    settings = _broken(cert_files, how)
    config = ServerConfig(tls_mode=PERMISSIVE, ssl_context=lambda: server_context(settings))
    server = RemotingServer(Dispatcher(), config)
    with pytest.raises(ValueError, match="TLS context"):
        await nursery.start(server.serve, "127.0.0.1", 0)


async def test_a_key_that_does_not_match_its_certificate_is_logged_and_the_server_starts(
    nursery: trio.Nursery, cert_files: TlsSettings, tmp_path: Path
) -> None:
    """Netty's OpenSSL context refuses a mismatched key with an SSLException, an IOException loadSslContext logs:
    the server starts, serves plaintext and closes TLS connections."""
    other = tmp_path / "other.key"
    other.write_bytes(self_signed_pem()[1])
    server, addr = await _serve(nursery, PERMISSIVE, attrs.evolve(cert_files, tls_server_key_path=str(other)))
    async with RemotingClient(ssl_context=client_context()) as secure, RemotingClient() as plain:
        with pytest.raises(RemotingConnectError):
            await _echo(secure, addr)
        assert await _echo(plain, addr) == b"over the wire"
    assert server.refused_connections == 1


_GENERATED_LATE = """
import sys
import time
import trio
from broker.embedded import EmbeddedCluster
from remoting.client import RemotingClient
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request
from remoting.tls import client_context

async def main(path):
    async with EmbeddedCluster(path) as cluster:
        generated_at_boot = "cryptography" in sys.modules
        async with RemotingClient(ssl_context=client_context()) as client:
            answer = await client.invoke(cluster.broker_addr, request(RequestCode.GET_BROKER_CONFIG, {}), 10)
        print(generated_at_boot, answer.code == ResponseCode.SUCCESS)

trio.run(main, sys.argv[1])
"""


async def test_test_mode_generates_its_certificate_at_the_first_tls_handshake_not_at_start(tmp_path: Path) -> None:
    """RocketMQ's defaults (tls.server.mode permissive, tls.test.mode.enable true) give every broker a generated
    certificate; making it at start (importing ``cryptography``) cost each broker and name server about 12 MB of RSS
    for connections that almost never come. With no file to read there is nothing to report at start, so the
    certificate is made at the first TLS handshake, which still succeeds. A child process: this one imported
    ``cryptography`` long ago."""
    done = await trio.run_process(
        [sys.executable, "-c", _GENERATED_LATE, str(tmp_path / "c")], capture_stdout=True, capture_stderr=True
    )
    assert done.stdout.decode().split() == ["False", "True"], done.stderr.decode()[-2000:]


def _slow_generated_context() -> ssl.SSLContext:
    time.sleep(0.2)  # the first generation imports ``cryptography``: about 0.1 s in a fresh process
    return server_context(TlsSettings(tls_config_file="/nonexistent/tls.properties"))


async def test_tls_handshakes_arriving_while_test_mode_makes_its_certificate_wait_for_it(
    nursery: trio.Nursery,
) -> None:
    """Test mode's context is made at the first TLS handshake, in a worker thread: handshakes arriving meanwhile wait
    for it, as a Java server has its context before it binds (a review found them closed: "a TLS handshake and no TLS
    context")."""
    dispatcher = Dispatcher()
    dispatcher.register(1000, EchoProcessor(), ProcessorPool("echo", 2, 100))
    config = ServerConfig(tls_mode=PERMISSIVE, ssl_context=_slow_generated_context, tls_generated=True)
    server = RemotingServer(dispatcher, config)
    host, port = await nursery.start(server.serve, "127.0.0.1", 0)
    echoed = []

    async def one() -> None:
        async with RemotingClient(ssl_context=client_context()) as client:
            echoed.append(await _echo(client, f"{host}:{port}"))

    async with trio.open_nursery() as clients:
        for _ in range(5):
            clients.start_soon(one)
    assert echoed == [b"over the wire"] * 5
    assert server.refused_connections == 0


def _failing_generated_context() -> ssl.SSLContext:
    raise ImportError("cryptography is not installed")


async def test_test_mode_failing_to_make_its_certificate_closes_tls_connections_only(nursery: trio.Nursery) -> None:
    """Whatever making test mode's certificate raises is logged and TLS connections are closed; the server, and its
    plaintext connections, go on (NettyRemotingServer.loadSslContext logs any failure; a review found an ImportError
    at the first handshake stopping the whole server)."""
    dispatcher = Dispatcher()
    dispatcher.register(1000, EchoProcessor(), ProcessorPool("echo", 2, 100))
    config = ServerConfig(tls_mode=PERMISSIVE, ssl_context=_failing_generated_context, tls_generated=True)
    server = RemotingServer(dispatcher, config)
    host, port = await nursery.start(server.serve, "127.0.0.1", 0)
    for _ in range(2):
        async with RemotingClient(ssl_context=client_context()) as client:
            with pytest.raises(RemotingConnectError):
                await _echo(client, f"{host}:{port}")
    async with RemotingClient() as plain:
        assert await _echo(plain, f"{host}:{port}") == b"over the wire"
