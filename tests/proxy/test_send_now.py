"""SendMessage served in one synchronous step when the store answers puts at once (ASYNC_FLUSH), through a Trio task
when it waits for the group commit (SYNC_FLUSH); ``finish_now``, the helper that runs a send to its end."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import trio

from broker.embedded import EmbeddedCluster
from proxy.common import Code, finish_now
from proxy.config import ProxyConfig
from proxy.pb import definition, service
from proxy.startup import build_activity

MD = {"x-mq-client-id": "c1"}


def send_request(topic: str, body: bytes) -> object:
    msg = definition.Message(body=body)
    msg.topic.name = topic
    msg.system_properties.message_id = "01" + body.hex().upper().ljust(30, "0")
    msg.system_properties.born_timestamp.FromMilliseconds(int(time.time() * 1000))
    msg.system_properties.message_type = definition.MessageType.NORMAL
    return service.SendMessageRequest(messages=[msg])


@pytest.mark.parametrize("flush", ["ASYNC_FLUSH", "SYNC_FLUSH"])
async def test_a_send_is_synchronous_only_when_the_store_answers_at_once(tmp_path: Path, flush: str) -> None:
    async with EmbeddedCluster(tmp_path, flush_disk_type=flush) as cluster:
        activity, _ = build_activity(cluster.controller, ProxyConfig())
        store = cluster.controller.context.store
        cluster.controller.context.topics.create_topic_in_send_back_process("SendNow", 1)
        now = activity.send_now(send_request("SendNow", b"one"), MD)
        if flush == "ASYNC_FLUSH":
            assert now is not None and now.status.code == Code.OK and now.entries[0].offset == 0
        else:
            assert now is None
            with trio.fail_after(10):
                answer = await activity.send(send_request("SendNow", b"one"), MD)
            assert answer.status.code == Code.OK
        assert store.max_offset_in_queue("SendNow", 0) == 1


async def test_finish_now_returns_a_result_and_refuses_a_coroutine_that_waits() -> None:
    async def at_once() -> int:
        return 7

    async def waits() -> int:
        await trio.sleep(0)
        return 8

    assert finish_now(at_once()) == 7
    with pytest.raises(RuntimeError, match="tried to wait"):
        finish_now(waits())
