"""The C functions that read bytes from the network or the disk, fed valid inputs mutated at their length fields
(truncated, 0x7fffffff, negative, past the end, wrapped) and compared with their pure-Python twins: equal results, or
the same exception type. Also run with 3,000 examples each under an ASAN and UBSAN build of the extensions (built with
``CFLAGS='-fsanitize=address,undefined -fno-wrapv'``, run with libasan preloaded): no report.

``SPEEDUPS_FUZZ_EXAMPLES`` sets the example count (default 300)."""

from __future__ import annotations

import os
import struct
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from remoting.codec import batch_body, pull_body, record_scan, send_frame, send_header
from remoting.codec.batch_body import BatchEntry, encode_batch_body
from remoting.codec.message import MessageRecord, encode_record
from tests.codec.speedups import SPEEDUPS, requires_speedups
from tests.codec.test_send_header import ALLOWED
from tests.codec.test_send_header import BASE as SEND_BASE

EXAMPLES = int(os.environ.get("SPEEDUPS_FUZZ_EXAMPLES", "300"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))

HOST4 = bytes([10, 0, 0, 9, 0, 0, 0x2A, 0x9F])
HOST6 = bytes(range(16)) + bytes([0, 0, 0x2A, 0x9F])
BASE = 1 << 30

#: values a length or flag field gets: zero, small, the record overheads, the int32 and int16 edges, negatives
SPECIAL = [0, 1, 2, 3, 7, 8, 20, 22, 48, 88, 91, 112, 127, 128, 255, 0x7FFF, 0x8000, 0xFFFF, 0x7FFFFFFF,
           0x80000000, 0xFFFFFFFF, 0xFFFFFFFE, 0x7FFFFFFF - 90, 0x10, 0x20, 0x30, 0x04, 0x0C]  # fmt: skip


@st.composite
def mutated(draw: st.DrawFn, data: bytes, hot: list[int]) -> bytes:
    """``data`` with a few mutations: a field (1, 2, 4 or 8 bytes, at a hot offset or anywhere) set to a special or
    random value, relative to a near length, a byte flipped, bytes inserted or removed, truncated or extended."""
    out = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["field", "field", "field", "flip", "insert", "delete", "truncate", "extend"]))
        if op == "field" and out:
            width = draw(st.sampled_from([1, 2, 4, 4, 8]))
            at = (
                draw(st.sampled_from(hot) | st.integers(0, max(len(out) - 1, 0)))
                if hot
                else draw(st.integers(0, len(out) - 1))
            )
            value = draw(
                st.sampled_from(SPECIAL)
                | st.integers(0, 2 ** (8 * width) - 1)
                | st.integers(len(out) - 64, len(out) + 64)
            )
            raw = (value % 2 ** (8 * width)).to_bytes(width, "big")
            at = at % len(out)
            n = min(width, len(out) - at)
            out[at : at + n] = raw[:n]
        elif op == "flip" and out:
            at = draw(st.integers(0, len(out) - 1))
            out[at] ^= 1 << draw(st.integers(0, 7))
        elif op == "insert":
            at = draw(st.integers(0, len(out)))
            out[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif op == "delete" and out:
            at = draw(st.integers(0, len(out) - 1))
            del out[at : at + draw(st.integers(1, 8))]
        elif op == "truncate":
            del out[draw(st.integers(0, len(out))) :]
        elif op == "extend":
            out += draw(st.binary(max_size=16))
    return bytes(out)


def outcome(fn: Any, *args: Any) -> Any:
    try:
        return ("ok", fn(*args))
    except Exception as exc:
        return ("raised", type(exc))


# ---- records: the pull body and the replica's scan ------------------------------------------------------------------

PROPS = st.sampled_from(
    [
        "",
        "TAGS\x01TagA",
        "TAGS\x01a\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01U1",
        "a\x01b\x02\x02c\x01",
        "TAGS\x01标签",
        "KEYS\x01\xe9",
        "\x01\x02\x01",
        "UNIQ_KEY\x01X" * 3,
    ]
)
TOPICS = st.sampled_from(["T", "TopicA", "主题", "T" * 127, "SCHEDULE_TOPIC_XXXX"])


@st.composite
def record_logs(draw: st.DrawFn) -> tuple[bytes, list[int]]:
    """Records one after another (physical offsets where they lie from BASE) and the offsets of their fields."""
    buf = bytearray()
    hot: list[int] = []
    for _ in range(draw(st.integers(1, 4))):
        rec = MessageRecord(
            topic=draw(TOPICS), body=draw(st.binary(max_size=24)), queue_id=draw(st.integers(0, 2)),
            properties=draw(PROPS), sys_flag=draw(st.sampled_from([0, 0, 0, 0x4, 0x8, 0xC])),
            born_host=draw(st.sampled_from([HOST4, HOST4, HOST6])),
            store_host=draw(st.sampled_from([HOST4, HOST4, HOST6])),
        )  # fmt: skip
        at = len(buf)
        raw = encode_record(rec, draw(st.sampled_from([0, 1, 2, 2**62])), BASE + at, 1_700_000_000_000)
        fixed = 72 + len(rec.born_host) + len(rec.store_host)
        body_len = len(rec.body)
        topic_at = fixed + body_len
        topic_len = raw[topic_at]
        hot += [at + k for k in (0, 4, 12, 20, 28, 36, fixed - 4, topic_at, topic_at + 1 + topic_len)]
        buf += raw
    return bytes(buf), hot


@requires_speedups
@FUZZ
@given(st.data(), st.none() | st.just({"MIN_OFFSET": "0"}), st.none() | st.just(frozenset({"TagA", "标签"})))
def test_pull_decode_of_mutated_bodies(data: st.DataObject, extra: Any, tags: Any) -> None:
    log, hot = data.draw(record_logs())
    body = data.draw(mutated(log, hot))
    assert pull_body.NATIVE
    assert outcome(pull_body.decode_records, body, extra, tags) == outcome(
        pull_body.py_decode_records, body, extra, tags
    )


@requires_speedups
@FUZZ
@given(st.data(), st.booleans())
def test_scan_of_mutated_logs(data: st.DataObject, with_index: bool) -> None:
    log, hot = data.draw(record_logs())
    buf = data.draw(mutated(log, hot))
    pos = data.draw(st.sampled_from([0, 0, 0, 1, -1, len(buf)]))
    limit = data.draw(st.sampled_from([len(buf), len(buf) + 100, len(buf) - 1, 0, -5]))
    c = outcome(SPEEDUPS.scan_records, buf, pos, limit, BASE, with_index)
    py = outcome(record_scan._py_scan_records, buf, pos, limit, BASE, with_index)
    assert c == py


@requires_speedups
@FUZZ
@given(st.data(), st.booleans())
def test_entry_scan_of_mutated_logs(data: st.DataObject, with_index: bool) -> None:
    log, _hot = data.draw(record_logs())
    # re-frame each record as a DLedger entry: the phy offset must then be past the 48-byte header, so re-encode
    out = bytearray()
    hot = []
    pos = 0
    while pos < len(log):
        size = struct.unpack_from(">i", log, pos)[0]
        rec = bytearray(log[pos : pos + size])
        struct.pack_into(">q", rec, 28, BASE + len(out) + 48)
        head = bytearray(48)
        struct.pack_into(">ii", head, 0, 1, 48 + size)
        struct.pack_into(">i", head, 44, size)
        hot += [len(out), len(out) + 4, len(out) + 44, len(out) + 48, len(out) + 48 + 84]
        out += head + rec
        pos += size
    if data.draw(st.booleans()):
        empty = bytearray(48)
        struct.pack_into(">ii", empty, 0, 1, 48)
        out = empty + out  # phy offsets now off by 48 for all but... keep it: the scan must stop identically
    buf = data.draw(mutated(bytes(out), hot))
    limit = data.draw(st.sampled_from([len(buf), len(buf) + 100, len(buf) - 1]))
    c = outcome(SPEEDUPS.scan_records, buf, 0, limit, BASE, with_index, True)
    py = outcome(record_scan._py_scan_records, buf, 0, limit, BASE, with_index, True)
    assert c == py


# ---- the batch send body ---------------------------------------------------------------------------------------------

BATCH_PROPS = st.text(alphabet="ab\x01\x02é中", max_size=10)


@st.composite
def batch_bodies(draw: st.DrawFn) -> tuple[bytes, list[int]]:
    entries = draw(st.lists(st.builds(BatchEntry, st.binary(max_size=24), BATCH_PROPS,
                                      st.integers(-(2**31), 2**31 - 1)), min_size=1, max_size=4))  # fmt: skip
    body = encode_batch_body(entries)
    hot, pos = [], 0
    while pos < len(body):
        size, body_len = struct.unpack_from(">i", body, pos)[0], struct.unpack_from(">i", body, pos + 16)[0]
        hot += [pos, pos + 12, pos + 16, pos + 20 + body_len]
        pos += size
    return body, hot


@requires_speedups
@FUZZ
@given(st.data(), st.sampled_from(["CLUSTER\x01DefaultCluster", "CLUSTER\x01集群", ""]))
def test_batch_split_of_mutated_bodies(data: st.DataObject, suffix: str) -> None:
    body, hot = data.draw(batch_bodies())
    raw = data.draw(mutated(body, hot))
    kind = data.draw(st.sampled_from([bytes, bytearray, memoryview]))
    arg = kind(raw)
    c = outcome(batch_body.split_stored_entries, arg, suffix)
    py = outcome(batch_body._py_split_stored_entries, arg, suffix)
    assert c == py


# ---- the send header (a client's extFields) and the send result (a broker's response header) -------------------------

ODD = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**64 - 1),
    st.sampled_from([2**31 - 1, 2**31, -(2**31), -(2**31) - 1, 2**63 - 1, 2**63, 2**64 - 1, -(2**63), 310, 0, -1]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(["", "0", "00", "9" * 9, "9" * 10, "9" * 18, "9" * 19, "+1", "-1", " 1", "1_0", "\u0661",
                     "\uff11", "\u00b2", "true", "false", "TRUE", "1e3", "0x10", "\x00", "1\x00", "é"]),
    st.text(max_size=4),
    st.lists(st.integers(-9, 9), max_size=1),
    st.dictionaries(st.text(max_size=1), st.integers(-9, 9), max_size=1),
)  # fmt: skip
SEND_EXT_KEYS = st.sampled_from([*"abcdefghijklmn", "AccessKey", "o", ""])
SEND_TOP_KEYS = st.sampled_from(["code", "opaque", "version", "flag", "extFields"])


@st.composite
def json_variants(draw: st.DrawFn, base: dict[str, Any], ext_keys: Any, top_keys: Any) -> dict[str, Any]:
    fields: dict[str, Any] = orjson.loads(orjson.dumps(base))
    for key in draw(st.lists(ext_keys, max_size=6)):
        if draw(st.booleans()):
            fields["extFields"][key] = draw(ODD)
        else:
            fields["extFields"].pop(key, None)
    for key in draw(st.lists(top_keys, max_size=3)):
        if draw(st.booleans()):
            fields[key] = draw(ODD)
        else:
            fields.pop(key, None)
    out: dict[str, Any] = orjson.loads(orjson.dumps(fields, option=orjson.OPT_NON_STR_KEYS))
    return out


@requires_speedups
@FUZZ
@given(json_variants(SEND_BASE, SEND_EXT_KEYS, SEND_TOP_KEYS))
def test_send_header_of_mutated_fields(fields: dict[str, Any]) -> None:
    assert outcome(SPEEDUPS.send_v2_fields, fields, ALLOWED) == outcome(send_header._py_send_v2_fields, fields, ALLOWED)


RESULT_BASE: dict[str, Any] = {
    "code": 0, "extFields": {"msgId": "0A0000092A9F000000000000", "queueId": "3", "queueOffset": "12",
                             "MSG_REGION": "DefaultRegion", "TRACE_ON": "true", "recallHandle": "h"},
    "flag": 1, "language": "JAVA", "opaque": 7, "serializeTypeCurrentRPC": "JSON", "version": 401,
}  # fmt: skip
RESULT_EXT_KEYS = st.sampled_from(["msgId", "queueId", "queueOffset", "MSG_REGION", "TRACE_ON", "recallHandle"])
RESULT_TOP_KEYS = st.sampled_from(["code", "extFields", "version", "language"])


def _result_cls() -> Any:
    from client.message import SendResult

    return SendResult


@requires_speedups
@FUZZ
@given(json_variants(RESULT_BASE, RESULT_EXT_KEYS, RESULT_TOP_KEYS))
def test_send_result_of_mutated_fields(fields: dict[str, Any]) -> None:
    from client import api

    statuses = api.STATUS_BY_CODE
    cls = _result_cls()
    args = (fields, statuses, cls, "UNIQ", "TopicTest", "broker-a")
    assert outcome(SPEEDUPS.send_result_json, *args) == outcome(send_frame._py_send_result_json, *args)


# ---- unstructured bytes, and property maps past the pull decoder's remembered names ----------------------------------


@requires_speedups
@FUZZ
@given(st.binary(max_size=400), st.booleans(), st.booleans())
def test_every_decoder_of_random_bytes(raw: bytes, with_tags: bool, entries: bool) -> None:
    """Bytes no encoder made: the pull body, the batch body and the replica's scan each answer as their twin."""
    tags = frozenset({"a"}) if with_tags else None
    extra = {"k": "v"} if entries else None
    assert outcome(pull_body.decode_records, raw, extra, tags) == outcome(pull_body.py_decode_records, raw, extra, tags)
    c_split = outcome(batch_body.split_stored_entries, raw, "CLUSTER\x01c")
    assert c_split == outcome(batch_body._py_split_stored_entries, raw, "CLUSTER\x01c")
    c_scan = outcome(SPEEDUPS.scan_records, raw, 0, len(raw), 0, with_tags, entries)
    assert c_scan == outcome(record_scan._py_scan_records, raw, 0, len(raw), 0, with_tags, entries)


#: property names and values: short, repeated across records, separators and bytes UTF-8 cannot decode among them
PROP_TEXT = st.text(alphabet="abT\x01\x02é\U0001f600", max_size=5)


@st.composite
def wide_properties(draw: st.DrawFn) -> bytes:
    """Up to 80 ``name\\x01value`` pairs (more distinct names than the C decoder remembers: pull_decode.h's
    PD_NAMES), some repeated with other values, raw bytes that are not UTF-8 spliced in."""
    pairs = [
        f"{draw(PROP_TEXT) or 'n'}{draw(st.integers(0, 40))}\x01{draw(PROP_TEXT)}".encode()
        for _ in range(draw(st.integers(0, 80)))
    ]
    raw = b"\x02".join(pairs)
    for _ in range(draw(st.integers(0, 2))):
        at = draw(st.integers(0, len(raw)))
        raw = raw[:at] + draw(st.sampled_from([b"\xff", b"\xed\xa0\x80", b"\xe4\xb8", b"\x00"])) + raw[at:]
    return raw[:0x7FFF]


@requires_speedups
@FUZZ
@given(st.lists(wide_properties(), min_size=1, max_size=4), st.none() | st.just(frozenset({"a", "b"})))
def test_pull_decode_of_wide_property_maps(props: list[bytes], tags: Any) -> None:
    body = b""
    for raw in props:
        rec = MessageRecord(topic="T", body=b"b", properties="", born_host=HOST4, store_host=HOST4)
        plain = encode_record(rec, 1, BASE + len(body), 5)
        size = len(plain) + len(raw)
        body += struct.pack(">i", size) + plain[4:-2] + struct.pack(">h", len(raw)) + raw
    assert pull_body.NATIVE
    c = outcome(pull_body.decode_records, body, {"x": "y"}, tags)
    assert c == outcome(pull_body.py_decode_records, body, {"x": "y"}, tags)
    if tags is None:
        assert c[0] == "ok" and len(c[1]) == len(props)
