"""Blocking helpers around the official 5.x Python client (``rocketmq-python-client``, pinned in pyproject.toml).

The client is synchronous (it runs its own asyncio thread); Trio tests call these through ``trio.to_thread.run_sync``.
Importing this module mends one race of the client's (:func:`route_callbacks_on_the_client_loop`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from rocketmq import (
    ClientConfiguration,
    Credentials,
    FilterExpression,
    Message,
    Producer,
    SimpleConsumer,
    TransactionChecker,
    TransactionResolution,
)
from rocketmq.grpc_protocol import FilterType
from rocketmq.v5.client.connection.rpc_client import RpcClient

__all__ = [
    "CommitAll",
    "drain",
    "make_message",
    "route_callbacks_on_the_client_loop",
    "start_consumer",
    "start_producer",
]


class _CallbacksOnLoop:
    """A ``concurrent.futures.Future`` whose done-callbacks run on the client's asyncio loop, even when it is done
    before they are added."""

    def __init__(self, future: Any) -> None:
        self._future = future

    def add_done_callback(self, fn: Any) -> None:
        loop = RpcClient.get_channel_io_loop()
        self._future.add_done_callback(lambda done: loop.call_soon_threadsafe(fn, done))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._future, name)


def route_callbacks_on_the_client_loop() -> None:
    """Mend a race in rocketmq-python-client 5.1.2 (applied on import; idempotent).

    ``ClientRouteManager.update_topic_route`` adds its callback after the QueryRoute has started. When the answer is
    already there, the callback runs on the calling thread. A topic's first route then opens the Telemetry stream
    outside the client's asyncio loop ("There is no current event loop in thread ..."). The route is dropped, and the
    start-up or the send fails with "failed to fetch topic:X route.". A fast broker on a loaded machine triggers it
    (seen in CI). With this, the callback always runs on the client's loop, as it does when the answer comes later.
    ``RpcClient.query_topic_route_async.original`` is the client's own method."""
    query = RpcClient.query_topic_route_async
    if getattr(query, "mended", False):
        return

    def mended(self: RpcClient, *args: Any, **kwargs: Any) -> _CallbacksOnLoop:
        return _CallbacksOnLoop(query(self, *args, **kwargs))

    mended.mended = True  # type: ignore[attr-defined]
    mended.original = query  # type: ignore[attr-defined]
    RpcClient.query_topic_route_async = mended  # type: ignore[method-assign]


route_callbacks_on_the_client_loop()


def configuration(endpoint: str) -> ClientConfiguration:
    return ClientConfiguration(endpoint, Credentials(), request_timeout=3)


def start_producer(endpoint: str, topics: Iterable[str], checker: TransactionChecker | None = None) -> Producer:
    producer = Producer(configuration(endpoint), tuple(topics), checker)
    producer.startup()
    return producer


def start_consumer(
    endpoint: str, group: str, topic: str, expression: str = "*", await_duration: int = 5, *, sql: bool = False
) -> Any:
    subscription = {topic: FilterExpression(expression, FilterType.SQL if sql else FilterType.TAG)}
    consumer = SimpleConsumer(configuration(endpoint), group, subscription, await_duration=await_duration)
    consumer.startup()
    return consumer


def make_message(
    topic: str,
    body: bytes,
    *,
    tag: str | None = None,
    keys: str | None = None,
    group: str | None = None,
    deliver_at: int | None = None,
    properties: dict[str, str] | None = None,
) -> Message:
    msg = Message()
    msg.topic = topic
    msg.body = body
    if tag is not None:
        msg.tag = tag
    if keys is not None:
        msg.keys = keys
    if group is not None:
        msg.message_group = group
    if deliver_at is not None:
        msg.delivery_timestamp = deliver_at
    for key, value in (properties or {}).items():
        msg.add_property(key, value)
    return msg


def drain(consumer: Any, want: int, invisible: int = 30, within: float = 30.0, ack: bool = True) -> list[Any]:
    """Receive until ``want`` messages came (acknowledging each unless told not to) or ``within`` seconds passed."""
    got: list[Any] = []
    deadline = time.monotonic() + within
    while len(got) < want and time.monotonic() < deadline:
        for msg in consumer.receive(32, invisible):
            got.append(msg)
            if ack:
                consumer.ack(msg)
    return got


class CommitAll(TransactionChecker):
    """A transaction checker that commits whatever it is asked about and remembers what it was asked."""

    def __init__(self) -> None:
        self.checked: list[tuple[str, str, bytes]] = []

    def check(self, message: Any) -> TransactionResolution:
        self.checked.append((message.message_id, message.topic, message.body))
        return TransactionResolution.COMMIT
