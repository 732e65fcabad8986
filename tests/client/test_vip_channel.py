"""The client's VIP channel (Java's ``vipChannelEnabled``, :mod:`client.vip`) against a real broker, which also listens
on ``port - 2``: with it on, a send and an admin call reach the broker on that listener, and a heartbeat, a pull and
GET_BROKER_CONFIG its main port, as 4.9.8's MQClientAPIImpl and DefaultMQProducerImpl.sendKernelImpl address them."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from client.admin import Admin
from client.config import ClientConfig
from client.consumer.lite_pull import LitePullConsumer
from client.errors import TopicRouteNotFoundError
from client.hooks import SendMessageContext
from client.instance import FIRST_HEARTBEAT, new_instance
from client.message import Message, SendResult, SendStatus
from client.mqadmin_support import client_config as mqadmin_config
from client.mqadmin_trace import find_traces
from client.producer import Producer
from client.trace import TraceDispatcher, TraceType
from client.vip import VIP_CHANNEL_CODES, VIP_CHANNEL_ENV, broker_vip_channel, vip_address
from remoting.client import RemotingClient
from remoting.codec.bodies.heartbeat import ConsumeFromWhere
from remoting.codec.codes import RequestCode
from remoting.server import RemotingServer
from tests.client.helpers import create_topic, poll_until, wait_until


def _seen_by(server: RemotingServer, remoting: RemotingClient, addr: str) -> bool:
    """The client's connection to ``addr`` is one ``server`` accepted (its peer is the client's end)."""
    conn = remoting.connections.get(addr)
    return conn is not None and any(c.remote_address == conn.local_address for c in server.connections)


def _forget(remoting: RemotingClient, *addrs: str) -> None:
    for addr in addrs:
        remoting.close_connection(addr)


def test_the_vip_address_is_port_minus_2_for_the_codes_java_wraps() -> None:
    assert broker_vip_channel("127.0.0.1:10911") == "127.0.0.1:10909"  # MixAll's own test
    assert broker_vip_channel("[::1]:10911") == "[::1]:10909"
    assert vip_address("h:10911", RequestCode.SEND_MESSAGE_V2) == "h:10909"
    assert vip_address("h:10911", RequestCode.GET_BROKER_RUNTIME_INFO) == "h:10909"
    for code in (RequestCode.PULL_MESSAGE, RequestCode.HEART_BEAT, RequestCode.UNREGISTER_CLIENT,
                 RequestCode.END_TRANSACTION, RequestCode.GET_BROKER_CONFIG, RequestCode.POP_MESSAGE,
                 RequestCode.GET_ROUTEINFO_BY_TOPIC):  # fmt: skip
        assert code not in VIP_CHANNEL_CODES
        assert vip_address("h:10911", code) == "h:10911"


def test_the_acl_config_read_of_4_9_7_goes_to_port_minus_2() -> None:
    """GET_BROKER_CLUSTER_ACL_CONFIG (54), gone from 4.9.8, is sent here for rocketmq-dashboard's ACL page; 4.9.7's
    MQClientAPIImpl.getBrokerClusterConfig wraps its address in MixAll.brokerVIPChannel."""
    assert RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG in VIP_CHANNEL_CODES
    assert vip_address("h:10911", RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG) == "h:10909"


def test_the_vip_channel_is_off_unless_the_property_says_true(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(VIP_CHANNEL_ENV, raising=False)
    assert ClientConfig(namesrv_addr="127.0.0.1:9876").vip_channel_enabled is False
    monkeypatch.setenv(VIP_CHANNEL_ENV, "TRUE")
    assert ClientConfig(namesrv_addr="127.0.0.1:9876").vip_channel_enabled is True
    assert mqadmin_config({}, "127.0.0.1:9876").vip_channel_enabled is True  # mqadmin has no option: the property
    monkeypatch.setenv(VIP_CHANNEL_ENV, "yes")
    assert ClientConfig(namesrv_addr="127.0.0.1:9876").vip_channel_enabled is False


async def test_with_the_vip_channel_on_a_send_and_admin_calls_use_port_minus_2(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    cluster, controller = embedded_cluster, embedded_cluster.controller
    main, vip = cluster.broker_addr, broker_vip_channel(cluster.broker_addr)
    assert controller.fast_address is not None and controller.fast_address[1] == int(vip.rsplit(":", 1)[1])
    await create_topic(cluster.namesrv_addr, "Vip", queues=1)
    config = ClientConfig(namesrv_addr=cluster.namesrv_addr, vip_channel_enabled=True)
    async with Producer("pg-vip", config=config) as producer:
        remoting = producer.instance.remoting
        sent = await producer.send(Message("Vip", b"through the VIP port"))
        assert sent.send_status is SendStatus.SEND_OK
        assert _seen_by(controller.fast_server, remoting, vip)
        await trio.sleep(FIRST_HEARTBEAT + 1)  # (virtual time) the first timed heartbeat is done, the next far off
        main_conn, vip_conn = remoting.connections[main], remoting.connections[vip]
        main_seen, vip_seen = main_conn.last_activity, vip_conn.last_activity
        done: list[object] = []  # an async send, both connections live: the frame path declines, the fields path
        producer.send_async(Message("Vip", b"async"), done.append)
        await wait_until(lambda: bool(done))
        assert isinstance(done[0], SendResult) and done[0].send_status is SendStatus.SEND_OK, done
        assert main_conn.last_activity == main_seen and vip_conn.last_activity > vip_seen
        _forget(remoting, vip)
        await producer.send_oneway(Message("Vip", b"oneway"))
        await wait_until(lambda: _seen_by(controller.fast_server, remoting, vip))

        _forget(remoting, main, vip)
        await producer.instance.send_heartbeat_to_all_brokers()  # 4.9.8's sendHearbeat: the main port
        assert _seen_by(controller.remoting_server, remoting, main) and vip not in remoting.connections

    consumer = LitePullConsumer("cg-vip", config=config, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    async with consumer:
        await consumer.subscribe("Vip", "*")
        pulled = await poll_until(consumer, 3)  # the fast port refuses PULL_MESSAGE: pulls go to the main port
        assert sorted(m.body for m in pulled) == [b"async", b"oneway", b"through the VIP port"]
        assert _seen_by(controller.remoting_server, consumer.instance.remoting, main)

    async with Admin(config=config) as admin:
        remoting = admin.instance.remoting
        _forget(remoting, main, vip)
        assert await admin.broker_config(main)  # 4.9.8's getBrokerConfig is not wrapped: the main port
        assert vip not in remoting.connections
        assert (await admin.broker_status(main))["brokerVersion"]  # GET_BROKER_RUNTIME_INFO: wrapped
        assert _seen_by(controller.fast_server, remoting, vip)


async def test_with_the_vip_channel_off_nothing_goes_to_port_minus_2(embedded_cluster: EmbeddedCluster) -> None:
    cluster = embedded_cluster
    await create_topic(cluster.namesrv_addr, "NoVip", queues=1)
    async with Producer("pg-novip", config=ClientConfig(namesrv_addr=cluster.namesrv_addr)) as producer:
        assert (await producer.send(Message("NoVip", b"x"))).send_status is SendStatus.SEND_OK
        remoting = producer.instance.remoting
        assert broker_vip_channel(cluster.broker_addr) not in remoting.connections
        assert _seen_by(cluster.controller.remoting_server, remoting, cluster.broker_addr)


class _Addresses:
    """A send hook that keeps each attempt's ``broker_addr``."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def hook_name(self) -> str:
        return "addresses"

    def send_message_before(self, context: SendMessageContext) -> None:
        self.seen.append((context.communication_mode, context.broker_addr))

    def send_message_after(self, context: SendMessageContext) -> None:
        pass


async def test_with_the_vip_channel_on_send_hooks_and_the_pub_trace_name_port_minus_2(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """4.9.8's sendKernelImpl wraps ``brokerAddr`` in ``MixAll.brokerVIPChannel`` before it builds the hooks'
    SendMessageContext, whose address SendMessageTraceHookImpl writes as the Pub record's storeHost."""
    cluster = embedded_cluster
    vip = broker_vip_channel(cluster.broker_addr)
    await create_topic(cluster.namesrv_addr, "VipHooked", queues=1)
    config = ClientConfig(namesrv_addr=cluster.namesrv_addr, vip_channel_enabled=True)
    hook = _Addresses()
    async with Producer("pg-vip-hooked", config=config, enable_msg_trace=True) as producer:
        producer.register_send_message_hook(hook)
        sent = await producer.send(Message("VipHooked", b"sync"))
        done: list[object] = []
        producer.send_async(Message("VipHooked", b"async"), done.append)
        await wait_until(lambda: bool(done))
        await producer.send_oneway(Message("VipHooked", b"oneway"))
    assert hook.seen == [("SYNC", vip), ("ASYNC", vip), ("ONEWAY", vip)]
    async with Admin(config=ClientConfig(namesrv_addr=cluster.namesrv_addr)) as admin:
        with trio.fail_after(60):
            while True:
                try:
                    pubs = [v.record for v in await find_traces(admin, sent.msg_id, None)]
                except TopicRouteNotFoundError:  # the trace topic is created by its first batch
                    pubs = []
                if pubs:
                    break
                await trio.sleep(0.2)
    assert [(r.type, r.store_host) for r in pubs] == [(TraceType.Pub, vip)]


def test_the_trace_producer_never_uses_the_vip_channel() -> None:
    """4.9.8's AsyncTraceDispatcher.start turns it off for its producer (``setVipChannelEnabled(false)``)."""
    host = new_instance(ClientConfig(namesrv_addr="127.0.0.1:1", vip_channel_enabled=True), None)
    dispatcher = TraceDispatcher(host, "g", "PRODUCE")
    assert dispatcher._trace_config().vip_channel_enabled is False
