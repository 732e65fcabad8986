"""Faults of the JSON endpoints and the chart sampler found by reviews, over real sockets on the embedded cluster:
out-of-range ports, cross-site ``text/plain`` posts, resends to foreign hosts, skipped backlogs charted as
consumption, registered masters that do not answer or whose replies do not decode (pages, offline resets, message
tracks, key searches), and a text or null ``order`` flag. Each fault's test failed before its fix; the pulled-messages
test keeps the get rate's meaning."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
import trio

from broker.embedded import EmbeddedCluster
from client import ConsumeConcurrentlyStatus, ConsumeFromWhere, Message, MessageExt, Producer, PushConsumer, api
from remoting.client import RemotingClient
from remoting.codec.bodies import MessageQueue
from remoting.codec.codes import ResponseCode
from remoting.codec.command import RemotingCommand
from remoting.dispatch import Dispatcher, ProcessorPool
from remoting.processor import RequestContext
from remoting.server import RemotingServer
from store.metadata_files import SubscriptionGroupConfig
from tests.client.helpers import HANG_GUARD, create_topic, wait_until
from tests.client.test_master_watch import register_as_master
from tests.dashboard.conftest import Dash, open_dash

CROSS_SITE = {"Content-Type": "text/plain", "Origin": "http://evil.example"}


@pytest.fixture
async def dash(embedded_cluster: EmbeddedCluster, nursery: trio.Nursery) -> AsyncIterator[Dash]:
    """The dashboard with the VIP channel off: the fake masters here serve one port, not ``port - 2`` too."""
    async for d in open_dash(embedded_cluster, nursery, is_vip_channel=False):
        yield d


async def test_a_broker_address_with_an_out_of_range_port_is_a_json_error_not_a_500(dash: Dash) -> None:
    """A port past 65535 is a malformed address (as ``notanaddr`` is), answered as JSON, not an OverflowError."""
    response = await dash.http.get("/api/broker?addr=127.0.0.1:99999")
    assert response.status_code == 502 and "port 0-65535" in response.json()["error"]["message"], response.text
    created = await dash.http.post("/api/topics", json={"topic": "PortTopic", "brokerAddr": "127.0.0.1:70000"})
    assert created.status_code == 502 and "port 0-65535" in created.json()["error"]["message"], created.text


@pytest.mark.parametrize(
    ("url", "body"),
    [
        ("/api/topics", b'{"topic": "CsrfTopic"}'),
        ("/api/topic/message", b'{"topic": "CsrfSendTopic", "body": "forged"}'),
        ("/api/group/reset", b'{"group": "g", "topic": "CsrfSendTopic", "timestamp": -1}'),
        ("/api/message/resend", b'{"group": "g", "offsetMsgId": "x"}'),
        ("/api/login", b'{"username": "admin", "password": "x"}'),
    ],
)
async def test_a_body_that_is_not_application_json_is_refused_with_415(dash: Dash, url: str, body: bytes) -> None:
    """What an HTML form or a no-preflight fetch on any site can send (a "simple" cross-origin request) changes
    nothing: every endpoint reading a body wants ``application/json``, as rocketmq-dashboard's ``@RequestBody``."""
    await create_topic(dash.cluster.namesrv_addr, "CsrfSendTopic", queues=1)
    response = await dash.http.post(url, content=body, headers=CROSS_SITE)
    assert response.status_code == 415 and "application/json" in response.json()["error"]["message"], response.text
    assert "CsrfTopic" not in await dash.admin.topic_list()
    typed = await dash.http.post(url, content=body, headers={"Content-Type": "application/json; charset=utf-8"})
    assert typed.status_code != 415


async def test_skipping_a_backlog_is_not_charted_as_consumption(dash: Dash) -> None:
    """Moving a group's offsets to the end pulls nothing, so the chart's get rate stays 0: it is the broker's
    GROUP_GET_NUMS (messages pulled), not the growth of committed offsets."""
    await create_topic(dash.cluster.namesrv_addr, "SkipTopic", queues=2)
    await dash.admin.create_subscription_group(SubscriptionGroupConfig("skip-cg"))  # a group that never pulls
    remoting, addr = dash.admin.instance.remoting, dash.cluster.broker_addr
    for queue_id in range(2):  # offline, at the start: what the reset finds
        await api.update_consumer_offset(
            remoting, addr, "skip-cg", MessageQueue("SkipTopic", "broker-a", queue_id), 0, 3
        )
    async with Producer("skip-pg", dash.cluster.namesrv_addr) as producer:
        for i in range(40):  # the backlog, never consumed
            await producer.send(Message("SkipTopic", f"m{i}".encode()))
    sampler = dash.app.state.sampler
    await sampler.sample_once()  # the baseline
    reset = await dash.post("/api/group/reset", {"group": "skip-cg", "topic": "SkipTopic", "timestamp": -1})
    assert reset["way"].startswith("offsets committed")
    await sampler.sample_once()
    series = (await dash.get("/api/charts/topics?topic=SkipTopic"))["series"]
    assert series["get"] == [0.0] and series["put"][0] == 0.0, series


async def test_messages_pulled_are_charted_as_the_get_rate(dash: Dash) -> None:
    namesrv = dash.cluster.namesrv_addr
    await create_topic(namesrv, "PulledTopic", queues=1)
    received: list[MessageExt] = []

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        received.extend(msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    sampler = dash.app.state.sampler
    await sampler.sample_once()
    consumer = PushConsumer("pulled-cg", namesrv, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    consumer.subscribe("PulledTopic", "*")
    consumer.register_message_listener(listener)
    async with consumer, Producer("pulled-pg", namesrv) as producer:
        for i in range(5):
            await producer.send(Message("PulledTopic", f"m{i}".encode()))
        await wait_until(lambda: len(received) == 5)
        for item in dash.cluster.controller.context.stats.sets["GROUP_GET_NUMS"]:
            item.sample_seconds(int(trio.current_time() * 1000))  # the broker's 10-second sampling, now
        await sampler.sample_once()
    series = (await dash.get("/api/charts/topics?topic=PulledTopic"))["series"]
    assert series["get"][-1] > 0, series


async def test_resend_does_not_contact_the_host_a_foreign_offset_msg_id_names(dash: Dash) -> None:
    """As the message lookup, a resend follows an offset msgId only to a broker of this cluster: another host is a
    404 and is never dialled."""
    contacted: list[object] = []
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]

    async def handler(stream: trio.SocketStream) -> None:
        contacted.append(stream.socket.getpeername())
        await stream.aclose()

    async with trio.open_nursery() as nursery:
        await nursery.start(trio.serve_listeners, handler, listeners)
        foreign = "7F000001" + f"{port:08X}" + "0000000000000000"  # 127.0.0.1:<port>: not a broker of this cluster
        body = {"group": "any-cg", "offsetMsgId": foreign, "clientId": "any-client"}
        response = await dash.http.post("/api/message/resend", json=body)
        await anyio.sleep(0.1)
        nursery.cancel_scope.cancel()
    assert contacted == [] and response.status_code == 404, (contacted, response.status_code, response.text)


async def test_the_groups_page_lists_the_live_masters_groups_when_one_master_does_not_answer(dash: Dash) -> None:
    """A registered master that refuses connections failed the whole /api/groups with a 502 (found by a review),
    where the cluster page already lists the other brokers."""
    embedded = dash.cluster.controller.context
    embedded.groups.update(SubscriptionGroupConfig("live-group"))
    embedded.offsets.commit("live-group", "TBW102", 0, 0)
    async with RemotingClient() as client:
        await register_as_master(client, dash.cluster.namesrv_addr, "127.0.0.1:1", "DeadTopic", "broker-dead")
        groups = (await dash.get("/api/groups"))["groups"]
    assert "live-group" in {g["group"] for g in groups}


async def test_the_group_list_names_the_broker_it_could_not_read(dash: Dash) -> None:
    """rocketmq-dashboard's ``makeGroupListCache`` fails the whole list when a broker's
    ``getAllSubscriptionGroup`` throws; ours lists the live brokers' groups (the review above) but passed the dead
    one over in silence, so a group only it holds just vanished. The answer now names it and why."""
    embedded = dash.cluster.controller.context
    embedded.groups.update(SubscriptionGroupConfig("named-live-group"))
    embedded.offsets.commit("named-live-group", "TBW102", 0, 0)
    async with RemotingClient() as client:
        await register_as_master(client, dash.cluster.namesrv_addr, "127.0.0.1:1", "DeadNamedTopic", "broker-dead")
        answer = await dash.get("/api/groups")
    assert "named-live-group" in {g["group"] for g in answer["groups"]}
    [failed] = answer["unreadBrokers"]
    assert failed["broker"] == "broker-dead" and failed["address"] == "127.0.0.1:1" and failed["error"]
    assert (await dash.get("/api/groups"))["unreadBrokers"] == []  # unregistered with the connection


async def test_the_producers_online_are_listed_when_one_master_does_not_answer(dash: Dash) -> None:
    """As the cluster and groups pages, the producers online are what the live masters answer when a registered
    master does not: the dead one is passed over, not a 502 for the page."""
    namesrv = dash.cluster.namesrv_addr
    await create_topic(namesrv, "ProdLiveTopic", queues=1)
    async with Producer("live-pg", namesrv) as producer, RemotingClient() as client:
        await producer.send(Message("ProdLiveTopic", b"x"))
        await register_as_master(client, namesrv, "127.0.0.1:1", "DeadProdTopic", "broker-dead")
        response = await dash.http.get("/api/producers/all")
        assert response.status_code == 200, response.text
        assert "live-pg" in {p["group"] for p in response.json()["producers"]}


async def _commit(dash: Dash, group: str, topic: str, offset: int) -> None:
    """``group``'s offset on ``topic``'s queue 0 of broker-a, as a tool commits it: no ``%RETRY%`` topic is made, so
    the admin client asks every master for the group's stats and connections."""
    mq = MessageQueue(topic, "broker-a", 0)
    await api.update_consumer_offset(dash.admin.instance.remoting, dash.cluster.broker_addr, group, mq, offset, 3)


async def _offline_group_and_a_dead_master(dash: Dash, client: RemotingClient, topic: str, group: str) -> str:
    """``group`` has offsets on ``topic`` (:func:`_commit`) and a second master is registered that does not answer;
    returns a message's id."""
    namesrv = dash.cluster.namesrv_addr
    await create_topic(namesrv, topic, queues=1)
    async with Producer(f"{group}-pg", namesrv) as producer:
        sent = await producer.send(Message(topic, b"x"))
    await _commit(dash, group, topic, 1)
    await register_as_master(client, namesrv, "127.0.0.1:1", f"Dead{topic}", "broker-dead")
    return sent.msg_id


async def test_the_message_page_shows_when_one_master_does_not_answer(dash: Dash) -> None:
    """As rocketmq-dashboard's ``viewMessage`` (whose ``messageTrackDetail`` wrapper gives an empty track on an
    error), the message page shows the message when a registered master does not answer; a group's failed lookup is
    that group's track, never a 502 for the page."""
    async with RemotingClient() as client:
        msg_id = await _offline_group_and_a_dead_master(dash, client, "DeadMasterMsgTopic", "tool-msg-cg")
        response = await dash.http.get(f"/api/message?topic=DeadMasterMsgTopic&id={msg_id}")
    assert response.status_code == 200, response.text
    assert response.json()["msgId"] == msg_id
    [track] = [c for c in response.json()["consumers"] if c["group"] == "tool-msg-cg"]
    assert track["state"] == "NOT_ONLINE", track


async def test_the_topic_page_shows_when_one_master_does_not_answer(dash: Dash) -> None:
    """As rocketmq-dashboard's topic consumer view (``queryConsumeStatsListByTopicName``), a group whose stats fail
    because a master does not answer is listed with the error; the page (route, queues, other groups) still shows."""
    async with RemotingClient() as client:
        await _offline_group_and_a_dead_master(dash, client, "DeadMasterTopic", "tool-cg")
        response = await dash.http.get("/api/topic?topic=DeadMasterTopic")
    assert response.status_code == 200, response.text
    assert [q["queueId"] for q in response.json()["queues"]] == [0]
    [failed] = [c for c in response.json()["consumers"] if c["group"] == "tool-cg"]
    assert failed["diffTotal"] is None and "127.0.0.1:1" in failed["error"], failed


async def test_an_offline_reset_is_not_failed_by_a_master_the_topic_does_not_live_on(dash: Dash) -> None:
    """With no consumer online the reset reads the group's offsets from each broker of the topic's route only, as
    Java's ``resetOffsetByTimestampOld`` (``getConsumeStats(addr, ...)`` per broker of ``topicRouteData``): a
    registered master that does not answer and holds nothing of the topic does not turn the reset into a 502."""
    namesrv = dash.cluster.namesrv_addr
    await create_topic(namesrv, "DeadResetTopic", queues=1)
    async with Producer("dead-reset-pg", namesrv) as producer:
        for i in range(3):
            await producer.send(Message("DeadResetTopic", f"m{i}".encode()))
    await _commit(dash, "dead-reset-cg", "DeadResetTopic", 0)
    async with RemotingClient() as client:
        await register_as_master(client, namesrv, "127.0.0.1:1", "DeadResetOtherTopic", "broker-dead")
        response = await dash.http.post(
            "/api/group/reset", json={"group": "dead-reset-cg", "topic": "DeadResetTopic", "timestamp": -1}
        )
    assert response.status_code == 200, response.text
    assert response.json()["way"].startswith("offsets committed")
    assert [q["offset"] for q in response.json()["offsets"]] == [3], response.json()


async def test_the_order_flag_of_a_new_topic_is_a_boolean_or_its_text(dash: Dash) -> None:
    """``"order": "false"`` creates a topic that is not ordered (Python's ``bool("false")`` is true), and so does
    ``"order": null`` (Jackson's null for rocketmq-dashboard's primitive ``boolean order``); anything but a JSON
    boolean, null or the text true/false is a 400, not a guess."""
    topics = dash.cluster.controller.context.topics
    cases = {"TextFalseTopic": ({"order": "false"}, False), "TextTrueTopic": ({"order": "TRUE"}, True),
             "FlagTopic": ({"order": True}, True), "NoFlagTopic": ({}, False),
             "NullFlagTopic": ({"order": None}, False)}  # fmt: skip
    for topic, (order, ordered) in cases.items():
        await dash.post("/api/topics", {"topic": topic, "clusterNameList": ["DefaultCluster"]} | order)
        config = topics.get(topic)
        assert config is not None and config.order is ordered, (topic, config)
    refused = await dash.post("/api/topics", {"topic": "YesTopic", "order": "yes"}, status=400)
    assert "order must be true or false" in refused["error"]["message"] and topics.get("YesTopic") is None


class _GarbledBroker:
    """Answers every request SUCCESS with a body that is not what was asked for (not JSON)."""

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        return request.response(ResponseCode.SUCCESS, body=b"[not json")


@asynccontextmanager
async def _garbled_master(namesrv: str, topic: str) -> AsyncIterator[str]:
    """A master ``broker-garbled`` of ``topic``, registered while inside, answering as :class:`_GarbledBroker`; its
    address."""
    dispatcher = Dispatcher()
    dispatcher.set_default(_GarbledBroker(), ProcessorPool("admin", 1, 100))
    async with trio.open_nursery() as nursery, RemotingClient() as client:
        host, port = await nursery.start(RemotingServer(dispatcher).serve)
        await register_as_master(client, namesrv, f"{host}:{port}", topic, "broker-garbled")
        yield f"{host}:{port}"
        nursery.cancel_scope.cancel()


async def test_a_master_whose_replies_do_not_decode_is_passed_over_like_a_dead_one(dash: Dash) -> None:
    """A reply that does not decode (a CodecError, a ValueError) failed the whole chart sample, and out of
    ``Sampler.run`` it would end the app's lifespan; such a master is passed over as one that does not answer, and
    an endpoint that meets it answers 502 (a broker's fault), not 400."""
    async with _garbled_master(dash.cluster.namesrv_addr, "GarbledTopic"):
        sampler = dash.app.state.sampler
        await sampler.sample_once()
        assert sampler.samples == 1 and "broker-a:0" in sampler.brokers
        groups = {g["group"]: g for g in (await dash.get("/api/groups"))["groups"]}  # the garbled master skipped
        assert groups["TOOLS_CONSUMER"]["online"] == 0  # its connection lookup met the garbled master
        await dash.get("/api/topic?topic=GarbledTopic", status=502)


async def test_a_group_whose_lookup_meets_a_garbled_master_is_its_own_unknown_track(dash: Dash) -> None:
    """As Java's ``messageTrackDetail`` (``catch (Exception e)`` per group: UNKNOWN with the error), a group whose
    lookup meets a master whose reply does not decode is that group's UNKNOWN track; the other groups' tracks are
    still shown, not an empty track for the whole message."""
    namesrv = dash.cluster.namesrv_addr
    await create_topic(namesrv, "TrackGarbledTopic", queues=1)
    async with Producer("track-garbled-pg", namesrv) as producer:
        sent = await producer.send(Message("TrackGarbledTopic", b"x"))
    await _commit(dash, "healthy-cg", "TrackGarbledTopic", 1)
    await _commit(dash, "garbled-cg", "TrackGarbledTopic", 1)
    # healthy-cg has its %RETRY% topic on broker-a only, so its lookups never reach the garbled master
    await dash.admin.create_topic("%RETRY%healthy-cg", read_queue_nums=1, write_queue_nums=1,
                                  broker_addr=dash.cluster.broker_addr)  # fmt: skip
    with trio.fail_after(HANG_GUARD):  # the broker registered it with the name server
        while "%RETRY%healthy-cg" not in await dash.admin.topic_list():
            await trio.sleep(0.05)
    async with _garbled_master(namesrv, "GarbledTrackTopic"):
        shown = await dash.get(f"/api/message?topic=TrackGarbledTopic&id={sent.msg_id}")
    tracks = {c["group"]: c for c in shown["consumers"]}
    assert set(tracks) == {"healthy-cg", "garbled-cg"}, shown["consumers"]
    assert tracks["healthy-cg"]["state"] == "NOT_ONLINE", tracks
    assert tracks["garbled-cg"]["state"] == "UNKNOWN" and tracks["garbled-cg"]["error"], tracks


async def test_a_key_search_passes_over_a_master_whose_reply_does_not_decode(dash: Dash) -> None:
    """As MQAdminImpl.queryMessage passes over a broker that fails, a master of the topic whose QUERY_MESSAGE reply
    does not decode as records is passed over: the messages the other masters found are shown, not a 502."""
    namesrv = dash.cluster.namesrv_addr
    await create_topic(namesrv, "GarbledKeyTopic", queues=1)
    async with Producer("garbled-key-pg", namesrv) as producer:
        sent = await producer.send(Message("GarbledKeyTopic", b"x", keys="garbled-key"))
    async with _garbled_master(namesrv, "GarbledKeyTopic"):
        found = await dash.get("/api/messages/key?topic=GarbledKeyTopic&key=garbled-key")
    assert [m["msgId"] for m in found["messages"]] == [sent.msg_id], found


async def test_creating_a_topic_in_a_cluster_that_does_not_exist_is_refused(dash: Dash) -> None:
    """A ``cluster`` the name servers do not know created the topic nowhere and answered 200 ``{"brokers": []}``;
    rocketmq-dashboard's ``changeToBrokerNameSet`` fails on it (and ``mqadmin updateTopic -c`` prints "Make sure the
    specified clusterName exists"), so the form's cluster is never silently ignored."""
    response = await dash.http.post("/api/topics", json={"topic": "NoClusterTopic", "cluster": "NoSuchCluster"})
    assert response.status_code == 400 and "NoSuchCluster" in response.json()["error"]["message"], response.text
    assert dash.cluster.controller.context.topics.get("NoClusterTopic") is None
    created = await dash.post("/api/topics", {"topic": "ClusterTopic", "cluster": "DefaultCluster"})
    assert created == {"brokerNames": ["broker-a"], "brokers": [dash.cluster.broker_addr]}


async def test_a_test_message_to_a_topic_that_does_not_exist_does_not_create_it(dash: Dash) -> None:
    """rocketmq-dashboard's ``sendTopicMessageRequest`` reads the topic's config from its route first, so a topic
    that does not exist is an error; the test message was sent through TBW102 and auto-created the topic."""
    response = await dash.http.post("/api/topic/message", json={"topic": "NoSuchSendTopic", "body": "x"})
    assert response.status_code == 502 and "NoSuchSendTopic" in response.json()["error"]["message"], response.text
    assert dash.cluster.controller.context.topics.get("NoSuchSendTopic") is None
    assert "NoSuchSendTopic" not in await dash.admin.topic_list()


@pytest.mark.parametrize(
    ("url", "body"),
    [
        ("/api/topics", b'{"topic": "InfTopic", "readQueueNums": Infinity}'),
        ("/api/group/reset", b'{"group": "g", "topic": "T", "timestamp": -Infinity}'),
    ],
)
async def test_an_infinite_number_is_a_400_not_a_500(dash: Dash, url: str, body: bytes) -> None:
    """A JSON body's ``Infinity`` (which Python's JSON reader accepts) where an integer is wanted raised an
    OverflowError past the error handling: a bare 500 (and a traceback in the log) instead of the 400 naming the
    field that any other non-integer gets."""
    response = await dash.http.post(url, content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 400 and "must be an integer" in response.json()["error"]["message"], response.text


@pytest.mark.parametrize(
    ("method", "url", "body", "field"),
    [
        (
            "POST",
            "/api/group/config",
            {"subscriptionGroupConfig": {"groupName": "g", "retryQueueNums": 2**31}, "brokerNameList": ["broker-a"]},
            "retryQueueNums",
        ),
        (
            "POST",
            "/api/group/config",
            {"subscriptionGroupConfig": {"groupName": "g", "brokerId": 2**63}, "brokerNameList": ["broker-a"]},
            "brokerId",
        ),
        (
            "POST",
            "/api/group/config",
            {"subscriptionGroupConfig": {"groupName": "g", "retryMaxTimes": 10**30}, "brokerNameList": ["broker-a"]},
            "retryMaxTimes",
        ),
        (
            "POST",
            "/api/topics",
            {"topic": "WideTopic", "writeQueueNums": 2**31, "brokerNameList": ["broker-a"]},
            "writeQueueNums",
        ),
        ("POST", "/api/group/reset", {"group": "g", "topic": "T", "timestamp": 10**30}, "timestamp"),
        ("GET", "/api/messages/time?topic=T&begin=0&end=99999999999999999999", None, "end"),
    ],
)
async def test_a_number_past_its_java_type_is_a_400(
    dash: Dash, method: str, url: str, body: dict[str, Any] | None, field: str
) -> None:
    """A number wider than the Java field it fills (``int`` queue counts and retry settings, ``long`` broker ids and
    times) is a 400 naming the field, as rocketmq-dashboard's Jackson and ``@RequestParam long`` refuse it: a group
    setting past 64 bits failed to encode (a bare 500 with a traceback), one past 32 bits was written as it was, and
    the others went to the broker or name server (a 502)."""
    response = await dash.http.request(method, url, json=body)
    assert response.status_code == 400, response.text
    assert field in response.json()["error"]["message"] and "out of range" in response.json()["error"]["message"]
    assert dash.cluster.controller.context.topics.get("WideTopic") is None
