"""Delay levels in virtual time: SCHEDULE_TOPIC_XXXX storage, delivery when due to the real topic and queue,
delayOffset.json progress, and a clean broker restart that neither loses nor repeats a delivery."""

from __future__ import annotations

import math
from pathlib import Path

import orjson
import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from broker.schedule import ScheduleMessageService
from client.consumer.listener import ConsumeConcurrentlyStatus
from client.consumer.push import PushConsumer
from client.message import Message, MessageExt
from client.producer import Producer
from remoting.codec.bodies import ConsumeFromWhere
from remoting.codec.message import MessageRecord, decode_record
from remoting.codec.topics import SCHEDULE_TOPIC
from store.message_store import MessageStore
from store.store_config import StoreConfig
from tests.conftest import SMALL_STORE
from tests.semantics.helpers import create_topic, use_virtual_store_clock
from tests.semantics.test_timer import _read_all


def _stored(cluster: EmbeddedCluster, topic: str, queue_id: int) -> list[MessageExt]:
    """Every message of the queue (a store read returns at most 32 at a time)."""
    msgs: list[MessageExt] = []
    while True:
        result = cluster.controller.context.store.get(topic, queue_id, len(msgs), 32)
        if not result.messages:
            return msgs
        msgs.extend(decode_record(m) for m in result.messages)


def _recording_consumer(
    cluster: EmbeddedCluster, group: str, topic: str, seen: list[tuple[float, MessageExt]]
) -> PushConsumer:
    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        seen.extend((trio.current_time(), m) for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(group, cluster.namesrv_addr, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    consumer.subscribe(topic)
    consumer.register_message_listener(listener)
    return consumer


async def test_delay_levels_deliver_at_their_virtual_time_to_the_real_topic_and_queue(
    long_haul_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    use_virtual_store_clock(long_haul_cluster)
    await create_topic(long_haul_cluster, "Delayed", queues=4)
    seen: list[tuple[float, MessageExt]] = []
    delays = {1: 1, 2: 5, 3: 10, 5: 60, 16: 1800, 18: 7200, 30: 7200}  # level 30 is clamped to the last level
    consumer = _recording_consumer(long_haul_cluster, "cg-delay", "Delayed", seen)
    async with Producer("pg-delay", long_haul_cluster.namesrv_addr) as producer, consumer:
        await trio.sleep(30)  # the consumer owns its queues before anything is due
        start = trio.current_time()
        sent = {}
        for level in delays:
            result = await producer.send(Message("Delayed", f"level-{level}".encode(), delay_level=level))
            sent[f"level-{level}".encode()] = result
        with trio.fail_after(8000):
            while len(seen) < len(delays):
                await trio.sleep(0.5)
    assert len(seen) == len(delays)
    for at, msg in seen:
        level = int(msg.body.decode().split("-")[1])
        assert delays[level] <= at - start < delays[level] + 1.5, (level, at - start)
        result = sent[msg.body]
        assert msg.queue_id == result.queue_id
        assert msg.properties["REAL_TOPIC"] == "Delayed"
        assert msg.properties["REAL_QID"] == str(result.queue_id)
        assert msg.properties["DELAY"] == str(min(level, 18))  # kept: messageTimeup builds the string first
        assert msg.properties["UNIQ_KEY"] == result.msg_id


async def test_a_delivered_delayed_message_keeps_its_delay_property(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """4.9.8's ScheduleMessageService.messageTimeup builds the delivered copy's properties string (setPropertiesString)
    before it clears DELAY from the map, and the CommitLog writes that string: the consumer's message still carries
    ``DELAY=<level>`` (MessageExt.getDelayTimeLevel() answers the level)."""
    use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "DelayKept")
    async with Producer("pg-delay-kept", embedded_cluster.namesrv_addr) as producer:
        await producer.send(Message("DelayKept", b"d", delay_level=2))
    await trio.sleep(8)
    (msg,) = _stored(embedded_cluster, "DelayKept", 0)
    assert (msg.properties["DELAY"], msg.properties["REAL_TOPIC"]) == ("2", "DelayKept")


async def test_a_delay_level_wins_over_timer_properties_which_are_dropped(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """RocketMQ 5's HookUtils.checkIfTimerMessage: a message with a delay level is no timer message, and its
    TIMER_DELIVER_MS / TIMER_DELAY_SEC / TIMER_DELAY_MS are cleared before it is stored, so neither the schedule's copy
    nor the delivered message carries them (a delivered copy sent on again would otherwise be parked in the timer)."""
    clock = use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "DelayNotTimer")
    timer_props = {
        "TIMER_DELAY_SEC": "3600",
        "TIMER_DELAY_MS": "7200000",
        "TIMER_DELIVER_MS": str(clock() + 10_800_000),
    }
    async with Producer("pg-delay-timer", embedded_cluster.namesrv_addr) as producer:
        await producer.send(Message("DelayNotTimer", b"d", delay_level=2, properties=dict(timer_props)))
    (parked,) = _stored(embedded_cluster, SCHEDULE_TOPIC, 1)
    assert embedded_cluster.controller.timer.pending == 0
    await trio.sleep(8)
    (msg,) = _stored(embedded_cluster, "DelayNotTimer", 0)
    for copy in (parked, msg):
        assert copy.properties["DELAY"] == "2"
        assert not set(timer_props) & set(copy.properties), copy.properties


async def test_a_delay_in_other_unicode_decimal_digits_is_a_level_as_javas_parse_int_reads_it(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """4.9.8's Message.getDelayTimeLevel is Integer.parseInt(DELAY), whose Character.digit takes any Unicode decimal
    digit of one UTF-16 unit: ``DELAY=\u0662`` (Arabic-Indic 2) is stored in the schedule at level 2 and delivered 5 s
    later. We answered SYSTEM_ERROR (NumberFormatException) and stored nothing."""
    use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "DelayDigits")
    async with Producer("pg-delay-digits", embedded_cluster.namesrv_addr) as producer:
        await producer.send(Message("DelayDigits", b"d", properties={"DELAY": "\u0662"}))
    (parked,) = _stored(embedded_cluster, SCHEDULE_TOPIC, 1)
    assert parked.properties["REAL_TOPIC"] == "DelayDigits"
    await trio.sleep(8)
    assert [m.body for m in _stored(embedded_cluster, "DelayDigits", 0)] == [b"d"]


async def test_a_delayed_message_is_stored_in_its_levels_schedule_queue_with_the_delivery_time_as_tags_code(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "Scheduled")
    store = embedded_cluster.controller.context.store
    async with Producer("pg-sched", embedded_cluster.namesrv_addr) as producer:
        await producer.send(Message("Scheduled", b"x", tags="TagA", delay_level=4))
    [stored] = _stored(embedded_cluster, SCHEDULE_TOPIC, 3)
    assert stored.properties["REAL_TOPIC"] == "Scheduled"
    assert stored.properties["REAL_QID"] == "0"
    assert stored.properties["DELAY"] == "4"
    entry = store.consume_queues[(SCHEDULE_TOPIC, 3)].entry(0)
    assert entry is not None and entry[2] == stored.store_timestamp + 30_000
    assert store.max_offset_in_queue("Scheduled", 0) == 0
    assert embedded_cluster.controller.schedule.pending(4) == 1


async def test_delay_progress_is_saved_to_delay_offset_json_periodically_and_at_shutdown(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "Progress")
    path = Path(embedded_cluster.controller.context.config.store_path_root_dir) / "config" / "delayOffset.json"
    async with Producer("pg-progress", embedded_cluster.namesrv_addr) as producer:
        for _ in range(3):
            await producer.send(Message("Progress", b"x", delay_level=2))
        await trio.sleep(7)
        assert embedded_cluster.controller.context.store.max_offset_in_queue("Progress", 0) == 3
        # The periodic save (every 10 s) writes it; virtual time is not asserted here because the clock jumps
        # while the save runs in a worker thread.
        await embedded_cluster.controller.schedule.wait_saved()
        assert orjson.loads(path.read_bytes())["offsetTable"] == {"2": 3}
        for _ in range(2):
            await producer.send(Message("Progress", b"y", delay_level=1))
        await trio.sleep(2)
    await embedded_cluster.stop_broker()
    assert orjson.loads(path.read_bytes())["offsetTable"] == {"1": 2, "2": 3}
    await embedded_cluster.start_broker()


async def test_a_broker_restart_with_pending_delays_neither_loses_nor_repeats_a_delivery(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    clock = use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "Survive")
    async with Producer("pg-survive", embedded_cluster.namesrv_addr) as producer:
        for i in range(30):
            level = (2, 3, 4)[i % 3]  # 5 s, 10 s, 30 s
            await producer.send(Message("Survive", f"m{i}".encode(), delay_level=level))
            await trio.sleep(0.5)
    await trio.sleep(2)  # a restart with some of each level delivered and the rest pending
    delivered_before = len(_stored(embedded_cluster, "Survive", 0))
    assert 0 < delivered_before < 30
    # Virtual time stands still during the restart: autojump would otherwise race ahead while the store's files
    # are closed and opened in worker threads.
    autojump_clock.autojump_threshold = math.inf
    await embedded_cluster.restart_broker()
    autojump_clock.autojump_threshold = 0
    use_virtual_store_clock(embedded_cluster, clock)
    await trio.sleep(120)
    bodies = [m.body for m in _stored(embedded_cluster, "Survive", 0)]
    assert sorted(bodies) == sorted(f"m{i}".encode() for i in range(30))
    assert embedded_cluster.controller.schedule.pending_total() == 0


async def test_message_delay_level_is_configurable(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    async with EmbeddedCluster(tmp_path, message_delay_level="2s 4s", **SMALL_STORE) as cluster:
        use_virtual_store_clock(cluster)
        await create_topic(cluster, "Custom")
        async with Producer("pg-custom", cluster.namesrv_addr) as producer:
            start = trio.current_time()
            await producer.send(Message("Custom", b"x", delay_level=7))  # clamped to level 2: 4 s
        while not _stored(cluster, "Custom", 0):
            await trio.sleep(0.1)
        assert 4 <= trio.current_time() - start < 5
        assert _stored(cluster, SCHEDULE_TOPIC, 1)[0].properties["DELAY"] == "2"


async def test_a_late_slave_sync_table_does_not_move_a_running_schedule_back(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """A DLedger member's slave sync round that began while it followed may hand over the old leader's delay offsets
    after it became the leader and started delivering. 4.9.8's SlaveSynchronize.syncDelayOffset only writes
    ``delayOffset.json`` (the running ScheduleMessageService keeps its table and overwrites the file at its next
    persist); adopting the stale table into the running schedule moved it back and delivered everything again."""
    use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "LateSync")
    schedule = embedded_cluster.controller.schedule
    async with Producer("pg-late-sync", embedded_cluster.namesrv_addr) as producer:
        for i in range(3):
            await producer.send(Message("LateSync", f"m{i}".encode(), delay_level=1))
    await trio.sleep(5)
    assert len(_stored(embedded_cluster, "LateSync", 0)) == 3
    schedule.adopt_offsets({1: 0})  # the round's stale table arrives now
    schedule.notify(1)
    await trio.sleep(5)
    assert [m.body for m in _stored(embedded_cluster, "LateSync", 0)] == [b"m0", b"m1", b"m2"]
    assert schedule.offsets[1] == 3


def test_the_progress_of_a_level_no_longer_configured_is_kept_for_when_it_comes_back(tmp_path: Path) -> None:
    """4.9.8's ScheduleMessageService.decode puts every level of ``delayOffset.json`` into its offset table and
    ``encode`` writes the whole table back; only ``correctDelayOffset`` and the delivery tasks are limited to the
    configured levels. A broker restarted once with fewer ``messageDelayLevel`` entries therefore keeps the progress
    of the others, and restoring them delivers nothing twice. Dropping them made the restored level deliver its
    whole queue again."""
    now = [1_000_000]
    root = tmp_path / "store"
    config_dir = root / "config"
    store = MessageStore(StoreConfig(root, mapped_file_size_commit_log=1 << 20, now_ms=lambda: now[0]))
    store.load()

    def delivered() -> list[bytes]:
        return [m.body for m in _read_all(store, "Target", 0)]

    async def save(service: ScheduleMessageService) -> None:
        service._persister.mark_dirty()
        await service.persist()

    service = ScheduleMessageService(store, config_dir, delay_levels="1s 5s 10s")
    service.load()
    for i in range(3):
        store.append(service.rewrite(MessageRecord(topic="Target", body=f"m{i}".encode(), queue_id=0), 3))
    now[0] += 11_000
    service.deliver_due(3)
    assert delivered() == [b"m0", b"m1", b"m2"]
    trio.run(save, service)

    fewer = ScheduleMessageService(store, config_dir, delay_levels="1s 5s")  # a restart with two levels
    fewer.load()
    trio.run(save, fewer)
    assert orjson.loads((config_dir / "delayOffset.json").read_bytes())["offsetTable"].get("3") == 3

    restored = ScheduleMessageService(store, config_dir, delay_levels="1s 5s 10s")  # and with three again
    restored.load()
    restored.deliver_due(3)
    bodies = delivered()
    store.close()
    assert bodies == [b"m0", b"m1", b"m2"]


async def test_a_schedule_with_a_flush_interval_of_zero_or_less_delivers_and_saves_only_at_its_stop(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A DLedger member that becomes leader starts the schedule in 4.9.8's BrokerController.changeToMaster, which logs
    the IllegalArgumentException of ScheduleMessageService.start's ``scheduleAtFixedRate`` for a
    ``flushDelayOffsetInterval`` of 0 or less: the level tasks scheduled before it deliver, no periodic save runs, and
    shutdown's persist saves the offsets. Ours ended the schedule on trio's ValueError (a negative sleep), or spun."""
    now = [1_000_000]
    root = tmp_path / "store"
    store = MessageStore(StoreConfig(root, mapped_file_size_commit_log=1 << 20, now_ms=lambda: now[0]))
    store.load()
    service = ScheduleMessageService(store, root / "config", delay_levels="1s", flush_interval=-1.0)
    store.append(service.rewrite(MessageRecord(topic="Target", body=b"due", queue_id=0), 1))
    now[0] += 2_000
    async with trio.open_nursery() as nursery:
        await nursery.start(service.run)
        await trio.sleep(30)
        nursery.cancel_scope.cancel()
    bodies = [m.body for m in _read_all(store, "Target", 0)]
    saved = orjson.loads((root / "config" / "delayOffset.json").read_bytes())["offsetTable"]
    store.close()
    assert (bodies, saved) == ([b"due"], {"1": 1})
