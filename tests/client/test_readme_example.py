"""The README's producer + consumer example, run verbatim (under both backends) against the embedded cluster.

The README shows the imports and ``main`` below followed by ``anyio.run(main, "127.0.0.1:9876")``.
"""

from __future__ import annotations

import anyio
import pytest

from client import ConsumeConcurrentlyStatus, Message, MessageExt, Producer, PushConsumer
from tests.client.conftest import ThreadedCluster


# ---- README example (keep in sync with README.md) ----
async def main(namesrv: str) -> list[bytes]:
    async with Producer("demo-producer", namesrv) as producer:
        await producer.send(Message("DemoTopic", b"hello rocketrio", tags="demo"))
    received: list[bytes] = []
    done = anyio.Event()

    async def on_messages(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        received.extend(m.body for m in msgs)
        done.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer("demo-consumer", namesrv)
    consumer.subscribe("DemoTopic", "demo")
    consumer.register_message_listener(on_messages)
    async with consumer:
        await done.wait()
    return received


# ---- end of README example ----


@pytest.mark.anyio
async def test_readme_example_sends_and_consumes(cluster: ThreadedCluster) -> None:
    with anyio.fail_after(60):
        assert await main(cluster.namesrv_addr) == [b"hello rocketrio"]
