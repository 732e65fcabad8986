"""Light Message Queues over real sockets (RocketMQ 4.9.8's LMQ broker classes): a raw SEND_MESSAGE_V2 carrying
``INNER_MULTI_DISPATCH`` as a Java client sends it, pulls of ``%LMQ%`` queue 0 (also a held long poll woken by an
arrival), LMQ topics and groups that need no creation, LMQ offsets in ``lmqConsumerOffset.json`` across a restart,
and the ``maxLmqConsumeQueueNum`` answer."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from broker.embedded import EmbeddedCluster
from broker.pop import PopService
from remoting.client import RemotingClient
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand, request
from remoting.codec.message import iter_records
from tests.broker.helpers import broker_from_conf, create_topic_request
from tests.conftest import SMALL_STORE
from tests.processors.conftest import pull_request, send_request

LMQ = {"enable_lmq": True, "enable_multi_dispatch": True}
TOPIC = "LmqParent"
NO_SUSPEND = 0x4  # the subscription comes with the pull


def multi_send(queues: str, body: bytes, queue_id: int = 0, topic: str = TOPIC) -> RemotingCommand:
    props = f"TAGS\x01TagA\x02INNER_MULTI_DISPATCH\x01{queues}\x02WAIT\x01true\x02UNIQ_KEY\x01{body.hex()}"
    return send_request(topic, body, queue_id=queue_id, properties=props)


@pytest.fixture
async def client() -> AsyncIterator[RemotingClient]:
    async with RemotingClient() as c:
        yield c


async def _create(client: RemotingClient, cluster: EmbeddedCluster) -> None:
    answer = await client.invoke(cluster.broker_addr, create_topic_request(TOPIC, queues=2), 5)
    assert answer.code == ResponseCode.SUCCESS


async def _send(client: RemotingClient, cluster: EmbeddedCluster, cmd: RemotingCommand) -> RemotingCommand:
    return await client.invoke(cluster.broker_addr, cmd, 5)


async def test_a_multi_dispatched_send_is_pulled_from_its_topic_and_each_lmq_queue(
    tmp_path: Path, client: RemotingClient
) -> None:
    async with EmbeddedCluster(tmp_path / "c", **SMALL_STORE, **LMQ) as cluster:  # type: ignore[arg-type]
        await _create(client, cluster)
        for i, queues in enumerate(["%LMQ%room1,%LMQ%room2", "%LMQ%room2"]):
            answer = await _send(client, cluster, multi_send(queues, f"m{i}".encode(), queue_id=1))
            assert answer.code == ResponseCode.SUCCESS, answer.remark
            assert answer.ext_fields["queueId"] == "1" and answer.ext_fields["queueOffset"] == str(i)
        # No topic or group was created for the LMQ names: a config is made up per request.
        pulled = await client.invoke(
            cluster.broker_addr, pull_request("%LMQ%room2", group="%LMQ%room2", sys_flag=NO_SUSPEND), 5
        )
        assert pulled.code == ResponseCode.SUCCESS, pulled.remark
        records = list(iter_records(pulled.body))
        assert [r.body for r in records] == [b"m0", b"m1"]
        assert [r.queue_offset for r in records] == [0, 1]  # the record's own: its parent queue's, as stored
        assert [r.properties["INNER_MULTI_QUEUE_OFFSET"] for r in records] == ["0,0", "1"]
        assert pulled.ext_fields["maxOffset"] == "2" and pulled.ext_fields["nextBeginOffset"] == "2"
        one = await client.invoke(
            cluster.broker_addr, pull_request("%LMQ%room1", group="%LMQ%room1", sys_flag=NO_SUSPEND), 5
        )
        assert [r.body for r in iter_records(one.body)] == [b"m0"]
        parent = await client.invoke(cluster.broker_addr, pull_request(TOPIC, queue_id=1, sys_flag=NO_SUSPEND), 5)
        assert [r.body for r in iter_records(parent.body)] == [b"m0", b"m1"]
        ctx = cluster.controller.context
        assert ctx.topics.get("%LMQ%room2") is not None and "%LMQ%room2" not in ctx.topics.topics
        assert ctx.groups.get("%LMQ%room2") is None


async def test_a_held_pull_on_an_lmq_queue_is_woken_by_the_arrival(tmp_path: Path, client: RemotingClient) -> None:
    async with EmbeddedCluster(tmp_path / "c", **SMALL_STORE, **LMQ) as cluster:  # type: ignore[arg-type]
        await _create(client, cluster)
        hold = cluster.controller.hold
        answers: list[RemotingCommand] = []

        async def held_pull() -> None:
            pull = pull_request("%LMQ%live", group="%LMQ%live", suspend_ms=60_000)
            answers.append(await client.invoke(cluster.broker_addr, pull, 90))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(held_pull)
            while hold.held_count == 0:
                await trio.sleep(0.01)
            sent = await _send(client, cluster, multi_send("%LMQ%live", b"wake"))
            assert sent.code == ResponseCode.SUCCESS
            assert hold.held_count == 0  # woken by the arrival itself, not by a periodic check
        [answer] = answers
        assert answer.code == ResponseCode.SUCCESS
        assert [r.body for r in iter_records(answer.body)] == [b"wake"]


def _offset_request(code: int, group: str, topic: str, offset: int | None = None) -> RemotingCommand:
    fields = {"consumerGroup": group, "topic": topic, "queueId": "0"}
    if offset is not None:
        fields["commitOffset"] = str(offset)
    return request(code, fields)


async def test_lmq_group_offsets_go_to_lmq_consumer_offset_json_and_survive_a_restart(
    tmp_path: Path, client: RemotingClient
) -> None:
    root = tmp_path / "c"
    async with EmbeddedCluster(root, **SMALL_STORE, **LMQ) as cluster:  # type: ignore[arg-type]
        await _create(client, cluster)
        for i in range(3):
            assert (await _send(client, cluster, multi_send("%LMQ%o", f"m{i}".encode()))).code == ResponseCode.SUCCESS
        update = _offset_request(RequestCode.UPDATE_CONSUMER_OFFSET, "%LMQ%o", "%LMQ%o", 2)
        assert (await client.invoke(cluster.broker_addr, update, 5)).code == ResponseCode.SUCCESS
        plain = _offset_request(RequestCode.UPDATE_CONSUMER_OFFSET, "G", TOPIC, 1)
        assert (await client.invoke(cluster.broker_addr, plain, 5)).code == ResponseCode.SUCCESS
        await cluster.restart_broker()
        config_dir = Path(cluster.controller.context.config.store_path_root_dir) / "config"
        saved = json.loads((config_dir / "lmqConsumerOffset.json").read_text())
        assert saved["lmqOffsetTable"] == {"%LMQ%o@%LMQ%o": 2}
        assert saved["offsetTable"] == {f"{TOPIC}@G": {"0": 1}}
        assert "%LMQ%o@%LMQ%o" not in json.loads((config_dir / "consumerOffset.json").read_text())["offsetTable"]
        query = _offset_request(RequestCode.QUERY_CONSUMER_OFFSET, "%LMQ%o", "%LMQ%o")
        answer = await client.invoke(cluster.broker_addr, query, 5)
        assert (answer.code, answer.ext_fields["offset"]) == (ResponseCode.SUCCESS, "2")
        # The LMQ queue came back from the store too: the pull from the committed offset finds the last message.
        pulled = await client.invoke(
            cluster.broker_addr, pull_request("%LMQ%o", group="%LMQ%o", offset=2, sys_flag=NO_SUSPEND), 5
        )
        assert [r.body for r in iter_records(pulled.body)] == [b"m2"]


async def test_past_max_lmq_consume_queue_num_a_multi_dispatched_send_is_refused_as_java(
    tmp_path: Path, client: RemotingClient
) -> None:
    async with EmbeddedCluster(tmp_path / "c", **SMALL_STORE, **LMQ, max_lmq_consume_queue_num=1) as cluster:  # type: ignore[arg-type]
        await _create(client, cluster)
        assert (await _send(client, cluster, multi_send("%LMQ%a,%LMQ%b", b"x"))).code == ResponseCode.SUCCESS
        refused = await _send(client, cluster, multi_send("%LMQ%c", b"y"))
        assert refused.code == ResponseCode.SYSTEM_ERROR
        assert refused.remark == (
            "[LMQ_CONSUME_QUEUE_NUM_EXCEEDED]broker config enableLmq and enableMultiDispatch, lmq consumeQueue num "
            "exceed maxLmqConsumeQueueNum config num, default limit 2w."
        )
        plain = send_request(TOPIC, b"plain", properties="TAGS\x01T")
        assert (await _send(client, cluster, plain)).code == ResponseCode.SUCCESS


async def test_past_max_lmq_consume_queue_num_an_lmq_pull_is_refused_as_java(
    tmp_path: Path, client: RemotingClient
) -> None:
    """DefaultMessageStore.getMessage (4.9.8) returns null for an LMQ topic while the store has more LMQ
    ConsumeQueues than ``maxLmqConsumeQueueNum`` (enableLmq and enableMultiDispatch), and PullMessageProcessor
    answers SYSTEM_ERROR "store getMessage return null"; other topics are pulled as before."""
    async with EmbeddedCluster(tmp_path / "c", **SMALL_STORE, **LMQ, max_lmq_consume_queue_num=1) as cluster:  # type: ignore[arg-type]
        await _create(client, cluster)
        assert (await _send(client, cluster, multi_send("%LMQ%a,%LMQ%b", b"x"))).code == ResponseCode.SUCCESS
        pulled = await client.invoke(
            cluster.broker_addr, pull_request("%LMQ%a", group="%LMQ%a", sys_flag=NO_SUSPEND), 5
        )
        assert (pulled.code, pulled.remark) == (ResponseCode.SYSTEM_ERROR, "store getMessage return null")
        parent = await client.invoke(cluster.broker_addr, pull_request(TOPIC, sys_flag=NO_SUSPEND), 5)
        assert [r.body for r in iter_records(parent.body)] == [b"x"]


async def test_off_by_default_lmq_names_need_a_topic_and_the_property_is_only_stored(
    tmp_path: Path, client: RemotingClient
) -> None:
    async with EmbeddedCluster(tmp_path / "c", **SMALL_STORE) as cluster:
        await _create(client, cluster)
        assert (await _send(client, cluster, multi_send("%LMQ%a", b"x"))).code == ResponseCode.SUCCESS
        pulled = await client.invoke(
            cluster.broker_addr, pull_request("%LMQ%a", group="%LMQ%a", sys_flag=NO_SUSPEND), 5
        )
        assert pulled.code == ResponseCode.TOPIC_NOT_EXIST
        assert not (
            Path(cluster.controller.context.config.store_path_root_dir) / "config" / "lmqConsumerOffset.json"
        ).exists()


async def test_delete_topic_of_an_lmq_name_destroys_its_queue(tmp_path: Path, client: RemotingClient) -> None:
    async with EmbeddedCluster(tmp_path / "c", **SMALL_STORE, **LMQ) as cluster:  # type: ignore[arg-type]
        await _create(client, cluster)
        assert (await _send(client, cluster, multi_send("%LMQ%del", b"x"))).code == ResponseCode.SUCCESS
        store = cluster.controller.context.store
        assert store.max_offset_in_queue("%LMQ%del", 0) == 1
        delete = request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "%LMQ%del"})
        assert (await client.invoke(cluster.broker_addr, delete, 5)).code == ResponseCode.SUCCESS
        assert ("%LMQ%del", 0) not in store.consume_queues  # DefaultMessageStore.cleanUnusedLmqTopic
        assert (await _send(client, cluster, multi_send("%LMQ%del", b"y"))).code == ResponseCode.SUCCESS
        assert store.max_offset_in_queue("%LMQ%del", 0) == 1  # a fresh queue from offset 0


async def test_broker_conf_keys_turn_it_on(tmp_path: Path, client: RemotingClient) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("listenPort=0\nnamesrvAddr=127.0.0.1:1\nenableLmq=true\nenableMultiDispatch=true\n")
    async with broker_from_conf(conf, tmp_path / "store") as (_controller, addr):
        assert (await client.invoke(addr, create_topic_request(TOPIC, queues=1), 5)).code == ResponseCode.SUCCESS
        assert (await client.invoke(addr, multi_send("%LMQ%conf", b"c"), 5)).code == ResponseCode.SUCCESS
        pulled = await client.invoke(addr, pull_request("%LMQ%conf", group="%LMQ%conf", sys_flag=NO_SUSPEND), 5)
        assert [r.body for r in iter_records(pulled.body)] == [b"c"]


async def test_a_multi_dispatched_send_counts_one_put_of_its_own_topic(tmp_path: Path, client: RemotingClient) -> None:
    """RocketMQ 4.9.8 counts a put once, under the message's own topic, however many queues it is dispatched to:
    SendMessageProcessor ``handlePutMessageResult`` (incTopicPutNums / incTopicPutSize of ``msg.getTopic()``,
    incBrokerPutNums of the message count) and CommitLog.putMessage's store totals (getSinglePutMessageTopicTimesTotal
    of ``msg.getTopic()``); the LMQ entries MultiDispatch adds are no puts, so an LMQ has no put items."""
    async with EmbeddedCluster(tmp_path / "c", **SMALL_STORE, **LMQ) as cluster:  # type: ignore[arg-type]
        await _create(client, cluster)
        answer = await _send(client, cluster, multi_send("%LMQ%room1,%LMQ%room2", b"m0", queue_id=1))
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        for key in ("%LMQ%room1", "%LMQ%room2"):
            view = await client.invoke(
                cluster.broker_addr,
                request(RequestCode.VIEW_BROKER_STATS_DATA, {"statsName": "TOPIC_PUT_NUMS", "statsKey": key}),
                5,
            )
            assert view.code == ResponseCode.SYSTEM_ERROR, f"{key} has put items"
            assert view.remark == f"The stats <TOPIC_PUT_NUMS> <{key}> not exist"
        runtime = await client.invoke(cluster.broker_addr, request(RequestCode.GET_BROKER_RUNTIME_INFO), 5)
        assert runtime.code == ResponseCode.SUCCESS
        table = json.loads(runtime.body)["table"]
        assert table["msgPutTotalTodayNow"] == "1"
        assert table["putMessageTimesTotal"] == "1"
        stats = cluster.controller.context.stats
        assert stats.incoming == {TOPIC: (1, stats.put_size_total)}


async def test_update_broker_config_turns_multi_dispatch_and_its_limit_on_live(
    tmp_path: Path, client: RemotingClient
) -> None:
    """4.9.8's store reads ``enableMultiDispatch`` and ``maxLmqConsumeQueueNum`` from its MessageStoreConfig at every
    put (store/src/main/java/org/apache/rocketmq/store/MultiDispatch.java, DefaultMessageStore.java
    ``isLmqConsumeQueueNumExceeded``), the object UPDATE_BROKER_CONFIG (``mqadmin updateBrokerConfig``) updates: both
    apply to the next send. They were read at start only (found by a review)."""
    async with EmbeddedCluster(tmp_path / "c", **SMALL_STORE, enable_lmq=True) as cluster:
        await _create(client, cluster)
        update = request(RequestCode.UPDATE_BROKER_CONFIG, body=b"enableMultiDispatch=true\n")
        assert (await client.invoke(cluster.broker_addr, update, 5)).code == ResponseCode.SUCCESS
        assert (await _send(client, cluster, multi_send("%LMQ%live1,%LMQ%live2", b"x"))).code == ResponseCode.SUCCESS
        pulled = await client.invoke(
            cluster.broker_addr, pull_request("%LMQ%live1", group="%LMQ%live1", sys_flag=NO_SUSPEND), 5
        )
        assert [r.body for r in iter_records(pulled.body or b"")] == [b"x"], pulled.remark
        update = request(RequestCode.UPDATE_BROKER_CONFIG, body=b"maxLmqConsumeQueueNum=1\n")
        assert (await client.invoke(cluster.broker_addr, update, 5)).code == ResponseCode.SUCCESS
        refused = await _send(client, cluster, multi_send("%LMQ%live3", b"y"))
        assert refused.code == ResponseCode.SYSTEM_ERROR
        assert (refused.remark or "").startswith("[LMQ_CONSUME_QUEUE_NUM_EXCEEDED]")


async def test_lmq_pulls_are_counted_under_one_lmq_stats_key(tmp_path: Path, client: RemotingClient) -> None:
    """With ``enableLmq`` 4.9.8's broker counts its statistics in an LmqBrokerStatsManager
    (store/src/main/java/org/apache/rocketmq/store/stats/LmqBrokerStatsManager.java): every ``%LMQ%`` topic and group
    of a pull is counted as ``%LMQ%``, so the items stay few however many LMQs clients use, and
    VIEW_BROKER_STATS_DATA answers ``%LMQ%@%LMQ%``, not one item per LMQ (found by a review: one item per LMQ)."""
    async with EmbeddedCluster(tmp_path / "c", **SMALL_STORE, **LMQ) as cluster:  # type: ignore[arg-type]
        await _create(client, cluster)
        answer = await _send(client, cluster, multi_send("%LMQ%s1,%LMQ%s2", b"m0"))
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        for name in ("%LMQ%s1", "%LMQ%s2"):
            pulled = await client.invoke(cluster.broker_addr, pull_request(name, group=name, sys_flag=NO_SUSPEND), 5)
            assert [r.body for r in iter_records(pulled.body or b"")] == [b"m0"]

        async def view(key: str) -> RemotingCommand:
            fields = {"statsName": "GROUP_GET_NUMS", "statsKey": key}
            return await client.invoke(cluster.broker_addr, request(RequestCode.VIEW_BROKER_STATS_DATA, fields), 5)

        one = await view("%LMQ%s1@%LMQ%s1")
        assert (one.code, one.remark) == (
            ResponseCode.SYSTEM_ERROR,
            "The stats <GROUP_GET_NUMS> <%LMQ%s1@%LMQ%s1> not exist",
        )
        assert (await view("%LMQ%@%LMQ%")).code == ResponseCode.SUCCESS


async def test_lmq_pops_count_their_latency_under_one_lmq_stats_key(tmp_path: Path, client: RemotingClient) -> None:
    """LmqBrokerStatsManager collapses ``incGroupGetLatency`` too (store/src/main/java/org/apache/rocketmq/store/
    stats/LmqBrokerStatsManager.java, 4.9.8 and 5.3.3 without ``enableLmqStats``), which 5.3.3's
    PopMessageProcessor calls once per pop that found messages: a pop of an LMQ by an LMQ group counts its latency
    under ``-1@%LMQ%@%LMQ%`` as its gets under ``%LMQ%@%LMQ%``, never one item per LMQ (found by a review: the pop's
    latency kept each LMQ's names)."""
    async with EmbeddedCluster(tmp_path / "c", **SMALL_STORE, **LMQ) as cluster:  # type: ignore[arg-type]
        await _create(client, cluster)
        answer = await _send(client, cluster, multi_send("%LMQ%p1,%LMQ%p2", b"m0"))
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        controller = cluster.controller
        pop = PopService(controller.context, controller.timer.rewrite)  # as the proxy builds it (proxy/startup.py)
        for name in ("%LMQ%p1", "%LMQ%p2"):
            assert [p.message.body for p in pop.pop(name, name, 32, 30_000, None)] == [b"m0"]

        async def view(name: str, key: str) -> RemotingCommand:
            fields = {"statsName": name, "statsKey": key}
            return await client.invoke(cluster.broker_addr, request(RequestCode.VIEW_BROKER_STATS_DATA, fields), 5)

        assert (await view("GROUP_GET_NUMS", "%LMQ%@%LMQ%")).code == ResponseCode.SUCCESS
        one = await view("GROUP_GET_LATENCY", "-1@%LMQ%p1@%LMQ%p1")
        assert (one.code, one.remark) == (
            ResponseCode.SYSTEM_ERROR,
            "The stats <GROUP_GET_LATENCY> <-1@%LMQ%p1@%LMQ%p1> not exist",
        )
        assert (await view("GROUP_GET_LATENCY", "-1@%LMQ%@%LMQ%")).code == ResponseCode.SUCCESS
