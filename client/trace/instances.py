"""The trace producers' client instances, one per process and config, shared by every trace dispatcher (Java's
``MQClientManager.getOrCreateMQClientInstance`` keys instances by client id, so all of 4.9.8's trace producers of a
process with one name server address run on one ``MQClientInstance``: client/src/main/java/org/apache/rocketmq/
client/impl/MQClientManager.java, client/src/main/java/org/apache/rocketmq/client/trace/AsyncTraceDispatcher.java).

:func:`trace_instance` hands a dispatcher the running instance for a trace config, starting it for the first user
and stopping it when the last one leaves (Java's ``MQClientInstance.shutdown`` returns while its producer table
holds another producer than the inner one). Each dispatcher's producer has a group of its own on it
(``_INNER_TRACE_PRODUCER-<group>-<kind>-<n>``), as Java's ``genGroupNameForTrace``, so they never collide.

The key is the whole trace config, not only the client id: Java's first trace producer's RPC hook and TLS setting
serve every later one, so a host's traces could go out signed with another host's keys; here hosts whose configs
differ (credentials, TLS files, timeouts, ...) get instances of their own, all under the one client id, which brokers
accept (``MQClientInstance(shared_id=True)``).

An instance runs in a task of no host's task group (a Trio system task, a free asyncio task), so it outlives the host
that started it while other hosts still use it; a host's restart leaves the others' traces alone. An instance being
stopped is waited for before a new one starts for the same config, so two never overlap on the brokers. An instance
that fails once running (an error escaping one of its tasks; Java's never dies of one: ``MQClientInstance``'s
scheduled tasks log theirs) stops as if its last user had left: it is out of the share at once, a user arriving
then waits for its end and starts a new one, and its users see :attr:`SharedInstance.stopping` set and acquire a new
one themselves (:class:`~client.trace.dispatcher.TraceDispatcher` does). Sharing is
per event loop: the blocking facade's clients (:mod:`client.sync`) each run a loop of their own, so each keeps its
own trace instance.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel
import attrs
import trio

from client.errors import ClientStateError

if TYPE_CHECKING:
    from client.config import ClientConfig
    from client.instance import MQClientInstance

__all__ = ["SharedInstance", "running_trace_instances", "shared_trace_instance", "trace_instance"]

log = logging.getLogger(__name__)


@attrs.define(eq=False)
class SharedInstance:
    """One shared instance and its users. A user reads ``instance`` and may wait for ``stopping``, which is set
    under it only when the instance failed."""

    instance: MQClientInstance
    users: int = 0
    error: BaseException | None = None
    ready: anyio.Event = attrs.Factory(anyio.Event)  # started, or failed to (``error``)
    stopping: anyio.Event = attrs.Factory(anyio.Event)  # the last user left, or it failed: it stops
    done: anyio.Event = attrs.Factory(anyio.Event)  # stopped


#: Per Trio run: the trace config -> its shared instance.
_table: anyio.lowlevel.RunVar[dict[ClientConfig, SharedInstance]] = anyio.lowlevel.RunVar("trace_client_instances")
#: The asyncio tasks running instances (the loop keeps only weak references).
_asyncio_tasks: set[asyncio.Task[None]] = set()


def _entries() -> dict[ClientConfig, SharedInstance]:
    try:
        return _table.get()
    except LookupError:
        table: dict[ClientConfig, SharedInstance] = {}
        _table.set(table)
        return table


def running_trace_instances() -> list[MQClientInstance]:
    """The shared trace instances of this run, started or starting, neither told to stop nor failed."""
    return [e.instance for e in _entries().values() if not e.stopping.is_set()]


@asynccontextmanager
async def trace_instance(config: ClientConfig) -> AsyncIterator[MQClientInstance]:
    """The running shared instance for ``config`` while the block runs; the last user's exit stops it and waits
    for that. Raises what the instance's start raised."""
    async with shared_trace_instance(config) as entry:
        yield entry.instance


@asynccontextmanager
async def shared_trace_instance(config: ClientConfig) -> AsyncIterator[SharedInstance]:
    """:func:`trace_instance`'s share itself, whose ``stopping`` tells the user the instance failed under it."""
    entry = await _acquire(config)
    try:
        yield entry
    finally:
        with anyio.CancelScope(shield=True):
            await _release(entry)


async def _acquire(config: ClientConfig) -> SharedInstance:
    from client.instance import MQClientInstance

    table = _entries()
    while (entry := table.get(config)) is not None and entry.stopping.is_set():
        await entry.done.wait()  # that one stops: start a new one once it is gone
    if entry is None:
        entry = table[config] = SharedInstance(MQClientInstance(config, shared_id=True))
        keeper = _keep(config, entry)
        try:
            _spawn(keeper, f"trace instance {entry.instance.client_id}")
        except BaseException:  # the run or loop is closing: nothing will ever start it
            del table[config]
            keeper.close()
            raise
    entry.users += 1
    try:
        await entry.ready.wait()
    except BaseException:
        with anyio.CancelScope(shield=True):
            await _release(entry)
        raise
    if entry.error is not None:
        await _release(entry)
        raise entry.error
    return entry


def _spawn(coro: Coroutine[Any, Any, None], name: str) -> None:
    """Run ``coro`` in a task of no task group: a Trio system task, or an asyncio task the loop cancels at its end."""
    loop = anyio.lowlevel.current_token().native_token
    if isinstance(loop, asyncio.AbstractEventLoop):
        task = loop.create_task(coro, name=name)
        _asyncio_tasks.add(task)
        task.add_done_callback(_asyncio_tasks.discard)
    else:

        async def run() -> None:
            await coro

        trio.lowlevel.spawn_system_task(run, name=name)


async def _release(entry: SharedInstance) -> None:
    entry.users -= 1
    if entry.users == 0:
        entry.stopping.set()
        await entry.done.wait()


def _failed(entry: SharedInstance, exc: BaseException) -> None:
    """An instance's failure: its start's error for the users waiting, or logged once it ran."""
    if entry.ready.is_set():
        log.error("trace client instance %s failed", entry.instance.client_id, exc_info=exc)
    else:
        entry.error = exc


async def _keep(config: ClientConfig, entry: SharedInstance) -> None:
    """Run the instance until its last user leaves or it fails (a system task: it raises nothing but Cancelled)."""
    try:
        try:
            async with entry.instance:
                entry.ready.set()
                try:
                    await entry.stopping.wait()
                finally:  # asked to, or failed (its task group cancelled this wait): out of the share now
                    entry.stopping.set()
        except BaseExceptionGroup as group:  # a failure beside a cancellation: keep only the cancellation
            cancelled, failed = group.split(anyio.get_cancelled_exc_class())
            if failed is not None:
                _failed(entry, failed)
            if cancelled is not None:
                raise cancelled from None
    except Exception as exc:
        _failed(entry, exc)
    finally:
        if not entry.ready.is_set() and entry.error is None:
            entry.error = ClientStateError("trace client instance stopped before it started")
        entry.ready.set()
        if _entries().get(config) is entry:
            del _entries()[config]
        entry.done.set()
