"""Types of the C extension; the contract is in dledger/_entries.c."""

from collections.abc import Sequence
from typing import Any

from dledger.entry import Entry

def push_json(request: Any, group_json: bytes, names_json: bytes, /) -> bytes | None: ...
def decode_entries(entry_type: type[Entry], items: Any, /) -> tuple[Entry, ...] | None: ...
def write_entries(
    entries: Sequence[Entry],
    start: int,
    next_index: int,
    data: Any,
    data_base: int,
    data_at: int,
    data_limit: int,
    index: Any,
    index_base: int,
    index_limit: int,
    /,
) -> tuple[int, int]: ...
def push_request(request_type: type[Any], entry_type: type[Entry], push_types: dict[str, Any], data: Any, /) -> Any: ...
def push_answer(response_type: type[Any], data: Any, /) -> Any: ...
def seal_entry(data: Any, at: int, end: int, index: int, term: int, pos: int, index_buf: Any, rel: int, /) -> int: ...
