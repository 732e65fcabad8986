"""ACL 1.0 signing (remoting/codec/acl_signing.py) against RocketMQ's algorithm with known keys."""

from __future__ import annotations

import base64
import hashlib
import hmac

from hypothesis import given
from hypothesis import strategies as st

from remoting.codec.acl_signing import (
    _MAX_ORDERS,
    _ORDERS,
    SessionCredentials,
    request_signature,
    sign,
    signature_matches,
    signing_content,
)
from remoting.codec.codes import RequestCode
from remoting.codec.command import request
from remoting.codec.frame import FrameDecoder, encode_command

#: RocketMQ AclUtils' test vector: a PULL_MESSAGE header signed with secret key 12345678.
GOLDEN_FIELDS = {
    "AccessKey": "RocketMQ",
    "consumerGroup": "groupB",
    "topic": "topicB",
    "queueId": "0",
    "queueOffset": "42",
    "maxMsgNums": "32",
    "sysFlag": "2",
    "commitOffset": "0",
    "suspendTimeoutMillis": "20000",
    "subscription": "*",
    "subVersion": "1700000000000",
    "expressionType": "TAG",
}
GOLDEN_CONTENT = b"RocketMQ0groupBTAG320421700000000000*200002topicB"
GOLDEN_SIGNATURE = "jtDHbVqa0KC72PpNRr8SCZvAy5k="


def test_golden_vector_content_and_signature() -> None:
    assert signing_content(GOLDEN_FIELDS) == GOLDEN_CONTENT
    assert request_signature(GOLDEN_FIELDS, b"", "12345678") == GOLDEN_SIGNATURE


def test_our_client_signature_equals_the_golden_one() -> None:
    fields = {k: v for k, v in GOLDEN_FIELDS.items() if k != "AccessKey"}
    signed = sign(request(RequestCode.PULL_MESSAGE, fields), SessionCredentials("RocketMQ", "12345678"))
    assert signed.ext_fields["AccessKey"] == "RocketMQ"
    assert signed.ext_fields["Signature"] == GOLDEN_SIGNATURE
    assert "Signature" not in fields  # the caller's dict is left alone


def test_signature_survives_the_wire_and_covers_the_body() -> None:
    cmd = sign(
        request(RequestCode.SEND_MESSAGE_V2, {"b": "T", "a": "G"}, b"\x00body\xff"),
        SessionCredentials("ak12345", "sk12345"),
    )
    decoder = FrameDecoder()
    decoder.receive_data(encode_command(cmd))
    received = decoder.next_command()
    assert received is not None and signature_matches(received, "sk12345")
    assert not signature_matches(received, "other-secret")
    tampered = request(RequestCode.SEND_MESSAGE_V2, dict(received.ext_fields), b"\x00bodY\xff")
    assert not signature_matches(tampered, "sk12345")


def test_unique_key_query_verifies_with_and_without_the_field() -> None:
    creds = SessionCredentials("ak12345", "sk12345")
    # The Java client signs _UNIQUE_KEY_QUERY; a 4.9.8 broker leaves it out: both contents are accepted.
    java_style = sign(request(RequestCode.QUERY_MESSAGE, {"topic": "T", "_UNIQUE_KEY_QUERY": "true"}), creds)
    assert signature_matches(java_style, "sk12345")
    fields = dict(java_style.ext_fields)
    content = signing_content(fields, frozenset(("Signature", "_UNIQUE_KEY_QUERY")))
    fields["Signature"] = base64.b64encode(hmac.new(b"sk12345", content, hashlib.sha1).digest()).decode()
    assert signature_matches(request(RequestCode.QUERY_MESSAGE, fields), "sk12345")


def test_keys_sort_in_java_utf16_order() -> None:
    # In UTF-16 U+1F600 is the surrogate pair D83D DE00, which sorts before U+FF21 (Java's TreeMap); code points
    # would put it after.
    fields = {"\uff21": "a", "\U0001f600": "b"}
    assert signing_content(fields) == b"ba"


@given(st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=6), st.binary(max_size=64))
def test_any_fields_sign_and_verify(fields: dict[str, str], body: bytes) -> None:
    fields.pop("Signature", None)
    signed = sign(request(RequestCode.HEART_BEAT, fields, body), SessionCredentials("access1", "secret1"))
    assert signature_matches(signed, "secret1")


def test_a_non_ascii_or_missing_signature_is_simply_wrong() -> None:
    base = sign(request(RequestCode.SEND_MESSAGE, {"topic": "T"}), SessionCredentials("ak12345", "sk12345"))
    for bad in ("\x80", "é" * 28, ""):
        fields = {**base.ext_fields, "Signature": bad}
        assert not signature_matches(request(RequestCode.SEND_MESSAGE, fields), "sk12345")
    assert not signature_matches(request(RequestCode.SEND_MESSAGE, {"topic": "T"}), "sk12345")


def _reference_content(fields: dict[str, str], exclude: frozenset[str]) -> bytes:
    """The rule written out plainly: Java's UTF-16 key order, values only, ``exclude`` left out."""
    keys = sorted(fields, key=lambda key: key.encode("utf-16-be"))
    return "".join(fields[key] for key in keys if key not in exclude).encode("utf-8")


@given(st.dictionaries(st.text(max_size=6), st.text(max_size=6), max_size=8), st.binary(max_size=64))
def test_the_remembered_key_order_gives_the_plain_rule_s_content_and_mac(fields: dict[str, str], body: bytes) -> None:
    for exclude in (frozenset(("Signature",)), frozenset(("Signature", "_UNIQUE_KEY_QUERY")), frozenset(("x",))):
        expected = _reference_content(fields, exclude)
        assert signing_content(fields, exclude) == expected
        assert signing_content(dict(reversed(fields.items())), exclude) == expected  # another arrival order
        assert signing_content(fields, exclude) == expected  # now from the remembered order
    mac = hmac.new(b"secret1", _reference_content(fields, frozenset(("Signature",))) + body, hashlib.sha1)
    assert request_signature(fields, body, "secret1") == base64.b64encode(mac.digest()).decode()


def test_more_field_sets_than_the_order_table_holds_still_sign_right() -> None:
    for i in range(_MAX_ORDERS * 2 + 3):
        fields = {f"k{i}": "v", "AccessKey": "ak", f"z{i % 7}": str(i)}
        assert signing_content(fields) == _reference_content(fields, frozenset(("Signature",)))
    assert 0 < len(_ORDERS[frozenset(("Signature",))]) <= _MAX_ORDERS
