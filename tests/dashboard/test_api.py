"""The JSON endpoints behind the pages, over a real socket against the embedded cluster (no browser)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
import httpx
import pytest
import trio

from broker.embedded import EmbeddedCluster
from client import ConsumeConcurrentlyStatus, ConsumeFromWhere, Message, MessageExt, Producer, PushConsumer, api
from client.config import ClientConfig
from client.errors import TopicRouteNotFoundError
from client.offset_reset import reset_offline
from dashboard import messages
from dashboard.app import create_app
from dashboard.settings import DashboardSettings
from remoting.codec.bodies import MessageQueue
from remoting.codec.bodies.broker_metadata import SubscriptionGroupConfig
from tests.client.helpers import HANG_GUARD, create_topic, runtime_as_5x, wait_until
from tests.conftest import SMALL_STORE
from tests.dashboard.conftest import Dash, open_dash
from tests.dashboard.live import serve_dashboard


async def test_cluster_lists_the_embedded_broker_with_its_figures(dash: Dash) -> None:
    data = await dash.get("/api/cluster")
    [broker] = data["brokers"]
    assert broker["address"] == dash.cluster.broker_addr
    assert (broker["cluster"], broker["brokerName"], broker["brokerId"]) == ("DefaultCluster", "broker-a", 0)
    assert broker["role"] == "ASYNC_MASTER" and broker["version"] == "V4_9_8" and broker["error"] is None
    assert 0 < broker["diskRatio"] <= 1
    assert data["clusters"] == {"DefaultCluster": ["broker-a"]}
    detail = await dash.get(f"/api/broker?addr={dash.cluster.broker_addr}")
    assert detail["config"]["brokerName"] == "broker-a" and "putTps" in detail["runtime"]
    assert (await dash.http.get("/favicon.ico")).status_code == 204  # no 404 in every page's console


async def test_topic_created_listed_detailed_and_deleted(dash: Dash) -> None:
    created = await dash.post(
        "/api/topics",
        {"topic": "DashTopic", "readQueueNums": 3, "writeQueueNums": 3, "clusterNameList": ["DefaultCluster"]},
    )
    assert created == {"brokerNames": ["broker-a"], "brokers": [dash.cluster.broker_addr]}
    await wait_until_routed(dash, "DashTopic")
    topics = {t["topic"]: t["kind"] for t in (await dash.get("/api/topics"))["topics"]}
    assert topics["DashTopic"] == "NORMAL" and topics["TBW102"] == "SYSTEM" and topics["DefaultCluster"] == "SYSTEM"
    assert topics["DefaultCluster_REPLY_TOPIC"] == "SYSTEM"
    assert "DashTopic" in await dash.admin.topic_list()
    detail = await dash.get("/api/topic?topic=DashTopic")
    assert [(r["brokerName"], r["readQueueNums"], r["permText"]) for r in detail["route"]] == [("broker-a", 3, "RW")]
    assert [q["queueId"] for q in detail["queues"]] == [0, 1, 2] and detail["totalMessages"] == 0
    assert await dash.delete("/api/topic?topic=DashTopic") == {"deleted": "DashTopic"}
    assert "DashTopic" not in await dash.admin.topic_list()


async def wait_until_routed(dash: Dash, topic: str) -> None:
    with anyio.fail_after(60):
        while topic not in await dash.admin.topic_list():
            await anyio.sleep(0.02)


async def test_a_refusal_shows_the_brokers_code_and_remark_not_a_stack_trace(dash: Dash) -> None:
    error = (
        await dash.post("/api/topics", {"topic": "bad topic!", "clusterNameList": ["DefaultCluster"]}, status=502)
    )["error"]
    assert error["code"] == 1 and "illegal characters" in error["remark"]
    assert error["address"] == dash.cluster.broker_addr
    missing = (await dash.get("/api/topic?topic=NoSuchTopic", status=502))["error"]
    assert "NoSuchTopic" in missing["message"] and "Traceback" not in missing["message"]
    assert "missing argument 'topic'" in (await dash.get("/api/topic", status=400))["error"]["message"]
    malformed = await dash.http.post("/api/topics", content=b"[1", headers={"Content-Type": "application/json"})
    assert malformed.status_code == 400 and "JSON" in malformed.json()["error"]["message"]
    assert (await dash.post("/api/topics", {"topic": "T", "readQueueNums": "x"}, status=400))["error"]


async def test_a_message_is_found_by_key_time_and_both_ids_with_its_body(dash: Dash) -> None:
    await create_topic(dash.cluster.namesrv_addr, "MsgTopic", queues=2)
    begin = int(time.time() * 1000) - 1000
    async with Producer("dash-pg", dash.cluster.namesrv_addr) as producer:
        sent = await producer.send(Message("MsgTopic", b"hello dashboard", tags="TagA", keys="order-17"))
        binary = await producer.send(Message("MsgTopic", b"\x00\x01\xfe", keys="bin"))
    [found] = (await dash.get("/api/messages/key?topic=MsgTopic&key=order-17"))["messages"]
    assert (found["msgId"], found["offsetMsgId"], found["tags"]) == (sent.msg_id, sent.offset_msg_id, "TagA")
    by_time = await dash.get(f"/api/messages/time?topic=MsgTopic&begin={begin}&end={int(time.time() * 1000) + 1000}")
    assert {m["msgId"] for m in by_time["messages"]} == {sent.msg_id, binary.msg_id} and not by_time["truncated"]
    assert (await dash.get("/api/messages/time?topic=MsgTopic&begin=0&end=1"))["messages"] == []

    by_uniq = await dash.get(f"/api/message?topic=MsgTopic&id={sent.msg_id}")
    assert by_uniq["body"] == {"encoding": "text", "text": "hello dashboard", "hex": b"hello dashboard".hex(" "),
                               "length": 15}  # fmt: skip
    assert by_uniq["properties"]["KEYS"] == "order-17" and by_uniq["queueOffset"] == sent.queue_offset
    by_offset = await dash.get(f"/api/message?id={sent.offset_msg_id}")
    assert by_offset["msgId"] == sent.msg_id
    hexed = await dash.get(f"/api/message?topic=MsgTopic&id={binary.msg_id}")
    assert hexed["body"] == {"encoding": "hex", "text": "\x00\x01\ufffd", "hex": "00 01 fe", "length": 3}


async def test_a_time_search_past_its_limit_keeps_the_newest(dash: Dash, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(messages, "MAX_RESULTS", 3)
    await create_topic(dash.cluster.namesrv_addr, "ManyTopic", queues=2)
    async with Producer("many-pg", dash.cluster.namesrv_addr) as producer:
        sent = []
        for i in range(7):
            sent.append(await producer.send(Message("ManyTopic", f"m{i}".encode())))
            await anyio.sleep(0.003)  # distinct store times, so "newest" has one answer
    found = await dash.get("/api/messages/time?topic=ManyTopic&begin=0&end=99999999999999")
    assert found["truncated"] and [m["msgId"] for m in found["messages"]] == [r.msg_id for r in sent[-3:]]


async def test_an_unknown_id_is_not_found_and_no_foreign_host_is_contacted(dash: Dash) -> None:
    assert "no message" in (await dash.get("/api/message?topic=TBW102&id=nothex", status=404))["error"]["message"]
    # An offset msgId naming 10.1.2.3:4: not a broker of this cluster, so the dashboard does not go there.
    foreign = "0A010203" + "00000004" + "0000000000000000"
    error = (await dash.get(f"/api/message?id={foreign}", status=404))["error"]["message"]
    assert "give its topic" in error


async def test_a_groups_lag_and_connections_then_reset_and_delete(dash: Dash) -> None:
    namesrv = dash.cluster.namesrv_addr
    await create_topic(namesrv, "LagTopic", queues=2)
    async with Producer("lag-pg", namesrv) as producer:
        for i in range(6):
            await producer.send(Message("LagTopic", f"m{i}".encode()))
    received: list[MessageExt] = []

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        received.extend(msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    config = ClientConfig(namesrv_addr=namesrv, persist_consumer_offset_interval=0.1)
    consumer = PushConsumer("lag-cg", config=config, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    consumer.subscribe("LagTopic", "*")
    consumer.register_message_listener(listener)
    async with consumer:
        await wait_until(lambda: len(received) >= 6)
        with anyio.fail_after(60):
            while (row := await group_row(dash, "lag-cg"))["diffTotal"] != 0 or not row["topics"]:
                await anyio.sleep(0.05)
        assert row["online"] == 1 and row["versions"] == ["V4_9_8"] and "LagTopic" in row["topics"]
        assert (row["consumeType"], row["messageModel"]) == ("CONSUME_PASSIVELY", "CLUSTERING")
        detail = await dash.get("/api/group?group=lag-cg")
        assert sum(q["consumerOffset"] for q in detail["queues"] if q["topic"] == "LagTopic") == 6
        assert [s["topic"] for s in detail["subscriptions"]] == ["%RETRY%lag-cg", "LagTopic"]
        assert detail["connections"][0]["version"] == "V4_9_8"
        assert "lag-cg" in (await dash.get("/api/topic?topic=LagTopic"))["consumerGroups"]
    reset = await dash.post("/api/group/reset", {"group": "lag-cg", "topic": "LagTopic", "timestamp": 0})
    assert reset["way"].startswith("offsets committed") and {o["offset"] for o in reset["offsets"]} == {0}
    assert (await group_row(dash, "lag-cg"))["diffTotal"] == 6
    [on_topic] = [c for c in (await dash.get("/api/topic?topic=LagTopic"))["consumers"] if c["group"] == "lag-cg"]
    assert (on_topic["diffTotal"], on_topic["error"]) == (6, None)  # the topic page's lag of the group
    assert (await dash.delete("/api/group?group=lag-cg"))["brokers"] == [dash.cluster.broker_addr]
    assert "lag-cg" not in {g["group"] for g in (await dash.get("/api/groups"))["groups"]}


async def test_deleting_a_group_deletes_its_retry_and_dlq_topics(dash: Dash) -> None:
    """As rocketmq-dashboard's ``deleteSubGroup`` (and ``mqadmin deleteSubGroup -c``), deleting a group deletes
    ``%RETRY%<group>`` and ``%DLQ%<group>`` on the brokers and the name servers: they leave the topic list and the
    retry topic its route. A group that never had a DLQ topic is deleted as well."""
    namesrv = dash.cluster.namesrv_addr
    await create_topic(namesrv, "DelGroupTopic", queues=1)

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer("del-cg", namesrv)
    consumer.subscribe("DelGroupTopic", "*")
    consumer.register_message_listener(listener)
    async with consumer:
        with anyio.fail_after(HANG_GUARD):  # the broker made the group's retry topic and registered it
            while "%RETRY%del-cg" not in await dash.admin.topic_list():
                await anyio.sleep(0.05)
    await dash.admin.create_topic("%DLQ%del-cg", read_queue_nums=1, write_queue_nums=1)  # as the broker makes it
    with anyio.fail_after(HANG_GUARD):
        while "%DLQ%del-cg" not in await dash.admin.topic_list():
            await anyio.sleep(0.05)
    await dash.delete("/api/group?group=del-cg")
    topics = {t["topic"] for t in (await dash.get("/api/topics"))["topics"]}
    assert "%RETRY%del-cg" not in topics and "%DLQ%del-cg" not in topics, sorted(topics)
    broker_topics = dash.cluster.controller.context.topics
    assert "%RETRY%del-cg" not in broker_topics and "%DLQ%del-cg" not in broker_topics
    with pytest.raises(TopicRouteNotFoundError):
        await dash.admin.topic_route("%RETRY%del-cg")
    await dash.admin.create_topic("%RETRY%no-dlq-cg", read_queue_nums=1, write_queue_nums=1)  # never sent to its DLQ
    with anyio.fail_after(HANG_GUARD):
        while "%RETRY%no-dlq-cg" not in await dash.admin.topic_list():
            await anyio.sleep(0.05)
    await dash.delete("/api/group?group=no-dlq-cg")  # the missing %DLQ% topic is no error
    assert "%RETRY%no-dlq-cg" not in await dash.admin.topic_list()


async def test_a_reset_by_a_broker_resetting_offsets_itself_says_the_brokers_reset_them(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    """A broker with ``useServerSideResetOffset`` (RocketMQ 5.3.3's default) resets the group with no consumer
    online: the answer says the brokers reset it, not that online consumers did."""
    async with EmbeddedCluster(tmp_path / "cluster", use_server_side_reset_offset=True, **SMALL_STORE) as cluster:
        async for dash in open_dash(cluster, nursery):
            await create_topic(cluster.namesrv_addr, "SrvResetDash", queues=1)
            async with Producer("srv-reset-pg", cluster.namesrv_addr) as producer:
                await producer.send(Message("SrvResetDash", b"m0"))
            await dash.admin.create_subscription_group(SubscriptionGroupConfig("srv-reset-cg"))
            body = {"group": "srv-reset-cg", "topic": "SrvResetDash", "timestamp": -1}
            reset = await dash.post("/api/group/reset", body)
            assert (reset["way"], [o["offset"] for o in reset["offsets"]]) == ("reset by the brokers", [1])


async def test_an_offline_reset_moves_every_queue_the_group_reads(dash: Dash) -> None:
    """With no consumer online, a reset commits the offset of the time on every queue the group has offsets for, as
    rocketmq-dashboard's fallback ``resetOffsetByTimestampOld``: after a topic's write queues are shrunk (its read
    queues kept until drained) the read-only queues move too, so their messages are read again."""
    namesrv = dash.cluster.namesrv_addr
    admin, addr = dash.admin, dash.cluster.broker_addr
    await create_topic(namesrv, "ShrinkTopic", queues=4)
    async with Producer("shrink-pg", namesrv) as producer:
        for queue_id in range(4):
            mq = MessageQueue("ShrinkTopic", "broker-a", queue_id)
            await producer.send(Message("ShrinkTopic", f"q{queue_id}".encode()), queue=mq)
    remoting, timeout = admin.instance.remoting, admin.instance.config.rpc_timeout
    for queue_id in range(4):  # an offline group that consumed every queue
        await api.update_consumer_offset(
            remoting, addr, "shrink-cg", MessageQueue("ShrinkTopic", "broker-a", queue_id), 1, timeout
        )
    await admin.create_topic("ShrinkTopic", read_queue_nums=4, write_queue_nums=2)  # scale-in: writes first
    with anyio.fail_after(HANG_GUARD):
        while [
            (q.read_queue_nums, q.write_queue_nums) for q in (await admin.topic_route("ShrinkTopic")).queue_datas
        ] != [(4, 2)]:
            admin.instance.forget_route("ShrinkTopic")
            await anyio.sleep(0.05)
    reset = await dash.post("/api/group/reset", {"group": "shrink-cg", "topic": "ShrinkTopic", "timestamp": 0})
    assert reset["way"].startswith("offsets committed")
    progress = await admin.consumer_progress("shrink-cg", "ShrinkTopic")
    assert {mq.queue_id: w.consumer_offset for mq, w in progress.items()} == {0: 0, 1: 0, 2: 0, 3: 0}
    assert sorted(o["queueId"] for o in reset["offsets"]) == [0, 1, 2, 3]
    # A group without offsets on the topic (the brokers refuse it a reset, as Java's): each of the readQueueNums.
    never = await reset_offline(admin, "never-cg", "ShrinkTopic", -1, force=True)
    assert {r.mq.queue_id: r.rollback_offset for r in never} == {0: 1, 1: 1, 2: 1, 3: 1}


async def group_row(dash: Dash, group: str) -> dict[str, object]:
    groups = {g["group"]: g for g in (await dash.get("/api/groups"))["groups"]}
    return groups[group]


async def test_producers_of_a_group_on_a_topic(dash: Dash) -> None:
    namesrv = dash.cluster.namesrv_addr
    await create_topic(namesrv, "ProdTopic", queues=1)
    assert (await dash.get("/api/producers?group=dash-prod&topic=ProdTopic"))["connections"] == []
    async with Producer("dash-prod", namesrv) as producer:
        await producer.send(Message("ProdTopic", b"x"))
        data = await dash.get("/api/producers?group=dash-prod&topic=ProdTopic")
        [conn] = data["connections"]
        assert conn["clientId"] == producer.instance.client_id and conn["language"] == "PYTHON"
        [online] = [p for p in (await dash.get("/api/producers/all"))["producers"] if p["group"] == "dash-prod"]
        assert (online["clientId"], online["language"], online["version"]) == (
            producer.instance.client_id,
            "PYTHON",
            "V4_9_8",
        )
        assert online["brokers"] == [dash.cluster.broker_addr] and online["lastUpdateTimestamp"] > 0
        assert online["clientAddr"].startswith("127.0.0.1:")


async def test_test_message_from_the_topic_page_is_stored(dash: Dash) -> None:
    await create_topic(dash.cluster.namesrv_addr, "SendTopic", queues=1)
    sent = await dash.post("/api/topic/message", {"topic": "SendTopic", "body": "ping", "keys": "k9", "tags": "T"})
    assert sent["sendStatus"] == "SEND_OK"
    [found] = (await dash.get("/api/messages/key?topic=SendTopic&key=k9"))["messages"]
    assert found["msgId"] == sent["msgId"]


async def test_a_transaction_topics_test_message_is_sent_in_a_committed_transaction(dash: Dash) -> None:
    """rocketmq-dashboard's ``TopicServiceImpl.sendTopicMessageRequest`` sends a TRANSACTION topic's test message
    with a ``TransactionMQProducer`` of group ``SELF_TEST_P_GROUP`` whose listener commits: the message is stored
    as a committed transactional one, and the answer names the committed state."""
    picked = {"clusterNameList": ["DefaultCluster"]}
    await dash.post("/api/topics", {"topic": "TxPageTopic", "messageType": "TRANSACTION", **picked})
    await wait_until_routed(dash, "TxPageTopic")
    sent = await dash.post("/api/topic/message", {"topic": "TxPageTopic", "body": "tx", "keys": "tx-1"})
    assert (sent["sendStatus"], sent["localTransactionState"]) == ("SEND_OK", "COMMIT_MESSAGE")
    with anyio.fail_after(60):  # the commit is a oneway END_TRANSACTION: stored a moment after the answer
        while not (found := (await dash.get("/api/messages/key?topic=TxPageTopic&key=tx-1"))["messages"]):
            await anyio.sleep(0.05)
    shown = await dash.get(f"/api/message?id={found[0]['msgId']}&topic=TxPageTopic")
    assert (shown["properties"]["TRAN_MSG"], shown["properties"]["PGROUP"]) == ("true", "SELF_TEST_P_GROUP")


async def test_test_messages_sent_at_once_each_get_a_producer_of_their_own(dash: Dash) -> None:
    """Each test message's producer has an instance name of its own (rocketmq-dashboard's
    ``TopicServiceImpl.sendTopicMessageRequest`` names it by the time), so two users sending at once do not
    collide on one client id."""
    await create_topic(dash.cluster.namesrv_addr, "SendTwiceTopic", queues=1)
    answers: list[httpx.Response] = []

    async def send(i: int) -> None:
        body = {"topic": "SendTwiceTopic", "body": f"at once {i}", "keys": "twice"}
        answers.append(await dash.http.post("/api/topic/message", json=body))

    async with trio.open_nursery() as nursery:
        for i in range(4):
            nursery.start_soon(send, i)
    assert [a.status_code for a in answers] == [200] * 4, [a.text for a in answers]
    assert {a.json()["sendStatus"] for a in answers} == {"SEND_OK"}


async def test_charts_have_points_per_broker_and_topic_after_two_samples(dash: Dash) -> None:
    await create_topic(dash.cluster.namesrv_addr, "ChartTopic", queues=2)
    sampler = dash.app.state.sampler
    await sampler.sample_once()
    async with Producer("chart-pg", dash.cluster.namesrv_addr) as producer:
        for _ in range(20):
            await producer.send(Message("ChartTopic", b"x"))
    await sampler.sample_once()
    brokers = await dash.get("/api/charts/brokers")
    assert brokers["samples"] == 2 and len(brokers["series"]["broker-a:0"]["t"]) == 2
    topics = await dash.get("/api/charts/topics?topic=ChartTopic")
    assert len(topics["series"]["t"]) == 1 and topics["series"]["put"][0] > 0
    assert topics["busiest"][0]["topic"] == "ChartTopic" and "TBW102" not in topics["topics"]
    assert (await dash.get("/api/charts/topics?topic=Nothing"))["series"] is None


async def test_trace_answers_unavailable_or_the_clients_records(dash: Dash) -> None:
    trace = await dash.get("/api/message/trace?id=ABC")
    if dash.app.state.trace_finder is None:
        assert trace == {"available": False, "reason": trace["reason"], "records": []}
        assert "trace" in trace["reason"]
    else:
        assert trace == {"available": True, "reason": None, "records": []}


async def test_resend_hands_a_message_to_an_online_consumer_of_the_group(dash: Dash) -> None:
    namesrv = dash.cluster.namesrv_addr
    await create_topic(namesrv, "ResendTopic", queues=1)
    received: list[bytes] = []

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        received.extend(m.body for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer("resend-cg", namesrv, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    consumer.subscribe("ResendTopic", "*")
    consumer.register_message_listener(listener)
    async with consumer, Producer("resend-pg", namesrv) as producer:
        sent = await producer.send(Message("ResendTopic", b"again"))
        await wait_until(lambda: received == [b"again"])
        answer = await dash.post("/api/message/resend", {"group": "resend-cg", "offsetMsgId": sent.offset_msg_id})
        assert answer["consumeResult"] == "CR_SUCCESS" and answer["clientId"] == consumer.instance.client_id
        assert received == [b"again", b"again"]
    offline = await dash.post("/api/message/resend", {"group": "resend-cg", "offsetMsgId": sent.offset_msg_id}, 502)
    assert offline["error"]["code"] == 206  # CONSUMER_NOT_ONLINE, the broker's answer


async def test_chart_collection_runs_unless_switched_off(
    embedded_cluster: EmbeddedCluster, nursery: trio.Nursery, tmp_path: Path
) -> None:
    async def brokers_chart(
        collect: bool, until: Callable[[dict[str, Any]], bool], settle: float = 0
    ) -> dict[str, Any]:
        namesrv = embedded_cluster.namesrv_addr
        data = str(tmp_path / str(collect))
        app = create_app(
            DashboardSettings(namesrv_addr=namesrv, sample_interval=0.05, enable_collect=collect, data_path=data)
        )
        async with serve_dashboard(app, nursery) as url, httpx.AsyncClient(base_url=url) as http:
            await anyio.sleep(settle)
            with anyio.fail_after(HANG_GUARD):
                while not until(answer := (await http.get("/api/charts/brokers")).json()):
                    await anyio.sleep(0.05)
        return answer

    on = await brokers_chart(True, lambda a: a["samples"] >= 2)
    assert on["collecting"] and on["series"]
    off = await brokers_chart(False, lambda a: True, settle=0.5)  # ten sample intervals
    assert not off["collecting"] and off["samples"] == 0 and off["series"] == {}


async def test_a_group_ahead_of_its_queue_shows_a_negative_lag_as_rocketmq(dash: Dash) -> None:
    """A committed offset past the queue's end (a queue emptied or rebuilt under the group) counts negative in the
    "diff total", as 4.9.8's ``ConsumeStats.computeTotalDiff`` and rocketmq-dashboard's ``OffsetWrapper`` diffs
    sum them: it nets out the other queues' lag and shows that the group's offsets are wrong, not a lag of 0."""
    await create_topic(dash.cluster.namesrv_addr, "AheadTopic", queues=2)
    queues = [MessageQueue("AheadTopic", "broker-a", q) for q in (0, 1)]
    async with Producer("ahead-pg", dash.cluster.namesrv_addr) as producer:
        for i in range(4):
            await producer.send(Message("AheadTopic", f"m{i}".encode()), queue=queues[i % 2])
    await dash.admin.create_subscription_group(SubscriptionGroupConfig("ahead-cg"))
    await dash.admin.update_consumer_offset(dash.cluster.broker_addr, "ahead-cg", queues[0], 7)
    await dash.admin.update_consumer_offset(dash.cluster.broker_addr, "ahead-cg", queues[1], 1)
    detail = await dash.get("/api/group?group=ahead-cg")
    assert sorted((q["queueId"], q["diff"]) for q in detail["queues"]) == [(0, -5), (1, 1)]
    assert detail["diffTotal"] == -4
    assert (await group_row(dash, "ahead-cg"))["diffTotal"] == -4
    [on_topic] = [c for c in (await dash.get("/api/topic?topic=AheadTopic"))["consumers"] if c["group"] == "ahead-cg"]
    assert on_topic["diffTotal"] == -4


async def test_rocketmqs_own_groups_and_topics_are_listed_as_system(dash: Dash) -> None:
    """4.9.8's ``MixAll`` system groups (its list and every ``CID_RMQ_SYS_`` group, ``MixAll.isSysConsumerGroup``:
    the broker's own pop revive groups among them) and the 5.x proxy's ``CID_DefaultHeartBeatSyncerTopic``
    (rocketmq-dashboard's ``ConsumerServiceImpl.SYSTEM_GROUP_SET``) are SYSTEM on the Consumer groups page; its
    topic ``DefaultHeartBeatSyncerTopic`` and 5.x's ``CHECKPOINT_TOPIC`` are SYSTEM topics (``TopicServiceImpl.
    classifyTopicType``, ``TopicValidator``)."""
    await create_topic(dash.cluster.namesrv_addr, "SysKindTopic", queues=1)
    mq = MessageQueue("SysKindTopic", "broker-a", 0)
    system = ["CID_DefaultHeartBeatSyncerTopic", "CID_RMQ_SYS_REVIVE_GROUP", "SCHEDULE_CONSUMER", "DEFAULT_CONSUMER"]
    for group in [*system, "plain-cg"]:
        await dash.admin.create_subscription_group(SubscriptionGroupConfig(group))
        await dash.admin.update_consumer_offset(dash.cluster.broker_addr, group, mq, 0)
    kinds = {g["group"]: g["kind"] for g in (await dash.get("/api/groups"))["groups"]}
    assert {g: kinds[g] for g in system} == dict.fromkeys(system, "SYSTEM")
    assert kinds["plain-cg"] == "NORMAL"
    for topic in ("DefaultHeartBeatSyncerTopic", "CHECKPOINT_TOPIC"):
        await dash.post("/api/topics", {"topic": topic, "clusterNameList": ["DefaultCluster"]})
    await wait_until_routed(dash, "CHECKPOINT_TOPIC")
    await wait_until_routed(dash, "DefaultHeartBeatSyncerTopic")
    topics = {t["topic"]: t["kind"] for t in (await dash.get("/api/topics"))["topics"]}
    assert topics["DefaultHeartBeatSyncerTopic"] == topics["CHECKPOINT_TOPIC"] == "SYSTEM"


async def test_a_topic_is_created_with_its_message_type(dash: Dash) -> None:
    """rocketmq-dashboard's ``TopicServiceImpl.createOrUpdate`` writes the form's ``messageType`` as the topic's
    ``+message.type`` attribute, NORMAL when blank, and ``examineTopicConfig`` shows it (UNSPECIFIED for a topic
    without one)."""
    topics = dash.cluster.controller.context.topics
    picked = {"clusterNameList": ["DefaultCluster"]}
    await dash.post("/api/topics", {"topic": "FifoPageTopic", "messageType": "FIFO", **picked})
    await dash.post("/api/topics", {"topic": "PlainPageTopic", **picked})
    await dash.admin.create_topic("BareTopic", read_queue_nums=1, write_queue_nums=1)
    fifo, plain = topics.get("FifoPageTopic"), topics.get("PlainPageTopic")
    assert fifo is not None and fifo.attribute("message.type") == "FIFO"
    assert plain is not None and plain.attribute("message.type") == "NORMAL"
    for topic, shown in (("FifoPageTopic", "FIFO"), ("PlainPageTopic", "NORMAL"), ("BareTopic", "UNSPECIFIED")):
        await wait_until_routed(dash, topic)
        [config] = (await dash.get(f"/api/topic/config?topic={topic}"))["brokers"]
        assert config["messageType"] == shown, (topic, config)
    refused = await dash.post("/api/topics", {"topic": "OddTopic", "messageType": "ODD", **picked}, status=502)
    assert "value is not in set" in refused["error"]["remark"] and topics.get("OddTopic") is None


async def test_updating_an_untyped_topic_keeps_it_untyped(dash: Dash) -> None:
    """An update that names no type leaves the topic's ``message.type`` alone: a topic without one stays without
    one (the broker keeps attributes an update does not name, ``AttributeUtil.alterCurrentAttributes``), rather than
    turning NORMAL, which the 5.x proxy would then hold delay, FIFO and transactional sends to. A type the user
    picks is still written."""
    topics = dash.cluster.controller.context.topics
    await dash.admin.create_topic("UntypedTopic", read_queue_nums=1, write_queue_nums=1)
    await wait_until_routed(dash, "UntypedTopic")
    picked = {"clusterNameList": ["DefaultCluster"]}
    await dash.post("/api/topics", {"topic": "UntypedTopic", "readQueueNums": 2, "writeQueueNums": 2, **picked})
    config = topics.get("UntypedTopic")
    assert config is not None and config.read_queue_nums == 2
    assert config.attribute("message.type") is None
    [shown] = (await dash.get("/api/topic/config?topic=UntypedTopic"))["brokers"]
    assert shown["messageType"] == "UNSPECIFIED"
    await dash.post("/api/topics", {"topic": "UntypedTopic", "messageType": "DELAY", **picked})
    typed = topics.get("UntypedTopic")
    assert typed is not None and typed.attribute("message.type") == "DELAY"


async def test_each_queue_of_a_group_names_the_client_consuming_it(dash: Dash) -> None:
    """The consumer group page's progress names, per queue, the online client the queue is assigned to (its
    ``mqTable`` in GET_CONSUMER_RUNNING_INFO), as rocketmq-dashboard's ``QueueStatInfo.clientInfo``; a queue no
    client holds has none, and neither has any queue of a group with nobody online."""
    namesrv = dash.cluster.namesrv_addr
    await create_topic(namesrv, "HeldTopic", queues=2)
    consumer = PushConsumer("held-cg", namesrv)
    consumer.subscribe("HeldTopic", "*")
    consumer.register_message_listener(consume_all)
    async with consumer, Producer("held-pg", namesrv) as producer:
        for i in range(4):
            await producer.send(Message("HeldTopic", f"m{i}".encode()))
        client = consumer.instance.client_id
        with anyio.fail_after(60):  # until the rebalance has given the consumer both queues
            while len(held := await held_queues(dash)) != 2 or {q["clientInfo"] for q in held} != {client}:
                await anyio.sleep(0.05)
        assert sorted(q["queueId"] for q in held) == [0, 1]
    offline = (await dash.get("/api/group?group=held-cg"))["queues"]
    assert offline and all(q["clientInfo"] == "" for q in offline)


async def held_queues(dash: Dash) -> list[dict[str, Any]]:
    return [q for q in (await dash.get("/api/group?group=held-cg"))["queues"] if q["topic"] == "HeldTopic"]


async def test_the_cluster_page_shows_yesterdays_puts_and_gets(dash: Dash) -> None:
    """Each broker's row has yesterday's message counts beside today's, as rocketmq-dashboard's cluster page: the
    runtime info's ``msgPutTotalTodayMorning`` minus ``msgPutTotalYesterdayMorning`` (and the same for gets)."""
    await create_topic(dash.cluster.namesrv_addr, "DaysTopic", queues=1)
    async with Producer("days-pg", dash.cluster.namesrv_addr) as producer:
        for i in range(3):
            await producer.send(Message("DaysTopic", f"m{i}".encode()))
    stats = dash.cluster.controller.context.stats
    stats.wall_clock = lambda: time.time() + 86_400  # the broker's next second sample rolls the day over
    with anyio.fail_after(60):
        while (runtime := await dash.admin.broker_status(dash.cluster.broker_addr))["msgPutTotalTodayMorning"] == "0":
            await anyio.sleep(0.05)
    expected = int(runtime["msgPutTotalTodayMorning"]) - int(runtime["msgPutTotalYesterdayMorning"])
    assert expected >= 3
    [broker] = (await dash.get("/api/cluster"))["brokers"]
    assert broker["msgPutYesterday"] == expected and broker["msgGetYesterday"] == 0


async def test_a_group_consuming_in_order_is_listed_as_fifo(dash: Dash) -> None:
    """rocketmq-dashboard lists a group whose SubscriptionGroupConfig has ``consumeMessageOrderly`` (RocketMQ 5's
    FIFO groups) as FIFO beside NORMAL and SYSTEM (``ConsumerServiceImpl.makeGroupListCache``'s ``subGroupType``); a
    system group stays SYSTEM whatever its config says."""
    await create_topic(dash.cluster.namesrv_addr, "FifoKindTopic", queues=1)
    mq = MessageQueue("FifoKindTopic", "broker-a", 0)
    configs = [
        SubscriptionGroupConfig("fifo-cg", consume_message_orderly=True),
        SubscriptionGroupConfig("unordered-cg"),
        SubscriptionGroupConfig("TOOLS_CONSUMER", consume_message_orderly=True),
    ]
    for config in configs:
        await dash.admin.create_subscription_group(config)
        await dash.admin.update_consumer_offset(dash.cluster.broker_addr, config.group_name, mq, 0)
    kinds = {g["group"]: g["kind"] for g in (await dash.get("/api/groups"))["groups"]}
    assert (kinds["fifo-cg"], kinds["unordered-cg"], kinds["TOOLS_CONSUMER"]) == ("FIFO", "NORMAL", "SYSTEM")


async def test_a_group_is_made_fifo_from_its_config_form(dash: Dash) -> None:
    """rocketmq-dashboard's group config form has "orderly consumption" (``consumeMessageOrderly``,
    ConsumerConfigItem.jsx), written with the rest of the group's settings; the group is then listed FIFO."""
    body = {"brokerNameList": ["broker-a"], "subscriptionGroupConfig": {"groupName": "form-fifo-cg"}}
    body["subscriptionGroupConfig"]["consumeMessageOrderly"] = True
    await dash.post("/api/group/config", body)
    [row] = (await dash.get("/api/group/config?group=form-fifo-cg"))["brokers"]
    assert row["config"]["consumeMessageOrderly"] is True
    kinds = {g["group"]: g["kind"] for g in (await dash.get("/api/groups"))["groups"]}
    assert kinds["form-fifo-cg"] == "FIFO"
    body["subscriptionGroupConfig"]["consumeMessageOrderly"] = False  # and back
    await dash.post("/api/group/config", body)
    [row] = (await dash.get("/api/group/config?group=form-fifo-cg"))["brokers"]
    assert row["config"]["consumeMessageOrderly"] is False


async def consume_all(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
    return ConsumeConcurrentlyStatus.CONSUME_SUCCESS


async def test_a_5x_brokers_get_tps_is_read_from_its_get_transferred_tps(
    dash: Dash, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A RocketMQ 5 broker names its transfer rate ``getTransferredTps`` (5.3.3's StoreStatsService.getRuntimeInfo;
    4.9.8 spelled it ``getTransferedTps``): the cluster page and the broker charts read either, as rocketmq-dashboard's
    ``cluster.jsx`` does. Here the embedded broker's runtime info is renamed as a 5.x broker's."""
    runtime_as_5x(dash.cluster.controller, monkeypatch, "12.5 3.0 1.0")
    [broker] = (await dash.get("/api/cluster"))["brokers"]
    assert broker["getTps"] == 12.5
    sampler = dash.app.state.sampler
    await sampler.sample_once()
    [series] = (await dash.get("/api/charts/brokers"))["series"].values()
    assert series["get"] == [12.5]


async def test_a_consumers_running_info_is_shown_with_its_stacks_when_asked(dash: Dash) -> None:
    """rocketmq-dashboard's ``/consumer/consumerRunningInfo.query?consumerGroup&clientId&jstack`` answers one online
    client's ConsumerRunningInfo (GET_CONSUMER_RUNNING_INFO relayed by the broker): its properties, subscriptions,
    the queues it holds with their process-queue state, its RT and TPS per topic, and with ``jstack`` its thread
    stacks; an unknown client is the broker's refusal, not a crash."""
    namesrv = dash.cluster.namesrv_addr
    await create_topic(namesrv, "RunningTopic", queues=2)
    consumer = PushConsumer("running-cg", namesrv)
    consumer.subscribe("RunningTopic", "*")
    consumer.register_message_listener(consume_all)
    async with consumer:
        client = consumer.instance.client_id
        url = f"/api/group/client?group=running-cg&clientId={quote(client)}"  # a client id may hold a '#'
        info = await running_info(dash, url)
        assert info["clientId"] == client and info["jstack"] is None and running_queues(info) == [0, 1]
        assert info["properties"]["consumerGroup"] == "running-cg"
        subscribed = [(s["topic"], s["subString"]) for s in info["subscriptions"]]
        assert subscribed == [("%RETRY%running-cg", "*"), ("RunningTopic", "*")]
        assert "#Consumer Subscription#" in info["text"]
        stacked = await dash.get(url + "&jstack=true")
        assert "TID: " in stacked["jstack"] and "#Consumer jstack#" in stacked["text"]
        refused = await dash.get("/api/group/client?group=running-cg&clientId=nobody@0", status=502)
        assert refused["error"]


async def running_info(dash: Dash, url: str) -> dict[str, Any]:
    """The answer at ``url`` once the consumer is online (a 502 until the broker knows it) and holds both queues."""
    with anyio.fail_after(60):
        while (got := await dash.http.get(url)).status_code == 502 or (
            got.status_code == 200 and len(running_queues(got.json())) != 2
        ):
            await anyio.sleep(0.05)
    assert got.status_code == 200, got.text
    info: dict[str, Any] = got.json()
    return info


def running_queues(info: dict[str, Any]) -> list[int]:
    return [q["queueId"] for q in info["queues"] if q["topic"] == "RunningTopic"]
