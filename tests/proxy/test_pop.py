"""Pop consumption in the broker, in virtual time (``autojump_clock``): checkpoints as timer messages, acks, changes of
invisibility, redelivery with the attempt raised (past the group's attempts too, the receive then moves it to the
DLQ: a dead letter re-sent is neither delayed nor parked again), checkpoints of a deleted topic or group that revive
nothing (the topic's pop retry topics deleted with it; a topic created again meanwhile gets nothing either), FIFO
queues with one batch in flight, and in-flight messages across a clean restart. The broker is the embedded cluster's;
the messages are sent by our 4.x client."""

from __future__ import annotations

import math
import os
from pathlib import Path

import attrs
import pytest
import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from broker.pop import AckOutcome, Popped, PopService, ReceiptHandle
from broker.pop.revive import REVIVE_GROUP, ReviveService
from client.admin import Admin
from client.message import Message, MessageExt
from client.producer import Producer
from processors.filter import compile_sql92
from remoting.codec.bodies.broker_metadata import PERM_READ, SubscriptionGroupConfig
from remoting.codec.message import decode_record
from remoting.codec.topics import pop_retry_topic
from tests.conftest import SMALL_STORE
from tests.semantics.helpers import create_topic, use_virtual_store_clock

INVISIBLE = 30_000


async def start_pop(cluster: EmbeddedCluster, nursery: trio.Nursery) -> tuple[PopService, ReviveService]:
    """The broker's own pop service and revive loop (running since the broker started)."""
    pop, revive = cluster.controller.pop_service()
    await nursery.start(revive.run)
    return pop, revive


@pytest.fixture
async def popper(embedded_cluster: EmbeddedCluster, nursery: trio.Nursery) -> tuple[PopService, ReviveService]:
    """A pop service and its running revive loop over the embedded broker, store time following Trio's clock (the
    tests ask for ``autojump_clock`` themselves: pytest-trio reads the clock from the test's own arguments)."""
    use_virtual_store_clock(embedded_cluster)
    return await start_pop(embedded_cluster, nursery)


async def send(cluster: EmbeddedCluster, topic: str, *bodies: bytes, tags: str | None = None) -> None:
    async with Producer("pg-pop", cluster.namesrv_addr) as producer:
        for body in bodies:
            await producer.send(Message(topic, body, tags=tags))


async def delete_topic(cluster: EmbeddedCluster, topic: str, autojump_clock: trio.testing.MockClock) -> None:
    """DELETE_TOPIC_IN_BROKER through our admin client, virtual time standing still while the broker deletes the
    files in a worker thread."""
    autojump_clock.autojump_threshold = math.inf
    async with Admin(cluster.namesrv_addr) as admin:
        await admin.delete_topic(topic)
    autojump_clock.autojump_threshold = 0


async def pop_all(pop: PopService, group: str, topic: str, invisible: int = INVISIBLE, **kw: bool) -> list[Popped]:
    return pop.pop(group, topic, 32, invisible, None, **kw)


#: Store settings with 64 KiB CommitLog segments, so a few large messages fill one and retention can delete it.
SMALL_SEGMENTS = {**SMALL_STORE, "mapped_file_size_commit_log": 64 << 10}


async def fill_a_segment(cluster: EmbeddedCluster) -> None:
    """Six 30 KB messages into topic ``Filler`` (created here): the CommitLog segments before them are full."""
    await create_topic(cluster, "Filler", queues=1)
    await send(cluster, "Filler", *(os.urandom(30_000) for _ in range(6)))


async def expire_old_segments(cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock) -> None:
    """Retention as on a disk above diskSpaceCleanForciblyRatio: every flushed CommitLog segment but the newest goes,
    one after another with no pause (virtual time stands still while the files go, so a pause would never end)."""
    store = cluster.controller.context.store
    autojump_clock.autojump_threshold = math.inf
    store.flush_all_blocking()
    config = store.config
    # above the forcible ratio
    store.config = attrs.evolve(
        config,
        disk_usage_ratio=lambda _path: 0.87,
        delete_commit_log_files_interval=0,
        delete_consume_queue_files_interval=0,
    )
    assert await store.retention.check_once() >= 1
    store.config = config
    autojump_clock.autojump_threshold = 0


async def test_unacked_message_comes_back_after_its_invisible_time_with_attempt_two(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, popper: tuple[PopService, ReviveService]
) -> None:
    await create_topic(embedded_cluster, "PopT", queues=2)
    pop, revive = popper
    await send(embedded_cluster, "PopT", b"kept", b"acked")
    first = await pop_all(pop, "G", "PopT")
    assert sorted(p.message.body for p in first) == [b"acked", b"kept"]
    assert {p.attempt for p in first} == {1}
    assert await pop_all(pop, "G", "PopT") == []  # invisible now, and the offsets moved on
    [acked] = [p for p in first if p.message.body == b"acked"]
    assert pop.ack("G", "PopT", acked.handle) is AckOutcome.OK
    await trio.sleep(INVISIBLE / 1000 - 1)
    assert await pop_all(pop, "G", "PopT") == []  # not before its time
    await trio.sleep(5)
    [again] = await pop_all(pop, "G", "PopT")
    assert (again.message.body, again.attempt, again.handle.topic_type) == (b"kept", 2, 1)
    assert pop.original_topic("G", again.message) == "PopT"
    [old] = [p for p in first if p.message.body == b"kept"]
    assert again.message.properties["UNIQ_KEY"] == old.message.properties["UNIQ_KEY"]
    assert pop.ack("G", "PopT", old.handle) is AckOutcome.EXPIRED
    assert revive.revived == 1


async def test_pop_from_retry_probability_is_a_broker_setting(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, popper: tuple[PopService, ReviveService]
) -> None:
    """RocketMQ 5.3.3's BrokerConfig ``popFromRetryProbability`` (default 20): that share of pops reads the group's
    pop retry topic before the topic, the others read it only when the topic did not fill the pop
    (broker/src/main/java/org/apache/rocketmq/broker/processor/PopMessageProcessor.java ``needRetry``). Ours read it
    first every fifth pop whatever the setting: 0 still put a redelivery ahead of new messages, 100 behind them."""
    ctx = embedded_cluster.controller.context
    assert await ctx.update_config({"popFromRetryProbability": "0"}) == []
    await create_topic(embedded_cluster, "PopRatio", queues=1)
    pop, _ = popper
    await send(embedded_cluster, "PopRatio", b"late")
    assert [p.message.body for p in pop.pop("G", "PopRatio", 1, 10_000, None)] == [b"late"]
    await trio.sleep(14)  # not acked: revived into the group's pop retry topic
    fresh = [b"n%d" % i for i in range(6)]
    await send(embedded_cluster, "PopRatio", *fresh)
    got = [p.message.body for _ in fresh for p in pop.pop("G", "PopRatio", 1, INVISIBLE, None)]
    assert got == fresh, "with 0 the retry topic only fills a pop the topic left short"
    assert await ctx.update_config({"popFromRetryProbability": "100"}) == []
    await send(embedded_cluster, "PopRatio", b"newest")
    [first] = pop.pop("G", "PopRatio", 1, INVISIBLE, None)
    assert (first.message.body, first.attempt) == (b"late", 2), "with 100 every pop reads the retry topic first"


async def test_a_revived_copy_carries_the_first_pop_time_of_its_message(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, popper: tuple[PopService, ReviveService]
) -> None:
    """RocketMQ 5.3.3's PopReviveService.reviveRetry stamps ``1ST_POP_TIME`` (MessageConst.PROPERTY_FIRST_POP_TIME)
    with the checkpoint's pop time on a copy of a message never redelivered before (reconsumeTimes 0), and later
    copies keep it (broker/src/main/java/org/apache/rocketmq/broker/processor/PopReviveService.java)."""
    await create_topic(embedded_cluster, "PopFirst", queues=1)
    pop, _ = popper
    await send(embedded_cluster, "PopFirst", b"slow")
    [first] = await pop_all(pop, "G", "PopFirst", invisible=10_000)
    assert "1ST_POP_TIME" not in first.message.properties
    await trio.sleep(14)
    [second] = await pop_all(pop, "G", "PopFirst", invisible=10_000)
    assert second.message.properties.get("1ST_POP_TIME") == str(first.handle.pop_time)
    await trio.sleep(14)
    [third] = await pop_all(pop, "G", "PopFirst", invisible=10_000)
    assert (third.attempt, third.message.properties.get("1ST_POP_TIME")) == (3, str(first.handle.pop_time))


async def test_one_checkpoint_per_pop_and_queue_redelivers_exactly_its_unacked_messages(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, popper: tuple[PopService, ReviveService]
) -> None:
    await create_topic(embedded_cluster, "PopB", queues=1)
    pop, revive = popper
    await send(embedded_cluster, "PopB", b"a", b"b", b"c", b"d")
    first = await pop_all(pop, "G", "PopB")
    assert [p.message.body for p in first] == [b"a", b"b", b"c", b"d"]
    for p in first:
        if p.message.body in (b"b", b"d"):
            assert pop.ack("G", "PopB", p.handle) is AckOutcome.OK
    await trio.sleep(INVISIBLE / 1000 + 5)
    again = await pop_all(pop, "G", "PopB")
    assert sorted((p.message.body, p.attempt) for p in again) == [(b"a", 2), (b"c", 2)]
    assert revive.revived == 2
    # The revive queue holds the two ACKs and a single CK for the four messages of the pop.
    store = embedded_cluster.controller.context.store
    records = store.get(pop.revive_topic, 0, 0, 32).messages
    assert sorted(decode_record(r).tags for r in records) == ["ack", "ack", "ck"]


async def test_a_single_message_checkpoint_of_earlier_versions_still_redelivers(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, popper: tuple[PopService, ReviveService]
) -> None:
    """A CK written before CKs named a whole pop (``ao`` and ``po`` plain numbers) found in the revive queue after an
    upgrade: its message is redelivered unless acked."""
    await create_topic(embedded_cluster, "PopL", queues=1)
    pop, revive = popper
    await send(embedded_cluster, "PopL", b"old", b"acked")
    old, acked = await pop_all(pop, "G", "PopL", invisible=10_000)
    store = embedded_cluster.controller.context.store
    pt = old.handle.pop_time - 20_000  # expired 10 s ago: revived at once, before the pop's own CK is due
    ack = {"c": "G", "t": "PopL", "q": 0, "ao": acked.handle.offset, "pt": pt, "it": 10_000}
    store.append(pop._revive_record("ack", ack, None))
    for p in (old, acked):
        h = p.handle
        body = {"c": "G", "t": "PopL", "q": 0, "so": h.start_offset, "ao": h.offset, "pt": pt, "it": 10_000,
                "po": h.commit_log_offset}  # fmt: skip
        store.append(pop._revive_record("ck", body, None))
    await trio.sleep(2)
    assert [p.message.body for p in await pop_all(pop, "G", "PopL")] == [b"old"]
    assert revive.revived == 1


async def test_change_of_invisibility_moves_the_redelivery_and_renews_the_handle(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, popper: tuple[PopService, ReviveService]
) -> None:
    await create_topic(embedded_cluster, "PopC")
    pop, _ = popper
    await send(embedded_cluster, "PopC", b"slow")
    [popped] = await pop_all(pop, "G", "PopC", invisible=10_000)
    await trio.sleep(5)
    outcome, renewed = pop.change_invisible("G", "PopC", popped.handle, 60_000)
    assert outcome is AckOutcome.OK and renewed is not None
    assert renewed.pop_time > popped.handle.pop_time and renewed.offset == popped.handle.offset
    await trio.sleep(20)
    assert await pop_all(pop, "G", "PopC") == []  # the first checkpoint was cancelled by the change
    assert pop.ack("G", "PopC", renewed) is AckOutcome.OK
    await trio.sleep(60)
    assert await pop_all(pop, "G", "PopC") == []


async def test_a_change_of_invisibility_in_the_millisecond_of_the_pop_redelivers_at_its_new_time(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, popper: tuple[PopService, ReviveService]
) -> None:
    """The pop's CK and the change's CK share queue, offset and pop time; the ACK of the old handle must cancel the
    pop's CK (due in 30 s), not the change's (due in 2 s)."""
    await create_topic(embedded_cluster, "PopSameMs")
    pop, _ = popper
    await send(embedded_cluster, "PopSameMs", b"soon")
    [popped] = await pop_all(pop, "G", "PopSameMs")
    outcome, renewed = pop.change_invisible("G", "PopSameMs", popped.handle, 2_000)
    assert outcome is AckOutcome.OK and renewed is not None and renewed.pop_time == popped.handle.pop_time
    await trio.sleep(6)
    [again] = await pop_all(pop, "G", "PopSameMs")
    assert (again.message.body, again.attempt) == (b"soon", 2)


async def test_the_broker_redelivers_past_the_groups_attempts_and_writes_no_dlq(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, popper: tuple[PopService, ReviveService]
) -> None:
    """RocketMQ 5.3.3's PopReviveService.reviveRetry copies an unacknowledged message into the retry topic whatever its
    attempts; moving one whose attempts are used up to the DLQ is the proxy's receive's work (ConsumerProcessor
    .popMessage, tests/proxy/test_consumer_rpcs.py)."""
    await create_topic(embedded_cluster, "PopD")
    embedded_cluster.controller.context.groups.update(SubscriptionGroupConfig("GD", retry_max_times=1))
    pop, _ = popper
    await send(embedded_cluster, "PopD", b"poison")
    attempts = []
    for _ in range(4):
        attempts += [p.attempt for p in await pop_all(pop, "GD", "PopD", invisible=10_000)]
        await trio.sleep(14)
    assert attempts == [1, 2, 3, 4]
    assert embedded_cluster.controller.context.topics.get("%DLQ%GD") is None


async def dead_letter_of(cluster: EmbeddedCluster, pop: PopService, group: str, topic: str) -> MessageExt:
    """Pop ``topic``'s one message for ``group`` twice without acking (the second time its pop retry copy), then move
    that copy to ``%DLQ%<group>`` as the gRPC receive does past the group's attempts, and return the dead letter."""
    copies: list[Popped] = []
    while len(copies) < 2:
        copies += await pop_all(pop, group, topic, invisible=10_000)
        await trio.sleep(12)
    retry = copies[1].message
    pop.dead_letter(group, retry.commit_log_offset, topic, retry.msg_id)
    [dead] = stored(cluster, f"%DLQ%{group}")
    return dead


def stored(cluster: EmbeddedCluster, topic: str) -> list[MessageExt]:
    return [decode_record(m) for m in cluster.controller.context.store.get(topic, 0, 0, 32).messages]


async def test_a_dead_lettered_delayed_message_redriven_to_its_topic_is_not_delayed_again(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, popper: tuple[PopService, ReviveService]
) -> None:
    """A delivered delay message keeps ``DELAY=<level>`` (ScheduleMessageService.messageTimeup); its dead letter has
    none (consumerSendMsgBack sets delay level 0 on a DLQ-bound copy), so re-sending it to its topic (mqadmin
    queryMsgById -s) stores it at once instead of waiting the level's 30 s again."""
    await create_topic(embedded_cluster, "PopDelayed")
    async with Producer("pg-pop-delayed", embedded_cluster.namesrv_addr) as producer:
        await producer.send(Message("PopDelayed", b"d", delay_level=4))  # 30 s
        await trio.sleep(35)
        assert len(stored(embedded_cluster, "PopDelayed")) == 1
        dead = await dead_letter_of(embedded_cluster, popper[0], "GPopDelayed", "PopDelayed")
        assert "DELAY" not in dead.properties, dead.properties
        await producer.send(Message("PopDelayed", dead.body, properties=dict(dead.properties)))
        assert len(stored(embedded_cluster, "PopDelayed")) == 2


async def test_a_dead_lettered_timer_message_redriven_to_its_topic_is_not_parked_again(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, popper: tuple[PopService, ReviveService]
) -> None:
    """A delivered timer message keeps the producer's ``TIMER_DELAY_SEC`` and its ``TIMER_OUT_MS``; the pop retry and
    dead-letter copies keep ``TIMER_OUT_MS`` too (PopReviveService.reviveRetry ``putAll``s the properties, as
    consumerSendMsgBack does), so re-sending the dead letter to its topic stores it at once
    (HookUtils.checkIfTimerMessage) instead of parking it for another 600 s."""
    await create_topic(embedded_cluster, "PopTimed")
    async with Producer("pg-pop-timed", embedded_cluster.namesrv_addr) as producer:
        await producer.send(Message("PopTimed", b"t", properties={"TIMER_DELAY_SEC": "600"}))
        await trio.sleep(602)
        assert len(stored(embedded_cluster, "PopTimed")) == 1
        dead = await dead_letter_of(embedded_cluster, popper[0], "GPopTimed", "PopTimed")
        assert "TIMER_OUT_MS" in dead.properties, dead.properties
        await producer.send(Message("PopTimed", dead.body, properties=dict(dead.properties)))
        assert embedded_cluster.controller.timer.pending == 0
        assert len(stored(embedded_cluster, "PopTimed")) == 2


async def pop_unacked(cluster: EmbeddedCluster, pop: PopService, group: str, topic: str, body: bytes = b"m0") -> None:
    """``topic`` created with one queue and one message, which ``group`` pops for 10 s and does not acknowledge."""
    await create_topic(cluster, topic, queues=1)
    await send(cluster, topic, body)
    [_] = pop.pop(group, topic, 32, 10_000, None)


async def test_a_deleted_topics_unacked_message_does_not_come_back_in_the_topic_created_again(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, popper: tuple[PopService, ReviveService]
) -> None:
    """AdminBrokerProcessor.deleteTopic (clearRetryTopicWhenDeleteTopic, true by default) deletes the pop retry topic
    ``%RETRY%<group>_<topic>`` of every group with an offset on the topic, and PopReviveService.mergeAndRevive skips a
    CK whose topic no longer exists ("can not get normal topic"). So a message of a deleted topic never reaches the
    consumers of a topic created again under its name."""
    pop, revive = popper
    ctx = embedded_cluster.controller.context
    await pop_unacked(embedded_cluster, pop, "GDel", "DelT", b"old")
    await trio.sleep(15)  # not acked: revived into the pop retry topic
    assert revive.revived == 1
    await delete_topic(embedded_cluster, "DelT", autojump_clock)
    assert pop_retry_topic("GDel", "DelT") not in ctx.topics
    await create_topic(embedded_cluster, "DelT", queues=1)
    handed = [p.message.body for _ in range(6) for p in pop.pop("GDel", "DelT", 32, 10_000, None)]
    assert handed == []


async def test_a_deleted_topics_message_does_not_come_back_because_a_group_of_the_retry_name_exists(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, popper: tuple[PopService, ReviveService]
) -> None:
    """``%RETRY%A_B``, group ``A``'s pop retry topic of ``B``, is kept when ``B`` is deleted only while a group
    ``A_B`` consumes it as its 4.x retry topic (an offset on it). A group ``A_B`` that never did (a pop group of another
    topic) keeps nothing: the topic holds only ``A``'s revived messages of the deleted ``B``, which would come back to
    ``A`` from the topic ``B`` created again."""
    pop, revive = popper
    embedded_cluster.controller.context.groups.update(SubscriptionGroupConfig("A_B"))
    await pop_unacked(embedded_cluster, pop, "A", "B", b"old")
    await trio.sleep(15)  # not acked: revived into %RETRY%A_B
    assert revive.revived == 1
    await delete_topic(embedded_cluster, "B", autojump_clock)
    await create_topic(embedded_cluster, "B", queues=1)
    handed = [p.message.body for _ in range(6) for p in pop.pop("A", "B", 32, 10_000, None)]
    assert handed == [], "a message of the deleted topic came back in the topic created again"


async def test_the_checkpoint_of_a_deleted_topic_revives_nothing(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, popper: tuple[PopService, ReviveService]
) -> None:
    """PopReviveService.mergeAndRevive skips (and commits past) a CK whose topic is gone ("can not get normal topic
    ..., then continue"): no retry copy, no pop retry topic created for a topic that no longer exists."""
    pop, revive = popper
    ctx = embedded_cluster.controller.context
    await pop_unacked(embedded_cluster, pop, "GGone", "GoneT")
    await delete_topic(embedded_cluster, "GoneT", autojump_clock)
    await trio.sleep(15)
    assert (revive.revived, pop_retry_topic("GGone", "GoneT") in ctx.topics) == (0, False)


async def test_the_checkpoint_of_a_deleted_group_revives_nothing(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, popper: tuple[PopService, ReviveService]
) -> None:
    """PopReviveService.mergeAndRevive skips a CK whose group is gone ("can not get cid", the group deleted and
    autoCreateSubscriptionGroup off): no retry copy, no pop retry topic for a group that no longer exists."""
    pop, revive = popper
    ctx = embedded_cluster.controller.context
    await pop_unacked(embedded_cluster, pop, "GGoneG", "GoneG")
    ctx.groups.config = attrs.evolve(ctx.groups.config, auto_create_subscription_group=False)
    ctx.groups.delete("GGoneG")
    await trio.sleep(15)
    assert (revive.revived, pop_retry_topic("GGoneG", "GoneG") in ctx.topics) == (0, False)


async def test_a_checkpoint_due_after_its_topic_was_deleted_and_created_again_revives_nothing(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, popper: tuple[PopService, ReviveService]
) -> None:
    """A topic deleted and created again within the invisible time of a pop of it (an operator's reset): when the old
    pop's CK comes due a topic of that name exists, yet its message is not revived into the new topic's pop retry
    topic. PopReviveService reads the message by topic, queue and offset (getBizMessage), which the new queue does not
    hold (here: another message), not by its CommitLog offset, which outlives the topic."""
    pop, revive = popper
    await pop_unacked(embedded_cluster, pop, "GReset", "ResetT", b"old")
    await delete_topic(embedded_cluster, "ResetT", autojump_clock)
    await create_topic(embedded_cluster, "ResetT", queues=1)
    await send(embedded_cluster, "ResetT", b"new")  # at the old message's queue offset
    await trio.sleep(15)  # the CK of the deleted topic's pop comes due
    handed = [p.message.body for _ in range(6) for p in pop.pop("GReset", "ResetT", 32, 10_000, None)]
    assert (handed, revive.revived) == ([b"new"], 0)


async def test_a_pop_retry_topic_deleted_alone_is_not_recreated_by_its_checkpoint(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, popper: tuple[PopService, ReviveService]
) -> None:
    """The CK of a pop of the retry topic ``%RETRY%<group>_<topic>``, deleted on its own (its origin topic still
    there), revives nothing and does not create the retry topic again: RocketMQ reads the message by (retry topic,
    queue, offset) and finds nothing."""
    pop, revive = popper
    ctx = embedded_cluster.controller.context
    await pop_unacked(embedded_cluster, pop, "GAlone", "RetryAlone")
    await trio.sleep(15)  # not acked: revived into the pop retry topic
    retry = pop_retry_topic("GAlone", "RetryAlone")
    assert revive.revived == 1
    popped = [p for _ in range(6) for p in pop.pop("GAlone", "RetryAlone", 32, 10_000, None)]
    assert [(p.message.body, p.handle.topic_type) for p in popped] == [(b"m0", 1)]
    await delete_topic(embedded_cluster, retry, autojump_clock)
    await trio.sleep(15)  # the CK of the retry pop comes due
    assert (revive.revived, retry in ctx.topics) == (1, False)


async def test_each_pop_of_a_group_starts_one_queue_further(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, popper: tuple[PopService, ReviveService]
) -> None:
    """RocketMQ's PopMessageProcessor starts each pop at a random queue (randomQ = random.nextInt(100), queue
    (randomQ + i) % readQueueNums) and reads the retry topic first on a random 20 %; ours turns per group and topic.
    With one turn shared by every pop of the broker, two groups popping in turn got the even and the odd turns: one
    always started on queue 0 and, while that queue had a backlog, never read queue 1."""
    await create_topic(embedded_cluster, "PopFair", queues=2)
    pop, _ = popper
    await send(embedded_cluster, "PopFair", *(f"m{i}".encode() for i in range(120)))  # 60 on each queue
    queues_of_a: set[int] = set()
    for _ in range(12):
        queues_of_a |= {p.message.queue_id for p in pop.pop("GFairA", "PopFair", 4, INVISIBLE, None)}
        pop.pop("GFairB", "PopFair", 4, INVISIBLE, None)
    assert queues_of_a == {0, 1}, f"group A read only queue(s) {sorted(queues_of_a)} in 12 pops"


async def test_a_committed_offset_past_the_queues_end_is_moved_back_to_it(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, popper: tuple[PopService, ReviveService]
) -> None:
    """A queue that lost its tail under a group's committed offset (recreated, or truncated by recovery): as
    RocketMQ's popMsgFromQueue commits the next begin offset of OFFSET_OVERFLOW_BADLY (the queue's end), the next
    message stored is handed out, not only those past the old offset."""
    await create_topic(embedded_cluster, "PopO", queues=1)
    pop, _ = popper
    await send(embedded_cluster, "PopO", b"a", b"b")
    offsets = embedded_cluster.controller.context.offsets
    offsets.commit("GO", "PopO", 0, 10)
    assert await pop_all(pop, "GO", "PopO") == []
    assert offsets.query("GO", "PopO", 0) == 2
    await send(embedded_cluster, "PopO", b"c")
    assert [p.message.body for p in await pop_all(pop, "GO", "PopO")] == [b"c"]


async def test_a_new_pop_group_on_a_queue_whose_min_offset_moved_starts_at_its_last_message_and_goes_on(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A group without a committed offset on a queue that no longer starts at 0 starts at its last message and
    commits that start, as PopMessageProcessor.getInitOffset (``init``: "pop last one, then commit offset"): the
    next pop goes on from there. Without the commit each pop started at the queue's end again, and the group
    (normal or FIFO) never received a message of that queue."""
    async with EmbeddedCluster(tmp_path / "cluster", **SMALL_SEGMENTS) as cluster, trio.open_nursery() as nursery:
        use_virtual_store_clock(cluster)
        pop, _ = await start_pop(cluster, nursery)
        await create_topic(cluster, "Aged", queues=1)
        await send(cluster, "Aged", b"old")
        await fill_a_segment(cluster)
        await send(cluster, "Aged", b"kept")
        await expire_old_segments(cluster, autojump_clock)
        assert cluster.controller.context.store.min_offset_in_queue("Aged", 0) == 1
        handed = {group: [] for group in ("GNew", "GNewFifo")}
        for body in (None, b"new"):
            if body:
                await send(cluster, "Aged", body)
            handed["GNew"] += [p.message.body for p in await pop_all(pop, "GNew", "Aged")]
            for p in await pop_all(pop, "GNewFifo", "Aged", fifo=True):
                handed["GNewFifo"].append(p.message.body)
                assert pop.ack("GNewFifo", "Aged", p.handle) is AckOutcome.OK
        assert handed == {"GNew": [b"kept", b"new"], "GNewFifo": [b"kept", b"new"]}
        nursery.cancel_scope.cancel()


async def test_a_pop_from_an_offset_retention_passed_commits_the_queues_min_offset(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A group whose committed offset retention left below the queue's min offset: its next pop commits the min
    offset, even when it finds nothing there, as 5.3.3's PopMessageProcessor.popMsgFromQueue commits the next begin
    offset of OFFSET_TOO_SMALL (normal and orderly pops alike). Without it the group's offset stayed below the
    queue, and its lag (consumerProgress, the dashboard, the exporter) counted the deleted messages for good."""
    async with EmbeddedCluster(tmp_path / "cluster", **SMALL_SEGMENTS) as cluster, trio.open_nursery() as nursery:
        use_virtual_store_clock(cluster)
        pop, _ = await start_pop(cluster, nursery)
        await create_topic(cluster, "Expired", queues=1)
        await send(cluster, "Expired", b"old1", b"old2")
        offsets = cluster.controller.context.offsets
        for group in ("GLate", "GLateFifo"):
            offsets.commit(group, "Expired", 0, 0)
        await fill_a_segment(cluster)
        await expire_old_segments(cluster, autojump_clock)
        assert cluster.controller.context.store.min_offset_in_queue("Expired", 0) == 2
        assert await pop_all(pop, "GLate", "Expired") == []
        assert await pop_all(pop, "GLateFifo", "Expired", fifo=True) == []
        assert [offsets.query(group, "Expired", 0) for group in ("GLate", "GLateFifo")] == [2, 2]
        nursery.cancel_scope.cancel()


async def test_fifo_queue_hands_out_one_batch_at_a_time_in_order(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, popper: tuple[PopService, ReviveService]
) -> None:
    await create_topic(embedded_cluster, "PopF", queues=1)
    pop, _ = popper
    await send(embedded_cluster, "PopF", *(f"m{i}".encode() for i in range(5)))
    first = pop.pop("GF", "PopF", 2, 10_000, None, fifo=True)
    assert [p.message.body for p in first] == [b"m0", b"m1"]
    assert pop.pop("GF", "PopF", 2, 10_000, None, fifo=True) == []  # one batch in flight per queue
    assert pop.ack("GF", "PopF", first[0].handle) is AckOutcome.OK
    await trio.sleep(11)
    again = pop.pop("GF", "PopF", 2, 10_000, None, fifo=True)
    assert [(p.message.body, p.attempt) for p in again] == [(b"m1", 2), (b"m2", 1)]
    for p in again:
        assert pop.ack("GF", "PopF", p.handle) is AckOutcome.OK
    rest = pop.pop("GF", "PopF", 32, 10_000, None, fifo=True)
    assert [p.message.body for p in rest] == [b"m3", b"m4"]


async def test_a_fifo_retry_that_re_reads_part_of_the_lost_batch_leaves_the_rest_unblocking(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, popper: tuple[PopService, ReviveService]
) -> None:
    """A pop repeating the attempt id of the delivery in flight re-reads the queue from its committed offset, but only
    as many messages as it now wants (its batch filled on another queue first, or the client's cache shrank it).
    ConsumerOrderInfoManager.update replaces the queue's order info with the retry's offsets: once the client acks
    what the retry handed it, the rest of the lost batch comes next, at its first attempt, not after the lost
    delivery's invisible time (an hour here) with its attempt raised though no client saw it."""
    pop, _ = popper
    hour = 3600 * 1000
    await create_topic(embedded_cluster, "FifoPart", queues=1)
    await send(embedded_cluster, "FifoPart", b"m0", b"m1", b"m2")
    lost = pop.pop("GPart", "FifoPart", 3, hour, None, fifo=True, attempt_id="a-1")
    assert [p.message.body for p in lost] == [b"m0", b"m1", b"m2"]
    [again] = pop.pop("GPart", "FifoPart", 1, hour, None, fifo=True, attempt_id="a-1")
    assert (again.message.body, again.attempt) == (b"m0", 1)
    assert pop.pop("GPart", "FifoPart", 32, hour, None, fifo=True, attempt_id="a-2") == []  # m0 still in flight
    assert pop.ack("GPart", "FifoPart", again.handle) is AckOutcome.OK
    following = pop.pop("GPart", "FifoPart", 32, hour, None, fifo=True, attempt_id="a-2")
    assert [(p.message.body, p.attempt) for p in following] == [(b"m1", 1), (b"m2", 1)]


async def test_a_fifo_change_of_invisibility_keeps_the_pop_time_so_either_handle_acks(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, popper: tuple[PopService, ReviveService]
) -> None:
    """As RocketMQ's ChangeInvisibleTimeProcessor does for an orderly message, the new handle keeps the pop time and
    names the new time; a delivery is known by its pop time, so the handle from before the change acks it too, and a
    second ack is STALE (nothing done, answered OK)."""
    await create_topic(embedded_cluster, "PopFC", queues=1)
    pop, _ = popper
    await send(embedded_cluster, "PopFC", b"f0", b"f1")
    [first] = pop.pop("GFC", "PopFC", 1, 10_000, None, fifo=True)
    await trio.sleep(5)
    outcome, renewed = pop.change_invisible("GFC", "PopFC", first.handle, 60_000)
    assert outcome is AckOutcome.OK and renewed is not None
    assert (renewed.pop_time, renewed.visible_at) == (first.handle.pop_time, pop.now_ms() + 60_000)
    assert pop.ack("GFC", "PopFC", first.handle) is AckOutcome.OK
    assert pop.ack("GFC", "PopFC", renewed) is AckOutcome.STALE
    assert [p.message.body for p in pop.pop("GFC", "PopFC", 1, 10_000, None, fifo=True)] == [b"f1"]


async def test_in_flight_messages_survive_a_clean_restart(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    clock = use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "PopR")
    await send(embedded_cluster, "PopR", b"a", b"b", b"c")
    async with trio.open_nursery() as nursery:
        pop, _ = await start_pop(embedded_cluster, nursery)
        popped = await pop_all(pop, "G", "PopR")
        assert len(popped) == 3
        [acked] = [p for p in popped if p.message.body == b"b"]
        assert pop.ack("G", "PopR", acked.handle) is AckOutcome.OK
        await trio.sleep(2)
        nursery.cancel_scope.cancel()
    await embedded_cluster.restart_broker()
    use_virtual_store_clock(embedded_cluster, clock)
    async with trio.open_nursery() as nursery:
        pop, _ = await start_pop(embedded_cluster, nursery)
        assert await pop_all(pop, "G", "PopR") == []
        await trio.sleep(INVISIBLE / 1000 + 2)
        again = await pop_all(pop, "G", "PopR")
        assert sorted(p.message.body for p in again) == [b"a", b"c"]
        assert {p.attempt for p in again} == {2}
        offsets = embedded_cluster.controller.context.offsets
        assert offsets.query(REVIVE_GROUP, pop.revive_topic, 0) > 0
        nursery.cancel_scope.cancel()


async def test_fifo_attempts_and_invisibility_survive_a_clean_restart(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    clock = use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "PopFR", queues=1)
    await send(embedded_cluster, "PopFR", b"f0", b"f1")
    async with trio.open_nursery() as nursery:
        pop, _ = await start_pop(embedded_cluster, nursery)
        first = pop.pop("GFR", "PopFR", 32, 10_000, None, fifo=True)
        assert pop.ack("GFR", "PopFR", first[0].handle) is AckOutcome.OK
        await trio.sleep(11)
        [again] = pop.pop("GFR", "PopFR", 32, INVISIBLE, None, fifo=True)
        assert (again.message.body, again.attempt) == (b"f1", 2)
        await pop.fifo_persister.wait_saved()
        saved = pop.fifo_persister.load()
        assert saved is not None and saved[("GFR", "PopFR", 0)].invisible_until == {1: again.handle.visible_at}
        nursery.cancel_scope.cancel()
    await embedded_cluster.restart_broker()
    use_virtual_store_clock(embedded_cluster, clock)
    async with trio.open_nursery() as nursery:
        pop, _ = await start_pop(embedded_cluster, nursery)
        # The restart's file work moved the virtual clock past the invisible time: what is left is the attempt.
        await trio.sleep(INVISIBLE / 1000)
        [third] = pop.pop("GFR", "PopFR", 32, 10_000, None, fifo=True)
        assert (third.message.body, third.attempt) == (b"f1", 3)
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize(
    "text", ["", "1 2 3", "a b c d e f g h i", "0 1 2 3 0  6 7 8", "0 1 2 3 0 b -6 7 8", "0 1 2 3 0 b 6 7 8 9"]
)
def test_malformed_receipt_handles_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        ReceiptHandle.decode(text)


@pytest.mark.parametrize(("index", "past"), [(1, 1 << 63), (2, 1 << 63), (3, 1 << 31), (6, 1 << 31), (8, 1 << 63)])
def test_a_receipt_handle_field_past_javas_long_or_int_is_malformed(index: int, past: int) -> None:
    """RocketMQ's ReceiptHandle.decode (common/.../consumer/ReceiptHandle.java) reads the offsets and times with
    Long.parseLong, the revive queue and queue ids with Integer.parseInt: a number past Java's long (int) is no
    handle, the largest one is."""
    fields = ["0", "1700000000000", "30000", "0", "0", "broker-a", "0", "0", "0"]
    fields[index] = str(past - 1)
    ReceiptHandle.decode(" ".join(fields))
    fields[index] = str(past)
    with pytest.raises(ValueError):
        ReceiptHandle.decode(" ".join(fields))


def test_receipt_handle_round_trips() -> None:
    handle = ReceiptHandle(0, 1732520000000, 30000, 999, 0, "broker-a", 1, 5, 4096)
    assert handle.encode() == "0 1732520000000 30000 999 0 broker-a 1 5 4096"
    assert ReceiptHandle.decode(handle.encode()) == handle and handle.fifo
    assert attrs.evolve(handle, revive_qid=0).fifo is False


async def test_fifo_queue_with_a_tag_filter_moves_past_what_does_not_match(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, popper: tuple[PopService, ReviveService]
) -> None:
    await create_topic(embedded_cluster, "PopFT", queues=1)
    pop, _ = popper
    await send(embedded_cluster, "PopFT", b"skip-0", tags="B")
    await send(embedded_cluster, "PopFT", b"a-1", b"a-2", tags="A")
    only_a = frozenset({"A"})
    first = pop.pop("GFT", "PopFT", 32, 10_000, only_a, fifo=True)
    assert [p.message.body for p in first] == [b"a-1", b"a-2"]
    for p in first:
        assert pop.ack("GFT", "PopFT", p.handle) is AckOutcome.OK
    assert embedded_cluster.controller.context.offsets.query("GFT", "PopFT", 0) == 3
    await send(embedded_cluster, "PopFT", b"skip-3", tags="B")
    await send(embedded_cluster, "PopFT", b"a-4", tags="A")
    assert [p.message.body for p in pop.pop("GFT", "PopFT", 32, 10_000, only_a, fifo=True)] == [b"a-4"]


async def test_sql92_filter_pops_matching_messages_and_their_redelivery(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, popper: tuple[PopService, ReviveService]
) -> None:
    await create_topic(embedded_cluster, "PopSql", queues=1)
    pop, _ = popper
    async with Producer("pg-pop", embedded_cluster.namesrv_addr) as producer:
        for body, region, price in ((b"eu-cheap", "eu", "5"), (b"us", "us", "50"), (b"eu-dear", "eu", "50")):
            await producer.send(Message("PopSql", body, properties={"region": region, "price": price}))
    dear_eu = compile_sql92("region = 'eu' AND price > 10").matches_raw
    [first] = pop.pop("GS", "PopSql", 32, INVISIBLE, None, property_filter=dear_eu)
    assert first.message.body == b"eu-dear"
    # What the filter skipped counts as consumed: the group's offset is past all three.
    assert embedded_cluster.controller.context.offsets.query("GS", "PopSql", 0) == 3
    await trio.sleep(INVISIBLE / 1000 + 4)
    # The redelivery comes from the retry topic, which keeps the properties the filter reads.
    [again] = pop.pop("GS", "PopSql", 32, INVISIBLE, None, property_filter=dear_eu)
    assert (again.message.body, again.attempt) == (b"eu-dear", 2)
    nothing = compile_sql92("region = 'asia'").matches_raw
    assert pop.pop("GS2", "PopSql", 32, INVISIBLE, None, property_filter=nothing) == []


async def test_a_too_long_retry_name_on_a_broker_briefly_taking_no_writes_does_not_lose_the_message(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, popper: tuple[PopService, ReviveService]
) -> None:
    """A group and topic whose pop retry topic name passes 127 bytes: the revive loop's fallback is the DLQ, through
    the send-back, which refuses while the broker takes no writes (a drain). That refusal is for now: the revive loop
    retries the record, and once the broker takes writes the message is in the DLQ (it was dropped for good)."""
    long_topic, long_group = "T" * 60, "G" * 70  # %RETRY%<70>_<60>: 139 bytes
    await create_topic(embedded_cluster, long_topic)
    pop, _ = popper
    await send(embedded_cluster, long_topic, b"poison")
    assert [p.message.body for p in pop.pop(long_group, long_topic, 32, 10_000, None)] == [b"poison"]
    ctx = embedded_cluster.controller.context
    writable = ctx.config.broker_permission
    ctx.config = attrs.evolve(ctx.config, broker_permission=PERM_READ)
    await trio.sleep(15)  # past the invisible time and the CK grace: the revive loop meets the CK now
    ctx.config = attrs.evolve(ctx.config, broker_permission=writable)
    await trio.sleep(5)
    assert [m.body for m in stored(embedded_cluster, f"%DLQ%{long_group}")] == [b"poison"]


async def test_a_dlq_fallback_refused_for_good_does_not_stop_every_other_groups_redelivery(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """The revive loop's DLQ fallback retries only a refusal for now (NO_PERMISSION, a broker taking no writes): one
    for good, such as SUBSCRIPTION_GROUP_NOT_EXIST once the group was deleted (autoCreateSubscriptionGroup off), is
    logged and dropped. Retried, it blocked the revive queue, read in order, for ever: another group's unacknowledged
    message was never redelivered (RocketMQ re-puts a failed CK and moves on)."""
    long_topic, long_group = "T" * 60, "G" * 70  # %RETRY%<70>_<60>: 138 bytes, refused by the store for good
    async with EmbeddedCluster(tmp_path / "c", auto_create_subscription_group=False, **SMALL_STORE) as cluster:
        use_virtual_store_clock(cluster)
        async with trio.open_nursery() as nursery:
            pop, _ = await start_pop(cluster, nursery)  # the broker's own: a second loop would revive each CK again
            await create_topic(cluster, long_topic)
            await create_topic(cluster, "Plain")
            async with Admin(cluster.namesrv_addr) as admin:
                for group in (long_group, "GP"):
                    await admin.create_subscription_group(SubscriptionGroupConfig(group))
            async with Producer("pg-revive", cluster.namesrv_addr) as producer:
                await producer.send(Message(long_topic, b"poison"))
                await producer.send(Message("Plain", b"innocent"))
            assert [p.message.body for p in pop.pop(long_group, long_topic, 32, 10_000, None)] == [b"poison"]
            await trio.sleep(1)  # the innocent message's CK is due after the poison's
            assert [p.message.body for p in pop.pop("GP", "Plain", 32, 10_000, None)] == [b"innocent"]
            async with Admin(cluster.namesrv_addr) as admin:
                await admin.delete_subscription_group(long_group)
            await trio.sleep(30)  # both CKs due long ago
            again = pop.pop("GP", "Plain", 32, 10_000, None)
            nursery.cancel_scope.cancel()
        assert [(p.message.body, p.attempt) for p in again] == [(b"innocent", 2)]


async def test_a_broker_that_is_not_master_revives_nothing_until_it_is_again(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, popper: tuple[PopService, ReviveService]
) -> None:
    """RocketMQ 5's PopReviveService runs only while its broker is master (``shouldRunPopRevive``, set on the master
    role change): a slave, or a DLedger member that stepped down, leaves the checkpoints to the master. Back as master
    it revives what came due meanwhile."""
    await create_topic(embedded_cluster, "PopRole", queues=1)
    pop, revive = popper
    await send(embedded_cluster, "PopRole", b"kept")
    assert len(await pop_all(pop, "G", "PopRole")) == 1
    ctx = embedded_cluster.controller.context
    master = ctx.config
    ctx.config = attrs.evolve(master, broker_role="SLAVE")  # as a DLedger role change rewrites the live config
    await trio.sleep(INVISIBLE / 1000 + 5)
    assert revive.revived == 0
    ctx.config = master
    await trio.sleep(3)
    assert revive.revived == 1
    [again] = await pop_all(pop, "G", "PopRole")
    assert (again.message.body, again.attempt) == (b"kept", 2)


async def test_an_ack_or_change_of_invisibility_of_an_offset_outside_the_queue_is_not_found(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, popper: tuple[PopService, ReviveService]
) -> None:
    """AckMessageProcessor answers NO_MESSAGE for an offset outside [min, max] of its queue, and
    ChangeInvisibleTimeProcessor for one outside [min, max): no ACK or CK is written for a message that is not there."""
    await create_topic(embedded_cluster, "PopRange", queues=1)
    pop, _ = popper
    await send(embedded_cluster, "PopRange", b"a")
    [popped] = await pop_all(pop, "G", "PopRange")
    store = embedded_cluster.controller.context.store
    before = store.max_offset_in_queue(pop.revive_topic, 0)
    past = attrs.evolve(popped.handle, offset=2)
    assert pop.ack("G", "PopRange", past) is AckOutcome.NOT_FOUND
    at_end = attrs.evolve(popped.handle, offset=1)
    assert pop.change_invisible("G", "PopRange", at_end, INVISIBLE) == (AckOutcome.NOT_FOUND, None)
    assert store.max_offset_in_queue(pop.revive_topic, 0) == before
    assert pop.ack("G", "PopRange", popped.handle) is AckOutcome.OK


async def test_a_long_invisible_ack_does_not_make_a_restart_redeliver_what_was_revived(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """An ACK of a handle invisible for an hour waits that long in the revive loop for its CK, and the revive offset
    stays at it so a restart reads it again. The CKs revived behind it meanwhile must not be revived a second time
    after the restart (RocketMQ's AckMessageProcessor parks the ACK until the handle's visible time like the CK, so
    its revive offset moves past what PopReviveService revived)."""
    clock = use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "PopPin", queues=1)
    retry = pop_retry_topic("G", "PopPin")
    async with trio.open_nursery() as nursery:
        pop, revive = await start_pop(embedded_cluster, nursery)
        await send(embedded_cluster, "PopPin", b"long")
        [long] = await pop_all(pop, "G", "PopPin", invisible=3_600_000)
        assert pop.ack("G", "PopPin", long.handle) is AckOutcome.OK
        await send(embedded_cluster, "PopPin", b"short")
        [short] = await pop_all(pop, "G", "PopPin")
        assert short.message.body == b"short"
        await trio.sleep(INVISIBLE / 1000 + 5)
        assert revive.revived == 1
        assert [m.body for m in stored(embedded_cluster, retry)] == [b"short"]
        nursery.cancel_scope.cancel()
    await embedded_cluster.restart_broker()
    use_virtual_store_clock(embedded_cluster, clock)
    async with trio.open_nursery() as nursery:
        pop, revive = await start_pop(embedded_cluster, nursery)
        await trio.sleep(5)
        assert [m.body for m in stored(embedded_cluster, retry)] == [b"short"], "revived twice across the restart"
        nursery.cancel_scope.cancel()


async def test_a_broker_has_one_pop_service_and_one_revive_loop(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """Every caller of ``pop_service`` gets the same pop service and revive loop, which runs since the broker started
    (5.3.3's BrokerController starts PopReviveService); a second run of the loop reports started at once and takes over
    when the first ends (two loops over one revive queue would revive twice)."""
    controller = embedded_cluster.controller
    pop, revive = controller.pop_service()
    assert controller.pop_service() == (pop, revive)
    assert revive.running, "started with the broker"
    first = trio.CancelScope()

    async def run_first(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        with first:
            await revive.run(task_status=task_status)

    async with trio.open_nursery() as nursery:
        await nursery.start(run_first)
        await nursery.start(revive.run)
        assert revive.running
        first.cancel()
        await trio.sleep(1)
        assert revive.running, "the second run took over"
        nursery.cancel_scope.cancel()
    assert revive.running, "the broker's own loop runs on"
