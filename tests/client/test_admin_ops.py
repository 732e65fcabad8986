"""The admin client's calls for the operations codes no ``mqadmin`` command sends (Java's ``DefaultMQAdminExt`` has
them): delay offsets (45), consumer status (223, answered by our consumer's 221), consume time span (303), correction
offset (308), clone group offset (314), half-message resume (323), topic config (351) and the unit topic lists
(311-313), against the embedded cluster."""

from __future__ import annotations

import anyio
import pytest

from client.admin import Admin
from client.consumer.listener import ConsumeConcurrentlyStatus
from client.consumer.push import PushConsumer
from client.errors import MQBrokerError
from client.message import Message, MessageExt
from client.producer import Producer
from client.transaction import LocalTransactionState, TransactionProducer
from remoting.codec.bodies import MessageQueue
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.topics import TRANS_HALF_TOPIC
from tests.client.helpers import create_topic, wait_until
from tests.threaded_cluster import ThreadedCluster

LONG_MAX = (1 << 63) - 1


@pytest.mark.anyio
async def test_consume_progress_calls(cluster: ThreadedCluster) -> None:
    ns, addr = cluster.namesrv_addr, cluster.broker_addr
    await create_topic(ns, "AdminOps", queues=1)
    mq = MessageQueue("AdminOps", "broker-a", 0)
    seen: list[MessageExt] = []

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        seen.extend(msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer("admin-ops-cg", ns)
    consumer.subscribe("AdminOps")
    consumer.register_message_listener(listener)
    async with Producer("admin-ops-pg", ns) as producer, consumer, Admin(ns) as admin:
        for i in range(3):
            await producer.send(Message("AdminOps", f"{i}".encode()))
        await wait_until(lambda: len(seen) == 3)
        await wait_until(lambda: consumer.offset_store.read_memory(mq) == 3)
        status = await admin.consumer_status("AdminOps", "admin-ops-cg")
        assert status == {consumer.instance.client_id: {mq: 3}}
        await consumer.persist_offsets()
        with anyio.fail_after(60):
            while (await admin.consumer_progress("admin-ops-cg", "AdminOps"))[mq].consumer_offset != 3:
                await anyio.sleep(0.05)
        (span,) = await admin.consume_time_span("AdminOps", "admin-ops-cg")
        assert span.message_queue == mq and span.delay_time == 0
        assert span.min_time_stamp <= span.consume_time_stamp == span.max_time_stamp
        await admin.update_consumer_offset(addr, "behind-cg", mq, 1)
        assert await admin.query_correction_offset(addr, "AdminOps", "behind-cg", "behind-cg") == {0: LONG_MAX}
        assert await admin.query_correction_offset(addr, "AdminOps", "admin-ops-cg") == {0: 1}
        await admin.clone_group_offset("admin-ops-cg", "copy-cg", "AdminOps")
        assert (await admin.consumer_progress("copy-cg", "AdminOps"))[mq].consumer_offset == 3


@pytest.mark.anyio
async def test_broker_inspection_calls(cluster: ThreadedCluster) -> None:
    ns, addr = cluster.namesrv_addr, cluster.broker_addr
    await create_topic(ns, "InspectOps", queues=2)
    async with Admin(ns) as admin:
        config = await admin.topic_config(addr, "InspectOps")
        assert (config.topic_name, config.read_queue_nums, config.perm) == ("InspectOps", 2, 6)
        with pytest.raises(MQBrokerError) as missing:
            await admin.topic_config(addr, "NoSuchTopic")
        assert missing.value.code == ResponseCode.TOPIC_NOT_EXIST
        assert await admin.delay_offsets(addr) == {}
        await admin.create_topic("UnitOps", read_queue_nums=1, write_queue_nums=1, topic_sys_flag=1)
        with anyio.fail_after(60):
            while "UnitOps" not in await admin.unit_topics(RequestCode.GET_UNIT_TOPIC_LIST):
                await anyio.sleep(0.05)
        assert "UnitOps" not in await admin.unit_topics(RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST)

        async def unknown(msg: object, arg: object = None) -> LocalTransactionState:
            return LocalTransactionState.UNKNOWN

        tx = TransactionProducer("resume-pg", ns, execute_local_transaction=unknown, check_local_transaction=unknown)
        async with tx:
            sent = await tx.send_message_in_transaction(Message("InspectOps", b"half"))
        half_before = await admin.queue_offset(
            addr, MessageQueue(TRANS_HALF_TOPIC, "broker-a", 0), RequestCode.GET_MAX_OFFSET
        )
        await admin.resume_check_half_message(addr, sent.send_result.offset_msg_id)
        assert (
            await admin.queue_offset(addr, MessageQueue(TRANS_HALF_TOPIC, "broker-a", 0), RequestCode.GET_MAX_OFFSET)
            == half_before + 1
        )
