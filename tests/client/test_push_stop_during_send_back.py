"""A push consumer stopping while a listener call ends with RECONSUME_LATER and its send-back fails: the messages stay
in the process queue (the committed offset before them), the last offsets are committed and the consumer unregisters;
the local retry used to be scheduled on the task group the stop had torn down, and the error skipped all that."""

from __future__ import annotations

import anyio
import pytest

from client.consumer.listener import ConsumeConcurrentlyStatus
from client.consumer.push import PushConsumer
from client.message import Message, MessageExt
from client.producer import Producer
from remoting.codec.bodies import ConsumeFromWhere
from tests.client.helpers import create_topic
from tests.threaded_cluster import ThreadedCluster

pytestmark = pytest.mark.anyio


async def test_shutdown_survives_a_failed_send_back(cluster: ThreadedCluster) -> None:
    await create_topic(cluster.namesrv_addr, "StopBack", queues=1)
    entered = anyio.Event()
    release = anyio.Event()

    async def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        entered.set()
        await release.wait()
        return ConsumeConcurrentlyStatus.RECONSUME_LATER

    consumer = PushConsumer(
        "cg-stopback", cluster.namesrv_addr, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )
    consumer.subscribe("StopBack")
    consumer.register_message_listener(listener)

    async def release_soon() -> None:
        await anyio.sleep(0.5)
        release.set()

    raised: BaseException | None = None
    async with Producer("pg", cluster.namesrv_addr) as producer:
        await producer.send(Message("StopBack", b"x"))
    try:
        async with anyio.create_task_group() as tg, consumer:
            with anyio.fail_after(30):
                await entered.wait()
            await anyio.to_thread.run_sync(cluster.stop_broker)  # send-back and its fallback now fail
            tg.start_soon(release_soon)  # the listener returns while the consumer is stopping
    except BaseException as exc:
        raised = exc
    assert raised is None, f"leaving the consumer raised {raised!r}"
