"""The broker's own puts kept out of the put items (broker/stats/puts.py ``StorePuts.own``) are kept as runs of queue
offsets: checked against a plain per-offset model over random sends, marks (in order, out of order, again, ahead of
the queue), samplings, unacknowledged appends, role changes and topic deletions, on a real store whose ConsumeQueue
segments hold 8 entries (runs cross segments)."""

from __future__ import annotations

import itertools
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.stats.puts import StorePuts
from tests.store.store_helpers import message, open_store

TOPIC = "MarkedTopic"
QUEUES = 2

_queue = st.integers(0, QUEUES - 1)
_kind = st.sampled_from([None, True, False])  # unmarked, marked counting in its topic, marked in no item
_op = st.one_of(
    st.tuples(st.just("send"), _queue, _kind, st.integers(1, 60), st.integers(1, 12)),
    st.tuples(st.just("mark_back"), _queue, st.booleans(), st.integers(0, 20)),
    st.tuples(st.just("mark_ahead"), _queue, st.booleans(), st.integers(0, 5)),
    st.tuples(st.just("collect"), _queue, st.integers(0, 30), st.integers(0, 6)),
    st.just(("collect",)),
    st.just(("role",)),
    st.just(("delete",)),
)


class Model:
    """What the broker's own-put bookkeeping means, one offset at a time (the last mark of an offset wins)."""

    def __init__(self) -> None:
        self.marks: dict[tuple[str, int], dict[int, bool]] = {}
        self.seen: dict[tuple[str, int], int] = {}

    def collect(self, store, unacknowledged: dict[tuple[str, int], list[tuple[int, int]]]) -> dict[str, tuple]:
        taken: dict[str, tuple[int, int, int, int]] = {}
        for key, offset in store.queue_offsets.items():
            cq = store.consume_queues.get(key)
            offset = min(offset, cq.max_offset)
            before = self.seen.get(key, 0)
            if offset == before:
                continue
            self.seen[key] = offset
            marks = self.marks.get(key, {})
            ranges = unacknowledged.get(key, [])
            msgs = size = broker = 0
            for at in sorted(at for at in marks if at < offset):
                in_topic = marks.pop(at)
                if at < before or any(first <= at < end for first, end in ranges):
                    continue
                broker += 1
                if not in_topic:
                    msgs += 1
                    size += cq.sizes_total(at, at + 1)
            if broker:
                was = taken.get(key[0], (0, 0, 0, 0))
                taken[key[0]] = (was[0] + msgs, was[1] + size, was[2] + msgs, was[3] + broker)
        return taken


def _expanded(puts: StorePuts) -> dict[tuple[str, int], dict[int, bool]]:
    owned = puts._own
    for runs in owned.values():
        assert runs, "an empty run list is dropped"
        for (_, end, in_topic), (start, _, next_in_topic) in itertools.pairwise(runs):
            assert end <= start, "runs are sorted and disjoint"
            assert end < start or in_topic != next_in_topic, "neighbours of the same kind are merged"
    return {
        key: {at: in_topic for start, end, in_topic in runs for at in range(start, end)} for key, runs in owned.items()
    }


@settings(max_examples=400, deadline=None)
@given(st.lists(_op, max_size=40))
def test_own_put_runs_match_per_offset_model(ops: list[tuple]) -> None:
    with tempfile.TemporaryDirectory(prefix="stats-marks-") as tmp:
        store = open_store(Path(tmp) / "store")
        try:
            puts = StorePuts(store)
            puts.start()
            model = Model()

            def mark(key: tuple[str, int], at: int, in_topic: bool) -> None:
                puts.own(key, at, in_topic)
                model.marks.setdefault(key, {})[at] = in_topic

            for op in ops:
                if op[0] == "send":
                    _, queue_id, kind, body, count = op
                    for _ in range(count):
                        appended = store.append(message(TOPIC, b"b" * body, queue_id=queue_id))
                        if kind is not None:
                            mark((TOPIC, queue_id), appended.queue_offset, kind)
                elif op[0] == "mark_back":
                    _, queue_id, in_topic, back = op
                    at = store.queue_offsets.get((TOPIC, queue_id), 0) - 1 - back
                    if at >= 0:
                        mark((TOPIC, queue_id), at, in_topic)
                elif op[0] == "mark_ahead":
                    _, queue_id, in_topic, ahead = op
                    mark((TOPIC, queue_id), store.queue_offsets.get((TOPIC, queue_id), 0) + ahead, in_topic)
                elif op[0] == "collect":
                    unacknowledged: dict[tuple[str, int], list[tuple[int, int]]] = {}
                    if len(op) == 4:  # a DLedger append answered as failed, in this window
                        _, queue_id, first, length = op
                        key = (TOPIC, queue_id)
                        start = model.seen.get(key, 0) + first
                        unacknowledged[key] = [(start, start + length)]
                    store.unacknowledged.clear()
                    store.unacknowledged.update({k: list(v) for k, v in unacknowledged.items()})
                    puts.collect()
                    assert puts.taken == model.collect(store, unacknowledged)
                    store.unacknowledged.clear()
                elif op[0] == "role":
                    puts.forget_batches()
                    model.marks.clear()
                else:
                    puts.forget(TOPIC)
                    model.marks.clear()
                    model.seen.clear()
                assert _expanded(puts) == {key: marks for key, marks in model.marks.items() if marks}
            puts.collect()
            model.collect(store, {})
            ahead = {key: marks for key, marks in model.marks.items() if marks}
            assert _expanded(puts) == ahead  # only marks the queues have not reached yet are kept
        finally:
            store.close()
