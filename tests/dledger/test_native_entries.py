"""dledger/_entries.c against its Python twins: a leader's push encoding (dledger/messages.py), a follower's push
decode (dledger/messages.py) and its write of the pushed entries (dledger/file_store.py): the same bytes, the same
values, the same errors, for every input hypothesis makes (malformed ones included)."""

from __future__ import annotations

import base64
import importlib.util
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import attrs
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dledger import file_store, messages
from dledger.codes import PushType
from dledger.config import DLedgerConfig
from dledger.entry import Entry, place
from dledger.file_store import FileLedger
from dledger.ledger import LedgerError
from dledger.native import entries_module
from remoting.codec.message import MessageRecord
from remoting.codec.record_batch import encode_record_into
from store import mapped_file


def _entries_built() -> object:
    return importlib.util.find_spec("dledger._entries")


native = entries_module()
if _entries_built() is None and os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
    raise RuntimeError("dledger._entries is not built: CI has a compiler, `pip install -e .` must build it")
pytestmark = pytest.mark.skipif(native is None, reason="dledger._entries not built, or ROCKETRIO_PURE_PYTHON=1")

DATA_SIZE = 512
INDEX_SIZE = 32 * 8
_I32 = st.integers(-(2**31), 2**31 - 1)
_WIDE = st.one_of(st.integers(-(2**63), 2**63 - 1), st.integers(-(2**70), 2**70), st.booleans())
_ENTRIES = st.builds(
    Entry, st.integers(-(2**63), 2**63 - 1), st.integers(-(2**63), 2**63 - 1), st.integers(-(2**63), 2**63 - 1),
    st.binary(max_size=40), _I32, _I32, _I32, _I32,
)  # fmt: skip
_ODD_ENTRIES = st.builds(Entry, _WIDE, _WIDE, _WIDE, st.binary(max_size=10), _WIDE, _WIDE, _WIDE, _WIDE)


def _plain(value: object) -> bool:
    return type(value) is int and -(2**63) <= value < 2**63


def _python_push(request: messages.PushEntryRequest) -> bytes | str:
    """The push body the Python twin writes (orjson's, as tests/dledger/test_wire.py proves), or its error's name."""
    saved = messages._native
    messages._native = None
    try:
        return messages.encode_push(request)
    except (TypeError, orjson.JSONEncodeError) as exc:
        return type(exc).__name__
    finally:
        messages._native = saved


@given(
    st.lists(st.one_of(_ENTRIES, _ODD_ENTRIES), max_size=3),
    st.one_of(st.none(), _ENTRIES, _ODD_ENTRIES),
    st.sampled_from(list(PushType)),
    st.one_of(st.none(), st.text(max_size=3)),
    _WIDE,
    _WIDE,
    _WIDE,
)
def test_the_push_body_is_the_python_twins_bytes_or_left_to_it(
    batch: list[Entry], entry: Entry | None, kind: PushType, group: str | None, term: object, code: object,
    commit: object,
) -> None:  # fmt: skip
    """``push_json`` writes the Python twin's bytes for every push it takes, batch or single entry or none, and
    leaves to the twin (None) only pushes with a field that is not a plain int within a Java long (a bool, a wider
    int), in the request or in an entry."""
    request = messages.PushEntryRequest(group=group, remote_id="n1", local_id="n0", leader_id="n0", term=term,
                                        code=code, type=kind, commit_index=commit, entry=entry,
                                        batch_entry=tuple(batch))  # type: ignore[arg-type]  # fmt: skip
    assert native is not None
    got = native.push_json(request, *messages._names_json(group, "n0", "n0", "n1"))
    entries = [*batch, *([] if entry is None else [entry])]
    plain = all(_plain(v) for v in (term, code, commit)) and all(
        _plain(v) for e in entries for v in (e.index, e.term, e.pos, e.magic, e.channel, e.chain_crc, e.body_crc)
    )
    if plain:
        assert got == _python_push(request)
    else:
        assert got is None


def test_a_push_of_a_memoryview_body_is_encoded_from_its_bytes() -> None:
    entry = Entry(3, 1, 96, memoryview(b"\x00\xffabc"))  # type: ignore[arg-type]
    request = messages.PushEntryRequest(group="g", term=1, batch_entry=(entry,))
    assert native is not None
    got = native.push_json(request, *messages._names_json("g", None, None, None))
    assert got == _python_push(messages.PushEntryRequest(group="g", term=1,
                                                         batch_entry=(Entry(3, 1, 96, b"\x00\xffabc"),)))  # fmt: skip


_B64_TEXT = st.one_of(
    st.binary(max_size=20).map(lambda b: base64.b64encode(b).decode()),
    st.text(alphabet="ABCDab+/=0189\n é", max_size=12),
    st.sampled_from(["AB==", "ABC=", "AA==", "AAA=", "=AAA", "A===", "AAAA====", "", "Zm9v"]),
)
_VALUES = st.one_of(st.none(), st.booleans(), _WIDE, _I32, st.just(48), st.just(51), st.text(max_size=3), st.just([]))
_ENTRY_KEYS = ["index", "term", "pos", "magic", "channel", "chainCrc", "bodyCrc", "size"]


@st.composite
def _entry_objects(draw: st.DrawFn) -> object:
    """Mostly the usual shape (as orjson decodes a leader's entry), with any field missing, wrong or odd."""
    if draw(st.integers(0, 9)) == 0:
        return draw(st.one_of(_VALUES, st.lists(st.integers(), max_size=2)))
    body = draw(st.binary(max_size=12))
    obj: dict[str, object] = {"body": base64.b64encode(body).decode(), "index": draw(st.integers(0, 2**40)),
                              "term": 2, "pos": draw(st.integers(0, 2**40)), "magic": 1, "channel": 0,
                              "chainCrc": 0, "bodyCrc": draw(_I32), "size": 48 + len(body)}  # fmt: skip
    for key in draw(st.lists(st.sampled_from([*_ENTRY_KEYS, "body"]), max_size=3)):
        if draw(st.booleans()):
            obj.pop(key, None)
        else:
            obj[key] = draw(_B64_TEXT) if key == "body" and draw(st.booleans()) else draw(_VALUES)
    return obj


def _python_entries(items: object) -> tuple[tuple[object, ...], ...] | str:
    try:
        entries = messages._python_entries(items, "batchEntry")
    except messages.MessageError as exc:
        return str(exc)
    return tuple(_fields(e) for e in entries)


def _fields(e: Entry) -> tuple[object, ...]:
    return type(e.body), e.body, e.index, e.term, e.pos, e.magic, e.channel, e.chain_crc, e.body_crc


@given(st.one_of(st.lists(_entry_objects(), max_size=4), _VALUES))
def test_the_push_decode_gives_pythons_entries_or_leaves_them_to_python(items: object) -> None:
    """``decode_entries`` gives the Python decode's entries, every field (the CRCs too) and its type, for each list
    it takes; anything it leaves (None) is decoded by Python, which gives the value or the MessageError; and the
    push decoder, either way, gives what the Python twin gives."""
    assert native is not None
    got = native.decode_entries(Entry, items)
    expected = _python_entries(items)
    if got is not None:
        assert tuple(_fields(e) for e in got) == expected
        assert list(got) == [Entry(f[2], f[3], f[4], f[1], *f[5:]) for f in expected]  # type: ignore[arg-type,misc]
    try:
        decoded: object = tuple(_fields(e) for e in messages._entries(items, "batchEntry"))
    except messages.MessageError as exc:
        decoded = str(exc)
    assert decoded == expected


@given(_entry_objects())
def test_a_single_pushed_entry_decodes_as_the_python_twin_decodes_it(item: object) -> None:
    try:
        body = orjson.dumps({"entry": item, "term": 1})
    except TypeError:  # an integer wider than JSON from orjson holds: no such push arrives
        return
    outcomes = []
    for c_path in (True, False):
        saved = messages._native
        messages._native = native if c_path else None
        try:
            request = messages.decode_push(body)
            outcomes.append(_fields(request.entry) if request.entry is not None else None)
        except messages.MessageError as exc:
            outcomes.append(str(exc))
        finally:
            messages._native = saved
    assert outcomes[0] == outcomes[1]


# ---- a follower's write ---------------------------------------------------------------------------------------------


def _ledger(directory: Path) -> FileLedger:
    config = DLedgerConfig(group="g", self_id="n0", peers="n0-a:1", store_base_dir=str(directory),
                           mapped_file_size_for_entry_data=DATA_SIZE,
                           mapped_file_size_for_entry_index=INDEX_SIZE)  # fmt: skip
    ledger = FileLedger(config)
    ledger.load()
    return ledger


def _files(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


@st.composite
def _pushes(draw: st.DrawFn) -> list[list[Entry]]:
    """Runs of entries as a leader pushes them (positions placed with blanks at segment ends), some with a wrong
    index, position, width or body size along the way."""
    pushes, index, end = [], 0, 0
    for _ in range(draw(st.integers(1, 6))):
        run = []
        for _ in range(draw(st.integers(1, 5))):
            size = draw(st.integers(0, 120))
            pos, _ = place(end, 48 + size, DATA_SIZE)
            entry = Entry(index, 1 + index // 7, pos, bytes([index % 251]) * size, body_crc=draw(_I32))
            fault = draw(st.integers(0, 30))
            if fault == 1:
                entry = Entry(index + 1, entry.term, pos, entry.body)
            elif fault == 2:
                entry = Entry(index, entry.term, pos + 8, entry.body)
            elif fault == 3:
                entry = Entry(index, entry.term, pos, entry.body, channel=2**40)
            elif fault == 4:
                entry = Entry(index, entry.term, pos, bytes(DATA_SIZE))
            run.append(entry)
            if fault < 1 or fault > 4:
                index, end = index + 1, entry.end_pos
        pushes.append(run)
    return pushes


def _apply(ledger: FileLedger, pushes: list[list[Entry]]) -> list[object]:
    outcomes: list[object] = []
    for run in pushes:
        try:
            ledger.append_run_as_follower(tuple(run))
            outcomes.append(None)
        except (LedgerError, Exception) as exc:  # struct.error for a field too wide, as the Python write raises
            outcomes.append((type(exc).__name__, str(exc)))
        outcomes.append((ledger.begin_index, ledger.end_index, ledger.end_term, ledger.write_pos))
    return outcomes


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_pushes())
def test_a_followers_run_writes_the_bytes_the_python_write_writes(pushes: list[list[Entry]]) -> None:
    """``append_run_as_follower`` with the C run write and with the Python one, the same pushes: the same files
    byte for byte (data with its blanks, index), the same end after each push, the same error for a bad entry."""
    results = []
    for c_path in (True, False):
        with tempfile.TemporaryDirectory() as tmp:
            saved = file_store._native
            file_store._native = native if c_path else None
            try:
                ledger = _ledger(Path(tmp))
                outcomes = _apply(ledger, pushes)
                ledger.flush_all()
                ledger.close()
            finally:
                file_store._native = saved
            results.append((outcomes, _files(Path(tmp))))
    assert results[0] == results[1]


def test_a_run_is_written_in_one_call_until_a_segment_ends(tmp_path: Path) -> None:
    """The run write stops at the entry that needs a blank and a new segment; the Python write takes that one and the
    run goes on in the next segment."""
    ledger = _ledger(tmp_path)
    entries, end = [], 0
    for i in range(8):
        pos, _ = place(end, 148, DATA_SIZE)
        entries.append(Entry(i, 1, pos, bytes([i]) * 100))
        end = entries[-1].end_pos
    ledger.append_run_as_follower(entries[:1])  # the first segments are made by the Python write
    assert ledger._write_run(tuple(entries), 1) == 2  # 3 x 148 fill 444 of 512; the 4th needs a new segment
    ledger.append_run_as_follower(tuple(entries[3:]))
    assert [ledger.get(i) for i in range(8)] == entries


def _both_ways(run: Callable[[Path], object], tmp_path: Path) -> None:
    """``run`` on a fresh directory with the C code, then with the Python twin: the same outcome and files."""
    results = []
    for way, module in (("c", native), ("python", None)):
        saved = file_store._native
        file_store._native = module
        try:
            results.append((run(tmp_path / way), _files(tmp_path / way)))
        finally:
            file_store._native = saved
    assert results[0] == results[1]


def test_an_index_segment_that_cannot_be_made_fails_both_ways_alike(tmp_path: Path) -> None:
    """A follower's run and a leader's sealed send whose next index segment cannot be made (a directory where its
    file goes): OSError, what was written of that entry taken back, the entries before it kept, and the same entry
    taken once the way is clear, with the C code as with the Python twin."""
    per_segment = INDEX_SIZE // 32

    def follower(root: Path) -> object:
        ledger = _ledger(root)
        entries, end = [], 0
        for i in range(per_segment + 2):
            pos, _ = place(end, 58, DATA_SIZE)
            entries.append(Entry(i, 1, pos, bytes([i]) * 10))
            end = entries[-1].end_pos
        in_the_way = ledger.index.dir_for(INDEX_SIZE) / mapped_file.segment_name(INDEX_SIZE)
        in_the_way.mkdir(parents=True)
        with pytest.raises(OSError):
            ledger.append_run_as_follower(tuple(entries))
        state = (ledger.end_index, ledger.write_pos)
        in_the_way.rmdir()
        ledger.append_run_as_follower(tuple(entries[per_segment:]))
        ledger.flush_all()
        ledger.close()
        return state, [e.index for e in entries]

    def leader(root: Path) -> object:
        ledger = _ledger(root)
        record = MessageRecord(topic="T", body=b"x" * 5, queue_id=0, flag=0, properties="", born_timestamp=1,
                               born_host=bytes(8), store_host=bytes(8))  # fmt: skip
        in_the_way = ledger.index.dir_for(INDEX_SIZE) / mapped_file.segment_name(INDEX_SIZE)
        got = [ledger.append_record_as_leader(1, encode_record_into, i, lambda: 1, 4096, record)
               for i in range(per_segment)]  # fmt: skip
        in_the_way.mkdir(parents=True)
        with pytest.raises(OSError):
            ledger.append_record_as_leader(1, encode_record_into, per_segment, lambda: 1, 4096, record)
        state = (ledger.end_index, ledger.write_pos)
        in_the_way.rmdir()
        got.append(ledger.append_record_as_leader(1, encode_record_into, per_segment, lambda: 1, 4096, record))
        ledger.flush_all()
        ledger.close()
        return state, [(e.index, e.pos, e.body_crc, e.body) for e in got]

    _both_ways(follower, tmp_path / "follower")
    _both_ways(leader, tmp_path / "leader")


@given(st.data())
def test_a_damaged_push_decodes_as_the_python_twin_decodes_it(data: st.DataObject) -> None:
    """A real push with bytes flipped, cut or inserted: the same request or the same MessageError both ways."""
    entries = tuple(Entry(i, 2, i * 60, bytes([i]) * 12, body_crc=i) for i in range(3))
    body = bytearray(messages.encode(messages.PushEntryRequest(group="g", leader_id="n0", term=2,
                                                               batch_entry=entries)))  # fmt: skip
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(body) - 1))
        action = data.draw(st.sampled_from(["flip", "cut", "insert"]))
        if action == "flip":
            body[at] = data.draw(st.sampled_from(b'0123456789"{}[],:-AQ=+/e.\\ '))
        elif action == "cut":
            del body[at]
        else:
            body.insert(at, data.draw(st.sampled_from(b'09"-=A,')))
    outcomes = []
    for module in (native, None):
        saved = messages._native
        messages._native = module
        try:
            request = messages.decode_push(bytes(body))
            outcomes.append([_fields(e) for e in request.entries] + [request])
        except messages.MessageError as exc:
            outcomes.append([str(exc)])
        finally:
            messages._native = saved
    assert outcomes[0] == outcomes[1]


_ANSWER_KEYS = ["group", "remoteId", "localId", "leaderId", "term", "code", "index", "beginIndex", "endIndex", "count"]
_ANSWER_VALUES = st.one_of(
    _VALUES,
    st.sampled_from([messages.TERM_MAX, messages.TERM_MAX + 1, 2**63 - 1, -(2**63), "n0", ""]),
)


def _highest(key: str) -> int:
    return messages.TERM_MAX if key == "term" else 2**63 - 1


@given(st.one_of(st.dictionaries(st.sampled_from(_ANSWER_KEYS), _ANSWER_VALUES), _VALUES))
def test_a_push_answer_decodes_as_the_python_twin_decodes_it(data: object) -> None:
    """``push_answer`` gives the Python twin's answer, every field and its type, for each object it takes (None,
    absent, strings, a term up to TERM_MAX, Java longs), and leaves (None) only what the twin gives the general way."""
    assert native is not None
    try:
        body = orjson.dumps(data)
    except TypeError:  # an integer wider than JSON from orjson holds: no such answer arrives
        return
    got = native.push_answer(messages.PushEntryResponse, data)
    saved = messages._native
    messages._native = None
    try:
        expected: object = messages.decode_push_response(body)
    except messages.MessageError as exc:
        expected = str(exc)
    finally:
        messages._native = saved
    if got is not None:
        assert isinstance(expected, messages.PushEntryResponse)
        fields = [f.name for f in attrs.fields(messages.PushEntryResponse)]
        assert [(getattr(got, f), type(getattr(got, f))) for f in fields] == [
            (getattr(expected, f), type(getattr(expected, f))) for f in fields
        ]
    usual = isinstance(data, dict) and all(
        v is None or (type(v) is str and k in _ANSWER_KEYS[:4])
        or (type(v) is int and k in _ANSWER_KEYS[4:] and -(2**63) <= v <= _highest(k))
        for k, v in data.items()
    )  # fmt: skip
    assert (got is not None) == usual


_PUSH_SCALARS = {
    "group": st.one_of(st.none(), st.text(max_size=3), _VALUES),
    "remoteId": st.one_of(st.none(), st.just("n1"), _VALUES),
    "localId": st.one_of(st.none(), st.just("n0"), _VALUES),
    "leaderId": st.one_of(st.none(), st.just("n0"), _VALUES),
    "term": _ANSWER_VALUES,
    "code": _ANSWER_VALUES,
    "commitIndex": _ANSWER_VALUES,
    "type": st.one_of(st.none(), st.sampled_from(["APPEND", "COMMIT", "COMPARE", "TRUNCATE", "append", "X"]), _VALUES),
}


@st.composite
def _push_objects(draw: st.DrawFn) -> object:
    """A push's JSON object: the usual one with any field missing, odd or wrong, entries from :func:`_entry_objects`."""
    obj: dict[str, object] = {}
    for key, values in _PUSH_SCALARS.items():
        if draw(st.integers(0, 2)):
            obj[key] = draw(values)
    if draw(st.booleans()):
        obj["entry"] = draw(st.one_of(st.none(), _entry_objects()))
    if draw(st.booleans()):
        obj["batchEntry"] = draw(st.one_of(st.none(), st.lists(_entry_objects(), max_size=3), _VALUES))
    return obj


def _request_fields(request: messages.PushEntryRequest) -> tuple[object, ...]:
    fields = [f.name for f in attrs.fields(messages.PushEntryRequest) if f.name not in ("entry", "batch_entry")]
    entry = None if request.entry is None else _fields(request.entry)
    return (*[(getattr(request, f), type(getattr(request, f))) for f in fields], entry,
            type(request.batch_entry), tuple(_fields(e) for e in request.batch_entry))  # fmt: skip


@given(_push_objects())
def test_a_push_request_decodes_as_the_python_twin_decodes_it(data: dict[str, object]) -> None:
    """``push_request`` gives the Python twin's request, every field and its type, the entries' too, for each object
    it takes; what it leaves (None), the twin decodes, giving the request or the MessageError, as ``decode_push``
    with the C code does."""
    assert native is not None
    try:
        body = orjson.dumps(data)
    except TypeError:  # an integer wider than JSON from orjson holds: no such push arrives
        return
    got = native.push_request(messages.PushEntryRequest, Entry, messages._PUSH_TYPES, data)
    outcomes = []
    for module in (None, native):
        saved = messages._native
        messages._native = module
        try:
            outcomes.append(_request_fields(messages.decode_push(body)))
        except messages.MessageError as exc:
            outcomes.append((str(exc),))
        finally:
            messages._native = saved
    assert outcomes[0] == outcomes[1]
    if got is not None:
        assert _request_fields(got) == outcomes[0]
