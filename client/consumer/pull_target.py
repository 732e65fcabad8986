"""Which broker of a group a consumer pulls from (Java's ``PullAPIWrapper``: ``pullFromWhichNodeTable`` and
``recalculatePullFromWhichNode``).

Every pull response carries ``suggestWhichBrokerId``; the next pull of that queue goes to the suggested broker id,
through :meth:`MQClientInstance.find_broker_address_in_subscribe` with ``only_this_broker`` off: when the suggested
broker (usually the master, id 0) is not in the route, the group's lowest id is used, so consumers keep reading from
a slave while the master is gone and go back to the master once the route lists it again. A pull sent to a slave
must not carry the commit-offset flag (offsets are committed where :mod:`client.consumer.offset_store` sends them).

After a failed pull :meth:`PullTargets.refresh` asks the name server for the queue's route at once (ours: Java waits
for its 30 s route poll), so a master that died is dropped from the route within one retry.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from client.errors import ClientStateError, TopicRouteNotFoundError
from client.route import MASTER_ID
from remoting.codec.bodies import MessageQueue

if TYPE_CHECKING:
    from client.instance import MQClientInstance


class PullTargets:
    """Per-consumer table of the broker id each queue should be pulled from next."""

    def __init__(self, instance: MQClientInstance) -> None:
        self.instance = instance
        self._which: dict[MessageQueue, int] = {}

    def suggest(self, mq: MessageQueue, broker_id: int) -> None:
        """Record a pull response's ``suggestWhichBrokerId``."""
        self._which[mq] = broker_id

    async def address(self, mq: MessageQueue) -> tuple[str, bool]:
        """``(address, is_slave)`` for the next pull of ``mq``; the route is fetched when it names no broker of the
        queue's group. Raises :class:`ClientStateError` when the group has no address at all."""
        broker_id = self._which.get(mq, MASTER_ID)
        instance = self.instance
        found = instance.find_broker_address_in_subscribe(
            mq.broker_name, broker_id, only_this_broker=False, topic=mq.topic
        )
        if found is None:
            await instance.fetch_route(mq.topic, wait_greeting=True)
            found = instance.find_broker_address_in_subscribe(
                mq.broker_name, broker_id, only_this_broker=False, topic=mq.topic
            )
        if found is None:
            raise ClientStateError(f"no broker address for {mq}")
        return found

    async def refresh(self, mq: MessageQueue) -> None:
        """After a failed pull: the queue's route again (a name server that fails too is ignored)."""
        with contextlib.suppress(TopicRouteNotFoundError):
            await self.instance.fetch_route(mq.topic, wait_greeting=True)

    def forget(self, mq: MessageQueue) -> None:
        self._which.pop(mq, None)
