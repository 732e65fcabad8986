"""``rocketmq_timer_message_snapshot``'s figures (RocketMQ 5.3.3's DefaultStoreMetricsManager over TimerMetrics'
``timerDist``) come from per-slot counts kept as the wheel changes, not from a scan of the wheel on every scrape:
over random filings (rolled ones too), walks, a lagging walk and clean restarts they stay equal to a full scan."""

from __future__ import annotations

import bisect
import tempfile
import tracemalloc
from collections.abc import Sequence
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.timer import TIMER_TOPIC, TimerStore
from broker.timer.wheel import WHEEL_SLOTS, TimerWheel
from remoting.codec.message import MessageRecord
from tests.semantics.test_timer import open_timer_store, run_timer

SPAN_MS = 64 * 100  # open_timer_store's wheel: 64 slots of 100 ms
BOUNDS_MS = (500, 1_500, 3_000, 6_400, 9_000)


def _scanned_ahead(wheel: TimerWheel, from_ms: int, bounds_ms: Sequence[int]) -> list[int]:
    """The figures by a full scan: each filled slot of this turn from ``from_ms``'s on, by its period ahead."""
    start, prec = wheel.slot_time(from_ms), wheel.precision_ms
    reach = min(-(-bounds_ms[-1] // prec), wheel.slots)
    totals = [0] * len(bounds_ms)
    for _, slot in wheel.filled():
        ahead = (slot.slot_ms - start) // prec
        if 0 <= ahead < reach:
            totals[bisect.bisect_right(bounds_ms, ahead * prec)] += slot.num
    return totals


def _record(deliver_ms: int) -> MessageRecord:
    props = f"REAL_TOPIC\x01Snap\x02REAL_QID\x010\x02TIMER_OUT_MS\x01{deliver_ms}"
    return MessageRecord(topic=TIMER_TOPIC, body=b"t", properties=props)


def _restarted(timers: TimerStore, config_dir: Path) -> TimerStore:
    timers.flush()
    timers.save_checkpoint(timers.checkpoint(clean=True))
    timers.close()
    again = TimerStore(timers.store, config_dir, slots=64)
    again.load()
    return again


_STEP = st.one_of(
    st.tuples(st.just("file"), st.integers(-500, 3 * SPAN_MS)),
    st.tuples(st.just("tick"), st.integers(0, 2 * SPAN_MS)),
    st.tuples(st.just("run"), st.just(0)),
    st.tuples(st.just("restart"), st.just(0)),
)


@settings(max_examples=40, deadline=None)
@given(steps=st.lists(_STEP, max_size=40))
def test_the_snapshot_equals_a_full_scan_of_the_wheel_whatever_was_filed_and_walked(
    steps: list[tuple[str, int]],
) -> None:
    now = [1_000_000]
    with tempfile.TemporaryDirectory() as root:
        store, config_dir, timers = open_timer_store(Path(root), now)
        try:
            for op, arg in steps:
                if op == "file":
                    store.append(_record(now[0] + arg))
                    timers.enqueue(100)
                elif op == "tick":  # the clock moves on, the walk lags behind until the next run
                    now[0] += arg
                elif op == "run":
                    run_timer(timers, now[0])
                else:
                    timers = _restarted(timers, config_dir)
                for ahead_of_now in (0, 250, SPAN_MS):
                    at = now[0] + ahead_of_now
                    kept = timers.wheel.entries_ahead(at, BOUNDS_MS, counted_from_ms=timers.read_ms)
                    assert kept == _scanned_ahead(timers.wheel, at, BOUNDS_MS), (op, arg)
                assert timers.wheel.counted_total() == timers.congest_num
        finally:
            timers.close()
            store.close()


def test_an_empty_wheel_keeps_no_count_tree_in_ram(tmp_path: Path) -> None:
    """The kept counts take 8 bytes a slot (4.8 MB at the default 604,800) once a timer is filed: a broker whose wheel
    is empty, as most are, loads and counts it without allocating them (it took 9.7 MB of every idle broker)."""
    wheel = TimerWheel(tmp_path / "timerwheel", WHEEL_SLOTS, 100)
    tracemalloc.start()
    try:
        wheel.load()
        assert wheel.count_from(0) == 0
        empty_peak = tracemalloc.get_traced_memory()[1]
        wheel.put(wheel.get(500)._replace(last=0, entries=1))
        filled = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
        wheel.close()
    assert empty_peak < WHEEL_SLOTS, empty_peak  # well under a byte a slot
    assert filled >= 8 * WHEEL_SLOTS, filled  # the tree, from the first timer on
