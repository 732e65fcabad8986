"""Check-backs of a :class:`~client.transaction.TransactionProducer` as RocketMQ 4.9.8's DefaultMQProducerImpl runs
them: on the producer's check executor (``checkThreadPoolMinSize`` / ``checkThreadPoolMaxSize`` 1, at most
``checkRequestHoldMax`` 2000 waiting). Embedded broker, real sockets, virtual time."""

from __future__ import annotations

import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from client.admin import Admin
from client.message import Message, MessageExt
from client.transaction import LocalTransactionState, TransactionProducer
from tests.semantics.helpers import use_virtual_store_clock

TOPIC = "TxChecks"


async def test_check_backs_run_one_at_a_time_as_on_javas_check_executor(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """DefaultMQProducerImpl.checkTransactionState submits each check to ``checkExecutor``, a ThreadPoolExecutor of
    one thread (TransactionMQProducer's checkThreadPoolMinSize and checkThreadPoolMaxSize, client/.../impl/producer/
    DefaultMQProducerImpl.java initTransactionEnv): a broker's round of check-backs reaches the application's
    checkLocalTransaction one at a time. Before, each check-back got a task of its own and all of them ran the
    application's check at once (a round over thousands of half messages: thousands of concurrent lookups)."""
    use_virtual_store_clock(embedded_cluster)  # the check service ages half messages on the store clock
    async with Admin(embedded_cluster.namesrv_addr) as admin:
        await admin.create_topic(TOPIC, read_queue_nums=2, write_queue_nums=2)
    running = 0
    most = 0
    checked: list[str] = []

    async def unknown(msg: Message, arg: object) -> LocalTransactionState:
        return LocalTransactionState.UNKNOWN

    async def check(msg: MessageExt) -> LocalTransactionState:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await trio.sleep(1)  # a lookup in the application's database
        running -= 1
        checked.append(msg.transaction_id or "")
        return LocalTransactionState.COMMIT_MESSAGE

    halves = 5
    async with TransactionProducer(
        "pg-tx-checks", embedded_cluster.namesrv_addr, execute_local_transaction=unknown, check_local_transaction=check
    ) as producer:
        sent = [await producer.send_message_in_transaction(Message(TOPIC, f"h{i}".encode())) for i in range(halves)]
        with trio.fail_after(300):
            while len(set(checked)) < halves:
                await trio.sleep(0.5)
    assert set(checked) == {r.transaction_id for r in sent}
    assert most == 1, f"{most} checks ran at once"
