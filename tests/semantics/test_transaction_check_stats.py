"""The transaction check service's reads in the broker statistics, on a real broker in virtual time.

4.9.8's check reads the half and op queues through TransactionalMessageBridge ``getHalfMessage`` / ``getOpMessage``
(broker/src/main/java/org/apache/rocketmq/broker/transaction/queue/TransactionalMessageBridge.java), whose
``getMessage`` is a store read (DefaultMessageStore.getMessage: found or missed, messages transferred) and, when it
finds messages, counts them as group ``CID_RMQ_SYS_TRANS``'s gets of the topic (``incGroupGetNums``,
``incGroupGetSize``, ``incBrokerGetNums``): ``mqadmin statsAll`` shows them on the half topic's row.
"""

from __future__ import annotations

import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from client.admin import Admin
from client.message import Message, MessageExt
from client.transaction import LocalTransactionState, TransactionProducer
from remoting.codec.topics import TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from tests.semantics.helpers import use_virtual_store_clock

TOPIC = "TxStatsTopic"
GROUP = "CID_RMQ_SYS_TRANS"


async def test_the_check_service_reads_count_as_cid_rmq_sys_trans_gets(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    use_virtual_store_clock(embedded_cluster)  # the check service ages half messages on the store clock
    async with Admin(embedded_cluster.namesrv_addr) as admin:
        await admin.create_topic(TOPIC, read_queue_nums=1, write_queue_nums=1)

    async def unknown(msg: Message, arg: object) -> LocalTransactionState:
        return LocalTransactionState.UNKNOWN

    async def commit(msg: MessageExt) -> LocalTransactionState:
        return LocalTransactionState.COMMIT_MESSAGE

    producer = TransactionProducer(
        "tx-stats-pg", embedded_cluster.namesrv_addr, execute_local_transaction=unknown, check_local_transaction=commit
    )
    async with producer:
        await producer.send_message_in_transaction(Message(TOPIC, b"checked"))
        # A round checks the half, a later one reads the commit's op message; the hour window's first sample (10 min
        # after the start) holds them.
        await trio.sleep(11 * 60)
    addr = embedded_cluster.broker_addr
    async with Admin(embedded_cluster.namesrv_addr) as admin:
        half = await admin.view_broker_stats_data(addr, "GROUP_GET_NUMS", f"{TRANS_HALF_TOPIC}@{GROUP}")
        ops = await admin.view_broker_stats_data(addr, "GROUP_GET_NUMS", f"{TRANS_OP_HALF_TOPIC}@{GROUP}")
        size = await admin.view_broker_stats_data(addr, "GROUP_GET_SIZE", f"{TRANS_HALF_TOPIC}@{GROUP}")
        status = await admin.broker_status(addr)
    assert half.sum_24_hours() >= 1
    assert ops.sum_24_hours() >= 1
    assert size.sum_24_hours() > 0
    assert int(status["msgGetTotalTodayNow"]) >= 2
