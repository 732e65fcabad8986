"""SubscriptionGroupManager (auto-create rules, persistence) and ConsumerOffsetManager (commit, query, periodic and
shutdown persistence)."""

from __future__ import annotations

from pathlib import Path

import trio

from broker.broker_config import BrokerConfig
from broker.consumer_offset_manager import ConsumerOffsetManager
from broker.subscription_group_manager import PREDEFINED_GROUPS, SubscriptionGroupManager
from store.metadata_files import SubscriptionGroupConfig


def groups(tmp_path: Path, **config: object) -> SubscriptionGroupManager:
    m = SubscriptionGroupManager(BrokerConfig(**config), tmp_path / "config")  # type: ignore[arg-type]
    m.load()
    return m


def offsets(tmp_path: Path, interval_ms: int = 5000) -> ConsumerOffsetManager:
    m = ConsumerOffsetManager(tmp_path / "config", interval_ms)
    m.load()
    return m


def test_predefined_groups_exist_and_unknown_groups_are_auto_created(tmp_path: Path) -> None:
    m = groups(tmp_path)
    for name in PREDEFINED_GROUPS:
        assert m.get(name) is not None
    assert m.get("g") is None
    created = m.find("g")
    assert created == SubscriptionGroupConfig("g")
    assert m.find("g") is created


def test_auto_create_off_refuses_unknown_groups_but_not_system_groups(tmp_path: Path) -> None:
    m = groups(tmp_path, auto_create_subscription_group=False)
    assert m.find("g") is None
    assert m.find("CID_RMQ_SYS_X") is not None
    m.update(SubscriptionGroupConfig("g", retry_queue_nums=3))
    found = m.find("g")
    assert found is not None and found.retry_queue_nums == 3


async def test_groups_survive_a_restart(tmp_path: Path) -> None:
    m = groups(tmp_path)
    async with trio.open_nursery() as nursery:
        await nursery.start(m.run)
        m.update(SubscriptionGroupConfig("kept", retry_max_times=3, consume_broadcast_enable=False))
        m.find("auto")
        m.find("dropped")
        m.delete("dropped")
        nursery.cancel_scope.cancel()
    again = groups(tmp_path)
    assert again.get("kept") == SubscriptionGroupConfig("kept", retry_max_times=3, consume_broadcast_enable=False)
    assert again.get("auto") is not None
    assert again.get("dropped") is None
    assert again.data_version == m.data_version


def test_offsets_are_per_group_topic_and_queue_and_unknown_ones_are_minus_one(tmp_path: Path) -> None:
    m = offsets(tmp_path)
    assert m.query("g", "T", 0) == -1
    m.commit("g", "T", 0, 10)
    m.commit("g", "T", 1, 7)
    m.commit("g", "U", 0, 3)
    m.commit("h", "T", 0, 1)
    m.commit("g", "T", 0, 12)
    assert m.query("g", "T", 0) == 12
    assert m.query("g", "T", 2) == -1
    assert m.offsets_of("g", "T") == {0: 12, 1: 7}
    assert m.topics_of_group("g") == {"T", "U"}
    assert m.groups_of_topic("T") == {"g", "h"}
    m.remove_topic("U")
    assert m.topics_of_group("g") == {"T"}
    m.remove_group("g")
    assert m.groups_of_topic("T") == {"h"}


async def test_offsets_are_persisted_every_interval(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    m = offsets(tmp_path, interval_ms=5000)
    async with trio.open_nursery() as nursery:
        await nursery.start(m.run)
        m.commit("g", "T", 0, 42)
        await trio.sleep(4.9)
        assert offsets(tmp_path).query("g", "T", 0) == -1
        await trio.sleep(0.2)
        await m.persister.wait_saved()
        assert offsets(tmp_path).query("g", "T", 0) == 42
        nursery.cancel_scope.cancel()


async def test_a_commit_of_the_offset_already_held_writes_no_file(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Clients commit every queue's offset every 5 s whether it moved or not: only a change is saved."""
    m = offsets(tmp_path, interval_ms=5000)
    async with trio.open_nursery() as nursery:
        await nursery.start(m.run)
        m.commit("g", "T", 0, 42)
        await trio.sleep(5.1)
        await m.persister.wait_saved()
        saves = m.persister.saves
        for _ in range(3):
            m.commit("g", "T", 0, 42)
            await trio.sleep(5.1)
        assert m.persister.saves == saves
        m.commit("g", "T", 0, 43)
        await trio.sleep(5.1)
        await m.persister.wait_saved()
        assert (m.persister.saves, offsets(tmp_path).query("g", "T", 0)) == (saves + 1, 43)
        nursery.cancel_scope.cancel()


async def test_offsets_are_persisted_at_shutdown(tmp_path: Path) -> None:
    m = offsets(tmp_path)
    async with trio.open_nursery() as nursery:
        await nursery.start(m.run)
        m.commit("g", "T", 3, 99)
        nursery.cancel_scope.cancel()
    assert offsets(tmp_path).offsets_of("g", "T") == {3: 99}


def test_a_group_whose_name_is_illegal_or_too_long_is_not_auto_created(tmp_path: Path) -> None:
    """Its ``%RETRY%``/``%DLQ%`` topic would name a ConsumeQueue directory outside the store (RocketMQ 5's
    SubscriptionGroupManager.findSubscriptionGroupConfig refuses such names)."""
    m = groups(tmp_path)
    for name in ("../../../commitlog", "a b", "tab\tgroup", "g" * 256, "CID_RMQ_SYS_../x"):
        assert m.find(name) is None, name
        assert m.get(name) is None, name
    assert m.find("g" * 255) is not None
    assert m.find("CID_RMQ_SYS_ok|%-_9") is not None
