"""Real processes for the replication tests: a name server, a master and a slave (``tests.e2e.nodes``), producers
sending raw SEND_MESSAGE_V2 requests, and reading a stopped broker's store from its files."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import attrs
import trio

from client import Admin
from remoting.client import RemotingClient
from remoting.codec.codes import ResponseCode
from remoting.codec.message_properties import encode_properties
from remoting.codec.msgid import decode_offset_msg_id
from remoting.errors import RemotingError
from store.message_store import MessageStore
from store.store_config import StoreConfig
from tests.e2e.harness import kill_all
from tests.e2e.nodes import BrokerNode, NamesrvNode
from tests.processors.conftest import send_request

TOPIC = "ReplicaTopic"
QUEUES = 4
#: Small segments, so replication crosses segment ends and blanks.
SEGMENT = 256 * 1024
STORE = {"mappedFileSizeCommitLog": SEGMENT, "mappedFileSizeConsumeQueue": 20_000 * 20, "maxHashSlotNum": 4096,
         "maxIndexNum": 16_384, "flushIntervalCommitLog": 200}  # fmt: skip


@attrs.frozen
class Ack:
    """A send the master answered SEND_OK."""

    body: bytes
    phy: int
    queue_id: int
    queue_offset: int


def body_for(producer: int, seq: int) -> bytes:
    return f"p{producer}-s{seq}|".encode() * ((seq * 7 + producer) % 50 + 1)


@attrs.define
class Replicated:
    namesrv: NamesrvNode
    master: BrokerNode
    slave: BrokerNode
    #: Where the processes' output readers run: restart nodes in it.
    nursery: trio.Nursery


@contextlib.asynccontextmanager
async def replicated_processes(tmp_path: Path, role: str, **extra: Any) -> AsyncIterator[Replicated]:
    """A name server, a master (``role``) and a slave, each a process; the topic created and the slave connected.
    Every process is SIGKILLed on the way out."""
    logs = tmp_path / "logs"
    logs.mkdir()
    try:
        async with trio.open_nursery() as nursery:
            namesrv = NamesrvNode("namesrv", logs)
            await namesrv.start(nursery)
            common = {**STORE, "brokerName": "broker-a", **extra}
            master = BrokerNode("master", logs, tmp_path / "master", namesrv.addr, brokerRole=role, **common)
            await master.start(nursery)
            slave = BrokerNode("slave", logs, tmp_path / "slave", namesrv.addr, brokerRole="SLAVE", brokerId=1,
                               **common)  # fmt: skip
            await slave.start(nursery)
            async with Admin(namesrv.addr) as admin:
                await admin.create_topic(TOPIC, read_queue_nums=QUEUES, write_queue_nums=QUEUES,
                                         broker_addr=master.addr)  # fmt: skip
                await wait_status(admin, master.addr, "haConnectionCount", "1")
                await wait_reported(admin, master.addr)
            yield Replicated(namesrv, master, slave, nursery)
            nursery.cancel_scope.cancel()
    finally:
        await kill_all()


async def wait_status(admin: Admin, broker: str, key: str, value: str, timeout: float = 60) -> None:
    """Poll GET_BROKER_RUNTIME_INFO until ``key`` shows ``value``."""
    last: str | None = None
    with trio.move_on_after(timeout):
        while True:
            with contextlib.suppress(Exception):
                last = (await admin.broker_status(broker)).get(key)
                if last == value:
                    return
            await trio.sleep(0.1)
    raise AssertionError(f"{broker}: {key} is {last!r}, not {value!r}, after {timeout} s")


async def wait_reported(admin: Admin, broker: str, timeout: float = 60) -> None:
    """Poll until the master's slave has sent its first report (before it, the master does not know where the
    slave's transfer starts)."""
    with trio.fail_after(timeout):
        while True:
            status = await admin.broker_status(broker)
            if any(k.startswith("haSlave_") and not v.startswith("ackOffset=-1") for k, v in status.items()):
                return
            await trio.sleep(0.05)


async def produce(broker: str, producers: int, acks: list[Ack], stop: trio.Event, limit: int | None = None) -> None:
    """``producers`` tasks sending sequentially to ``broker`` until a send fails (the broker died) or ``stop`` is set;
    every SEND_OK is appended to ``acks``. ``limit`` stops each task after that many sends."""
    async with RemotingClient() as client, trio.open_nursery() as nursery:
        for p in range(producers):
            nursery.start_soon(_producer, client, broker, p, acks, stop, limit)


async def _producer(
    client: RemotingClient, broker: str, p: int, acks: list[Ack], stop: trio.Event, limit: int | None
) -> None:
    seq = 0
    while not stop.is_set() and (limit is None or seq < limit):
        body = body_for(p, seq)
        props = encode_properties({"KEYS": f"p{p}-s{seq}"})
        try:
            answer = await client.invoke(broker, send_request(TOPIC, body, queue_id=p % QUEUES, properties=props), 10)
        except RemotingError:
            return
        if answer.code == ResponseCode.SUCCESS:
            phy = decode_offset_msg_id(answer.ext_fields["msgId"]).phy_offset
            acks.append(Ack(body, phy, int(answer.ext_fields["queueId"]), int(answer.ext_fields["queueOffset"])))
        seq += 1


def open_files(root: Path) -> MessageStore:
    """A stopped broker's store opened from its files (recovery runs, as at a restart)."""
    store = MessageStore(
        StoreConfig(
            root,
            mapped_file_size_commit_log=SEGMENT,
            mapped_file_size_consume_queue=20_000 * 20,
            max_hash_slot_num=4096,
            max_index_num=16_384,
        )
    )
    store.load()
    return store
