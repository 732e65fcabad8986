"""The client instance's plumbing against a real name server and broker (virtual time where a timeout is involved):
a connection that stops answering is dropped after a timed-out call, as RocketMQ's remoting client drops it, so the
next call reconnects instead of waiting on a dead path forever; clients told no name server take NAMESRV_ADDR; clients
built from one config with a default instance name get client ids of their own."""

from __future__ import annotations

import functools
import logging
from pathlib import Path

import pytest
import trio
import trio.testing
import trustme

from broker.embedded import EmbeddedCluster
from client import api
from client.admin import Admin
from client.config import ClientConfig
from client.consumer.listener import ConsumeConcurrentlyStatus
from client.consumer.lite_pull import LitePullConsumer
from client.consumer.pull_service import PULL_FLAG_SUBSCRIPTION, PULL_FLAG_SUSPEND
from client.consumer.push import PushConsumer
from client.errors import ClientStateError, MQBrokerError, TopicRouteNotFoundError
from client.instance import MQClientInstance
from client.message import Message, MessageExt
from client.producer import Producer
from client.transaction import LocalTransactionState, TransactionProducer
from remoting.codec.codes import ResponseCode
from remoting.codec.command import RemotingCommand
from remoting.errors import RemotingError, RemotingTimeoutError
from tests.client.helpers import create_topic
from tests.conftest import SMALL_STORE
from tests.semantics.helpers import use_virtual_store_clock


class FreezableProxy:
    """Forwards every TCP connection to ``target``. :meth:`freeze` stops the connections open now from forwarding
    anything either way (a half-open path: a NAT or firewall entry lost, a peer host gone without a reset); the
    connections made afterwards forward as before."""

    def __init__(self, target: str) -> None:
        host, _, port = target.rpartition(":")
        self.target = (host, int(port))
        self.accepted = 0
        self._frozen_below = 0
        self.addr = ""

    async def start(self, nursery: trio.Nursery) -> str:
        listeners = await nursery.start(functools.partial(trio.serve_tcp, self._serve, 0, host="127.0.0.1"))
        self.addr = f"127.0.0.1:{listeners[0].socket.getsockname()[1]}"
        return self.addr

    def freeze(self) -> None:
        self._frozen_below = self.accepted

    async def _serve(self, client: trio.SocketStream) -> None:
        number = self.accepted
        self.accepted += 1
        upstream = await trio.open_tcp_stream(*self.target)
        async with upstream, trio.open_nursery() as nursery:
            nursery.start_soon(self._pump, client, upstream, number)
            nursery.start_soon(self._pump, upstream, client, number)

    async def _pump(self, source: trio.SocketStream, sink: trio.SocketStream, number: int) -> None:
        try:
            while data := await source.receive_some():
                if number >= self._frozen_below:
                    await sink.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        await sink.aclose()


async def test_a_route_lookup_reconnects_after_a_timeout_on_a_connection_that_went_silent(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """The name server's connection goes half-open: the lookup on it times out (rpc_timeout), and the connection is
    closed then, as NettyRemotingClient.invokeSync closes it on a timeout (``clientCloseSocketIfTimeout``, true by
    default), so the next lookup connects again and gets the route. Before: every later lookup (the 30 s route
    poll) went to the dead connection and timed out too, for as long as TCP kept it."""
    async with trio.open_nursery() as nursery:
        proxy = FreezableProxy(embedded_cluster.namesrv_addr)
        await proxy.start(nursery)
        async with MQClientInstance(ClientConfig(namesrv_addr=proxy.addr)) as instance:
            assert (await instance.query_route("TBW102")).broker_datas
            proxy.freeze()
            with pytest.raises(TopicRouteNotFoundError):
                await instance.query_route("TBW102")
            route = await instance.query_route("TBW102")
            assert route.broker_datas[0].master_addr == embedded_cluster.broker_addr
            assert proxy.accepted == 2
        nursery.cancel_scope.cancel()


async def test_clients_told_no_name_server_take_the_namesrv_addr_environment_variable(
    embedded_cluster: EmbeddedCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Java's ClientConfig takes ``namesrvAddr`` from the NAMESRV_ADDR environment variable when the application sets
    none (NameServerAddressUtils.getNameServerAddresses); an address given explicitly still wins."""
    addr = embedded_cluster.namesrv_addr
    monkeypatch.setenv("NAMESRV_ADDR", f"{addr};")
    assert ClientConfig().namesrv_addr == (addr,)
    async with Producer("pg-env") as producer:
        assert (await producer.send(Message("EnvTopic", b"x"))).broker_name == "broker-a"
    assert PushConsumer("cg-env").instance.config.namesrv_addr == (addr,)
    assert LitePullConsumer("cg-env").instance.config.namesrv_addr == (addr,)
    assert Admin().instance.config.namesrv_addr == (addr,)
    assert Admin(config=ClientConfig(client_ip="10.0.0.1")).instance.config.namesrv_addr == (addr,)
    assert Producer("pg-env", "10.0.0.1:9876").instance.config.namesrv_addr == ("10.0.0.1:9876",)
    assert Producer("pg-env", config=ClientConfig(namesrv_addr="10.0.0.2:9876")).instance.config.namesrv_addr == (
        "10.0.0.2:9876",
    )


async def _consumed(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
    return ConsumeConcurrentlyStatus.CONSUME_SUCCESS


async def test_a_producer_and_a_consumer_built_from_one_config_get_instances_of_their_own(
    embedded_cluster: EmbeddedCluster,
) -> None:
    """A config whose instance name was left to its default gives every client built from it an instance name of
    its own, as Java's clients turn ``DEFAULT`` into ``pid#nanoTime`` each (ClientConfig.changeInstanceNameToPID):
    a producer and a consumer sharing one config (its credentials, say) both start. Before: the second to start raised
    ClientStateError, its client id taken by the first."""
    config = ClientConfig(namesrv_addr=embedded_cluster.namesrv_addr)
    consumer = PushConsumer("cg-shared-config", config=config)
    consumer.subscribe("SharedConfig")
    consumer.register_message_listener(_consumed)
    async with Producer("pg-shared-config", config=config) as producer, consumer:
        assert await producer.send(Message("SharedConfig", b"x"))
        assert producer.instance.client_id != consumer.instance.client_id
    named = ClientConfig(namesrv_addr=embedded_cluster.namesrv_addr, instance_name="chosen")
    assert Producer("pg-named", config=named).instance.client_id == named.client_id  # a chosen name is kept


async def test_a_callback_call_that_times_out_before_its_connection_opened_leaves_it_open(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """Callback calls (a push consumer's pulls, async sends) never close their connection on a timeout, as
    NettyRemotingClient.invokeAsync leaves the channel open (only invokeSync closes it): also those issued before the
    connection opened, which wait for it in a task. Two long-polling pulls issued at once on a new connection: the
    first times out while the broker holds it, and the second still gets the broker's answer. Before: the first's
    timeout closed the connection and failed the second with it."""
    await create_topic(embedded_cluster.namesrv_addr, "CallbackTimeout", queues=1)
    addr = embedded_cluster.broker_addr

    def pull(suspend_ms: int) -> RemotingCommand:
        return api.pull_request(
            {
                "consumerGroup": "cg-callback-timeout",
                "topic": "CallbackTimeout",
                "queueId": "0",
                "queueOffset": "0",
                "maxMsgNums": "32",
                "sysFlag": str(PULL_FLAG_SUSPEND | PULL_FLAG_SUBSCRIPTION),
                "commitOffset": "0",
                "suspendTimeoutMillis": str(suspend_ms),
                "subVersion": "0",
                "subscription": "*",
                "expressionType": "TAG",
            }
        )

    outcomes: dict[str, RemotingCommand | RemotingError] = {}
    async with MQClientInstance(ClientConfig(namesrv_addr=embedded_cluster.namesrv_addr)) as instance:
        assert addr not in instance.remoting._connections  # both wait for the connection in a task
        instance.remoting.invoke_callback(addr, pull(20_000), 2.0, functools.partial(outcomes.__setitem__, "short"))
        instance.remoting.invoke_callback(addr, pull(5_000), 30.0, functools.partial(outcomes.__setitem__, "long"))
        await trio.sleep(10)
        assert isinstance(outcomes["short"], RemotingTimeoutError)
        answer = outcomes["long"]
        assert isinstance(answer, RemotingCommand), answer  # the broker's answer, not the connection's failure
        assert answer.code == ResponseCode.PULL_NOT_FOUND
        assert not instance.remoting._connections[addr].closed


async def test_every_started_instance_heartbeats_its_inner_producer_group(embedded_cluster: EmbeddedCluster) -> None:
    """Java's MQClientInstance.start starts the instance's own DefaultMQProducer of group ``CLIENT_INNER_PRODUCER``,
    which registers in its producer table, so every heartbeat (prepareHeartbeatData) lists that group among its
    producers, a consumer-only client's too: the broker's producer table, and ``mqadmin producerConnection -g
    CLIENT_INNER_PRODUCER``, show every client. Before: our heartbeat listed only the application's groups. The group
    is taken on every instance, so an application producer cannot claim it (Java's registerProducer refuses it)."""
    ns = embedded_cluster.namesrv_addr
    await create_topic(ns, "InnerProducer", queues=1)
    consumer = PushConsumer("cg-inner-producer", ns)
    consumer.subscribe("InnerProducer")
    consumer.register_message_listener(_consumed)
    async with Producer("pg-inner-producer", ns) as producer, consumer, Admin(ns) as admin:
        await producer.send(Message("InnerProducer", b"x"))
        inner = await admin.producer_connection("CLIENT_INNER_PRODUCER", "InnerProducer")
        assert {c.client_id for c in inner.connection_set} == {producer.instance.client_id, consumer.instance.client_id}
        own = await admin.producer_connection("pg-inner-producer", "InnerProducer")
        assert {c.client_id for c in own.connection_set} == {producer.instance.client_id}
        with pytest.raises(ClientStateError):
            async with Producer("CLIENT_INNER_PRODUCER", instance=producer.instance):
                pass


async def test_a_stopped_instance_unregisters_its_inner_producer_group(embedded_cluster: EmbeddedCluster) -> None:
    """Java's MQClientInstance.shutdown shuts its inner producer down, whose DefaultMQProducerImpl.shutdown sends
    UNREGISTER_CLIENT for ``CLIENT_INNER_PRODUCER`` to every broker of the address table, as it does for an
    application's group: once the last member unregistered, the broker's ProducerManager drops the group and
    ``mqadmin producerConnection -g CLIENT_INNER_PRODUCER`` answers "not exist". Before: only the application's
    groups were unregistered, so the broker kept the inner group (empty, once the connections closed) forever."""
    ns = embedded_cluster.namesrv_addr
    await create_topic(ns, "InnerBye", queues=1)
    consumer = PushConsumer("cg-inner-bye", ns)
    consumer.subscribe("InnerBye")
    consumer.register_message_listener(_consumed)
    async with Producer("pg-inner-bye", ns) as producer, consumer, Admin(ns) as admin:
        await producer.send(Message("InnerBye", b"x"))
        inner = await admin.producer_connection("CLIENT_INNER_PRODUCER", "InnerBye")
        assert {c.client_id for c in inner.connection_set} == {producer.instance.client_id, consumer.instance.client_id}
    async with Admin(ns) as admin:
        with pytest.raises(MQBrokerError, match="not exist"):  # the application's group: unregistered, gone
            await admin.producer_connection("pg-inner-bye", "InnerBye")
        with pytest.raises(MQBrokerError, match="not exist"):
            await admin.producer_connection("CLIENT_INNER_PRODUCER", "InnerBye")


async def test_a_restarted_transaction_producer_gets_the_check_back_of_its_groups_half_message_before_any_send(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """Java's every client instance starts its inner producer, whose ``DefaultMQProducerImpl.start`` puts TBW102 (the
    create-topic key) in its publish table, so ``MQClientInstance.updateTopicRouteInfoFromNameServer`` reads TBW102's
    route 10 ms after the start and ``sendHeartbeatToAllBroker`` registers the instance's groups on every broker it
    names (client/src/main/java/org/apache/rocketmq/client/impl/factory/MQClientInstance.java). A transactional
    producer restarted after its half message was left unknown is thus registered before it sends anything, and the
    broker's check-back (CHECK_TRANSACTION_STATE goes to a channel of the group) reaches it. Before: ours heartbeated
    only the brokers of the topics its clients had used, none yet, so the check found no producer of the group."""
    use_virtual_store_clock(embedded_cluster)  # the check service ages half messages on the store clock
    ns = embedded_cluster.namesrv_addr
    await create_topic(ns, "TxRestart", queues=1)
    assert await _check_backs_after_a_restart(ns, "pg-tx-restart", "TxRestart") == [b"left unknown"]


async def _check_backs_after_a_restart(
    ns: str, group: str, topic: str, create_topic_key: str = "TBW102"
) -> list[bytes]:
    """A transactional producer of ``group`` leaves a half message of ``topic`` unknown and stops; the application
    comes back with nothing to send yet. Returns the bodies the broker's check-backs asked the second producer about
    within two of its 60 s check rounds."""
    checks: list[bytes] = []

    async def execute(msg: Message, arg: object) -> LocalTransactionState:
        return LocalTransactionState.UNKNOWN

    async def check(msg: MessageExt) -> LocalTransactionState:
        checks.append(msg.body)
        return LocalTransactionState.COMMIT_MESSAGE

    def producer() -> TransactionProducer:
        return TransactionProducer(
            group,
            ns,
            execute_local_transaction=execute,
            check_local_transaction=check,
            create_topic_key=create_topic_key,
        )

    async with producer() as before:
        await before.send_message_in_transaction(Message(topic, b"left unknown"))
    async with producer():
        with trio.move_on_after(2 * 60):
            while not checks:
                await trio.sleep(1)
    return checks


@pytest.mark.parametrize("missing", ["tls_cert_file", "tls_key_file"])
async def test_a_client_whose_certificate_file_is_missing_logs_it_and_goes_on_in_plaintext_as_java(
    embedded_cluster: EmbeddedCluster, tmp_path: Path, caplog: pytest.LogCaptureFixture, missing: str
) -> None:
    """Java's ``TlsHelper.buildSslContext(true)`` opens the client certificate and key with ``FileInputStream``; the
    IOException of a file it cannot open is logged by ``NettyRemotingClient``'s constructor ("Failed to create
    SSLContext", remoting/src/main/java/org/apache/rocketmq/remoting/netty/NettyRemotingClient.java), which goes on
    without an SSL context: its connections are plaintext, which a permissive broker serves, as the broker's own
    client does (``remoting.tls.settings_client_context``). Before: the client's start raised FileNotFoundError."""
    client = trustme.CA().issue_cert("client")
    files = {"tls_cert_file": tmp_path / "client.pem", "tls_key_file": tmp_path / "client.key"}
    client.cert_chain_pems[0].write_to_path(str(files["tls_cert_file"]))
    client.private_key_pem.write_to_path(str(files["tls_key_file"]))
    files[missing] = tmp_path / "missing.pem"
    config = ClientConfig(namesrv_addr=embedded_cluster.namesrv_addr, tls=True, **{k: str(v) for k, v in files.items()})
    await create_topic(embedded_cluster.namesrv_addr, "TlsMissingFile", queues=1)
    caplog.set_level(logging.ERROR)
    async with Producer("pg-tls-missing", config=config) as producer:
        assert (await producer.send(Message("TlsMissingFile", b"plain"))).msg_id
    assert any("Failed to create SSLContext" in r.getMessage() for r in caplog.records if r.levelno == logging.ERROR)


async def test_an_instance_whose_name_server_has_no_tbw102_starts_and_sends_warning_as_java(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """A broker with ``autoCreateTopicEnable=false`` has no TBW102, so the name server answers the route refresh of
    the inner producer's create-topic key with TOPIC_NOT_EXIST: the instance goes on, and each refresh warns as
    Java's ``MQClientAPIImpl.getTopicRouteInfoFromNameServer`` (allowTopicNotExist, which the periodic
    ``MQClientInstance.updateTopicRouteInfoFromNameServer(topic)`` passes) warns "get Topic [TBW102]
    RouteInfoFromNameServer is not exist value" (client/src/main/java/org/apache/rocketmq/client/impl/
    MQClientAPIImpl.java); ``updateTopicRouteInfoFromNameServer`` adds nothing for TBW102. Before: logged at debug
    level only."""
    caplog.set_level(logging.INFO)
    async with EmbeddedCluster(tmp_path / "c", auto_create_topic_enable=False, **SMALL_STORE) as cluster:
        ns = cluster.namesrv_addr
        await create_topic(ns, "NoTbw102", queues=1)
        caplog.clear()  # the helper's admin refreshes TBW102 too
        async with Producer("pg-no-tbw102", ns) as producer:
            await trio.sleep(65)  # the first refresh and two more
            assert "TBW102" not in producer.instance.routes
            assert (await producer.send(Message("NoTbw102", b"x"))).msg_id
    logged = [(r.levelno, r.getMessage()) for r in caplog.records if r.name.startswith("client.")]
    warning = (logging.WARNING, "get Topic [TBW102] RouteInfoFromNameServer is not exist value")
    assert logged == [warning] * 3


async def test_a_route_refresh_warns_of_a_subscribed_topic_the_name_servers_do_not_have(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """A consumer subscribed to a topic no name server has (a typo, a topic deleted): every periodic refresh warns,
    as Java's ``MQClientAPIImpl.getTopicRouteInfoFromNameServer`` ("get Topic [...] RouteInfoFromNameServer is not
    exist value") and then ``MQClientInstance.updateTopicRouteInfoFromNameServer`` ("updateTopicRouteInfoFromNameServer
    Exception", for any topic but TBW102 and retry topics) warn
    (client/src/main/java/org/apache/rocketmq/client/impl/factory/MQClientInstance.java). Before: debug level only, so
    the application saw nothing and consumed nothing."""
    consumer = PushConsumer("cg-missing-topic", embedded_cluster.namesrv_addr)
    consumer.subscribe("NoSuchTopicHere")
    consumer.register_message_listener(lambda msgs: ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
    async with consumer:
        caplog.set_level(logging.INFO)
        await trio.sleep(31)  # one periodic refresh
    warnings = [r.getMessage() for r in caplog.records if r.name.startswith("client.") and r.levelno == logging.WARNING]
    assert "get Topic [NoSuchTopicHere] RouteInfoFromNameServer is not exist value" in warnings
    assert any(w.startswith("updateTopicRouteInfoFromNameServer Exception") for w in warnings)
    assert not any("%RETRY%" in w or "TBW102" in w for w in warnings if w.startswith("updateTopic"))


async def test_a_client_whose_ca_file_and_certificate_file_are_missing_fails_to_start_as_java(tmp_path: Path) -> None:
    """Java's ``TlsHelper.buildSslContext(true)`` loads the trust file (``SslContextBuilder.trustManager(File)``,
    whose failure is an IllegalArgumentException ``NettyRemotingClient``'s constructor does not catch) before it opens
    the client certificate and key (remoting/src/main/java/org/apache/rocketmq/remoting/netty/TlsHelper.java): a
    client told to check its servers against a CA file it cannot read fails, whatever its certificate files. Before:
    the missing certificate was seen first and the client went on in plaintext, its servers unchecked."""
    config = ClientConfig(
        namesrv_addr="127.0.0.1:1",
        tls=True,
        tls_ca_file=str(tmp_path / "missing-ca.pem"),
        tls_cert_file=str(tmp_path / "missing-client.pem"),
        tls_key_file=str(tmp_path / "missing-client.key"),
    )
    with pytest.raises(FileNotFoundError):
        async with Producer("pg-tls-missing-ca", config=config):
            pass


async def test_a_restarted_transaction_producer_with_its_own_create_topic_key_gets_its_check_back(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Every Java producer's ``DefaultMQProducerImpl.start`` puts its own ``createTopicKey`` in its publish table
    (client/src/main/java/org/apache/rocketmq/client/impl/producer/DefaultMQProducerImpl.java), so the instance's
    route refresh reads that key's route and heartbeats its brokers from the start, not only TBW102's: with brokers
    that auto-create nothing (no TBW102) and a template topic as the producers' create-topic key, a transactional
    producer restarted with a half message left unknown is registered and gets its check-back before it sends
    anything. Before: only TBW102 was added, so the restarted producer heartbeated no broker."""
    async with EmbeddedCluster(tmp_path / "c", auto_create_topic_enable=False, **SMALL_STORE) as cluster:
        use_virtual_store_clock(cluster)
        ns = cluster.namesrv_addr
        await create_topic(ns, "TxKeyTemplate", queues=1)
        await create_topic(ns, "TxOwnKey", queues=1)
        checks = await _check_backs_after_a_restart(ns, "pg-tx-own-key", "TxOwnKey", create_topic_key="TxKeyTemplate")
        assert checks == [b"left unknown"]


async def test_a_client_given_a_ca_file_but_not_tls_connects_in_plaintext_as_java(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Java's client connects with TLS only when ``useTLS`` is true (``ClientConfig.useTLS``, copied to
    ``NettyClientConfig``; ``NettyRemotingClient`` builds its SSL context only then,
    remoting/src/main/java/org/apache/rocketmq/remoting/netty/NettyRemotingClient.java): trust and certificate files
    (``tls.client.*``) alone change nothing. Against a cluster whose ``tls.server.mode`` is disabled (a TLS handshake
    is closed) such a client works, in plaintext. Before: a CA or certificate file alone turned TLS on, and every
    request was refused."""
    ca = trustme.CA()
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    async with EmbeddedCluster(tmp_path / "c", tls_server_mode="disabled", **SMALL_STORE) as cluster:
        config = ClientConfig(namesrv_addr=cluster.namesrv_addr, tls_ca_file=str(ca_file))
        async with Admin(config=config) as admin:
            await admin.create_topic("PlainWithCa", read_queue_nums=1, write_queue_nums=1)
        await create_topic(cluster.namesrv_addr, "PlainWithCa", queues=1)
        async with Producer("pg-plain-with-ca", config=config) as producer:
            assert (await producer.send(Message("PlainWithCa", b"plain"))).msg_id


async def test_tls_enable_in_the_environment_turns_tls_on_by_default_as_the_java_system_property(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Java's ``ClientConfig.useTLS`` defaults to ``TlsSystemConfig.tlsEnable``, the system property ``tls.enable``
    (client/src/main/java/org/apache/rocketmq/client/ClientConfig.java,
    remoting/src/main/java/org/apache/rocketmq/remoting/netty/TlsSystemConfig.java): ``-Dtls.enable=true`` puts every
    client of the process on TLS without a code change. Ours reads it as ``TLS_ENABLE`` (the client's system
    properties are environment variables here); ``tls=False`` given explicitly still wins. Before: it was ignored and
    the client talked plaintext to an enforcing cluster, which closed every connection."""
    overrides = {"tls_server_mode": "enforcing", "tls_config_file": str(tmp_path / "none"), **SMALL_STORE}
    async with EmbeddedCluster(tmp_path / "c", **overrides) as cluster:
        monkeypatch.setenv("TLS_ENABLE", "true")
        config = ClientConfig(namesrv_addr=cluster.namesrv_addr)
        assert config.tls
        assert not ClientConfig(namesrv_addr=cluster.namesrv_addr, tls=False).tls
        async with Admin(config=config) as admin:
            await admin.create_topic("TlsFromEnv", read_queue_nums=1, write_queue_nums=1)
        async with Producer("pg-tls-from-env", config=config) as producer:
            assert (await producer.send(Message("TlsFromEnv", b"over tls"))).msg_id
