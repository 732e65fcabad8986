"""The producer's send hot path against the general code it stands in for: the request frame written from the
encoded fields (:class:`client.send_request.PreparedSend`), the properties string of plain messages, the UNIQ_KEY
kept per millisecond, the reconsume counts moved into the header for retry topics only, and the send result read
straight from the response's JSON header."""

from __future__ import annotations

import struct
import time
from typing import Any

import orjson
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from client import api
from client.async_send import AsyncSend
from client.message import PROPERTY_MAX_RECONSUME_TIMES, PROPERTY_RECONSUME_TIME, Message, SendResult
from client.send_request import PreparedSend, SendBuilder, send_code
from remoting.codec.codes import RequestCode
from remoting.codec.command import RemotingCommand
from remoting.codec.errors import CodecError
from remoting.codec.frame import encode_command, encode_json_request, encode_json_request_ext
from remoting.codec.message_properties import PROPERTY_UNIQ_KEY, PROPERTY_WAIT, decode_properties, encode_properties
from remoting.codec.msgid import UniqKeyGenerator, _month_start_ms
from remoting.codec.serializers import command_from_json

_text = st.text(max_size=12)
_V2 = st.fixed_dictionaries(
    {k: _text for k in "abcdefghijk"},
    optional={"l": st.integers(0, 99).map(str), "m": st.sampled_from(["true", "false"])},
)


@given(st.integers(0, 32767), st.integers(0, 2**31 - 1), st.dictionaries(_text, _text, min_size=1), st.binary())
def test_a_request_from_its_encoded_ext_fields_is_the_frame_of_its_command(
    code: int, opaque: int, fields: dict[str, str], body: bytes
) -> None:
    expected = encode_command(RemotingCommand(code, opaque, ext_fields=fields, body=body))
    assert encode_json_request_ext(code, opaque, orjson.dumps(fields), body) == expected


def _for_queue(fields: dict[str, str], queue_id: int, broker: str) -> dict[str, str]:
    """What the producer sent before the fields were kept encoded: a copy with ``e`` and ``n`` set."""
    out = dict(fields)
    out["e"] = str(queue_id)
    out["n"] = broker
    return out


@given(_V2, st.binary(max_size=32), st.integers(0, 2**31 - 1), st.integers(0, 1023), _text)
def test_an_attempts_frame_is_what_the_fields_gave(
    fields: dict[str, str], body: bytes, opaque: int, queue_id: int, broker: str
) -> None:
    prepared = PreparedSend(fields, body, "id")
    wanted = _for_queue(fields, queue_id, broker)
    assert prepared.frame(opaque, queue_id, broker) == encode_json_request(send_code(wanted), opaque, wanted, body)
    assert prepared.for_queue(queue_id, broker) == wanted
    assert prepared.topic == fields["b"] and prepared.code == send_code(fields)
    assert PreparedSend(prepared.fields, body, "id") == prepared


def _reference_fields(builder: SendBuilder, msg: Message, uniq: str, born: str) -> dict[str, str]:
    """The V2 fields as the producer built them before (a dict of every property, then encode_properties)."""
    props = msg.all_properties()
    props[PROPERTY_UNIQ_KEY] = uniq
    reconsume = max_reconsume = None
    if msg.topic.startswith("%RETRY%"):
        reconsume = props.pop(PROPERTY_RECONSUME_TIME, None)
        max_reconsume = props.pop(PROPERTY_MAX_RECONSUME_TIMES, None)
    fields = {
        "a": builder.group,
        "b": msg.topic,
        "c": builder.create_topic_key,
        "d": str(builder.default_topic_queue_nums),
        "e": "0",
        "f": "0",
        "g": born,
        "h": str(msg.flag),
        "i": encode_properties(props),
        "j": str(int(reconsume or 0)),
        "k": "false",
    }
    if max_reconsume:
        fields["l"] = str(int(max_reconsume))
    return fields


_value = st.text(st.characters(blacklist_characters="\x02", blacklist_categories=["Cs"]), min_size=1, max_size=8)


@given(
    st.from_regex(r"[%|a-zA-Z0-9_-]{1,8}", fullmatch=True),  # a legal topic (check_topic refuses the others)
    st.none() | _value,
    st.none() | _value | st.lists(_value, max_size=3),
    st.fixed_dictionaries(
        {},
        optional={
            "p": _value,
            "MSG_TYPE": st.just("reply") | _value,
            PROPERTY_RECONSUME_TIME: st.integers(0, 20).map(str),
            PROPERTY_MAX_RECONSUME_TIMES: st.integers(0, 20).map(str),
        },
    ),
    st.integers(0, 18),
    st.booleans(),
    st.integers(0, 1000),
)
def test_a_single_sends_fields_are_those_of_the_general_builder(
    topic: str,
    tags: str | None,
    keys: str | list[str] | None,
    properties: dict[str, str],
    delay: int,
    wait: bool,
    flag: int,
) -> None:
    builder = SendBuilder("group", UniqKeyGenerator())
    msg = Message(topic, b"body", tags=tags, keys=keys, properties=properties, delay_level=delay, flag=flag)
    msg.wait_store_msg_ok = wait
    prepared = builder.single(msg)
    fields = prepared.fields
    assert fields == _reference_fields(builder, msg, prepared.msg_id, fields["g"])
    assert prepared.code == send_code(fields)
    # byte for byte what the fields' dict gives, and the same from the cached prefixes of a second message
    assert PreparedSend(fields, prepared.body, prepared.msg_id) == prepared
    again = builder.single_as(msg, AsyncSend)
    assert isinstance(again, AsyncSend)
    assert PreparedSend(again.fields, again.body, again.msg_id) == again


@pytest.mark.parametrize(("topic", "header", "kept"), [("%RETRY%G", ("5", "16"), False), ("T", ("0", None), True)])
def test_reconsume_counts_go_into_the_header_only_for_a_retry_topic(
    topic: str, header: tuple[str, str | None], kept: bool
) -> None:
    """DefaultMQProducerImpl.sendKernelImpl moves RECONSUME_TIME and MAX_RECONSUME_TIMES into the header (and out of
    the properties) for a ``%RETRY%`` topic only: any other topic stores them as properties with reconsumeTimes 0 (a
    5.x message re-sent with its properties keeps its delivery attempt out of the count)."""
    counts = {PROPERTY_RECONSUME_TIME: "5", PROPERTY_MAX_RECONSUME_TIMES: "16"}
    fields = SendBuilder("group", UniqKeyGenerator()).single(Message(topic, b"x", properties=counts)).fields
    props = decode_properties(fields["i"])
    in_props = (PROPERTY_RECONSUME_TIME in props, PROPERTY_MAX_RECONSUME_TIMES in props)
    assert ((fields["j"], fields.get("l")), in_props) == (header, (kept, kept))


_tag = st.none() | st.sampled_from(["", "TagA", "TagB", "a\x01b"])


@given(
    st.lists(
        st.tuples(
            _tag,
            st.none() | st.sampled_from(["k1", "k2"]),
            st.sampled_from([{}, {"p": "v"}]),
            st.sampled_from([0, 3]),
            st.booleans(),
        ),
        min_size=1,
        max_size=12,
    )
)
@example([("TagA", None, {}, 0, True), ("TagA", "k1", {}, 0, True), ("TagA", None, {"p": "v"}, 0, True),
          ("TagA", None, {}, 3, True), ("TagA", None, {}, 0, False), (None, None, {}, 0, True),
          (None, "k2", {}, 0, True)])  # fmt: skip
def test_one_builders_kept_prefixes_never_leak_between_messages(
    shapes: list[tuple[str | None, str | None, dict[str, str], int, bool]],
) -> None:
    """One builder, messages sharing tags but differing in keys, properties, delay or WAIT, in any order: each send's
    fields are still the general builder's (the tag-only prefixes it keeps serve only tag-only messages)."""
    builder = SendBuilder("group", UniqKeyGenerator())
    for tags, keys, properties, delay, wait in shapes:
        msg = Message("T", b"body", tags=tags, keys=keys, properties=dict(properties), delay_level=delay)
        msg.wait_store_msg_ok = wait
        prepared = builder.single(msg)
        fields = prepared.fields
        assert fields == _reference_fields(builder, msg, prepared.msg_id, fields["g"])
        assert PreparedSend(fields, prepared.body, prepared.msg_id) == prepared


def _reference_uniq(prefix: str, now_ms: int, counter: int) -> str:
    """The UNIQ_KEY as it was computed before (struct-packed per call)."""
    elapsed = (now_ms - _month_start_ms(now_ms)) & 0xFFFFFFFF
    return prefix + struct.pack(">IH", elapsed, counter & 0xFFFF).hex().upper()


@given(st.lists(st.integers(1_600_000_000_000, 1_900_000_000_000), min_size=1, max_size=20), st.integers(0, 70000))
def test_uniq_keys_kept_per_millisecond_are_the_packed_layout(times: list[int], skip: int) -> None:
    gen = UniqKeyGenerator("10.1.2.3", pid=7, loader_hash=9)
    for _ in range(skip % 3):
        gen.next_id(times[0])
    counter = skip % 3
    for now in [*sorted(times), times[0]]:  # the last one goes back in time: recomputed, not kept
        assert gen.next_id(now) == _reference_uniq("0A0102030007" + "00000009", now, counter)
        counter += 1


@given(st.integers(0, 70000), st.integers(1, 300))
def test_a_run_of_uniq_keys_is_what_one_key_at_a_time_gives_in_its_millisecond(skip: int, count: int) -> None:
    gen = UniqKeyGenerator("10.1.2.3", pid=7, loader_hash=9)
    for _ in range(skip % 5):
        gen.next_id()
    before = time.time_ns() // 1_000_000
    ids = gen.next_ids(count)
    after = time.time_ns() // 1_000_000
    times = {now for now in range(before, after + 1) if ids[0] == _reference_uniq(gen._prefix, now, skip % 5)}
    assert len(times) == 1, "the first key is not of a millisecond of the call"
    (now,) = times
    assert ids == [_reference_uniq(gen._prefix, now, skip % 5 + n) for n in range(count)]
    assert gen.next_id(now) == _reference_uniq(gen._prefix, now, skip % 5 + count)


def _general(fields: dict[str, Any]) -> object:
    """What the general path makes of a send response header: a SendResult or the error it raises."""
    try:
        return api.send_result(command_from_json(fields, b""), "addr", "broker", "topic", "uniq")
    except Exception as exc:  # the comparison is about which error
        return type(exc)


_scalar = st.none() | st.booleans() | st.integers(-5, 2**40) | st.floats(allow_nan=False) | st.text(max_size=6)
_digits = st.integers(-5, 2**40).map(str)


@given(
    st.sampled_from([0, 10, 11, 12, 1, 14, 17, 205]) | _scalar,
    st.fixed_dictionaries(
        {},
        optional={
            "msgId": st.text(max_size=32) | _scalar,
            "queueId": _digits | _scalar,
            "queueOffset": _digits | _scalar,
            "MSG_REGION": st.text(max_size=8) | _scalar,
            "TRACE_ON": st.sampled_from(["true", "false"]) | _scalar,
            "other": _scalar,
        },
    )
    | _scalar,
    st.sampled_from([401, "401", 2**40, None]),
    st.sampled_from(["JAVA", None, 3]),
)
def test_a_send_result_read_from_the_header_is_the_general_paths_or_none(
    code: object, ext: object, version: object, language: object
) -> None:
    fields: dict[str, Any] = {"code": code, "extFields": ext, "flag": 1, "opaque": 5}
    if version is not None:
        fields["version"] = version
    if language is not None:
        fields["language"] = language
    fast = api.send_result_json(fields, "addr", "broker", "topic", "uniq")
    if fast is not None:
        assert _general(fields) == fast


def test_the_brokers_put_ok_answer_is_read_from_the_header() -> None:
    header = (
        b'{"code":0,"extFields":{"MSG_REGION":"DefaultRegion","TRACE_ON":"true","msgId":"7F00000100002A9F0000000000001'
        b'234","queueId":"3","queueOffset":"42"},"flag":1,"language":"JAVA","opaque":9,"serializeTypeCurrentRPC":"JSON'
        b'","version":401}'
    )
    fields = orjson.loads(header)
    fast = api.send_result_json(fields, "addr", "broker", "topic", "uniq")
    assert fast is not None and fast == _general(fields)
    assert (fast.queue_id, fast.queue_offset, fast.region_id, fast.trace_on) == (3, 42, "DefaultRegion", True)
    for broken in ({**fields, "code": 1}, {**fields, "extFields": {"msgId": "x"}}):
        assert api.send_result_json(broken, "addr", "broker", "topic", "uniq") is None
        assert _general(broken) is not None and not isinstance(_general(broken), CodecError)


def test_a_send_answer_without_a_region_is_in_the_default_region() -> None:
    """Java's MQClientAPIImpl.processSendResponse: a missing or empty ``MSG_REGION`` becomes ``DefaultRegion``
    (MixAll.DEFAULT_TRACE_REGION_ID), so SendMessageTraceHookImpl still writes the Pub record for a broker that does
    not send the field (RocketMQ before 4.4). The header fast path leaves such an answer to the general path."""
    for region in ({}, {"MSG_REGION": ""}, {"MSG_REGION": None}):
        ext = {"msgId": "0A0000010000", "queueId": "0", "queueOffset": "0", **region}
        fields: dict[str, Any] = {"code": 0, "extFields": ext, "flag": 1, "language": "JAVA", "opaque": 5}
        assert api.send_result_json(fields, "addr", "broker", "topic", "uniq") is None
        result = _general(fields)
        assert isinstance(result, SendResult) and (result.region_id, result.trace_on) == ("DefaultRegion", True)


_BATCH_MESSAGE = st.tuples(
    st.none() | _value,
    st.none() | _value | st.lists(_value, max_size=3),
    st.fixed_dictionaries({}, optional={"p": _value, "q": _value, PROPERTY_UNIQ_KEY: st.just("7F00" * 8)}),
    st.integers(-5, 1000),
    st.binary(min_size=1, max_size=300),
)


@given(st.lists(_BATCH_MESSAGE, min_size=1, max_size=12), st.integers(300, 2000), st.booleans())
def test_a_batchs_body_is_the_general_encoders_with_its_ids(messages: list[Any], limit: int, wait: bool) -> None:
    """Each message's properties as ``all_properties`` plus its UNIQ_KEY (unless it carries one) encode them, in the
    general batch body, one request (a body over the limit is refused, as Java's), whether the message takes the
    tag/keys prefix or the general path;
    the request's WAIT is its messages'."""
    from client.errors import MessageValidationError
    from remoting.codec.message import BatchEntry, encode_batch_body

    builder = SendBuilder("group", UniqKeyGenerator())
    builder.max_message_size = limit
    msgs = []
    for tags, keys, properties, flag, body in messages:
        msg = Message("T", body, tags=tags, keys=keys, properties=dict(properties), flag=flag)
        msg.wait_store_msg_ok = wait
        msgs.append(msg)
    try:
        prepared = builder.batch(msgs)
    except MessageValidationError:
        uniq = {PROPERTY_UNIQ_KEY: "7F00" * 8}  # any key of the same length
        sizes = [22 + len(m.body) + len(encode_properties(m.all_properties() | uniq).encode()) for m in msgs]
        assert sum(sizes) > limit
        return
    ids = [uniq for p in prepared for uniq in p.msg_id.split(",")]
    entries = []
    for msg, uniq in zip(msgs, ids, strict=True):
        props = msg.all_properties()
        assert uniq == props.setdefault(PROPERTY_UNIQ_KEY, uniq)
        entries.append(BatchEntry(bytes(msg.body), encode_properties(props), msg.flag))
    assert [p.body for p in prepared] == [encode_batch_body(entries)]
    for p in prepared:  # the request's fields: the general builder's with ``m``, at the builder's born time
        fields = p.fields
        general = {"a": "group", "b": "T", "c": "TBW102", "d": "4", "e": "0", "f": "0", "h": "0"}
        general |= {"i": encode_properties({PROPERTY_WAIT: str(wait).lower()}), "j": "0", "k": "false", "m": "true"}
        assert fields == general | {"g": fields["g"]}
        assert abs(int(fields["g"]) - time.time() * 1000) < 600_000  # born now (a correctness bound, not a timing)
        assert p.code == send_code(fields) == RequestCode.SEND_BATCH_MESSAGE
        again = PreparedSend(fields, p.body, p.msg_id)
        assert (again.head, again.tail, again.topic) == (p.head, p.tail, p.topic)


def _first_broken_rule(msgs: list[Message], limit: int) -> str | None:
    """The batch rules in 4.9.8's ``DefaultMQProducer.batch`` order: ``generateFromList``'s for the whole list, then
    each message's ``checkMessage``, then the batch body's size (``sendDefaultImpl``)."""
    topic, wait = msgs[0].topic, msgs[0].waits_for_store()
    for m in msgs:
        broken = [
            (m.delay_level > 0, "TimeDelayLevel is not supported for batching"),
            (m.topic.startswith("%RETRY%"), "Retry Group is not supported for batching"),
            (m.topic != topic, "The topic of the messages in one batch should be the same"),
            (m.waits_for_store() != wait, "The waitStoreMsgOK of the messages in one batch should the same"),
        ]
        for hit, text in broken:
            if hit:
                return text
    for m in msgs:
        broken = [
            (not m.topic, "The specified topic is blank"),
            (not m.body, "the message body length is zero"),
            (len(m.body) > limit, f"the message body size over max value, MAX: {limit}"),
        ]
        for hit, text in broken:
            if hit:
                return text
    total = sum(
        22 + len(m.body) + len(encode_properties(m.all_properties() | {PROPERTY_UNIQ_KEY: "7F00" * 8})) for m in msgs
    )
    if total > limit:  # the batch body, as Validators.checkMessage checks it
        return f"the message body size over max value, MAX: {limit}"
    return None


_RULED_MESSAGE = st.builds(
    Message,
    st.sampled_from(["T", "U", "", "%RETRY%g"]),
    st.sampled_from([b"", b"x", b"y" * 40, bytearray(b"z" * 90)]),
    delay_level=st.sampled_from([-1, 0, 0, 0, 2]),
    properties=st.sampled_from([{}, {}, {"WAIT": "false"}, {"WAIT": "TRUE"}, {"WAIT": "no"}]),
    wait_store_msg_ok=st.sampled_from([True, True, True, False]),
)


@given(st.lists(_RULED_MESSAGE, min_size=1, max_size=6), st.sampled_from([60, 100, 140, 4096]))
def test_a_batch_is_refused_for_the_first_rule_a_message_breaks(msgs: list[Message], limit: int) -> None:
    from client.errors import MessageValidationError

    builder = SendBuilder("group", UniqKeyGenerator())
    builder.max_message_size = limit
    expected = _first_broken_rule(msgs, limit)
    try:
        prepared = builder.batch(msgs)
    except MessageValidationError as exc:
        rule = exc.__cause__ if isinstance(exc.__cause__, MessageValidationError) else exc  # a wrapped rule
        assert expected is not None and str(rule).startswith(expected), (str(rule), expected)
        return
    assert expected is None
    assert len(prepared) == 1 and len(prepared[0].msg_id.split(",")) == len(msgs)
