"""``mqadmin`` message commands against RocketMQ 4.9.8's ``tools/src/main/java/org/apache/rocketmq/tools/command/
message/``: the printed ``MessageExt`` text, queries that find nothing, a unique key given to ``queryMsgById`` and a
charset the JVM would not know."""

from __future__ import annotations

import re
from contextlib import suppress

import anyio
from click.testing import CliRunner, Result

from client.admin import Admin
from client.errors import TopicRouteNotFoundError
from client.message import Message, SendResult
from client.mqadmin import main as mqadmin
from client.producer import Producer
from remoting.codec.bodies import PERM_WRITE
from tests.client.helpers import HANG_GUARD, create_topic, fill_queues
from tests.threaded_cluster import ThreadedCluster


def _run(*args: str) -> Result:
    return CliRunner().invoke(mqadmin, list(args), catch_exceptions=False)


def _send(ns: str, topic: str, body: bytes, **kw: str) -> SendResult:
    async def main() -> SendResult:
        await create_topic(ns, topic, 1)
        async with Producer(f"pg-{topic}", ns) as producer:
            return await producer.send(Message(topic, body, **kw))

    return anyio.run(main)


def test_printed_message_text_names_the_broker_and_lists_the_body_bytes(cluster: ThreadedCluster) -> None:
    """printMsg, printMsgByQueue and consumeMessage print each message with Java's ``MessageExt.toString()``
    (common/src/main/java/org/apache/rocketmq/common/message/MessageExt.java): it starts with the ``brokerName`` the
    pull set (PullAPIWrapper.processPullResult) and Message.toString() shows the body as ``Arrays.toString(byte[])``,
    signed bytes. Before, the broker name was missing and the body read ``[3 bytes]``."""
    ns = cluster.namesrv_addr
    _send(ns, "MsgText", "hé".encode())  # 0x68 0xC3 0xA9
    commands = [
        ("printMsg", "-n", ns, "-t", "MsgText"),
        ("printMsgByQueue", "-n", ns, "-t", "MsgText", "-a", "broker-a", "-i", "0", "-p", "true", "-d", "true"),
        ("consumeMessage", "-n", ns, "-t", "MsgText"),
    ]
    for args in commands:
        result = _run(*args)
        assert result.exit_code == 0, result.output
        assert " MessageExt [brokerName=broker-a, queueId=0, storeSize=" in result.output, result.output
        assert ", body=[104, -61, -87], transactionId='null'}] BODY: hé" in result.output, result.output


def test_query_by_key_or_unique_key_that_finds_nothing_fails(cluster: ThreadedCluster) -> None:
    """QueryMsgByKeySubCommand and QueryMsgByUniqueKeySubCommand read with MQAdminImpl.queryMessage
    (client/src/main/java/org/apache/rocketmq/client/impl/MQAdminImpl.java), which throws MQClientException(NO_MESSAGE,
    "query message by key finished, but no message.") when no broker has a match: the command fails with it. Before,
    both succeeded, printing an empty table or nothing at all."""
    ns = cluster.namesrv_addr
    sent = _send(ns, "MsgNone", b"x", keys="present")
    by_key = _run("queryMsgByKey", "-n", ns, "-t", "MsgNone", "-k", "absent")
    assert by_key.exit_code == 1, by_key.output
    assert "query message by key finished, but no message." in by_key.output
    assert "#Message ID" not in by_key.output  # Java prints the header only after the query answered
    missing = sent.msg_id[:-4] + ("0000" if not sent.msg_id.endswith("0000") else "0001")
    by_unique = _run("queryMsgByUniqueKey", "-n", ns, "-t", "MsgNone", "-i", missing)
    assert by_unique.exit_code == 1, by_unique.output
    assert "query message by key finished, but no message." in by_unique.output
    found = _run("queryMsgByKey", "-n", ns, "-t", "MsgNone", "-k", "present")
    assert found.exit_code == 0 and sent.msg_id in found.output, found.output


def test_query_msg_by_id_with_a_unique_key_says_no_message(cluster: ThreadedCluster) -> None:
    """A producer's msgId (UNIQ_KEY: ip, pid, class-loader hash...) has an offset msgId's length, but its "port" is out
    of range: MessageDecoder.decodeMessageId's InetSocketAddress throws and MQAdminImpl.viewMessage answers
    MQClientException "query message by id finished, but no message." Before, the command failed with "bad remoting
    address '<ip>:<huge port>'", which does not say the id is not an offset msgId."""
    ns = cluster.namesrv_addr
    sent = _send(ns, "MsgById", b"x")
    result = _run("queryMsgById", "-n", ns, "-i", sent.msg_id)
    assert result.exit_code == 1, result.output
    assert "query message by id finished, but no message" in result.output, result.output
    assert "bad remoting address" not in result.output
    assert _run("queryMsgById", "-n", ns, "-i", sent.offset_msg_id).exit_code == 0


def test_print_msg_with_an_unknown_charset_skips_the_bodies_and_goes_on(cluster: ThreadedCluster) -> None:
    """PrintMessageSubCommand.printMessage and PrintMessageByQueueCommand.printMessage catch the
    UnsupportedEncodingException of ``new String(body, charsetName)`` per message and go on: the queue's lines are
    printed, the messages left out. Before, Python's LookupError escaped the command as a traceback."""
    ns = cluster.namesrv_addr
    _send(ns, "MsgCharset", b"x")
    printed = _run("printMsg", "-n", ns, "-t", "MsgCharset", "-c", "NO-SUCH-CHARSET")
    assert printed.exit_code == 0, printed.output
    assert "minOffset=0, maxOffset=1, MessageQueue [topic=MsgCharset, brokerName=broker-a, queueId=0]" in printed.output
    assert "MSGID:" not in printed.output
    assert "-" * 56 in printed.output
    by_queue = ("printMsgByQueue", "-n", ns, "-t", "MsgCharset", "-a", "broker-a", "-i", "0", "-p", "true")
    queued = _run(*by_queue, "-d", "true", "-c", "NO-SUCH-CHARSET", "-f", "true")
    assert queued.exit_code == 0, queued.output
    assert "MSGID:" not in queued.output
    assert "Tag: " not in queued.output  # no tags sent: nothing counted, but the command ends normally
    not_printed = _run(*by_queue, "-d", "false", "-c", "NO-SUCH-CHARSET")  # no body to decode: Java prints the line
    assert not_printed.exit_code == 0 and "BODY: NOT PRINT BODY" in not_printed.output, not_printed.output


def _java_bucket(key: str, capacity: int) -> int:
    """The bucket of ``key`` in a ``java.util.HashMap`` of ``capacity``: ``String.hashCode()`` spread as
    ``HashMap.hash`` (``h ^ h >>> 16``)."""
    h = 0
    for unit in key.encode("utf-16-be").hex(" ", 2).split():
        h = (31 * h + int(unit, 16)) & 0xFFFFFFFF
    return (h ^ (h >> 16)) & (capacity - 1)


def _in_java_hash_map_order(keys: list[str]) -> bool:
    """Whether ``keys`` iterate as a default ``HashMap`` of them does: by bucket (16, doubled past 3/4 full)."""
    capacity = 16
    while len(keys) > capacity * 3 // 4:
        capacity *= 2
    buckets = [_java_bucket(key, capacity) for key in keys]
    return buckets == sorted(buckets)


def test_a_message_s_properties_print_in_java_s_hash_map_order(cluster: ThreadedCluster) -> None:
    """MessageDecoder.string2messageProperties reads a message's properties into a ``HashMap``
    (common/src/main/java/org/apache/rocketmq/common/message/MessageDecoder.java), which queryMsgById's
    ``Properties:`` line (QueryMsgByIdSubCommand.printMsg) and printMsg's ``Message.toString()`` print with
    ``HashMap.toString()``: by hash bucket. Ours printed them in the order the message carried them."""
    ns = cluster.namesrv_addr
    sent = _send(ns, "MsgProps", b"p", tags="TagA", keys="k1")
    by_id = _run("queryMsgById", "-n", ns, "-i", sent.offset_msg_id)
    assert by_id.exit_code == 0, by_id.output
    (line,) = [line for line in by_id.output.splitlines() if line.startswith("Properties:")]
    keys = re.findall(r"(?:\{|, )([A-Za-z_]+)=", line)
    assert {"UNIQ_KEY", "TAGS", "KEYS"} <= set(keys), line
    assert _in_java_hash_map_order(keys), line
    printed = _run("printMsg", "-n", ns, "-t", "MsgProps")
    assert printed.exit_code == 0, printed.output
    (props,) = re.findall(r", properties=\{([^}]*)\}", printed.output)
    keys = re.findall(r"(?:^|, )([A-Za-z_]+)=", props)
    assert {"UNIQ_KEY", "TAGS", "KEYS"} <= set(keys), props
    assert _in_java_hash_map_order(keys), props


def test_query_msg_by_offset_refuses_a_negative_offset_and_an_unknown_broker(cluster: ThreadedCluster) -> None:
    """QueryMsgByOffsetSubCommand pulls with DefaultMQPullConsumer.pull, whose pullSyncImpl throws MQClientException
    "offset < 0" before asking any broker (client/src/main/java/org/apache/rocketmq/client/impl/consumer/
    DefaultMQPullConsumerImpl.java), and PullAPIWrapper.pullKernelImpl "The broker[<name>] not exist" for a broker the
    route does not have: the command fails. Ours sent the pull with -1 (the broker logged an offset correction) and
    printed nothing with exit 0, and said "broker ... has no address" for the unknown broker."""
    ns = cluster.namesrv_addr
    _send(ns, "MsgByOffset", b"x")
    base = ("queryMsgByOffset", "-n", ns, "-t", "MsgByOffset")
    negative = _run(*base, "-b", "broker-a", "-i", "0", "-o", "-1")
    assert negative.exit_code == 1, negative.output
    assert "offset < 0" in negative.output, negative.output
    unknown = _run(*base, "-b", "no-such-broker", "-i", "0", "-o", "0")
    assert unknown.exit_code == 1, unknown.output
    assert "The broker[no-such-broker] not exist" in unknown.output, unknown.output
    found = _run(*base, "-b", "broker-a", "-i", "0", "-o", "0")
    assert found.exit_code == 0 and "Topic:               MsgByOffset" in found.output, found.output


def _java_string_hash(text: str) -> int:
    """``String.hashCode()``, as a signed-agnostic 32-bit value."""
    h = 0
    for unit in text.encode("utf-16-be").hex(" ", 2).split():
        h = (31 * h + int(unit, 16)) & 0xFFFFFFFF
    return h


def _java_mq_bucket(topic: str, broker: str, queue_id: int) -> int:
    """The bucket of ``MessageQueue(topic, broker, queue_id)`` in a 16-bucket ``HashSet``: ``MessageQueue.hashCode``
    (common/src/main/java/org/apache/rocketmq/common/message/MessageQueue.java) spread as ``HashMap.hash``."""
    h = (((31 + _java_string_hash(broker)) * 31 + queue_id) * 31 + _java_string_hash(topic)) & 0xFFFFFFFF
    return (h ^ (h >> 16)) & 15


def test_print_msg_and_consume_message_go_over_the_queues_in_java_s_hash_set_order(cluster: ThreadedCluster) -> None:
    """PrintMessageSubCommand and ConsumeMessageCommand.executeDefault iterate the ``HashSet`` that
    ``fetchSubscribeMessageQueues`` answers (MQClientInstance.topicRouteData2TopicSubscribeInfo, copied into another
    HashSet by DefaultMQPullConsumerImpl.parseSubscribeMessageQueues): the queues come by hash bucket, not by id.
    Ours printed them sorted."""
    ns = cluster.namesrv_addr
    topic = "MsgQueueHashOrder"
    anyio.run(create_topic, ns, topic, 8)
    anyio.run(fill_queues, ns, topic, 1)
    expected = sorted(range(8), key=lambda q: (_java_mq_bucket(topic, "broker-a", q), q))
    assert expected != sorted(expected)  # the topic name makes the orders differ
    for command in ("printMsg", "consumeMessage"):
        result = _run(command, "-n", ns, "-t", topic)
        assert result.exit_code == 0, result.output
        bodies = re.findall(r"BODY: broker-a-(\d+)-0", result.output)
        assert [int(q) for q in bodies] == expected, (command, result.output)


def test_print_msg_by_queue_lists_tags_of_equal_counts_in_java_s_hash_map_order(cluster: ThreadedCluster) -> None:
    """PrintMessageByQueueCommand.printCalculateByTag sorts the ``HashMap`` of counts by tag with Collections.sort,
    a stable sort by count, highest first: tags of equal counts stay in the HashMap's order (by hash bucket). Ours
    kept them in the order they were first seen."""
    ns = cluster.namesrv_addr
    topic = "MsgTagCounts"
    tags = ["TagC", "Tag9", "TagA", "TagQ", "Tag1"]

    async def send() -> None:
        await create_topic(ns, topic, 1)
        async with Producer(f"pg-{topic}", ns) as producer:
            for tag in [*tags, "TagZ", "TagZ"]:
                await producer.send(Message(topic, b"t", tags=tag))

    anyio.run(send)
    result = _run("printMsgByQueue", "-n", ns, "-t", topic, "-a", "broker-a", "-i", "0", "-f", "true")
    assert result.exit_code == 0, result.output
    printed = re.findall(r"^Tag: (\S+)\s+Count: (\d+)$", result.output, re.MULTILINE)
    by_bucket = sorted(tags, key=lambda t: _java_bucket(t, 16))
    assert by_bucket != tags  # the tags are sent out of the HashMap's order
    assert printed == [("TagZ", "2"), *((t, "1") for t in by_bucket)], result.output


def test_print_msg_of_a_topic_without_readable_queues_fails(cluster: ThreadedCluster) -> None:
    """PrintMessageSubCommand reads the queues with fetchSubscribeMessageQueues, which throws MQClientException "Can
    not find Message Queue for this topic" when the route has no readable queue
    (client/src/main/java/org/apache/rocketmq/client/impl/MQAdminImpl.java): the command fails. Ours printed
    nothing and succeeded."""
    ns = cluster.namesrv_addr

    async def write_only() -> None:
        async with Admin(ns) as admin:
            await admin.create_topic("MsgWriteOnly", read_queue_nums=1, write_queue_nums=1, perm=PERM_WRITE)

            async def routed() -> bool:
                with suppress(TopicRouteNotFoundError):
                    return bool((await admin.topic_route("MsgWriteOnly")).queue_datas)
                return False

            with anyio.fail_after(HANG_GUARD):
                while not await routed():
                    await anyio.sleep(0.02)

    anyio.run(write_only)
    result = CliRunner().invoke(mqadmin, ["printMsg", "-n", ns, "-t", "MsgWriteOnly"])
    assert result.exit_code == 1, result.output
    assert "PrintMessageSubCommand command failed" in result.output
    assert "Can not find Message Queue for this topic, MsgWriteOnly" in result.output
    assert "Caused by: Can not find Message Queue for this topic, MsgWriteOnly Namesrv return empty" in result.output


def test_consume_message_reads_a_zero_or_negative_time_as_no_bound(cluster: ThreadedCluster) -> None:
    """ConsumeMessageCommand searches a queue's offset by time only for ``timeValueBegin > 0`` /
    ``timeValueEnd > 0`` (tools/src/main/java/org/apache/rocketmq/tools/command/message/ConsumeMessageCommand.java):
    ``-e 0`` or ``-s -1`` leave the queue's max / min offset. Ours searched the offset at time 0 and printed
    nothing for ``-e 0``."""
    ns = cluster.namesrv_addr
    for i in range(3):
        _send(ns, "MsgZeroTimes", f"zero-times-{i}".encode())
    for bounds in (("-e", "0"), ("-s", "-1"), ("-s", "0", "-e", "0")):
        for queue in ((), ("-b", "broker-a", "-i", "0")):
            result = _run("consumeMessage", "-n", ns, "-t", "MsgZeroTimes", *queue, *bounds)
            assert result.exit_code == 0, result.output
            bodies = re.findall(r"BODY: (zero-times-\d)", result.output)
            assert bodies == ["zero-times-0", "zero-times-1", "zero-times-2"], (bounds, queue, result.output)


def test_print_msg_of_an_unknown_topic_says_java_s_words(cluster: ThreadedCluster) -> None:
    """MQAdminImpl.fetchSubscribeMessageQueues wraps the route lookup's failure in MQClientException "Can not find
    Message Queue for this topic, <topic>" (client/src/main/java/org/apache/rocketmq/client/impl/MQAdminImpl.java),
    which PrintMessageSubCommand fails with. Ours said "no route info of topic ..."."""
    result = CliRunner().invoke(mqadmin, ["printMsg", "-n", cluster.namesrv_addr, "-t", "MsgNoSuchTopic"])
    assert result.exit_code == 1, result.output
    assert "Can not find Message Queue for this topic, MsgNoSuchTopic" in result.output, result.output
