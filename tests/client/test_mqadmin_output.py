"""``mqadmin`` text output that scripts parse, line for line against RocketMQ 4.9.8's tools
(tools/src/main/java/org/apache/rocketmq/tools/command/**), run through the real entry point against the threaded
embedded cluster; each test failed on the code before."""

from __future__ import annotations

import re

import anyio
import pytest
from click.testing import CliRunner, Result

from client.admin import Admin
from client.consumer.listener import ConsumeConcurrentlyStatus
from client.consumer.push import PushConsumer
from client.message import Message, MessageExt
from client.mqadmin import main as mqadmin
from client.mqadmin_support import JAVA_FAILURES
from client.producer import Producer
from tests.client.helpers import HANG_GUARD, commit_offset, create_topic, topic_on_two_brokers
from tests.threaded_cluster import ThreadedCluster


def _run(*args: str) -> Result:
    return CliRunner().invoke(mqadmin, list(args))


async def _send(namesrv: str, topic: str, count: int) -> None:
    async with Producer("output-pg", namesrv) as producer:
        for _ in range(count):
            await producer.send(Message(topic, b"body"))


def test_query_cq_prints_java_null_for_the_absent_extension_fields(cluster: ThreadedCluster) -> None:
    """Java QueryConsumeQueueCommand prints each entry with ``ConsumeQueueData.toString()``
    (common/src/main/java/org/apache/rocketmq/common/protocol/body/ConsumeQueueData.java), whose string
    concatenation shows an absent ``extendDataJson``/``bitMap``/``msg`` as ``'null'``; before, Python's ``'None'``."""
    ns = cluster.namesrv_addr
    anyio.run(create_topic, ns, "CqText", 1)
    anyio.run(_send, ns, "CqText", 2)
    result = _run("queryCq", "-n", ns, "-t", "CqText", "-q", "0", "-i", "0", "-c", "2")
    assert result.exit_code == 0, result.output
    entries = [line for line in result.output.splitlines() if line.startswith("ConsumeQueueData{")]
    assert len(entries) == 2, result.output
    for line in entries:
        assert line.endswith(", tagsCode=0, extendDataJson='null', bitMap='null', eval=false, msg='null'}"), line


def test_get_consumer_config_prints_java_s_fields_in_declaration_order(cluster: ThreadedCluster) -> None:
    """Java GetConsumerConfigSubCommand prints ``SubscriptionGroupConfig``'s declared fields in their declaration
    order (``getClass().getDeclaredFields()``; common/src/main/java/org/apache/rocketmq/common/subscription/
    SubscriptionGroupConfig.java has nine in 4.9.8), one ``%-40s=  %s`` line each. Before, the keys came sorted
    (``brokerId`` first) with a tenth, ``consumeMessageOrderly``, that 4.9.8 does not have."""
    ns, addr = cluster.namesrv_addr, cluster.broker_addr
    created = _run("updateSubGroup", "-n", ns, "-b", addr, "-g", "config-order-cg", "-r", "5")
    assert created.exit_code == 0, created.output
    result = _run("getConsumerConfig", "-n", ns, "-g", "config-order-cg")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "=============================DefaultCluster:broker-a============================="
    fields = [(line[:40], line[40:]) for line in lines[1:] if line]
    assert fields == [
        (f"{key:<40}", f"=  {value}")
        for key, value in (
            ("groupName", "config-order-cg"),
            ("consumeEnable", "true"),
            ("consumeFromMinEnable", "false"),
            ("consumeBroadcastEnable", "false"),
            ("retryQueueNums", "1"),
            ("retryMaxTimes", "5"),
            ("brokerId", "0"),
            ("whichBrokerWhenConsumeSlowly", "1"),
            ("notifyConsumerIdsChangedEnable", "true"),
        )
    ], result.output


def _broker_lines(tabs: str, addr: str, name: str) -> list[str]:
    """A ``BrokerData`` as fastjson's PrettyFormat writes it, its fields at ``tabs``: the map of ``Long`` keys opens
    on its field's line and closes on the next, at the field's indent."""
    return [f'{tabs}"brokerAddrs":{{0:"{addr}"', f"{tabs}}},", f'{tabs}"brokerName":"{name}",',
            f'{tabs}"cluster":"DefaultCluster"']  # fmt: skip


def _queue_lines(tabs: str, name: str, queues: int) -> list[str]:
    return [f'{tabs}"brokerName":"{name}",', f'{tabs}"perm":6,', f'{tabs}"readQueueNums":{queues},',
            f'{tabs}"topicSysFlag":0,', f'{tabs}"writeQueueNums":{queues}']  # fmt: skip


@pytest.mark.anyio
async def test_topic_route_prints_fastjson_s_pretty_format(cluster: ThreadedCluster) -> None:
    """Java TopicRouteSubCommand prints ``topicRouteData.toJson(true)``: fastjson 1.2.69's PrettyFormat
    (com/alibaba/fastjson/serializer/JavaBeanSerializer.java, ListSerializer.java, MapSerializer.java), which
    indents with tabs, writes ``"key":value`` with no space, puts each element of a list, even of one, on its own
    lines a tab deeper, and writes the ``Long`` keys of ``brokerAddrs`` bare (``{0:"..."``, no line break before
    them). Scripts grep this text (``"brokerName":"broker-a"``); before, ``json.dumps(indent=1)`` wrote
    ``"brokerName": "broker-a"`` at one-space indents, then a one-element list was kept on one line (``[{``)."""
    ns, addr_a = cluster.namesrv_addr, cluster.broker_addr
    await create_topic(ns, "RouteText", 2)
    result = await anyio.to_thread.run_sync(lambda: _run("topicRoute", "-n", ns, "-t", "RouteText"))
    assert result.exit_code == 0, result.output
    # fastjson 1.2.69's ListSerializer takes its pretty branch for any non-empty list: a one-element list opens
    # on its field's line, its element on the next, a tab deeper, as with more elements.
    expected = ["{", '\t"brokerDatas":[', "\t\t{", *_broker_lines("\t\t\t", addr_a, "broker-a"), "\t\t}", "\t],",
                '\t"filterServerTable":{},', '\t"queueDatas":[', "\t\t{", *_queue_lines("\t\t\t", "broker-a", 2),
                "\t\t}", "\t]", "}"]  # fmt: skip
    assert result.output.splitlines() == expected, result.output

    # Two brokers: a list of more than one element puts each on its own lines, a tab deeper.
    addr_b, stop_b = await topic_on_two_brokers(cluster, "RouteTwo", queues=1)
    try:
        result = await anyio.to_thread.run_sync(lambda: _run("topicRoute", "-n", ns, "-t", "RouteTwo"))
        async with Admin(ns) as admin:
            route = await admin.topic_route("RouteTwo")
    finally:
        await anyio.to_thread.run_sync(stop_b)
    assert result.exit_code == 0, result.output
    addrs = {"broker-a": addr_a, "broker-b": addr_b}
    brokers = [["\t\t{", *_broker_lines("\t\t\t", addrs[bd.broker_name], bd.broker_name), "\t\t}"]
               for bd in route.broker_datas]  # fmt: skip
    queues = [["\t\t{", *_queue_lines("\t\t\t", qd.broker_name, 1), "\t\t}"] for qd in route.queue_datas]
    assert len(brokers) == len(queues) == 2
    expected = ["{", '\t"brokerDatas":[', *brokers[0][:-1], "\t\t},", *brokers[1], "\t],",
                '\t"filterServerTable":{},', '\t"queueDatas":[', *queues[0][:-1], "\t\t},", *queues[1], "\t]",
                "}"]  # fmt: skip
    assert result.output.splitlines() == expected, result.output


def test_a_failed_command_says_java_s_command_failed_line_on_stderr(cluster: ThreadedCluster) -> None:
    """RocketMQ's tools always exit 0 (MQAdminStartup.main0 catches and prints the stack trace), so scripts written
    for them spot a failure by the first line of that trace on stderr: ``SubCommandException: <class> command
    failed``, the class being the command's (``this.getClass().getSimpleName() + " command failed"`` in each
    tools/src/main/java/org/apache/rocketmq/tools/command/**/*SubCommand.java). Ours keeps exit status 1 and the
    cause, and now says that line too; before, only ``mqadmin: <error>``. queryCq catches its own failure and prints
    the cause only (queue/QueryConsumeQueueCommand.java), so it has no such line."""
    ns = cluster.namesrv_addr
    failed = "org.apache.rocketmq.tools.command.SubCommandException: %s command failed"
    for args, java_class in (
        (("topicStatus", "-t", "NoSuchTopic"), "TopicStatusSubCommand"),
        (("topicRoute", "-t", "NoSuchTopic"), "TopicRouteSubCommand"),
        (("consumerProgress", "-g", "no-such-group"), "ConsumerProgressSubCommand"),
        (("consumerConnection", "-g", "no-such-group"), "ConsumerConnectionSubCommand"),
        (("brokerStatus", "-b", "127.0.0.1:1"), "BrokerStatusSubCommand"),
        (("cleanExpiredCQ", "-b", "127.0.0.1:1"), "CleanExpiredCQSubCommand"),
        (("brokerConsumeStats", "-b", "127.0.0.1:1"), "BrokerConsumeStatsSubCommad"),  # sic, Java's class name
    ):
        result = _run(args[0], "-n", ns, *args[1:])
        assert result.exit_code == 1, (args, result.output)
        assert result.stdout == "", (args, result.stdout)
        assert result.stderr.splitlines()[0] == failed % java_class, (args, result.stderr)
    result = _run("queryCq", "-n", ns, "-t", "NoSuchTopic", "-q", "0", "-i", "0")
    assert result.exit_code == 1, result.output
    assert "command failed" not in result.stderr, result.stderr


def test_allocate_mq_allocates_as_java_s_tool_over_its_unsorted_lists(cluster: ThreadedCluster) -> None:
    """Java AllocateMQSubCommand hands AllocateMessageQueueAveragely the queues in the iteration order of the
    ``HashSet`` ``topicRouteData2TopicSubscribeInfo`` builds (by ``MessageQueue.hashCode()``'s bucket) and the ``-i``
    addresses as given, neither sorted (the strategy sorts nothing; only a consumer's rebalance does), and prints
    ``RebalanceResult``'s ``HashMap`` in its iteration order. For ``AllocMQ``'s 4 queues on broker-a that order is
    3, 2, 1, 0, and the three addresses iterate 10.0.0.3, 10.0.0.2, 10.0.0.1. Before, both lists were sorted, so
    another address got each block (tools/src/main/java/org/apache/rocketmq/tools/command/topic/
    AllocateMQSubCommand.java, client/src/main/java/org/apache/rocketmq/client/impl/factory/MQClientInstance.java)."""
    ns = cluster.namesrv_addr
    anyio.run(create_topic, ns, "AllocMQ", 4)

    def mqs(*ids: int) -> str:
        return "[" + ",".join(f'{{"brokerName":"broker-a","queueId":{i},"topic":"AllocMQ"}}' for i in ids) + "]"

    result = _run("allocateMQ", "-n", ns, "-t", "AllocMQ", "-i", "10.0.0.1,10.0.0.2,10.0.0.3")
    assert result.exit_code == 0, result.output
    assert result.output == f'{{"result":{{"10.0.0.3":{mqs(0)},"10.0.0.2":{mqs(1)},"10.0.0.1":{mqs(3, 2)}}}}}\n'
    result = _run("allocateMQ", "-n", ns, "-t", "AllocMQ", "-i", "2.2.2.2,1.1.1.1")
    assert result.exit_code == 0, result.output
    assert result.output == f'{{"result":{{"2.2.2.2":{mqs(3, 2)},"1.1.1.1":{mqs(1, 0)}}}}}\n'


def _java_bucket(text: str, capacity: int) -> int:
    """The bucket of ``text`` in a ``java.util.HashSet`` of ``capacity`` (``String.hashCode()``, spread as
    ``HashMap.hash``: ``h ^ h >>> 16``)."""
    h = 0
    for unit in text.encode("utf-16-be").hex(" ", 2).split():
        h = (31 * h + int(unit, 16)) & 0xFFFFFFFF
    return (h ^ (h >> 16)) & (capacity - 1)


def _in_java_hash_set_order(names: list[str]) -> bool:
    """Whether ``names`` iterate as a default ``HashSet`` of them does: buckets ascending (the table starts at 16
    and doubles past 3/4 full; few enough names here that no bucket grows a tree)."""
    capacity = 16
    while len(names) > capacity * 3 // 4:
        capacity *= 2
    buckets = [_java_bucket(name, capacity) for name in names]
    return buckets == sorted(buckets)


@pytest.mark.anyio
async def test_topic_list_and_the_lists_over_it_follow_java_s_hash_set_order(cluster: ThreadedCluster) -> None:
    """Java's ``TopicList.topicList`` is a ``HashSet`` (common/src/main/java/org/apache/rocketmq/common/protocol/
    body/TopicList.java) that fastjson fills from the name server's answer, and TopicListSubCommand (plain and
    ``-c``), ConsumerProgressSubCommand without ``-g`` (a group per ``%RETRY%`` topic) and StatsAllSubCommand
    print in its iteration order: by hash bucket, not by name. Before, the name server's order was printed."""
    ns = cluster.namesrv_addr
    for topic in ("OrderZeta", "OrderAlpha", "OrderMid", "orderLower"):
        await create_topic(ns, topic, 1)
    for group in ("order-cg-b", "order-cg-a", "order-cg-c"):
        created = await anyio.to_thread.run_sync(lambda g=group: _run("updateSubGroup", "-n", ns, "-b",
                                                                      cluster.broker_addr, "-g", g))  # fmt: skip
        assert created.exit_code == 0, created.output
        await create_topic(ns, f"%RETRY%{group}", 1)

    plain = await anyio.to_thread.run_sync(lambda: _run("topicList", "-n", ns))
    assert plain.exit_code == 0, plain.output
    topics = plain.output.splitlines()
    assert {"OrderZeta", "OrderAlpha", "%RETRY%order-cg-a"} <= set(topics)
    assert _in_java_hash_set_order(topics), topics

    def listed(output: str, width: int, start: int = 0) -> list[str]:
        """The distinct names of a column, in the order first printed."""
        return list(dict.fromkeys(line[start : start + width].rstrip() for line in output.splitlines()[1:] if line))

    java_order = [t for t in topics if not t.startswith(("%RETRY%", "%DLQ%"))]
    clustered = await anyio.to_thread.run_sync(lambda: _run("topicList", "-n", ns, "-c"))
    assert clustered.exit_code == 0, clustered.output
    assert listed(clustered.output, 64, 22) == java_order, clustered.output
    stats = await anyio.to_thread.run_sync(lambda: _run("statsAll", "-n", ns))
    assert stats.exit_code == 0, stats.output
    assert listed(stats.output, 64) == java_order, stats.output
    progress = await anyio.to_thread.run_sync(lambda: _run("consumerProgress", "-n", ns))
    assert progress.exit_code == 0, progress.output
    groups = [t[len("%RETRY%") :] for t in topics if t.startswith("%RETRY%")]
    assert listed(progress.output, 64) == groups, progress.output


@pytest.mark.anyio
async def test_query_cq_with_a_group_prints_its_subscription_as_fastjson_pretty_json(
    cluster: ThreadedCluster,
) -> None:
    """Java QueryConsumeQueueCommand prints the group's subscription as ``JSON.toJSONString(subscriptionData,
    true)`` (tools/src/main/java/org/apache/rocketmq/tools/command/queue/QueryConsumeQueueCommand.java): fastjson's
    pretty bean, fields sorted, its ``tagsSet``/``codeSet`` written on one line in their ``HashSet`` order (for
    TagC, TagA, TagB: TagA, TagC, TagB by hash bucket). Before, ``SubscriptionData [...]``, its ``toString()``."""
    ns = cluster.namesrv_addr
    await create_topic(ns, "QcqTopic", 1)
    await _send(ns, "QcqTopic", 1)
    consumer = PushConsumer("qcq-cg", ns)
    consumer.subscribe("QcqTopic", "TagC || TagA || TagB")

    async def ignore(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer.register_message_listener(ignore)
    async with consumer:
        args = ("queryCq", "-n", ns, "-t", "QcqTopic", "-q", "0", "-i", "0", "-c", "1", "-g", "qcq-cg")
        result = await anyio.to_thread.run_sync(lambda: _run(*args))
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    version = next((line for line in lines if line.startswith('\t"subVersion":')), "")
    assert re.fullmatch(r'\t"subVersion":\d+,', version), result.output
    assert lines[:11] == [
        "Subscription data: ",
        "{",
        '\t"classFilterMode":false,',
        '\t"codeSet":[2598919,2598921,2598920],',
        '\t"expressionType":"TAG",',
        '\t"subString":"TagC || TagA || TagB",',
        version,
        '\t"tagsSet":["TagA","TagC","TagB"],',
        '\t"topic":"QcqTopic"',
        "}",
        "======================================",
    ], result.output


def test_failed_commands_say_java_s_exact_exception_line(cluster: ThreadedCluster) -> None:
    """The first stderr line is the one RocketMQ 4.9.8's ``MQAdminStartup.main0`` prints from ``e.printStackTrace()``,
    which is not always ``SubCommandException: <class> command failed``: QueryMsgTraceByIdSubCommand and
    AddWritePermSubCommand concatenate without the space (``+ "command failed"``), and SendMessageCommand throws a
    ``RuntimeException`` (tools/src/main/java/org/apache/rocketmq/tools/command/trace/QueryMsgTraceByIdSubCommand.java,
    namesrv/AddWritePermSubCommand.java, message/SendMessageCommand.java)."""
    ns = cluster.namesrv_addr
    result = _run("queryMsgTraceById", "-n", ns, "-i", "7F00000100002A9F0000000000000000")
    assert result.exit_code == 1, result.output
    assert result.stderr.splitlines()[0] == (
        "org.apache.rocketmq.tools.command.SubCommandException: QueryMsgTraceByIdSubCommandcommand failed"
    ), result.stderr
    anyio.run(create_topic, ns, "SendFails", 1)
    result = _run("sendMessage", "-n", ns, "-t", "SendFails", "-p", "body", "-b", "no-such-broker", "-i", "0")
    assert result.exit_code == 1, result.output
    assert result.stderr.splitlines()[0] == "java.lang.RuntimeException: SendMessageCommand command failed", (
        result.stderr
    )
    # addWritePerm catches each name server's failure itself; only its outer catch, hard to reach, says the line.
    assert JAVA_FAILURES["addwriteperm"] == "AddWritePermSubCommandcommand failed"


def test_lists_over_a_topic_s_groups_follow_java_s_hash_set_order(cluster: ThreadedCluster) -> None:
    """``GroupList.groupList`` is a ``HashSet`` (common/src/main/java/org/apache/rocketmq/common/protocol/body/
    GroupList.java) that ``topicList -c`` (topic/TopicListSubCommand.java), ``statsAll``
    (stats/StatsAllSubCommand.java) and ``queryMsgById``'s tracks (``DefaultMQAdminExtImpl.messageTrackDetail``)
    iterate: cg-gamma, cg-alpha, cg-beta, cg-delta by hash bucket. Before, the groups came sorted."""
    ns, addr = cluster.namesrv_addr, cluster.broker_addr
    anyio.run(create_topic, ns, "GroupOrder", 1)
    for group in ("cg-delta", "cg-beta", "cg-alpha", "cg-gamma"):
        anyio.run(commit_offset, ns, addr, group, "GroupOrder")
    java = ["cg-gamma", "cg-alpha", "cg-beta", "cg-delta"]

    result = _run("topicList", "-n", ns, "-c")
    assert result.exit_code == 0, result.output
    assert [line.split()[2] for line in result.output.splitlines() if " GroupOrder " in line] == java, result.output

    result = _run("statsAll", "-n", ns, "-t", "GroupOrder")
    assert result.exit_code == 0, result.output
    assert [line.split()[1] for line in result.output.splitlines()[1:]] == java, result.output

    async def send() -> str:
        async with Producer("output-pg", ns) as producer:
            return (await producer.send(Message("GroupOrder", b"body"))).offset_msg_id

    offset_msg_id = anyio.run(send)
    result = _run("queryMsgById", "-n", ns, "-i", offset_msg_id)
    assert result.exit_code == 0, result.output
    assert re.findall(r"MessageTrack \[consumerGroup=([^,]+),", result.output) == java, result.output


def test_allocate_mq_over_only_commas_allocates_to_no_one(cluster: ThreadedCluster) -> None:
    """Java AllocateMQSubCommand splits ``-i`` with ``String.split(",")``, which drops every trailing empty string
    once the separator is found: ``","`` is no address at all, so the loop allocates nothing and prints an empty
    ``RebalanceResult`` (tools/src/main/java/org/apache/rocketmq/tools/command/topic/AllocateMQSubCommand.java).
    Before, ``java_split`` kept one empty address and the command failed with "currentCID is empty"."""
    ns = cluster.namesrv_addr
    anyio.run(create_topic, ns, "AllocNone", 2)
    result = _run("allocateMQ", "-n", ns, "-t", "AllocNone", "-i", ",")
    assert result.exit_code == 0, result.output
    assert result.output == '{"result":{}}\n'


@pytest.mark.parametrize(
    ("args", "first_line"),
    [
        (("updateTopic", "-t", "NumText", "-c", "DefaultCluster", "-r", "1_0"),
         "org.apache.rocketmq.tools.command.SubCommandException: UpdateTopicSubCommand command failed"),
        (("updateSubGroup", "-g", "num-text-cg", "-c", "DefaultCluster", "-q", "x"),
         "org.apache.rocketmq.tools.command.SubCommandException: UpdateSubGroupSubCommand command failed"),
        (("sendMessage", "-t", "NumText", "-p", "body", "-b", "broker-a", "-i", "x"),
         "java.lang.RuntimeException: SendMessageCommand command failed"),
        (("clusterList", "-i", "x"), 'java.lang.NumberFormatException: For input string: "x"'),
    ],
)  # fmt: skip
def test_a_number_java_cannot_parse_says_java_s_failure_line(
    cluster: ThreadedCluster, args: tuple[str, ...], first_line: str
) -> None:
    """A number Java's ``Integer.parseInt``/``Long.parseLong`` refuses throws NumberFormatException inside the
    command's try, so ``MQAdminStartup`` prints the same ``<class> command failed`` line as for any other failure
    (topic/UpdateTopicSubCommand.java, consumer/UpdateSubGroupSubCommand.java; SendMessageCommand.java wraps it in a
    RuntimeException); ClusterListSubCommand parses ``-i`` before its try, so the NumberFormatException itself is
    the line (cluster/ClusterListSubCommand.java). Before, click's usage text came first and no Java line at all."""
    result = _run(args[0], "-n", cluster.namesrv_addr, *args[1:])
    assert result.exit_code == 1, result.output
    assert result.stderr.splitlines()[0] == first_line, result.stderr


def test_get_consumer_config_goes_over_the_brokers_in_java_s_hash_map_order(cluster: ThreadedCluster) -> None:
    """Java GetConsumerConfigSubCommand iterates ``ClusterInfo.brokerAddrTable``, a ``HashMap`` (consumer/
    GetConsumerConfigSubCommand.java, common/src/main/java/org/apache/rocketmq/common/protocol/body/ClusterInfo.java):
    broker-b's bucket comes before broker-a's, so broker-b's block is printed first. Before, the brokers came
    sorted."""
    ns = cluster.namesrv_addr
    addr_b, stop_b = cluster.start_extra_broker("broker-b")
    try:

        async def both_registered() -> None:
            async with Admin(ns) as admin:
                with anyio.fail_after(HANG_GUARD):
                    while len((await admin.cluster_info()).broker_addr_table) < 2:
                        await anyio.sleep(0.02)

        anyio.run(both_registered)
        for addr in (cluster.broker_addr, addr_b):
            created = _run("updateSubGroup", "-n", ns, "-b", addr, "-g", "config-brokers-cg")
            assert created.exit_code == 0, created.output
        result = _run("getConsumerConfig", "-n", ns, "-g", "config-brokers-cg")
    finally:
        stop_b()
    assert result.exit_code == 0, result.output
    assert [line for line in result.output.splitlines() if line.startswith("=====")] == [
        "=============================DefaultCluster:broker-b=============================",
        "=============================DefaultCluster:broker-a=============================",
    ], result.output


async def _never_called(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
    return ConsumeConcurrentlyStatus.CONSUME_SUCCESS


@pytest.mark.anyio
async def test_consumer_connection_lists_the_subscriptions_in_java_s_concurrent_hash_map_order(
    cluster: ThreadedCluster,
) -> None:
    """ConsumerConnectionSubCommand prints ``ConsumerConnection.subscriptionTable``, a ``ConcurrentHashMap`` fastjson
    fills (common/src/main/java/org/apache/rocketmq/common/protocol/body/ConsumerConnection.java), in its iteration
    order: ConnMid, %RETRY%conn-order-cg, ConnZeta, ConnAlpha (as java.util.concurrent.ConcurrentHashMap lists them,
    whatever order they are put in). Ours printed the broker's order."""
    ns = cluster.namesrv_addr
    topics = ("ConnZeta", "ConnAlpha", "ConnMid")
    for topic in topics:
        await create_topic(ns, topic, 1)
    consumer = PushConsumer("conn-order-cg", ns)
    for topic in topics:
        consumer.subscribe(topic)
    consumer.register_message_listener(_never_called)
    async with consumer:
        result = await anyio.to_thread.run_sync(lambda: _run("consumerConnection", "-n", ns, "-g", "conn-order-cg"))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    start = lines.index("Below is subscription:") + 2
    listed = [line.split()[0] for line in lines[start : lines.index("", start)]]
    assert listed == ["ConnMid", "%RETRY%conn-order-cg", "ConnZeta", "ConnAlpha"], result.stdout


@pytest.mark.anyio
async def test_consumer_connection_lists_twelve_subscriptions_as_a_concurrent_hash_map_resized_at_twelve(
    cluster: ThreadedCluster,
) -> None:
    """A ``ConcurrentHashMap`` doubles its 16 bins once it holds 12 keys (``addCount``: ``size >= sizeCtl``, 3/4 of
    the table), where a ``HashMap`` waits for the 13th (``++size > threshold``), and its ``transfer`` may reverse a
    bin's keys. So eleven topics and the group's ``%RETRY%`` topic print as java.util.concurrent.ConcurrentHashMap
    lists them (checked with jshell, whatever order they are put in): %RETRY%conn-chm-cg after ConnT10, not between
    ConnT05 and ConnT06 as a HashMap of the twelve has it."""
    ns = cluster.namesrv_addr
    topics = [f"ConnT{i:02d}" for i in range(11)]
    for topic in topics:
        await create_topic(ns, topic, 1)
    consumer = PushConsumer("conn-chm-cg", ns)
    for topic in topics:
        consumer.subscribe(topic)
    consumer.register_message_listener(_never_called)
    async with consumer:
        result = await anyio.to_thread.run_sync(lambda: _run("consumerConnection", "-n", ns, "-g", "conn-chm-cg"))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    start = lines.index("Below is subscription:") + 2
    listed = [line.split()[0] for line in lines[start : lines.index("", start)]]
    assert listed == [
        *("ConnT04", "ConnT05", "ConnT06", "ConnT07", "ConnT00", "ConnT01", "ConnT02", "ConnT03", "ConnT10"),
        *("%RETRY%conn-chm-cg", "ConnT08", "ConnT09"),
    ], result.stdout


@pytest.mark.anyio
async def test_producer_lists_the_groups_in_java_s_hash_map_order(cluster: ThreadedCluster) -> None:
    """ProducerSubCommand goes over ``ProducerTableInfo.data``, a ``Map`` fastjson fills as a ``HashMap``
    (common/src/main/java/org/apache/rocketmq/common/protocol/body/ProducerTableInfo.java;
    tools/src/main/java/org/apache/rocketmq/tools/command/producer/ProducerSubCommand.java): the groups come by hash
    bucket, not in the broker's order. Ours printed them as the broker listed them."""
    ns = cluster.namesrv_addr
    await create_topic(ns, "ProducerOrder", 1)
    groups = ["pg-order-a", "pg-order-b", "pg-order-c"]
    assert not _in_java_hash_set_order(groups)  # registered out of the HashMap's order
    async with Producer(groups[0], ns) as p0, Producer(groups[1], ns) as p1, Producer(groups[2], ns) as p2:
        for producer in (p0, p1, p2):
            await producer.send(Message("ProducerOrder", b"x"))
        result = await anyio.to_thread.run_sync(_run, "producer", "-n", ns, "-b", cluster.broker_addr)
    assert result.exit_code == 0, result.output
    printed = list(dict.fromkeys(re.findall(r"^producer group \((\S+)\) instance", result.output, re.MULTILINE)))
    assert set(groups) <= set(printed), result.output
    assert _in_java_hash_set_order(printed), printed
