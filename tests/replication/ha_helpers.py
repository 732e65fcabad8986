"""Helpers for the replication tests: master and slave stores with small segments, waits bounded by a timeout, file
comparisons, and a push consumer from the first offset."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio

from broker.controller import BrokerController
from client import ConsumeConcurrentlyStatus, ConsumeFromWhere, MessageExt, PushConsumer
from store.message_store import MessageStore
from store.store_config import BrokerRole
from tests.store.store_helpers import STORE_HOST, files_of, small_config


def ha_store(root: Path, role: BrokerRole, master: MessageStore | None = None, **overrides: Any) -> MessageStore:
    """A loaded store with 4 KiB CommitLog segments; a slave is pointed at ``master``'s HA port (which must be
    listening already)."""
    values: dict[str, Any] = {"broker_role": role, "ha_listen_host": "127.0.0.1"}
    if master is not None:
        values["ha_master_address"] = f"127.0.0.1:{master.ha.port}"
    values.update(overrides)
    store = MessageStore(small_config(root, **values), store_host=STORE_HOST)
    store.load()
    return store


async def wait_until(predicate: Any, timeout: float = 30, what: str = "condition") -> None:
    """Poll ``predicate()`` every 10 ms; AssertionError naming ``what`` after ``timeout`` seconds."""
    with trio.move_on_after(timeout):
        while not predicate():
            await trio.sleep(0.01)
        return
    raise AssertionError(f"{what} not reached within {timeout} s")


async def read_exactly(stream: trio.abc.ReceiveStream, count: int) -> bytes:
    """``count`` bytes from ``stream``; AssertionError when it closes before."""
    data = b""
    while len(data) < count:
        chunk = await stream.receive_some(count - len(data))
        assert chunk, f"stream closed after {len(data)} of {count} bytes"
        data += chunk
    return data


async def slave_learns_topic(slave: BrokerController, topic: str) -> None:
    """Wait until ``slave`` copied ``topic`` from its master. A slave knows its master from a registration (at start,
    then every 30 s: one answered before the master's own, or lost, leaves it to the next) and copies the master's
    topics every 10 s. AssertionError with the sync's state after 75 s."""
    with trio.move_on_after(75):
        while slave.context.topics.get(topic) is None:
            await trio.sleep(0.5)
        return
    sync = slave.replication.slave_sync
    state = "no sync" if sync is None else f"master {sync.master_addr}, {sync.rounds} complete rounds"
    raise AssertionError(f"slave {slave.broker_addr} never copied {topic}: {state}")


def caught_up(master: MessageStore, slave: MessageStore) -> bool:
    return slave.commitlog.max_offset == master.commitlog.max_offset and (
        slave.replica is not None and slave.replica.dispatched == master.commitlog.max_offset
    )


def reported(master: MessageStore, slaves: int = 1) -> bool:
    """``slaves`` slaves are connected and each has sent its first report."""
    connections = master.ha.connections
    return len(connections) == slaves and all(c.request_offset >= 0 for c in connections)


def written_segments(root: Path) -> dict[str, bytes]:
    """The CommitLog segments under ``root`` that hold data, by name: a preallocated next segment (the allocation
    service's spare, all zeros) exists on one side or the other depending on timing, and is left out."""
    return {name: data for name, data in files_of(root / "commitlog").items() if data.strip(b"\0")}


def consumer_from_first(
    namesrv_addr: str,
    group: str,
    topic: str,
    listener: Callable[[list[MessageExt]], Awaitable[ConsumeConcurrentlyStatus]],
) -> PushConsumer:
    """A push consumer of ``group`` on ``topic`` from its first offset, with ``listener``; not started."""
    consumer = PushConsumer(group, namesrv_addr, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    consumer.subscribe(topic)
    consumer.register_message_listener(listener)
    return consumer
