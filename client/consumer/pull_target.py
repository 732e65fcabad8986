"""Which broker of a group a consumer pulls from (Java's ``PullAPIWrapper``: ``pullFromWhichNodeTable`` and
``recalculatePullFromWhichNode``).

Every pull response carries ``suggestWhichBrokerId``; the next pull of that queue goes to the suggested broker id,
through :meth:`MQClientInstance.find_broker_address_in_subscribe` with ``only_this_broker`` off: when the suggested
broker (usually the master, id 0) is not in the route, the group's lowest id is used, so consumers keep reading from
a slave while the master is gone and go back to the master once the route lists it again. A pull sent to a slave
must not carry the commit-offset flag (offsets are committed where :mod:`client.consumer.offset_store` sends them).

A failed pull does not re-read the route: as Java's ``PullAPIWrapper.pullKernelImpl``, the route is asked for only
when it names no address of the queue's group; otherwise the instance's poll (``poll_name_server_interval``, 30 s)
brings a change, such as a dead master gone from it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from client.errors import ClientStateError
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

    def forget(self, mq: MessageQueue) -> None:
        self._which.pop(mq, None)
