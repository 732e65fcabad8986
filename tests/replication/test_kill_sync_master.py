"""SIGKILL of a SYNC_MASTER in the middle of 8 producers' sends (real processes: name server, master and slave):
every send the master answered SEND_OK is on the slave, byte-identical to the master's record, at the same physical
offset and queue offset, with its ConsumeQueue entry. (The same test against an ASYNC_MASTER fails: its
unreplicated tail is lost.)"""

from __future__ import annotations

import random
from pathlib import Path

import trio

from remoting.codec.message import decode_record
from tests.replication.procs import TOPIC, Ack, open_files, produce, replicated_processes

PRODUCERS = 8


async def test_every_acknowledged_send_survives_a_sigkilled_sync_master_on_its_slave(tmp_path: Path) -> None:
    seed = random.randrange(1 << 30)
    print(f"kill point seed {seed}")  # shown with a failure
    kill_after = random.Random(seed).randint(500, 3000)
    acks: list[Ack] = []
    async with replicated_processes(tmp_path, "SYNC_MASTER") as nodes:
        stop = trio.Event()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(produce, nodes.master.addr, PRODUCERS, acks, stop)
            with trio.fail_after(120):
                while len(acks) < kill_after:
                    await trio.sleep(0.005)
            await nodes.master.kill()  # the producers see their connection close and stop
        await nodes.slave.stop()
    assert len(acks) >= kill_after
    slave, master = open_files(tmp_path / "slave"), open_files(tmp_path / "master")
    try:
        for ack in acks:
            record = slave.look_message_by_offset(ack.phy)
            assert record is not None, ack
            theirs = master.look_message_by_offset(ack.phy)
            assert theirs is not None and bytes(record) == bytes(theirs), ack
            msg = decode_record(record, check_crc=True)
            assert (msg.body, msg.topic, msg.queue_id, msg.queue_offset) == (ack.body, TOPIC, ack.queue_id,
                                                                             ack.queue_offset)  # fmt: skip
            entry = slave.consume_queue(TOPIC, ack.queue_id).entry(ack.queue_offset)
            assert entry is not None and entry[:2] == (ack.phy, len(record))
    finally:
        slave.close()
        master.close()
