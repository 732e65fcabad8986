"""Background persistence of one broker config file (``topics.json``, ``subscriptionGroup.json``, ...).

A :class:`ConfigPersister` pairs a :class:`~store.metadata_files.ConfigFile` with a ``snapshot`` callable that
returns the manager's current table. Managers change their tables synchronously on the Trio thread (so processors
never await them) and call :meth:`ConfigPersister.mark_dirty`; the persister's :meth:`run` task then saves the latest
snapshot in a worker thread. :meth:`persist` saves at once (admin requests, shutdown, tests).

Ownership and errors: the persister is the only writer of its file; saves are serialized by a lock and the snapshot is
taken on the Trio thread just before the save, so the file always holds a consistent table. A save that fails with
``OSError`` is logged and retried on the next change or at shutdown (the in-memory table stays authoritative), so a
full disk does not take the broker down; :meth:`persist` raises it to its caller.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Generic, TypeVar

import trio

from store.metadata_files import ConfigFile

T = TypeVar("T")

log = logging.getLogger(__name__)


class ConfigPersister(Generic[T]):
    """Saves ``snapshot()`` to ``file`` when marked dirty (by :meth:`run`) or on demand (:meth:`persist`)."""

    def __init__(self, file: ConfigFile[T], snapshot: Callable[[], T]) -> None:
        self.file = file
        self._snapshot = snapshot
        self._lock = trio.Lock()
        self._dirty = False
        self._wakeup = trio.Event()
        self._saved = trio.Event()
        self.saves = 0

    @property
    def dirty(self) -> bool:
        return self._dirty

    def load(self) -> T | None:
        """The file's content (or its ``.bak``'s); ``None`` when there is none. Blocking; raises ConfigFileError."""
        return self.file.load()

    def mark_dirty(self) -> None:
        """Schedule a save of the current table. Never blocks; safe to call without a running :meth:`run`."""
        self._dirty = True
        self._wakeup.set()

    async def persist(self) -> None:
        """Save the current table now, in a worker thread. Raises ``OSError`` from the file system."""
        async with self._lock:
            self._dirty = False
            value = self._snapshot()
            try:
                await trio.to_thread.run_sync(self.file.save, value)
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
        finally:
            if self._dirty:
                with trio.CancelScope(shield=True):
                    try:
                        await self.persist()
                    except OSError:
                        log.exception("final save of %s failed", self.file.path)
