"""The timer wheel's shape as RocketMQ 5.3's (TimerMessageStore: 7 x 86,400 slots whatever the precision, a
precision snapped to 100/200/500/1000 ms) and a clean start over a wheel of another shape (the previous version's
36,000 slots, another precision): its pending entries are migrated, none lost or delivered twice, also when the
start crashes in the middle. Real files, restarts; virtual time."""

from __future__ import annotations

import math
import sys
import threading
import tracemalloc
from pathlib import Path

import orjson
import pytest
import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from broker.timer import TimerMessageService, TimerStore
from broker.timer.timer_store import TimerCheckpoint
from broker.timer.wheel import WHEEL_SLOTS
from client.admin import Admin
from client.errors import SendFailedError
from client.message import Message
from client.producer import Producer
from store.message_store import MessageStore
from tests.conftest import SMALL_STORE
from tests.semantics.helpers import create_topic, use_virtual_store_clock
from tests.semantics.test_timer import _read_all, _timer_record, open_timer_store, run_timer

HOUR_MS = 3600 * 1000


def _crashed(store: MessageStore) -> list[bytes]:
    return [m.body for m in _read_all(store, "Crashed", 0)]


def _never_early(store: MessageStore, late_ms: int) -> None:
    for msg in _read_all(store, "Crashed", 0):
        late = msg.store_timestamp - int(msg.properties["TIMER_OUT_MS"])
        assert 0 <= late <= late_ms, (msg.body, late)


def _walk(timers: TimerStore, now: list[int], steps: int, step_ms: int = 1_000) -> None:
    """Runs ``timers`` ``steps`` times, the clock ``now`` moved on ``step_ms`` before each run."""
    for _ in range(steps):
        now[0] += step_ms
        run_timer(timers, now[0])


def _reopen(store: MessageStore, config_dir: Path, **shape: int) -> TimerStore:
    """A new timer of ``shape`` over the same store, loaded (migrating or rebuilding as its checkpoint says)."""
    timers = TimerStore(store, config_dir, **shape)
    timers.load()
    return timers


def _save_clean(timers: TimerStore) -> None:
    """A clean stop's save: the files flushed, then a clean checkpoint."""
    timers.flush()
    timers.save_checkpoint(timers.checkpoint(clean=True))


def _adopt_confirmed(timers: TimerStore) -> None:
    """The checkpoint a slave adopts (TimerMessageService.adopt_checkpoint) from the progress ``timers`` confirms."""
    offset, read_ms = timers.confirmed()
    timers.save_checkpoint(TimerCheckpoint(enqueue_offset=offset, read_ms=read_ms, windows=timers.windows))


def _close_idle(timers: TimerStore, store: MessageStore) -> None:
    """Asserts nothing is left pending, then closes the timer and the store."""
    assert timers.pending == 0
    timers.close()
    store.close()


def _three_of_six_delivered(
    tmp_path: Path, now: list[int], *, with_x: bool = False, clean: bool = False
) -> tuple[MessageStore, Path]:
    """A 64-slot timer at 100 ms with "c0".."c5" due 1 s apart (and "x" due at + 3.2 s) run to + 3.5 s (read time
    1,003,500: "c0", "c1", "c2" and "x" delivered), then stopped: cleanly, or a crash whose last (unclean)
    checkpoint has those deliveries."""
    store, config_dir, timers = open_timer_store(tmp_path, now)
    for i in range(6):
        store.append(_timer_record(now[0] + 1_000 * (i + 1), f"c{i}".encode()))
    if with_x:
        store.append(_timer_record(now[0] + 3_200, b"x"))
    assert timers.enqueue(100) == 6 + with_x
    now[0] += 3_500
    run_timer(timers, now[0])
    assert timers.read_ms == 1_003_500
    if with_x:
        assert sorted(_crashed(store)) == [b"c0", b"c1", b"c2", b"x"]
    else:
        assert _crashed(store) == [b"c0", b"c1", b"c2"]
    if clean:
        _save_clean(timers)
    else:
        timers.save_checkpoint(timers.checkpoint(clean=False))
    timers.close()
    return store, config_dir


def _start_at_1000_ms_delivers_the_rest_once(store: MessageStore, config_dir: Path, now: list[int]) -> None:
    """After :func:`_three_of_six_delivered` with "x": a start at 1000 ms slots walks 10 s and every timer has gone
    out exactly once, nothing is left pending; closes the timer and the store."""
    again = _reopen(store, config_dir, slots=64, precision_ms=1000)
    _walk(again, now, 10)
    assert sorted(_crashed(store)) == [*(f"c{i}".encode() for i in range(6)), b"x"]
    _close_idle(again, store)


def test_the_precision_is_snapped_as_rocketmqs_and_the_wheel_has_its_slot_count(tmp_path: Path) -> None:
    now = [1_000_000]
    store, config_dir, timers = open_timer_store(tmp_path, now)
    timers.close()
    for asked, snapped in ((1, 100), (100, 100), (199, 100), (300, 200), (999, 500), (1000, 1000), (5000, 1000)):
        assert TimerStore(store, config_dir, precision_ms=asked).precision_ms == snapped
    wheel = TimerStore(store, config_dir, precision_ms=1000).wheel
    assert (wheel.slots, wheel.span_ms) == (WHEEL_SLOTS, 7 * 24 * HOUR_MS)
    store.close()


@pytest.mark.parametrize(("precision", "rolls"), [(100, 14), (1000, 1)])
def test_a_three_day_timer_is_rewritten_once_per_roll_window_not_every_hour(
    tmp_path: Path, precision: int, rolls: int
) -> None:
    """The default wheel (604,800 slots) and roll window (172,800 slots): at Java's precision (1 s) a 3-day timer is
    written again once (at 2 days), at ours (100 ms) every 4.8 h (14 times); the 36,000-slot wheel rolled it every
    hour (71 times)."""
    now = [1_000_000]
    store, config_dir, timers = open_timer_store(tmp_path, now)
    timers.close()
    timers = _reopen(store, config_dir, precision_ms=precision)
    store.append(_timer_record(now[0] + 72 * HOUR_MS, b"3d"))
    assert timers.enqueue(10) == 1
    _walk(timers, now, 73, HOUR_MS)
    assert _crashed(store) == [b"3d"]
    assert timers.rolled == rolls
    _close_idle(timers, store)


def _old_shape_with_a_walk_cut_in_the_middle(tmp_path: Path, now: list[int]) -> tuple[MessageStore, Path]:
    """A previous version's timer (64 slots of 100 ms, no shape in its checkpoint, its log in the 32 MiB segments
    of that version's default) stopped cleanly with: two of five messages of one slot delivered (its walk cut by the
    budget), messages due later in the wheel's reach, one due beyond it (filed to roll at + 4.8 s)."""
    store, config_dir, timers = open_timer_store(tmp_path, now, log_file_size=32 << 20)
    for i in range(5):
        store.append(_timer_record(now[0] + 1_000, f"c{i}".encode()))
    for i, delay in enumerate((1_250, 2_430, 3_000, 6_000, 30_000)):
        store.append(_timer_record(now[0] + delay, f"d{i}".encode()))
    assert timers.enqueue(100) == 10
    now[0] += 1_100
    assert timers.dequeue(now[0], 2) == 0.0
    assert _crashed(store) == [b"c0", b"c1"]
    _save_clean(timers)
    timers.close()
    path = config_dir / "timerCheck.json"
    root = orjson.loads(path.read_bytes())
    root.pop("precisionMs", None), root.pop("wheelSlots", None)
    root["rollWindows"] = [w[:2] for w in root["rollWindows"]]
    path.write_bytes(orjson.dumps(root))
    return store, config_dir


ALL = sorted([f"c{i}".encode() for i in range(5)] + [f"d{i}".encode() for i in range(5)])


@pytest.mark.parametrize(("slots", "precision"), [(128, 200), (64, 1000), (640, 100), (WHEEL_SLOTS, 100)])
def test_a_clean_start_over_a_wheel_of_another_shape_delivers_each_pending_timer_once(
    tmp_path: Path, slots: int, precision: int
) -> None:
    now = [1_000_000]
    store, config_dir = _old_shape_with_a_walk_cut_in_the_middle(tmp_path, now)
    timers = _reopen(store, config_dir, slots=slots, precision_ms=precision)
    assert timers.pending == 8
    _walk(timers, now, 40)
    assert sorted(_crashed(store)) == ALL  # each once
    _never_early(store, 1_000 + precision)
    assert timers.pending == 0
    # And the migrated files restart cleanly in the new shape.
    _save_clean(timers)
    timers.close()
    cp = orjson.loads((config_dir / "timerCheck.json").read_bytes())
    assert (cp["wheelSlots"], cp["precisionMs"]) == (slots, precision)
    again = _reopen(store, config_dir, slots=slots, precision_ms=precision)
    _close_idle(again, store)


@pytest.mark.parametrize("log_file_size", [1 << 20, 100 << 20])
def test_a_clean_start_with_another_timer_log_segment_size_delivers_each_pending_timer_once(
    tmp_path: Path, log_file_size: int
) -> None:
    """A log written in 32 MiB segments (the size before ``mappedFileSizeTimerLog`` took 5.3.3's 100 MiB default) or
    any other: RocketMQ's MappedFileQueue.load refuses segments of another size, so its broker does not start after
    the setting changed; ours refused them too (StoreCorruptError), which stopped a broker upgraded with a timer log,
    every pop's checkpoint being a timer. The pending entries are now moved to a log of the configured size."""
    now = [1_000_000]
    store, config_dir = _old_shape_with_a_walk_cut_in_the_middle(tmp_path, now)
    timers = _reopen(store, config_dir, slots=64, log_file_size=log_file_size)
    assert timers.pending == 8
    _walk(timers, now, 40)
    assert sorted(_crashed(store)) == ALL  # each once
    _save_clean(timers)
    timers.close()
    assert {p.stat().st_size for p in (tmp_path / "store" / "timer" / "timerlog").iterdir()} == {log_file_size}
    again = _reopen(store, config_dir, slots=64, log_file_size=log_file_size)
    _close_idle(again, store)


def test_a_crash_right_after_a_migration_rebuilds_from_the_queue_losing_nothing(tmp_path: Path) -> None:
    """The migration saves an unclean checkpoint before it replaces the old files: a crash after it (or in its
    middle) rebuilds from the timer queue, repeating at most what the cut walk of the read slot delivered."""
    now = [1_000_000]
    store, config_dir = _old_shape_with_a_walk_cut_in_the_middle(tmp_path, now)
    timers = _reopen(store, config_dir, slots=64, precision_ms=1000)
    timers.close()  # a crash: nothing saved after the migration's own checkpoint
    again = _reopen(store, config_dir, slots=64, precision_ms=1000)
    _walk(again, now, 40)
    bodies = _crashed(store)
    assert sorted(set(bodies)) == ALL
    assert all(bodies.count(b) == 1 for b in ALL if b not in (b"c0", b"c1"))  # only the read slot's repeat
    _never_early(store, 2_000)
    _close_idle(again, store)


async def test_a_broker_restarted_with_a_larger_wheel_and_another_precision_delivers_each_timer_once(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A broker on a 20-slot wheel stopped with timers pending, started again with 600 slots of 200 ms: every
    timer delivered once, on time."""
    overrides = {**SMALL_STORE, "timer_wheel_slots": 20, "mapped_file_size_timer_log": 32 * 64}
    async with EmbeddedCluster(tmp_path, **overrides) as cluster:
        clock = use_virtual_store_clock(cluster)
        await create_topic(cluster, "TimedShape")
        async with Producer("pg-timer-shape", cluster.namesrv_addr) as producer:
            for i in range(30):
                props = {"TIMER_DELAY_MS": str(700 + i * 900)}
                await producer.send(Message("TimedShape", f"s{i}".encode(), properties=props))
        await trio.sleep(9)
        before = len(_read_all(cluster.controller.context.store, "TimedShape", 0))
        assert 0 < before < 30
        autojump_clock.autojump_threshold = math.inf
        await cluster.stop_broker()
        cluster._broker_overrides.update(timer_wheel_slots=600, timer_precision_ms=200)
        await cluster.start_broker()
        autojump_clock.autojump_threshold = 0
        use_virtual_store_clock(cluster, clock)
        assert cluster.controller.timer.timers.wheel.slots == 600
        await trio.sleep(40)
        delivered = _read_all(cluster.controller.context.store, "TimedShape", 0)
        assert sorted(m.body for m in delivered) == sorted(f"s{i}".encode() for i in range(30))
        for msg in delivered:
            assert 0 <= msg.store_timestamp - int(msg.properties["TIMER_OUT_MS"]) < 1000
        assert cluster.controller.timer.pending == 0


def test_a_clean_stop_in_the_middle_of_a_crash_rebuild_files_each_rolled_timer_once(tmp_path: Path) -> None:
    """A crash with rolls before and after its last checkpoint, then a rebuild cut short by a clean stop: the next
    start carries on the rebuild (its skip rules are in the clean checkpoint) rather than filing the rest of the
    timer queue as new, which filed a rolled timer's original and its copy both (two deliveries)."""
    now = [1_000_000]
    store, config_dir, timers = open_timer_store(tmp_path, now)
    for i in range(8):
        store.append(_timer_record(now[0] + 6_000 + 3_000 * i, f"r{i}".encode()))
    assert timers.enqueue(100) == 8
    _walk(timers, now, 7)
    checkpoint = timers.checkpoint(clean=False)
    early = len(_crashed(store))
    _walk(timers, now, 4)
    repeated = _crashed(store)[early:]  # a crash repeats what was delivered after its last checkpoint
    timers.save_checkpoint(checkpoint)
    timers.close()
    rebuilding = _reopen(store, config_dir, slots=64)
    assert rebuilding.enqueue(3) == 3  # the rebuild has more of the queue to judge
    _save_clean(rebuilding)
    rebuilding.close()
    again = _reopen(store, config_dir, slots=64)
    _walk(again, now, 30)
    assert sorted(_crashed(store)) == sorted([f"r{i}".encode() for i in range(8)] + repeated)
    _never_early(store, 5_000)  # the repeats go out at the rebuild, late
    _close_idle(again, store)


async def test_a_promoted_followers_checkpoint_keeps_the_roll_windows_its_records_were_filed_with(
    tmp_path: Path,
) -> None:
    """A member that led (filing a long timer with a 48-slot roll window), stepped down and follows with
    ``timerRollWindowSlot`` lowered to 10 adopts its leader's progress: the adopted checkpoint keeps the windows the
    records below it were filed with, so when it leads again its rebuild does not take the unrolled timer for rolled
    (with the new window its roll time lies before the read time) and drop it."""
    now = [1_000_000]
    store, config_dir, timers = open_timer_store(tmp_path, now)
    store.append(_timer_record(now[0] + 30_000, b"far"))
    assert timers.enqueue(100) == 1  # to roll at + 4.8 s
    now[0] += 2_500
    run_timer(timers, now[0])
    assert timers.rolled == 0
    progress = (timers.enqueue_offset, timers.read_ms)
    _save_clean(timers)
    timers.close()  # stepped down
    follower = TimerMessageService(store, config_dir, wheel_slots=64, roll_window_slot=10)
    await follower.adopt_checkpoint(*progress)
    cp = orjson.loads((config_dir / "timerCheck.json").read_bytes())
    assert cp["clean"] is False and [w[1] for w in cp["rollWindows"]] == [48, 10]
    promoted = _reopen(store, config_dir, slots=64, roll_window_slot=10)
    _walk(promoted, now, 40)
    assert _crashed(store) == [b"far"]
    _close_idle(promoted, store)


async def test_a_timer_message_for_a_congested_slot_is_refused_with_rocketmqs_flow_control_remark(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """``timerCongestNumEachSlot`` (RocketMQ 5.3's ``TimerMessageStore.isReject``, here 1): a slot holding 1 entry
    takes another, one holding 2 (twice the limit) refuses with SYSTEM_ERROR and Java's remark; another slot, and
    the same time once a raised limit allows it (``updateBrokerConfig``, at once), are accepted."""
    async with EmbeddedCluster(tmp_path, **SMALL_STORE, timer_congest_num_each_slot=1) as cluster:
        clock = use_virtual_store_clock(cluster)
        await create_topic(cluster, "TimedBusy")
        due = str(clock() + 60_000)
        remark = (
            "timer message is under flow control, max num limit is 2 or the current value is greater than 1 and "
            "less than 2, trigger random flow control"
        )
        async with Admin(cluster.namesrv_addr) as admin, Producer("pg-busy", cluster.namesrv_addr) as producer:
            for body in (b"b0", b"b1"):
                await producer.send(Message("TimedBusy", body, properties={"TIMER_DELIVER_MS": due}))
                await trio.sleep(0.5)  # filed
            with pytest.raises(SendFailedError) as info:  # SYSTEM_ERROR: the producer retries, as Java's
                await producer.send(Message("TimedBusy", b"b2", properties={"TIMER_DELIVER_MS": due}))
            assert str(info.value).count(f"response code 1 from {cluster.broker_addr}: {remark}") == 3
            await producer.send(Message("TimedBusy", b"other", properties={"TIMER_DELAY_SEC": "30"}))
            await admin.update_broker_config(cluster.broker_addr, {"timerCongestNumEachSlot": "10"})
            await producer.send(Message("TimedBusy", b"b3", properties={"TIMER_DELIVER_MS": due}))
        await trio.sleep(70)
        delivered = _read_all(cluster.controller.context.store, "TimedBusy", 0)
        assert sorted(m.body for m in delivered) == [b"b0", b"b1", b"b3", b"other"]


def test_a_timer_hours_behind_catches_up_reading_the_wheel_only_up_to_each_filled_slot(tmp_path: Path) -> None:
    """A timer 20 h behind (a broker restarted after a day down) delivers 300 timers 300 ms apart in one pass. Each
    move over empty slots reads the wheel only up to the next filled slot: it copied the rest of the 604,800-slot
    wheel (14.5 MB) before looking, once per filled slot, stalling the Trio thread for seconds per pass (the cost is
    measured as the pass's peak allocation, not by a clock)."""
    now = [1_000_000]
    store, config_dir, timers = open_timer_store(tmp_path, now)
    timers.close()
    timers = _reopen(store, config_dir)
    for i in range(300):
        store.append(_timer_record(now[0] + 1_000 + 300 * i, f"t{i}".encode()))
    assert timers.enqueue(1_000) == 300
    now[0] += 20 * HOUR_MS
    tracemalloc.start()
    try:
        timers.dequeue(now[0], 1_000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(_crashed(store)) == 300
    assert peak < WHEEL_SLOTS * 24 // 16, peak  # far below one copy of the wheel
    timers.close()
    store.close()


def test_a_crash_then_a_start_with_a_coarser_precision_loses_no_timer_and_delivers_none_early(
    tmp_path: Path,
) -> None:
    """A crash at 100 ms slots (read time 1,004,600), a start at 1000 ms: the rebuild judges a record rolled when its
    roll time lies before the checkpoint's read time, and its read time is a slot of the new wheel. It judged by the
    roll time's new slot (1,004,000 < 1,004,600), took an unrolled timer (roll at 1,004,800) for rolled and dropped
    it, and kept the unaligned read time, so a timer due at 1,004,700 filed into slot 1,004,000 went out at once,
    early."""
    now = [1_000_000]
    store, config_dir, timers = open_timer_store(tmp_path, now)
    store.append(_timer_record(now[0] + 30_000, b"far"))  # to roll at + 4.8 s (48 slots of 100 ms)
    store.append(_timer_record(now[0] + 4_700, b"near"))
    assert timers.enqueue(100) == 2
    now[0] += 4_650
    run_timer(timers, now[0])
    assert (timers.read_ms, timers.rolled, _crashed(store)) == (1_004_600, 0, [])
    timers.save_checkpoint(timers.checkpoint(clean=False))
    timers.close()  # a crash
    again = _reopen(store, config_dir, slots=64, precision_ms=1000)
    run_timer(again, now[0])
    assert _crashed(store) == []  # "near" is due at 1,004,700
    _walk(again, now, 40)
    assert sorted(_crashed(store)) == [b"far", b"near"]
    _never_early(store, 2_000)  # a 1000 ms slot, walked at most 1 s after it passed
    _close_idle(again, store)


def test_a_crash_in_the_middle_of_a_crash_rebuild_delivers_no_timer_again(tmp_path: Path) -> None:
    """A crash while the rebuild after a crash is still judging the timer queue: the periodic (unclean) checkpoint
    taken then holds the rebuild's own progress (below the first crash's) and its skip rules; the next start must
    rebuild by those rules, else every timer delivered before the first crash from that progress on goes out again
    (RocketMQ 5.3's TimerMessageStore.recover starts from its checkpoint's queue offset and read time whatever
    happened in between)."""
    now = [1_000_000]
    store, config_dir = _three_of_six_delivered(tmp_path, now)  # a crash: its checkpoint has the deliveries

    rebuilding = _reopen(store, config_dir, slots=64)
    assert rebuilding.enqueue(2) == 2  # the rebuild has more of the queue to judge
    rebuilding.save_checkpoint(rebuilding.checkpoint(clean=False))  # the service's periodic save
    rebuilding.close()  # crash again

    again = _reopen(store, config_dir, slots=64)
    _walk(again, now, 10)
    assert sorted(_crashed(store)) == [f"c{i}".encode() for i in range(6)]
    _close_idle(again, store)


def test_a_second_crash_after_a_rebuild_rolled_a_timer_again_delivers_it_once(tmp_path: Path) -> None:
    """A timer rolled after the last checkpoint, a crash: the rebuild files its original again (its roll time lies
    after the checkpoint's read time), skips the copy, and the original rolls again into a second copy. A second
    crash after that: the original is now judged rolled and each copy of it was filed, the first one too (the
    first rebuild's decision to skip it was kept nowhere), so the timer was delivered twice."""
    now = [1_000_000]
    store, config_dir, timers = open_timer_store(tmp_path, now)
    store.append(_timer_record(now[0] + 12_000, b"long"))
    assert timers.enqueue(10) == 1  # filed to roll at + 4.8 s (48 slots of 100 ms)
    now[0] += 1_000
    run_timer(timers, now[0])
    checkpoint = timers.checkpoint(clean=False)
    now[0] += 4_000
    run_timer(timers, now[0])
    assert timers.rolled == 1  # after the checkpoint
    timers.save_checkpoint(checkpoint)
    timers.close()  # a crash

    rebuilt = _reopen(store, config_dir, slots=64)
    _walk(rebuilt, now, 3)
    rebuilt.save_checkpoint(rebuilt.checkpoint(clean=False))
    rebuilt.close()  # a second crash, its checkpoint after everything the rebuild did

    again = _reopen(store, config_dir, slots=64)
    _walk(again, now, 20)
    assert _crashed(store) == [b"long"]
    _never_early(store, 1_100)
    _close_idle(again, store)


async def test_the_runtime_infos_timer_congest_num_is_kept_not_counted_over_the_wheel(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """GET_BROKER_RUNTIME_INFO's ``timerCongestNum`` (RocketMQ 5.3's ``TimerWheel.getAllNum`` from the read time,
    summed in an admin thread there) was counted over the whole 604,800-slot wheel on the Trio thread at every call
    (14.5 MB read: a broker stalled for 30-100 ms by each ``brokerStatus`` poll). It is kept as the timer files and
    walks, and agrees with the wheel's count through filing, rolls, deliveries and restarts. The cost is measured as
    the calls into C code one answer makes, not by a clock."""
    now = [1_000_000]
    store, config_dir, timers = open_timer_store(tmp_path, now)
    timers.close()
    for i in range(4):
        store.append(_timer_record(now[0] + 3_000 + 1_000 * i, f"n{i}".encode()))
    store.append(_timer_record(now[0] + 3 * 24 * HOUR_MS, b"far"))  # filed to roll at + 4.8 h

    def congest_num(service: TimerMessageService) -> int:
        calls = [0]

        def profile(_frame: object, event: str, _arg: object) -> None:
            calls[0] += event == "c_call"

        sys.setprofile(profile)
        try:
            value = service.stats()["timerCongestNum"]
        finally:
            sys.setprofile(None)
        assert calls[0] < 100, calls[0]  # the whole wheel: 148 chunks, more than a thousand calls
        assert int(value) == service.timers.wheel.entries_from(service.timers.read_ms)
        return int(value)

    # A start, a clean stop; a start, a crash (its last checkpoint unclean); a start that rebuilds the wheel.
    for step, expected in ((4_100, (5, 3)), (6 * HOUR_MS, (3, 1)), (2 * 24 * HOUR_MS, (1, 1))):
        service = TimerMessageService(store, config_dir)
        async with trio.open_nursery() as nursery:
            await nursery.start(service.run)
            await trio.sleep(0.5)
            assert congest_num(service) == expected[0]
            unclean = service.timers.checkpoint(clean=False)
            now[0] += step
            await trio.sleep(1.5)
            assert congest_num(service) == expected[1]
            nursery.cancel_scope.cancel()
        if step == 6 * HOUR_MS:  # a crash: the clean save at shutdown never happened
            service.timers.save_checkpoint(unclean)
    assert sorted(set(_crashed(store))) == [b"n0", b"n1", b"n2", b"n3"]  # "far" is due in 3 days
    store.close()


def test_the_progress_a_slave_copies_during_a_crash_rebuild_delivers_no_timer_again(tmp_path: Path) -> None:
    """The confirmed progress a slave copies (GET_TIMER_CHECK_POINT, RocketMQ 5.3's
    ``SlaveSynchronize.syncTimerCheckPoint``) while its master's crash rebuild is still judging the timer queue: it
    was the rebuild's own offset, below the first crash's, and a slave promoted with it delivered again every timer
    delivered before that crash from there on (the copy carries no skip rules)."""
    now = [1_000_000]
    store, config_dir = _three_of_six_delivered(tmp_path, now)  # a crash: its checkpoint has the deliveries

    rebuilding = _reopen(store, config_dir, slots=64)
    assert rebuilding.enqueue(2) == 2  # the rebuild has more of the queue to judge
    offset, read_ms = rebuilding.confirmed()  # what a slave copies now
    windows = rebuilding.windows
    rebuilding.close()
    # The slave's adopted checkpoint (TimerMessageService.adopt_checkpoint), then its promotion over the same queue.
    rebuilding.save_checkpoint(TimerCheckpoint(enqueue_offset=offset, read_ms=read_ms, windows=windows))
    promoted = _reopen(store, config_dir, slots=64)
    _walk(promoted, now, 10)
    assert sorted(_crashed(store)) == [f"c{i}".encode() for i in range(6)]
    _close_idle(promoted, store)


@pytest.mark.parametrize("then", ["crash", "slave"])
def test_a_crash_rebuild_at_a_coarser_precision_keeps_the_crashs_read_time_as_progress(
    tmp_path: Path, then: str
) -> None:
    """A crash at 100 ms slots (read time 1,003,500), a rebuild at 1000 ms slots (its read time the slot 1,003,000)
    still judging the timer queue, then a second crash (its periodic unclean checkpoint) or a slave's promotion (the
    progress it copied): the progress must be the first crash's, read time included. It was the rebuild's own read
    time, so the timers due from 1,003,000 to the crash's read time, delivered before the crash, went out again."""
    now = [1_000_000]
    store, config_dir = _three_of_six_delivered(tmp_path, now, with_x=True)  # a crash, the four deliveries saved

    rebuilding = _reopen(store, config_dir, slots=64, precision_ms=1000)
    assert rebuilding.enqueue(2) == 2  # the rebuild has more of the queue to judge
    if then == "crash":
        rebuilding.save_checkpoint(rebuilding.checkpoint(clean=False))  # the service's periodic save
    else:  # the slave's adopted checkpoint (TimerMessageService.adopt_checkpoint), then its promotion
        _adopt_confirmed(rebuilding)
    rebuilding.close()

    _start_at_1000_ms_delivers_the_rest_once(store, config_dir, now)


def test_a_clean_stop_in_the_middle_of_a_crash_rebuild_keeps_the_roll_windows_of_the_crash(tmp_path: Path) -> None:
    """``timerRollWindowSlot`` lowered (48 slots to 10) at the start after a crash, whose rebuild a clean stop cuts
    short: the next start carries on the rebuild and must judge the records the crashed run filed by the window they
    were filed with. It kept the saved windows only below the rebuild's own offset, so a timer filed unrolled under
    the old window further on was judged by the new one, taken for rolled before the crash, and dropped."""
    now = [1_000_000]
    store, config_dir, timers = open_timer_store(tmp_path, now)
    for i in range(3):
        store.append(_timer_record(now[0] + 1_000, f"f{i}".encode()))
    store.append(_timer_record(now[0] + 30_000, b"far"))  # filed to roll at + 4.8 s (48 slots of 100 ms)
    assert timers.enqueue(100) == 4
    now[0] += 2_500
    run_timer(timers, now[0])
    assert (timers.rolled, sorted(_crashed(store))) == (0, [b"f0", b"f1", b"f2"])
    timers.save_checkpoint(timers.checkpoint(clean=False))
    timers.close()  # a crash: "far" not rolled (with 10 slots it would have rolled at + 1 s)

    rebuilding = _reopen(store, config_dir, slots=64, roll_window_slot=10)
    assert rebuilding.enqueue(2) == 2  # the rebuild has more of the queue to judge
    _save_clean(rebuilding)
    rebuilding.close()

    again = _reopen(store, config_dir, slots=64, roll_window_slot=10)
    _walk(again, now, 40)
    assert sorted(_crashed(store)) == [b"f0", b"f1", b"f2", b"far"]
    _close_idle(again, store)


@pytest.mark.parametrize("then", ["crash", "slave", "clean stop, then crash"])
def test_a_crash_rebuild_at_a_coarser_precision_that_filed_the_queue_keeps_the_crashs_read_time(
    tmp_path: Path, then: str
) -> None:
    """As above, but the rebuild at 1000 ms slots has filed the whole timer queue (its offset reached the crash's)
    and not yet walked its first slot, 1,003,000, below the crash's read time 1,003,500. The progress it confirmed
    was its offset with that slot, so a second crash, a promoted slave, or a crash after a clean stop and start
    there (the clean checkpoint dropped the skip rules) delivered again "c2" and "x" (due 1,003,000 and 1,003,200,
    delivered before the first crash)."""
    now = [1_000_000]
    store, config_dir = _three_of_six_delivered(tmp_path, now, with_x=True)  # a crash, the four deliveries saved

    rebuilding = _reopen(store, config_dir, slots=64, precision_ms=1000)
    assert rebuilding.enqueue(100) == 9  # the whole queue judged (c4, c5 rolled); the slot 1,003,000 not walked
    assert rebuilding.read_ms == 1_003_000
    if then == "crash":
        rebuilding.save_checkpoint(rebuilding.checkpoint(clean=False))  # the service's periodic save
    elif then == "slave":  # the slave's adopted checkpoint (TimerMessageService.adopt_checkpoint), then its promotion
        _adopt_confirmed(rebuilding)
    else:
        _save_clean(rebuilding)
        rebuilding.close()
        rebuilding = _reopen(store, config_dir, slots=64, precision_ms=1000)
        assert rebuilding.read_ms == 1_003_000
        rebuilding.save_checkpoint(rebuilding.checkpoint(clean=False))  # the service's first save, then a crash
    rebuilding.close()

    _start_at_1000_ms_delivers_the_rest_once(store, config_dir, now)


@pytest.mark.parametrize("then", ["crash in the migration", "crash after it", "slave"])
def test_a_migration_to_a_coarser_precision_keeps_the_read_time_as_progress(tmp_path: Path, then: str) -> None:
    """A clean stop at 100 ms slots (read time 1,003,500, "c2" and "x" due 1,003,000 and 1,003,200 delivered), a
    start at 1000 ms slots: the migration reads on from the slot 1,003,000. A crash in its middle (its own unclean
    checkpoint), one right after it (the service's first save) or a slave promoted with the progress it copied must
    not deliver "c2" and "x" again: the clean stop's progress was exact. The progress was that lower slot."""
    now = [1_000_000]
    store, config_dir = _three_of_six_delivered(tmp_path, now, with_x=True, clean=True)

    migrated = _reopen(store, config_dir, slots=64, precision_ms=1000)
    assert migrated.read_ms == 1_003_000
    if then == "crash after it":
        migrated.save_checkpoint(migrated.checkpoint(clean=False))  # the service's first save
    elif then == "slave":  # the slave's adopted checkpoint (TimerMessageService.adopt_checkpoint), then its promotion
        _adopt_confirmed(migrated)
    migrated.close()

    _start_at_1000_ms_delivers_the_rest_once(store, config_dir, now)


async def test_a_crash_rebuild_at_a_start_reads_the_store_on_the_trio_thread_only(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A timer started over an unclean checkpoint (a crash, or a DLedger member promoted with the progress it
    copied) looks for the rolled copies in the timer queue before filing it. That read of the store ran in the
    load's worker thread, while the Trio thread goes on serving and retention takes segments out of the store and
    unmaps them (the store is single-threaded: a segment list shifted under a lookup hands back another segment's
    bytes, a released view raises). Every store read of the start must be made on the Trio thread; the rebuild then
    still files one copy of each rolled timer."""
    now = [1_000_000]
    store, config_dir, timers = open_timer_store(tmp_path, now)
    for i in range(8):
        store.append(_timer_record(now[0] + 6_000 + 3_000 * i, f"r{i}".encode()))
    assert timers.enqueue(100) == 8
    _walk(timers, now, 7)
    crash = timers.checkpoint(clean=False)  # the crash's last checkpoint: some rolls before it
    rolled, early = timers.rolled, len(_crashed(store))
    _walk(timers, now, 4)
    assert timers.rolled > rolled  # and some after it: the start finds their copies
    repeated = _crashed(store)[early:]
    timers.save_checkpoint(crash)
    timers.close()
    trio_thread, off_thread = threading.get_ident(), []
    plain_look = store.look_message_by_offset

    def look(phy: int, size: int | None = None) -> memoryview | None:
        if threading.get_ident() != trio_thread:
            off_thread.append(phy)
        return plain_look(phy, size)

    store.look_message_by_offset = look  # type: ignore[method-assign]
    service = TimerMessageService(store, config_dir, wheel_slots=64)
    async with trio.open_nursery() as nursery:
        await nursery.start(service.run)
        assert off_thread == []
        for _ in range(30):
            now[0] += 1_000
            service.notify()
            await trio.sleep(0.1)
        nursery.cancel_scope.cancel()
    assert sorted(_crashed(store)) == sorted([f"r{i}".encode() for i in range(8)] + repeated)
    store.close()
