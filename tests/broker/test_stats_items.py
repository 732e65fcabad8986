"""Stats items and store rates (broker/stats): windows, rates and day totals against values computed by hand."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from broker.stats import BROKER_PUT_NUMS, BrokerStatsManager
from broker.stats.item import StatsItem
from broker.stats.store_stats import StoreStats
from remoting.codec.message import MessageRecord
from store.message_store import MessageStore
from store.store_config import StoreConfig


@given(st.lists(st.integers(min_value=0, max_value=10_000), min_size=1, max_size=700))
def test_store_rates_equal_the_mean_of_the_last_seconds(per_second: list[int]) -> None:
    stats = StoreStats()
    stats.sample(0)
    for second, added in enumerate(per_second, start=1):
        stats.put_total += added
        stats.sample(second * 1000)
    for window in (10, 60, 600):
        recent = per_second[-window:]
        assert abs(stats.tps(1, window) - sum(recent) / len(recent)) < 1e-6


def test_store_rates_read_zero_before_two_samples() -> None:
    stats = StoreStats()
    assert stats.runtime_entries()["putTps"] == "0.0 0.0 0.0"
    stats.put_total = 7
    stats.sample(1000)
    assert stats.runtime_entries()["getTotalTps"] == "0.0 0.0 0.0"


@given(st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 50)), min_size=1, max_size=20))
def test_minute_window_spans_its_last_seven_samples(steps: list[tuple[int, int]]) -> None:
    item = StatsItem("t")
    values = [(-10_000, 0, 0), (0, 0, 0)]
    item.sample_seconds(0)
    for i, (value, times) in enumerate(steps, start=1):
        item.add(value, times)
        item.sample_seconds(i * 10_000)
        values.append((i * 10_000, item.times, item.value))
    window = values[-7:]
    snapshot = item.in_minute()
    total = window[-1][2] - window[0][2]
    times = window[-1][1] - window[0][1]
    assert snapshot.total == total
    assert abs(snapshot.tps - total * 1000 / (window[-1][0] - window[0][0])) < 1e-9
    assert snapshot.avgpt == (total / times if times else 0.0)


def test_day_totals_roll_at_local_midnight(tmp_path: Path) -> None:
    store = MessageStore(
        StoreConfig(tmp_path, mapped_file_size_commit_log=1 << 20, mapped_file_size_consume_queue=2000)
    )
    store.load()
    try:
        clock = [1_700_000_000.0]
        stats = BrokerStatsManager(store, "c", wall_clock=lambda: clock[0])
        stats.start_counting()
        stats.sample_second(1, 1000)
        for _ in range(3):
            store.append(MessageRecord("T", b"x"))
        stats.sample_second(2, 2000)
        clock[0] += 86_400
        stats.sample_second(3, 3000)
        store.append(MessageRecord("T", b"y"))
        stats.sample_second(4, 4000)
        entries = stats.runtime_entries()
        assert (entries["msgPutTotalYesterdayMorning"], entries["msgPutTotalTodayMorning"]) == ("0", "3")
        assert entries["msgPutTotalTodayNow"] == "4"
        broker_item = stats.item(BROKER_PUT_NUMS, "c")
        assert broker_item is not None and broker_item.value == 4
    finally:
        store.close()


async def test_a_deleted_and_recreated_topic_counts_from_its_new_messages(tmp_path: Path) -> None:
    store = MessageStore(
        StoreConfig(tmp_path, mapped_file_size_commit_log=1 << 20, mapped_file_size_consume_queue=2000)
    )
    store.load()
    try:
        stats = BrokerStatsManager(store, "c")
        stats.start_counting()
        for _ in range(5):
            store.append(MessageRecord("T", b"x"))
        stats.sample_second(1, 1000)
        assert await store.delete_topic("T") == 1
        stats.on_topic_deleted("T")
        for _ in range(2):
            store.append(MessageRecord("T", b"y"))
        stats.sample_second(2, 2000)
        assert stats.runtime_entries()["msgPutTotalTodayNow"] == "7"
        item = stats.item("TOPIC_PUT_NUMS", "T")
        assert item is not None and item.value == 2
    finally:
        store.close()


def test_a_batch_lost_with_a_dledger_term_takes_no_put_call_back_from_later_sends(tmp_path: Path) -> None:
    """A DLedger leader's batch of 4 (queue offsets 1..4) was appended, then the leader lost its term before the
    quorum acknowledged it: its send was answered UNKNOWN_ERROR and the entries were truncated, so 4.9.8's
    ``handlePutMessageResult`` never counted its one call. Once the broker leads again, four single sends take
    those offsets: each is a call of its own, none is the lost batch's."""
    store = MessageStore(
        StoreConfig(tmp_path, mapped_file_size_commit_log=1 << 20, mapped_file_size_consume_queue=2000)
    )
    store.load()
    try:
        stats = BrokerStatsManager(store, "c")
        stats.start_counting()
        store.append(MessageRecord("T", b"before"))
        stats.record_batch_put("T", 0, 5, 4)  # appended at 1..4, never committed
        stats.set_replica(True)  # the term was lost: SLAVE
        stats.set_replica(False)  # leads again; the batch's entries were truncated
        for _ in range(4):
            store.append(MessageRecord("T", b"single"))
        stats.sample_second(0, 10_000)
        item = stats.item("TOPIC_PUT_NUMS", "T")
        assert item is not None and (item.value, item.times) == (5, 5)
    finally:
        store.close()
