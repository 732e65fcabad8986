"""DLedger's JSON bodies (dledger/messages.py) as fastjson writes them: camelCase keys sorted, nulls left out, enums
by name, byte[] as Base64, PushEntryRequest's derived getters; and what a malformed body does."""

from __future__ import annotations

import attrs
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dledger import messages
from dledger.codes import PushType, RequestCode, ResponseCode, VoteResult
from dledger.entry import Entry
from dledger.messages import (
    BY_CODE,
    GetEntriesRequest,
    GetEntriesResponse,
    HeartBeatRequest,
    HeartBeatResponse,
    MessageError,
    PushEntryRequest,
    PushEntryResponse,
    VoteRequest,
    VoteResponse,
    decode,
    decode_push,
    decode_push_response,
    encode,
    encode_push,
    encode_push_response,
    to_json_dict,
)
from dledger.server import answer_frame
from remoting.codec.command import RemotingCommand
from remoting.codec.frame import encode_command


def test_request_and_response_codes_are_dledgers() -> None:
    assert {c.name: c.value for c in RequestCode} == {
        "METADATA": 50000, "APPEND": 50001, "GET": 50002, "VOTE": 51001, "HEART_BEAT": 51002, "PULL": 51003,
        "PUSH": 51004, "LEADERSHIP_TRANSFER": 51005,
    }  # fmt: skip
    assert (ResponseCode.INCONSISTENT_STATE, ResponseCode.WAIT_QUORUM_ACK_TIMEOUT) == (406, 502)
    assert set(BY_CODE) == {50000, 50001, 50002, 51001, 51002, 51004, 51005}


def test_a_get_and_its_answer_are_the_json_dledgers_client_and_server_write() -> None:
    """``GetEntriesRequest`` / ``GetEntriesResponse`` (dledger/src/main/java/io/openmessaging/storage/dledger/
    protocol/, 0.3.2): the answer's ``entries`` is always written, empty on a refusal (Java's field starts as an
    empty list and fastjson writes empty lists)."""
    asked = b'{"beginIndex":7,"code":200,"group":"g","indexList":[1,2],"maxSize":0,"remoteId":"n0","term":-1}'
    assert decode(GetEntriesRequest, asked) == GetEntriesRequest(group="g", remote_id="n0", begin_index=7,
                                                                 index_list=(1, 2))  # fmt: skip
    assert decode(GetEntriesRequest, b'{"group":"g"}').begin_index is None
    entry = Entry(7, 2, 4096, b"\x00\x00\x01", body_crc=5)
    assert encode(GetEntriesResponse(group="g", entries=(entry,))) == (
        b'{"code":200,"entries":[{"body":"AAAB","bodyCrc":5,"chainCrc":0,"channel":0,"index":7,"magic":1,'
        b'"pos":4096,"size":51,"term":2}],"group":"g","term":-1}'
    )
    assert decode(GetEntriesResponse, encode(GetEntriesResponse(group="g", entries=(entry,)))).entries == (entry,)
    assert encode(GetEntriesResponse(group="g", code=410)) == b'{"code":410,"entries":[],"group":"g","term":-1}'


def test_an_append_push_is_the_json_a_java_leader_sends() -> None:
    entry = Entry(42, 3, 1048576, b"\x00\x00\x01", body_crc=7)
    request = PushEntryRequest(group="RaftNode00", remote_id="n1", local_id="n0", leader_id="n0", term=3,
                               type=PushType.APPEND, commit_index=41, entry=entry)  # fmt: skip
    body = encode(request)
    assert body == (
        b'{"batch":false,"batchEntry":[],"code":200,"commitIndex":41,"count":1,"entry":{"body":"AAAB","bodyCrc":7,'
        b'"chainCrc":0,"channel":0,"index":42,"magic":1,"pos":1048576,"size":51,"term":3},"firstEntryIndex":42,'
        b'"group":"RaftNode00","lastEntryIndex":42,"leaderId":"n0","localId":"n0","remoteId":"n1","term":3,'
        b'"totalSize":0,"type":"APPEND"}'
    )
    assert decode(PushEntryRequest, body) == request


def test_nulls_are_left_out_and_enums_travel_by_name() -> None:
    assert encode(HeartBeatResponse()) == b'{"code":200,"term":-1}'
    vote = VoteResponse(group="g", remote_id="n1", local_id="n0", leader_id="n0", term=5,
                        vote_result=VoteResult.REJECT_TERM_NOT_READY)  # fmt: skip
    assert orjson.loads(encode(vote))["voteResult"] == "REJECT_TERM_NOT_READY"
    assert decode(VoteResponse, encode(vote)) == vote
    commit = PushEntryResponse(group="g", term=2, begin_index=0, end_index=9, code=ResponseCode.NOT_FOLLOWER)
    assert "index" not in orjson.loads(encode(commit))
    assert orjson.loads(encode(commit))["code"] == 405  # a result code is a number, not a name


def test_unknown_keys_are_ignored_and_missing_ones_take_dledgers_defaults() -> None:
    request = decode(VoteRequest, b'{"group":"g","remoteId":"n1","someFutureField":[1,2],"term":4}')
    assert (request.term, request.ledger_end_index, request.ledger_end_term, request.code) == (4, -1, -1, 200)


@pytest.mark.parametrize(
    ("kind", "body"),
    [
        (VoteRequest, b"not json"),
        (VoteRequest, b"[1, 2]"),
        (VoteRequest, b'{"term": "four"}'),
        (VoteRequest, b'{"term": true}'),
        (VoteRequest, b'{"ledgerEndIndex": 9223372036854775808}'),  # past a Java long
        (VoteRequest, b'{"ledgerEndTerm": 4611686018427387904}'),  # past TERM_MAX
        (HeartBeatRequest, b'{"term": 4611686018427387904}'),
        (VoteResponse, b'{"term": 9223372036854775807}'),
        (VoteResponse, b'{"voteResult": "MAYBE"}'),
        (PushEntryRequest, b'{"type": "DELETE"}'),
        (PushEntryRequest, b'{"entry": {"body": "***"}}'),
        (PushEntryRequest, b'{"entry": {"body": "AAAB", "size": 99}}'),
        (PushEntryRequest, b'{"batchEntry": {"index": 1}}'),
        (GetEntriesRequest, b'{"beginIndex": "7"}'),
        (GetEntriesRequest, b'{"indexList": [1, "2"]}'),
        (GetEntriesRequest, b'{"indexList": 3}'),
    ],
)
def test_a_malformed_body_raises_message_error(kind: type, body: bytes) -> None:
    with pytest.raises(MessageError):
        decode(kind, body)


@given(st.integers(-(2**31), 2**31 - 1), st.binary(max_size=200))
def test_an_answer_framed_from_the_template_is_the_frame_of_its_command(opaque: int, body: bytes) -> None:
    """Answers to pushes taken in the reader (``DLedgerServer.fast_push``) are the bytes the general path sends."""
    request = RemotingCommand(RequestCode.PUSH, opaque, body=b"{}")
    assert answer_frame(opaque, body) == encode_command(request.response(200, body=body))


_ENTRIES = st.builds(
    Entry,
    st.integers(0, 2**62),
    st.integers(0, 2**40),
    st.integers(0, 2**62),
    st.binary(max_size=300),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**31), 2**31 - 1),
)


@given(st.lists(_ENTRIES, max_size=5), st.booleans(), st.integers(-1, 2**40))
def test_a_push_decodes_to_the_request_that_was_encoded_every_field_included(
    entries: list[Entry], batch: bool, commit: int
) -> None:
    request = PushEntryRequest(group="g", remote_id="n1", local_id="n0", leader_id="n0", term=4,
                               type=PushType.APPEND, commit_index=commit,
                               entry=None if batch or not entries else entries[0],
                               batch_entry=tuple(entries) if batch else ())  # fmt: skip
    decoded = decode(PushEntryRequest, encode(request))
    assert decoded == request
    fields = ("index", "term", "pos", "body", "magic", "channel", "chain_crc", "body_crc")
    assert [[getattr(e, f) for f in fields] for e in decoded.entries] == [
        [getattr(e, f) for f in fields] for e in request.entries
    ]


_JSON_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1), st.text(max_size=6),
    st.sampled_from(["APPEND", "COMMIT", "COMPARE", "TRUNCATE", "append", "AQ==", "!", "\u00e9Q=="]), st.just([]),
    st.just({}),
)  # fmt: skip
_ENTRY_JSON = st.one_of(
    _ENTRIES.map(lambda e: orjson.loads(encode(PushEntryRequest(entry=e)))["entry"]),
    st.dictionaries(st.sampled_from(["body", "index", "size", "term", "pos", "magic"]), _JSON_VALUES, max_size=4),
    _JSON_VALUES,
)
_PUSH_KEYS = ["group", "remoteId", "localId", "leaderId", "term", "code", "type", "commitIndex", "count", "batch"]


@given(
    st.dictionaries(st.sampled_from(_PUSH_KEYS), _JSON_VALUES),
    st.one_of(st.none(), _ENTRY_JSON),
    st.one_of(st.none(), st.lists(_ENTRY_JSON, max_size=3), _JSON_VALUES),
)
def test_the_push_decoder_gives_what_the_general_decoder_gives(fields: dict[str, object], entry: object,
                                                               batch: object) -> None:  # fmt: skip
    """The fast path of a follower's pushes: the same request for every body, the same error for a bad one."""
    body = orjson.dumps(fields | ({"entry": entry} if entry is not None else {}) | (
        {"batchEntry": batch} if batch is not None else {}))  # fmt: skip
    outcomes = []
    for parse in (decode_push, lambda b: decode(PushEntryRequest, b)):
        try:
            outcomes.append(parse(body))
        except MessageError as exc:
            outcomes.append(str(exc))
    assert outcomes[0] == outcomes[1]
    first, second = outcomes
    if isinstance(first, PushEntryRequest) and isinstance(second, PushEntryRequest):
        assert [(e.chain_crc, e.body_crc) for e in first.entries] == [(e.chain_crc, e.body_crc) for e in second.entries]
    non_ascii = b'{"batchEntry":[{"body":"\xc3\xa9Q=="}]}'  # Base64's check wants ASCII: a ValueError of its own
    wide = [
        b'{"entry":{"magic":2147483648}}',
        b'{"batchEntry":[{"pos":9223372036854775808}]}',  # the header's fields
        b'{"term":4611686018427387904}',
        b'{"commitIndex":-9223372036854775809}',
        b'{"code":18446744073709551615}',
    ]
    for bad in (b"[1]", b"{", memoryview(b"nope"), non_ascii, *wide):
        with pytest.raises(MessageError):
            decode_push(bad)


@given(
    st.lists(_ENTRIES, max_size=4),
    st.booleans(),
    st.sampled_from(list(PushType)),
    st.one_of(st.none(), st.text(max_size=5)),
    st.integers(-(2**40), 2**40),
    st.integers(-1, 2**40),
    st.integers(-(2**31), 2**31 - 1),
)
def test_the_push_encoder_writes_the_general_encoders_bytes(
    entries: list[Entry], batch: bool, kind: PushType, name: str | None, term: int, commit: int, code: int
) -> None:
    """The leader's per-entry requests, written from the push template, are the bytes of the general encoder; an
    entry pushed to a second follower is written the same from the first one's JSON."""
    request = PushEntryRequest(group=name, remote_id="n1", local_id=name, leader_id="n0", term=term, type=kind,
                               code=code, commit_index=commit, entry=None if batch or not entries else entries[0],
                               batch_entry=tuple(entries) if batch else ())  # fmt: skip
    general = orjson.dumps(to_json_dict(request), option=orjson.OPT_SORT_KEYS)
    assert encode_push(request) == general == encode(request)
    assert encode_push(attrs.evolve(request, remote_id="n2")) == orjson.dumps(
        to_json_dict(attrs.evolve(request, remote_id="n2")), option=orjson.OPT_SORT_KEYS
    )


def test_a_second_entry_at_a_pushed_index_is_written_from_its_own_fields() -> None:
    """The encoder keeps each pushed entry's JSON by index for the next follower; a member that truncated and wrote
    another entry at that index (or another member in the same process) must not get the first one's."""
    first, other = Entry(7, 1, 0, b"first"), Entry(7, 2, 0, b"other")
    for entry in (first, other, first):
        request = PushEntryRequest(group="g", remote_id="n1", local_id="n0", leader_id="n0", term=2,
                                   type=PushType.APPEND, commit_index=6, batch_entry=(entry,))  # fmt: skip
        assert encode_push(request) == orjson.dumps(to_json_dict(request), option=orjson.OPT_SORT_KEYS)


_NAMES = st.one_of(st.none(), st.text(max_size=5))
_INTS = st.integers(-(2**40), 2**40)


@given(_NAMES, _NAMES, _NAMES, _NAMES, _INTS, st.integers(-(2**31), 2**31 - 1), st.one_of(st.none(), _INTS), _INTS,
       _INTS, _INTS)  # fmt: skip
def test_the_push_answer_encoder_writes_the_general_encoders_bytes(
    group: str | None, remote: str | None, local: str | None, leader: str | None, term: int, code: int,
    index: int | None, begin: int, end: int, count: int,
) -> None:  # fmt: skip
    """A follower's answer to a push, from its byte template, is the general encoder's JSON, and decodes back."""
    response = PushEntryResponse(group=group, remote_id=remote, local_id=local, leader_id=leader, term=term,
                                 code=code, index=index, begin_index=begin, end_index=end, count=count)  # fmt: skip
    general = orjson.dumps(to_json_dict(response), option=orjson.OPT_SORT_KEYS)
    assert encode_push_response(response) == general == encode(response)
    assert decode(PushEntryResponse, general) == response


_ANSWER_KEYS = ["group", "remoteId", "localId", "leaderId", "term", "code", "index", "beginIndex", "endIndex", "count"]


@given(st.dictionaries(st.sampled_from(_ANSWER_KEYS), _JSON_VALUES))
def test_the_push_answer_decoder_gives_what_the_general_decoder_gives(fields: dict[str, object]) -> None:
    """The leader's fast path for its followers' answers: the same answer for every body, the same error for a bad
    one (a term above TERM_MAX, an integer past a Java long, a string where an integer goes, ...)."""
    body = orjson.dumps(fields)
    outcomes = []
    for parse in (decode_push_response, lambda b: messages._from_dict(PushEntryResponse, orjson.loads(b))):
        try:
            outcomes.append(parse(body))
        except MessageError as exc:
            outcomes.append(str(exc))
    assert outcomes[0] == outcomes[1]
    if isinstance(outcomes[0], PushEntryResponse):
        assert decode(PushEntryResponse, body) == outcomes[0]
    for bad in (b"[1]", b"{", memoryview(b"nope"), b'{"term":4611686018427387904}', b'{"index":true}'):
        with pytest.raises(MessageError):
            decode_push_response(bad)


def test_a_push_answer_from_a_follower_decodes_field_by_field() -> None:
    """A follower's usual answer, as a Java follower writes it, read by the fast path."""
    body = b'{"beginIndex":-1,"code":200,"count":0,"endIndex":-1,"group":"g","index":7,"leaderId":"n0",'
    body += b'"localId":"n1","remoteId":"n0","term":3}'
    assert decode_push_response(memoryview(body)) == PushEntryResponse(
        group="g", remote_id="n0", local_id="n1", leader_id="n0", term=3, code=200, index=7
    )


def test_only_small_entries_have_their_json_kept_for_the_next_follower(monkeypatch: pytest.MonkeyPatch) -> None:
    """A large entry is read from the file for each follower (a new object each time): keeping its JSON would hold
    up to 4,096 of them for nothing. (The Python twin's cache: dledger/_entries.c keeps nothing.)"""
    monkeypatch.setattr(messages, "_native", None)
    messages._pushed_json.clear()
    for index, size in ((1, messages.PUSHED_JSON_BODY_MAX), (2, messages.PUSHED_JSON_BODY_MAX + 1)):
        entry = Entry(index, 1, 0, bytes(size))
        request = PushEntryRequest(group="g", remote_id="n1", term=1, type=PushType.APPEND, entry=entry)
        assert encode_push(request) == orjson.dumps(to_json_dict(request), option=orjson.OPT_SORT_KEYS)
    assert set(messages._pushed_json) == {1}
