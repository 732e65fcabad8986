"""``mqadmin`` message commands against RocketMQ 4.9.8's ``tools/src/main/java/org/apache/rocketmq/tools/command/
message/``: the printed ``MessageExt`` text, queries that find nothing, a unique key given to ``queryMsgById`` and a
charset the JVM would not know."""

from __future__ import annotations

import anyio
from click.testing import CliRunner, Result

from client.message import Message, SendResult
from client.mqadmin import main as mqadmin
from client.producer import Producer
from tests.client.helpers import create_topic
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
