"""Helpers for the Spark tests: topics (on one master or two), producing test messages, reading a topic back
through the client, and deleting stored messages as retention does."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import anyio

from client import Message
from client.admin import Admin
from client.sync import Producer
from remoting.codec.message import MessageExt
from spark.session import BrokerSession
from tests.client.helpers import HANG_GUARD, create_topic, topic_on_two_brokers
from tests.threaded_cluster import ThreadedCluster


def make_topic(namesrv: str, topic: str, queues: int) -> None:
    """Create ``topic`` with ``queues`` queues and wait until the name server routes it."""
    anyio.run(create_topic, namesrv, topic, queues)


def produce(namesrv: str, msgs: Sequence[Message]) -> None:
    with Producer("spark-test-pg", namesrv) as producer:
        for msg in msgs:
            producer.send(msg)


def read_topic(namesrv: str, topic: str) -> list[MessageExt]:
    """Every message stored in ``topic``, queue by queue in offset order."""
    with BrokerSession(namesrv) as session:
        out: list[MessageExt] = []
        for mq, (low, high) in session.min_max_offsets(session.queues(topic)).items():
            out.extend(session.pull_range(mq, low, high, "TOOLS_CONSUMER"))
        return out


@contextlib.contextmanager
def on_two_masters(cluster: ThreadedCluster, topic: str) -> Iterator[None]:
    """``topic`` with a queue on the cluster's broker-a and one on an extra master broker-b, for the block. Then
    broker-b stops, and the block ends once the name server no longer lists it: later tests create their topics on
    every listed master."""
    _, stop_b = anyio.run(topic_on_two_brokers, cluster, topic)
    try:
        yield
    finally:
        stop_b()
        anyio.run(_forgotten, cluster.namesrv_addr, "broker-b")


async def _forgotten(namesrv: str, broker_name: str) -> None:
    async with Admin(namesrv) as admin:
        with anyio.fail_after(HANG_GUARD):
            while broker_name in (await admin.cluster_info()).broker_addr_table:
                await anyio.sleep(0.02)


#: Bodies of 2000 bytes: about 7 messages per 16 KiB commit log segment of :func:`retention_cluster`.
RETAINED = [f"{i:02d}".encode() * 1000 for i in range(30)]


def retention_cluster(tmp_path: Path) -> ThreadedCluster:
    """A cluster of 16 KiB commit log segments whose retention deletes every segment but the one being written, once
    asked (:func:`delete_by_retention`)."""
    return ThreadedCluster(tmp_path / "cluster", mapped_file_size_commit_log=16384, file_reserved_time=0)


def delete_by_retention(cluster: ThreadedCluster) -> None:
    """Run retention until it deletes no more commit log segments (at most 10 a pass); the consume queues' first
    offsets move past what it deleted."""
    from store.maintenance import request_manual_delete

    store = cluster.cluster.controller.context.store

    async def retention() -> int:
        deleted = 0
        while True:
            store.flush_all_blocking()
            request_manual_delete(store)
            passed = await store.retention.check_once()
            if passed == 0:
                return deleted
            deleted += passed

    assert cluster.call(retention) > 0


def delete_commit_log_segments(cluster: ThreadedCluster, count: int) -> None:
    """Delete the first ``count`` commit log segments and leave the consume queues alone: the state between
    RetentionService.check_once's deletions and its move of the queues' first offsets (Java: CleanCommitLogService
    before CleanConsumeQueueService), in which their entries still point at the deleted data."""
    store = cluster.cluster.controller.context.store

    async def delete() -> int:
        store.flush_all_blocking()
        async with store.disk_lock:
            return store.commitlog.queue.delete_first(count)

    assert cluster.call(delete) == count


def commit_log_segments(cluster: ThreadedCluster) -> int:
    return len(cluster.cluster.controller.context.store.commitlog.queue.files)


class DeafFirstProxy:
    """A TCP proxy on 127.0.0.1 port 0 in front of ``target`` (``host:port``), in threads of this process: its first
    ``deaf`` connections are accepted and read but never answered (a peer that does not answer once: a stalled
    process, a path that lost its packets); later ones are forwarded both ways. ``accepted`` counts connections."""

    def __init__(self, target: str, deaf: int = 1) -> None:
        host, _, port = target.rpartition(":")
        self.target = (host, int(port))
        self.deaf = deaf
        self.accepted = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.addr = f"127.0.0.1:{self._listener.getsockname()[1]}"
        self._sockets: list[socket.socket] = [self._listener]

    def __enter__(self) -> DeafFirstProxy:
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            self._sockets.append(client)
            self.accepted += 1
            if self.accepted <= self.deaf:
                threading.Thread(target=self._pump, args=(client, None), daemon=True).start()
                continue
            upstream = socket.create_connection(self.target)
            self._sockets.append(upstream)
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket | None) -> None:
        try:
            while data := source.recv(65536):
                if sink is not None:
                    sink.sendall(data)
        except OSError:
            pass
        if sink is not None:
            with contextlib.suppress(OSError):
                sink.shutdown(socket.SHUT_WR)
