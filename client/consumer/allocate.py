"""Queue allocation strategies (Java's ``AllocateMessageQueueStrategy`` and the classes of
``client/consumer/rebalance/``): which of a topic's queues one consumer of a group takes, given every consumer id of
the group.

Every strategy sorts the queues and the consumer ids first, as Java's ``RebalanceImpl`` does before it calls one:
queues by topic, broker name and queue id, ids as strings, both compared as Java compares strings (UTF-16 code units).
So every member of a group, Java or Python, computes the same split for the same inputs without talking to the others.

A strategy is a callable ``(group, current_cid, mq_all, cid_all) -> list[MessageQueue]``; the classes here also have
Java's ``allocate`` and ``get_name``. As in Java's ``AbstractAllocateMessageQueueStrategy.check``, an empty
``current_cid``, ``mq_all`` or ``cid_all`` raises :class:`ValueError` (the rebalance then logs it and leaves the
topic's queues as they are) and a ``current_cid`` not among ``cid_all`` gets no queue.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Protocol

from client.consistent_hash import ConsistentHashRouter, HashFunction
from remoting.codec.bodies import MessageQueue

log = logging.getLogger(__name__)

AllocateStrategy = Callable[[str, str, Sequence[MessageQueue], Sequence[str]], list[MessageQueue]]


def java_string_key(s: str) -> bytes:
    """A sort key ordering strings as Java's ``String.compareTo`` does (by UTF-16 code unit): differs from Python's
    order only between characters above U+FFFF and those from U+E000 to U+FFFF."""
    return s.encode("utf-16-be", "surrogatepass")


def java_queue_key(mq: MessageQueue) -> tuple[bytes, bytes, int]:
    """Java's ``MessageQueue.compareTo``: topic, then broker name, then queue id."""
    return java_string_key(mq.topic), java_string_key(mq.broker_name), mq.queue_id


def java_queue_string(mq: MessageQueue) -> str:
    """Java's ``MessageQueue.toString``, the key :class:`AllocateMessageQueueConsistentHash` hashes."""
    return f"MessageQueue [topic={mq.topic}, brokerName={mq.broker_name}, queueId={mq.queue_id}]"


def sort_like_java(mq_all: Iterable[MessageQueue], cid_all: Iterable[str]) -> tuple[list[MessageQueue], list[str]]:
    """``mq_all`` and ``cid_all`` sorted as ``RebalanceImpl.rebalanceByTopic`` sorts them (duplicates kept)."""
    return sorted(mq_all, key=java_queue_key), sorted(cid_all, key=java_string_key)


def strategy_name(strategy: AllocateStrategy) -> str:
    """A strategy's ``get_name()``, or a plain function's name."""
    get_name = getattr(strategy, "get_name", None)
    return str(get_name()) if callable(get_name) else getattr(strategy, "__name__", type(strategy).__name__)


class AllocateMessageQueueStrategy:
    """Base of the strategies (Java's ``AbstractAllocateMessageQueueStrategy``): subclasses implement
    :meth:`_allocate` on sorted, checked inputs and :meth:`get_name`."""

    def __call__(
        self, group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        return self.allocate(group, current_cid, mq_all, cid_all)

    def allocate(
        self, group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        """This member's share; raises :class:`ValueError` on empty inputs, ``[]`` for a stranger."""
        if not self.check(group, current_cid, mq_all, cid_all):
            return []
        mqs, cids = sort_like_java(mq_all, cid_all)
        return self._allocate(group, current_cid, mqs, cids)

    def allocate_as_given(
        self, group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        """This member's share of the lists in the order given, unsorted: the Java strategy itself, as
        ``mqadmin allocateMQ`` calls it (only a consumer's rebalance sorts the lists first)."""
        if not self.check(group, current_cid, mq_all, cid_all):
            return []
        return self._allocate(group, current_cid, list(mq_all), list(cid_all))

    def check(self, group: str, current_cid: str, mq_all: Collection[MessageQueue], cid_all: Collection[str]) -> bool:
        if not current_cid:
            raise ValueError("currentCID is empty")
        if not mq_all:
            raise ValueError("mqAll is null or mqAll empty")
        if not cid_all:
            raise ValueError("cidAll is null or cidAll empty")
        if current_cid not in cid_all:
            log.info("[BUG] ConsumerGroup: %s The consumerId: %s not in cidAll: %s", group, current_cid, cid_all)
            return False
        return True

    def _allocate(self, group: str, current_cid: str, mqs: list[MessageQueue], cids: list[str]) -> list[MessageQueue]:
        raise NotImplementedError

    def get_name(self) -> str:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.get_name()})"


class AllocateMessageQueueAveragely(AllocateMessageQueueStrategy):
    """Contiguous blocks: with 8 queues and 3 consumers the split is 3/3/2 (``AVG``)."""

    def _allocate(self, group: str, current_cid: str, mqs: list[MessageQueue], cids: list[str]) -> list[MessageQueue]:
        index = cids.index(current_cid)
        mod = len(mqs) % len(cids)
        if len(mqs) <= len(cids):
            average = 1
        elif mod > 0 and index < mod:
            average = len(mqs) // len(cids) + 1
        else:
            average = len(mqs) // len(cids)
        start = index * average if mod > 0 and index < mod else index * average + mod
        size = min(average, len(mqs) - start)
        return [mqs[(start + i) % len(mqs)] for i in range(max(0, size))]

    def get_name(self) -> str:
        return "AVG"


class AllocateMessageQueueAveragelyByCircle(AllocateMessageQueueStrategy):
    """Round robin: consumer ``i`` takes queues ``i, i+n, i+2n...`` (``AVG_BY_CIRCLE``)."""

    def _allocate(self, group: str, current_cid: str, mqs: list[MessageQueue], cids: list[str]) -> list[MessageQueue]:
        return mqs[cids.index(current_cid) :: len(cids)]

    def get_name(self) -> str:
        return "AVG_BY_CIRCLE"


class AllocateMessageQueueByConfig(AllocateMessageQueueStrategy):
    """Exactly the configured queues, whatever the topic's queues and the group's members (``CONFIG``); no check. The
    rebalance keeps only those among the topic's readable queues."""

    def __init__(self, message_queue_list: Iterable[MessageQueue] = ()) -> None:
        self.message_queue_list = list(message_queue_list)

    def allocate(
        self, group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        return list(self.message_queue_list)

    def get_name(self) -> str:
        return "CONFIG"


def _java_split_at(s: str) -> list[str]:
    """Java's ``s.split("@")``: trailing empty strings are dropped."""
    parts = s.split("@")
    while parts and not parts[-1]:
        parts.pop()
    return parts


class AllocateMessageQueueByMachineRoom(AllocateMessageQueueStrategy):
    """Only the queues of brokers named ``"<idc>@<broker>"`` whose idc is in ``consumeridcs``, split in blocks of
    ``len // consumers`` with the remainder dealt one each to the first consumers (``MACHINE_ROOM``). With no
    ``consumeridcs`` given (None, Java's null before ``setConsumeridcs``) the first ``idc@broker`` queue raises
    ValueError, so the rebalance logs it and keeps the topic's queues, where Java's ``consumeridcs.contains`` throws
    (client/src/main/java/org/apache/rocketmq/client/consumer/rebalance/AllocateMessageQueueByMachineRoom.java)."""

    def __init__(self, consumeridcs: Iterable[str] | None = None) -> None:
        self.consumeridcs = None if consumeridcs is None else set(consumeridcs)

    def _allocate(self, group: str, current_cid: str, mqs: list[MessageQueue], cids: list[str]) -> list[MessageQueue]:
        index = cids.index(current_cid)
        in_rooms = []
        for mq in mqs:
            parts = _java_split_at(mq.broker_name)
            if len(parts) != 2:
                continue
            if self.consumeridcs is None:
                raise ValueError("consumeridcs is not set")
            if parts[0] in self.consumeridcs:
                in_rooms.append(mq)
        mod, rem = divmod(len(in_rooms), len(cids))
        result = in_rooms[mod * index : mod * index + mod]
        if rem > index:
            result.append(in_rooms[index + mod * len(cids)])
        return result

    def get_name(self) -> str:
        return "MACHINE_ROOM"


class MachineRoomResolver(Protocol):
    """Where brokers and consumers run, for :class:`AllocateMachineRoomNearby` (Java's ``MachineRoomResolver``); an
    empty answer makes the allocation raise :class:`ValueError`."""

    def broker_deploy_in(self, message_queue: MessageQueue) -> str: ...

    def consumer_deploy_in(self, client_id: str) -> str: ...


class AllocateMachineRoomNearby(AllocateMessageQueueStrategy):
    """Queues go to consumers of their own machine room, split there by ``strategy``; the queues of a room without a
    live consumer are split by ``strategy`` among every consumer (``MACHINE_ROOM_NEARBY-<strategy's name>``)."""

    def __init__(self, strategy: AllocateMessageQueueStrategy, resolver: MachineRoomResolver) -> None:
        if strategy is None:
            raise ValueError("allocateMessageQueueStrategy is null")
        if resolver is None:
            raise ValueError("machineRoomResolver is null")
        self.strategy = strategy
        self.resolver = resolver

    def _allocate(self, group: str, current_cid: str, mqs: list[MessageQueue], cids: list[str]) -> list[MessageQueue]:
        room_queues: dict[str, list[MessageQueue]] = {}
        for mq in mqs:
            if not (room := self.resolver.broker_deploy_in(mq)):
                raise ValueError(f"Machine room is null for mq {java_queue_string(mq)}")
            room_queues.setdefault(room, []).append(mq)
        room_consumers: dict[str, list[str]] = {}
        for cid in cids:
            if not (room := self.resolver.consumer_deploy_in(cid)):
                raise ValueError(f"Machine room is null for consumer id {cid}")
            room_consumers.setdefault(room, []).append(cid)
        current_room = self.resolver.consumer_deploy_in(current_cid)
        result: list[MessageQueue] = []
        if near := room_queues.pop(current_room, None):
            result += self.strategy.allocate(group, current_cid, near, room_consumers.get(current_room, []))
        for room in sorted(room_queues, key=java_string_key):
            if room not in room_consumers:
                result += self.strategy.allocate(group, current_cid, room_queues[room], cids)
        return result

    def get_name(self) -> str:
        return f"MACHINE_ROOM_NEARBY-{self.strategy.get_name()}"


class AllocateMessageQueueConsistentHash(AllocateMessageQueueStrategy):
    """Each queue (by Java's ``MessageQueue.toString``) goes to the consumer owning it on a consistent hash ring of
    the consumer ids with ``virtual_node_cnt`` virtual nodes each (``CONSISTENT_HASH``): a member joining or leaving
    moves only the queues next to its nodes. ``virtual_node_cnt`` below 0 raises :class:`ValueError`."""

    def __init__(self, virtual_node_cnt: int = 10, custom_hash_function: HashFunction | None = None) -> None:
        if virtual_node_cnt < 0:
            raise ValueError(f"illegal virtualNodeCnt :{virtual_node_cnt}")
        self.virtual_node_cnt = virtual_node_cnt
        self.custom_hash_function = custom_hash_function

    def _allocate(self, group: str, current_cid: str, mqs: list[MessageQueue], cids: list[str]) -> list[MessageQueue]:
        if self.custom_hash_function is not None:
            router = ConsistentHashRouter(cids, self.virtual_node_cnt, self.custom_hash_function)
        else:
            router = ConsistentHashRouter(cids, self.virtual_node_cnt)
        return [mq for mq in mqs if router.route_node(java_queue_string(mq)) == current_cid]

    def get_name(self) -> str:
        return "CONSISTENT_HASH"


#: The default strategy (Java's ``DefaultMQPushConsumer`` and ``DefaultLitePullConsumer`` default).
allocate_average = AllocateMessageQueueAveragely()
allocate_average_by_circle = AllocateMessageQueueAveragelyByCircle()

#: The strategies that take no settings, by their ``get_name()``, for a consumer given a name.
_BY_NAME: dict[str, Callable[[], AllocateMessageQueueStrategy]] = {
    "AVG": AllocateMessageQueueAveragely,
    "AVG_BY_CIRCLE": AllocateMessageQueueAveragelyByCircle,
    "CONSISTENT_HASH": AllocateMessageQueueConsistentHash,
}


def resolve_strategy(strategy: AllocateStrategy | str) -> AllocateStrategy:
    """``strategy`` itself, or a new one of the settings-free strategies named by its ``get_name()`` (``"AVG"``,
    ``"AVG_BY_CIRCLE"``, ``"CONSISTENT_HASH"``); any other name raises :class:`ValueError`."""
    if not isinstance(strategy, str):
        return strategy
    if (factory := _BY_NAME.get(strategy)) is None:
        raise ValueError(f"unknown allocate strategy {strategy!r}: one of {', '.join(_BY_NAME)} or a strategy object")
    return factory()
