"""``PutWaits.plan``: how the send fast path answers a put, for each flush type, role and ``WAIT``, against what
``needed`` / ``can_notify`` say (the general path's questions), with the group commit running or not."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from store.message_store import MessageStore
from store.put_waits import FLUSH, INLINE, NO_WAIT, NOTIFY
from store.store_config import BrokerRole, FlushDiskType, StoreConfig

CASES = [
    (FlushDiskType.ASYNC_FLUSH, BrokerRole.ASYNC_MASTER, NO_WAIT),
    (FlushDiskType.SYNC_FLUSH, BrokerRole.ASYNC_MASTER, FLUSH),
    (FlushDiskType.ASYNC_FLUSH, BrokerRole.SYNC_MASTER, NOTIFY),
    (FlushDiskType.SYNC_FLUSH, BrokerRole.SYNC_MASTER, NOTIFY),
]


@pytest.mark.parametrize(("flush", "role", "expected"), CASES)
async def test_plan_agrees_with_needed_and_can_notify(
    tmp_path: Path, flush: FlushDiskType, role: BrokerRole, expected: int
) -> None:
    store = MessageStore(StoreConfig(tmp_path, flush_disk_type=flush, broker_role=role))
    store.load()
    waits = store.put_waits
    try:
        assert waits.plan(False) == NO_WAIT and not waits.needed(False)
        # Before run(): a SYNC_FLUSH put cannot be called back, so it is awaited inline.
        assert waits.plan(True) == (INLINE if flush is FlushDiskType.SYNC_FLUSH else expected)
        async with trio.open_nursery() as nursery:
            await nursery.start(store.run)
            assert waits.plan(True) == expected
            assert waits.needed(True) == (expected != NO_WAIT) and waits.can_notify(True)
            nursery.cancel_scope.cancel()
    finally:
        store.close()
