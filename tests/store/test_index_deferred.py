"""Index keys written in runs after the append (``MessageStore._index_one``): the same index bytes as one put per
message, always complete for a reader, and re-dispatched by recovery when a crash drops them."""

from __future__ import annotations

import itertools
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from remoting.codec.message_properties import index_keys_of_raw
from store.index import IndexService
from store.message_store import INDEX_BATCH, SCHEDULE_TOPIC, MessageStore
from tests.store.store_helpers import message, open_store

_MESSAGES = st.lists(
    st.tuples(
        st.sampled_from(["TopicA", "TopicB"]),
        st.sampled_from(["", "KEYS\x01k1", "KEYS\x01k1 k2\x02UNIQ_KEY\x01ABC", "UNIQ_KEY\x01DEF", "TAGS\x01T"]),
        st.integers(0, 2),  # store-time step in seconds' thousandths
    ),
    max_size=80,
)


@settings(max_examples=30, deadline=None)
@given(_MESSAGES)
def test_runs_write_the_bytes_one_put_per_message_writes(messages: list[tuple[str, str, int]]) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        one, runs = IndexService(Path(tmp) / "one", 64, 40), IndexService(Path(tmp) / "runs", 64, 40)
        one.load()
        runs.load()
        pending = []
        ts, phys = 1_700_000_000_000, itertools.count(100, 97)
        for topic, props, step in messages:
            ts += step * 600
            phy = next(phys)
            keys = index_keys_of_raw(props.encode())
            if keys:
                one.put(topic, keys, phy, ts)
            pending.append((topic, props, phy, ts))
        MessageStore._write_index(runs, pending)
        files = [[f.path.name for f in s.files] for s in (one, runs)]
        contents = [[bytes(f._mm) for f in s.files] for s in (one, runs)]
        one.close()
        runs.close()
        assert len(files[0]) == len(files[1])
        assert contents[0] == contents[1]


def test_a_key_is_found_at_once_and_a_crash_before_the_flush_loses_no_key(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    for i in range(INDEX_BATCH + 3):
        store.append(message(keys=f"k{i}"))
    assert len(store.query_by_key("TopicTest", "k0", 8, 0, 2**62)) == 1  # a reader writes pending keys first
    store.append(message(keys="early"))
    store.flush_all_blocking()  # the checkpoint covers "early": its key must be written before it
    store.append(message(keys="late"))
    store.abandon()  # the pending key of "late" dies with the process; recovery re-dispatches its record
    store = open_store(tmp_path)
    for key in ("k0", f"k{INDEX_BATCH + 2}", "early", "late"):
        assert len(store.query_by_key("TopicTest", key, 8, 0, 2**62)) == 1, key
    store.close()


def test_keys_pending_before_a_scheduled_append_are_not_skipped(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    store.append(message(keys="single"))  # pending
    store.append(message(topic=SCHEDULE_TOPIC, keys="scheduled"))  # indexed at once, at a higher offset
    for topic, key in (("TopicTest", "single"), (SCHEDULE_TOPIC, "scheduled")):
        assert len(store.query_by_key(topic, key, 8, 0, 2**62)) == 1, key
    store.close()


TX_PREPARED, TX_ROLLBACK = 0x4, 0xC
#: ASCII, non-ASCII (the record scan leaves those records to the texts' path) and the KEYS separator
_TEXT = st.text(alphabet="ab7_ é", max_size=6)
_PROPS = st.fixed_dictionaries({}, optional={"KEYS": _TEXT, "UNIQ_KEY": _TEXT, "TAGS": _TEXT})
#: (how: single / batch / scheduled, topic, properties, transaction flag)
_APPENDS = st.lists(
    st.tuples(
        st.sampled_from(["single"] * 6 + ["batch", "scheduled"]),
        st.sampled_from(["TopicA", "TopicB"]),
        _PROPS,
        st.sampled_from([0, 0, 0, 0, TX_PREPARED, TX_ROLLBACK]),
    ),
    max_size=90,
)


class _SlowClock:
    """A store clock that gives each millisecond three times: runs of one store time, as under load."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> int:
        self.calls += 1
        return 1_700_000_000_000 + self.calls // 3


def _stored(tmp: Path, appends: list[tuple[str, str, dict[str, str], int]], python: bool) -> tuple[list[bytes], ...]:
    from remoting.codec.message import MessageRecord
    from remoting.codec.message_properties import encode_properties
    from tests.store.store_helpers import BORN_HOST, STORE_HOST, files_of, python_append

    geometry = {"mapped_file_size_commit_log": 8 * 1024, "max_hash_slot_num": 8, "max_index_num": 40}
    store = open_store(tmp / "store", now_ms=_SlowClock(), **geometry)
    if python:
        python_append(store)
    reference = IndexService(tmp / "reference", 8, 40)
    reference.load()
    for n, (how, topic, props, flag) in enumerate(appends):
        flag = 0 if how == "batch" else flag  # a batch takes no transaction (RocketMQ refuses one)
        record = MessageRecord(
            topic=SCHEDULE_TOPIC if how == "scheduled" else topic, body=b"m%d" % n, queue_id=0, sys_flag=flag,
            properties=encode_properties(dict(props)), born_timestamp=1_700_000_000_000, born_host=BORN_HOST,
            store_host=STORE_HOST,
        )  # fmt: skip
        result = store.append_batch([record]) if how == "batch" else store.append(record)
        keys = index_keys_of_raw(record.properties.encode())
        if keys and flag != TX_ROLLBACK:  # as Java's buildIndex: a rolled-back half is not indexed
            reference.put(record.topic, keys, result.phy_offset, result.store_timestamp)
    store.close()
    reference.close()
    return list(files_of(tmp / "store" / "index").values()), list(files_of(tmp / "reference" / "index").values())


@settings(max_examples=60, deadline=None)
@given(_APPENDS, st.booleans())
def test_single_sends_indexed_through_the_record_scan_write_the_bytes_of_one_put_each(
    appends: list[tuple[str, str, dict[str, str], int]], python: bool
) -> None:
    """Pending keys drained through the record scan (C build) or from their texts give one ``put`` per message's
    index files: mixed with batches and scheduled appends (indexed at once), transactions, non-ASCII keys, segment
    rolls of the CommitLog and of the index."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        written, expected = _stored(Path(tmp), appends, python)
    assert written == expected


def test_the_scan_takes_the_pending_records_up_to_the_first_it_cannot(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    for key in ("a", "b", "é", "c"):
        store.append(message(keys=key))
    pending, store._index_pending = store._index_pending, []
    assert store._index is not None
    taken = store._index_scanned(store._index, pending)
    assert taken == 2  # the scan (C, or its twin) stops at the non-ASCII key
    store._write_index(store._index, pending[taken:])
    for key in ("a", "b", "é", "c"):
        assert len(store.query_by_key("TopicTest", key, 8, 0, 2**62)) == 1, key
    store.close()


def test_a_scan_over_a_record_that_is_not_pending_takes_none_of_them(tmp_path: Path) -> None:
    """Were a record of another path ever to lie between pending ones, the scan (which would walk it too) must
    index none of them: the texts' path then writes exactly the pending ones."""
    store = open_store(tmp_path)
    for key in ("a", "b", "c"):
        store.append(message(keys=key))
    pending, store._index_pending = store._index_pending, []
    del pending[1]  # "b" stands for a record indexed elsewhere
    assert store._index is not None
    assert store._index_scanned(store._index, pending) == 0
    store._write_index(store._index, pending)
    found = {key: len(store.query_by_key("TopicTest", key, 8, 0, 2**62)) for key in ("a", "b", "c")}
    assert found == {"a": 1, "b": 0, "c": 1}
    store.close()
