"""Offset stores (Java's ``OffsetStore``): where a consumer keeps the next offset to consume of each queue.

- :class:`RemoteBrokerOffsetStore` (CLUSTERING): a local table, read from the broker of the queue when a queue is
  first taken (QUERY_CONSUMER_OFFSET) and written back with UPDATE_CONSUMER_OFFSET by :meth:`persist_all` (every 5 s
  and at shutdown); to the group's master, or to a slave while the master is gone.
- :class:`LocalFileOffsetStore` (BROADCASTING): the same table in a JSON file
  ``<dir>/<client id>/<group>/offsets.json`` in Java's form (a Java consumer of the host reads and writes the same
  file), written atomically (temp file + rename) after the previous file is kept as ``offsets.json.bak``, which is
  read when the file is missing, empty or damaged; ``read`` looks in the file, ``persist_all`` merges into it, in a
  worker thread (a slow disk does not stop the event loop). A file is held by one running consumer of the process:
  a second consumer of the group started meanwhile takes ``<client id>#2`` (then ``#3``...), so each keeps its own
  progress, and the same consumers started in the same order after a restart find theirs (Java refuses that second
  consumer instead).

``read`` returns ``None`` when there is no offset yet (the rebalance then applies consume-from-where) and raises
:class:`~client.errors.MQClientError` / ``RemotingError`` when the broker cannot be asked. ``persist_all`` never
raises (a failure is logged per queue, or for the file); ``persist`` of the remote store raises.
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Protocol

import anyio
import anyio.to_thread

from client import api
from client.errors import MQClientError
from client.route import MASTER_ID
from remoting.codec.bodies import MessageModel, MessageQueue
from remoting.codec.bodies.admin import dumps_mq_map, loads_fastjson
from remoting.codec.errors import CodecError

if TYPE_CHECKING:
    from client.instance import MQClientInstance

log = logging.getLogger(__name__)

#: How long a broker is given to answer an offset query or update, whatever ``rpc_timeout``: 5 s, as
#: ``client/src/main/java/org/apache/rocketmq/client/consumer/store/RemoteBrokerOffsetStore.java`` passes ``1000 * 5``.
OFFSET_RPC_TIMEOUT = 5.0


class OffsetStore(Protocol):
    async def load(self) -> None: ...

    def update(self, mq: MessageQueue, offset: int, increase_only: bool = False) -> None: ...

    def read_memory(self, mq: MessageQueue) -> int | None: ...

    async def read(self, mq: MessageQueue) -> int | None: ...

    async def persist_all(self, mqs: Iterable[MessageQueue]) -> None: ...

    async def persist(self, mq: MessageQueue) -> None: ...

    def remove(self, mq: MessageQueue) -> None: ...

    def close(self) -> None:
        """The consumer stopped (after its last :meth:`persist_all`)."""
        ...

    def snapshot(self, topic: str) -> dict[MessageQueue, int]:
        """The offsets in memory of ``topic``'s queues (Java's ``cloneOffsetTable``)."""
        ...


class _Table:
    def __init__(self) -> None:
        self.table: dict[MessageQueue, int] = {}

    def close(self) -> None:
        pass

    def update(self, mq: MessageQueue, offset: int, increase_only: bool = False) -> None:
        current = self.table.get(mq)
        if current is None or not increase_only or offset > current:
            self.table[mq] = offset

    def read_memory(self, mq: MessageQueue) -> int | None:
        return self.table.get(mq)

    def remove(self, mq: MessageQueue) -> None:
        self.table.pop(mq, None)

    def snapshot(self, topic: str) -> dict[MessageQueue, int]:
        return {mq: offset for mq, offset in self.table.items() if mq.topic == topic}


class RemoteBrokerOffsetStore(_Table):
    """CLUSTERING offsets kept by the brokers. See the module docstring."""

    def __init__(self, instance: MQClientInstance, group: str) -> None:
        super().__init__()
        self.instance = instance
        self.group = group

    async def load(self) -> None:
        return None

    async def _address(self, mq: MessageQueue) -> str:
        """The master of the queue's group; when the route (fetched again) has none, a slave, as Java's
        RemoteBrokerOffsetStore does (a slave stores offsets it is sent; its master's overwrite them on its next
        metadata sync)."""
        instance = self.instance
        addr = instance.find_broker_address(mq.broker_name)
        if addr is None:
            await instance.fetch_route(mq.topic, wait_greeting=True)
            found = instance.find_broker_address_in_subscribe(
                mq.broker_name, MASTER_ID, only_this_broker=False, topic=mq.topic
            )
            addr = None if found is None else found[0]
        if addr is None:
            raise MQClientError(f"broker {mq.broker_name} of {mq} has no address")
        return addr

    async def read(self, mq: MessageQueue) -> int | None:
        """The broker's offset, ``None`` when it has none; kept in memory unless an offset was put there while the
        broker was asked (a commit made meanwhile is newer than the broker's answer)."""
        addr = await self._address(mq)
        offset = await api.query_consumer_offset(self.instance.remoting, addr, self.group, mq, OFFSET_RPC_TIMEOUT)
        if offset is not None:
            self.table.setdefault(mq, offset)
        return offset

    async def persist(self, mq: MessageQueue) -> None:
        offset = self.table.get(mq)
        if offset is None:
            return
        addr = await self._address(mq)
        await api.update_consumer_offset(self.instance.remoting, addr, self.group, mq, offset, OFFSET_RPC_TIMEOUT)

    async def persist_all(self, mqs: Iterable[MessageQueue]) -> None:
        """Write the offsets of ``mqs`` (oneway, as Java); failures are logged per queue."""
        for mq in mqs:
            offset = self.table.get(mq)
            if offset is None:
                continue
            try:
                addr = await self._address(mq)
                await api.update_consumer_offset_oneway(
                    self.instance.remoting, addr, self.group, mq, offset, OFFSET_RPC_TIMEOUT
                )
            except Exception as exc:
                log.info("persisting offset %d of %s failed: %s", offset, mq, exc)

    def retain(self, mqs: Iterable[MessageQueue]) -> None:
        """Forget the offsets of every queue but ``mqs`` (the owned ones), unless ``mqs`` is empty, as Java's
        ``persistAll`` drops the offsets of the queues it is not given after persisting the others
        (client/src/main/java/org/apache/rocketmq/client/consumer/store/RemoteBrokerOffsetStore.java): what
        ``cloneOffsetTable`` (GET_CONSUMER_STATUS_FROM_CLIENT) reports is then the owned queues' offsets, not those
        of queues another member consumes now."""
        keep = set(mqs)
        if keep:
            for mq in [mq for mq in self.table if mq not in keep]:
                del self.table[mq]


class LocalFileOffsetStore(_Table):
    """BROADCASTING offsets in a local JSON file. See the module docstring."""

    #: The files held by running consumers of this process (consumers of the sync facade run in other threads).
    _held: ClassVar[set[Path]] = set()
    _held_lock: ClassVar = threading.Lock()

    def __init__(self, directory: str | os.PathLike[str], client_id: str, group: str) -> None:
        super().__init__()
        self._directory, self._group = Path(directory).absolute(), group
        self._client_dir = client_id.replace(":", "_").replace("/", "_")
        self.path = self._file("")
        self._holding = False
        self._save_lock: anyio.Lock | None = None  # made in the loop of the first save, as the limiter
        self._save_limiter: anyio.CapacityLimiter | None = None

    def _file(self, suffix: str) -> Path:
        return self._directory / f"{self._client_dir}{suffix}" / self._group / "offsets.json"

    async def load(self) -> None:
        """Hold the first file no running consumer of the process holds (see the module docstring) and read it if it
        exists, else its ``.bak``; when neither is readable that is logged and ignored (consumption restarts from
        consume-from-where), because refusing to start would be worse for a broadcasting consumer."""
        with self._held_lock:
            n = 1
            while (path := self._file(f"#{n}" if n > 1 else "")) in self._held:
                n += 1
            self._held.add(path)
        self.path, self._holding = path, True
        self.table.update(self._read_file())

    def close(self) -> None:
        if self._holding:
            with self._held_lock:
                self._held.discard(self.path)
            self._holding = False

    async def read(self, mq: MessageQueue) -> int | None:
        """The offset of ``mq`` in the file (kept in memory too), ``None`` when it has none: Java's
        ``readOffset(READ_FROM_STORE)``, so a queue taken again (after a restart, a reset, an illegal offset) goes on
        from what was last persisted although its offset left memory when it was dropped."""
        offset = self._read_file().get(mq)
        if offset is not None:
            self.table[mq] = offset
        return offset

    async def persist(self, mq: MessageQueue) -> None:
        await self.persist_all([mq])

    async def persist_all(self, mqs: Iterable[MessageQueue]) -> None:
        """Write the offsets in memory of ``mqs`` into the file, keeping its other entries (queues dropped since, as
        Java's LocalFileOffsetStore.persistAll). A file that cannot be written is logged, as Java's: the offsets stay in
        memory for the next try, and a consumer's shutdown still unregisters.

        The file work (reading the file or its ``.bak``, writing the ``.bak`` and the file with their fsyncs) runs
        in a worker thread, as Java's runs on the client
        instance's scheduled thread (client/src/main/java/org/apache/rocketmq/client/impl/factory/
        MQClientInstance.java ``persistAllConsumerOffset``): a slow disk must not stop the event loop every consumer
        and producer of the instance shares. Saves run one at a time, each taking the offsets in memory when its
        turn comes, so an older save never overwrites a newer one. A save is not cancelled (it never was while it
        ran in the loop): a dropped queue's last offset is written even when its consumer is being stopped."""
        if self._save_lock is None:
            self._save_lock = anyio.Lock()
            # Its own thread: the default limiter's threads may all be running listeners of the sync facade.
            self._save_limiter = anyio.CapacityLimiter(1)
        with anyio.CancelScope(shield=True):
            async with self._save_lock:
                updates = {mq: self.table[mq] for mq in mqs if mq in self.table}
                await anyio.to_thread.run_sync(self._save, updates, limiter=self._save_limiter)

    def _save(self, updates: dict[MessageQueue, int]) -> None:
        """:meth:`persist_all`'s file work, in a worker thread; the file is read once (it is copied to the ``.bak``
        as read)."""
        raw = self._read_raw(self.path)
        current = None if raw is None else self._parse(self.path, raw)
        merged = current if current is not None else (self._parse_file(self._bak_path) or {})
        merged.update(updates)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # The replaced file is kept as the .bak only when it parses, so a damaged file never replaces a good
            # backup; MixAll.string2File keeps the previous content (common/src/main/java/org/apache/rocketmq/
            # common/MixAll.java). Each replace is atomic: a crash in between leaves the previous file in place.
            if raw is not None and current is not None:
                self._replace(raw, self._bak_path)
            self._replace(b'{"offsetTable":' + dumps_mq_map(merged) + b"}", self.path)
        except OSError as exc:
            log.error("persisting consumer offsets to %s failed: %s", self.path, exc)

    def _read_file(self) -> dict[MessageQueue, int]:
        """The file's offsets, else (the file missing, empty or unparsable) its ``.bak``'s, as Java's
        ``readLocalOffset``/``readLocalOffsetBak`` (client/src/main/java/org/apache/rocketmq/client/consumer/store/
        LocalFileOffsetStore.java); none when neither holds any (logged when unreadable)."""
        for path in (self.path, self._bak_path):
            offsets = self._parse_file(path)
            if offsets is not None:
                return offsets
        return {}

    @property
    def _bak_path(self) -> Path:
        return self.path.with_name(self.path.name + ".bak")

    def _parse_file(self, path: Path) -> dict[MessageQueue, int] | None:
        """``path``'s offsets; ``None`` when it does not exist, is empty or cannot be read or parsed."""
        raw = self._read_raw(path)
        return None if raw is None else self._parse(path, raw)

    @staticmethod
    def _read_raw(path: Path) -> bytes | None:
        """``path``'s content; ``None`` when it does not exist or cannot be read (logged)."""
        try:
            return path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.warning("cannot read offset file %s: %s", path, exc)
            return None

    @staticmethod
    def _parse(path: Path, raw: bytes) -> dict[MessageQueue, int] | None:
        """The offsets in ``raw`` (read from ``path``); ``None`` when it is empty or does not parse (logged)."""
        if not raw.strip():
            return None
        try:
            return _decode_offsets(raw)
        except (CodecError, ValueError, KeyError, TypeError) as exc:
            log.warning("ignoring unreadable offset file %s: %s", path, exc)
            return None

    @staticmethod
    def _replace(data: bytes, path: Path) -> None:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".offsets.")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def _decode_offsets(raw: bytes) -> dict[MessageQueue, int]:
    """An offset file's table: Java's form (``OffsetSerializeWrapper``, fastjson's ``{"offsetTable": {MessageQueue:
    offset}}`` with the queues as object keys; client/src/main/java/org/apache/rocketmq/client/consumer/store/
    OffsetSerializeWrapper.java), or the list of entries earlier rocketrio versions wrote. Raises ``CodecError``,
    ``ValueError``, ``KeyError`` or ``TypeError`` for anything else."""
    table = loads_fastjson(raw)["offsetTable"]
    if isinstance(table, dict):
        return {mq: int(offset) for mq, offset in table.items() if isinstance(mq, MessageQueue)}
    return {
        MessageQueue(entry["topic"], entry["brokerName"], int(entry["queueId"])): int(entry["offset"])
        for entry in table
    }


def default_offset_store_dir() -> Path:
    """Where BROADCASTING offset files go: ``$ROCKETMQ_CLIENT_LOCAL_OFFSET_STORE_DIR``, else ``~/.rocketmq_offsets``
    (Java's ``rocketmq.client.localOffsetStoreDir`` default)."""
    return Path(os.environ.get("ROCKETMQ_CLIENT_LOCAL_OFFSET_STORE_DIR", Path.home() / ".rocketmq_offsets"))


def offset_store_for(
    instance: MQClientInstance, group: str, model: MessageModel, directory: str | os.PathLike[str] | None
) -> OffsetStore:
    """The store a consumer of ``model`` keeps its offsets in, as Java's consumers pick it at start: the broker's for
    CLUSTERING, a local file under ``directory`` (default :func:`default_offset_store_dir`) for BROADCASTING."""
    if model is MessageModel.BROADCASTING:
        where = directory if directory is not None else default_offset_store_dir()
        return LocalFileOffsetStore(where, instance.config.offset_file_client_id, group)
    return RemoteBrokerOffsetStore(instance, group)
