"""TopicConfigManager: system topics, the TBW102 inherit mechanism, retry/DLQ topics and topics.json persistence."""

from __future__ import annotations

from pathlib import Path

import trio

from broker.broker_config import BrokerConfig
from broker.topic_config_manager import TopicConfigManager
from store.metadata_files import PERM_INHERIT, PERM_READ, PERM_WRITE, TopicConfig, TopicFilterType

RW = PERM_READ | PERM_WRITE


def manager(tmp_path: Path, **config: object) -> TopicConfigManager:
    m = TopicConfigManager(BrokerConfig(**config), tmp_path / "config")  # type: ignore[arg-type]
    m.load()
    return m


def test_system_topics_exist_at_start_with_rocketmq_queue_counts_and_perms(tmp_path: Path) -> None:
    m = manager(tmp_path, broker_cluster_name="C1", broker_name="b1")
    expected = {
        "SELF_TEST_TOPIC": (1, RW),
        "TBW102": (8, RW | PERM_INHERIT),
        "BenchmarkTest": (1024, RW),
        "C1": (16, RW | PERM_INHERIT),
        "b1": (1, RW | PERM_INHERIT),
        "OFFSET_MOVED_EVENT": (1, RW),
        "SCHEDULE_TOPIC_XXXX": (18, RW),
        "C1_REPLY_TOPIC": (1, RW),
    }
    for topic, (queues, perm) in expected.items():
        tc = m.get(topic)
        assert tc is not None, topic
        assert (tc.read_queue_nums, tc.write_queue_nums, tc.perm) == (queues, queues, perm), topic
    assert m.get("RMQ_SYS_TRACE_TOPIC") is None


def test_every_topic_made_at_start_is_a_system_topic(tmp_path: Path) -> None:
    """Java's constructor adds each topic it creates to TopicValidator's set: admin requests refuse them all."""
    m = manager(
        tmp_path, broker_cluster_name="C1", broker_name="b1", trace_topic_enable=True, msg_trace_topic_name="MT"
    )
    for topic in ("C1", "b1", "C1_REPLY_TOPIC", "MT", "SELF_TEST_TOPIC", "RMQ_SYS_TRANS_HALF_TOPIC", "rmq_sys_x"):
        assert m.is_system_topic(topic), topic
    assert not m.is_system_topic("Orders")
    assert not manager(tmp_path / "other").is_system_topic("MT")


def test_tbw102_is_absent_and_cluster_topic_not_writable_when_disabled(tmp_path: Path) -> None:
    m = manager(tmp_path, auto_create_topic_enable=False, cluster_topic_enable=False, trace_topic_enable=True)
    assert m.get("TBW102") is None
    cluster = m.get("DefaultCluster")
    assert cluster is not None and cluster.perm == PERM_INHERIT
    assert m.get("RMQ_SYS_TRACE_TOPIC") is not None


def test_send_creates_a_topic_inheriting_from_tbw102_with_the_smaller_queue_count(tmp_path: Path) -> None:
    m = manager(tmp_path)
    changes: list[int] = []
    m.on_changed = lambda: changes.append(m.data_version.counter)
    before = m.data_version
    created = m.create_topic_in_send_process("NewTopic", "TBW102", 16, 0)
    assert created == TopicConfig("NewTopic", 8, 8, RW, TopicFilterType.SINGLE_TAG, 0)
    assert m.create_topic_in_send_process("Other", "TBW102", 4, 0) == TopicConfig("Other", 4, 4, RW)
    assert m.data_version.counter == before.counter + 2
    assert changes == [before.counter + 1, before.counter + 2]
    # An existing topic is returned as is, without a new version.
    assert m.create_topic_in_send_process("NewTopic", "TBW102", 2, 0) == created
    assert len(changes) == 2


def test_send_cannot_create_without_an_inheritable_default_topic(tmp_path: Path) -> None:
    m = manager(tmp_path)
    assert m.create_topic_in_send_process("T", "NoSuchDefault", 4, 0) is None
    assert m.create_topic_in_send_process("T", "SELF_TEST_TOPIC", 4, 0) is None
    assert m.get("T") is None


def test_auto_create_off_strips_the_inherit_bit_even_from_a_persisted_tbw102(tmp_path: Path) -> None:
    m = manager(tmp_path, auto_create_topic_enable=False)
    m.update_topic(TopicConfig("TBW102", 8, 8, RW | PERM_INHERIT))
    assert m.create_topic_in_send_process("T", "TBW102", 4, 0) is None


def test_retry_and_dlq_topics_are_created_once_with_rw_perm(tmp_path: Path) -> None:
    m = manager(tmp_path)
    retry = m.create_retry_topic("g1", 2)
    assert retry == TopicConfig("%RETRY%g1", 2, 2, RW)
    assert m.create_retry_topic("g1", 5) == retry
    assert m.create_dlq_topic("g1") == TopicConfig("%DLQ%g1", 1, 1, RW)


def test_wrapper_carries_the_table_and_data_version(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.update_topic(TopicConfig("T", 3, 3))
    wrapper = m.wrapper()
    assert wrapper.data_version == m.data_version
    assert wrapper.topic_config_table["T"].read_queue_nums == 3
    assert m.delete_topic("T") is not None
    assert "T" not in m.wrapper().topic_config_table
    assert m.delete_topic("T") is None


async def test_topics_survive_a_restart_through_topics_json(tmp_path: Path) -> None:
    m = manager(tmp_path)
    async with trio.open_nursery() as nursery:
        await nursery.start(m.run)
        m.update_topic(TopicConfig("Kept", 5, 6, RW, order=True))
        m.update_topic(TopicConfig("Gone", 1, 1))
        m.delete_topic("Gone")
        # Overriding a system topic sticks too (the file wins over the built-in defaults, as in Java).
        m.update_topic(TopicConfig("SELF_TEST_TOPIC", 2, 2, RW))
        nursery.cancel_scope.cancel()
    assert (tmp_path / "config" / "topics.json").exists()
    again = manager(tmp_path)
    assert again.get("Kept") == TopicConfig("Kept", 5, 6, RW, order=True)
    assert again.get("Gone") is None
    selftest = again.get("SELF_TEST_TOPIC")
    assert selftest is not None and selftest.read_queue_nums == 2
    assert again.data_version == m.data_version


async def test_changes_are_saved_in_the_background_without_waiting_for_shutdown(tmp_path: Path) -> None:
    m = manager(tmp_path)
    async with trio.open_nursery() as nursery:
        await nursery.start(m.run)
        m.update_topic(TopicConfig("Early", 1, 1))
        await m.persister.wait_saved()
        assert manager(tmp_path).get("Early") is not None
        nursery.cancel_scope.cancel()


def test_topics_a_send_creates_are_on_disk_before_the_send_goes_on(tmp_path: Path) -> None:
    """4.9.8's TopicConfigManager.createTopicInSendMessageMethod and createTopicInSendMessageBackMethod persist()
    before returning: a broker killed right after the send keeps the topic its message was stored under."""
    m = manager(tmp_path)
    m.create_topic_in_send_process("Auto", "TBW102", 4, 0)
    m.create_retry_topic("g1", 1)
    m.create_dlq_topic("g1")
    on_disk = manager(tmp_path)  # the file as a kill -9 leaves it: no background save ran
    assert {"Auto", "%RETRY%g1", "%DLQ%g1"} <= set(on_disk.topics)
    assert on_disk.data_version == m.data_version
