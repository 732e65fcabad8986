"""RebalanceLockManager: 60 s lock life, owner refresh, take-over after expiry, owner-only unlock (virtual time)."""

from __future__ import annotations

import trio
import trio.testing

from broker.rebalance_locks import RebalanceLockManager
from remoting.codec.bodies import MessageQueue

Q0 = MessageQueue("T", "broker-a", 0)
Q1 = MessageQueue("T", "broker-a", 1)


async def test_a_locked_queue_is_refused_to_others_until_it_expires(autojump_clock: trio.testing.MockClock) -> None:
    locks = RebalanceLockManager(60.0)
    assert locks.try_lock_batch("g", [Q0, Q1], "c1") == {Q0, Q1}
    assert locks.try_lock_batch("g", [Q0], "c2") == set()
    await trio.sleep(59)
    assert locks.try_lock_batch("g", [Q0], "c2") == set()
    await trio.sleep(2)
    assert locks.try_lock_batch("g", [Q0], "c2") == {Q0}
    assert locks.owner("g", Q0) == "c2"


async def test_the_owner_keeps_its_lock_by_relocking(autojump_clock: trio.testing.MockClock) -> None:
    locks = RebalanceLockManager(60.0)
    locks.try_lock_batch("g", [Q0], "c1")
    for _ in range(5):
        await trio.sleep(20)
        assert locks.try_lock_batch("g", [Q0], "c1") == {Q0}
    assert locks.try_lock_batch("g", [Q0], "c2") == set()
    assert locks.is_locked("g", Q0, "c1")
    assert not locks.is_locked("g", Q0, "c2")


async def test_unlock_releases_only_the_callers_locks() -> None:
    locks = RebalanceLockManager()
    locks.try_lock_batch("g", [Q0], "c1")
    locks.try_lock_batch("g", [Q1], "c2")
    locks.unlock_batch("g", [Q0, Q1], "c2")
    assert locks.owner("g", Q0) == "c1"
    assert locks.owner("g", Q1) is None
    assert locks.try_lock_batch("g", [Q1], "c3") == {Q1}


async def test_groups_lock_independently() -> None:
    locks = RebalanceLockManager()
    assert locks.try_lock_batch("g1", [Q0], "c1") == {Q0}
    assert locks.try_lock_batch("g2", [Q0], "c2") == {Q0}
