"""TLS faults: the broker's shutdown UNREGISTER_BROKER goes over TLS like its registrations (RocketMQ's
``BrokerOuterAPI`` uses one remoting client for both), and a stalled TLS handshake is closed after Netty's 10 s
(``SslHandler`` handshake timeout, kept by RocketMQ's ``TlsModeHandler``), not the 120 s idle timeout. Found by a
review; both failed before."""

from __future__ import annotations

import contextlib
import logging
import ssl
from pathlib import Path

import pytest
import trio
import trio.testing
import trustme

from broker.cli import build_config
from broker.embedded import EmbeddedCluster
from broker.security import namesrv_client_context
from remoting.client import RemotingClient
from remoting.codec.codes import ResponseCode
from remoting.codec.command import RemotingCommand, request
from remoting.dispatch import Dispatcher, ProcessorPool
from remoting.errors import RemotingConnectError
from remoting.server import TLS_HANDSHAKE_TIMEOUT, RemotingServer, ServerConfig
from remoting.tls import DISABLED, PERMISSIVE, TlsSettings, client_context, server_context, settings_client_context
from tests.acl.conftest import host_named_tls_settings
from tests.conftest import SMALL_STORE
from tests.remoting.helpers import EchoProcessor


async def test_clean_shutdown_unregisters_over_tls_in_an_enforcing_cluster(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    overrides = {"tls_server_mode": "enforcing", "tls_config_file": str(tmp_path / "none"), **SMALL_STORE}
    async with EmbeddedCluster(tmp_path / "c", **overrides) as cluster:
        assert cluster.namesrv is not None
        server = cluster.namesrv.remoting_server
        refused_before = server.refused_connections
        caplog.set_level(logging.WARNING)
        await cluster.stop_broker()
        refused = server.refused_connections - refused_before
        plaintext = [r.getMessage() for r in caplog.records if "plaintext while tls.server.mode" in r.getMessage()]
        assert refused == 0, (
            f"the name server refused {refused} plaintext connection(s) at broker shutdown: {plaintext}"
        )


async def test_a_stalled_tls_handshake_is_closed_after_nettys_ten_seconds(
    autojump_clock: trio.testing.MockClock,
) -> None:
    assert TLS_HANDSHAKE_TIMEOUT == 10.0
    dispatcher = Dispatcher()
    dispatcher.register(1000, EchoProcessor(), ProcessorPool("echo", 2, 100))
    settings = TlsSettings(tls_config_file="/nonexistent/tls.properties")
    server = RemotingServer(
        dispatcher,
        ServerConfig(idle_timeout=120.0, tls_mode=PERMISSIVE, ssl_context=lambda: server_context(settings)),
    )
    async with trio.open_nursery() as nursery:
        host, port = await nursery.start(server.serve, "127.0.0.1", 0)
        stream = await trio.open_tcp_stream(host, port)
        await stream.send_all(b"\x16\x03\x01\x00")  # the start of a ClientHello record, then silence
        started = trio.current_time()
        with trio.move_on_after(200):
            while await stream.receive_some(1024):
                pass
        held = trio.current_time() - started
        await stream.aclose()
        nursery.cancel_scope.cancel()
    assert 9.5 <= held <= 10.5, f"the stalled handshake held its connection for {held:.0f} s (Netty: 10 s)"
    assert server.refused_connections == 1


async def test_a_silent_connection_is_decided_by_the_idle_timeout_and_stalls_no_other(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Permissive: a client that connects and sends nothing holds only its own connection, closed after
    ``serverChannelMaxIdleTimeSeconds`` (120 s), as 4.9.8's NettyRemotingServer pipeline has the IdleStateHandler
    behind the HandshakeHandler from the start; plaintext and TLS clients are served meanwhile."""
    autojump_clock.autojump_threshold = 0.2  # never jump while loopback I/O is in flight
    dispatcher = Dispatcher()
    dispatcher.register(1000, EchoProcessor(), ProcessorPool("echo", 2, 100))
    settings = TlsSettings(tls_config_file="/nonexistent/tls.properties")
    config = ServerConfig(idle_timeout=120.0, tls_mode=PERMISSIVE, ssl_context=lambda: server_context(settings))
    async with trio.open_nursery() as nursery:
        host, port = await nursery.start(RemotingServer(dispatcher, config).serve, "127.0.0.1", 0)
        silent = await trio.open_tcp_stream(host, port)
        started = trio.current_time()
        for ctx in (None, client_context()):
            async with RemotingClient(ssl_context=ctx) as client:
                answer = await client.invoke(f"{host}:{port}", request(1000, {}, b"meanwhile"), 5)
                assert answer.code == ResponseCode.SUCCESS
        with trio.move_on_after(300):
            assert await silent.receive_some(1024) == b""
        held = trio.current_time() - started
        await silent.aclose()
        nursery.cancel_scope.cancel()
    assert 119.5 <= held <= 120.5, f"the silent connection was held {held:.0f} s (Netty's idle handler: 120 s)"


async def test_a_broker_checking_its_name_servers_certificate_does_not_check_the_host_name(tmp_path: Path) -> None:
    """``tls.client.authServer`` with ``tls.client.trustCertPath``: RocketMQ checks the name server's certificate
    chain against the trust file and nothing else (``TlsHelper.buildSslContext(true)``; ``NettyRemotingClient``
    makes its handler with ``sslContext.newHandler(alloc)``, no peer host, so no host name check). Name servers are
    addressed by IP, and certificates made as RocketMQ's TLS guide makes them carry no IP: the broker must register
    with such a name server, and still refuse one whose certificate another CA signed."""
    ca = trustme.CA()
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))

    def settings(issuer: trustme.CA, name: str) -> dict[str, object]:
        return {
            **host_named_tls_settings(tmp_path, issuer, name, "namesrv.rocketmq.internal"),  # no 127.0.0.1
            "tls_enable": True,
            "tls_client_auth_server": True,
            "tls_client_trust_cert_path": str(ca_file),
        }

    async with EmbeddedCluster(tmp_path / "c", **settings(ca, "trusted")) as cluster:
        assert cluster.namesrv is not None
        assert cluster.namesrv.route_table.live_broker_addrs() == [cluster.broker_addr], (
            "the broker did not register: it refused the name server's certificate for its host name"
        )
    async with EmbeddedCluster(tmp_path / "d", **settings(trustme.CA(), "untrusted")) as cluster:
        assert cluster.namesrv is not None
        assert cluster.namesrv.route_table.live_broker_addrs() == []


async def test_a_tls_config_file_boolean_java_reads_as_false_is_false_not_an_error(tmp_path: Path) -> None:
    """``tls.config.file`` is read by ``TlsHelper.extractTlsConfigFromFile`` with ``Boolean.parseBoolean``: any value
    but ``true`` (any case) is false, never an error. ``tls.test.mode.enable=no`` turns test mode off, so the
    certificate files serve; ours refused the file, so no TLS context could be built (every TLS connection closed)
    and the broker's context towards its name servers raised."""
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    cert_path, key_path, ca_path = tmp_path / "server.pem", tmp_path / "server.key", tmp_path / "ca.pem"
    cert.cert_chain_pems[0].write_to_path(str(cert_path))
    cert.private_key_pem.write_to_path(str(key_path))
    ca.cert_pem.write_to_path(str(ca_path))
    props = tmp_path / "tls.properties"
    props.write_text(
        f"tls.test.mode.enable=no\ntls.server.certPath={cert_path}\ntls.server.keyPath={key_path}\n"
        "tls.client.authServer=yes\n"
    )
    settings = TlsSettings(tls_config_file=str(props), tls_enable=True)
    ctx = settings_client_context(settings, use_tls=True)
    assert ctx is not None and ctx.verify_mode == ssl.CERT_NONE  # authServer "yes" is false: the server unchecked
    dispatcher = Dispatcher()
    dispatcher.register(1000, EchoProcessor(), ProcessorPool("echo", 2, 100))
    server = RemotingServer(dispatcher, ServerConfig(tls_mode=PERMISSIVE, ssl_context=lambda: server_context(settings)))
    async with trio.open_nursery() as nursery:
        host, port = await nursery.start(server.serve, "127.0.0.1", 0)
        async with RemotingClient(ssl_context=client_context(str(ca_path))) as client:  # the file's certificate
            answer = await client.invoke(f"{host}:{port}", request(1000, {"k": "v"}, b"x"), 5)
            assert answer.code == ResponseCode.SUCCESS
        nursery.cancel_scope.cancel()


def test_a_tls_config_file_boolean_with_a_trailing_blank_is_false_as_java_reads_it(tmp_path: Path) -> None:
    """``Properties.load`` keeps a value's trailing blanks and ``Boolean.parseBoolean("true ")`` is false
    (``TlsHelper.extractTlsConfigFromFile``): ``tls.client.authServer=true `` leaves the server unchecked in RocketMQ.
    Ours stripped the value first and checked the server against the trust file (found by a review)."""
    ca = trustme.CA()
    ca_path = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_path))
    props = tmp_path / "tls.properties"
    props.write_text(f"tls.test.mode.enable=false\ntls.client.authServer=true \ntls.client.trustCertPath={ca_path}\n")
    ctx = settings_client_context(TlsSettings(tls_config_file=str(props)), use_tls=True)
    assert ctx is not None and ctx.verify_mode == ssl.CERT_NONE


async def _register_with_a_plaintext_namesrv(
    tmp_path: Path, written: str, tls_config: str | None = None
) -> RemotingCommand | None:
    """A request from the name-server client a broker built from a broker.conf of ``written`` (its TLS config file
    ``tls_config``, or absent) to a name server whose TLS is disabled: the answer, or None when the connection failed
    (the client went over TLS and the name server closed it)."""
    tls_file = tmp_path / "tls.properties"
    if tls_config is not None:
        tls_file.write_text(tls_config)
    conf = tmp_path / "broker.conf"
    conf.write_text(f"{written}tls.config.file={tls_file}\n")
    config = build_config(str(conf), [], "127.0.0.1:9876")
    dispatcher = Dispatcher()
    dispatcher.register(1000, EchoProcessor(), ProcessorPool("echo", 2, 100))
    namesrv = RemotingServer(dispatcher, ServerConfig(tls_mode=DISABLED))
    answer: RemotingCommand | None = None
    async with trio.open_nursery() as nursery:
        host, port = await nursery.start(namesrv.serve, "127.0.0.1", 0)
        async with RemotingClient(ssl_context=namesrv_client_context(config), connect_timeout=5) as client:
            with contextlib.suppress(RemotingConnectError):
                answer = await client.invoke(f"{host}:{port}", request(1000, {}, b"register"), 5)
        nursery.cancel_scope.cancel()
    return answer


@pytest.mark.parametrize(("written", "over_tls"), [("", True), ("tls.enable=false\n", False)], ids=["unset", "false"])
async def test_an_enforcing_broker_reaches_its_name_servers_in_plaintext_when_tls_enable_is_false(
    tmp_path: Path, written: str, over_tls: bool
) -> None:
    """RocketMQ's ``BrokerStartup`` (broker/src/main/java/org/apache/rocketmq/broker/BrokerStartup.java) sets the
    name-server client's ``useTLS`` to ``tls.enable``, defaulting to whether the broker's own mode is enforcing: an
    enforcing broker told ``tls.enable=false`` registers in plaintext (with a name server whose TLS is disabled).
    Ours went over TLS whatever ``tls.enable`` said."""
    answer = await _register_with_a_plaintext_namesrv(tmp_path, f"tls.server.mode=enforcing\n{written}")
    # Without tls.enable the enforcing broker uses TLS, which a name server with TLS disabled closes.
    assert (answer is None) is over_tls
    assert answer is None or answer.code == ResponseCode.SUCCESS


@pytest.mark.parametrize(
    "written",
    ["tls.server.mode=enforcing\nuseTLS=false\n", "tls.enable=true\nuseTLS=false\n"],
    ids=["enforcing", "tls-enable"],
)
async def test_an_explicit_use_tls_false_in_broker_conf_registers_in_plaintext(tmp_path: Path, written: str) -> None:
    """BrokerStartup (broker/src/main/java/org/apache/rocketmq/broker/BrokerStartup.java) first sets the client's
    ``useTLS`` from ``tls.enable`` / the enforcing mode, then applies broker.conf to NettyClientConfig
    (MixAll.properties2Object): an explicit ``useTLS=false`` there wins, and the broker reaches a name server whose
    TLS is disabled in plaintext. Ours read ``useTLS=false`` as "not set" and went over TLS, which that name server
    closes."""
    answer = await _register_with_a_plaintext_namesrv(tmp_path, written)
    assert answer is not None and answer.code == ResponseCode.SUCCESS


@pytest.mark.parametrize("missing", ["tls_client_cert_path", "tls_client_key_path"])
async def test_an_unreadable_client_certificate_file_logs_and_registers_in_plaintext_as_rocketmq(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, missing: str
) -> None:
    """``TlsHelper.buildSslContext(true)`` opens ``tls.client.certPath`` / ``keyPath`` with ``FileInputStream``: a
    file it cannot open throws an IOException, which ``NettyRemotingClient``'s constructor
    (remoting/src/main/java/org/apache/rocketmq/remoting/netty/NettyRemotingClient.java) logs ("Failed to create
    SSLContext") and goes on with no SSL context, so the broker starts and its connections go without TLS ("Connections
    are insecure as SSLContext is null!"). Ours failed the broker's start with FileNotFoundError."""
    ca = trustme.CA()
    settings = host_named_tls_settings(tmp_path, ca, "namesrv", "127.0.0.1")
    client = ca.issue_cert("broker")
    cert_path, key_path = tmp_path / "client.pem", tmp_path / "client.key"
    client.cert_chain_pems[0].write_to_path(str(cert_path))
    client.private_key_pem.write_to_path(str(key_path))
    paths = {"tls_client_cert_path": str(cert_path), "tls_client_key_path": str(key_path)}
    paths[missing] = str(tmp_path / "missing.pem")
    overrides = {**settings, "tls_server_mode": PERMISSIVE, "tls_enable": True, **paths}
    caplog.set_level(logging.WARNING)
    async with EmbeddedCluster(tmp_path / "c", **overrides) as cluster:
        assert cluster.namesrv is not None
        assert cluster.namesrv.route_table.live_broker_addrs() == [cluster.broker_addr]
    assert any("SSLContext" in r.getMessage() and r.levelno == logging.ERROR for r in caplog.records)


@pytest.mark.parametrize(
    ("written", "in_file", "over_tls"),
    [
        ("", "tls.enable=true\ntls.server.mode=enforcing\n", False),
        ("tls.server.mode=enforcing\n", "tls.enable=false\n", True),
        ("useTLS=true\n", "tls.enable=false\n", True),
        ("tls.enable=true\nuseTLS=false\n", "tls.enable=true\n", False),
        ("tls.enable=false\n", "tls.enable=true\n", False),
    ],
    ids=["file-only", "enforcing", "use-tls-true", "use-tls-false", "tls-enable-false"],
)
async def test_use_tls_in_broker_conf_and_tls_enable_in_the_tls_config_file_interplay_as_rocketmq(
    tmp_path: Path, written: str, in_file: str, over_tls: bool
) -> None:
    """The broker's name-server client goes over TLS as 4.9.8 decides it: ``useTLS`` from broker.conf when set
    (``MixAll.properties2Object`` onto NettyClientConfig in broker/src/main/java/org/apache/rocketmq/broker/
    BrokerStartup.java), else ``tls.enable`` (a JVM system property: ours, a broker setting), else whether the
    broker's own mode is enforcing; ``tls.config.file`` never decides it, as ``TlsHelper.extractTlsConfigFromFile``
    reads neither ``tls.enable`` nor ``tls.server.mode`` from it (remoting/src/main/java/org/apache/rocketmq/remoting/
    netty/TlsHelper.java)."""
    answer = await _register_with_a_plaintext_namesrv(tmp_path, written, in_file)
    assert (answer is None) is over_tls  # a name server with TLS disabled closes a TLS connection
