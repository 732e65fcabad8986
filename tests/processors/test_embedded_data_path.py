"""The data path as the broker controller wires it: our client against the embedded cluster, auto-created topic,
send then pull, a held pull woken by a send, offsets committed through a restart."""

from __future__ import annotations

import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from remoting.client import RemotingClient
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request
from remoting.codec.message import iter_records
from tests.processors.conftest import GROUP, pull_request, send_request, tags_props

TOPIC = "EmbeddedDataPathTopic"


async def test_send_pull_hold_and_offsets_through_the_embedded_broker(embedded_cluster: EmbeddedCluster) -> None:
    address = embedded_cluster.broker_addr
    async with RemotingClient() as client:
        sent = await client.invoke(address, send_request(TOPIC, b"first", properties=tags_props("A")), timeout=10)
        assert sent.code == ResponseCode.SUCCESS, sent.remark  # created from TBW102 on the fly
        found = await client.invoke(address, pull_request(TOPIC, sys_flag=0x4), timeout=10)
        assert found.code == ResponseCode.SUCCESS
        assert [m.body for m in iter_records(found.body)] == [b"first"]

        held = pull_request(TOPIC, offset=1, sys_flag=0x1 | 0x2 | 0x4, commit_offset=1)
        answer: list[object] = []

        async def consume() -> None:
            answer.append(await client.invoke(address, held, timeout=30))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(consume)
            # The broker answers other requests on the same connection while the pull is held.
            max_offset = await client.invoke(
                address, request(RequestCode.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": "0"}), timeout=10
            )
            assert max_offset.ext_fields["offset"] == "1"
            await trio.testing.wait_all_tasks_blocked()
            assert embedded_cluster.controller.hold.held_count == 1
            second = await client.invoke(address, send_request(TOPIC, b"second"), timeout=10)
            assert second.code == ResponseCode.SUCCESS
        (woken,) = answer
        assert woken.code == ResponseCode.SUCCESS  # type: ignore[attr-defined]
        assert [m.body for m in iter_records(woken.body)] == [b"second"]  # type: ignore[attr-defined]

    await embedded_cluster.restart_broker()
    async with RemotingClient() as client:
        query = request(RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "0"})
        offset = await client.invoke(embedded_cluster.broker_addr, query, timeout=10)
        assert (offset.code, offset.ext_fields["offset"]) == (ResponseCode.SUCCESS, "1")
