"""Where ``mqadmin`` still departed from RocketMQ 4.9.8's tools (tools/src/main/java/org/apache/rocketmq/tools/
command/**), found by a review against the threaded embedded cluster; each test failed on the code before."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner, Result

from client.consumer.listener import ConsumeConcurrentlyStatus
from client.consumer.push import PushConsumer
from client.message import MessageExt
from client.mqadmin import main as mqadmin
from remoting.client import RemotingClient
from remoting.codec.bodies import ConsumerData, HeartbeatData
from remoting.codec.codes import RequestCode
from remoting.codec.command import request
from tests.client.helpers import create_topic
from tests.threaded_cluster import ThreadedCluster


def _run(*args: str) -> Result:
    return CliRunner().invoke(mqadmin, list(args))


async def _ignore(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
    return ConsumeConcurrentlyStatus.CONSUME_SUCCESS


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
