"""Producer against the embedded cluster: send modes, batches, compression, the missing-route error."""

from __future__ import annotations

import pytest

from client.admin import Admin
from client.message import Message, SendStatus
from client.producer import Producer
from tests.client.conftest import ThreadedCluster

pytestmark = pytest.mark.anyio


async def test_sync_send_is_stored_and_acknowledged(cluster: ThreadedCluster) -> None:
    async with Admin(cluster.namesrv_addr) as admin:
        await admin.create_topic("SendSync", read_queue_nums=2, write_queue_nums=2)
    async with Producer("pg", cluster.namesrv_addr) as producer:
        result = await producer.send(Message("SendSync", b"hello", tags="TagA", keys=["k1", "k2"]))
    assert result.send_status is SendStatus.SEND_OK
    assert result.topic == "SendSync" and result.queue_id in (0, 1)
    assert len(result.msg_id) == 32 and len(result.offset_msg_id) == 32
