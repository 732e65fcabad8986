"""The processor contract shared by the server's pools and the client's push handler.

A :class:`Processor` turns one request into at most one response. It never touches a socket: it gets a
:class:`RequestContext` (whose ``connection`` it may keep to answer later, as long polling does) and returns

- a :class:`~remoting.codec.command.RemotingCommand` to write back now,
- or ``None``: no response now (a held pull answers later through ``ctx.connection.send``).

:func:`run_processor` is the one place that maps a processor's outcome to the wire: an ``Exception`` becomes
``SYSTEM_ERROR`` (1) with ``"<ExceptionType>: <message>"`` as remark and the connection is kept; oneway requests
never get a response, whatever the processor returned. This module is backend-neutral (it runs under Trio and
asyncio) because the client reuses it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol

import attrs

from remoting.codec.codes import ResponseCode
from remoting.codec.command import RemotingCommand
from remoting.errors import RemotingConnectError

if TYPE_CHECKING:
    from remoting.connection import Connection

log = logging.getLogger(__name__)


@attrs.frozen(slots=True)
class RequestContext:
    """What a processor knows about where a request came from.

    One context per connection (it is created once, not per request). ``connection.attributes`` is the seam for
    identity (client id, ACL identity) that processors fill in and read back.
    """

    connection: Connection

    @property
    def remote_address(self) -> tuple[str, int]:
        return self.connection.remote_address


class Processor(Protocol):
    """Handles requests for the codes it is registered for. See the module docstring for the contract."""

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None: ...


async def run_processor(processor: Processor, ctx: RequestContext, request: RemotingCommand) -> None:
    """Run ``processor`` on ``request`` and write its response (if any, and if the request is not oneway).

    Never raises for processor failures or a connection that closed meanwhile: both are logged, because the
    caller is a pool worker that must keep serving other requests. Cancellation propagates.
    """
    try:
        response = await processor.process(ctx, request)
    except Exception as exc:
        log.warning("processor %s failed on request code %d", type(processor).__name__, request.code, exc_info=True)
        response = request.response(ResponseCode.SYSTEM_ERROR, remark=f"{type(exc).__name__}: {exc}")
    if request.is_oneway:
        ctx.connection.oneway_done(request, response)
        return
    if response is None:
        return
    try:
        # Never waits for a peer that does not read: a pool worker waiting for one such peer's backlog to drain
        # served nobody else, and all of them soon waited so. The answer counts in the connection's budget, which
        # stops its reader instead.
        ctx.connection.send_nowait(response)
    except RemotingConnectError:
        log.debug("response to opaque %d dropped: connection %s closed", request.opaque, ctx.connection)
