"""What a producer does after a send failed against a broker: mark that master address, re-read the topic's route at
once (at most every :data:`REFRESH_INTERVAL_S` per topic), and, while the mark lasts, race every later send to that
address against the route: when the name server names another master for the broker name (a DLedger group elected
a new leader, which registers at once), the waiting attempt gives up with :class:`MasterMovedError` and the
producer's retry goes to the new master, instead of waiting out its send timeout against a dead or paused one.

Java's producer re-reads routes only every 30 s (``pollNameServerInterval``) and never on a failed send while the
cached route has queues (docs/architecture.md#dledger); this is ours. A success from the address clears its mark;
a mark also lapses after :data:`MARK_TTL_S`. Route lookups that fail leave the cached route as it was.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

from client.errors import TopicRouteNotFoundError
from client.instance import MQClientInstance
from remoting.errors import RemotingError

T = TypeVar("T")

#: The shortest time between two route lookups of one topic after failures (rate limit).
REFRESH_INTERVAL_S = 0.2
#: How long a failed master address stays marked (its sends watched) without a success from it.
MARK_TTL_S = 30.0


class MasterMovedError(RemotingError):
    """The route named another master while a send to ``address`` waited: the attempt was abandoned (the message
    may still have been stored there; a retry can store it twice, at least once as any retried send)."""

    def __init__(self, address: str, master: str | None) -> None:
        self.address = address
        super().__init__(f"master {address} replaced by {master or 'none'} in the route while the send waited")


class MasterWatch:
    """Failed master addresses and the route refreshes they cause, for one producer."""

    def __init__(self, instance: MQClientInstance) -> None:
        self.instance = instance
        self._marked: dict[str, float] = {}  # address -> when it last failed
        self._refreshed: dict[str, float] = {}  # topic -> when its route was last re-read here

    def marked(self, address: str) -> bool:
        at = self._marked.get(address)
        if at is None:
            return False
        if anyio.current_time() - at > MARK_TTL_S:
            del self._marked[address]
            return False
        return True

    def succeeded(self, address: str) -> None:
        if self._marked:
            self._marked.pop(address, None)

    async def failed(self, topic: str, address: str | None) -> None:
        """A send to ``address`` (``None``: not known) failed or timed out: mark it and re-read ``topic``'s route
        (rate-limited)."""
        self.mark(address)
        await self.refresh(topic)

    def mark(self, address: str | None) -> None:
        """:meth:`failed`'s mark alone, for a caller that leaves the re-read to a task: sends made before that task
        runs are watched already."""
        if address is not None:
            self._marked[address] = anyio.current_time()

    async def refresh(self, topic: str) -> None:
        now = anyio.current_time()
        if now - self._refreshed.get(topic, -REFRESH_INTERVAL_S) < REFRESH_INTERVAL_S:
            return
        self._refreshed[topic] = now
        with contextlib.suppress(TopicRouteNotFoundError):
            await self.instance.fetch_route(topic)

    async def send(self, topic: str, broker_name: str, address: str, attempt: Callable[[], Awaitable[T]]) -> T:
        """Run ``attempt`` (a send to ``address``); when the address is marked, re-read the route every
        :data:`REFRESH_INTERVAL_S` meanwhile and raise :class:`MasterMovedError` once it names another master."""
        if not self.marked(address):
            return await attempt()
        moved: list[str | None] = []
        results: list[T] = []
        errors: list[Exception] = []
        async with anyio.create_task_group() as tg:

            async def watch() -> None:
                while True:
                    await anyio.sleep(REFRESH_INTERVAL_S)
                    await self.refresh(topic)
                    master = self.instance.find_broker_address(broker_name)
                    if master != address:
                        moved.append(master)
                        tg.cancel_scope.cancel()
                        return

            tg.start_soon(watch)
            try:
                results.append(await attempt())
            except Exception as exc:  # raised below, outside the task group (which would wrap it in a group)
                errors.append(exc)
            tg.cancel_scope.cancel()
        if errors:
            raise errors[0]
        if results:
            return results[0]
        raise MasterMovedError(address, moved[0] if moved else None)
