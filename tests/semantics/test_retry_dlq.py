"""Retries and the dead-letter queue through the broker's CONSUMER_SEND_MSG_BACK, in virtual time: our PushConsumer
against the embedded cluster, whose store clock follows Trio's autojump clock."""

from __future__ import annotations

import itertools
import json
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import attrs
import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from client.admin import Admin
from client.consumer.listener import ConsumeConcurrentlyStatus
from client.consumer.push import PushConsumer
from client.message import Message, MessageExt
from client.producer import Producer
from remoting.client import RemotingClient
from remoting.codec.bodies import ConsumeFromWhere, MessageQueue
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand, request
from remoting.codec.message import decode_record
from remoting.codec.msgid import decode_offset_msg_id
from remoting.codec.record_copy import raw_properties, record_from_stored
from remoting.codec.topics import SCHEDULE_TOPIC
from store.metadata_files import SubscriptionGroupConfig
from tests.conftest import SMALL_STORE
from tests.e2e.harness import ALI_ONS, ALI_ONS_PACKAGE, require
from tests.processors.conftest import send_request
from tests.semantics.helpers import create_topic, use_virtual_store_clock


def _failing_consumer(
    cluster: EmbeddedCluster, group: str, topic: str, seen: list[tuple[float, MessageExt]], failures: int
) -> PushConsumer:
    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        seen.extend((trio.current_time(), m) for m in msgs)
        if len(seen) <= failures:
            return ConsumeConcurrentlyStatus.RECONSUME_LATER
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(group, cluster.namesrv_addr, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    consumer.subscribe(topic)
    consumer.register_message_listener(listener)
    return consumer


async def test_a_consumer_failing_three_times_gets_the_message_four_times_with_growing_reconsume_times(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "RetryFour")
    seen: list[tuple[float, MessageExt]] = []
    consumer = _failing_consumer(embedded_cluster, "cg-retry-four", "RetryFour", seen, failures=3)
    async with Producer("pg-retry", embedded_cluster.namesrv_addr) as producer, consumer:
        sent = await producer.send(Message("RetryFour", b"payload", keys=["k1"]))
        with trio.fail_after(600):
            while len(seen) < 4:
                await trio.sleep(1)
        await trio.sleep(300)  # nothing more arrives once consumed
    assert len(seen) == 4
    times = [t for t, _ in seen]
    msgs = [m for _, m in seen]
    assert [m.reconsume_times for m in msgs] == [0, 1, 2, 3]
    assert {m.topic for m in msgs} == {"RetryFour"}
    assert {m.body for m in msgs} == {b"payload"}
    assert {m.properties.get("UNIQ_KEY") for m in msgs} == {sent.msg_id}
    # The broker path: ORIGIN_MESSAGE_ID is the first delivery's offset msgId (the client's own fallback would put
    # the UNIQ_KEY there), and every retry went through delay levels 3, 4 and 5 (10 s, 30 s, 1 min).
    first = msgs[0]
    assert all(m.properties["ORIGIN_MESSAGE_ID"] == first.msg_id for m in msgs[1:])
    assert all(m.properties["RETRY_TOPIC"] == "RetryFour" for m in msgs[1:])
    gaps = [b - a for a, b in itertools.pairwise(times)]
    for gap, delay in zip(gaps, (10, 30, 60), strict=True):
        assert delay <= gap < delay + 2
    schedule = embedded_cluster.controller.schedule
    assert schedule.delivered == 3
    assert embedded_cluster.controller.context.store.max_offset_in_queue(SCHEDULE_TOPIC, 2) == 1


async def test_an_always_failing_message_lands_in_the_dlq_after_16_retries_where_query_by_id_finds_it(
    long_haul_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    use_virtual_store_clock(long_haul_cluster)
    await create_topic(long_haul_cluster, "RetryDead")
    seen: list[tuple[float, MessageExt]] = []
    consumer = _failing_consumer(long_haul_cluster, "cg-dead", "RetryDead", seen, failures=1_000)
    store = long_haul_cluster.controller.context.store
    async with Producer("pg-dead", long_haul_cluster.namesrv_addr) as producer, consumer:
        sent = await producer.send(Message("RetryDead", b"poison"))
        start = trio.current_time()
        with trio.fail_after(6 * 3600):
            while store.max_offset_in_queue("%DLQ%cg-dead", 0) < 1:
                await trio.sleep(10)
        elapsed = trio.current_time() - start
        await trio.sleep(600)
        async with Admin(long_haul_cluster.namesrv_addr) as admin:
            [dead] = await admin.query_msg_by_offset(MessageQueue("%DLQ%cg-dead", "broker-a", 0), 0)
            found = await admin.query_msg_by_id(dead.msg_id)
    # 1 first delivery + 16 retries; the 17th failure sends it to the DLQ.
    assert len(seen) == 17
    assert [m.reconsume_times for _, m in seen] == list(range(17))
    # Levels 3..18: 10 s + 30 s + 1..10 min + 20 min + 30 min + 1 h + 2 h = 4 h 45 min 40 s of retries.
    assert 17_140 <= elapsed < 17_140 + 120
    assert found.topic == "%DLQ%cg-dead"
    assert found.body == b"poison"
    assert found.reconsume_times == 17
    assert found.properties["UNIQ_KEY"] == sent.msg_id
    assert found.properties["RETRY_TOPIC"] == "RetryDead"
    assert found.properties["ORIGIN_MESSAGE_ID"] == seen[0][1].msg_id
    assert "DELAY" not in found.properties
    dlq = long_haul_cluster.controller.context.topics.get("%DLQ%cg-dead")
    assert dlq is not None and (dlq.read_queue_nums, dlq.write_queue_nums, dlq.perm) == (1, 1, 6)


_ALI_ONS_FAILING_CONSUMER = """
const { Consumer } = require(process.argv[2]);
const logger = { debug() {}, info() {}, warn() {}, error(...a) { console.error('[ali-ons error]', ...a); } };
const httpclient = { request: async () => { throw new Error('no http'); } };
const consumer = new Consumer({ httpclient, logger, nameSrv: process.argv[3], consumerGroup: process.argv[4] });
consumer.on('error', () => {});
let seen = 0;
consumer.subscribe(process.argv[5], '*', async msg => {
  seen++;
  process.stdout.write(JSON.stringify({ reconsumeTimes: msg.reconsumeTimes, msgId: msg.msgId,
    origin: msg.properties.ORIGIN_MESSAGE_ID || null, body: msg.body.toString() }) + '\\n');
  if (seen <= 2) throw new Error('fail on purpose');
});
consumer.ready().then(() => process.stdout.write(JSON.stringify({ ready: true }) + '\\n'));
process.stdin.on('end', () => consumer.close().then(() => process.exit(0)));
process.stdin.resume();
"""


async def test_ali_ons_send_back_goes_through_the_brokers_retry_path(tmp_path: Path) -> None:
    require(ALI_ONS)
    script = tmp_path / "failing_consumer.js"
    script.write_text(_ALI_ONS_FAILING_CONSUMER)
    # Level 3 (the first retry) is 1 s here, so the retries take real seconds, not minutes.
    async with EmbeddedCluster(tmp_path / "cluster", message_delay_level="1s 1s 1s 1s 1s", **SMALL_STORE) as cluster:
        await create_topic(cluster, "OnsRetry")
        argv = ["node", str(script), str(ALI_ONS_PACKAGE.parent), cluster.namesrv_addr, "cg-ons-retry", "OnsRetry"]
        events: list[dict[str, Any]] = []
        node = await trio.lowlevel.open_process(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        try:
            assert node.stdout is not None and node.stdin is not None
            lines = _lines(node.stdout)
            with trio.fail_after(60):
                assert (await anext(lines)) == {"ready": True}
                await trio.sleep(1)  # ali-ons rebalances right after ready
                async with Producer("pg-ons-retry", cluster.namesrv_addr) as producer:
                    sent = await producer.send(Message("OnsRetry", b"retry-me"))
                while len(events) < 3:
                    events.append(await anext(lines))
            await node.stdin.aclose()
            with trio.fail_after(30):
                await node.wait()
        finally:
            if node.returncode is None:
                node.kill()
                await node.wait()
        store = cluster.controller.context.store
        assert [e["reconsumeTimes"] for e in events] == [0, 1, 2]
        assert {e["body"] for e in events} == {"retry-me"}
        assert events[0]["msgId"] == sent.offset_msg_id
        assert all(e["origin"] == sent.offset_msg_id for e in events[1:])
        # Both retries were the broker's: stored through delay levels 3 and 4, none sent by ali-ons itself.
        assert store.max_offset_in_queue(SCHEDULE_TOPIC, 2) == 1
        assert store.max_offset_in_queue(SCHEDULE_TOPIC, 3) == 1
        assert store.max_offset_in_queue("%RETRY%cg-ons-retry", 0) == 2


async def _lines(stream: trio.abc.ReceiveStream) -> AsyncIterator[dict[str, Any]]:
    buffer = b""
    while True:
        while b"\n" not in buffer:
            chunk = await stream.receive_some()
            if not chunk:
                return
            buffer += chunk
        line, buffer = buffer.split(b"\n", 1)
        yield json.loads(line)


async def _send_back(cluster: EmbeddedCluster, version: int = 409, **fields: str) -> RemotingCommand:
    cmd = attrs.evolve(request(RequestCode.CONSUMER_SEND_MSG_BACK, fields), version=version)
    async with RemotingClient() as client:
        return await client.invoke(cluster.broker_addr, cmd, 3.0)


async def test_send_back_follows_the_requests_delay_level_and_max_reconsume_times(
    embedded_cluster: EmbeddedCluster,
) -> None:
    await create_topic(embedded_cluster, "SendBackWire")
    store = embedded_cluster.controller.context.store
    async with Producer("pg-wire", embedded_cluster.namesrv_addr) as producer:
        sent = await producer.send(Message("SendBackWire", b"wire"))
    offset = str(decode_offset_msg_id(sent.offset_msg_id).phy_offset)
    group = "cg-wire"

    missing = await _send_back(embedded_cluster, offset="999999999", group=group, delayLevel="0")
    assert missing.code == ResponseCode.SYSTEM_ERROR
    assert missing.remark == "look message by offset failed, 999999999"

    chosen = await _send_back(embedded_cluster, offset=offset, group=group, delayLevel="2")
    assert chosen.code == ResponseCode.SUCCESS
    [parked] = [decode_record(m) for m in store.get(SCHEDULE_TOPIC, 1, 0, 32).messages]
    assert parked.properties["REAL_TOPIC"] == f"%RETRY%{group}"
    assert parked.properties["RETRY_TOPIC"] == "SendBackWire"
    assert parked.properties["ORIGIN_MESSAGE_ID"] == sent.offset_msg_id
    assert parked.reconsume_times == 1

    negative = await _send_back(embedded_cluster, offset=offset, group=group, delayLevel="-1")
    assert negative.code == ResponseCode.SUCCESS
    # maxReconsumeTimes=0 sends even a first failure to the DLQ, but only from request version 121 on.
    exhausted = await _send_back(embedded_cluster, offset=offset, group=group, delayLevel="0", maxReconsumeTimes="0")
    assert exhausted.code == ResponseCode.SUCCESS
    old = await _send_back(
        embedded_cluster, version=120, offset=offset, group=group, delayLevel="0", maxReconsumeTimes="0"
    )
    assert old.code == ResponseCode.SUCCESS
    assert store.max_offset_in_queue(f"%DLQ%{group}", 0) == 2
    assert store.max_offset_in_queue(SCHEDULE_TOPIC, 2) == 1  # the version-120 request: level 3 + 0


async def test_a_send_back_on_a_sync_master_without_a_slave_is_stored_with_wait_false_and_succeeds(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """4.9.8 SendMessageProcessor.asyncConsumerSendMsgBack sets ``msgExt.setWaitStoreMsgOK(false)`` before copying the
    properties into the retry message: it is stored with ``WAIT=false``, and CommitLog waits for neither the flush nor
    a slave. On a SYNC_MASTER without a slave the answer is SUCCESS (SYSTEM_ERROR would make a Java consumer send the
    message again from its own producer: a second retry copy of a message that was stored)."""
    async with EmbeddedCluster(tmp_path / "c", broker_role="SYNC_MASTER", **SMALL_STORE) as cluster:
        await create_topic(cluster, "SendBackSync")
        async with RemotingClient() as client:
            sent = await client.invoke(cluster.broker_addr, send_request("SendBackSync"), 10)
        assert sent.code == ResponseCode.SLAVE_NOT_AVAILABLE  # stored, no slave to wait for
        offset = str(decode_offset_msg_id(sent.ext_fields["msgId"]).phy_offset)
        back = await _send_back(cluster, offset=offset, group="cg-sync-master", delayLevel="0")
        assert (back.code, back.remark) == (ResponseCode.SUCCESS, None)
        [parked] = [decode_record(m) for m in cluster.controller.context.store.get(SCHEDULE_TOPIC, 2, 0, 32).messages]
        assert parked.properties["WAIT"] == "false"


async def test_send_back_for_a_group_without_retry_queues_drops_the_message(
    embedded_cluster: EmbeddedCluster,
) -> None:
    await create_topic(embedded_cluster, "SendBackDrop")
    async with Admin(embedded_cluster.namesrv_addr) as admin:
        await admin.create_subscription_group(SubscriptionGroupConfig("cg-no-retry", retry_queue_nums=0))
    async with Producer("pg-drop", embedded_cluster.namesrv_addr) as producer:
        sent = await producer.send(Message("SendBackDrop", b"drop"))
    offset = str(decode_offset_msg_id(sent.offset_msg_id).phy_offset)
    answer = await _send_back(embedded_cluster, offset=offset, group="cg-no-retry", delayLevel="0")
    assert answer.code == ResponseCode.SUCCESS
    store = embedded_cluster.controller.context.store
    assert store.max_offset_in_queue(SCHEDULE_TOPIC, 2) == 0
    assert embedded_cluster.controller.context.topics.get("%RETRY%cg-no-retry") is None


async def test_a_broker_made_read_only_at_run_time_refuses_send_backs(embedded_cluster: EmbeddedCluster) -> None:
    await create_topic(embedded_cluster, "SendBackReadOnly")
    async with Producer("pg-read-only", embedded_cluster.namesrv_addr) as producer:
        sent = await producer.send(Message("SendBackReadOnly", b"ro"))
    offset = str(decode_offset_msg_id(sent.offset_msg_id).phy_offset)
    async with RemotingClient() as client:
        update = request(RequestCode.UPDATE_BROKER_CONFIG, body=b"brokerPermission=4\n")
        assert (await client.invoke(embedded_cluster.broker_addr, update, 3.0)).code == ResponseCode.SUCCESS
    refused = await _send_back(embedded_cluster, offset=offset, group="cg-read-only", delayLevel="0")
    assert (refused.code, refused.remark) == (
        ResponseCode.NO_PERMISSION,
        "the broker[127.0.0.1] sending message is forbidden",
    )
    assert embedded_cluster.controller.context.store.max_offset_in_queue("%RETRY%cg-read-only", 0) == 0


async def test_a_group_whose_retry_topic_is_too_long_blocks_no_delay_level(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """A group name may be 255 characters, a topic 127 bytes: a send-back of a group whose ``%RETRY%`` topic is longer
    is refused at once (it used to be accepted, parked in the delay level, then refused at delivery, and retried every
    100 ms for good: no later message of that level, any group's, was delivered). A delayed record the store refuses
    for good is skipped, and the level goes on."""
    use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "LongGroup")
    controller = embedded_cluster.controller
    store = controller.context.store
    async with Producer("pg-long", embedded_cluster.namesrv_addr) as producer:
        sent = await producer.send(Message("LongGroup", b"m"))
    offset = str(decode_offset_msg_id(sent.offset_msg_id).phy_offset)
    long_group = "g" * 125  # "%RETRY%" + it is 132 bytes
    refused = await _send_back(embedded_cluster, offset=offset, group=long_group, delayLevel="1")
    assert refused.code == ResponseCode.SYSTEM_ERROR and "MESSAGE_ILLEGAL" in (refused.remark or "")
    stored = decode_record(store.look_message_by_offset(int(offset)) or b"")
    poison = record_from_stored(stored, "%RETRY%" + long_group, 0, raw_properties(stored), store.store_host)
    store.append(controller.schedule.rewrite(poison, 1))  # as a broker before this check would have parked it
    other = await _send_back(embedded_cluster, offset=offset, group="cg-short", delayLevel="1")
    assert other.code == ResponseCode.SUCCESS
    await trio.sleep(30)  # level 1 is 1 s
    assert store.max_offset_in_queue("%RETRY%cg-short", 0) == 1


async def test_a_send_back_to_the_dlq_of_a_group_whose_dlq_topic_fits_is_stored(
    embedded_cluster: EmbeddedCluster,
) -> None:
    """Its retry topic would be too long, its DLQ topic is not: straight to the DLQ, it is stored, as in RocketMQ
    (whose store checks the topic it writes)."""
    await create_topic(embedded_cluster, "LongDlq")
    store = embedded_cluster.controller.context.store
    async with Producer("pg-longdlq", embedded_cluster.namesrv_addr) as producer:
        sent = await producer.send(Message("LongDlq", b"m"))
    offset = str(decode_offset_msg_id(sent.offset_msg_id).phy_offset)
    group = "g" * 121  # %RETRY%+group = 128 bytes (too long), %DLQ%+group = 126 bytes (fits)
    reply = await _send_back(embedded_cluster, offset=offset, group=group, delayLevel="-1")
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    assert store.max_offset_in_queue("%DLQ%" + group, 0) == 1
