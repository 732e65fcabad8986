"""Where ``mqadmin`` still departed from RocketMQ 4.9.8's tools (tools/src/main/java/org/apache/rocketmq/tools/
command/**), found by a review against the threaded embedded cluster; each test failed on the code before."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner, Result

from client.consumer.listener import ConsumeConcurrentlyStatus
from client.consumer.push import PushConsumer
from client.message import Message, MessageExt
from client.mqadmin import main as mqadmin
from client.producer import Producer
from remoting.client import RemotingClient
from remoting.codec.bodies import ConsumerData, HeartbeatData
from remoting.codec.codes import RequestCode
from remoting.codec.command import request
from tests.client.helpers import commit_offset, create_topic, register_dead_broker
from tests.threaded_cluster import ThreadedCluster


def _run(*args: str) -> Result:
    return CliRunner().invoke(mqadmin, list(args))


async def _ignore(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
    return ConsumeConcurrentlyStatus.CONSUME_SUCCESS


async def _listening_consumer(ns: str, topic: str, group: str) -> PushConsumer:
    """A push consumer (not started) of ``group`` on a new one-queue ``topic``, acknowledging everything."""
    await create_topic(ns, topic, queues=1)
    consumer = PushConsumer(group, ns)
    consumer.subscribe(topic)
    consumer.register_message_listener(_ignore)
    return consumer


# -- consumerStatus: one client that cannot say its running info ----------------------------------------------------


@pytest.mark.anyio
async def test_consumer_status_lists_the_other_clients_past_one_that_fails(
    cluster: ThreadedCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Java ConsumerStatusSubCommand reads each connection's running info in its own try/catch
    (e.printStackTrace) and lists the clients that answer; a client that cannot answer GET_CONSUMER_RUNNING_INFO (here
    one that says REQUEST_CODE_NOT_SUPPORTED) does not end the command. Before, it failed with exit status 1."""
    monkeypatch.chdir(tmp_path)  # consumerStatus writes <now>/<clientId> files, as Java's
    ns, addr = cluster.namesrv_addr, cluster.broker_addr
    await create_topic(ns, "StatusMixed", queues=2)
    consumer = PushConsumer("status-mixed-cg", ns)
    consumer.subscribe("StatusMixed")
    consumer.register_message_listener(_ignore)
    async with consumer, RemotingClient() as mute:
        beat = HeartbeatData("10.0.0.9@mute", consumer_data_set=(ConsumerData("status-mixed-cg"),))
        assert (await mute.invoke(addr, request(RequestCode.HEART_BEAT, body=beat.encode()), 5)).code == 0
        args = ("consumerStatus", "-n", ns, "-g", "status-mixed-cg")
        result = await anyio.to_thread.run_sync(lambda: _run(*args))
    assert result.exit_code == 0, result.output
    rows = [line.split() for line in result.output.splitlines()[1:] if line.strip()]
    assert any(row[1:2] == [consumer.instance.client_id] for row in rows), result.output


# -- topicClusterList: the cluster names only -----------------------------------------------------------------------


def test_topic_cluster_list_prints_only_the_cluster_names(cluster: ThreadedCluster) -> None:
    """Java TopicClusterSubCommand prints ``printf("%s%n", cluster)`` per cluster of the topic and no header, so a
    script reading the lines gets no cluster named ``#Cluster``; ``--json`` keeps the ``Cluster`` key."""
    anyio.run(create_topic, cluster.namesrv_addr, "ClusterOfTopic", 1)
    result = _run("topicClusterList", "-n", cluster.namesrv_addr, "-t", "ClusterOfTopic")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == ["DefaultCluster"]


# -- queryMsgById -g/-d and -s true: one id that fails --------------------------------------------------------------


@pytest.mark.anyio
async def test_query_msg_by_id_goes_on_past_an_id_that_fails(cluster: ThreadedCluster) -> None:
    """Java QueryMsgByIdSubCommand.pushMsg (``-g`` with ``-d``) and sendMsg (``-s true``) each catch a failing id
    (e.printStackTrace) and go on to the next one of ``-i``; before, the first bad id ended the command and the good
    ids after it were neither pushed to the consumer nor resent."""
    ns = cluster.namesrv_addr
    consumer = await _listening_consumer(ns, "ByIdMany", "by-id-many-cg")
    async with consumer, Producer("by-id-many-pg", ns) as producer:
        sent = await producer.send(Message("ByIdMany", b"pushed again"))
        ids = f"NOT-AN-ID,{sent.offset_msg_id}"
        client = consumer.instance.client_id
        push = ("queryMsgById", "-n", ns, "-i", ids, "-g", "by-id-many-cg", "-d", client)
        pushed = await anyio.to_thread.run_sync(lambda: _run(*push))
        resend = ("queryMsgById", "-n", ns, "-i", ids, "-s", "true")
        resent = await anyio.to_thread.run_sync(lambda: _run(*resend))
    assert pushed.exit_code == 0, pushed.output
    assert "ConsumeMessageDirectlyResult [" in pushed.output and "consumeResult=CR_SUCCESS" in pushed.output
    assert resent.exit_code == 0, resent.output
    assert f"prepare resend msg. originalMsgId={sent.offset_msg_id}" in resent.output
    assert "SendResult [sendStatus=SEND_OK" in resent.output


# -- statsAll: a group whose broker does not answer ---------------------------------------------------------------


def test_stats_all_lists_a_topic_whose_groups_stats_cannot_be_read(cluster: ThreadedCluster) -> None:
    """Java StatsAllSubCommand.printTopicDetail catches examineConsumeStats(group, topic) (the brokers of the
    group's %RETRY% topic) and viewBrokerStatsData per broker, and prints the row with an accumulation of 0; before,
    a group on a broker that does not answer dropped the whole topic from the listing."""
    ns, addr = cluster.namesrv_addr, cluster.broker_addr
    anyio.run(create_topic, ns, "StatsDeadGroup", 1)
    anyio.run(commit_offset, ns, addr, "stats-dead-cg", "StatsDeadGroup")
    register_dead_broker(cluster, name="broker-0dead", addr="127.0.0.1:1", topics=("%RETRY%stats-dead-cg",))
    result = _run("statsAll", "-n", ns, "-t", "StatsDeadGroup")
    assert result.exit_code == 0, result.output
    rows = [line.split() for line in result.output.splitlines()[1:]]
    assert [row[:3] for row in rows] == [["StatsDeadGroup", "stats-dead-cg", "0"]], result.output


# -- names cut to their column, as Java's UtilAll.frontStringAtLeast --------------------------------------------------


def test_long_topic_names_are_cut_to_their_column_in_the_text_only(cluster: ThreadedCluster) -> None:
    """Java prints a topic through ``UtilAll.frontStringAtLeast(topic, 64)`` in consumerProgress, topicList -c and
    statsAll (broker names at 32, a topicList cluster at 20), so the columns after it stay where the header puts them;
    ours printed the whole name and pushed them right. ``--json`` keeps the whole name."""
    ns, addr = cluster.namesrv_addr, cluster.broker_addr
    topic = "LongTopic" + "x" * 71  # 80 characters, within RocketMQ's 127
    anyio.run(create_topic, ns, topic, 1)
    anyio.run(commit_offset, ns, addr, "long-topic-cg", topic)
    progress = _run("consumerProgress", "-n", ns, "-g", "long-topic-cg")
    assert progress.exit_code == 0, progress.output
    row = progress.output.splitlines()[1]
    assert row[:66] == topic[:64] + "  " and row[66:74] == "broker-a", progress.output
    listed = _run("topicList", "-n", ns, "-c")
    assert listed.exit_code == 0, listed.output
    lines = [line.rstrip() for line in listed.output.splitlines()]
    assert f"{'DefaultCluster':<20}  {topic[:64]}  long-topic-cg" in lines, listed.output
    stats = _run("statsAll", "-n", ns, "-t", topic)
    assert stats.exit_code == 0, stats.output
    assert stats.output.splitlines()[1].startswith(f"{topic[:64]}  long-topic-cg "), stats.output
    as_json = _run("consumerProgress", "-n", ns, "-g", "long-topic-cg", "--json")
    assert as_json.exit_code == 0, as_json.output
    assert [r["Topic"] for r in json.loads(as_json.output)["rows"]] == [topic]


# -- cloneGroupOffset of a source group without offsets -------------------------------------------------------------


def test_clone_group_offset_from_a_group_without_offsets_fails(cluster: ThreadedCluster) -> None:
    """Java CloneGroupOffsetCommand reads the source with examineConsumeStats(srcGroup), which throws "Not found the
    consumer group consume stats" on an empty offset table -> "command failed". Before, a source group with nothing
    to clone (a mistyped name) printed "clone group offset success" and exited 0."""
    ns = cluster.namesrv_addr
    anyio.run(create_topic, ns, "CloneNothing", 1)
    result = _run("cloneGroupOffset", "-n", ns, "-s", "no-such-src-cg", "-d", "clone-dst-cg", "-t", "CloneNothing")
    assert result.exit_code == 1, result.output
    assert "clone group offset success" not in result.output
    assert "Not found the consumer group consume stats" in result.output, result.output


def test_topic_status_of_a_topic_without_queues_fails(cluster: ThreadedCluster) -> None:
    """Java TopicStatusSubCommand reads DefaultMQAdminExtImpl.examineTopicStats, which throws "Not found the topic
    stats info" when the topic's brokers list no queue (a topic made with ``-w 0``) -> "command failed", nothing
    printed. Before, ours printed the header alone and exited 0."""
    ns = cluster.namesrv_addr
    anyio.run(create_topic, ns, "StatusNoQueues", 0)
    result = _run("topicStatus", "-n", ns, "-t", "StatusNoQueues")
    assert result.exit_code == 1, result.output
    assert result.stdout == "", result.stdout
    assert "Not found the topic stats info" in result.stderr, result.stderr


# -- queryMsgByUniqueKey -g/-d: an offset msgId --------------------------------------------------------------------


@pytest.mark.anyio
async def test_query_msg_by_unique_key_pushes_a_message_named_by_its_offset_msg_id(cluster: ThreadedCluster) -> None:
    """QueryMsgByUniqueKeySubCommand ``-g``/``-d`` calls DefaultMQAdminExtImpl.consumeMessageDirectly(group, client,
    topic, msgId), which looks the message up with ``viewMessage(topic, msgId)``: an id MessageDecoder.decodeMessageId
    reads (an offset msgId) is viewed at its broker, only another one is queried as a unique key
    (tools/src/main/java/org/apache/rocketmq/tools/admin/DefaultMQAdminExtImpl.java). Ours queried every id as a
    unique key and failed "query message by key finished, but no message." for an offset msgId."""
    ns = cluster.namesrv_addr
    consumer = await _listening_consumer(ns, "ByUniqueOffset", "by-unique-offset-cg")
    async with consumer, Producer("by-unique-offset-pg", ns) as producer:
        sent = await producer.send(Message("ByUniqueOffset", b"pushed again"))
        client = consumer.instance.client_id
        base = ("queryMsgByUniqueKey", "-n", ns, "-t", "ByUniqueOffset", "-g", "by-unique-offset-cg", "-d", client)
        by_offset = await anyio.to_thread.run_sync(lambda: _run(*base, "-i", sent.offset_msg_id))
        by_unique = await anyio.to_thread.run_sync(lambda: _run(*base, "-i", sent.msg_id))
    for result in (by_offset, by_unique):
        assert result.exit_code == 0, result.output
        assert "ConsumeMessageDirectlyResult [" in result.output and "consumeResult=CR_SUCCESS" in result.output
