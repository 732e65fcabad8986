"""Hot reload of the ACL files: every ``interval`` seconds (RocketMQ's ``AclFileWatchService``: 5 s) the file list
is rescanned and each file whose modification time, size or inode changed is read again
(:meth:`broker.acl.manager.AclManager.reload_changed`; ``conf/acl/tools.yml`` aside, as RocketMQ's watcher skips
it). A file that fails to load keeps its previous rules and the reason is logged by the manager; nothing here ends
the broker.
"""

from __future__ import annotations

import logging

import trio

from broker.acl.manager import AclManager

log = logging.getLogger(__name__)

#: RocketMQ's watch period (``AclFileWatchService.WATCH_INTERVAL``), seconds.
WATCH_INTERVAL = 5.0


async def watch_acl_files(
    manager: AclManager,
    interval: float = WATCH_INTERVAL,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Reload changed files until cancelled."""
    task_status.started()
    while True:
        await trio.sleep(interval)
        try:
            manager.reload_changed()
        except Exception:  # a bug in a reload must not stop later ones
            log.exception("ACL reload failed; keeping the current rules")
