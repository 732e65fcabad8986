"""Exact bytes: frames as real clients and the Java broker write them (docs/protocol.md#11-frame-layout,
docs/protocol.md#15-json-header, docs/protocol.md#16-rocketmq-binary-header,
docs/protocol.md#91-what-real-clients-send).

Each frame is spelled out byte by byte (length prefix, header word, header, body) rather than produced by our encoder,
so these tests pin the wire format independently of the code under test.
"""

from __future__ import annotations

import pytest

from remoting.codec import FrameDecoder, LanguageCode, RemotingCommand, SerializeType, encode_command
from remoting.codec.headers import SendMessageRequestHeader, parse_send_request_header


def json_frame(header: bytes, body: bytes = b"") -> bytes:
    """``length | 0x00 headerLen(24 bits) | header | body`` with the serialize-type byte 0 (JSON)."""
    return (4 + len(header) + len(body)).to_bytes(4, "big") + b"\x00" + len(header).to_bytes(3, "big") + header + body


def decode_one(frame: bytes) -> RemotingCommand:
    decoder = FrameDecoder()
    decoder.receive_data(frame)
    cmd = decoder.next_command()
    assert cmd is not None
    assert decoder.next_command() is None
    assert decoder.buffered == 0
    return cmd


# ---- what clients send --------------------------------------------------------------------------------------------

ALI_ONS_SEND_V2 = (
    b'{"code":310,"language":"JAVA","opaque":1,"flag":0,"version":121,'
    b'"extFields":{"a":"PID_GROUP","b":"TopicTest","c":"TBW102","d":4,"e":3,"f":0,"g":1700000000123,"h":0,'
    b'"i":"TAGS\\u0001TagA\\u0002","j":0,"k":false}}'
)


def test_ali_ons_send_v2_with_numbers_and_booleans_decodes_to_strings() -> None:
    cmd = decode_one(json_frame(ALI_ONS_SEND_V2, b"hello"))
    assert cmd == RemotingCommand(
        code=310,
        opaque=1,
        flag=0,
        language=LanguageCode.JAVA,
        version=121,
        remark=None,
        ext_fields={
            "a": "PID_GROUP",
            "b": "TopicTest",
            "c": "TBW102",
            "d": "4",
            "e": "3",
            "f": "0",
            "g": "1700000000123",
            "h": "0",
            "i": "TAGS\x01TagA\x02",
            "j": "0",
            "k": "false",
        },
        body=b"hello",
        serialize_type=SerializeType.JSON,
    )
    header = parse_send_request_header(cmd.code, cmd.ext_fields)
    assert header == SendMessageRequestHeader(
        producer_group="PID_GROUP",
        topic="TopicTest",
        default_topic="TBW102",
        default_topic_queue_nums=4,
        queue_id=3,
        sys_flag=0,
        born_timestamp=1700000000123,
        flag=0,
        properties="TAGS\x01TagA\x02",
        reconsume_times=0,
        unit_mode=False,
    )


CPP_SEND_V2 = (
    b'{"code":310,"extFields":{"AccessKey":"","OnsChannel":"ALIYUN","Signature":"",'
    b'"a":"cpp_group","b":"TopicTest","c":"TBW102","d":"4","e":1,"f":"0","g":"1700000000456","h":0,'
    b'"i":"TAGS\\u0001*","j":"0","k":"0","l":16,"m":"0"},'
    b'"flag":0,"language":"CPP","opaque":77,"remark":"","serializeTypeCurrentRPC":"JSON","version":333}\n'
)


def test_cpp_header_with_trailing_newline_and_acl_fields_decodes() -> None:
    cmd = decode_one(json_frame(CPP_SEND_V2, b"\x00\x01"))
    assert (cmd.code, cmd.opaque, cmd.language, cmd.version, cmd.remark) == (310, 77, LanguageCode.CPP, 333, "")
    assert cmd.ext_fields["AccessKey"] == ""
    assert cmd.ext_fields["OnsChannel"] == "ALIYUN"
    assert cmd.ext_fields["e"] == "1"
    assert cmd.body == b"\x00\x01"
    header = parse_send_request_header(cmd.code, cmd.ext_fields)
    assert (header.queue_id, header.unit_mode, header.batch, header.max_reconsume_times) == (1, False, False, 16)


@pytest.mark.parametrize(
    "ext_json",
    [b"", b',"extFields":null', b',"extFields":{}'],
    ids=["extFields-absent", "extFields-null", "extFields-empty"],
)
def test_missing_null_or_empty_ext_fields_decode_to_empty_map(ext_json: bytes) -> None:
    cmd = decode_one(json_frame(b'{"code":34,"flag":0,"language":"JAVA","opaque":3,"version":409' + ext_json + b"}"))
    assert cmd.ext_fields == {}
    assert cmd.code == 34


@pytest.mark.parametrize(("remark_json", "remark"), [(b"", None), (b',"remark":""', ""), (b',"remark":"x"', "x")])
def test_remark_absent_or_empty_decodes(remark_json: bytes, remark: str | None) -> None:
    cmd = decode_one(json_frame(b'{"code":1,"flag":1,"language":"JAVA","opaque":9,"version":409' + remark_json + b"}"))
    assert cmd.remark == remark


@pytest.mark.parametrize(
    ("language_json", "language"),
    [
        (b'"JAVA"', LanguageCode.JAVA),
        (b'"CPP"', LanguageCode.CPP),
        (b'"GO"', LanguageCode.GO),
        (b"9", LanguageCode.GO),
        (b"1", LanguageCode.CPP),
        (b'"COBOL"', LanguageCode.OTHER),
    ],
)
def test_language_as_name_or_number_decodes(language_json: bytes, language: LanguageCode) -> None:
    cmd = decode_one(json_frame(b'{"code":105,"language":' + language_json + b',"opaque":2,"flag":0,"version":63}'))
    assert cmd.language is language


def test_unknown_top_level_keys_are_ignored() -> None:
    cmd = decode_one(json_frame(b'{"code":105,"opaque":2,"future":[1,2],"extFields":{"topic":"T"}}'))
    assert cmd.ext_fields == {"topic": "T"}


# ---- what the Java broker sends, and what we send ---------------------------------------------------------------

JAVA_SEND_RESPONSE = (
    b'{"code":0,"extFields":{"queueId":"1","msgId":"C0A8...","queueOffset":"5","MSG_REGION":"DefaultRegion",'
    b'"TRACE_ON":"true"},"flag":1,"language":"JAVA","opaque":42,"serializeTypeCurrentRPC":"JSON","version":409}'
)


def test_java_broker_send_response_decodes_and_reencodes_byte_for_byte() -> None:
    frame = json_frame(JAVA_SEND_RESPONSE)
    cmd = decode_one(frame)
    assert cmd.is_response
    assert cmd.ext_fields == {
        "queueId": "1",
        "msgId": "C0A8...",
        "queueOffset": "5",
        "MSG_REGION": "DefaultRegion",
        "TRACE_ON": "true",
    }
    assert encode_command(cmd) == frame


def test_json_encoder_writes_keys_in_fastjson_order() -> None:
    cmd = RemotingCommand(
        code=105,
        opaque=7,
        flag=0,
        language=LanguageCode.PYTHON,
        version=409,
        remark="why",
        ext_fields={"topic": "T"},
        body=b"xyz",
    )
    header = (
        b'{"code":105,"extFields":{"topic":"T"},"flag":0,"language":"PYTHON","opaque":7,"remark":"why",'
        b'"serializeTypeCurrentRPC":"JSON","version":409}'
    )
    assert encode_command(cmd) == json_frame(header, b"xyz")


def test_json_encoder_omits_empty_ext_fields_and_null_remark() -> None:
    cmd = RemotingCommand(code=0, opaque=1, flag=1, language=LanguageCode.JAVA, version=409)
    header = b'{"code":0,"flag":1,"language":"JAVA","opaque":1,"serializeTypeCurrentRPC":"JSON","version":409}'
    assert encode_command(cmd) == json_frame(header)


def test_header_length_is_masked_from_the_serialize_type_byte() -> None:
    frame = encode_command(RemotingCommand(code=0, serialize_type=SerializeType.ROCKETMQ))
    assert frame[4] == 1  # high byte of the header word
    assert int.from_bytes(frame[5:8], "big") == len(frame) - 8


# ---- ROCKETMQ binary layout (docs/protocol.md#16-rocketmq-binary-header) ------------------------------------------

ROCKETMQ_HEADER = (
    b"\x01\x36"  # code 310 (int16)
    b"\x03"  # language PYTHON (byte)
    b"\x01\x99"  # version 409 (int16)
    b"\x00\x00\x00\x2a"  # opaque 42 (int32)
    b"\x00\x00\x00\x02"  # flag oneway (int32)
    b"\x00\x00\x00\x02"  # remark length 2
    b"hi"  # remark
    b"\x00\x00\x00\x15"  # extFields block length 21 = (2+1+4+5) + (2+2+4+1)
    b"\x00\x01"  # key length 1
    b"a"  # key
    b"\x00\x00\x00\x05"  # value length 5
    b"group"  # value
    b"\x00\x02"  # key length 2
    b"\xc3\xa9"  # key "é" in UTF-8
    b"\x00\x00\x00\x01"  # value length 1
    b"1"  # value
)


def test_rocketmq_binary_header_layout_byte_for_byte() -> None:
    cmd = RemotingCommand(
        code=310,
        opaque=42,
        flag=2,
        language=LanguageCode.PYTHON,
        version=409,
        remark="hi",
        ext_fields={"a": "group", "é": "1"},
        body=b"BODY",
        serialize_type=SerializeType.ROCKETMQ,
    )
    expected = (4 + len(ROCKETMQ_HEADER) + 4).to_bytes(4, "big") + b"\x01" + len(ROCKETMQ_HEADER).to_bytes(3, "big")
    expected += ROCKETMQ_HEADER + b"BODY"
    assert len(ROCKETMQ_HEADER) == 21 + 2 + 21
    assert encode_command(cmd) == expected
    assert decode_one(expected) == cmd


def test_rocketmq_binary_null_remark_and_no_ext_fields() -> None:
    header = (
        b"\x00\x00"  # code 0
        b"\x00"  # JAVA
        b"\x01\x99"  # version 409
        b"\x00\x00\x00\x07"  # opaque 7
        b"\x00\x00\x00\x01"  # flag: response
        b"\x00\x00\x00\x00"  # remark length 0 = null
        b"\x00\x00\x00\x00"  # extFields block length 0
    )
    frame = (4 + len(header)).to_bytes(4, "big") + b"\x01" + len(header).to_bytes(3, "big") + header
    cmd = RemotingCommand(
        code=0, opaque=7, flag=1, language=LanguageCode.JAVA, version=409, serialize_type=SerializeType.ROCKETMQ
    )
    assert encode_command(cmd) == frame
    assert decode_one(frame) == cmd


def test_rocketmq_binary_empty_key_entry_is_dropped_as_java_does() -> None:
    entries = (
        b"\x00\x00"  # empty key
        b"\x00\x00\x00\x01"  # value length 1
        b"v"  # value
        b"\x00\x01"  # key length 1
        b"k"  # key
        b"\x00\x00\x00\x00"  # empty value: null (readStr), so absent
    )
    header = (
        b"\x00\x22"  # code 34 HEART_BEAT
        b"\x00"  # JAVA
        b"\x00\x79"  # version 121
        b"\x00\x00\x00\x01"  # opaque 1
        b"\x00\x00\x00\x00"  # flag 0
        b"\x00\x00\x00\x00"  # remark null
    )
    header += len(entries).to_bytes(4, "big") + entries
    frame = (4 + len(header)).to_bytes(4, "big") + b"\x01" + len(header).to_bytes(3, "big") + header
    cmd = decode_one(frame)
    assert cmd.code == 34 and cmd.version == 121
    assert cmd.ext_fields == {}
