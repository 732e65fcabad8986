"""``mqadmin`` text output that scripts parse, line for line against RocketMQ 4.9.8's tools
(tools/src/main/java/org/apache/rocketmq/tools/command/**), run through the real entry point against the threaded
embedded cluster; each test failed on the code before."""

from __future__ import annotations

import anyio
from click.testing import CliRunner, Result

from client.message import Message
from client.mqadmin import main as mqadmin
from client.producer import Producer
from tests.client.helpers import create_topic
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
