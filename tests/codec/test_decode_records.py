"""decode_records, the consumer's pull-body fast path, gives exactly what the general iter_records path gives; its C
loop (remoting/codec/pull_decode.h) gives exactly what its Python twin ``py_decode_records`` gives, errors included.

The comparisons with C skip without the extension or under ``ROCKETRIO_PURE_PYTHON=1`` (tests/codec/speedups.py).
"""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from remoting.codec import pull_body
from remoting.codec.errors import MessageDecodeError
from remoting.codec.message import MessageExt, MessageRecord, encode_record, iter_records
from remoting.codec.pull_body import decode_records, py_decode_records
from tests.codec.speedups import SPEEDUPS, requires_speedups
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


def damaged(body: bytes, damage: list[tuple[int, int]], data: st.DataObject) -> tuple[bytes, bytes]:
    """``body`` with the bytes of ``damage`` overwritten, whole and cut at a drawn length."""
    out = bytearray(body)
    for at, value in damage:
        if out:
            out[at % len(out)] = value
    cut = data.draw(st.integers(0, len(out)))
    return bytes(out), bytes(out[:cut])


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
    for candidate in damaged(body, damage, data):
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


HOSTS = [bytes([10, 0, 0, 9, 0, 0, 0x2A, 0x9F]), bytes([10, 0, 0, 8, 0, 0, 0x2A, 0x9F]), bytes(range(16)) + bytes(4)]
#: Many distinct names (more than the C loop remembers per call), values that repeat, change and come back.
MANY_NAMES = st.lists(
    st.tuples(st.sampled_from([*(f"N{i}" for i in range(40)), "TAGS", "UNIQ_KEY"]), st.sampled_from(["v", "w", "TA"])),
    max_size=45,
).map(lambda pairs: "\x02".join(f"{n}\x01{v}" for n, v in pairs))


@st.composite
def mixed_bodies(draw: st.DrawFn) -> bytes:
    """Records of few topics and hosts (so the C loop's per-call caches hit and miss), IPv6 ones among them (the
    general path's), and properties with many names."""
    out = []
    for _ in range(draw(st.integers(0, 8))):
        record = MessageRecord(
            topic=draw(st.sampled_from(["TopicA", "TopicB", "主题"])),
            body=draw(st.binary(max_size=20)),
            queue_id=draw(st.integers(-2, 2)),
            properties=draw(MANY_NAMES | st.sampled_from(["TAGS\x01TagA", "TAGS\x01TagB\x02WAIT\x01true", ""])),
            sys_flag=draw(st.sampled_from([0, 1, 2, 8])),
            born_host=draw(st.sampled_from(HOSTS)),
            store_host=draw(st.sampled_from(HOSTS)),
        )
        out.append(encode_record(record, draw(st.integers(0, 99)), draw(int64), draw(st.integers(0, 3))))
    return b"".join(out)


def native(body: bytes, extra: dict[str, str] | None, tags: frozenset[str] | None) -> list[MessageExt]:
    assert pull_body.NATIVE
    return decode_records(body, extra, tags)


@requires_speedups
@given(mixed_bodies() | bodies(), st.none() | st.just({}) | st.just({"MIN_OFFSET": "0", "TAGS": "x"}), tag_sets)
def test_the_c_loop_decodes_as_its_python_twin(
    body: bytes, extra: dict[str, str] | None, tags: frozenset[str] | None
) -> None:
    assert native(body, extra, tags) == py_decode_records(body, extra, tags)


@requires_speedups
@given(mixed_bodies(), st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=4),
       st.data())  # fmt: skip
def test_the_c_loop_fails_or_decodes_damaged_bodies_as_its_python_twin(
    body: bytes, damage: list[tuple[int, int]], data: st.DataObject
) -> None:
    for candidate in damaged(body, damage, data):
        extra = {"MAX_OFFSET": "7"}
        assert outcome(native, candidate, extra, None) == outcome(py_decode_records, candidate, extra, None)


@requires_speedups
def test_the_c_loop_stops_before_a_record_for_the_general_path_and_rejects_bad_arguments() -> None:
    assert SPEEDUPS is not None
    plain = encode_record(MessageRecord("T", b"x", properties="TAGS\x01a"))
    ipv6 = encode_record(MessageRecord("T", b"y", born_host=HOSTS[2]))
    out: list[MessageExt] = []
    assert SPEEDUPS.decode_pull_records(plain + ipv6 + plain, 0, out, None, None) == len(plain)
    assert [m.body for m in out] == [b"x"]
    assert SPEEDUPS.decode_pull_records(plain, 0, out, None, frozenset({"b"})) == len(plain)
    assert len(out) == 1  # filtered out by its tag
    assert SPEEDUPS.decode_pull_records(plain, -1, out, None, None) == len(plain)
    for bad in ((bytearray(plain), 0, [], None, None), (plain, 0, (), None, None), (plain, 0, [], [("a", "b")], None)):
        with pytest.raises(TypeError):
            SPEEDUPS.decode_pull_records(*bad)
    with pytest.raises(TypeError):
        SPEEDUPS.decode_pull_records(plain, 0, [])
    assert [m.body for m in decode_records(plain + ipv6 + plain, {"k": "v"}, None)] == [b"x", b"y", b"x"]
