"""ProcessQueue's batched put/remove (the pull hot path) against a plain model of what they must do: every held
offset once, counts and body bytes summed, the commit offset the smallest offset still held (or one past the
highest seen), whatever order and duplicates the batches come in."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from client.consumer.process_queue import ProcessQueue
from remoting.codec.message import MessageExt, MessageRecord, decode_record, encode_record

_MESSAGES = {
    offset: decode_record(encode_record(MessageRecord(topic="T", body=b"x" * (offset % 5)), queue_offset=offset))
    for offset in range(40)
}

offset_batches = st.lists(st.integers(0, 39), max_size=12)
operations = st.lists(
    st.tuples(st.sampled_from(["put", "put_ascending", "remove", "take", "commit", "again"]), offset_batches),
    max_size=25,
)


def _batch(offsets: list[int]) -> list[MessageExt]:
    return [_MESSAGES[o] for o in offsets]


@given(operations)
def test_process_queue_matches_the_model(ops: list[tuple[str, list[int]]]) -> None:
    pq = ProcessQueue()
    held: set[int] = set()
    consuming: set[int] = set()
    top = -1
    for op, offsets in ops:
        if op in ("put", "put_ascending"):
            batch = sorted(offsets) if op == "put_ascending" else offsets
            pq.put_messages(_batch(batch))
            for o in batch:
                if o not in held and o not in consuming:
                    held.add(o)
                    top = max(top, o)
        elif op == "remove":
            expected = -1 if not held and not consuming else None
            got = pq.remove_messages(_batch(offsets))
            held -= set(offsets)
            if expected is None:
                expected = min(held) if held else top + 1
            assert got == expected
        elif op == "take":
            taken = pq.take_messages(len(offsets) or 1)
            want = sorted(held)[: len(offsets) or 1]
            assert [m.queue_offset for m in taken] == want
            held -= set(want)
            consuming |= set(want)
        elif op == "commit":
            assert pq.commit() == (max(consuming) + 1 if consuming else -1)
            consuming.clear()
        else:
            again = [o for o in offsets if o in consuming]
            pq.make_messages_to_consume_again(_batch(offsets))
            consuming -= set(again)
            held |= set(again)
        alive = held | consuming
        assert pq.msg_count == len(alive)
        assert pq.msg_size == sum(len(_MESSAGES[o].body) for o in alive)
        assert pq.queue_offset_max == top
        assert pq.has_messages() == bool(held)
        assert pq.max_span == (max(held) - min(held) if held else 0)
