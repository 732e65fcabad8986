"""Request code -> header class, built from each class's ``REQUEST_CODES``.

For generic tooling (logging a request's typed header, admin clients, conformance tests); processors normally name
their header class directly. Requests whose extFields are empty (HEART_BEAT, LOCK_BATCH_MQ, ...) have no entry.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from remoting.codec.headers import admin, client, namesrv, offsets, ops, pop, pull, query, recall, send, transaction
from remoting.codec.headers.base import Header


def _collect() -> dict[int, type[Header]]:
    table: dict[int, type[Header]] = {}
    for module in (namesrv, send, pull, offsets, client, transaction, query, admin, ops, recall, pop):
        for obj in vars(module).values():
            if isinstance(obj, type) and issubclass(obj, Header) and obj is not Header:
                for code in obj.REQUEST_CODES:
                    if code in table and table[code] is not obj:
                        raise TypeError(f"request code {code} claimed by {table[code].__name__} and {obj.__name__}")
                    table[int(code)] = obj
    return table


#: Request code -> the header class that reads that request's extFields. Read-only.
HEADER_BY_REQUEST_CODE: Mapping[int, type[Header]] = MappingProxyType(_collect())


def request_header_class(code: int) -> type[Header] | None:
    """The header class for request ``code``; ``None`` for requests without custom header fields or unknown codes."""
    return HEADER_BY_REQUEST_CODE.get(code)
