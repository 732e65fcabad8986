"""DLedger's RPC objects as plain values, and their JSON bodies (docs/protocol.md#14-dledger-rpc).

Each request travels as a remoting command whose ``code`` is a :class:`~dledger.codes.RequestCode` and whose body is
the object's JSON; the response is a remoting command with code 200 whose body is the response object's JSON, the
DLedger result in its own ``code`` field (``DLedgerRpcNettyService.java`` of DLedger 0.3.1.2). The JSON follows
fastjson's conventions that Java peers produce: camelCase keys, sorted; null fields left out; enums by name; ``byte[]``
as Base64. Java also writes the derived getters of ``PushEntryRequest`` (``batch``, ``count``, ``firstEntryIndex``,
``lastEntryIndex``, ``totalSize``): :func:`encode` writes them too and :func:`decode` ignores them.

Base fields of every object (``RequestOrResponse.java``): ``group``, ``remoteId`` (the receiver), ``localId`` (the
sender), ``leaderId``, ``term`` (-1) and ``code`` (200).

:func:`decode` raises :class:`MessageError` for a body that is not JSON, not an object, or holds a field of the wrong
type, an integer a Java long cannot hold, or a term above :data:`TERM_MAX` (ours); unknown keys are ignored, as
fastjson does.
"""

from __future__ import annotations

import base64
import binascii
import enum
import functools
from typing import Any, Final, TypeVar

import attrs
import orjson

from dledger.codes import PushType, RequestCode, VoteResult
from dledger.entry import CURRENT_MAGIC, HEADER_SIZE, Entry
from dledger.native import entries_module

#: dledger/_entries.c (None: the Python twins below); tests/dledger/test_native_entries.py proves both equal
_native = entries_module()

_M = TypeVar("_M")


class MessageError(ValueError):
    """A JSON body that is not the object it should be."""


@attrs.frozen(kw_only=True)
class Base:
    group: str | None = None
    remote_id: str | None = None
    local_id: str | None = None
    leader_id: str | None = None
    term: int = -1
    code: int = 200


@attrs.frozen(kw_only=True)
class VoteRequest(Base):
    ledger_end_index: int = -1
    ledger_end_term: int = -1


@attrs.frozen(kw_only=True)
class VoteResponse(Base):
    vote_result: VoteResult = VoteResult.UNKNOWN


@attrs.frozen(kw_only=True)
class HeartBeatRequest(Base):
    pass


@attrs.frozen(kw_only=True)
class HeartBeatResponse(Base):
    pass


@attrs.frozen(kw_only=True)
class PushEntryRequest(Base):
    type: PushType = PushType.APPEND
    commit_index: int = -1
    entry: Entry | None = None
    batch_entry: tuple[Entry, ...] = ()

    @property
    def entries(self) -> tuple[Entry, ...]:
        """The pushed entries, batch or single."""
        if self.batch_entry:
            return self.batch_entry
        return () if self.entry is None else (self.entry,)

    @property
    def first_entry_index(self) -> int:
        entries = self.entries
        return entries[0].index if entries else -1

    @property
    def last_entry_index(self) -> int:
        entries = self.entries
        return entries[-1].index if entries else -1

    @property
    def count(self) -> int:
        return len(self.entries)


@attrs.frozen(kw_only=True)
class PushEntryResponse(Base):
    index: int | None = None
    begin_index: int = -1
    end_index: int = -1
    count: int = 0


@attrs.frozen(kw_only=True)
class LeadershipTransferRequest(Base):
    transfer_id: str | None = None
    transferee_id: str | None = None
    take_leadership_ledger_index: int = 0


@attrs.frozen(kw_only=True)
class LeadershipTransferResponse(Base):
    pass


@attrs.frozen(kw_only=True)
class AppendEntryRequest(Base):
    body: bytes | None = None


@attrs.frozen(kw_only=True)
class AppendEntryResponse(Base):
    index: int = -1
    pos: int = -1


@attrs.frozen(kw_only=True)
class MetadataRequest(Base):
    pass


@attrs.frozen(kw_only=True)
class MetadataResponse(Base):
    peers: dict[str, str] | None = None


@attrs.frozen(kw_only=True)
class GetEntriesRequest(Base):
    """DLedger's client ``get(index)``: ``beginIndex`` is the index; ``maxSize`` and ``indexList`` travel but
    ``DLedgerServer.handleGet`` reads neither."""

    begin_index: int | None = None
    max_size: int = 0
    index_list: tuple[int, ...] | None = None


@attrs.frozen(kw_only=True)
class GetEntriesResponse(Base):
    entries: tuple[Entry, ...] = ()


Request = (
    VoteRequest
    | HeartBeatRequest
    | PushEntryRequest
    | LeadershipTransferRequest
    | AppendEntryRequest
    | MetadataRequest
    | GetEntriesRequest
)
Response = (
    VoteResponse
    | HeartBeatResponse
    | PushEntryResponse
    | LeadershipTransferResponse
    | AppendEntryResponse
    | MetadataResponse
    | GetEntriesResponse
)

#: request code -> (request type, response type)
BY_CODE: Final[dict[int, tuple[type[Any], type[Any]]]] = {
    RequestCode.VOTE: (VoteRequest, VoteResponse),
    RequestCode.HEART_BEAT: (HeartBeatRequest, HeartBeatResponse),
    RequestCode.PUSH: (PushEntryRequest, PushEntryResponse),
    RequestCode.LEADERSHIP_TRANSFER: (LeadershipTransferRequest, LeadershipTransferResponse),
    RequestCode.APPEND: (AppendEntryRequest, AppendEntryResponse),
    RequestCode.METADATA: (MetadataRequest, MetadataResponse),
    RequestCode.GET: (GetEntriesRequest, GetEntriesResponse),
}
CODE_OF: Final[dict[type[Any], RequestCode]] = {req: RequestCode(code) for code, (req, _) in BY_CODE.items()}


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


_KEYS: Final[dict[str, str]] = {}


def _key(name: str) -> str:
    key = _KEYS.get(name)
    if key is None:
        key = _KEYS[name] = _camel(name)
    return key


def _entry_json(entry: Entry) -> dict[str, Any]:
    return {
        "body": base64.b64encode(entry.body).decode("ascii"),
        "bodyCrc": entry.body_crc,
        "chainCrc": entry.chain_crc,
        "channel": entry.channel,
        "index": entry.index,
        "magic": entry.magic,
        "pos": entry.pos,
        "size": entry.size,
        "term": entry.term,
    }


def _value_json(value: Any) -> Any:
    if isinstance(value, enum.IntEnum):
        return int(value)
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, Entry):
        return _entry_json(value)
    if isinstance(value, tuple):
        return [_value_json(v) for v in value]
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    return value


#: per message class: ``(attribute, JSON key, whether the value needs _value_json)``, in field order
_FIELDS: dict[type[Any], list[tuple[str, str, bool]]] = {}
_PLAIN_TYPES: Final = frozenset({"int", "str | None", "int | None"})


def _fields(cls: type[Any]) -> list[tuple[str, str, bool]]:
    table = _FIELDS.get(cls)
    if table is None:
        table = _FIELDS[cls] = [(f.name, _key(f.name), str(f.type) not in _PLAIN_TYPES) for f in attrs.fields(cls)]
    return table


def to_json_dict(message: Base) -> dict[str, Any]:
    """The fastjson-shaped dict of ``message`` (nulls dropped; derived push getters added)."""
    out: dict[str, Any] = {}
    for name, key, convert in _fields(type(message)):
        value = getattr(message, name)
        if value is not None:
            out[key] = _value_json(value) if convert else value
    if isinstance(message, PushEntryRequest):
        out["batch"] = bool(message.batch_entry)
        out["count"] = message.count
        out["firstEntryIndex"] = message.first_entry_index
        out["lastEntryIndex"] = message.last_entry_index
        out["totalSize"] = sum(e.size for e in message.batch_entry)
    return out


def encode(message: Base) -> bytes:
    """The JSON body of ``message``, keys sorted as fastjson writes them."""
    if type(message) is PushEntryRequest:
        return encode_push(message)
    if type(message) is PushEntryResponse:
        return encode_push_response(message)
    return orjson.dumps(to_json_dict(message), option=orjson.OPT_SORT_KEYS)


#: the JSON of the entries :func:`encode_push` wrote lately, by index: ``(entry, its sorted JSON)`` (a leader pushes
#: each entry to every follower; the entry itself is checked, so another member's entry at that index is not taken).
#: Only bodies up to :data:`PUSHED_JSON_BODY_MAX` are kept, at most 4,096 of them (their JSON about 45 MB at that size).
_pushed_json: dict[int, tuple[Entry, bytes]] = {}
_PUSHED_JSON_MAX = 4096
#: the largest body whose JSON :func:`encode_push` keeps (the leader keeps such entries at hand for the pushes too:
#: ``RECENT_BODY_MAX`` in dledger/node.py; a larger one is read from the file for each follower, a new object each time)
PUSHED_JSON_BODY_MAX: Final = 8192


def _entry_bytes(entry: Entry) -> bytes:
    """``entry``'s JSON object, made once for all the pushes it goes in (a small one; a large one each time)."""
    cached = _pushed_json.get(entry.index)
    if cached is not None and cached[0] is entry:
        return cached[1]
    data = orjson.dumps(_entry_json(entry), option=orjson.OPT_SORT_KEYS)
    if len(entry.body) <= PUSHED_JSON_BODY_MAX:
        if len(_pushed_json) >= _PUSHED_JSON_MAX:
            _pushed_json.clear()
        _pushed_json[entry.index] = entry, data
    return data


@functools.lru_cache(maxsize=64)
def _names_json(group: str | None, leader_id: str | None, local_id: str | None, remote_id: str | None
                ) -> tuple[bytes, bytes]:  # fmt: skip
    """A push's ``group`` member and its ``leaderId``, ``localId`` and ``remoteId`` members, each with its leading
    comma, or empty when null (a dispatcher sends the same four on every push)."""
    group_json = b"" if group is None else b',"group":' + orjson.dumps(group)
    named = ((b"leaderId", leader_id), (b"localId", local_id), (b"remoteId", remote_id))
    return group_json, b"".join(b',"%s":%s' % (key, orjson.dumps(value)) for key, value in named if value is not None)


#: a push's JSON with its keys in sorted order (orjson's compact form), the variable parts as ``%`` fields
_PUSH_JSON: Final = (
    b'{"batch":%s,"batchEntry":[%s],"code":%d,"commitIndex":%d,"count":%d%s,"firstEntryIndex":%d%s,'
    b'"lastEntryIndex":%d%s,"term":%d,"totalSize":%d,"type":"%s"}'
)


def encode_push(message: PushEntryRequest) -> bytes:
    """``orjson.dumps(to_json_dict(message), sorted)`` for a push, from a byte template (the leader's per-entry
    request; tests/dledger/test_wire.py proves the bytes equal): in C when built (``push_json``), else each entry's
    JSON made once for all the followers it goes to (:func:`_entry_bytes`)."""
    group_json, names_json = _names_json(message.group, message.leader_id, message.local_id, message.remote_id)
    if _native is not None:
        whole: bytes | None = _native.push_json(message, group_json, names_json)
        if whole is not None:
            return whole
    entry, batch = message.entry, message.batch_entry
    entries = batch or (() if entry is None else (entry,))
    return _PUSH_JSON % (
        b"true" if batch else b"false", b",".join([_entry_bytes(e) for e in batch]), message.code,
        message.commit_index, len(entries), b"" if entry is None else b',"entry":' + _entry_bytes(entry),
        entries[0].index if entries else -1, group_json, entries[-1].index if entries else -1, names_json,
        message.term, sum([e.size for e in batch]) if batch else 0, message.type.name.encode(),
    )  # fmt: skip


#: a push answer's JSON, as :data:`_PUSH_JSON` for a push
_PUSH_RESPONSE_JSON: Final = b'{"beginIndex":%d,"code":%d,"count":%d,"endIndex":%d%s%s%s,"term":%d}'


def encode_push_response(message: PushEntryResponse) -> bytes:
    """``orjson.dumps(to_json_dict(message), sorted)`` for a push answer (a follower's per-push answer), from a byte
    template (tests/dledger/test_wire.py proves the bytes equal)."""
    group_json, names_json = _names_json(message.group, message.leader_id, message.local_id, message.remote_id)
    index = message.index
    return _PUSH_RESPONSE_JSON % (
        message.begin_index, message.code, message.count, message.end_index, group_json,
        b"" if index is None else b',"index":%d' % index, names_json, message.term,
    )  # fmt: skip


#: Java's long; every integer field of a message is one (or narrower)
_I32, _I64 = 1 << 31, 1 << 63
#: Ours: the highest term a message may carry. Java would take up to its long's top and overflow on the next
#: election; a term this high leaves room for 2^62 more elections, so only a hostile peer sends one.
TERM_MAX: Final = (1 << 62) - 1


def _int(value: Any, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise MessageError(f"{key}: expected an integer, got {value!r}")
    if not -_I64 <= value < _I64:
        raise MessageError(f"{key}: {value} does not fit a Java long")
    return value


def _term(value: Any, key: str) -> int:
    term = _int(value, key)
    if term > TERM_MAX:
        raise MessageError(f"{key}: term {term} is above {TERM_MAX}")
    return term


def _str(value: Any, key: str) -> str:
    if not isinstance(value, str):
        raise MessageError(f"{key}: expected a string, got {value!r}")
    return value


def _bytes(value: Any, key: str) -> bytes:
    return _base64(_str(value, key), key)


#: an entry's integer fields in the order Entry takes them after the body, with their defaults and their bits on
#: disk (dledger/entry.py: a value that does not fit its field is refused here, not by the ledger's struct.pack)
_ENTRY_INTS: Final = (("index", -1, 64), ("term", -1, 64), ("pos", -1, 64), ("magic", CURRENT_MAGIC, 32),
                      ("channel", 0, 32), ("chainCrc", 0, 32), ("bodyCrc", 0, 32))  # fmt: skip


def _entry(value: Any, key: str) -> Entry:
    """An entry object: the usual one (a Base64 string and ints) read straight, anything else by
    :func:`_checked_entry`, which gives the error."""
    if type(value) is not dict:
        return _checked_entry(value, key)
    get = value.get
    body, index, term, pos = get("body", ""), get("index", -1), get("term", -1), get("pos", -1)
    magic, channel = get("magic", CURRENT_MAGIC), get("channel", 0)
    chain_crc, crc = get("chainCrc", 0), get("bodyCrc", 0)
    size = get("size")
    if not (type(body) is str and type(index) is int and type(term) is int and type(pos) is int
            and type(magic) is int and type(channel) is int and type(chain_crc) is int and type(crc) is int
            and (size is None or type(size) is int) and -_I64 <= index < _I64 and -_I64 <= term < _I64
            and -_I64 <= pos < _I64 and -_I32 <= magic < _I32 and -_I32 <= channel < _I32
            and -_I32 <= chain_crc < _I32 and -_I32 <= crc < _I32):  # fmt: skip
        return _checked_entry(value, key)
    try:
        data = binascii.a2b_base64(body, strict_mode=True)
    except ValueError:
        return _checked_entry(value, key)
    if size is not None and size != HEADER_SIZE + len(data):
        return _checked_entry(value, key)
    return Entry(index, term, pos, data, magic, channel, chain_crc, crc)


def _checked_entry(value: Any, key: str) -> Entry:
    if not isinstance(value, dict):
        raise MessageError(f"{key}: expected an entry object")
    body = value.get("body", "")
    body = _bytes(body, f"{key}.body") if type(body) is not str else _base64(body, f"{key}.body")
    get = value.get
    ints = [get(name, default) for name, default, _ in _ENTRY_INTS]
    for (name, _, bits), number in zip(_ENTRY_INTS, ints, strict=True):
        if type(number) is not int:
            _int(number, f"{key}.{name}")
        if not -(1 << bits - 1) <= number < 1 << bits - 1:
            raise MessageError(f"{key}.{name}: {number} does not fit {bits} bits")
    index, term, pos, magic, channel, chain_crc, crc = ints
    entry = Entry(index, term, pos, body, magic, channel, chain_crc, crc)
    size = get("size")
    if size is not None and _int(size, f"{key}.size") != entry.size:
        raise MessageError(f"{key}: size {size} but the body makes {entry.size}")
    return entry


def _base64(text: str, key: str) -> bytes:
    """Strict Base64 (``binascii.Error``), ASCII only (a ``ValueError`` of its own): either is a MessageError."""
    try:
        return binascii.a2b_base64(text, strict_mode=True)
    except ValueError as exc:
        raise MessageError(f"{key}: not Base64") from exc


def _vote_result(value: Any, key: str) -> VoteResult:
    try:
        return VoteResult[_str(value, key)]
    except KeyError as exc:
        raise MessageError(f"{key}: unknown vote result {value!r}") from exc


def _push_type(value: Any, key: str) -> PushType:
    try:
        return PushType[_str(value, key)]
    except KeyError as exc:
        raise MessageError(f"{key}: unknown push type {value!r}") from exc


def _entries(value: Any, key: str) -> tuple[Entry, ...]:
    """A list of entry objects: in C when every one has the usual shape (``decode_entries``), else here."""
    if _native is not None:
        entries: tuple[Entry, ...] | None = _native.decode_entries(Entry, value)
        if entries is not None:
            return entries
    return _python_entries(value, key)


def _python_entries(value: Any, key: str) -> tuple[Entry, ...]:
    """:func:`_entries`' Python twin."""
    if not isinstance(value, list):
        raise MessageError(f"{key}: expected a list")
    return tuple(_entry(v, f"{key}[{i}]") for i, v in enumerate(value))


def _push_entry(value: Any) -> Entry:
    """A push's single entry: in C when it has the usual shape, else :func:`_entry`."""
    if _native is not None:
        entries: tuple[Entry, ...] | None = _native.decode_entries(Entry, [value])
        if entries is not None:
            return entries[0]
    return _entry(value, "entry")


def _longs(value: Any, key: str) -> tuple[int, ...]:
    if not isinstance(value, list):
        raise MessageError(f"{key}: expected a list")
    return tuple(_int(v, f"{key}[{i}]") for i, v in enumerate(value))


def _peers(value: Any, key: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise MessageError(f"{key}: expected an object of strings")
    return dict(value)


_CONVERTERS: Final[dict[str, Any]] = {
    "vote_result": _vote_result, "type": _push_type, "entry": _entry, "batch_entry": _entries, "body": _bytes,
    "entries": _entries, "index_list": _longs,
    "term": _term, "ledger_end_term": _term,
    "peers": _peers, "group": _str, "remote_id": _str, "local_id": _str, "leader_id": _str, "transfer_id": _str,
    "transferee_id": _str,
}  # fmt: skip
#: per message class: ``(attribute, JSON key, converter)`` (the kind of each field is known from its name)
_DECODERS: dict[type[Any], list[tuple[str, str, Any]]] = {}


def _field_value(name: str, value: Any, key: str) -> Any:
    """Decode one JSON value for the attrs field ``name``."""
    return _CONVERTERS.get(name, _int)(value, key)


def _object(body: bytes | memoryview) -> dict[str, Any]:
    try:
        data = orjson.loads(bytes(body) if isinstance(body, memoryview) else body)
    except orjson.JSONDecodeError as exc:
        raise MessageError(f"not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise MessageError("expected a JSON object")
    return data


def decode(cls: type[_M], body: bytes | memoryview) -> _M:
    """Parse a JSON body into ``cls`` (one of this module's classes). Raises MessageError."""
    if cls is PushEntryResponse:
        return decode_push_response(body)  # type: ignore[return-value]
    return _from_dict(cls, _object(body))


def decode_push_response(body: bytes | memoryview) -> PushEntryResponse:
    """``decode(PushEntryResponse, body)`` without the general table (the leader reads one per follower and entry
    with the default push): the usual answer's fields type-checked and taken straight (in C when built:
    ``push_answer``); any field of another shape goes the general way, which raises for it."""
    data = _object(body)
    if _native is not None:
        answer: PushEntryResponse | None = _native.push_answer(PushEntryResponse, data)
        if answer is not None:
            return answer
    get = data.get
    group, remote_id, local_id, leader_id = get("group"), get("remoteId"), get("localId"), get("leaderId")
    term, code, index = get("term"), get("code"), get("index")
    begin, end, count = get("beginIndex"), get("endIndex"), get("count")
    if not (
        (group is None or type(group) is str) and (remote_id is None or type(remote_id) is str)
        and (local_id is None or type(local_id) is str) and (leader_id is None or type(leader_id) is str)
        and (term is None or (type(term) is int and -_I64 <= term <= TERM_MAX))
        and (code is None or (type(code) is int and -_I64 <= code < _I64))
        and (index is None or (type(index) is int and -_I64 <= index < _I64))
        and (begin is None or (type(begin) is int and -_I64 <= begin < _I64))
        and (end is None or (type(end) is int and -_I64 <= end < _I64))
        and (count is None or (type(count) is int and -_I64 <= count < _I64))
    ):  # fmt: skip
        return _from_dict(PushEntryResponse, data)
    return PushEntryResponse(
        group=group, remote_id=remote_id, local_id=local_id, leader_id=leader_id,
        term=-1 if term is None else term, code=200 if code is None else code, index=index,
        begin_index=-1 if begin is None else begin, end_index=-1 if end is None else end,
        count=0 if count is None else count,
    )  # fmt: skip


_PUSH_TYPES: Final = {t.name: t for t in PushType}


def decode_push(body: bytes | memoryview) -> PushEntryRequest:
    """``decode(PushEntryRequest, body)`` (the same request, or MessageError for the same bodies), with the fields
    of the usual push read straight (in C when built: ``push_request``); any field of another shape goes the general
    way, which raises for it."""
    data = _object(body)
    if _native is not None:
        request: PushEntryRequest | None = _native.push_request(PushEntryRequest, Entry, _PUSH_TYPES, data)
        if request is not None:
            return request
    get = data.get
    group, remote_id, local_id, leader_id = get("group"), get("remoteId"), get("localId"), get("leaderId")
    term, code, commit_index, kind = get("term"), get("code"), get("commitIndex"), get("type")
    if not (
        (group is None or type(group) is str)
        and (remote_id is None or type(remote_id) is str)
        and (local_id is None or type(local_id) is str)
        and (leader_id is None or type(leader_id) is str)
        and (term is None or (type(term) is int and -_I64 <= term <= TERM_MAX))
        and (code is None or (type(code) is int and -_I64 <= code < _I64))
        and (commit_index is None or (type(commit_index) is int and -_I64 <= commit_index < _I64))
        and (kind is None or (type(kind) is str and kind in _PUSH_TYPES))
    ):
        return _from_dict(PushEntryRequest, data)
    entry, batch = get("entry"), get("batchEntry")
    return PushEntryRequest(
        group=group, remote_id=remote_id, local_id=local_id, leader_id=leader_id,
        term=-1 if term is None else term, code=200 if code is None else code,
        type=PushType.APPEND if kind is None else _PUSH_TYPES[kind],
        commit_index=-1 if commit_index is None else commit_index,
        entry=None if entry is None else _push_entry(entry),
        batch_entry=() if batch is None else _entries(batch, "batchEntry"),
    )  # fmt: skip


def _from_dict(cls: type[_M], data: dict[str, Any]) -> _M:
    table = _DECODERS.get(cls)
    if table is None:
        fields = attrs.fields(cls)  # type: ignore[arg-type]
        table = _DECODERS[cls] = [(f.name, _key(f.name), _CONVERTERS.get(f.name, _int)) for f in fields]
    values: dict[str, Any] = {}
    get = data.get
    for name, key, convert in table:
        value = get(key)
        if value is None:
            continue
        # An int or a string where one is wanted is taken as it is (most fields of every answer; no call).
        if (convert is _int and type(value) is int and -_I64 <= value < _I64) or (
            convert is _str and type(value) is str
        ):
            values[name] = value
        else:
            values[name] = convert(value, key)
    return cls(**values)
