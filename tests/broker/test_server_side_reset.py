"""Consumer offset resets on the broker (RocketMQ 5.3.3's ``useServerSideResetOffset``): INVOKE_BROKER_TO_RESET_OFFSET
commits every queue and holds each reset for the group's next pull or pop of the queue, online consumers or not
(AdminBrokerProcessor.resetOffsetInner, ConsumerOffsetManager.assignResetOffset); that pull is answered
PULL_OFFSET_MOVED to it (PullMessageProcessor, queryThenEraseResetOffset), and commits of the old position are ignored
until then (ConsumerManageProcessor.updateConsumerOffset, hasOffsetReset). Real sockets on 127.0.0.1, raw requests
and the Python client; virtual time where the client's timers run."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
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
from remoting.codec.bodies.broker_metadata import SubscriptionGroupConfig
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand, request
from remoting.codec.pull_body import decode_records
from remoting.codec.topics import OFFSET_MOVED_EVENT
from tests.broker.test_pop_wire import ack_request, pop_request
from tests.client.helpers import create_topic, wait_until
from tests.conftest import SMALL_STORE
from tests.semantics.helpers import use_virtual_store_clock

GROUP = "server-reset-group"


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[EmbeddedCluster]:
    """A name server and a broker resetting offsets itself, as RocketMQ 5.3.3's default."""
    async with EmbeddedCluster(tmp_path / "cluster", use_server_side_reset_offset=True, **SMALL_STORE) as cluster:
        yield cluster


async def ask(cluster: EmbeddedCluster, code: int, **fields: str) -> RemotingCommand:
    async with RemotingClient() as client:
        return await client.invoke(cluster.broker_addr, request(code, fields), 30)


async def topic_with(cluster: EmbeddedCluster, topic: str, queues: int, per_queue: int) -> None:
    """``topic`` with ``queues`` queues of ``per_queue`` messages each, and the group known to the broker."""
    await create_topic(cluster.namesrv_addr, topic, queues)
    async with Admin(cluster.namesrv_addr) as admin:
        await admin.create_subscription_group(SubscriptionGroupConfig(GROUP))
    async with Producer("pg-server-reset", cluster.namesrv_addr) as producer:
        for queue_id in range(queues):
            for i in range(per_queue):
                await producer.send(Message(topic, b"m%d" % i), queue=MessageQueue(topic, "broker-a", queue_id))


async def committed(cluster: EmbeddedCluster, topic: str, queue_id: int) -> int:
    answer = await ask(
        cluster, RequestCode.QUERY_CONSUMER_OFFSET, consumerGroup=GROUP, topic=topic, queueId=str(queue_id)
    )
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    return int(answer.ext_fields["offset"])


async def commit(cluster: EmbeddedCluster, topic: str, queue_id: int, offset: int) -> RemotingCommand:
    fields = {"consumerGroup": GROUP, "topic": topic, "queueId": str(queue_id), "commitOffset": str(offset)}
    return await ask(cluster, RequestCode.UPDATE_CONSUMER_OFFSET, **fields)


async def reset(cluster: EmbeddedCluster, topic: str, timestamp: int, **extra: str) -> RemotingCommand:
    fields = {"topic": topic, "group": GROUP, "timestamp": str(timestamp), "isForce": "false", **extra}
    return await ask(cluster, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, **fields)


async def pull(cluster: EmbeddedCluster, topic: str, offset: int, commit_offset: int | None = None) -> RemotingCommand:
    """A pull of queue 0 at ``offset``, with the COMMIT flag and ``commit_offset`` if given."""
    fields = {"consumerGroup": GROUP, "topic": topic, "queueId": "0", "queueOffset": str(offset), "maxMsgNums": "32",
              "sysFlag": "4" if commit_offset is None else "5", "commitOffset": str(commit_offset or 0),
              "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0"}  # fmt: skip
    return await ask(cluster, RequestCode.PULL_MESSAGE, **fields)


async def test_a_reset_of_every_queue_needs_no_consumer_online_and_is_committed(cluster: EmbeddedCluster) -> None:
    """resetOffsetInner with ``queueId`` -1: every read queue to the offset at the timestamp, committed, answered
    with the table; no CONSUMER_NOT_ONLINE, which 4.9.8's Broker2Client answers for a group with no consumer."""
    await topic_with(cluster, "SrvResetAll", 2, 4)
    for queue_id in (0, 1):
        assert (await commit(cluster, "SrvResetAll", queue_id, 4)).code == ResponseCode.SUCCESS
    answer = await reset(cluster, "SrvResetAll", 0)
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    assert b'"queueId":0' in answer.body and b'"queueId":1' in answer.body
    assert [await committed(cluster, "SrvResetAll", q) for q in (0, 1)] == [0, 0]
    to_end = await reset(cluster, "SrvResetAll", -1)
    assert to_end.code == ResponseCode.SUCCESS, to_end.remark
    assert [await committed(cluster, "SrvResetAll", q) for q in (0, 1)] == [4, 4]


async def test_a_reset_of_an_unknown_topic_or_group_is_refused_with_javas_codes(cluster: EmbeddedCluster) -> None:
    await topic_with(cluster, "SrvResetRefused", 1, 1)
    no_topic = await reset(cluster, "SrvResetNoSuchTopic", 0)
    assert (no_topic.code, no_topic.remark) == (
        ResponseCode.TOPIC_NOT_EXIST,
        "Topic SrvResetNoSuchTopic does not exist",
    )
    fields = {"topic": "SrvResetRefused", "group": "srv-reset-no-such-group", "timestamp": "0", "isForce": "false"}
    no_group = await ask(cluster, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, **fields)
    assert (no_group.code, no_group.remark) == (
        ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
        "Group srv-reset-no-such-group does not exist",
    )


async def test_a_slave_refuses_a_reset(tmp_path: Path) -> None:
    """resetOffsetInner refuses on a slave (its offsets are its master's copy): SYSTEM_ERROR with Java's remark."""
    overrides = {**SMALL_STORE, "use_server_side_reset_offset": True}
    async with EmbeddedCluster(tmp_path / "ha", slaves=1, **overrides) as cluster:
        await topic_with(cluster, "SrvResetSlave", 1, 1)
        fields = {"topic": "SrvResetSlave", "group": GROUP, "timestamp": "0", "isForce": "false"}
        async with RemotingClient() as client:
            [slave] = cluster.slave_addrs
            cmd = request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, fields)
            answer = await client.invoke(slave, cmd, 30)
        assert (answer.code, answer.remark) == (ResponseCode.SYSTEM_ERROR, "Can not reset offset in slave broker")


async def test_commits_of_the_old_position_are_ignored_until_the_next_pull_takes_the_reset(
    cluster: EmbeddedCluster,
) -> None:
    """A commit while the reset waits (the client's periodic persist, or the COMMIT flag of the pull that takes it)
    does not undo the reset; the pull answers PULL_OFFSET_MOVED to the reset offset, and from then on commits count."""
    await topic_with(cluster, "SrvResetPull", 1, 6)
    assert (await commit(cluster, "SrvResetPull", 0, 6)).code == ResponseCode.SUCCESS
    assert (await reset(cluster, "SrvResetPull", 0, queueId="0", offset="2")).code == ResponseCode.SUCCESS
    ignored = await commit(cluster, "SrvResetPull", 0, 6)
    assert (ignored.code, ignored.remark) == (ResponseCode.SUCCESS, "Offset has been previously reset")
    assert await committed(cluster, "SrvResetPull", 0) == 2
    moved = await pull(cluster, "SrvResetPull", 6, commit_offset=6)
    assert (moved.code, moved.remark) == (ResponseCode.PULL_OFFSET_MOVED, "OFFSET_RESET")
    assert (moved.ext_fields["nextBeginOffset"], moved.ext_fields["maxOffset"]) == ("2", "6")
    assert await committed(cluster, "SrvResetPull", 0) == 2
    found = await pull(cluster, "SrvResetPull", 2)
    assert found.code == ResponseCode.SUCCESS, found.remark
    assert [m.queue_offset for m in decode_records(bytes(found.body))] == [2, 3, 4, 5]
    assert (await commit(cluster, "SrvResetPull", 0, 6)).remark is None
    assert await committed(cluster, "SrvResetPull", 0) == 6


async def test_with_the_setting_off_a_reset_of_one_queue_holds_nothing(tmp_path: Path) -> None:
    """Without ``useServerSideResetOffset`` no reset waits for a pull: 5.3.3's AdminBrokerProcessor.resetOffset
    builds none (ours commits the one queue and tells the online consumers), PullMessageProcessor answers a waiting
    reset only under the setting, and ConsumerManageProcessor.updateConsumerOffset checks hasOffsetReset only under
    it. A consumer told of the reset commits and pulls on at once."""
    async with EmbeddedCluster(tmp_path / "off", **SMALL_STORE) as off:
        await topic_with(off, "OffReset", 1, 6)
        assert (await commit(off, "OffReset", 0, 6)).code == ResponseCode.SUCCESS
        assert (await reset(off, "OffReset", 0, queueId="0", offset="2")).code == ResponseCode.SUCCESS
        assert await committed(off, "OffReset", 0) == 2
        counted = await commit(off, "OffReset", 0, 3)
        assert (counted.code, counted.remark) == (ResponseCode.SUCCESS, None)
        assert await committed(off, "OffReset", 0) == 3
        found = await pull(off, "OffReset", 3)
        assert found.code == ResponseCode.SUCCESS, found.remark
        assert [m.queue_offset for m in decode_records(bytes(found.body))] == [3, 4, 5]


async def test_a_pop_after_a_reset_of_every_queue_reads_from_the_reset(
    cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    clock = use_virtual_store_clock(cluster)
    await topic_with(cluster, "SrvResetPop", 1, 3)
    popped = await ask(
        cluster, RequestCode.POP_MESSAGE, **pop_request(clock, "SrvResetPop", consumerGroup=GROUP).ext_fields
    )
    assert [m.body for m in decode_records(bytes(popped.body))] == [b"m0", b"m1", b"m2"]
    assert (await reset(cluster, "SrvResetPop", 0)).code == ResponseCode.SUCCESS
    again = await ask(
        cluster, RequestCode.POP_MESSAGE, **pop_request(clock, "SrvResetPop", consumerGroup=GROUP).ext_fields
    )
    assert [m.body for m in decode_records(bytes(again.body))] == [b"m0", b"m1", b"m2"]


async def test_an_orderly_ack_commits_nothing_over_a_pending_reset(
    cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """5.3.3's AckMessageProcessor.ackOrderly commits the next offset only while no reset of the queue waits
    (hasOffsetReset): an ack of the batch in flight does not move the offset past the reset, which a restart of the
    broker (the pending table is in memory) would otherwise lose."""
    clock = use_virtual_store_clock(cluster)
    await topic_with(cluster, "SrvResetOrderly", 1, 3)
    cmd = pop_request(clock, "SrvResetOrderly", consumerGroup=GROUP, order="true")
    popped = decode_records(bytes((await ask(cluster, RequestCode.POP_MESSAGE, **cmd.ext_fields)).body))
    assert [m.body for m in popped] == [b"m0", b"m1", b"m2"]
    assert (await reset(cluster, "SrvResetOrderly", 0, queueId="0", offset="1")).code == ResponseCode.SUCCESS
    acked = await ask(cluster, RequestCode.ACK_MESSAGE, **ack_request("SrvResetOrderly", popped[1], GROUP).ext_fields)
    assert acked.code == ResponseCode.SUCCESS, acked.remark
    assert await committed(cluster, "SrvResetOrderly", 0) == 1
    await cluster.restart_broker()
    assert await committed(cluster, "SrvResetOrderly", 0) == 1


async def test_an_orderly_ack_over_a_pending_reset_marks_nothing_a_restart_keeps(
    cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """The batch popped before the reset is popped again from the reset, its acks forgotten: 5.3.3's resetPopOffset
    clears the queue's order info and ConsumerOrderInfoManager.update builds it afresh, with no done marks, for the
    offsets popped again. An ack while the reset waits leaves no mark in the saved FIFO state either, so a restart
    (the pending reset is in memory) does not skip the message at the reset offset."""
    clock = use_virtual_store_clock(cluster)
    await topic_with(cluster, "SrvResetOrderlyRestart", 1, 3)
    cmd = pop_request(clock, "SrvResetOrderlyRestart", consumerGroup=GROUP, order="true")
    popped = decode_records(bytes((await ask(cluster, RequestCode.POP_MESSAGE, **cmd.ext_fields)).body))
    assert [m.body for m in popped] == [b"m0", b"m1", b"m2"]
    assert (await reset(cluster, "SrvResetOrderlyRestart", 0, queueId="0", offset="1")).code == ResponseCode.SUCCESS
    ack = ack_request("SrvResetOrderlyRestart", popped[1], GROUP)
    assert (await ask(cluster, RequestCode.ACK_MESSAGE, **ack.ext_fields)).code == ResponseCode.SUCCESS
    await cluster.restart_broker()
    use_virtual_store_clock(cluster, clock)
    await trio.sleep(31)  # past the batch's invisible time
    cmd = pop_request(clock, "SrvResetOrderlyRestart", consumerGroup=GROUP, order="true")
    again = decode_records(bytes((await ask(cluster, RequestCode.POP_MESSAGE, **cmd.ext_fields)).body))
    assert [m.body for m in again] == [b"m1", b"m2"]


async def test_a_reset_survives_a_restart_of_the_broker(cluster: EmbeddedCluster) -> None:
    """The reset is committed, so it is saved with the offsets (the pending table itself is in memory, as Java's)."""
    await topic_with(cluster, "SrvResetRestart", 1, 5)
    assert (await commit(cluster, "SrvResetRestart", 0, 5)).code == ResponseCode.SUCCESS
    assert (await reset(cluster, "SrvResetRestart", 0)).code == ResponseCode.SUCCESS
    await cluster.restart_broker()
    assert await committed(cluster, "SrvResetRestart", 0) == 0


async def test_a_push_consumer_told_nothing_consumes_again_from_the_reset(
    cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """No RESET_CONSUMER_CLIENT_OFFSET goes out: the consumer's next pull of the queue takes the reset
    (PULL_OFFSET_MOVED), it drops the queue, commits the reset 10 s later and takes the queue again from there
    (DefaultMQPushConsumerImpl's OFFSET_ILLEGAL case). Its commits of the old position are ignored only until that
    pull takes the reset (hasOffsetReset); from then on a periodic commit counts again, and the consumer's commit of
    the reset is what holds the offset there."""
    await topic_with(cluster, "SrvResetPush", 1, 4)
    seen: list[bytes] = []

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        seen.extend(m.body for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(GROUP, cluster.namesrv_addr, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    consumer.subscribe("SrvResetPush")
    consumer.register_message_listener(listener)
    async with consumer:
        await wait_until(lambda: len(seen) == 4)
        await trio.sleep(6)  # a persist commits 4
        assert await committed(cluster, "SrvResetPush", 0) == 4
        async with Admin(cluster.namesrv_addr) as admin:
            assert await admin.reset_offset_by_time(GROUP, "SrvResetPush", 0) == {
                MessageQueue("SrvResetPush", "broker-a", 0): 0
            }
        await wait_until(lambda: len(seen) == 8)
    # taken by a pull, which the broker notes as an offset moved (a consumer told of the reset would not pull at 4)
    moved = await ask(cluster, RequestCode.GET_MAX_OFFSET, topic=OFFSET_MOVED_EVENT, queueId="0")
    assert moved.ext_fields["offset"] == "1"
    assert sorted(seen) == sorted([b"m0", b"m1", b"m2", b"m3"] * 2)  # consumed concurrently: in any order
