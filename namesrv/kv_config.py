"""The name server's KV config: ``namespace -> {key: value}``, persisted to ``kvConfig.json``
(docs/protocol.md#67-config-files).

Namespace ``ORDER_TOPIC_CONFIG`` holds per-topic order configs (``brokerName:queueNum;...``) that REGISTER_BROKER and
GET_ROUTEINFO_BY_TOPIC hand out.

Ownership: one manager per name server owns its file. Reads and writes of the table are synchronous and happen on the
Trio thread; :meth:`KVConfigManager.persist` writes a snapshot atomically in a worker thread (through
:mod:`store.metadata_files`), one save at a time. :meth:`KVConfigManager.load` raises
:class:`~store.metadata_files.ConfigFileError` when the file is corrupt, whatever its ``.bak`` (Java refuses to start
then too; it never reads the ``.bak``) and logs an ``OSError`` (an unreadable file: Java logs it and starts empty);
:meth:`KVConfigManager.persist` logs an ``OSError`` and returns, as Java's
``KVConfigManager.persist`` logs its ``IOException`` (the change stays in the table and is served).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Final

import trio

from remoting.codec.bodies import KVTable
from store.metadata_files import KvConfigTable, kv_config_file

ORDER_TOPIC_CONFIG: Final = "ORDER_TOPIC_CONFIG"

log = logging.getLogger(__name__)


class KVConfigManager:
    def __init__(self, path: Path) -> None:
        self._file = kv_config_file(path)
        self._table: KvConfigTable = {}
        self._save_lock = trio.Lock()

    @property
    def path(self) -> Path:
        return self._file.path

    def load(self) -> None:
        """Replace the table with the file's content (blocking; call once at start). A missing or empty file means
        empty; so does one that cannot be read (a directory, an I/O error): the error is logged and the name server
        starts, as namesrv/src/main/java/org/apache/rocketmq/namesrv/kvconfig/KVConfigManager.java ``load`` logs the
        ``IOException`` of ``MixAll.file2String``. Content that does not decode raises ``ConfigFileError``. Like
        Java, ``load`` never reads the ``.bak``: it holds the table before the last change."""
        try:
            loaded = self._file.load_main()
        except OSError as exc:
            log.warning("Load KV config table exception, %s: %s", self.path, exc)
            loaded = None
        self._table = {} if loaded is None else {ns: dict(kv) for ns, kv in loaded.items()}

    async def persist(self) -> None:
        """Write the current table atomically; concurrent callers are serialized, the last snapshot wins. A write
        error is logged, not raised (namesrv/.../kvconfig/KVConfigManager.java ``persist``)."""
        async with self._save_lock:
            snapshot = {ns: dict(kv) for ns, kv in self._table.items()}
            try:
                await trio.to_thread.run_sync(self._file.save, snapshot)
            except OSError as exc:
                log.error("persist kvconfig failed, %s: %s", self.path, exc)

    def put(self, namespace: str, key: str, value: str) -> None:
        self._table.setdefault(namespace, {})[key] = value

    def delete(self, namespace: str, key: str) -> bool:
        """Remove a key; an emptied namespace stays as an empty table (KVConfigManager.java ``deleteKVConfig``).
        Returns whether the key existed."""
        kv = self._table.get(namespace)
        if kv is None or key not in kv:
            return False
        del kv[key]
        return True

    def get(self, namespace: str, key: str) -> str | None:
        return self._table.get(namespace, {}).get(key)

    def get_kv_list_by_namespace(self, namespace: str) -> KVTable | None:
        kv = self._table.get(namespace)
        return None if kv is None else KVTable(dict(kv))
