"""``NurseryOwner``: the ``async with`` life cycle the embedded clusters share (:mod:`broker.embedded`,
:mod:`broker.embedded_dledger`): entering opens one nursery and runs :meth:`NurseryOwner._start_all` in it; leaving
runs :meth:`NurseryOwner._stop_all` (the brokers first, so they can still unregister from the name server), then
cancels the nursery, which stops whatever is left. A start-up error cancels the nursery, closes it and propagates
out of ``__aenter__``.
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from types import TracebackType
from typing import Self

import trio


class NurseryOwner:
    """Base of a component that runs its parts in one nursery of its own; subclasses fill the two hooks."""

    _nursery: trio.Nursery | None = None
    _stack: AsyncExitStack | None = None

    async def _start_all(self, nursery: trio.Nursery) -> None:
        """Start the parts in ``nursery`` (also kept as ``self._nursery``); raise to abort the start."""

    async def _stop_all(self) -> None:
        """Stop the parts that must go before the nursery is cancelled."""

    async def __aenter__(self) -> Self:
        stack = AsyncExitStack()
        await stack.__aenter__()
        try:
            self._nursery = await stack.enter_async_context(trio.open_nursery())
            await self._start_all(self._nursery)
        except BaseException as exc:
            if self._nursery is not None:
                self._nursery.cancel_scope.cancel()
            await stack.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        self._stack = stack
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        stack, self._stack = self._stack, None
        assert stack is not None and self._nursery is not None
        try:
            await self._stop_all()
        finally:  # a scope cancelled around us (a deadline, Ctrl-C) cuts the wait short, never the nursery's close
            self._nursery.cancel_scope.cancel()
            return await stack.__aexit__(exc_type, exc, tb)  # noqa: B012
