"""The few concurrency primitives the connection needs, picked once for the running event loop.

The connection is shared by the Trio server and the anyio client (which may run under asyncio). anyio's portable
wrappers cost a ``sniffio`` lookup and an extra layer on every call, which showed in the RPC profile, so under Trio
the native ``trio`` functions are used directly and anyio's elsewhere. Same semantics either way; Trio's clock
honours ``MockClock`` in tests.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol

import anyio
import attrs
import sniffio
import trio


class Event(Protocol):
    def set(self) -> None: ...

    def is_set(self) -> bool: ...

    async def wait(self) -> None: ...


@attrs.frozen(slots=True)
class Primitives:
    now: Callable[[], float]
    new_event: Callable[[], Event]
    move_on_at: Callable[[float], AbstractContextManager[Any]]
    sleep_until: Callable[[float], Any]
    #: Trio's own functions (the connection may then read and write its raw socket itself).
    is_trio: bool = False


TRIO = Primitives(trio.current_time, trio.Event, trio.move_on_at, trio.sleep_until, is_trio=True)
ANYIO = Primitives(anyio.current_time, anyio.Event, anyio.move_on_at, anyio.sleep_until)


def current() -> Primitives:
    """The primitives for the event loop running in this thread (call from async context). Under Trio, ``now`` is
    the run's clock's own ``current_time`` (what ``trio.current_time`` returns, without its lookup of the run:
    read for every invocation's deadline)."""
    if sniffio.current_async_library() == "trio":
        return attrs.evolve(TRIO, now=trio.lowlevel.current_clock().current_time)
    return ANYIO
