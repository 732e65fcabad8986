"""Fixtures for the data-path processor tests: a real broker context over a small store under ``tmp_path``, a real
:class:`~remoting.connection.Connection` as request context, and a served broker (dispatcher + hold service) reachable
over a memory stream (virtual-time tests) or a 127.0.0.1 socket on port 0."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio
import trio.testing

from broker.broker_config import BrokerConfig
from broker.client_registry import ClientRegistry
from broker.context import BrokerState, build_context, load_managers
from processors.hold import HoldService
from processors.offsets import ConsumerOffsetProcessor
from processors.pull import PullMessageProcessor
from processors.query import QueryMessageProcessor
from processors.send import SendMessageProcessor
from remoting.codec.bodies import ConsumeFromWhere, ConsumeType, MessageModel, SubscriptionData
from remoting.codec.codes import LanguageCode, RequestCode
from remoting.codec.command import RemotingCommand, request
from remoting.codec.frame import FrameDecoder, encode_command
from remoting.codec.headers.send import V2_TO_V1_KEYS
from remoting.codec.msgid import pack_socket_address
from remoting.codec.serializers import encode_json
from remoting.connection import Connection
from remoting.dispatch import Dispatcher, ProcessorPool
from remoting.processor import RequestContext
from remoting.server import RemotingServer
from store.message_store import MessageStore
from store.metadata_files import TopicConfig
from store.store_config import StoreConfig
from tests.remoting.helpers import CountingSocket, ignore_requests, tcp_pair

TOPIC = "TopicTest"
GROUP = "please_rename_unique_group_name"
PEER = ("10.1.2.3", 40123)

MakeBroker = Callable[..., BrokerState]


def open_broker(root: Path, *, store_overrides: dict[str, Any] | None = None, **config: Any) -> BrokerState:
    """A broker context with loaded managers and store; ``TopicTest`` (4 queues) exists."""
    values: dict[str, Any] = {"store_path_root_dir": str(root), "broker_ip1": "127.0.0.1", "listen_port": 10911}
    values.update(config)
    broker_config = BrokerConfig(**values)
    store_values: dict[str, Any] = {
        "mapped_file_size_commit_log": 1 << 20,
        "mapped_file_size_consume_queue": 1000 * 20,
        "max_hash_slot_num": 1024,
        "max_index_num": 4096,
    }
    store_values.update(store_overrides or {})
    store = MessageStore(StoreConfig(root, **store_values), store_host=pack_socket_address("127.0.0.1", 10911))
    store.load()
    broker = build_context(broker_config, store)
    load_managers(broker)
    broker.topics.update_topic(TopicConfig(TOPIC, 4, 4))
    return broker


@pytest.fixture
def make_broker(tmp_path: Path) -> AsyncIterator[MakeBroker]:
    opened: list[BrokerState] = []

    def make(**config: Any) -> BrokerState:
        broker = open_broker(tmp_path / f"broker{len(opened)}", **config)
        opened.append(broker)
        return broker

    yield make  # type: ignore[misc]
    for broker in opened:
        broker.store.close()


@pytest.fixture
def broker(make_broker: MakeBroker) -> BrokerState:
    return make_broker()


@pytest.fixture
async def peer_ctx() -> RequestContext:
    """The request context of a connection from ``PEER`` (never run: processors only read it)."""
    left, _right = trio.testing.memory_stream_pair()
    return Connection(left, PEER, ("127.0.0.1", 10911)).context


def join_consumer(registry: ClientRegistry, group: str, conn: Connection, client_id: str, topic: str = "T") -> None:
    """What a push consumer's heartbeat records (ClientManageProcessor.heart_beat -> register_consumer)."""
    info = registry.channel_info(conn, client_id, LanguageCode.JAVA, 409)
    registry.register_consumer(
        group,
        info,
        ConsumeType.CONSUME_PASSIVELY,
        MessageModel.CLUSTERING,
        ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        (SubscriptionData(topic),),
    )


def send_request(
    topic: str = TOPIC,
    body: bytes = b"hello",
    *,
    queue_id: int = 0,
    properties: str = "",
    code: int = RequestCode.SEND_MESSAGE_V2,
    **extra: str,
) -> RemotingCommand:
    """A SEND_MESSAGE_V2 request as a Java 4.9.8 producer sends it (V1 names with ``code=10``)."""
    v1 = {
        "producerGroup": "PG",
        "topic": topic,
        "defaultTopic": "TBW102",
        "defaultTopicQueueNums": "4",
        "queueId": str(queue_id),
        "sysFlag": "0",
        "bornTimestamp": "1700000000000",
        "flag": "0",
        "properties": properties,
        "reconsumeTimes": "0",
        "unitMode": "false",
        "batch": "false",
    }
    v1.update(extra)
    if code == RequestCode.SEND_MESSAGE:
        return request(code, v1, body)
    to_letter = {v: k for k, v in V2_TO_V1_KEYS.items()}
    return request(code, {to_letter[k]: v for k, v in v1.items()}, body)


def pull_request(
    topic: str = TOPIC,
    *,
    queue_id: int = 0,
    offset: int = 0,
    sys_flag: int = 0x2 | 0x4,
    subscription: str | None = "*",
    group: str = GROUP,
    suspend_ms: int = 15000,
    commit_offset: int = 0,
    max_msgs: int = 32,
    **extra: str,
) -> RemotingCommand:
    fields = {
        "consumerGroup": group,
        "topic": topic,
        "queueId": str(queue_id),
        "queueOffset": str(offset),
        "maxMsgNums": str(max_msgs),
        "sysFlag": str(sys_flag),
        "commitOffset": str(commit_offset),
        "suspendTimeoutMillis": str(suspend_ms),
        "subVersion": "0",
    }
    if subscription is not None:
        fields["subscription"] = subscription
    fields.update(extra)
    return request(RequestCode.PULL_MESSAGE, fields)


def tags_props(tags: str | None = None, keys: str | None = None, **more: str) -> str:
    pairs = {"TAGS": tags, "KEYS": keys, **more}
    return "\x02".join(f"{k}\x01{v}" for k, v in pairs.items() if v is not None)


class RawPeer:
    """A frame-level client on any Trio stream (socket or memory), so these tests do not depend on our client."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self.decoder = FrameDecoder()

    @classmethod
    async def connect(cls, address: tuple[str, int]) -> RawPeer:
        return cls(await trio.open_tcp_stream(*address))

    async def send(self, *commands: RemotingCommand) -> None:
        await self.stream.send_all(b"".join(encode_command(c) for c in commands))

    async def receive(self) -> RemotingCommand | None:
        """The next command, or ``None`` at end of stream."""
        while (command := self.decoder.next_command()) is None:
            data = await self.stream.receive_some(65536)
            if not data:
                return None
            self.decoder.receive_data(data)
        return command

    async def aclose(self) -> None:
        await self.stream.aclose()


class ServedBroker:
    """A broker context served by the real dispatcher with the data-path processors and a running hold service."""

    def __init__(self, broker: BrokerState, hold: HoldService) -> None:
        self.broker = broker
        self.hold = hold
        self.dispatcher = Dispatcher()
        send = SendMessageProcessor(broker)
        self.pull = PullMessageProcessor(broker, hold)
        offsets = ConsumerOffsetProcessor(broker)
        query = QueryMessageProcessor(broker)
        send_pool = ProcessorPool("send", 1, 10_000)
        self.dispatcher.register(
            (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE), send, send_pool
        )
        # One pull worker: proves a held pull does not occupy it.
        self.dispatcher.register(RequestCode.PULL_MESSAGE, self.pull, ProcessorPool("pull", 1, 1000))
        self.dispatcher.register(ConsumerOffsetProcessor.CODES, offsets, ProcessorPool("consumer_manage", 2, 1000))
        self.dispatcher.register(QueryMessageProcessor.CODES, query, ProcessorPool("query", 2, 1000))
        broker.hold = hold
        broker.store.arrival_listener = hold.notify_message_arriving

    async def connect_memory(self, nursery: trio.Nursery) -> RawPeer:
        """A client over an in-memory stream (works under ``autojump_clock``)."""
        client_end, server_end = trio.testing.memory_stream_pair()
        connection = Connection(server_end, PEER, ("127.0.0.1", 10911))
        nursery.start_soon(connection.run, self.dispatcher.dispatch)
        return RawPeer(client_end)


@pytest.fixture
async def served(broker: BrokerState, nursery: trio.Nursery) -> ServedBroker:
    hold = HoldService()
    served = ServedBroker(broker, hold)
    await nursery.start(hold.run)
    await nursery.start(served.dispatcher.run)
    return served


@pytest.fixture
async def served_address(served: ServedBroker, nursery: trio.Nursery) -> tuple[str, int]:
    """``served`` listening on 127.0.0.1, port 0."""
    address: tuple[str, int] = await nursery.start(RemotingServer(served.dispatcher).serve, "127.0.0.1", 0)
    return address


async def answers_to_fast_sends(
    processor: SendMessageProcessor, requests: list[RemotingCommand], timeout: float = 5
) -> tuple[list[dict[str, Any]], int]:
    """Hand ``requests`` to ``processor``'s fast path on one real connection with no checkpoint between them, then read
    an answer for each back: the answers (decoded headers, in arrival order) and how many ``send`` calls the
    connection made on its socket."""
    a, b = tcp_pair()
    raw = CountingSocket.twin_of(a)
    conn = Connection(trio.SocketStream(trio.socket.from_stdlib_socket(a)), PEER, ("127.0.0.1", 1), raw_socket=raw)
    peer = trio.SocketStream(trio.socket.from_stdlib_socket(b))
    answers: list[dict[str, Any]] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(conn.run, ignore_requests)
        await trio.testing.wait_all_tasks_blocked()
        for req in requests:
            assert processor.fast(conn.context, orjson.loads(encode_json(req)), bytes(req.body))
        decoder = FrameDecoder()
        with trio.fail_after(timeout):
            while len(answers) < len(requests):
                decoder.receive_data(await peer.receive_some())
                while (frame := decoder.next_frame()) is not None:
                    answers.append(orjson.loads(frame[1]))
        nursery.cancel_scope.cancel()
    await peer.aclose()  # the connection closed its own socket and ``raw``
    return answers, raw.sends
