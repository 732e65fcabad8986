"""Message record codec: exact bytes, round trips, Java hashCode, msgIds and garbage handling."""

from __future__ import annotations

import contextlib
import datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from remoting.codec.errors import MessageDecodeError
from remoting.codec.message import (
    BLANK_MAGIC,
    MAGIC_V1,
    BatchEntry,
    MessageEncodeError,
    MessageRecord,
    decode_batch_body,
    decode_record,
    encode_batch_body,
    encode_record,
    iter_records,
    prepare_message,
    read_record_meta,
    record_magic,
    write_blank,
    write_record,
)
from remoting.codec.message_properties import (
    PropertiesEncodeError,
    decode_properties,
    encode_properties,
    find_property,
    index_keys_of_raw,
    java_string_hash,
    tags_code,
    tags_code_of_raw,
)
from remoting.codec.msgid import (
    UniqKeyGenerator,
    decode_offset_msg_id,
    nearly_time_from_id,
    offset_msg_id,
    pack_socket_address,
    parse_uniq_key,
    unpack_socket_address,
)

BORN = pack_socket_address("10.0.0.2", 50000)
STORE = pack_socket_address("192.168.1.10", 10911)

KNOWN = MessageRecord(
    topic="TopicTest",
    body=b"Hello",
    queue_id=3,
    flag=0,
    properties="TAGS\x01TagA\x02KEYS\x01k1 k2",
    sys_flag=0,
    born_timestamp=1_700_000_000_000,
    born_host=BORN,
    store_host=STORE,
    reconsume_times=0,
    prepared_transaction_offset=0,
)

# Written out field by field from docs/protocol.md#51-record-layout, independent of the encoder's struct formats.
KNOWN_HEX = "".join(
    [
        "0000007d",  # total size 125 = 91 + 5 (body) + 9 (topic) + 20 (properties)
        "daa320a7",  # magic v1
        "77d18982",  # CRC32("Hello") & 0x7FFFFFFF
        "00000003",  # queue id
        "00000000",  # flag
        "0000000000000007",  # queue offset
        "0000000000001000",  # physical offset
        "00000000",  # sysflag
        "0000018bcfe56800",  # born timestamp
        "0a0000020000c350",  # born host 10.0.0.2:50000
        "0000018bcfe56bb8",  # store timestamp (+952 ms)
        "c0a8010a00002a9f",  # store host 192.168.1.10:10911
        "00000000",  # reconsume times
        "0000000000000000",  # prepared transaction offset
        "0000000548656c6c6f",  # body length 5, "Hello"
        "09546f70696354657374",  # topic length 9, "TopicTest"
        "0014",  # properties length 20
        "54414753015461674102",  # TAGS 0x01 TagA 0x02
        "4b455953016b31206b32",  # KEYS 0x01 "k1 k2"
    ]
)


def known_bytes() -> bytes:
    return bytes.fromhex(KNOWN_HEX)


def test_known_record_encodes_to_exact_bytes() -> None:
    encoded = encode_record(KNOWN, queue_offset=7, phy_offset=0x1000, store_timestamp=1_700_000_000_952)
    assert encoded == known_bytes()
    assert len(encoded) == 91 + 5 + 9 + len(KNOWN.properties.encode())


def test_known_record_decodes_every_field() -> None:
    msg = decode_record(known_bytes(), check_crc=True)
    assert msg.topic == "TopicTest"
    assert msg.body == b"Hello"
    assert msg.queue_id == 3
    assert msg.queue_offset == 7
    assert msg.commit_log_offset == 0x1000
    assert msg.born_host == ("10.0.0.2", 50000)
    assert msg.store_host == ("192.168.1.10", 10911)
    assert msg.store_timestamp == 1_700_000_000_952
    assert msg.tags == "TagA"
    assert msg.keys == ["k1", "k2"]
    assert msg.msg_id == "C0A8010A00002A9F0000000000001000"


def test_ipv6_hosts_set_sysflag_bits_and_round_trip() -> None:
    rec = MessageRecord(
        topic="T",
        body=b"x",
        born_host=pack_socket_address("::1", 1),
        store_host=pack_socket_address("fe80::2", 10911),
        sys_flag=0x30 | 0x1,
    )
    data = encode_record(rec, 1, 2, 3)
    assert len(data) == 91 + 24 + 1 + 1
    msg = decode_record(data)
    assert msg.sys_flag == 0x31
    assert msg.born_host == ("::1", 1)
    assert msg.store_host == ("fe80::2", 10911)
    assert msg.store_timestamp == 3
    assert len(msg.msg_id) == 56
    assert decode_offset_msg_id(msg.msg_id).phy_offset == 2


def test_ipv4_mapped_peer_is_stored_as_ipv4() -> None:
    assert pack_socket_address("::ffff:1.2.3.4", 9) == bytes([1, 2, 3, 4, 0, 0, 0, 9])


def test_write_record_into_buffer_at_position_and_blank_marker() -> None:
    prepared = prepare_message(KNOWN)
    buf = bytearray(1024)
    size = write_record(buf, 100, prepared, 7, 0x1000, 1_700_000_000_952)
    assert bytes(buf[100 : 100 + size]) == known_bytes()
    write_blank(buf, 100 + size, 1024 - 100 - size)
    assert record_magic(buf, 100 + size) == BLANK_MAGIC
    assert record_magic(buf, 100) == MAGIC_V1
    with pytest.raises(MessageDecodeError):
        read_record_meta(buf, 100 + size)


def test_fast_meta_reads_what_the_store_needs() -> None:
    meta = read_record_meta(known_bytes(), check_crc=True)
    assert (meta.queue_offset, meta.phy_offset, meta.store_timestamp) == (7, 0x1000, 1_700_000_000_952)
    assert meta.topic == "TopicTest"
    assert find_property(meta.properties, b"TAGS") == b"TagA"
    assert find_property(meta.properties, b"KEYS") == b"k1 k2"
    assert find_property(meta.properties, b"AGS") is None


def test_crc_mismatch_is_detected_only_when_asked() -> None:
    data = bytearray(known_bytes())
    data[84 + 4] ^= 0xFF  # first body byte
    read_record_meta(data)
    with pytest.raises(MessageDecodeError):
        read_record_meta(data, check_crc=True)


def test_oversized_topic_and_properties_are_refused() -> None:
    with pytest.raises(MessageEncodeError):
        prepare_message(MessageRecord(topic="t" * 128, body=b""))
    with pytest.raises(MessageEncodeError):
        prepare_message(MessageRecord(topic="T", body=b"", properties="a\x01" + "v" * 32767))
    prepare_message(MessageRecord(topic="t" * 127, body=b""))


hosts = st.one_of(
    st.tuples(st.ip_addresses(v=4).map(str), st.integers(0, 65535)),
    st.tuples(st.ip_addresses(v=6).filter(lambda a: a.ipv4_mapped is None).map(str), st.integers(0, 65535)),
)
prop_names = st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), min_size=1)
prop_values = st.text(st.characters(blacklist_characters="\x02", blacklist_categories=("Cs",)), min_size=1)
prop_maps = st.dictionaries(prop_names, prop_values, max_size=6)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)


@st.composite
def records(draw: st.DrawFn) -> MessageRecord:
    born = draw(hosts)
    store = draw(hosts)
    return MessageRecord(
        topic=draw(st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=30)),
        body=draw(st.binary(max_size=300)),
        queue_id=draw(int32),
        flag=draw(int32),
        properties=encode_properties(draw(prop_maps)),
        sys_flag=draw(st.integers(0, 0x7FF)),
        born_timestamp=draw(int64),
        born_host=pack_socket_address(*born),
        store_host=pack_socket_address(*store),
        reconsume_times=draw(int32),
        prepared_transaction_offset=draw(int64),
    )


@given(st.lists(st.tuples(records(), int64, int64, int64), min_size=1, max_size=5))
def test_records_round_trip_through_a_pull_body(items: list[tuple[MessageRecord, int, int, int]]) -> None:
    body = b"".join(encode_record(r, q, p, t) for r, q, p, t in items)
    decoded = list(iter_records(body, check_crc=True))
    assert len(decoded) == len(items)
    for msg, (rec, q, p, t) in zip(decoded, items, strict=True):
        assert msg.topic == rec.topic
        assert msg.body == rec.body
        assert (msg.queue_id, msg.flag, msg.queue_offset, msg.commit_log_offset) == (rec.queue_id, rec.flag, q, p)
        assert (msg.born_timestamp, msg.store_timestamp) == (rec.born_timestamp, t)
        assert msg.properties == decode_properties(rec.properties)
        assert pack_socket_address(*msg.born_host) == rec.born_host
        assert msg.store_host_packed == rec.store_host
        assert msg.reconsume_times == rec.reconsume_times
        assert msg.prepared_transaction_offset == rec.prepared_transaction_offset
        assert msg.sys_flag & ~0x30 == rec.sys_flag & ~0x30


@given(prop_maps)
def test_properties_round_trip(props: dict[str, str]) -> None:
    assert decode_properties(encode_properties(props)) == props
    assert decode_properties(encode_properties(props).encode()) == props


@given(prop_maps)
def test_ali_ons_trailing_separator_is_accepted(props: dict[str, str]) -> None:
    raw = encode_properties(props)
    assert decode_properties(raw + "\x02" if raw else raw) == props


def test_malformed_property_segments_are_skipped_as_java_does() -> None:
    raw = "\x02A\x01\x02\x01v\x02noSep\x02K\x01v\x01w\x02\x02TAGS\x01null\x02"
    assert decode_properties(raw) == {"K": "v\x01w", "TAGS": "null"}


def test_unencodable_properties_are_refused() -> None:
    with pytest.raises(PropertiesEncodeError):
        encode_properties({"a\x01": "b"})
    with pytest.raises(PropertiesEncodeError):
        encode_properties({"a": "b\x02c"})
    assert encode_properties({"a": "1", "skip": None, "b": "2"}) == "a\x011\x02b\x012"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("TagA", 2598919),
        ("hello", 99162322),
        ("polygenelubricants", -(2**31)),
        ("中文", 646394),
        ("é", 233),
        ("😀", 1772899),
        ("a😀b", (((97 * 31 + 0xD83D) * 31 + 0xDE00) * 31 + 98)),
    ],
)
def test_java_string_hash_matches_java(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected


@given(prop_maps, st.sampled_from(["TagA", "标签", "😀x", "", None]))
def test_raw_tags_code_agrees_with_decoding_the_properties(props: dict[str, str], tags: str | None) -> None:
    if tags is not None:
        props = {**props, "TAGS": tags} if tags else props
    raw = encode_properties(props).encode()
    assert tags_code_of_raw(raw) == tags_code(decode_properties(raw).get("TAGS"))
    assert tags_code_of_raw(b"XTAGS\x01a\x02TAGS\x01b") == java_string_hash("b")
    assert tags_code_of_raw(b"TAGS\x01a\x02TAGS\x01b") == java_string_hash("b")


def _index_keys_general(raw: bytes) -> list[str]:
    """The definition the fast path must match: two :func:`find_property` calls."""
    uniq = find_property(raw, b"UNIQ_KEY")
    keys = [uniq.decode("utf-8", "replace")] if uniq else []
    raw_keys = find_property(raw, b"KEYS")
    return keys + [k for k in raw_keys.decode("utf-8", "replace").split(" ") if k] if raw_keys else keys


index_names = st.sampled_from(["UNIQ_KEY", "KEYS", "XKEYS", "AUNIQ_KEY", "UNIQ_KEYS", "TAGS", ""])
index_values = st.sampled_from(["", "k1", " k1  k2 ", "UNIQ_KEY\x01x", "KEYS\x01", "订单-1", "7F00000100"])
raw_pairs = st.lists(st.tuples(index_names, index_values), max_size=5)


@given(raw_pairs, st.booleans(), st.binary(max_size=8))
def test_raw_index_keys_agree_with_find_property(pairs: list[tuple[str, str]], trail: bool, junk: bytes) -> None:
    raw = "\x02".join(f"{name}\x01{value}" for name, value in pairs).encode() + (b"\x02" if trail else b"")
    assert index_keys_of_raw(raw) == _index_keys_general(raw)
    assert index_keys_of_raw(junk + raw) == _index_keys_general(junk + raw)


def test_tags_code_is_zero_without_tags_and_negative_hashes_stay_negative() -> None:
    assert tags_code(None) == 0
    assert tags_code("") == 0
    assert tags_code("polygenelubricants") < 0


@given(st.lists(st.builds(BatchEntry, st.binary(max_size=200), prop_maps.map(encode_properties), int32), max_size=8))
def test_batch_body_round_trips(entries: list[BatchEntry]) -> None:
    assert decode_batch_body(encode_batch_body(entries)) == entries


def test_batch_body_entry_size_word_is_not_read_as_javas_encoder() -> None:
    body = bytearray(encode_batch_body([BatchEntry(b"abc", "a\x01b"), BatchEntry(b"de", "")]))
    body[3] += 1  # CommitLog.MessageExtBatchEncoder walks an entry by its body and properties lengths
    assert [(e.body, e.properties) for e in decode_batch_body(body)] == [(b"abc", "a\x01b"), (b"de", "")]


@given(hosts, st.integers(0, 2**63 - 1))
def test_offset_msg_id_round_trips(host: tuple[str, int], phy: int) -> None:
    msg_id = offset_msg_id(pack_socket_address(*host), phy)
    assert msg_id == msg_id.upper()
    decoded = decode_offset_msg_id(msg_id)
    assert (decoded.host, decoded.port, decoded.phy_offset) == (host[0], host[1], phy)


def test_bad_msg_ids_raise_decode_errors() -> None:
    for bad in ("", "XYZ", "Z" * 32, "0" * 33):
        with pytest.raises(MessageDecodeError):
            decode_offset_msg_id(bad)
        with pytest.raises(MessageDecodeError):
            parse_uniq_key(bad)
    with pytest.raises(MessageDecodeError):
        unpack_socket_address(b"123")


def test_uniq_keys_have_a_constant_prefix_and_parse_back() -> None:
    gen = UniqKeyGenerator("10.1.2.3", pid=0x12345, loader_hash=0xCAFEBABE)
    now = 1_700_000_000_000
    first, second = gen.next_id(now), gen.next_id(now + 5)
    assert len(first) == 32 and first[:20] == second[:20] == "0A0102032345CAFEBABE"
    a, b = parse_uniq_key(first), parse_uniq_key(second)
    assert (a.ip, a.pid, a.loader_hash) == ("10.1.2.3", 0x2345, 0xCAFEBABE)
    assert b.month_ms - a.month_ms == 5
    assert b.counter == (a.counter + 1) & 0xFFFF
    assert 0 <= a.month_ms < 31 * 86_400_000
    v6 = UniqKeyGenerator("::1", pid=1, loader_hash=2).next_id(now)
    assert len(v6) == 56 and parse_uniq_key(v6).ip == "::1"


def test_the_time_a_uniq_key_was_made_reads_back_as_java_reads_it() -> None:
    """MessageClientIDSetter.getNearlyTimeFromID: this month's start plus the id's time, or last month's when that is
    not before now (an id of the month before, read early in this one); ``None`` for what is not an id."""
    now = 1_700_000_000_000
    v4 = UniqKeyGenerator("10.1.2.3", pid=1, loader_hash=2).next_id(now - 5)
    v6 = UniqKeyGenerator("::1", pid=1, loader_hash=2).next_id(now - 5)
    assert nearly_time_from_id(v4, now) == nearly_time_from_id(v6, now) == now - 5
    month_start = datetime.datetime(2023, 12, 1).astimezone()  # local, as the ids' months are
    read_early = int(month_start.timestamp() * 1000) + 1_000  # a second into December
    made_in_november = read_early - 5_000
    old_id = UniqKeyGenerator("10.1.2.3", pid=1, loader_hash=2).next_id(made_in_november)
    assert nearly_time_from_id(old_id, read_early) == made_in_november
    assert nearly_time_from_id("not hex", now) is None and nearly_time_from_id("0A01", now) is None


@given(st.binary(max_size=400))
def test_garbage_never_raises_anything_but_decode_error(data: bytes) -> None:
    for fn in (lambda: list(iter_records(data, check_crc=True)), lambda: decode_batch_body(data)):
        with contextlib.suppress(MessageDecodeError):
            fn()


@given(records(), st.integers(0, 400), st.binary(min_size=1, max_size=4))
def test_corrupted_records_never_raise_anything_but_decode_error(rec: MessageRecord, at: int, junk: bytes) -> None:
    data = bytearray(encode_record(rec, 1, 2, 3))
    at %= len(data)
    data[at : at + len(junk)] = junk
    for cut in (len(data), at):
        with contextlib.suppress(MessageDecodeError):
            list(iter_records(bytes(data[:cut]), check_crc=True))
