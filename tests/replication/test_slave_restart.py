"""A slave SIGKILLed and restarted while its ASYNC_MASTER takes sends (real processes): recovery truncates its torn
tail, it resumes from its own offset, and once caught up its CommitLog and ConsumeQueues are the master's byte for
byte (no gap, no duplicate)."""

from __future__ import annotations

import re
from pathlib import Path

import trio

from client import Admin
from tests.replication.ha_helpers import written_segments
from tests.replication.procs import QUEUES, TOPIC, Ack, open_files, produce, replicated_processes, wait_status
from tests.store.store_helpers import files_of


async def _acked(acks: list[Ack], count: int) -> None:
    with trio.fail_after(120):
        while len(acks) < count:
            await trio.sleep(0.005)


async def _replicated_some(admin: Admin, slave: str) -> None:
    with trio.fail_after(60):
        while int((await admin.broker_status(slave)).get("haSlaveDispatchedOffset", "0")) == 0:
            await trio.sleep(0.01)


async def test_a_sigkilled_slave_resumes_from_its_own_offset_without_gap_or_duplicate(tmp_path: Path) -> None:
    acks: list[Ack] = []
    async with replicated_processes(tmp_path, "ASYNC_MASTER") as nodes:
        stop = trio.Event()
        async with trio.open_nursery() as nursery, Admin(nodes.namesrv.addr) as admin:
            nursery.start_soon(produce, nodes.master.addr, 4, acks, stop)
            await _acked(acks, 800)
            await _replicated_some(admin, nodes.slave.addr)  # a kill before the first frame would test nothing
            await nodes.slave.kill()
            killed_at = len(acks)
            await _acked(acks, killed_at + 800)  # the master goes on while the slave is down
            await nodes.slave.start(nodes.nursery)
            await _acked(acks, len(acks) + 800)  # and while it catches up
            stop.set()
            await trio.sleep(0.5)
            master_end = (await admin.broker_status(nodes.master.addr))["commitLogMaxOffset"]
            await wait_status(admin, nodes.slave.addr, "haSlaveDispatchedOffset", master_end)
        await nodes.slave.stop()
        await nodes.master.stop()
    assert nodes.slave.starts == 2
    # The restarted slave reported what it recovered, not 0: the master resumed from there.
    second_log = (tmp_path / "logs" / "slave-2.log").read_text()
    resumed = re.search(r"HA connected to master \S+, slave max offset (\d+)", second_log)
    assert resumed is not None and 0 < int(resumed.group(1)) <= int(master_end)
    assert written_segments(tmp_path / "slave") == written_segments(tmp_path / "master")
    assert files_of(tmp_path / "slave" / "consumequeue") == files_of(tmp_path / "master" / "consumequeue")
    slave = open_files(tmp_path / "slave")
    try:
        for queue_id in range(QUEUES):
            cq = slave.consume_queue(TOPIC, queue_id)
            offsets = [slave.get(TOPIC, queue_id, o, 1).queue_offsets[0] for o in range(cq.min_offset, cq.max_offset)]
            assert offsets == list(range(cq.max_offset))
        assert sum(slave.max_offset_in_queue(TOPIC, q) for q in range(QUEUES)) == len(acks)
    finally:
        slave.close()
