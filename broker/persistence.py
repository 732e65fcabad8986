"""Background persistence of one broker config file (``topics.json``, ``subscriptionGroup.json``, ...).

A :class:`ConfigPersister` pairs a :class:`~store.metadata_files.ConfigFile` with a ``snapshot`` callable that
returns the manager's current table. Managers change their tables synchronously on the Trio thread (so processors
never await them) and call :meth:`ConfigPersister.mark_dirty`; the persister's :meth:`run` task then saves the latest
snapshot in a worker thread. :meth:`persist` saves at once (shutdown, tests); :meth:`write_through` writes the file on
the Trio thread without ``fsync`` before an admin request is answered (RocketMQ's managers persist before returning),
so the change survives a ``kill -9`` right after the answer, and schedules the synced save that makes it survive a
power loss.

Ownership and errors: the persister is the only writer of its file; writes are serialized by a thread lock and each
snapshot, taken on the Trio thread, carries a sequence number: a write of an older snapshot than the file holds is
skipped, so a worker thread finishing late never puts back an older table. A save that fails with
``OSError`` is logged and retried on the next change or at shutdown (the in-memory table stays authoritative), so a
full disk does not take the broker down; :meth:`persist` raises it to its caller.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

import trio

from store.metadata_files import ConfigFile

T = TypeVar("T")

log = logging.getLogger(__name__)


class ConfigPersister(Generic[T]):
    """Saves ``snapshot()`` to ``file`` when marked dirty (by :meth:`run`, at most once every ``min_interval``
    seconds) or on demand (:meth:`persist`)."""

    def __init__(self, file: ConfigFile[T], snapshot: Callable[[], T], *, min_interval: float = 0.0) -> None:
        self.file = file
        self._snapshot = snapshot
        self._min_interval = min_interval
        self._lock = trio.Lock()
        self._file_lock = threading.Lock()
        self._taken = 0  # snapshots taken so far
        self._written = 0  # the newest snapshot the file holds
        self._dirty = False
        self._wakeup = trio.Event()
        self._saved = trio.Event()
        self.saves = 0

    @property
    def dirty(self) -> bool:
        return self._dirty

    def load(self) -> T | None:
        """The file's content (or its ``.bak``'s) as RocketMQ's ConfigManager loads it: ``None`` when there is none,
        also when the file does not decode and there is no ``.bak`` (logged; the broker starts with an empty table).
        Blocking; raises ConfigFileError when the ``.bak`` does not decode (see
        :meth:`~store.metadata_files.ConfigFile.load_as_config_manager`)."""
        return self.file.load_as_config_manager()

    def mark_dirty(self) -> None:
        """Schedule a save of the current table. Never blocks; safe to call without a running :meth:`run`."""
        self._dirty = True
        self._wakeup.set()

    def _take(self) -> tuple[int, T]:
        self._taken += 1
        return self._taken, self._snapshot()

    def _write(self, taken: int, value: T, sync: bool) -> None:
        with self._file_lock:
            if taken > self._written:
                self.file.save(value, sync=sync)
                self._written = taken

    def write_through(self) -> None:
        """Write the current table now on the calling (Trio) thread, without ``fsync``, and schedule a synced save.
        Blocks the loop for one small file write (and for a worker thread's save in progress). A write that fails (a
        full disk) is logged and left to that save, as common/src/main/java/org/apache/rocketmq/common/
        ConfigManager.java ``persist`` logs its IOException: the change stands and the caller goes on."""
        taken, value = self._take()
        try:
            self._write(taken, value, sync=False)
        except OSError:
            log.exception("writing %s failed; it is saved again on the next change", self.file.path)
        self.mark_dirty()

    async def persist(self) -> None:
        """Save the current table now, in a worker thread. Raises ``OSError`` from the file system."""
        async with self._lock:
            self._dirty = False
            taken, value = self._take()
            try:
                await trio.to_thread.run_sync(self._write, taken, value, True)
            except BaseException:
                self._dirty = True
                raise
            self.saves += 1
            saved, self._saved = self._saved, trio.Event()
            saved.set()

    async def wait_saved(self) -> None:
        """Return once every change made so far is on disk (needs :meth:`run` or a concurrent :meth:`persist`)."""
        while self._dirty or self._lock.locked():
            await self._saved.wait()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Save after every change until cancelled; on cancellation save once more if anything is unsaved."""
        task_status.started()
        try:
            while True:
                await self._wakeup.wait()
                self._wakeup = trio.Event()
                if not self._dirty:
                    continue
                try:
                    await self.persist()
                except OSError:
                    log.exception("saving %s failed; will retry on the next change", self.file.path)
                if self._min_interval > 0:
                    await trio.sleep(self._min_interval)
        finally:
            if self._dirty:
                with trio.CancelScope(shield=True):
                    try:
                        await self.persist()
                    except OSError:
                        log.exception("final save of %s failed", self.file.path)
