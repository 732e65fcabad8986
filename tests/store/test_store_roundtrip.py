"""Property test: random put sequences crossing segments read back identical, and the ConsumeQueue agrees with the
CommitLog, before and after a clean restart."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from remoting.codec.message import decode_record
from remoting.codec.message_properties import java_string_hash
from store.message_store import MessageStore
from tests.store.store_helpers import message, open_store

TAGS = ["TagA", "", "标签", "émoji😀", "polygenelubricants", "a b"]

single = st.tuples(st.just("single"), st.integers(0, 2), st.lists(st.binary(max_size=700), min_size=1, max_size=1))
batch = st.tuples(st.just("batch"), st.integers(0, 2), st.lists(st.binary(max_size=300), min_size=1, max_size=6))
operations = st.lists(st.tuples(st.one_of(single, batch), st.sampled_from(TAGS)), min_size=1, max_size=25)


def _verify(store: MessageStore, expected: dict[int, list[tuple[int, bytes, str]]]) -> None:
    for queue_id, items in expected.items():
        assert store.max_offset_in_queue("TopicTest", queue_id) == len(items)
        cq = store.consume_queue("TopicTest", queue_id)
        offset = 0
        while offset < len(items):
            result = store.get("TopicTest", queue_id, offset, 32, max_bytes=1 << 30)
            assert result.messages, (queue_id, offset, result.status)
            for qoff, record in zip(result.queue_offsets, result.messages, strict=True):
                phy, body, tags = items[qoff]
                msg = decode_record(record, check_crc=True)
                assert (msg.commit_log_offset, msg.queue_offset, msg.body) == (phy, qoff, body)
                assert msg.tags == (tags or None)
                entry = cq.entry(qoff)
                assert entry == (phy, len(record), java_string_hash(tags) if tags else 0)
            offset = result.next_begin_offset


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(operations)
def test_random_puts_read_back_identical_and_consume_queue_agrees(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[tuple[str, int, list[bytes]], str]]
) -> None:
    root = tmp_path_factory.mktemp("store")
    store = open_store(root, mapped_file_size_commit_log=2048)
    expected: dict[int, list[tuple[int, bytes, str]]] = {}
    for (kind, queue_id, bodies), tags in ops:
        msgs = [message(body=b, queue_id=queue_id, tags=tags or None) for b in bodies]
        result = store.append(msgs[0]) if kind == "single" else store.append_batch(msgs)
        items = expected.setdefault(queue_id, [])
        assert result.queue_offset == len(items)
        items.extend(zip(result.phy_offsets, bodies, [tags] * len(bodies), strict=True))
    _verify(store, expected)
    store.close()
    reopened = open_store(root, mapped_file_size_commit_log=2048)
    assert not reopened.abnormal_recovery
    _verify(reopened, expected)
    reopened.close()
