"""The store's appends, batches and singles, write the same CommitLog, ConsumeQueue and index, return the same
results and call the arrival listener the same way whether the C encoder (``remoting.codec._speedups``) or the
pure-Python one writes the records; ``ConsumeQueue.put_packed`` writes what ``put_batch`` writes. The comparison
skips where the C encoder is not in use (not built, or ``ROCKETRIO_PURE_PYTHON=1``): it would compare Python with
itself."""

from __future__ import annotations

import contextlib
import functools
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from remoting.codec import record_batch
from remoting.codec.message import MessageRecord
from store import message_store
from store.consume_queue import ConsumeQueue
from store.errors import StoreError
from store.message_store import MessageStore
from store.results import AppendResult
from tests.codec.speedups import requires_speedups
from tests.store.store_helpers import (
    BORN_HOST,
    CQ_ENTRY_BATCHES,
    STORE_HOST,
    FakeClock,
    files_of,
    open_store,
    python_append,
)

PROPS = st.sampled_from(
    [
        "",
        "TAGS\x01TagA",
        "UNIQ_KEY\x017F000001000118B4AAC20D5A1C0000\x02TAGS\x01TagB\x02KEYS\x01k1 k2",
        "KEYS\x01订单-1\x02TAGS\x01标签\x02",
        "XKEYS\x01no\x02KEYS\x01yes\x02TAGS\x01a\x02TAGS\x01b",
    ]
)
ENTRY = st.tuples(st.binary(max_size=700), PROPS, st.integers(-(2**31), 2**31 - 1))
MODES = st.sampled_from(["entries", "records", "singles"])
#: transaction sysFlags: a prepared or rolled-back single append gets no ConsumeQueue entry
SYS_FLAGS = st.sampled_from([0, 0x4, 0x8, 0xC])
#: (how to append, queue id, sysFlag, entries); bodies over 600 bytes are refused
BATCHES = st.lists(st.tuples(MODES, st.integers(0, 2), SYS_FLAGS, st.lists(ENTRY, min_size=1, max_size=6)),
                   min_size=1, max_size=10)  # fmt: skip
_SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@contextlib.contextmanager
def _pure_python() -> Iterator[None]:
    with (
        mock.patch.object(message_store, "encode_records_into", record_batch._py_records_into),
        mock.patch.object(message_store, "encode_entries_into", record_batch._py_entries_into),
        mock.patch.object(message_store, "encode_record_into", record_batch._py_record_into),
    ):
        yield


def _open(root: Path) -> tuple[MessageStore, list[tuple[object, ...]]]:
    store = open_store(root, mapped_file_size_commit_log=4096, now_ms=FakeClock(), max_message_size=600)
    calls: list[tuple[object, ...]] = []
    store.arrival_listener = lambda *args: calls.append(args)
    return store, calls


def _append(store: MessageStore, mode: str, queue_id: int, sys_flag: int,
            entries: list[tuple[bytes, str, int]]) -> list[object]:  # fmt: skip
    """What each append returned (its result's fields or its error), the batch appends' sysFlag left at 0."""
    born = 1_700_000_000_000
    if mode != "singles":
        sys_flag = 0
    template = MessageRecord("TopicTest", b"", queue_id, 0, "", sys_flag, born, BORN_HOST, STORE_HOST)
    records = [MessageRecord("TopicTest", body, queue_id, flag, text, sys_flag, born, BORN_HOST, STORE_HOST)
               for body, text, flag in entries]  # fmt: skip
    calls: list[Callable[[], AppendResult]] = (
        [lambda: store.append_entries(template, entries)] if mode == "entries"
        else [lambda: store.append_batch(records)] if mode == "records"
        else [functools.partial(store.append, r) for r in records]
    )  # fmt: skip
    outcomes: list[object] = []
    for call in calls:
        try:
            result = call()
        except (StoreError, struct.error) as exc:
            outcomes.append((type(exc), str(exc)))
        else:
            count = result.count  # before phy_offsets: a batch's result unpacks them from its CQ entries lazily
            offsets = result.phy_offsets
            assert type(offsets) is tuple and len(offsets) == count and offsets is result.phy_offsets
            assert offsets[0] == result.phy_offset and list(offsets) == sorted(set(offsets))
            assert offsets[-1] < result.end_offset
            outcomes.append((offsets, result.queue_offset, result.size, result.store_timestamp,
                             result.msg_id))  # fmt: skip
    return outcomes


@requires_speedups
@_SETTINGS
@given(BATCHES)
def test_batches_store_the_same_through_the_c_and_the_python_encoder(
    tmp_path_factory: pytest.TempPathFactory, batches: list[tuple[str, int, int, list[tuple[bytes, str, int]]]]
) -> None:
    native_root, python_root = tmp_path_factory.mktemp("native"), tmp_path_factory.mktemp("python")
    native, native_calls = _open(native_root)
    python, python_calls = _open(python_root)
    python_append(python)
    for mode, queue_id, sys_flag, entries in batches:
        expected = _append(native, mode, queue_id, sys_flag, entries)
        with _pure_python():
            assert _append(python, mode, queue_id, sys_flag, entries) == expected
    assert native_calls == python_calls
    assert native.queue_offsets == python.queue_offsets
    for key in ("k1", "yes", "订单-1"):
        found = native.query_by_key("TopicTest", key, 64, 0, 2**62)
        assert [bytes(m) for m in found] == [bytes(m) for m in python.query_by_key("TopicTest", key, 64, 0, 2**62)]
    native.close()
    python.close()
    for sub in ("commitlog", "consumequeue"):  # index files are named by their wall-clock creation time
        assert files_of(native_root / sub) == files_of(python_root / sub)


@given(st.integers(0, 30), CQ_ENTRY_BATCHES)
@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_consume_queue_put_packed_writes_what_put_batch_writes(
    tmp_path_factory: pytest.TempPathFactory, start: int, batches: list[list[tuple[int, int, int]]]
) -> None:
    batch_dir, packed_dir = tmp_path_factory.mktemp("cq-batch"), tmp_path_factory.mktemp("cq-packed")
    general = ConsumeQueue(batch_dir, "T", 0, 8 * 20)
    packed = ConsumeQueue(packed_dir, "T", 0, 8 * 20)
    logical = start
    for entries in batches:
        general.put_batch(logical, entries)
        packed.put_packed(logical, b"".join(struct.pack(">qiq", *e) for e in entries))
        logical += len(entries)
    assert (packed.min_offset, packed.max_offset) == (general.min_offset, general.max_offset)
    assert [mf.wrote_position for mf in packed.queue.files] == [mf.wrote_position for mf in general.queue.files]
    general.close()
    packed.close()
    assert files_of(batch_dir) == files_of(packed_dir)
