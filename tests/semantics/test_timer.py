"""Timer messages (TIMER_DELIVER_MS / TIMER_DELAY_SEC / TIMER_DELAY_MS) in virtual time: parked in the durable
timer, delivered to the real topic no earlier than asked and less than a second later, rolled on when beyond the
wheel's span, kept across a clean broker restart without loss or repeats, rebuilt after a crash, and counted in the
broker's runtime info."""

from __future__ import annotations

import math
import random
from pathlib import Path

import attrs
import orjson
import pytest
import trio

from broker.embedded import EmbeddedCluster
from broker.pop import PopService
from broker.timer import TIMER_TOPIC, TimerStore
from client.admin import Admin
from client.errors import MQBrokerError, SendFailedError
from client.message import Message, MessageExt, SendStatus
from client.producer import Producer
from processors.common import RequestRejected
from remoting.client import RemotingClient
from remoting.codec.codes import ResponseCode
from remoting.codec.command import request
from remoting.codec.message import MessageRecord, decode_record
from store.maintenance import clean_expired_consume_queues
from store.message_store import MessageStore
from store.store_config import StoreConfig
from tests.conftest import SMALL_STORE
from tests.semantics.helpers import create_topic, use_virtual_store_clock
from tests.store.store_helpers import message, open_store


def _stored(cluster: EmbeddedCluster, topic: str) -> list[MessageExt]:
    return _read_all(cluster.controller.context.store, topic, 0)


def _read_all(store: MessageStore, topic: str, queue_id: int) -> list[MessageExt]:
    """Every message of the queue (a store read returns at most 32 at a time)."""
    msgs: list[MessageExt] = []
    while True:
        result = store.get(topic, queue_id, len(msgs), 32)
        if not result.messages:
            return msgs
        msgs.extend(decode_record(m) for m in result.messages)


def _assert_on_time(msgs: list[MessageExt]) -> None:
    for msg in msgs:
        late = msg.store_timestamp - int(msg.properties["TIMER_OUT_MS"])
        assert 0 <= late < 1000, late


async def test_timer_messages_are_delivered_at_their_time_within_a_second(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    clock = use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "Timed")
    rng = random.Random(6)
    async with Producer("pg-timer", embedded_cluster.namesrv_addr) as producer:
        now = clock()
        await producer.send(Message("Timed", b"sec", properties={"TIMER_DELAY_SEC": "90"}))
        await producer.send(Message("Timed", b"ms", properties={"TIMER_DELAY_MS": "2500"}))
        await producer.send(Message("Timed", b"abs", properties={"TIMER_DELIVER_MS": str(now + 45_678)}))
        for i in range(40):
            delay_ms = rng.randrange(200, 60_000)
            await producer.send(Message("Timed", f"r{i}".encode(), properties={"TIMER_DELAY_MS": str(delay_ms)}))
        assert embedded_cluster.controller.timer.pending == 43
        assert _stored(embedded_cluster, "Timed") == []
        await trio.sleep(100)
    delivered = _stored(embedded_cluster, "Timed")
    assert len(delivered) == 43
    _assert_on_time(delivered)
    by_body = {m.body: m for m in delivered}
    assert 90_000 <= by_body[b"sec"].store_timestamp - now < 91_000
    assert 2_500 <= by_body[b"ms"].store_timestamp - now < 3_500
    # Floored to the precision (100 ms), as RocketMQ 5.3's HookUtils.transformTimerMessage stores it.
    assert by_body[b"abs"].properties["TIMER_OUT_MS"] == str((now + 45_678 - 1) // 100 * 100)
    for msg in delivered:
        assert msg.properties["REAL_TOPIC"] == "Timed"
        assert msg.properties["REAL_QID"] == "0"
    # TimerMessageStore.convertMessage copies the whole properties string: the producer's TIMER_* stay (a 5.x
    # consumer's getDeliverTimeMs() reads TIMER_DELIVER_MS), and TIMER_OUT_MS keeps them from being parked again.
    assert by_body[b"sec"].properties["TIMER_DELAY_SEC"] == "90"
    assert by_body[b"ms"].properties["TIMER_DELAY_MS"] == "2500"
    assert by_body[b"abs"].properties["TIMER_DELIVER_MS"] == str(now + 45_678)
    assert embedded_cluster.controller.timer.pending == 0


async def test_a_timer_time_already_past_is_delivered_at_once_and_bad_times_are_refused(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    clock = use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "TimedNow")
    async with Producer("pg-timer-now", embedded_cluster.namesrv_addr) as producer:
        await producer.send(Message("TimedNow", b"past", properties={"TIMER_DELIVER_MS": str(clock() - 5000)}))
        assert [m.body for m in _stored(embedded_cluster, "TimedNow")] == [b"past"]
        for bad in ({"TIMER_DELAY_SEC": "soon"}, {"TIMER_DELAY_SEC": str(4 * 24 * 3600)}):
            with pytest.raises(MQBrokerError) as info:
                await producer.send(Message("TimedNow", b"bad", properties=bad))
            assert info.value.code == 13  # MESSAGE_ILLEGAL


async def test_timer_messages_due_at_the_same_time_are_delivered_oldest_first(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """RocketMQ 5.3's TimerMessageStore.dequeue walks a slot's timer log chain back from its newest entry but
    ``addFirst``s each one onto its stack, so a slot's messages go out oldest first: in the order they were sent."""
    clock = use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "SameTime")
    async with Producer("pg-same-time", embedded_cluster.namesrv_addr) as producer:
        at = clock() + 5_000
        for i in range(5):
            await producer.send(Message("SameTime", f"m{i}".encode(), properties={"TIMER_DELIVER_MS": str(at)}))
    await trio.sleep(10)
    assert [m.body for m in _stored(embedded_cluster, "SameTime")] == [b"m0", b"m1", b"m2", b"m3", b"m4"]


async def test_a_message_already_carrying_timer_out_ms_is_not_parked_again(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """RocketMQ 5.3's HookUtils.checkIfTimerMessage ("double check"): a message that already carries TIMER_OUT_MS
    (one a timer delivered, forwarded or re-sent with its properties) is not a timer message, whatever TIMER_DELAY_SEC
    it still has: it is stored at once."""
    clock = use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "Forwarded")
    props = {"TIMER_DELAY_SEC": "600", "TIMER_OUT_MS": str(clock() - 1_000)}
    async with Producer("pg-forwarded", embedded_cluster.namesrv_addr) as producer:
        await producer.send(Message("Forwarded", b"f", properties=props))
    assert [m.body for m in _stored(embedded_cluster, "Forwarded")] == [b"f"]
    assert embedded_cluster.controller.timer.pending == 0


async def test_pending_timers_are_shown_in_the_brokers_runtime_info(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "TimedView")
    async with Producer("pg-timer-view", embedded_cluster.namesrv_addr) as producer:
        for _ in range(5):
            await producer.send(Message("TimedView", b"x", properties={"TIMER_DELAY_SEC": "600"}))
        await producer.send(Message("TimedView", b"d", delay_level=3))
    async with Admin(embedded_cluster.namesrv_addr) as admin:
        status = await admin.broker_status(embedded_cluster.broker_addr)
    assert status["timerPendingCount"] == "5"
    assert status["timerCongestNum"] == "5"  # RocketMQ 5.3's count of the wheel's entries from the read time on
    assert "scheduleMessageOffset_3" not in status  # nothing delivered yet: not in the offset table
    assert "brokerVersionDesc" in status


async def test_timer_read_behind_is_reported_in_seconds_and_stays_current_while_idle(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """RocketMQ 5.3's AdminBrokerProcessor.prepareRuntimeInfo: ``timerReadBehind`` = TimerMessageStore
    .getDequeueBehind() = (now - currReadTimeMs) / 1000, in seconds, and the dequeue moves currReadTimeMs over empty
    slots as time passes (moveReadTime): an idle timer reports 0 or 1, not the time since its last delivery."""
    use_virtual_store_clock(embedded_cluster)
    await trio.sleep(30)
    async with Admin(embedded_cluster.namesrv_addr) as admin:
        status = await admin.broker_status(embedded_cluster.broker_addr)
    assert int(status["timerReadBehind"]) <= 1, status["timerReadBehind"]
    assert (status["timerCongestNum"], status["timerEnqueueTps"], status["timerDequeueTps"]) == ("0", "0.0", "0.0")


async def test_timer_rates_count_filings_and_deliveries_per_second_of_the_last_period(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """``timerEnqueueTps`` / ``timerDequeueTps``: RocketMQ 5.3's perf counters ``enqueue_put`` / ``dequeue_put``
    read as their last 10 s window's rate."""
    use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "TimedRates")
    async with Producer("pg-timer-rates", embedded_cluster.namesrv_addr) as producer:
        for _ in range(20):
            await producer.send(Message("TimedRates", b"r", properties={"TIMER_DELAY_SEC": "2"}))
    async with Admin(embedded_cluster.namesrv_addr) as admin:
        await trio.sleep(5)
        busy = await admin.broker_status(embedded_cluster.broker_addr)
        await trio.sleep(20)
        idle = await admin.broker_status(embedded_cluster.broker_addr)
    assert float(busy["timerEnqueueTps"]) > 0 and float(busy["timerDequeueTps"]) > 0
    assert (idle["timerEnqueueTps"], idle["timerDequeueTps"]) == ("0.0", "0.0")


async def test_a_broker_restart_with_pending_timers_neither_loses_nor_repeats_a_delivery(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    clock = use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "TimedRestart")
    async with Producer("pg-timer-restart", embedded_cluster.namesrv_addr) as producer:
        for i in range(60):
            delay = 1 + i * 2
            await producer.send(Message("TimedRestart", f"t{i}".encode(), properties={"TIMER_DELAY_SEC": str(delay)}))
    await trio.sleep(50)
    before = len(_stored(embedded_cluster, "TimedRestart"))
    assert 0 < before < 60
    # Virtual time stands still during the restart: autojump would otherwise race ahead while the store's files
    # are closed and opened in worker threads.
    autojump_clock.autojump_threshold = math.inf
    await embedded_cluster.restart_broker()
    autojump_clock.autojump_threshold = 0
    use_virtual_store_clock(embedded_cluster, clock)
    await trio.sleep(150)
    delivered = _stored(embedded_cluster, "TimedRestart")
    assert sorted(m.body for m in delivered) == sorted(f"t{i}".encode() for i in range(60))
    _assert_on_time(delivered[before:])
    assert embedded_cluster.controller.timer.pending == 0


async def test_timers_beyond_the_wheels_span_are_rolled_on_and_delivered_on_time(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # A 2 s wheel (20 slots of 100 ms): a 25 s timer goes round about a dozen times.
    overrides = {**SMALL_STORE, "timer_wheel_slots": 20, "mapped_file_size_timer_log": 32 * 64}
    async with EmbeddedCluster(tmp_path, **overrides) as cluster:
        use_virtual_store_clock(cluster)
        await create_topic(cluster, "TimedFar")
        async with Producer("pg-timer-far", cluster.namesrv_addr) as producer:
            for i, delay_ms in enumerate((500, 1_900, 2_100, 7_777, 25_000)):
                props = {"TIMER_DELAY_MS": str(delay_ms)}
                await producer.send(Message("TimedFar", f"f{i}".encode(), properties=props))
        await trio.sleep(30)
        delivered = _stored(cluster, "TimedFar")
        assert len(delivered) == 5
        _assert_on_time(delivered)
        timers = cluster.controller.timer.timers
        assert timers.rolled >= 12
        # Log segments the wheel has passed are deleted.
        assert len(timers.log.queue.files) <= 2


def _timer_record(deliver_ms: int, body: bytes) -> MessageRecord:
    props = f"REAL_TOPIC\x01Crashed\x02REAL_QID\x010\x02TIMER_OUT_MS\x01{deliver_ms}"
    return MessageRecord(topic=TIMER_TOPIC, body=body, properties=props)


def open_timer_store(tmp_path: Path, now: list[int], **timer: int) -> tuple[MessageStore, Path, TimerStore]:
    """A loaded store whose clock reads ``now[0]``, its config directory and a loaded 64-slot timer over it (with
    ``timer``'s other settings)."""
    config = StoreConfig(tmp_path / "store", mapped_file_size_commit_log=1 << 20, now_ms=lambda: now[0])
    config_dir = tmp_path / "store" / "config"
    store = MessageStore(config)
    store.load()
    timers = TimerStore(store, config_dir, slots=64, **timer)
    timers.load()
    return store, config_dir, timers


def _filed_in_one_slot(tmp_path: Path, now: list[int], count: int) -> tuple[MessageStore, Path, TimerStore]:
    """:func:`open_timer_store` with ``count`` messages (bodies c0, c1, ...) filed for ``now`` + 1 s."""
    store, config_dir, timers = open_timer_store(tmp_path, now)
    for i in range(count):
        store.append(_timer_record(now[0] + 1_000, f"c{i}".encode()))
    assert timers.enqueue(100) == count
    return store, config_dir, timers


def run_timer(timers: TimerStore, now_ms: int) -> None:
    """Dequeue and file (rolled copies) as the service loop does, until nothing new is filed."""
    timers.dequeue(now_ms, 1_000)
    while timers.enqueue(1_000):
        timers.dequeue(now_ms, 1_000)
    assert timers.congest_num == timers.wheel.entries_from(timers.read_ms)  # kept, not counted (timerCongestNum)


def _clean_restart(timers: TimerStore, config_dir: Path) -> TimerStore:
    """Flush, save a clean checkpoint, close ``timers`` and load a new timer over the same store."""
    timers.flush()
    timers.save_checkpoint(timers.checkpoint(clean=True))
    timers.close()
    again = TimerStore(timers.store, config_dir, slots=64)
    again.load()
    return again


def test_after_a_crash_the_wheel_is_rebuilt_from_the_timer_queue_and_nothing_pending_is_lost(tmp_path: Path) -> None:
    now = [1_000_000]
    store, config_dir, timers = open_timer_store(tmp_path, now)
    for i in range(10):
        store.append(_timer_record(now[0] + 1_000 * (i + 1), f"c{i}".encode()))
    assert timers.enqueue(100) == 10
    timers.save_checkpoint(timers.checkpoint(clean=False))
    now[0] += 3_500
    run_timer(timers, now[0])
    assert [m.body for m in _crashed(store)] == [b"c0", b"c1", b"c2"]
    timers.close()  # a crash: the last checkpoint is the unclean one taken before these deliveries

    again = TimerStore(store, config_dir, slots=64)
    again.load()
    # The ten, and the copies of c4 and c5 rolled after the checkpoint (its read time is before their roll slot, but
    # their copies in the queue prove the rolls: the originals are skipped, the copies filed).
    assert again.enqueue(100) == 12
    assert again.pending == 10  # all were due after the checkpoint's read time: refiled (at least once)
    assert {topic: metric[0] for topic, metric in again.timing.items()} == {"Crashed": 10}  # counted as refiled
    now[0] += 10_000
    run_timer(again, now[0])
    bodies = [m.body for m in _crashed(store)]
    assert sorted(set(bodies)) == sorted(f"c{i}".encode() for i in range(10))
    assert again.pending == 0
    assert {topic: metric[0] for topic, metric in again.timing.items()} == {"Crashed": 0}
    again.close()
    store.close()


def test_a_slot_walk_cut_by_the_budget_and_a_clean_restart_resumes_in_filing_order(tmp_path: Path) -> None:
    """A slot's walk resumes where the budget or a clean shutdown left it, oldest entry first: neither a repeat nor a
    skip, and the order the messages were filed in."""
    now = [1_000_000]
    store, config_dir, timers = _filed_in_one_slot(tmp_path, now, 5)
    now[0] += 2_000
    assert timers.dequeue(now[0], 2) == 0.0  # the budget ran out within the slot
    assert [m.body for m in _crashed(store)] == [b"c0", b"c1"]

    again = _clean_restart(timers, config_dir)
    assert again.dequeue(now[0], 1) == 0.0
    again.dequeue(now[0], 100)
    assert [m.body for m in _crashed(store)] == [f"c{i}".encode() for i in range(5)]
    assert again.pending == 0
    again.close()
    store.close()


def test_a_clean_checkpoint_of_the_previous_version_resumes_its_slot_without_repeats(tmp_path: Path) -> None:
    """The previous version walked a slot newest entry first and saved ``walkPos`` (no ``walkFrom``): the entries
    above it were delivered, it and the older ones were not. Loaded, exactly those go out, oldest first, also when the
    converted walk is cut by the budget and a clean restart again; ``pending`` (saved as 3) ends at 0."""
    now = [1_000_000]
    store, config_dir, timers = _filed_in_one_slot(tmp_path, now, 5)
    now[0] += 2_000
    assert timers.dequeue(now[0], 0) == 0.0  # readMs on the filled slot, nothing walked yet
    chain = [entry.pos for entry in timers.log.walk(timers.wheel.get(timers.read_ms).last)]  # newest first
    assert len(chain) == 5
    # What the previous version had done when its budget (2) ran out: c4 and c3 delivered, walkPos on c2's entry.
    for body in (b"c4", b"c3"):
        store.append(MessageRecord(topic="Crashed", body=body, properties="REAL_TOPIC\x01Crashed\x02REAL_QID\x010"))
    timers.flush()
    timers.save_checkpoint(timers.checkpoint(clean=True))
    timers.close()
    root = orjson.loads(config_dir.joinpath("timerCheck.json").read_bytes())
    del root["walkFrom"], root["walkTo"]
    root["walkPos"], root["pending"] = chain[2], 3
    config_dir.joinpath("timerCheck.json").write_bytes(orjson.dumps(root))

    upgraded = TimerStore(store, config_dir, slots=64)
    upgraded.load()
    assert upgraded.dequeue(now[0], 1) == 0.0
    again = _clean_restart(upgraded, config_dir)
    again.dequeue(now[0], 100)
    assert [m.body for m in _crashed(store)] == [b"c4", b"c3", b"c0", b"c1", b"c2"]  # each once
    assert again.pending == 0
    again.close()
    store.close()


def test_pending_never_goes_negative_when_a_checkpoint_undercounts_it(tmp_path: Path) -> None:
    """A clean checkpoint whose ``pending`` is below what the wheel holds still delivers everything; ``pending``
    stops at 0 (logged) rather than going negative."""
    now = [1_000_000]
    store, config_dir, timers = _filed_in_one_slot(tmp_path, now, 3)
    timers.flush()
    timers.save_checkpoint(attrs.evolve(timers.checkpoint(clean=True), pending=1))
    timers.close()

    again = TimerStore(store, config_dir, slots=64)
    again.load()
    now[0] += 2_000
    again.dequeue(now[0], 100)
    assert [m.body for m in _crashed(store)] == [b"c0", b"c1", b"c2"]
    assert again.pending == 0
    again.close()
    store.close()


def _crashed(store: MessageStore) -> list[MessageExt]:
    return _read_all(store, "Crashed", 0)


async def test_a_timer_the_store_refuses_for_good_is_dropped_and_the_others_delivered(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """A parked timer message whose delivery the store refuses for good (MESSAGE_ILLEGAL: here a real topic longer
    than 127 bytes; in practice a maxMessageSize lowered meanwhile) is logged and dropped; retried, it held back every
    later timer for good."""
    clock = use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "Timed")
    controller = embedded_cluster.controller
    poison = MessageRecord("Timed", b"poison", 0, properties=f"TIMER_DELIVER_MS\x01{clock() + 1000}", born_timestamp=0)
    parked = controller.timer.rewrite(poison)
    parked = attrs.evolve(
        parked, properties=parked.properties.replace("REAL_TOPIC\x01Timed", "REAL_TOPIC\x01" + "T" * 130)
    )
    controller.context.store.append(parked)
    async with Producer("pg-timer", embedded_cluster.namesrv_addr) as producer:
        await producer.send(Message("Timed", b"later", properties={"TIMER_DELAY_SEC": "5"}))
    await trio.sleep(20)
    assert [m.body for m in _stored(embedded_cluster, "Timed")] == [b"later"]


@pytest.mark.parametrize(
    "bad",
    [
        {"TIMER_DELAY_SEC": " 10"},
        {"TIMER_DELAY_SEC": "10 "},
        {"TIMER_DELAY_SEC": "1_0"},
        {"TIMER_DELAY_MS": "2_500"},
        {"TIMER_DELAY_MS": "-99999999999999999999"},  # past a Java long
        {"TIMER_DELIVER_MS": "\t1"},
    ],
)
async def test_a_timer_time_java_cannot_parse_is_refused_not_parked(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, bad: dict[str, str]
) -> None:
    """RocketMQ 5.3's HookUtils.transformTimerMessage reads the times with Long.parseLong (an optional sign and
    digits within a long): anything else is WHEEL_TIMER_MSG_ILLEGAL (MESSAGE_ILLEGAL). Python's int() took spaces and
    underscores (the message was parked or delivered at once)."""
    use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "TimedParse")
    async with Producer("pg-timer-parse", embedded_cluster.namesrv_addr) as producer:
        with pytest.raises(MQBrokerError) as info:
            await producer.send(Message("TimedParse", b"bad", properties=bad))
        assert info.value.code == 13  # MESSAGE_ILLEGAL
    assert embedded_cluster.controller.timer.pending == 0
    assert _stored(embedded_cluster, "TimedParse") == []


async def test_a_timer_time_in_other_unicode_decimal_digits_is_parked_as_java_parses_it(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """Java's Long.parseLong reads each char with Character.digit, which takes every Unicode decimal digit of the
    BMP: RocketMQ 5.3's HookUtils.transformTimerMessage parks ``TIMER_DELAY_SEC=\u0661\u0660`` (Arabic-Indic 10) or
    fullwidth digits for 10 s rather than refusing them."""
    clock = use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "TimedDigits")
    async with Producer("pg-timer-digits", embedded_cluster.namesrv_addr) as producer:
        now = clock()
        await producer.send(Message("TimedDigits", b"arabic", properties={"TIMER_DELAY_SEC": "\u0661\u0660"}))
        await producer.send(Message("TimedDigits", b"wide", properties={"TIMER_DELAY_MS": "\uff12\uff10\uff10\uff10"}))
        assert embedded_cluster.controller.timer.pending == 2
        assert _stored(embedded_cluster, "TimedDigits") == []
        await trio.sleep(12)
    by_body = {m.body: m for m in _stored(embedded_cluster, "TimedDigits")}
    # Floored to the precision (100 ms), as transformTimerMessage stores it.
    assert by_body[b"arabic"].properties["TIMER_OUT_MS"] == str((now + 10_000 - 1) // 100 * 100)
    assert by_body[b"wide"].properties["TIMER_OUT_MS"] == str((now + 2_000 - 1) // 100 * 100)


@pytest.mark.parametrize(
    "props", [{"TIMER_DELAY_SEC": "9223372036854775807"}, {"TIMER_DELAY_MS": "9223372036854775807"}]
)
async def test_a_timer_delay_that_overflows_javas_long_arithmetic_is_stored_at_once(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, props: dict[str, str]
) -> None:
    """RocketMQ 5.3's HookUtils.transformTimerMessage computes ``now + delaySec * 1000`` (or ``now + delayMs``) in
    Java longs: a delay that overflows wraps to a time before now, which is no timer, so the message is stored at
    once, not refused as beyond timerMaxDelaySec."""
    use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "TimedWrap")
    async with Producer("pg-timer-wrap", embedded_cluster.namesrv_addr) as producer:
        result = await producer.send(Message("TimedWrap", b"wrapped", properties=props))
        assert result.send_status is SendStatus.SEND_OK
    assert embedded_cluster.controller.timer.pending == 0
    assert [m.body for m in _stored(embedded_cluster, "TimedWrap")] == [b"wrapped"]


async def test_timer_max_delay_sec_changed_by_update_broker_config_applies_at_once(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    # RocketMQ 5's HookUtils.transformTimerMessage reads timerMaxDelaySec from the live MessageStoreConfig, which
    # updateBrokerConfig changes in place: a raised limit admits longer timers, a lowered one refuses them, at once.
    use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "TimedLimit")
    five_days = str(5 * 24 * 3600)
    async with Admin(embedded_cluster.namesrv_addr) as admin, Producer("pg-limit", embedded_cluster.namesrv_addr) as p:
        await admin.update_broker_config(embedded_cluster.broker_addr, {"timerMaxDelaySec": str(7 * 24 * 3600)})
        await p.send(Message("TimedLimit", b"five-days", properties={"TIMER_DELAY_SEC": five_days}))
        assert embedded_cluster.controller.timer.pending == 1
        await admin.update_broker_config(embedded_cluster.broker_addr, {"timerMaxDelaySec": "60"})
        with pytest.raises(MQBrokerError) as info:
            await p.send(Message("TimedLimit", b"two-minutes", properties={"TIMER_DELAY_SEC": "120"}))
        assert info.value.code == 13  # MESSAGE_ILLEGAL
    assert embedded_cluster.controller.timer.pending == 1


async def test_clean_expired_cq_keeps_the_timer_queue_so_later_timer_messages_are_delivered(tmp_path: Path) -> None:
    """cleanExpiredCQ skips the system topics (5.3.3's ConsumeQueueStore.cleanExpired: ``isSystemTopic``). Once
    retention had removed every record of ``rmq_sys_wheel_timer``, its queue was destroyed and restarted at offset
    0, below the timer's filing offset: every later timer message was parked where the timer never looked."""
    now = [1_700_000_000_000]
    store = open_store(tmp_path / "store", now_ms=lambda: now[0], disk_usage_ratio=lambda _path: 0.87)
    timers = TimerStore(store, tmp_path / "store" / "config", slots=64)
    timers.load()
    for i in range(3):
        store.append(_timer_record(now[0] + 1_000, f"c{i}".encode()))
    assert timers.enqueue(100) == 3
    now[0] += 2_000
    timers.dequeue(now[0], 100)
    assert len(_crashed(store)) == 3
    for _ in range(30):  # later traffic: the timer's records end up in segments retention removes
        store.append(message(body=bytes(300)))
    store.flush_all_blocking()
    assert await store.retention.check_once() >= 1
    assert store.min_phy_offset > 0
    assert ("Crashed", 0) in await clean_expired_consume_queues(store)

    store.append(_timer_record(now[0] + 1_000, b"later"))
    assert timers.enqueue(100) == 1
    now[0] += 2_000
    timers.dequeue(now[0], 100)
    assert _crashed(store)[-1].body == b"later"
    timers.close()
    store.close()


async def test_an_illegal_timer_message_is_refused_with_rocketmqs_remark(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """RocketMQ 5.3's SendMessageProcessor answers every WHEEL_TIMER_MSG_ILLEGAL (a TIMER_* value that does not
    parse, a delay beyond timerMaxDelaySec, a past delete marker) with MESSAGE_ILLEGAL and one remark naming the
    max delay in ms."""
    use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "TimedIllegal")
    remark = (
        "timer message illegal, the delay time should not be bigger than the max delay 259200000ms; "
        "or if set del msg, the delay time should be bigger than the current time"
    )
    async with Producer("pg-timer-illegal", embedded_cluster.namesrv_addr) as producer:
        for bad in ({"TIMER_DELAY_SEC": "soon"}, {"TIMER_DELAY_SEC": str(4 * 24 * 3600)}, {"TIMER_DELIVER_MS": "x"}):
            with pytest.raises(MQBrokerError) as info:
                await producer.send(Message("TimedIllegal", b"bad", properties=bad))
            assert (info.value.code, info.value.remark) == (13, remark), bad
    assert _stored(embedded_cluster, "TimedIllegal") == []


async def test_a_timer_longer_than_the_commitlogs_retention_is_rolled_into_new_records_and_delivered_once(
    tmp_path: Path,
) -> None:
    """RocketMQ 5.3's roll: a timer due beyond the roll window (48 slots of 100 ms on this 64-slot wheel) is written
    again to the timer queue each window, so retention removing its original record loses nothing (before, the
    wheel kept pointing at the original record, and the timer was dropped as gone)."""
    now = [1_700_000_000_000]
    store = open_store(tmp_path / "store", now_ms=lambda: now[0], disk_usage_ratio=lambda _path: 0.87)
    timers = TimerStore(store, tmp_path / "store" / "config", slots=64)
    timers.load()
    first = store.append(_timer_record(now[0] + 30_000, b"far")).phy_offset
    assert timers.enqueue(100) == 1
    for _ in range(30):  # later traffic: the original record ends up in segments retention removes
        store.append(message(body=bytes(300)))
    for _ in range(6):
        now[0] += 1_000
        run_timer(timers, now[0])
    assert timers.rolled == 1 and timers.pending == 1 and not _crashed(store)
    store.flush_all_blocking()
    assert await store.retention.check_once() >= 1  # disk pressure: the oldest segments go, whatever their age
    assert store.min_phy_offset > first  # the original record is gone
    for _ in range(26):
        now[0] += 1_000
        run_timer(timers, now[0])
    [delivered] = _crashed(store)
    assert delivered.body == b"far" and delivered.properties["TIMER_OUT_MS"] == str(1_700_000_030_000)
    assert delivered.store_timestamp >= 1_700_000_030_000  # never early (stepped a second at a time)
    assert int(delivered.properties["TIMER_ROLL_TIMES"]) == timers.rolled >= 6
    assert "TIMER_ROLL_FROM" not in delivered.properties
    assert timers.pending == 0
    timers.close()
    store.close()


@pytest.mark.parametrize("clean", [True, False])
def test_a_restart_in_the_middle_of_rolls_delivers_each_rolled_timer_once(tmp_path: Path, clean: bool) -> None:
    """A clean restart resumes exactly; after a crash the rebuild files one copy of each rolled timer: the original
    is skipped when it rolled before the checkpoint or a copy of it is in the queue (rolled after the checkpoint)."""
    now = [1_000_000]
    store, config_dir, timers = open_timer_store(tmp_path, now)
    for i in range(8):
        store.append(_timer_record(now[0] + 6_000 + 3_000 * i, f"r{i}".encode()))
    assert timers.enqueue(100) == 8
    for _ in range(7):
        now[0] += 1_000
        run_timer(timers, now[0])
    checkpoint = timers.checkpoint(clean=False)  # the crash's last checkpoint: some rolls before it
    before, early = timers.rolled, len(_crashed(store))
    for _ in range(4):
        now[0] += 1_000
        run_timer(timers, now[0])
    assert timers.rolled > before  # and some after it
    # A crash repeats the deliveries made after its last checkpoint (at least once); a clean stop repeats none.
    repeated = [] if clean else [m.body for m in _crashed(store)[early:]]
    assert len(_crashed(store)) > early
    if clean:
        again = _clean_restart(timers, config_dir)
    else:
        timers.save_checkpoint(checkpoint)
        timers.close()
        again = TimerStore(store, config_dir, slots=64)
        again.load()
    for _ in range(30):
        now[0] += 1_000
        run_timer(again, now[0])
    assert sorted(m.body for m in _crashed(store)) == sorted([f"r{i}".encode() for i in range(8)] + repeated)
    assert all(m.store_timestamp >= int(m.properties["TIMER_OUT_MS"]) for m in _crashed(store))  # never early
    assert again.pending == 0
    again.close()
    store.close()


@pytest.mark.parametrize("restart_first", [True, False])
def test_a_crash_after_timer_roll_window_slot_was_lowered_loses_no_timer(tmp_path: Path, restart_first: bool) -> None:
    """``timerRollWindowSlot`` lowered between runs (here from 48 slots to 10, with a clean restart before the crash
    or at the crash's restart): a timer filed under the old window, not rolled yet, is neither taken for rolled by the
    crash rebuild nor lost (before, the rebuild worked out its roll time with the new window, found it before the
    checkpoint's read time and skipped the record, of which no copy existed)."""
    now = [1_000_000]
    store, config_dir, timers = open_timer_store(tmp_path, now)
    store.append(_timer_record(now[0] + 30_000, b"far"))
    assert timers.enqueue(100) == 1  # filed to roll at + 4.8 s (48 slots of 100 ms)
    if restart_first:  # a clean restart with the lower window: the entry stays where it was filed
        timers.flush()
        timers.save_checkpoint(timers.checkpoint(clean=True))
        timers.close()
        timers = TimerStore(store, config_dir, slots=64, roll_window_slot=10)
        timers.load()
    now[0] += 2_500
    run_timer(timers, now[0])
    assert timers.rolled == 0 and timers.pending == 1  # nothing rolled yet
    timers.save_checkpoint(timers.checkpoint(clean=False))
    timers.close()  # a crash
    again = TimerStore(store, config_dir, slots=64, roll_window_slot=10)
    again.load()
    for _ in range(40):
        now[0] += 1_000
        run_timer(again, now[0])
    assert [m.body for m in _crashed(store)] == [b"far"]
    assert again.pending == 0
    again.close()
    store.close()


async def test_a_producers_timer_roll_from_is_not_stored_with_its_timer(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """``TIMER_ROLL_FROM`` marks the broker's own rolled copies, and a crash rebuild skips a record carrying it whose
    original it finds again: a producer's message must not be stored with one, or a rebuild could take it for a copy
    and never deliver it."""
    use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "TimedForged")
    async with Producer("pg-timer-forged", embedded_cluster.namesrv_addr) as producer:
        forged = {"TIMER_DELAY_SEC": "30", "TIMER_ROLL_FROM": "0,1"}
        await producer.send(Message("TimedForged", b"forged", properties=forged))
    parked = _read_all(embedded_cluster.controller.context.store, TIMER_TOPIC, 0)
    assert parked and all("TIMER_ROLL_FROM" not in m.properties for m in parked)


async def test_the_timer_checkpoint_is_saved_every_second_by_default(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """RocketMQ 5.3's ``timerFlushIntervalMs`` defaults to 1000: its TimerFlushService flushes the timer log, the wheel
    and ``timerCheck.json`` every second (store/src/main/java/org/apache/rocketmq/store/config/MessageStoreConfig.java,
    store/src/main/java/org/apache/rocketmq/store/timer/TimerMessageStore.java). Ours saved it every 10 s, so a
    crash repeated up to ten times more deliveries (everything delivered since the last save)."""
    clock = use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "TimedSaved")
    async with Producer("pg-timer-saved", embedded_cluster.namesrv_addr) as producer:
        due = clock() + 2_000
        await producer.send(Message("TimedSaved", b"t", properties={"TIMER_DELIVER_MS": str(due)}))
    await trio.sleep(4)
    assert [m.body for m in _stored(embedded_cluster, "TimedSaved")] == [b"t"]
    saved = embedded_cluster.controller.timer.timers.checkpoint_file.load()
    assert saved is not None
    assert saved.enqueue_offset == 1
    assert saved.read_ms > due  # a crash now would not deliver it again


async def test_timer_flush_interval_changed_by_update_broker_config_applies_from_the_next_save(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """RocketMQ 5.3's TimerFlushService reads ``timerFlushIntervalMs`` from the live MessageStoreConfig before each
    wait (store/src/main/java/org/apache/rocketmq/store/timer/TimerMessageStore.java), which updateBrokerConfig
    changes in place; ours took it once at start, so a lowered interval applied only after a restart."""
    async with EmbeddedCluster(tmp_path / "cluster", timer_flush_interval_ms=60_000, **SMALL_STORE) as cluster:
        clock = use_virtual_store_clock(cluster)
        await create_topic(cluster, "TimedFlush")
        async with Admin(cluster.namesrv_addr) as admin:
            await admin.update_broker_config(cluster.broker_addr, {"timerFlushIntervalMs": "1000"})
        await trio.sleep(61)  # the wait under way when it changed ends
        async with Producer("pg-timer-flush", cluster.namesrv_addr) as producer:
            due = clock() + 2_000
            await producer.send(Message("TimedFlush", b"t", properties={"TIMER_DELIVER_MS": str(due)}))
        await trio.sleep(4)
        assert [m.body for m in _stored(cluster, "TimedFlush")] == [b"t"]
        saved = cluster.controller.timer.timers.checkpoint_file.load()
        assert saved is not None
        assert (saved.enqueue_offset, saved.read_ms > due) == (1, True)


async def test_timer_stop_dequeue_and_stop_enqueue_pause_the_timer_until_turned_off(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """RocketMQ 5.3's ``timerStopDequeue`` holds every delivery (``TimerMessageStore.dequeue`` returns at once) and
    ``timerStopEnqueue`` every filing of new timer messages into the wheel (``enqueue``), both read from the live
    MessageStoreConfig that updateBrokerConfig changes; turned off, the timer carries on and nothing is lost."""
    use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "TimedStop")
    timer = embedded_cluster.controller.timer
    async with Admin(embedded_cluster.namesrv_addr) as admin, Producer("pg-stop", embedded_cluster.namesrv_addr) as p:
        await admin.update_broker_config(embedded_cluster.broker_addr, {"timerStopDequeue": "true"})
        await p.send(Message("TimedStop", b"held", properties={"TIMER_DELAY_SEC": "2"}))
        await trio.sleep(10)
        assert _stored(embedded_cluster, "TimedStop") == []
        assert timer.timers.filed == 1  # filed, but not delivered
        await admin.update_broker_config(
            embedded_cluster.broker_addr, {"timerStopDequeue": "false", "timerStopEnqueue": "true"}
        )
        await trio.sleep(2)
        assert [m.body for m in _stored(embedded_cluster, "TimedStop")] == [b"held"]
        await p.send(Message("TimedStop", b"unfiled", properties={"TIMER_DELAY_SEC": "2"}))
        await trio.sleep(10)
        assert timer.timers.filed == 1
        assert int(timer.stats()["timerOffsetBehind"]) == 1
        await admin.update_broker_config(embedded_cluster.broker_addr, {"timerStopEnqueue": "false"})
        await trio.sleep(2)
    assert [m.body for m in _stored(embedded_cluster, "TimedStop")] == [b"held", b"unfiled"]


async def test_a_timer_filed_after_its_time_is_delivered_marked_never_enqueued(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """RocketMQ 5.3.3's TimerEnqueuePutService hands a record read after its time straight to the delivery with an
    enqueue time of Long.MAX_VALUE ("Never enqueue, mark it", TimerMessageStore.putMessageToTimerWheel), which
    ``convert`` stamps as its TIMER_ENQUEUE_MS; one filed into the wheel carries the time it was filed (ours: parked).
    Ours stamped the parked copy's store time on both."""
    clock = use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "NeverFiled")
    async with Admin(embedded_cluster.namesrv_addr) as admin, Producer("pg-never", embedded_cluster.namesrv_addr) as p:
        sent = clock()
        await p.send(Message("NeverFiled", b"filed", properties={"TIMER_DELAY_SEC": "2"}))
        await trio.sleep(0.5)
        await admin.update_broker_config(embedded_cluster.broker_addr, {"timerStopEnqueue": "true"})
        await p.send(Message("NeverFiled", b"late", properties={"TIMER_DELAY_SEC": "2"}))
        await trio.sleep(5)
        await admin.update_broker_config(embedded_cluster.broker_addr, {"timerStopEnqueue": "false"})
        await trio.sleep(2)
    stamps = {m.body: m.properties["TIMER_ENQUEUE_MS"] for m in _stored(embedded_cluster, "NeverFiled")}
    assert set(stamps) == {b"filed", b"late"}
    assert sent <= int(stamps[b"filed"]) <= clock()
    assert stamps[b"late"] == str(2**63 - 1)


async def test_a_timer_due_on_a_precision_boundary_is_delivered_on_time_with_javas_timer_out_ms(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """RocketMQ 5.3's HookUtils.transformTimerMessage stores TIMER_OUT_MS as the delivery time floored to
    ``timerPrecisionMs``, one precision earlier for an exact multiple (the slot walked once the time has come): a timer
    due on a boundary went out one precision (100 ms) late here, and TIMER_OUT_MS kept the raw time."""
    clock = use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "Boundary")
    at = (clock() // 100 + 50) * 100
    async with Producer("pg-boundary", embedded_cluster.namesrv_addr) as producer:
        await producer.send(Message("Boundary", b"on", properties={"TIMER_DELIVER_MS": str(at)}))
        await producer.send(Message("Boundary", b"off", properties={"TIMER_DELIVER_MS": str(at + 50)}))
    parked = {m.body: m for m in _read_all(embedded_cluster.controller.context.store, TIMER_TOPIC, 0)}
    assert parked[b"on"].properties["TIMER_OUT_MS"] == str(at - 100)
    assert parked[b"off"].properties["TIMER_OUT_MS"] == str(at)
    await trio.sleep(10)
    delivered = {m.body: m for m in _stored(embedded_cluster, "Boundary")}
    assert at <= delivered[b"on"].store_timestamp < at + 100
    assert at + 100 <= delivered[b"off"].store_timestamp < at + 200
    assert delivered[b"on"].properties["TIMER_DELIVER_MS"] == str(at)


async def test_runtime_info_lists_the_schedule_offset_of_the_levels_in_the_offset_table_only(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """4.9.8's ScheduleMessageService.buildRunningStats lists ``scheduleMessageOffset_<level>`` for the entries of its
    offset table (levels that delivered, or read from delayOffset.json), not for every configured level: ours listed
    all 18 from the start."""
    use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "DelayView")
    async with Producer("pg-delay-view", embedded_cluster.namesrv_addr) as producer:
        await producer.send(Message("DelayView", b"1", delay_level=1))
        await producer.send(Message("DelayView", b"3", delay_level=3))
        async with Admin(embedded_cluster.namesrv_addr) as admin:
            before = await admin.broker_status(embedded_cluster.broker_addr)
            await trio.sleep(3)
            after = await admin.broker_status(embedded_cluster.broker_addr)
    assert not [key for key in before if key.startswith("scheduleMessageOffset_")]
    shown = {key: value for key, value in after.items() if key.startswith("scheduleMessageOffset_")}
    assert shown == {"scheduleMessageOffset_1": "1,1"}


async def test_timer_wheel_enable_false_refuses_timer_messages_and_pops_and_runs_no_timer(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """RocketMQ 5.3 with ``timerWheelEnable=false``: HookUtils.handleScheduleMessage refuses every message carrying a
    TIMER_* time (past or not) with WHEEL_TIMER_NOT_ENABLE, which SendMessageProcessor answers SYSTEM_ERROR "accurate
    timer message is not enabled, timerWheelEnable is false"; PopMessageProcessor refuses pops (their checkpoints
    need the timer) and BrokerController creates no TimerMessageStore. Ours ignored the setting as unknown."""
    async with EmbeddedCluster(tmp_path, timer_wheel_enable=False, **SMALL_STORE) as cluster:
        clock = use_virtual_store_clock(cluster)
        await create_topic(cluster, "NoWheel")
        async with Producer("pg-no-wheel", cluster.namesrv_addr) as producer:
            for props in ({"TIMER_DELAY_SEC": "10"}, {"TIMER_DELIVER_MS": str(clock() - 1000)}):
                with pytest.raises(SendFailedError) as info:  # SYSTEM_ERROR: the producer retries, as Java's
                    await producer.send(Message("NoWheel", b"t", properties=props))
                assert isinstance(cause := info.value.attempts[-1][1], MQBrokerError)
                assert cause.code == 1
                assert cause.remark == "accurate timer message is not enabled, timerWheelEnable is false"
            await producer.send(Message("NoWheel", b"plain"))
            await producer.send(Message("NoWheel", b"delayed", delay_level=1))
        await trio.sleep(3)
        assert sorted(m.body for m in _stored(cluster, "NoWheel")) == [b"delayed", b"plain"]
        assert not (Path(cluster.controller.context.store.root) / "timer").exists()  # no wheel opened
        pop = PopService(cluster.controller.context, cluster.controller.timer.rewrite)
        with pytest.raises(RequestRejected) as refused:
            pop.pop("cg-no-wheel", "NoWheel", 1, 60_000, None)
        assert refused.value.code == ResponseCode.SYSTEM_ERROR
        assert refused.value.remark == (
            f"the broker[{cluster.controller.context.config.broker_ip1}] pop message is forbidden because "
            "timerWheelEnable is false"
        )


async def test_runtime_info_shows_zero_timer_figures_while_timer_wheel_enable_is_false(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """RocketMQ 5.3's AdminBrokerProcessor.prepareRuntimeInfo reads the timer's figures only while timerWheelEnable is
    true and answers timerReadBehind, timerOffsetBehind and timerCongestNum "0", timerEnqueueTps and timerDequeueTps
    "0.0" otherwise: ours kept showing the timer queue's entries as behind."""
    use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "TimedOff")
    keys = ("timerReadBehind", "timerOffsetBehind", "timerCongestNum", "timerEnqueueTps", "timerDequeueTps")
    async with Admin(embedded_cluster.namesrv_addr) as admin:
        await admin.update_broker_config(embedded_cluster.broker_addr, {"timerStopEnqueue": "true"})
        async with Producer("pg-timed-off", embedded_cluster.namesrv_addr) as producer:
            for _ in range(3):
                await producer.send(Message("TimedOff", b"t", properties={"TIMER_DELAY_SEC": "600"}))
        await trio.sleep(2)
        before = await admin.broker_status(embedded_cluster.broker_addr)
        await admin.update_broker_config(embedded_cluster.broker_addr, {"timerWheelEnable": "false"})
        after = await admin.broker_status(embedded_cluster.broker_addr)
    assert before["timerOffsetBehind"] == "3"
    assert {key: after[key] for key in keys} == {
        "timerReadBehind": "0",
        "timerOffsetBehind": "0",
        "timerCongestNum": "0",
        "timerEnqueueTps": "0.0",
        "timerDequeueTps": "0.0",
    }


#: RocketMQ 5's RequestCode.GET_TIMER_METRICS.
GET_TIMER_METRICS = 61


async def _timer_metrics(cluster: EmbeddedCluster) -> dict[str, int]:
    """GET_TIMER_METRICS (61): the ``count`` of each topic's ``timingCount`` entry."""
    async with RemotingClient() as client:
        answer = await client.invoke(cluster.broker_addr, request(GET_TIMER_METRICS), 5)
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    body = orjson.loads(answer.body)
    assert set(body) == {"dataVersion", "timingCount"}
    assert set(body["dataVersion"]) == {"counter", "stateVersion", "timestamp"}
    return {topic: metric["count"] for topic, metric in body["timingCount"].items()}


async def test_get_timer_metrics_counts_each_topics_pending_timers_across_a_clean_restart(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """RocketMQ 5.3.3's GET_TIMER_METRICS (AdminBrokerProcessor.getTimerMetrics) answers TimerMetrics' JSON: per real
    topic, the timer messages filed and not delivered yet (``timingCount``: TimerMessageStore adds one at each filing
    and takes one at each dequeue), kept across a restart (its ``timermetrics`` file). Ours answered
    REQUEST_CODE_NOT_SUPPORTED."""
    clock = use_virtual_store_clock(embedded_cluster)
    for topic in ("TimingA", "TimingB"):
        await create_topic(embedded_cluster, topic)
    async with Producer("pg-timing", embedded_cluster.namesrv_addr) as producer:
        for delay in (30, 90, 600):
            await producer.send(Message("TimingA", b"a", properties={"TIMER_DELAY_SEC": str(delay)}))
        for delay in (90, 600):
            await producer.send(Message("TimingB", b"b", properties={"TIMER_DELAY_SEC": str(delay)}))
    await trio.sleep(2)
    assert await _timer_metrics(embedded_cluster) == {"TimingA": 3, "TimingB": 2}
    await trio.sleep(60)
    assert await _timer_metrics(embedded_cluster) == {"TimingA": 2, "TimingB": 2}
    autojump_clock.autojump_threshold = math.inf
    await embedded_cluster.restart_broker()
    autojump_clock.autojump_threshold = 0
    use_virtual_store_clock(embedded_cluster, clock)
    assert await _timer_metrics(embedded_cluster) == {"TimingA": 2, "TimingB": 2}
    await trio.sleep(60)
    assert await _timer_metrics(embedded_cluster) == {"TimingA": 1, "TimingB": 1}
    await trio.sleep(600)
    assert await _timer_metrics(embedded_cluster) == {"TimingA": 0, "TimingB": 0}


async def test_deleting_a_topic_drops_its_count_from_the_timer_metrics(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """RocketMQ 5.3.3's AdminBrokerProcessor.deleteTopicInBroker ends with TimerMetrics.removeTimingCount(topic)
    (broker/src/main/java/org/apache/rocketmq/broker/processor/AdminBrokerProcessor.java): GET_TIMER_METRICS no
    longer lists a deleted topic. Ours kept its count."""
    use_virtual_store_clock(embedded_cluster)
    for topic in ("TimingKept", "TimingDeleted"):
        await create_topic(embedded_cluster, topic)
    async with Producer("pg-timing-del", embedded_cluster.namesrv_addr) as producer:
        for topic in ("TimingKept", "TimingDeleted"):
            await producer.send(Message(topic, b"t", properties={"TIMER_DELAY_SEC": "600"}))
    await trio.sleep(2)
    assert await _timer_metrics(embedded_cluster) == {"TimingKept": 1, "TimingDeleted": 1}
    autojump_clock.autojump_threshold = math.inf  # the deletion's file work runs in threads: no jump meanwhile
    async with Admin(embedded_cluster.namesrv_addr) as admin:
        await admin.delete_topic_in_brokers("TimingDeleted", [embedded_cluster.broker_addr])
    assert await _timer_metrics(embedded_cluster) == {"TimingKept": 1}
    autojump_clock.autojump_threshold = 0
    await trio.sleep(700)  # the deleted topic's timer is delivered (or dropped): it is not listed again
    assert await _timer_metrics(embedded_cluster) == {"TimingKept": 0}


@pytest.mark.parametrize("saved", ["missing", "unreadable"])
def test_a_clean_checkpoint_without_readable_timing_counts_counts_the_pending_timers_again(
    tmp_path: Path, saved: str
) -> None:
    """A clean ``timerCheck.json`` of the previous version has no ``timingCount``: the load counts the wheel's pending
    timers by their real topic again (RocketMQ 5.3.3 revises its counts from the timer log, TimerMessageStore
    ``checkAndReviseMetrics``), so GET_TIMER_METRICS neither starts at nothing nor goes on undercounting; an unreadable
    one (metrics only) is counted again too, instead of making the timer's checkpoint unreadable (found by a review:
    each delivery of a timer filed before the upgrade took one from those filed after it)."""
    now = [1_000_000]
    store, config_dir, timers = _filed_in_one_slot(tmp_path, now, 5)
    timers.flush()
    timers.save_checkpoint(timers.checkpoint(clean=True))
    timers.close()
    path = config_dir / "timerCheck.json"
    root = orjson.loads(path.read_bytes())
    assert root["timingCount"]["Crashed"][0] == 5
    if saved == "missing":
        del root["timingCount"]
    else:
        root["timingCount"] = {"Crashed": None}
    path.write_bytes(orjson.dumps(root))
    upgraded = TimerStore(store, config_dir, slots=64)
    upgraded.load()
    assert {topic: metric[0] for topic, metric in upgraded.timing.items()} == {"Crashed": 5}
    now[0] += 2_000
    run_timer(upgraded, now[0])
    assert len(_crashed(store)) == 5
    assert {topic: metric[0] for topic, metric in upgraded.timing.items()} == {"Crashed": 0}


@pytest.mark.parametrize("until_success", [False, True])
async def test_a_timer_delivery_refused_three_times_is_dropped_unless_retry_until_success(
    embedded_cluster: EmbeddedCluster,
    autojump_clock: trio.testing.MockClock,
    caplog: pytest.LogCaptureFixture,
    until_success: bool,
) -> None:
    """RocketMQ 5.3.3's TimerDequeuePutMessageService puts a due message again after a refusal worth retrying (here
    SERVICE_NOT_AVAILABLE: the disk is full) and, with ``timerEnableRetryUntilSuccess`` false (its default), drops it
    at the third refusal, logged ("Message processing failed after 3 retries"); the later timers go out. Set true, it
    is retried until the store takes it. Ours retried for ever."""
    use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "TimedRefused")
    store = embedded_cluster.controller.context.store
    disk = store.config.disk_usage_ratio
    async with (
        Admin(embedded_cluster.namesrv_addr) as admin,
        Producer("pg-refused", embedded_cluster.namesrv_addr) as p,
    ):
        await admin.update_broker_config(
            embedded_cluster.broker_addr, {"timerEnableRetryUntilSuccess": str(until_success).lower()}
        )
        await p.send(Message("TimedRefused", b"refused", properties={"TIMER_DELAY_SEC": "2"}))
        # A full disk, as the store's own disk check finds it: it stays full until the simulated disk is freed.
        store.config = attrs.evolve(store.config, disk_usage_ratio=lambda _path: 0.99)
        store.disk_full_reason = "disk full (test)"
        try:
            await trio.sleep(10)
            assert _stored(embedded_cluster, "TimedRefused") == []
        finally:
            store.config = attrs.evolve(store.config, disk_usage_ratio=disk)
            store.disk_full_reason = None
        await p.send(Message("TimedRefused", b"later", properties={"TIMER_DELAY_SEC": "2"}))
        await trio.sleep(5)
    bodies = [m.body for m in _stored(embedded_cluster, "TimedRefused")]
    assert bodies == ([b"refused", b"later"] if until_success else [b"later"])
    dropped = [r for r in caplog.records if "Message processing failed after 3 retries" in r.getMessage()]
    assert len(dropped) == (0 if until_success else 1)
    assert embedded_cluster.controller.timer.pending == 0
