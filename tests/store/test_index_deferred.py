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
