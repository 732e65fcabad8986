"""Our producer's recall (RocketMQ 5.3's ``DefaultMQProducer.recallMessage``) against an embedded broker with
``recallMessageEnable``, in virtual time: a delay message's SendResult carries its recall handle (a normal one's does
not); recalling it returns its id and it never reaches its topic while its neighbour does; a retry topic, a handle
that does not decode and a stale handle are refused."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from broker.embedded import EmbeddedCluster
from client.errors import MessageValidationError, MQBrokerError, MQClientError
from client.message import Message
from client.producer import Producer
from remoting.codec.codes import ResponseCode
from tests.conftest import SMALL_STORE
from tests.semantics.helpers import create_topic, use_virtual_store_clock
from tests.semantics.test_timer import _read_all


@pytest.fixture
async def recall_cluster(tmp_path: Path) -> AsyncIterator[EmbeddedCluster]:
    async with EmbeddedCluster(tmp_path / "cluster", **SMALL_STORE, recall_message_enable=True) as cluster:
        yield cluster


def _delayed(body: bytes, at_ms: int) -> Message:
    msg = Message("RecallC", body)
    msg.properties["TIMER_DELIVER_MS"] = str(at_ms)
    return msg


async def test_the_producer_recalls_a_delay_message_by_its_handle(
    recall_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    clock = use_virtual_store_clock(recall_cluster)
    await create_topic(recall_cluster, "RecallC")
    async with Producer("pg-recall-client", recall_cluster.namesrv_addr) as producer:
        at = clock() + 10_000
        gone = await producer.send(_delayed(b"gone", at))
        kept = await producer.send(_delayed(b"kept", at))
        normal = await producer.send(Message("RecallC", b"now"))
        assert gone.recall_handle and kept.recall_handle and normal.recall_handle is None
        assert await producer.recall_message("RecallC", gone.recall_handle) == gone.msg_id
        with pytest.raises(MQClientError, match="topic is not supported"):
            await producer.recall_message("%RETRY%g", gone.recall_handle)
        with pytest.raises(MQClientError, match="recall handle is invalid"):
            await producer.recall_message("RecallC", "not a handle")
        await trio.sleep(15)
        with pytest.raises(MQBrokerError) as stale:
            await producer.recall_message("RecallC", kept.recall_handle)
    assert stale.value.code == ResponseCode.ILLEGAL_OPERATION
    assert stale.value.remark == "recall failed, timestamp invalid"
    bodies = sorted(m.body for m in _read_all(recall_cluster.controller.context.store, "RecallC", 0))
    assert bodies == [b"kept", b"now"]


@pytest.mark.parametrize(
    ("topic", "text"),
    [
        ("Bad Topic", "The specified topic[Bad Topic] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"),
        (" ", "The specified topic is blank"),
        ("T" * 128, "The specified topic is longer than topic max length 127."),
    ],
    ids=["illegal-characters", "blank", "too-long"],
)
async def test_a_recall_names_a_topic_java_refuses_and_is_refused_before_anything_is_sent(
    recall_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, topic: str, text: str
) -> None:
    """RocketMQ 5.3.3's ``DefaultMQProducerImpl.recallMessage`` runs ``Validators.checkTopic`` first
    (client/src/main/java/org/apache/rocketmq/client/impl/producer/DefaultMQProducerImpl.java): MQClientException with
    its text. Before, the topic went to the name server and the broker, and the error was theirs."""
    clock = use_virtual_store_clock(recall_cluster)
    await create_topic(recall_cluster, "RecallC")
    async with Producer("pg-recall-check", recall_cluster.namesrv_addr) as producer:
        sent = await producer.send(_delayed(b"later", clock() + 10_000))
        assert sent.recall_handle
        with pytest.raises(MessageValidationError) as refused:
            await producer.recall_message(topic, sent.recall_handle)
    assert str(refused.value) == text
