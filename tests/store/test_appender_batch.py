"""``store._appender``'s batch path (``Appender.append_batch``, store/_appender.c): which batches it takes and which
it hands to the Python ``append_batch`` before writing anything, that what it takes is stored as the Python path
stores it (results, errors, listener calls, ConsumeQueue and CommitLog bytes), and that hostile clocks, listeners
and lists do not break it. A property test here runs random batches (1..70 records, any transaction flags, lists,
tuples and other sequences) through both paths; the one over mixed singles and small batches is in
tests/store/test_appender.py."""

from __future__ import annotations

import collections
import collections.abc
import contextlib
import functools
import gc
import struct
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from remoting.codec.message import MessageRecord, decode_record, prepare_message, read_record_meta
from remoting.codec.message_properties import tags_code
from store.consume_queue import CQ_STORE_UNIT_SIZE
from store.errors import MessageIllegalError, ServiceNotAvailableError
from store.message_store import SCHEDULE_TOPIC, MessageStore
from tests.store.appender import requires_appender
from tests.store.store_helpers import BORN_HOST, STORE_HOST, python_append
from tests.store.test_appender import (
    BAD_CLOCKS,
    END_FILE_MIN_BLANK,
    KEYS,
    MAX_BODY,
    TX_COMMIT,
    TX_PREPARED,
    TX_ROLLBACK,
    HostileClock,
    SlottedSubRecord,
    _appender,
    _close_and_compare_files,
    _close_consume_queue_file,
    _close_segment,
    _counts,
    _listen,
    _open,
    _outcome,
    _record,
    _state,
)

pytestmark = requires_appender


def _batch_counts(store: MessageStore) -> tuple[int, int]:
    appender = _appender(store)
    return appender.fast_batches, appender.batch_fallbacks


@contextlib.contextmanager
def _batch_routed(store: MessageStore, route: str) -> Iterator[None]:
    """The block makes exactly one batch append, taken by the C path (``fast``) or handed to the Python one."""
    fast, fallbacks = _batch_counts(store)
    yield
    assert _batch_counts(store) == (fast + (route == "fast"), fallbacks + (route == "fallback")), route


def _pair(tmp_path: Path, **overrides: Any) -> tuple[MessageStore, MessageStore]:
    """A store on the C path and one on the Python path, each with one message in TopicA/0 already."""
    native, python = _open(tmp_path / "native", **overrides), python_append(_open(tmp_path / "python", **overrides))
    for store in (native, python):
        store.append(_record())
    return native, python


#: segments and ConsumeQueue files that hold the biggest batch the C path takes (the tests' default is 4 KiB and 8
#: entries, so that batches cross them)
ROOMY: dict[str, int] = {"mapped_file_size_commit_log": 1 << 20, "mapped_file_size_consume_queue": 1000 * 20}


def _batch(n: int, **fields: Any) -> list[MessageRecord]:
    return [_record(body=b"b%d" % i, **fields) for i in range(n)]


@pytest.mark.parametrize("container", [list, tuple], ids=["list", "tuple"])
def test_a_batch_to_an_existing_queue_is_stored_by_the_c_path_as_the_python_one_stores_it(
    tmp_path: Path, container: Callable[[list[MessageRecord]], Any]
) -> None:
    native, python = _pair(tmp_path, **ROOMY)
    native_calls, python_calls = _listen(native), _listen(python)
    for n in (1, 2, 32, 64):
        batch = container(_batch(n))
        with _batch_routed(native, "fast"):
            got = _outcome(functools.partial(native.append_batch, batch))
        assert got == _outcome(functools.partial(python.append_batch, batch)) and got[0] == "ok"
        assert got[5] == n  # count
        assert _state(native) == _state(python)
    assert native_calls == python_calls and len(native_calls) == 1 + 2 + 32 + 64
    _close_and_compare_files(native, tmp_path / "native", python, tmp_path / "python")


def _sub(records: list[MessageRecord], at: int = 1) -> list[MessageRecord]:
    records[at] = SlottedSubRecord(*[getattr(records[at], f) for f in MessageRecord.__slots__ if f != "__weakref__"])
    return records


class RecordSequence(collections.abc.Sequence):  # type: ignore[type-arg]
    """A Sequence that is neither a list nor a tuple: the C path hands it to the Python one."""

    def __init__(self, records: list[MessageRecord]) -> None:
        self.records = records

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, i: Any) -> Any:
        return self.records[i]


class RecordList(list):  # type: ignore[type-arg]
    pass


FALLBACKS: dict[str, Callable[[], Any]] = {
    "new queue": lambda: _batch(3, queue_id=2),
    "empty": lambda: [],
    "65 records": lambda: _batch(65),
    "mixed queues": lambda: [_record(), _record(queue_id=1)],
    "mixed topics": lambda: [_record(), _record(topic="TopicB")],
    "schedule topic": lambda: _batch(2, topic=SCHEDULE_TOPIC, properties="DELAY\x012"),
    "subclass inside": lambda: _sub(_batch(3)),
    "deque": lambda: collections.deque(_batch(3)),
    "oversized body": lambda: [_record(), _record(body=b"x" * (MAX_BODY + 1))],
    "oversized properties": lambda: [_record(), _record(properties="K\x01" + "v" * 40_000)],
    # the first record of the schedule topic, the rest not: both paths refuse it as a mixed batch
    "schedule topic first": lambda: [_record(topic=SCHEDULE_TOPIC, properties="DELAY\x012"), _record()],
    "subclass first": lambda: _sub(_batch(3), 0),
    "subclass last": lambda: _sub(_batch(3), 2),
    "custom sequence": lambda: RecordSequence(_batch(3)),
    "list subclass": lambda: RecordList(_batch(3)),
    "None inside": lambda: [_record(), None],
    "oversized body first": lambda: [_record(body=b"x" * (MAX_BODY + 1)), _record()],
    "oversized body last of 64": lambda: [*_batch(63), _record(body=b"x" * (MAX_BODY + 1))],
    "oversized properties last": lambda: [_record(), _record(), _record(properties="K\x01" + "v" * 40_000)],
    "non-ASCII properties over the limit": lambda: [_record(), _record(properties="K\x01" + "订" * 11_000)],
}


@pytest.mark.parametrize("name", sorted(FALLBACKS))
def test_batches_the_c_path_hands_back_before_writing(tmp_path: Path, name: str) -> None:
    native, python = _pair(tmp_path)
    before = _state(native)
    with _batch_routed(native, "fallback"):
        got = _outcome(lambda: native.append_batch(FALLBACKS[name]()))
    assert got == _outcome(lambda: python.append_batch(FALLBACKS[name]()))
    assert _state(native) == _state(python)
    if got[0] == "error":
        assert _state(native) == before
    # the queue goes on in place, on the C path again
    with _batch_routed(native, "fast"):
        after = _outcome(lambda: native.append_batch(_batch(2)))
    assert after == _outcome(lambda: python.append_batch(_batch(2)))
    _close_and_compare_files(native, tmp_path / "native", python, tmp_path / "python")


def test_mixed_queue_and_oversized_batches_raise_the_store_errors(tmp_path: Path) -> None:
    native, _python = _pair(tmp_path)
    with pytest.raises(MessageIllegalError, match="one topic and queue"):
        native.append_batch([_record(), _record(queue_id=1)])
    with pytest.raises(MessageIllegalError, match="exceeds"):
        native.append_batch([_record(), _record(body=b"x" * (MAX_BODY + 1))])
    with pytest.raises(MessageIllegalError, match="empty batch"):
        native.append_batch([])
    native.close()


@pytest.mark.parametrize("sys_flag", [TX_PREPARED, TX_ROLLBACK, TX_COMMIT])
def test_a_batch_gives_every_record_an_entry_whatever_its_transaction_flag(tmp_path: Path, sys_flag: int) -> None:
    native, python = _pair(tmp_path)
    with _batch_routed(native, "fast"):
        got = _outcome(lambda: native.append_batch(_batch(3, sys_flag=sys_flag)))
    assert got == _outcome(lambda: python.append_batch(_batch(3, sys_flag=sys_flag)))
    assert native.queue_offsets[("TopicA", 0)] == native.consume_queues[("TopicA", 0)].max_offset == 4
    _close_and_compare_files(native, tmp_path / "native", python, tmp_path / "python")


def test_a_batch_crossing_the_consume_queue_file_falls_back_and_the_next_is_fast(tmp_path: Path) -> None:
    """ConsumeQueue files of 8 entries: one message in, 7 fit the first file, 8 do not."""
    native, python = _pair(tmp_path)
    with _batch_routed(native, "fallback"):
        crossing = _outcome(lambda: native.append_batch(_batch(8)))
    assert crossing == _outcome(lambda: python.append_batch(_batch(8)))
    assert len(native.consume_queues[("TopicA", 0)].queue.files) == 2
    with _batch_routed(native, "fast"):
        native.append_batch(_batch(7))  # offsets 9..15: the second file's rest
    python.append_batch(_batch(7))
    assert _state(native) == _state(python)
    _close_and_compare_files(native, tmp_path / "native", python, tmp_path / "python")


@pytest.mark.parametrize(("spare", "route"), [(0, "fast"), (1, "fallback")])
def test_a_batch_that_does_not_fit_the_segment_falls_back_and_rolls(tmp_path: Path, spare: int, route: str) -> None:
    """Two records filling the segment's room exactly (its end keeps the 8-byte blank's minimum) go in; one byte
    more, and the Python path writes the blank and rolls."""
    native, python = _pair(tmp_path, max_message_size=4096)
    segment = native.commitlog.queue.files[-1]
    room = segment.file_size - segment.wrote_position - 8
    payload = room - 2 * prepare_message(_record(body=b"")).size
    bodies = [b"x" * (payload // 2), b"x" * (payload - payload // 2 + spare)]
    with _batch_routed(native, route):
        got = _outcome(lambda: native.append_batch([_record(body=b) for b in bodies]))
    assert got == _outcome(lambda: python.append_batch([_record(body=b) for b in bodies])) and got[0] == "ok"
    assert len(native.commitlog.queue.files) == (1 if route == "fast" else 2)
    _close_and_compare_files(native, tmp_path / "native", python, tmp_path / "python")


def test_a_closed_or_full_store_refuses_batches_through_the_fallback(tmp_path: Path) -> None:
    native, _python = _pair(tmp_path)
    native.disk_full_reason = "disk full (test)"
    with _batch_routed(native, "fallback"), pytest.raises(ServiceNotAvailableError, match="disk full"):
        native.append_batch(_batch(2))
    native.disk_full_reason = None
    with _batch_routed(native, "fast"):
        native.append_batch(_batch(2))
    native.close()
    with pytest.raises(ServiceNotAvailableError):
        native.append_batch(_batch(2))


def test_a_failing_clock_writes_no_batch(tmp_path: Path) -> None:
    clock = HostileClock()
    native, _python = _pair(tmp_path, now_ms=clock)
    before, counts = _state(native), _batch_counts(native)
    clock.action = lambda now: 1 / 0
    with pytest.raises(ZeroDivisionError):
        native.append_batch(_batch(4))
    assert _state(native) == before and _batch_counts(native) == counts  # not written, not counted
    with _batch_routed(native, "fast"):
        landed = native.append_batch(_batch(4))
    assert (landed.phy_offset, landed.queue_offset) == (before[1], 1)
    native.close()


def test_a_raising_listener_sees_the_batch_stored(tmp_path: Path) -> None:
    native, python = _pair(tmp_path)
    seen: list[tuple[object, ...]] = []

    def listener(*args: object) -> None:
        seen.append(args)
        raise RuntimeError("listener failed")

    for store in (native, python):
        store.arrival_listener = listener
    with _batch_routed(native, "fast"), pytest.raises(RuntimeError):
        native.append_batch(_batch(3))
    with pytest.raises(RuntimeError):
        python.append_batch(_batch(3))
    assert seen[0] == seen[1] and seen[0][2] == 1  # each path called it once, for the first message, at offset 1
    assert _state(native) == _state(python) and native.queue_offsets[("TopicA", 0)] == 4
    _close_and_compare_files(native, tmp_path / "native", python, tmp_path / "python")


def test_a_clock_emptying_the_callers_list_does_not_change_what_is_written(tmp_path: Path) -> None:
    """The C path takes a tuple of the list first: the records it holds stay alive and are the ones written."""
    clock = HostileClock()
    native = _open(tmp_path / "native", now_ms=clock)
    python = python_append(_open(tmp_path / "python"))
    for store in (native, python):
        store.append(_record())
    records = _batch(5)
    clock.action = lambda now: (records.clear(), now)[1]
    with _batch_routed(native, "fast"):
        got = _outcome(lambda: native.append_batch(records))
    assert records == []
    assert got == _outcome(lambda: python.append_batch(_batch(5)))
    _close_and_compare_files(native, tmp_path / "native", python, tmp_path / "python")


def test_reference_counts_are_stable_over_2000_fast_batches(tmp_path: Path) -> None:
    store = _open(tmp_path, mapped_file_size_commit_log=64 << 20, mapped_file_size_consume_queue=300_000 * 20)
    # objects of this test's own (not the module's interned constants, which other tests' garbage also holds)
    body, props, topic = b"p" * 100, "".join(["TAGS\x01TagA", "\x02KEYS\x01k1"]), "".join(["Topic", "R"])
    host = bytes(bytearray(_record().store_host))
    store.append_batch([MessageRecord(topic, body, 0, 0, props, 0, 1, host, host)])  # the queue's first: Python path
    records = [MessageRecord(topic, body, 0, 0, props, 0, 1, host, host) for _ in range(32)]
    store.append_batch(records)  # warms the appender's key cache with this topic object
    objects = (body, props, topic, host, records, None)
    gc.collect()
    before = [sys.getrefcount(o) for o in objects]
    fast = _batch_counts(store)[0]
    for _ in range(2000):
        store.append_batch(records)
    assert _batch_counts(store)[0] == fast + 2000
    after = [sys.getrefcount(o) for o in objects]
    assert after[:5] == before[:5]
    assert abs(after[5] - before[5]) < 100  # None's count moves with the interpreter; a leak would be thousands
    store.close()


# ---- the C and the Python batch paths store the same: a property test over batches ---------------------------

#: 8 KiB segments (a batch of 64 small records fits one; bigger ones roll it or fit none) and the tests' 8-entry
#: ConsumeQueue files (batches of up to 8 can be fast, longer ones always cross a file end)
PROPERTY_GEOMETRY: dict[str, Any] = {"mapped_file_size_commit_log": 8192, "max_index_num": 4096}
BATCH_PROPS = st.sampled_from(
    [
        "",
        "TAGS\x01TagA",
        "TAGS\x01TagA\x02KEYS\x01k1",
        "UNIQ_KEY\x017F000001000118B4AAC20D5A1C0000\x02TAGS\x01TagB\x02KEYS\x01k1 k2",
        "KEYS\x01订单-1\x02TAGS\x01标签\x02",
        "KEYS\x01U1\x02TAGS\x01a\x02TAGS\x01b",
    ]
)
#: mostly small bodies; sometimes up to 1.5x MAX_BODY (refused above it)
BATCH_BODY = st.sampled_from(["small"] * 15 + ["any"]).flatmap(
    lambda size: st.integers(0, 24) if size == "small" else st.integers(0, MAX_BODY * 3 // 2)
)
ENTRY = st.tuples(BATCH_BODY, BATCH_PROPS, st.sampled_from([0, 0, 0, TX_PREPARED, TX_COMMIT, TX_ROLLBACK]))
#: a record's (topic, queue id) when it is not the batch's head's: another queue or another topic
ODD_TARGET = st.sampled_from([("TopicA", 1), ("TopicB", 0), (SCHEDULE_TOPIC, 0)])
CONTAINERS = ("list",) * 6 + ("tuple",) * 3 + ("deque", "sequence", "list-subclass")


@st.composite
def batch_ops(draw: st.DrawFn) -> tuple[Any, ...]:
    # (hypothesis draws small integers' bounds often: rare cases are drawn from weighted samples instead)
    small = draw(st.sampled_from([True] * 5 + [False]))
    size = draw(st.integers(1, 8) if small else st.integers(0, 70))
    head = draw(st.sampled_from([("TopicA", 0)] * 6 + [("TopicA", 1), ("TopicB", 0), (SCHEDULE_TOPIC, 0)]))
    entries = draw(st.lists(ENTRY, min_size=size, max_size=size))
    targets = [head] * size
    subclass_at = None
    if size and draw(st.sampled_from([False] * 11 + [True])):  # sometimes one record of another queue or topic
        targets[draw(st.integers(0, size - 1))] = draw(ODD_TARGET)
    if size and draw(st.sampled_from([False] * 19 + [True])):  # sometimes one MessageRecord subclass
        subclass_at = draw(st.integers(0, size - 1))
    return ("batch", draw(st.sampled_from(CONTAINERS)), targets, entries, subclass_at)


SINGLE_OP = st.tuples(st.just("single"), st.sampled_from(["TopicA", "TopicA", "TopicB"]), st.integers(0, 1), ENTRY)
ENTRIES_OP = st.tuples(st.just("entries"), st.sampled_from(["TopicA", "TopicA", "TopicB"]), st.integers(0, 1),
                       st.lists(st.tuples(BATCH_BODY, BATCH_PROPS, st.integers(0, 3)), max_size=9))  # fmt: skip
#: a batch made while the disk is full (the reason cleared after it)
DISK_OP = st.tuples(st.just("disk"), batch_ops())
BATCH_OPS = st.lists(st.sampled_from(["batch"] * 12 + ["single"] * 2 + ["entries"] * 2 + ["disk"]).flatmap(
    lambda kind: {"batch": batch_ops(), "single": SINGLE_OP, "entries": ENTRIES_OP, "disk": DISK_OP}[kind]),
    min_size=5, max_size=30)  # fmt: skip


def _body(n: int, seed: int) -> bytes:
    return bytes([seed % 251]) * n


def _container(kind: str, records: list[MessageRecord]) -> Any:
    return {"list": list, "tuple": tuple, "deque": collections.deque, "sequence": RecordSequence,
            "list-subclass": RecordList}[kind](records)  # fmt: skip


def _batch_of(op: tuple[Any, ...]) -> Any:
    _, kind, targets, entries, subclass_at = op
    records = [
        _record(topic, queue_id, flag, _body(n, i), props)
        for i, ((topic, queue_id), (n, props, flag)) in enumerate(zip(targets, entries, strict=True))
    ]
    if subclass_at is not None:
        records[subclass_at] = SlottedSubRecord(*attrs.astuple(records[subclass_at]))
    return _container(kind, records)


def _expected_batch_route(store: MessageStore, batch: Any) -> str:
    """Where the C batch path must send ``batch``, from the store's state before the append (store/_appender.c's
    rules, restated)."""
    if store._closed or store.disk_full_reason is not None or type(batch) not in (list, tuple):
        return "fallback"
    records = list(batch)
    if not 1 <= len(records) <= 64 or any(type(r) is not MessageRecord for r in records):
        return "fallback"
    head = records[0]
    if head.topic == SCHEDULE_TOPIC or any((r.topic, r.queue_id) != (head.topic, head.queue_id) for r in records):
        return "fallback"
    key = (head.topic, head.queue_id)
    if key not in store.queue_offsets or key not in store.consume_queues:
        return "fallback"
    cq_file = store.consume_queues[key].queue.files[-1]
    pos = store.queue_offsets[key] * CQ_STORE_UNIT_SIZE - cq_file.file_from_offset
    if not 0 <= pos <= cq_file.file_size - CQ_STORE_UNIT_SIZE * len(records):
        return "fallback"
    if any(len(r.body) > store.config.max_message_size for r in records):
        return "fallback"
    segment = store.commitlog.queue.files[-1]
    total = sum(prepare_message(r).size for r in records)
    return "fast" if total <= segment.file_size - segment.wrote_position - END_FILE_MIN_BLANK else "fallback"


def _apply_op(store: MessageStore, op: tuple[Any, ...]) -> tuple[object, ...]:
    kind = op[0]
    if kind == "disk":
        store.disk_full_reason = "disk full (test)"
        try:
            return _apply_op(store, op[1])
        finally:
            store.disk_full_reason = None
    if kind == "single":
        _, topic, queue_id, (n, props, flag) = op
        return _outcome(lambda: store.append(_record(topic, queue_id, flag, _body(n, 7), props)))
    if kind == "entries":
        _, topic, queue_id, entries = op
        template = _record(topic, queue_id)
        return _outcome(lambda: store.append_entries(template, [(_body(n, 3), p, f) for n, p, f in entries]))
    return _outcome(lambda: store.append_batch(_batch_of(op)))


def test_c_and_python_batch_paths_store_the_same(tmp_path_factory: pytest.TempPathFactory) -> None:
    totals: Counter[str] = Counter()

    slow = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large]

    @settings(max_examples=150, deadline=None, suppress_health_check=slow)
    @given(BATCH_OPS)
    def run(ops: list[tuple[Any, ...]]) -> None:
        native_root, python_root = tmp_path_factory.mktemp("native"), tmp_path_factory.mktemp("python")
        native = _open(native_root, **PROPERTY_GEOMETRY)
        python = python_append(_open(python_root, **PROPERTY_GEOMETRY))
        native_calls, python_calls = _listen(native), _listen(python)
        for op in ops:
            route = {"batch": "by state", "disk": "fallback"}.get(op[0])
            if route == "by state":
                route = _expected_batch_route(python, _batch_of(op))
            singles, batches = _counts(native), _batch_counts(native)
            outcome = _apply_op(native, op)
            assert _apply_op(python, op) == outcome, op
            moved = _batch_counts(native)[0] - batches[0], _batch_counts(native)[1] - batches[1]
            if route is not None:
                assert moved == (route == "fast", route == "fallback"), (route, op)
                assert _counts(native) == singles, op  # a batch never goes through the single path
                totals[f"{route} {outcome[0]}"] += 1
            else:
                assert moved == (0, 0), op  # nor a single or append_entries through the batch path
            assert _state(native) == _state(python), op
        assert native_calls == python_calls
        assert native.queue_offsets == python.queue_offsets
        for topic in ("TopicA", "TopicB"):
            for key in KEYS:
                found = native.query_by_key(topic, key, 64, 0, 2**62)
                assert [bytes(m) for m in found] == [bytes(m) for m in python.query_by_key(topic, key, 64, 0, 2**62)]
        _close_and_compare_files(native, native_root, python, python_root)

    run()
    # both paths stored batches, and the fallback also refused some; typical runs: 140-210 fast, 500-600 fallbacks
    # that stored, 180-220 refused (hypothesis's draws vary from run to run: the bounds leave room)
    assert totals["fast ok"] > 80 and totals["fallback ok"] > 150 and totals["fallback error"] > 40, totals


# ---- more routing and hostile cases ----------------------------------------------------------------------------


def test_a_batch_that_exactly_fills_the_consume_queue_file_is_fast(tmp_path: Path) -> None:
    """One message in an 8-entry file: a batch of 7 ends at the file's end and is the C path's; the next one
    starts a new file and is handed back, then the queue is fast again."""
    native, python = _pair(tmp_path)
    for n, route in ((7, "fast"), (1, "fallback"), (7, "fast"), (2, "fallback")):
        with _batch_routed(native, route):
            got = _outcome(lambda: native.append_batch(_batch(n)))  # noqa: B023 (called at once)
        assert got == _outcome(lambda: python.append_batch(_batch(n))) and got[0] == "ok"  # noqa: B023
        assert _state(native) == _state(python)
    assert native.consume_queues[("TopicA", 0)].max_offset == 18
    assert len(native.consume_queues[("TopicA", 0)].queue.files) == 3
    _close_and_compare_files(native, tmp_path / "native", python, tmp_path / "python")


@pytest.mark.parametrize("flags", [(TX_PREPARED, TX_ROLLBACK, 0), (0, TX_PREPARED), (TX_ROLLBACK,) * 4])
def test_mixed_transaction_flags_in_a_fast_batch_all_get_entries(tmp_path: Path, flags: tuple[int, ...]) -> None:
    native, python = _pair(tmp_path)
    native_calls, python_calls = _listen(native), _listen(python)
    batch = [_record(sys_flag=f, body=b"t%d" % i, properties=f"KEYS\x01tx{i}") for i, f in enumerate(flags)]
    with _batch_routed(native, "fast"):
        got = _outcome(lambda: native.append_batch(batch))
    assert got == _outcome(lambda: python.append_batch(batch))
    cq = native.consume_queues[("TopicA", 0)]
    assert cq.max_offset == 1 + len(flags) and got[6] == tuple(cq.entry(1 + i)[0] for i in range(len(flags)))  # type: ignore[index]
    assert native_calls == python_calls and [c[2] for c in native_calls] == list(range(1, 1 + len(flags)))
    for i in range(len(flags)):  # indexed as the Python batch path indexes them, rolled back or not
        assert len(native.query_by_key("TopicA", f"tx{i}", 8, 0, 2**62)) == 1
    _close_and_compare_files(native, tmp_path / "native", python, tmp_path / "python")


@pytest.mark.parametrize(
    ("bodies", "route"),
    [
        ([memoryview(b"view" * 20), b"plain", bytearray(b"array" * 20)], "fast"),
        ([memoryview(b""), bytearray(b""), b""], "fast"),
        # the encoder takes contiguous buffers only: a strided view goes to the Python path, which refuses it too
        ([b"plain", memoryview(b"abcdef" * 10)[::2]], "fallback"),
    ],
    ids=["view-bytes-array", "empty-buffers", "strided-view"],
)
def test_buffer_bodies_in_a_batch_store_what_the_python_path_stores(
    tmp_path: Path, bodies: list[Any], route: str
) -> None:
    native, python = _pair(tmp_path)
    before = _state(native)
    with _batch_routed(native, route):
        got = _outcome(lambda: native.append_batch([_record(body=b) for b in bodies]))
    assert got == _outcome(lambda: python.append_batch([_record(body=b) for b in bodies]))
    assert got[0] == ("ok" if route == "fast" else "error") and (got[0] == "ok" or _state(native) == before)
    assert _state(native) == _state(python)
    _close_and_compare_files(native, tmp_path / "native", python, tmp_path / "python")


class RaisingPutBatchIndex:
    """The store's index, except that its batch writes (``put_batch``, ``put_hashed``) raise."""

    def __init__(self, index: Any) -> None:
        self.index = index

    def put_batch(self, *args: object) -> None:
        raise RuntimeError("index put_batch")

    def put_hashed(self, *args: object) -> None:
        raise RuntimeError("index put_batch")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.index, name)


def test_a_raising_index_sees_the_batch_stored(tmp_path: Path) -> None:
    """A batch whose keys the index refuses is stored and answered on both paths, its listener called; its keys are
    indexed again once the index takes them (the files compared at the end)."""
    native, python = _pair(tmp_path)
    native_calls, python_calls = _listen(native), _listen(python)
    indexes = native.index, python.index
    native.index, python.index = RaisingPutBatchIndex(native.index), RaisingPutBatchIndex(python.index)
    with _batch_routed(native, "fast"):
        got = _outcome(lambda: native.append_batch(_batch(3)))
    assert got == _outcome(lambda: python.append_batch(_batch(3))) and got[0] == "ok"
    assert native_calls == python_calls and len(native_calls) == 3
    assert _state(native) == _state(python) and native.queue_offsets[("TopicA", 0)] == 4
    native.index, python.index = indexes
    with _batch_routed(native, "fast"):
        landed = _outcome(lambda: native.append_batch(_batch(2)))
    assert landed == _outcome(lambda: python.append_batch(_batch(2))) and landed[3] == 4
    _close_and_compare_files(native, tmp_path / "native", python, tmp_path / "python")


def _batch_path(store: MessageStore, path: str) -> contextlib.AbstractContextManager[None]:
    """Make ``store.append_batch`` the given path; the context checks that the C path took the batch itself."""
    if path == "python":
        python_append(store)
        return contextlib.nullcontext()
    return _batch_routed(store, "fast")


@pytest.mark.parametrize(
    "path",
    [
        "c",
        "python",
    ],
)
def test_a_clock_rebinding_batch_records_fields_does_not_change_what_is_written(tmp_path: Path, path: str) -> None:
    """The C path reads every record's fields before the clock runs and holds them: what it writes, indexes,
    announces and returns is what the records held then, even when the clock rebinds the slots and drops the last
    references to the old values."""
    clock = HostileClock()
    store = _open(tmp_path, now_ms=clock)
    calls = _listen(store)
    store.append(_record())
    # built at run time: the records hold the only references
    records = [_record(body=bytes(bytearray(b"\xa5" * 300)), properties="".join(["TAGS\x01TagA\x02KEYS\x01", f"o{i}"]))
               for i in range(4)]  # fmt: skip

    def rebind(now: int) -> int:
        for msg in records:
            for name, value in (("body", b"\x00" * 300), ("properties", "TAGS\x01Other\x02KEYS\x01new"),
                                ("topic", "TopicB"), ("queue_id", 1), ("store_host", BORN_HOST)):  # fmt: skip
                object.__setattr__(msg, name, value)
        junk = [bytes([i]) * 300 for i in range(256)] + [f"TAGS\x01TagA\x02KEYS\x01o{i:04}" for i in range(256)]
        del junk  # the freed blocks are reused, overwriting anything read through a dangling pointer
        return now

    clock.action = rebind
    with _batch_path(store, path):
        result = store.append_batch(records)
    written = []
    for phy, size in zip(result.phy_offsets, [result.size // 4] * 4, strict=True):
        view = store.commitlog.read(phy, size)
        assert view is not None
        written.append(decode_record(bytes(view), check_crc=True))
    assert [(w.body, w.topic, w.queue_id, w.properties, w.store_host_packed) for w in written] == [
        (b"\xa5" * 300, "TopicA", 0, {"TAGS": "TagA", "KEYS": f"o{i}"}, STORE_HOST) for i in range(4)
    ]
    assert store.queue_offsets == {("TopicA", 0): 5} and result.queue_offset == 1
    assert calls[1:] == [("TopicA", 0, 1 + i, tags_code("TagA"), f"TAGS\x01TagA\x02KEYS\x01o{i}") for i in range(4)]
    assert [len(store.query_by_key("TopicA", f"o{i}", 8, 0, 2**62)) for i in range(4)] == [1] * 4
    assert store.query_by_key("TopicA", "new", 8, 0, 2**62) == []
    assert result.store_host == STORE_HOST
    store.close()


@pytest.mark.parametrize(
    "path",
    [
        "c",
        "python",
    ],
)
def test_a_clock_emptying_the_list_with_index_and_listener_set_stores_and_notifies(tmp_path: Path, path: str) -> None:
    clock = HostileClock()
    store = _open(tmp_path, now_ms=clock)
    calls = _listen(store)
    store.append(_record())
    records = [_record(body=b"e%d" % i, properties=f"KEYS\x01e{i}") for i in range(3)]
    clock.action = lambda now: (records.clear(), now)[1]
    with _batch_path(store, path):
        result = store.append_batch(records)
    assert records == [] and result.count == 3 and result.queue_offset == 1
    assert [c[2] for c in calls[1:]] == [1, 2, 3]
    assert [len(store.query_by_key("TopicA", f"e{i}", 8, 0, 2**62)) for i in range(3)] == [1] * 3
    store.close()


class FalsyRecorder(list):  # type: ignore[type-arg]
    """A recording arrival listener that is falsy until it has recorded a call (a list of its calls)."""

    def __call__(self, *args: object) -> None:
        self.append(args)


@pytest.mark.parametrize(
    "path",
    [
        "c",
        "python",
    ],
)
def test_a_falsy_arrival_listener_is_called_for_a_batch(tmp_path: Path, path: str) -> None:
    store = _open(tmp_path, message_index_enable=False)
    assert store.indexer is None  # the index is loaded; no new keys go into it
    store.append(_record())
    listener = FalsyRecorder()
    store.arrival_listener = listener
    with _batch_path(store, path):
        store.append_batch(_batch(2))
    assert [c[2] for c in listener] == [1, 2]
    store.close()


@pytest.mark.parametrize("name", sorted(BAD_CLOCKS))
def test_a_bad_clock_writes_no_batch_and_raises_what_the_python_path_raises(tmp_path: Path, name: str) -> None:
    native_clock, python_clock = HostileClock(), HostileClock()
    native = _open(tmp_path / "native", now_ms=native_clock)
    python = python_append(_open(tmp_path / "python", now_ms=python_clock))
    native_calls, python_calls = _listen(native), _listen(python)
    for store in (native, python):
        store.append(_record())
    before, counts = _state(native), _batch_counts(native)
    native_clock.action = python_clock.action = BAD_CLOCKS[name]
    failed = _outcome(lambda: native.append_batch(_batch(5)))
    assert failed == _outcome(lambda: python.append_batch(_batch(5))) and failed[0] == "error"
    assert _batch_counts(native) == counts and _state(native) == before == _state(python)
    assert len(native_calls) == 1
    with _batch_routed(native, "fast"):
        landed = _outcome(lambda: native.append_batch(_batch(5)))
    assert landed == _outcome(lambda: python.append_batch(_batch(5)))
    assert landed[1] == before[1] and landed[3] == 1  # the failed batch's place and first queue offset
    assert native_calls == python_calls
    _close_and_compare_files(native, tmp_path / "native", python, tmp_path / "python")


@pytest.mark.parametrize("close", [_close_segment, _close_consume_queue_file, MessageStore.close],
                         ids=["segment", "consume-queue-file", "store"])  # fmt: skip
def test_a_clock_closing_what_a_batch_writes_into_does_not_crash(
    tmp_path: Path, close: Callable[[MessageStore], None]
) -> None:
    """Both mmaps are exported before the clock runs: a close in the clock cannot unmap them under the write."""
    clock = HostileClock()
    store = _open(tmp_path, now_ms=clock)
    store.append(_record())
    segment = store.commitlog.queue.files[-1]
    cq_file = store.consume_queues[("TopicA", 0)].queue.files[-1]
    clock.action = lambda now: (close(store), now)[1]
    try:
        result = store.append_batch(_batch(3))
    except Exception:
        result = None
    if result is not None:
        assert store.queue_offsets[("TopicA", 0)] == 4 and result.queue_offset == 1
        for i, phy in enumerate(result.phy_offsets):
            meta = read_record_meta(segment.buf, phy - segment.file_from_offset, check_crc=True)
            assert (meta.phy_offset, meta.queue_offset) == (phy, 1 + i)
            assert struct.unpack_from(">q", cq_file.buf, CQ_STORE_UNIT_SIZE * (1 + i))[0] == phy
    store.close()
    with pytest.raises(ServiceNotAvailableError):
        store.append_batch(_batch(3))


def test_reference_counts_are_stable_over_2000_notified_fast_batches(tmp_path: Path) -> None:
    """With a listener the C path builds the properties list for the store's batch notifier each batch."""
    store = _open(tmp_path, mapped_file_size_commit_log=64 << 20, mapped_file_size_consume_queue=300_000 * 20,
                  message_index_enable=False)  # fmt: skip
    seen = [0]

    def listener(topic: str, queue_id: int, queue_offset: int, tags: int, properties: str) -> None:
        seen[0] += 1

    store.arrival_listener = listener
    body, props, topic = b"q" * 64, "".join(["TAGS\x01TagA", "\x02KEYS\x01k1"]), "".join(["Topic", "N"])
    host = bytes(bytearray(_record().store_host))
    store.append_batch([MessageRecord(topic, body, 0, 0, props, 0, 1, host, host)])  # the queue's first: Python path
    records = [MessageRecord(topic, body, 0, 0, props, 0, 1, host, host) for _ in range(32)]
    store.append_batch(records)
    objects = (body, props, topic, host, records, records[0], records[-1], listener)
    gc.collect()
    gc.disable()
    try:
        before = [sys.getrefcount(o) for o in objects]
        fast = _batch_counts(store)[0]
        for _ in range(2000):
            store.append_batch(records)
        after = [sys.getrefcount(o) for o in objects]
    finally:
        gc.enable()
    assert _batch_counts(store)[0] == fast + 2000 and seen[0] == 1 + 32 * 2001
    assert after == before
    store.close()


@pytest.mark.parametrize("path", ["c", "python"])
def test_a_batch_calls_the_arrival_listener_only_for_a_queue_of_interest(tmp_path: Path, path: str) -> None:
    """The broker's interest (a pull held, a pop waiting) decides whether a batch's arrivals are told at all."""
    store = _open(tmp_path, message_index_enable=False)
    store.append(_record())
    seen: list[tuple[str, int, int]] = []
    store.arrival_listener = lambda topic, queue_id, offset, tags, props: seen.append((topic, queue_id, offset))
    asked: list[tuple[str, int]] = []
    waiting = {"now": False}

    def interest(topic: str, queue_id: int) -> bool:
        asked.append((topic, queue_id))
        return waiting["now"]

    store.arrival_interest = interest
    with _batch_path(store, path):
        store.append_batch(_batch(2))
    waiting["now"] = True
    with _batch_path(store, path):
        store.append_batch(_batch(2))
    assert asked == [("TopicA", 0), ("TopicA", 0)]
    assert seen == [("TopicA", 0, 3), ("TopicA", 0, 4)]
    store.close()
