"""decode_records, the consumer's pull-body fast path, gives exactly what the general iter_records path gives."""

from __future__ import annotations

import attrs
from hypothesis import given
from hypothesis import strategies as st

from remoting.codec.errors import MessageDecodeError
from remoting.codec.message import MessageExt, encode_record, iter_records
from remoting.codec.pull_body import decode_records
from tests.codec.test_message import int64, prop_maps, records

raw_properties = st.one_of(
    prop_maps.map(lambda props: "\x02".join(f"{k}\x01{v}" for k, v in props.items())),
    st.text(st.sampled_from("ab\x01\x02é"), max_size=12),  # malformed segments, trailing separators
)
tag_sets = st.none() | st.frozensets(st.sampled_from(["TagA", "TagB", "", "标签"]), max_size=3)


def general(body: bytes, extra: dict[str, str] | None, tags: frozenset[str] | None) -> list[MessageExt]:
    """What the pull path did before the fast path: iter_records, the client-side tag check, then the extras."""
    out = []
    for msg in iter_records(body):
        if tags is not None and msg.tags not in tags:
            continue
        if extra:
            msg.properties.update(extra)
        out.append(msg)
    return out


def outcome(decode: object, *args: object) -> object:
    try:
        return decode(*args)  # type: ignore[operator]
    except MessageDecodeError:
        return MessageDecodeError


@st.composite
def bodies(draw: st.DrawFn) -> bytes:
    items = draw(st.lists(st.tuples(records(), int64, int64, int64, raw_properties), max_size=5))
    out = []
    for rec, queue_offset, phy, stored, props in items:
        if draw(st.booleans()):
            rec = attrs.evolve(rec, properties=props, topic=draw(st.sampled_from(["T", "主题"])))
        out.append(encode_record(rec, queue_offset, phy, stored))
    return b"".join(out)


@given(bodies(), st.none() | st.just({"MIN_OFFSET": "0", "MAX_OFFSET": "9"}), tag_sets)
def test_well_formed_bodies_decode_as_the_general_path_does(
    body: bytes, extra: dict[str, str] | None, tags: frozenset[str] | None
) -> None:
    assert decode_records(body, extra, tags) == general(body, extra, tags)
    assert decode_records(memoryview(body), extra, tags) == general(body, extra, tags)


@given(bodies(), st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=4), st.data())
def test_damaged_bodies_fail_or_decode_exactly_as_the_general_path(
    body: bytes, damage: list[tuple[int, int]], data: st.DataObject
) -> None:
    damaged = bytearray(body)
    for at, value in damage:
        if damaged:
            damaged[at % len(damaged)] = value
    cut = data.draw(st.integers(0, len(damaged)))
    for candidate in (bytes(damaged), bytes(damaged[:cut])):
        assert outcome(decode_records, candidate) == outcome(general, candidate, None, None)


@given(bodies())
def test_fast_built_messages_are_frozen_message_exts_like_the_constructors(body: bytes) -> None:
    for fast, built in zip(decode_records(body), iter_records(body), strict=True):
        assert type(fast) is MessageExt
        assert fast == built
        assert attrs.asdict(fast) == attrs.asdict(built)
        assert (fast.msg_id, fast.tags, fast.keys) == (built.msg_id, built.tags, built.keys)
        try:
            fast.topic = "changed"  # type: ignore[misc]
        except attrs.exceptions.FrozenInstanceError:
            pass
        else:
            raise AssertionError("a decoded MessageExt must stay frozen")
