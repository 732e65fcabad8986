"""Where ``mqadmin`` and the consumers still departed from RocketMQ 4.9.8 (tools/src/main/java/org/apache/rocketmq/
tools/**, client/src/main/java/org/apache/rocketmq/client/**), found by a review against the threaded embedded
cluster; each test failed on the code before."""

from __future__ import annotations

import json

import anyio
import pytest
from click.testing import CliRunner, Result

from client.admin import Admin
from client.consumer.listener import ConsumeConcurrentlyStatus
from client.consumer.lite_pull import LitePullConsumer
from client.consumer.push import PushConsumer
from client.errors import MQClientError
from client.message import MessageExt
from client.mqadmin import main as mqadmin
from tests.client.helpers import HANG_GUARD, commit_offset, create_topic, register_dead_broker
from tests.threaded_cluster import ThreadedCluster


def _run(*args: str) -> Result:
    return CliRunner().invoke(mqadmin, list(args))


# -- queryTopicConsumeByWho with a dead broker in the topic's route -------------------------------------------------


def test_topic_consumers_are_found_past_a_dead_broker_in_the_topics_route(cluster: ThreadedCluster) -> None:
    """Java DefaultMQAdminExtImpl.queryTopicConsumeByWho asks one broker of the route (the first with an address),
    so a dead broker elsewhere in it does not matter to ``statsAll`` or ``topicList -c``. Before, ours asked every
    broker and failed with the first that did not answer: statsAll -t failed, topicList -c printed no group."""
    ns, addr = cluster.namesrv_addr, cluster.broker_addr
    anyio.run(create_topic, ns, "ByWhoDead", 1)
    anyio.run(commit_offset, ns, addr, "by-who-cg", "ByWhoDead")
    register_dead_broker(cluster, name="broker-zdead", addr="127.0.0.1:1", topics=("ByWhoDead",))
    stats = _run("statsAll", "-n", ns, "-t", "ByWhoDead")
    assert stats.exit_code == 0, stats.output
    assert [line.split()[:2] for line in stats.output.splitlines()[1:]] == [["ByWhoDead", "by-who-cg"]], stats.output
    listed = _run("topicList", "-n", ns, "-c", "--json")
    assert listed.exit_code == 0, listed.output
    rows = [r for r in json.loads(listed.output)["rows"] if r["Topic"] == "ByWhoDead"]
    assert [r["Consumer Group"] for r in rows] == ["by-who-cg"], listed.output


# -- a consumer's group checked at start ---------------------------------------------------------------------------


async def _ignore(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
    return ConsumeConcurrentlyStatus.CONSUME_SUCCESS


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("group", "said"),
    [
        ("DEFAULT_CONSUMER", "consumerGroup can not equal DEFAULT_CONSUMER"),
        ("bad group!", "contains illegal characters"),
        ("g" * 256, "longer than group max length 255"),
        ("  ", "the specified group is blank"),
    ],
)
@pytest.mark.parametrize("kind", ["push", "lite_pull"])
async def test_a_consumer_with_a_group_java_refuses_does_not_start(
    cluster: ThreadedCluster, kind: str, group: str, said: str
) -> None:
    """Java DefaultMQPushConsumerImpl.checkConfig and DefaultLitePullConsumerImpl.checkConfig run
    Validators.checkGroup (blank, longer than 255, illegal characters) and refuse DEFAULT_CONSUMER, failing start()
    with an MQClientException; ours started and registered the group with the broker."""
    ns = cluster.namesrv_addr
    await create_topic(ns, "GroupChecked", 1)
    consumer: PushConsumer | LitePullConsumer
    if kind == "push":
        consumer = PushConsumer(group, ns)
        consumer.register_message_listener(_ignore)
        consumer.subscribe("GroupChecked")
    else:
        consumer = LitePullConsumer(group, ns)
    with pytest.raises(MQClientError, match=said):
        async with consumer:
            pass


# -- numbers as Java's Integer.parseInt / Long.parseLong read them -------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ("updateTopic", "-t", "NumTopic", "-c", "DefaultCluster", "-w", "1_0"),
        ("updateTopic", "-t", "NumTopic", "-c", "DefaultCluster", "-r", "2147483648"),
        ("updateTopic", "-t", "NumTopic", "-c", "DefaultCluster", "-r", "9" * 5000),
        ("checkMsgSendRT", "-t", "NumTopic", "-a", "1_0"),
        ("sendMsgStatus", "-b", "broker-a", "-c", "1_0"),
        ("updateSubGroup", "-g", "num-cg", "-c", "DefaultCluster", "-q", "1_0"),
        ("updateSubGroup", "-g", "num-cg", "-c", "DefaultCluster", "-w", "9223372036854775808"),
    ],
)
def test_a_number_java_cannot_parse_fails_the_command(cluster: ThreadedCluster, args: tuple[str, ...]) -> None:
    """Java reads these options with Integer.parseInt or Long.parseLong (UpdateTopicSubCommand -r/-w,
    UpdateSubGroupSubCommand -q int and -w long, CheckMsgSendRTCommand -a long, SendMsgStatusCommand -c int): an
    underscore or a value past the Java type throws NumberFormatException -> "command failed". Ours read them with
    Python's int(), which takes "1_0" as 10: the topic or group was created, the messages sent."""
    result = _run(args[0], "-n", cluster.namesrv_addr, *args[1:])
    assert isinstance(result.exception, SystemExit), f"not a clean failure: {result.exception!r}"
    assert result.exit_code == 1, result.output
    assert "success" not in result.output, result.output


# -- sendMessage -i -1 --------------------------------------------------------------------------------------------


def test_send_message_with_queue_minus_one_lets_the_producer_choose(cluster: ThreadedCluster) -> None:
    """Java SendMessageCommand sends to the given queue only when ``queueId > -1``; ``-i -1`` is a plain
    producer.send(msg), the producer choosing among the topic's queues (-b then unused). Before, ours sent to
    MessageQueue(topic, -b, -1) and failed for a broker name not in the route."""
    ns = cluster.namesrv_addr
    anyio.run(create_topic, ns, "SendAnyQueue", 2)
    result = _run(
        "sendMessage", "-n", ns, "-t", "SendAnyQueue", "-p", "hi", "-b", "no-such-broker", "-i", "-1", "--json"
    )
    assert result.exit_code == 0, result.output
    [row] = json.loads(result.output)["rows"]
    assert (row["Broker Name"], row["Send Result"]) == ("broker-a", "SEND_OK")
    assert row["QID"] in (0, 1)


def test_send_message_with_i_but_no_b_says_so_before_reading_i() -> None:
    """Java SendMessageCommand checks ``-b`` before it parses ``-i``: without ``-b`` it prints "Broker name must be
    set if the queue is chosen!" and returns, whatever ``-i`` holds. Ours parsed ``-i`` first, failing on ``1_0``."""
    for qid in ("1_0", "x"):
        result = _run("sendMessage", "-n", "127.0.0.1:1", "-t", "T", "-p", "hi", "-i", qid)
        assert (result.exit_code, result.output) == (0, "Broker name must be set if the queue is chosen!"), qid


# -- deleteSubGroup -c: the group's %RETRY% / %DLQ% topics ----------------------------------------------------------


def test_delete_sub_group_of_a_cluster_succeeds_when_deleting_its_retry_topic_fails(cluster: ThreadedCluster) -> None:
    """Java DeleteSubscriptionGroupCommand -c deletes the group from every master, then the %RETRY% and %DLQ% topics
    inside a try/catch (e.printStackTrace): a failure there (here a name server of -n that does not answer) does
    not fail the command. Before, ours exited 1 after the group was deleted."""
    ns, addr = cluster.namesrv_addr, cluster.broker_addr
    created = _run("updateSubGroup", "-n", ns, "-g", "del-cg", "-b", addr)
    assert created.exit_code == 0, created.output
    result = _run("deleteSubGroup", "-n", f"{ns};127.0.0.1:1", "-g", "del-cg", "-c", "DefaultCluster")
    assert result.exit_code == 0, result.output
    said = f"delete subscription group [del-cg] from broker [{addr}] in cluster [DefaultCluster] success."
    assert said in result.output.splitlines(), result.output


# -- checkMsgSendRT: the average of one send, a send that fails before a queue is chosen -----------------------------


def test_check_msg_send_rt_prints_java_s_nan_average_and_unchosen_queue(cluster: ThreadedCluster) -> None:
    """Java CheckMsgSendRTCommand averages the times of all sends but the first as a double, ``elapsed / (amount -
    1)``: one send is 0.0 / 0 -> ``Avg RT: NaN``. Its broker name and queue id are fields the selector sets, ``""``
    and ``0`` until a queue is chosen: a send that fails before (a topic without a writable queue) prints those.
    Ours printed ``Avg RT: 0.00`` and ``null`` for both."""
    ns = cluster.namesrv_addr
    anyio.run(create_topic, ns, "RtOne", 1)
    one = _run("checkMsgSendRT", "-n", ns, "-t", "RtOne", "-a", "1")
    assert one.exit_code == 0, one.output
    assert one.output.splitlines()[-1] == "Avg RT: NaN", one.output
    perm = _run("updateTopicPerm", "-n", ns, "-t", "RtOne", "-c", "DefaultCluster", "-p", "4")
    assert perm.exit_code == 0, perm.output
    anyio.run(_wait_read_only, ns, "RtOne")
    failed = _run("checkMsgSendRT", "-n", ns, "-t", "RtOne", "-a", "1", "--json")
    assert failed.exit_code == 0, failed.output
    [row] = json.loads(failed.output)["rows"]
    assert (row["Broker Name"], row["QID"], row["Send Result"]) == ("", 0, False), failed.output


async def _wait_read_only(ns: str, topic: str) -> None:
    async with Admin(ns) as admin:
        with anyio.fail_after(HANG_GUARD):
            while any(qd.perm != 4 for qd in (await admin.topic_route(topic)).queue_datas):
                await anyio.sleep(0.02)
