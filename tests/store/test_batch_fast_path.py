"""The batch fast paths give exactly what the general paths give: ``append_entries`` (one template record) writes the
same CommitLog, ConsumeQueue and index as ``append_batch`` of full records, raises the same errors, and recovers the
same; ``ConsumeQueue.put_batch`` writes the same bytes as one ``put`` per entry."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from remoting.codec.message import MessageRecord
from remoting.codec.msgid import offset_msg_id
from store.consume_queue import ConsumeQueue
from store.errors import StoreError
from store.message_store import MessageStore
from store.results import AppendResult
from tests.store.store_helpers import BORN_HOST, CQ_ENTRY_BATCHES, STORE_HOST, FakeClock, files_of, open_store

PROPS = st.sampled_from(
    [
        "",
        "TAGS\x01TagA",
        "UNIQ_KEY\x017F000001000118B4AAC20D5A1C0000\x02TAGS\x01TagB\x02KEYS\x01k1 k2",
        "KEYS\x01订单-1\x02TAGS\x01标签\x02",
        "XKEYS\x01no\x02KEYS\x01yes",
    ]
)
ENTRY = st.tuples(st.binary(max_size=300), PROPS, st.integers(-(2**31), 2**31 - 1))
BATCHES = st.lists(st.tuples(st.integers(0, 1), st.lists(ENTRY, min_size=1, max_size=7)), min_size=1, max_size=12)
_SETTINGS = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _template(queue_id: int, topic: str = "TopicTest") -> MessageRecord:
    return MessageRecord(topic, b"", queue_id, 0, "", 0, 1_700_000_000_000, BORN_HOST, STORE_HOST)


def _records(template: MessageRecord, entries: list[tuple[bytes, str, int]]) -> list[MessageRecord]:
    t = template
    shared = (t.sys_flag, t.born_timestamp, t.born_host, t.store_host)
    return [MessageRecord(t.topic, body, t.queue_id, flag, props, *shared) for body, props, flag in entries]


def _open(root: Path) -> MessageStore:
    return open_store(root, mapped_file_size_commit_log=2048, now_ms=FakeClock())


def _state(store: MessageStore) -> tuple[object, ...]:
    queues = {key: (cq.min_offset, cq.max_offset) for key, cq in sorted(store.consume_queues.items())}
    hits = [store.index.query("TopicTest", k, 64, 0, 2**62) if store.index else [] for k in ("k1", "k2", "yes", "no")]
    return store.max_phy_offset, queues, hits


@_SETTINGS
@given(BATCHES)
def test_append_entries_writes_what_append_batch_writes(
    tmp_path_factory: pytest.TempPathFactory, batches: list[tuple[int, list[tuple[bytes, str, int]]]]
) -> None:
    general_root, fast_root = tmp_path_factory.mktemp("general"), tmp_path_factory.mktemp("fast")
    general, fast = _open(general_root), _open(fast_root)
    for queue_id, entries in batches:
        template = _template(queue_id)
        a = general.append_batch(_records(template, entries))
        b = fast.append_entries(template, entries)
        assert (a.phy_offsets, a.queue_offset, a.size, a.store_timestamp) == (
            b.phy_offsets, b.queue_offset, b.size, b.store_timestamp)  # fmt: skip
    assert _state(general) == _state(fast)
    general.flush_all_blocking()
    fast.flush_all_blocking()
    for sub in ("commitlog", "consumequeue"):
        assert files_of(general_root / sub) == files_of(fast_root / sub)
    # A crash (no checkpoint of the tail) makes recovery re-dispatch the batches from the CommitLog.
    general.abandon()
    fast.abandon()
    general, fast = _open(general_root), _open(fast_root)
    assert fast.abnormal_recovery
    assert _state(general) == _state(fast)
    general.close()
    fast.close()


@pytest.mark.parametrize(
    ("entries", "topic"),
    [
        ([(b"x" * 5000, "", 0)], "TopicTest"),
        ([(b"ok", "A\x01" + "v" * 40000, 0), (b"x" * 5000, "", 0)], "TopicTest"),
        ([(b"x" * 5000, "A\x01" + "v" * 40000, 0)], "TopicTest"),
        ([(b"ok", "", 0)], "T" * 128),
        ([(b"x" * 5000, "", 0)], "T" * 128),
        ([], "TopicTest"),
    ],
)
def test_append_entries_refuses_what_append_batch_refuses(
    tmp_path: Path, entries: list[tuple[bytes, str, int]], topic: str
) -> None:
    store = open_store(tmp_path, mapped_file_size_commit_log=1 << 20, max_message_size=4096)
    template = _template(0, topic)
    with pytest.raises(StoreError) as general:
        store.append_batch(_records(template, entries))
    with pytest.raises(StoreError) as fast:
        store.append_entries(template, entries)
    assert (type(fast.value), str(fast.value)) == (type(general.value), str(general.value))
    assert store.max_phy_offset == 0
    store.close()


@_SETTINGS
@given(st.integers(0, 30), CQ_ENTRY_BATCHES)
def test_consume_queue_put_batch_writes_what_puts_write(
    tmp_path_factory: pytest.TempPathFactory, start: int, batches: list[list[tuple[int, int, int]]]
) -> None:
    general_dir, fast_dir = tmp_path_factory.mktemp("cq-general"), tmp_path_factory.mktemp("cq-fast")
    general = ConsumeQueue(general_dir, "T", 0, 8 * 20)
    fast = ConsumeQueue(fast_dir, "T", 0, 8 * 20)
    logical = start
    for entries in batches:
        for i, (phy, size, tags) in enumerate(entries):
            general.put(logical + i, phy, size, tags)
        fast.put_batch(logical, entries)
        logical += len(entries)
    assert (fast.min_offset, fast.max_offset) == (general.min_offset, general.max_offset)
    assert [mf.wrote_position for mf in fast.queue.files] == [mf.wrote_position for mf in general.queue.files]
    general.close()
    fast.close()
    assert files_of(general_dir) == files_of(fast_dir)


@given(st.lists(st.integers(0, 2**63 - 1), min_size=1, max_size=40), st.sampled_from([STORE_HOST, bytes(range(20))]))
def test_batch_msg_id_joins_the_offset_msg_id_of_each_record(phys: list[int], host: bytes) -> None:
    result = AppendResult(phys[0], 1, 0, 0, tuple(phys), host)
    assert result.msg_id == ",".join(offset_msg_id(host, p) for p in phys)
