"""SYNC_FLUSH sends share group commits even though the send pool has only a couple of workers: a worker appends
and hands the flush wait to the put-future service instead of awaiting the fsync itself."""

from __future__ import annotations

from pathlib import Path

import trio

from broker.embedded import EmbeddedCluster
from remoting.client import RemotingClient
from remoting.codec.codes import ResponseCode
from tests.conftest import SMALL_STORE
from tests.processors.conftest import send_request

TOPIC = "GroupCommitTopic"
SENDS = 64


async def test_pipelined_sync_flush_sends_are_released_by_a_few_group_commits(tmp_path: Path) -> None:
    overrides = {**SMALL_STORE, "flush_disk_type": "SYNC_FLUSH", "flush_interval_commit_log": 600_000}
    async with EmbeddedCluster(tmp_path / "cluster", **overrides) as cluster, RemotingClient() as client:
        address = cluster.broker_addr
        first = await client.invoke(address, send_request(TOPIC, b"create"), timeout=10)
        assert first.code == ResponseCode.SUCCESS, first.remark
        store = cluster.controller.context.store
        rounds_before = store.group_commit.rounds
        codes: list[int] = []

        async def send(i: int) -> None:
            response = await client.invoke(address, send_request(TOPIC, b"m%d" % i, queue_id=i % 4), timeout=10)
            codes.append(response.code)

        async with trio.open_nursery() as nursery:
            for i in range(SENDS):
                nursery.start_soon(send, i)
        assert codes == [ResponseCode.SUCCESS] * SENDS
        assert store.flush_watermark >= store.max_phy_offset
        # With the wait on the send workers (min(cpus, 4) of them) this took about SENDS / workers syncs.
        assert store.group_commit.rounds - rounds_before <= SENDS // 4, store.group_commit.rounds - rounds_before
