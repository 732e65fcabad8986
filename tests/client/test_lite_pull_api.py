"""The rest of DefaultLitePullConsumer's API (RocketMQ 4.9.8,
client/src/main/java/org/apache/rocketmq/client/impl/consumer/DefaultLitePullConsumerImpl.java): ``unsubscribe``,
``commitSync(Map, persist)``, ``registerTopicMessageQueueChangeListener``, BROADCASTING consumption with its
local offset file, against a real broker and name server, and ``setConsumeFromWhere``'s check."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from client.admin import Admin
from client.consumer import lite_pull
from client.consumer.lite_pull import LitePullConsumer
from client.errors import MQClientError, TopicRouteNotFoundError
from remoting.codec.bodies import PERM_WRITE, ConsumeFromWhere, MessageModel, MessageQueue
from remoting.codec.bodies.admin import loads_fastjson
from tests.client.helpers import HANG_GUARD, create_topic, poll_until, send_bodies, wait_until
from tests.threaded_cluster import ThreadedCluster

pytestmark = pytest.mark.anyio

FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET


async def test_unsubscribe_drops_the_topic_and_persists_its_offsets(cluster: ThreadedCluster) -> None:
    """After ``unsubscribe`` the topic's queues leave the assignment, nothing of it is polled any more, and the
    offsets committed before are on the broker; the other topic goes on."""
    await create_topic(cluster.namesrv_addr, "LiteUnsubA", queues=2)
    await create_topic(cluster.namesrv_addr, "LiteUnsubB", queues=2)
    await send_bodies(cluster.namesrv_addr, "LiteUnsubA", [b"a0", b"a1"])
    async with LitePullConsumer("lite-unsub", cluster.namesrv_addr, consume_from_where=FIRST) as consumer:
        await consumer.subscribe("LiteUnsubA")
        await consumer.subscribe("LiteUnsubB")
        assert len(await poll_until(consumer, 2)) == 2
        await consumer.commit(persist=False)
        await consumer.unsubscribe("LiteUnsubA")
        assert {mq.topic for mq in consumer.assignment()} == {"LiteUnsubB"}
        assert "LiteUnsubA" not in consumer.subscribed_topics()
        committed = {
            mq.queue_id: await consumer.committed(mq) for mq in await consumer.fetch_message_queues("LiteUnsubA")
        }
        await send_bodies(cluster.namesrv_addr, "LiteUnsubA", [b"a2", b"a3"])
        await send_bodies(cluster.namesrv_addr, "LiteUnsubB", [b"b0"])
        later = await poll_until(consumer, 1)
        later += await consumer.poll(timeout=1.0)
    assert sorted(committed.values()) == [1, 1]  # one message went to each queue (round robin)
    assert [m.body for m in later] == [b"b0"]


async def test_unsubscribe_in_assign_mode_drops_the_assigned_queues(cluster: ThreadedCluster) -> None:
    await create_topic(cluster.namesrv_addr, "LiteUnsubAssign", queues=1)
    async with LitePullConsumer("lite-unsub-assign", cluster.namesrv_addr) as consumer:
        mqs = await consumer.fetch_message_queues("LiteUnsubAssign")
        await consumer.assign(mqs)
        await consumer.unsubscribe("LiteUnsubAssign")
        await send_bodies(cluster.namesrv_addr, "LiteUnsubAssign", [b"x"])
        assert consumer.assignment() == set()
        assert await consumer.poll(timeout=1.0) == []


async def test_commit_of_an_offset_map_persists_now_or_at_the_next_persist(cluster: ThreadedCluster) -> None:
    """``commit({mq: offset})`` writes that offset, not the polled one; with ``persist=False`` the broker gets it at
    the next persist (here: the shutdown), as Java's ``commitSync(Map, false)`` leaves it to the 5 s timer, and
    ``committed`` answers it meanwhile. A queue not assigned is skipped."""
    await create_topic(cluster.namesrv_addr, "LiteCommitMap", queues=1)
    await send_bodies(cluster.namesrv_addr, "LiteCommitMap", [f"m{i}".encode() for i in range(8)])
    stranger = MessageQueue("LiteCommitMap", "no-such-broker", 0)
    async with LitePullConsumer("lite-commit-map", cluster.namesrv_addr, auto_commit=False) as consumer:
        [mq] = await consumer.fetch_message_queues("LiteCommitMap")
        await consumer.assign([mq])
        assert len(await poll_until(consumer, 8)) == 8
        await consumer.commit({mq: 3, stranger: 5})
        assert await consumer.committed(mq) == 3
        await consumer.commit({mq: 6}, persist=False)
        assert await consumer.committed(mq) == 6  # memory first, as Java's MEMORY_FIRST_THEN_STORE
    async with LitePullConsumer("lite-commit-map", cluster.namesrv_addr) as consumer:
        assert await consumer.committed(mq) == 6


async def test_a_queue_change_listener_hears_of_new_queues(
    cluster: ThreadedCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The listener is told when the topic's queues change (here: 2 to 4), not before."""
    monkeypatch.setattr(lite_pull, "TOPIC_METADATA_FIRST_CHECK", 0.05)
    await create_topic(cluster.namesrv_addr, "LiteQueueChange", queues=2)
    heard: list[tuple[str, set[MessageQueue]]] = []

    async def listener(topic: str, queues: set[MessageQueue]) -> None:
        heard.append((topic, queues))

    async with LitePullConsumer(
        "lite-queue-change", cluster.namesrv_addr, topic_metadata_check_interval=0.05
    ) as consumer:
        await consumer.register_topic_message_queue_change_listener("LiteQueueChange", listener)
        await anyio.sleep(0.5)  # several checks
        assert heard == []
        await create_topic(cluster.namesrv_addr, "LiteQueueChange", queues=4)
        await wait_until(lambda: bool(heard))
        await anyio.sleep(0.3)
    assert len(heard) == 1
    topic, queues = heard[0]
    assert topic == "LiteQueueChange" and {mq.queue_id for mq in queues} == {0, 1, 2, 3}


async def test_a_listener_registered_before_start_is_told_only_of_changes(
    cluster: ThreadedCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Registered before start, the queues are read at start (Java's ``operateAfterRunning``), so an unchanged
    topic is not reported, a changed one is; a plain function works as a listener too."""
    monkeypatch.setattr(lite_pull, "TOPIC_METADATA_FIRST_CHECK", 0.05)
    await create_topic(cluster.namesrv_addr, "LiteQueueSame", queues=2)
    heard: list[str] = []
    consumer = LitePullConsumer("lite-queue-same", cluster.namesrv_addr, topic_metadata_check_interval=0.05)
    await consumer.register_topic_message_queue_change_listener("LiteQueueSame", lambda t, q: heard.append(t))
    async with consumer:
        await anyio.sleep(0.5)  # several checks
        assert heard == []
        await create_topic(cluster.namesrv_addr, "LiteQueueSame", queues=3)
        await wait_until(lambda: bool(heard))
    assert heard == ["LiteQueueSame"]


async def test_a_message_queue_listener_hears_each_allocation_after_its_pull_tasks_moved(
    cluster: ThreadedCluster,
) -> None:
    """``subscribe(topic, expr, listener)``: the listener gets the topic, every readable queue and this member's share
    each time a rebalance changes the share (not on passes that change nothing), with the assignment already moved;
    one that raises is logged and the consumer goes on."""
    await create_topic(cluster.namesrv_addr, "LiteMqListener", queues=4)
    heard: list[tuple[str, int, set[MessageQueue], set[MessageQueue]]] = []

    def listener(topic: str, mq_all: set[MessageQueue], mq_divided: set[MessageQueue]) -> None:
        heard.append((topic, len(mq_all), set(mq_divided), first.assignment()))
        raise RuntimeError("a listener that fails")

    async with LitePullConsumer("lite-mq-listener", cluster.namesrv_addr) as first:
        await first.subscribe("LiteMqListener", "*", listener=listener)
        assert [(t, n, len(d)) for t, n, d, _ in heard] == [("LiteMqListener", 4, 4)]
        await first.do_rebalance()
        assert len(heard) == 1  # nothing changed
        async with LitePullConsumer("lite-mq-listener", cluster.namesrv_addr) as second:
            await second.subscribe("LiteMqListener")
            await wait_until(lambda: len(heard) == 2)
            _, total, share, assigned = heard[1]
            assert total == 4 and len(share) == 2 and assigned == share == first.assignment()
        await wait_until(lambda: len(heard) == 3)
        assert len(heard[2][2]) == 4


async def test_a_message_queue_listener_may_subscribe_another_topic(cluster: ThreadedCluster) -> None:
    """The listener runs once the pass released the rebalance lock (Java holds none while calling it), so it may
    subscribe, unsubscribe or rebalance: inside the lock, ``subscribe``'s own rebalance raised."""
    await create_topic(cluster.namesrv_addr, "LiteFirst", queues=2)
    await create_topic(cluster.namesrv_addr, "LiteSecond", queues=2)
    errors: list[BaseException] = []
    async with LitePullConsumer("lite-listener-subscribes", cluster.namesrv_addr) as consumer:

        async def listener(topic: str, mq_all: set[MessageQueue], mq_divided: set[MessageQueue]) -> None:
            if topic == "LiteFirst" and "LiteSecond" not in consumer.subscribed_topics():
                try:
                    await consumer.subscribe("LiteSecond")
                except BaseException as exc:
                    errors.append(exc)
                    raise

        await consumer.subscribe("LiteFirst", "*", listener=listener)
        await wait_until(lambda: len(consumer.assignment()) == 4)
    assert errors == []


async def test_broadcasting_consumers_each_get_everything_and_resume_from_their_file(
    cluster: ThreadedCluster, tmp_path: Path
) -> None:
    """Two BROADCASTING lite consumers of one group each take every queue and poll every message; their offsets go
    to the local file (the broker has none for the group), and a restart goes on from it."""
    await create_topic(cluster.namesrv_addr, "LiteBroadcast", queues=2)
    await send_bodies(cluster.namesrv_addr, "LiteBroadcast", [f"b{i}".encode() for i in range(6)])
    options = {
        "message_model": MessageModel.BROADCASTING,
        "consume_from_where": FIRST,
        "offset_store_dir": tmp_path / "offsets",
    }
    async with (
        LitePullConsumer("lite-bc", cluster.namesrv_addr, **options) as one,  # type: ignore[arg-type]
        LitePullConsumer("lite-bc", cluster.namesrv_addr, **options) as two,  # type: ignore[arg-type]
    ):
        await one.subscribe("LiteBroadcast")
        await two.subscribe("LiteBroadcast")
        assert len(one.assignment()) == len(two.assignment()) == 2
        got_one = await poll_until(one, 6)
        got_two = await poll_until(two, 6)
        await one.commit(persist=False)
        await two.commit(persist=False)
    assert sorted(m.body for m in got_one) == sorted(m.body for m in got_two) == [f"b{i}".encode() for i in range(6)]
    files = sorted((tmp_path / "offsets").rglob("offsets.json"))
    assert [p.parent.parent.name.endswith("#2") for p in files] == [False, True]  # one file per running consumer
    for path in files:
        table = loads_fastjson(path.read_bytes())["offsetTable"]  # Java's OffsetSerializeWrapper form
        assert sum(offset for mq, offset in table.items() if mq.topic == "LiteBroadcast") == 6
    await send_bodies(cluster.namesrv_addr, "LiteBroadcast", [b"b6"])
    async with LitePullConsumer("lite-bc", cluster.namesrv_addr, **options) as again:  # type: ignore[arg-type]
        await again.subscribe("LiteBroadcast")
        rest = await poll_until(again, 1)
        rest += await again.poll(timeout=1.0)
    assert [m.body for m in rest] == [b"b6"]


@pytest.mark.parametrize(
    "where",
    [
        ConsumeFromWhere.CONSUME_FROM_MIN_OFFSET,
        ConsumeFromWhere.CONSUME_FROM_MAX_OFFSET,
        ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST,
    ],
)
def test_a_deprecated_consume_from_where_is_refused(where: ConsumeFromWhere) -> None:
    """DefaultLitePullConsumer.setConsumeFromWhere throws "Invalid ConsumeFromWhere Value" for anything but
    LAST_OFFSET, FIRST_OFFSET and TIMESTAMP: RebalanceLitePullImpl has no case for the others and would never start a
    queue with them."""
    with pytest.raises(ValueError, match="Invalid ConsumeFromWhere Value"):
        LitePullConsumer("lite-deprecated-where", "127.0.0.1:1", consume_from_where=where)


async def test_fetch_message_queues_of_a_topic_without_readable_queues_raises(cluster: ThreadedCluster) -> None:
    """Java's ``fetchMessageQueues`` (``MQAdminImpl.fetchSubscribeMessageQueues``,
    client/src/main/java/org/apache/rocketmq/client/impl/MQAdminImpl.java) throws "Can not find Message Queue for
    this topic" when the name server's route has no readable queue (a write-only topic), as for no route at all.
    Before: an empty list came back, as if the topic had been found."""
    async with Admin(cluster.namesrv_addr) as admin:
        await admin.create_topic("LiteWriteOnly", read_queue_nums=2, write_queue_nums=2, perm=PERM_WRITE)
        with anyio.fail_after(HANG_GUARD):
            while True:
                try:
                    if (await admin.topic_route("LiteWriteOnly")).queue_datas:
                        break
                except TopicRouteNotFoundError:
                    await anyio.sleep(0.02)
    async with LitePullConsumer("lite-write-only", cluster.namesrv_addr) as consumer:
        with pytest.raises(MQClientError, match="Can not find Message Queue for this topic"):
            await consumer.fetch_message_queues("LiteWriteOnly")


async def test_fetch_message_queues_fails_in_javas_words_whatever_the_cause(cluster: ThreadedCluster) -> None:
    """``MQAdminImpl.fetchSubscribeMessageQueues`` wraps every failure, its own "Namesrv return empty" too, in
    "Can not find Message Queue for this topic, <topic>" with the FAQ hint (the cause kept); ours raised the
    inner text for a write-only topic and a ``TopicRouteNotFoundError`` ("no route info of topic ...") for a topic
    the name server does not know."""
    async with Admin(cluster.namesrv_addr) as admin:
        await admin.create_topic("LiteWriteOnlyWords", read_queue_nums=1, write_queue_nums=1, perm=PERM_WRITE)
        with anyio.fail_after(HANG_GUARD):
            while True:
                try:
                    if (await admin.topic_route("LiteWriteOnlyWords")).queue_datas:
                        break
                except TopicRouteNotFoundError:
                    await anyio.sleep(0.02)
    async with LitePullConsumer("lite-fetch-words", cluster.namesrv_addr) as consumer:
        for topic in ("LiteWriteOnlyWords", "LiteNoSuchTopicWords"):
            with pytest.raises(MQClientError) as refused:
                await consumer.fetch_message_queues(topic)
            hint = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."
            assert str(refused.value) == f"Can not find Message Queue for this topic, {topic}{hint}"
            assert refused.value.__cause__ is not None
