"""VIEW_BROKER_STATS_DATA's put items on a real master and slave (broker/stats): which items exist where.

RocketMQ 4.9.8 creates the TOPIC_PUT_NUMS / TOPIC_PUT_SIZE / BROKER_PUT_NUMS items only in the send path
(broker/src/main/java/org/apache/rocketmq/broker/processor/SendMessageProcessor.java ``handlePutMessageResult``):
a slave, which refuses sends and only replicates, never has them, while its runtime info's ``msgPutTotalTodayNow``
counts the replicated messages (store/src/main/java/org/apache/rocketmq/store/DefaultMessageStore.java
``ReputMessageService`` on a SLAVE).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from broker.embedded import EmbeddedCluster
from client import Message, Producer
from client.admin import Admin
from client.errors import MQBrokerError
from remoting.codec.codes import ResponseCode
from tests.conftest import SMALL_STORE


async def test_a_slave_has_no_put_items_for_replicated_messages(tmp_path: Path) -> None:
    async with EmbeddedCluster(tmp_path / "cluster", slaves=1, **SMALL_STORE) as cluster:
        async with Producer("replicated_pg", cluster.namesrv_addr) as producer:
            for i in range(5):
                await producer.send(Message("Replicated", b"m%d" % i))
        await cluster.wait_replicated()
        (slave,) = cluster.slave_controllers
        cluster_name = cluster.controller.context.config.broker_cluster_name
        async with Admin(cluster.namesrv_addr) as admin:
            # The master counts the sends (its sampler turns them into items within a second).
            with trio.fail_after(20):
                while True:
                    try:
                        master = await admin.view_broker_stats_data(cluster.broker_addr, "TOPIC_PUT_NUMS", "Replicated")
                    except MQBrokerError:
                        await trio.sleep(0.1)
                        continue
                    break
            assert master is not None
            await trio.sleep(1.5)  # the slave's sampler has run past the replicated messages
            assert slave.context.stats.runtime_entries()["msgPutTotalTodayNow"] == "5"
            for name, key in (
                ("TOPIC_PUT_NUMS", "Replicated"),
                ("TOPIC_PUT_SIZE", "Replicated"),
                ("BROKER_PUT_NUMS", cluster_name),
            ):
                with pytest.raises(MQBrokerError) as refused:
                    await admin.view_broker_stats_data(slave.broker_addr, name, key)
                assert refused.value.code == ResponseCode.SYSTEM_ERROR
                assert refused.value.remark == f"The stats <{name}> <{key}> not exist"
