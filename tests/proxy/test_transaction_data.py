"""The transaction data a 5.x half message leaves for its EndTransaction, as RocketMQ 5.3.3's proxy keeps it
(proxy/src/main/java/org/apache/rocketmq/proxy/service/transaction/TransactionDataManager.java): it expires
``transactionDataExpireMillis`` (30 s) after the send, so a later EndTransaction finds none and the broker's check
asks the producer again. Found by a third review: ours kept it until the transaction ended."""

from __future__ import annotations

import time

import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from proxy.common import Code, TransactionData
from proxy.config import ProxyConfig
from proxy.messaging import MessagingActivity
from proxy.pb import definition, service
from proxy.startup import build_activity
from tests.proxy.test_renew import md
from tests.proxy.test_send_checks import PROXY
from tests.semantics.helpers import create_topic, use_virtual_store_clock


async def _half(activity: MessagingActivity, topic: str, message_id: str) -> None:
    msg = definition.Message(body=b"half")
    msg.topic.name = topic
    sp = msg.system_properties
    sp.message_id = message_id
    sp.born_timestamp.FromMilliseconds(int(time.time() * 1000))
    sp.message_type = definition.MessageType.TRANSACTION
    response = await activity.send(service.SendMessageRequest(messages=[msg]), md("p@1"))
    assert response.status.code == Code.OK, response.status


async def _commit(activity: MessagingActivity, topic: str, tx_id: str) -> tuple[int, str]:
    req = service.EndTransactionRequest(
        topic=definition.Resource(name=topic),
        transaction_id=tx_id,
        message_id=tx_id,
        resolution=definition.TransactionResolution.COMMIT,
        source=definition.TransactionSource.SOURCE_CLIENT,
    )
    answer = await activity.guarded(activity.producing.end_transaction, service.EndTransactionResponse, req, md("p@1"))
    return answer.status.code, answer.status.message


async def test_transaction_data_expires_after_transaction_data_expire_millis(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """TransactionDataManager.pollNoExpireTransactionData skips data past its expiry (its send time plus
    ``transactionDataExpireMillis``): a commit within it ends the transaction, one after it is INTERNAL_SERVER_ERROR
    "cannot found transaction data" and stores nothing; a shorter setting shortens it."""
    use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "TxData")
    store = embedded_cluster.controller.context.store
    expired = (Code.INTERNAL_SERVER_ERROR, PROXY + "cannot found transaction data")

    async def commit_after(config: ProxyConfig, wait_s: int) -> tuple[tuple[int, str], int]:
        activity, _ = build_activity(embedded_cluster.controller, config)
        tx_id = f"01TXDATA{trio.current_time():024.0f}"
        await _half(activity, "TxData", tx_id)
        await trio.sleep(wait_s)
        return await _commit(activity, "TxData", tx_id), store.max_offset_in_queue("TxData", 0)

    got = [await commit_after(ProxyConfig(), wait_s) for wait_s in (29, 31)]
    assert got == [((Code.OK, "OK"), 1), (expired, 1)], got
    shorter = ProxyConfig(**{"transaction_data_expire_millis": 5_000})
    assert await commit_after(shorter, 6) == (expired, 1)


async def test_each_half_of_a_resent_transaction_message_can_be_ended(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """TransactionDataManager keeps up to ``transactionDataMaxNum`` (15) data per producer group and transaction id
    (proxy/src/main/java/org/apache/rocketmq/proxy/service/transaction/TransactionDataManager.java): a message sent
    twice with one message id (a client's retry after a lost answer) leaves two halves, and two EndTransactions end
    both, the newest first. Ours kept one per key: the second end was "cannot found transaction data"."""
    use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "TxTwice")
    store = embedded_cluster.controller.context.store
    activity, _ = build_activity(embedded_cluster.controller, ProxyConfig())
    for _ in range(2):
        await _half(activity, "TxTwice", "01TXTWICE")
    got = [await _commit(activity, "TxTwice", "01TXTWICE") for _ in range(3)]
    expired = (Code.INTERNAL_SERVER_ERROR, PROXY + "cannot found transaction data")
    assert got == [(Code.OK, "OK"), (Code.OK, "OK"), expired], got
    await trio.sleep(1)
    assert store.max_offset_in_queue("TxTwice", 0) == 2


async def test_no_more_than_transaction_data_max_num_halves_are_kept_per_id(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """Beyond ``transactionDataMaxNum`` the oldest data of the key is dropped (TransactionDataManager
    .addTransactionData: pollFirst)."""
    use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "TxMany")
    activity, _ = build_activity(embedded_cluster.controller, ProxyConfig(transaction_data_max_num=2))
    for _ in range(3):
        await _half(activity, "TxMany", "01TXMANY")
    got = [(await _commit(activity, "TxMany", "01TXMANY"))[0] for _ in range(3)]
    assert got == [Code.OK, Code.OK, Code.INTERNAL_SERVER_ERROR], got


def test_a_keys_expired_data_goes_as_its_next_is_added() -> None:
    """What the broker's repeated checks of one unresolved half add stays bounded by the expiry, not by
    ``transactionDataMaxNum`` alone (Java's TransactionDataCleaner sweeps the expired entries)."""
    data = TransactionData(15, expiry=30.0)
    for check in range(10):  # a check every 60 s, as the broker's transactionCheckInterval
        data.add(("pg", "01TXCHECKED"), 100, 7, now=60.0 * check)
    assert data.by_key[("pg", "01TXCHECKED")] == [(100, 7, 540.0)]
    assert data.poll(("pg", "01TXCHECKED"), now=545.0) == (100, 7)
