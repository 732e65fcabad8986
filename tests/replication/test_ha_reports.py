"""What a master takes from the peers of its HA port: a report outside its log ends the connection (the first one too),
an empty slave acknowledges only what it was sent, on its first connection and its next ones, a connection reset
before it is served stops nothing, and a transfer batch above what a slave takes still replicates. Real stores; the
slave is a real one on 127.0.0.1 or played by the test over a memory stream."""

from __future__ import annotations

import socket
import struct
from pathlib import Path

import pytest
import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from client.admin import Admin
from client.errors import MQClientError
from store.ha.frames import HEADER_SIZE, FrameReader, encode_report
from store.mapped_file import segment_name
from store.message_store import MessageStore
from store.results import PutStatus
from store.store_config import BrokerRole
from tests.conftest import SMALL_STORE
from tests.replication.ha_helpers import caught_up, ha_store, read_exactly, reported, wait_until
from tests.replication.test_ha_stores import _fake_slave
from tests.store.store_helpers import message


async def _frames_end(stream: trio.abc.ReceiveStream, at_least: int) -> int:
    """Read the master's frames until one ends at or beyond ``at_least``; that end."""
    reader = FrameReader()
    while True:
        data = await stream.receive_some(65536)
        assert data, "the master closed the connection"
        for frame in reader.feed(data):
            if frame.body and frame.offset + len(frame.body) >= at_least:
                return frame.offset + len(frame.body)


async def _connect(master: MessageStore, nursery: trio.Nursery, name: str, report: int) -> trio.abc.Stream:
    """A slave played by the test, connected to ``master``'s HA service, its first report sent."""
    ours, theirs = trio.testing.memory_stream_pair()
    nursery.start_soon(master.ha.serve_connection, theirs, name)
    await ours.send_all(encode_report(report))
    return ours


async def _send(master: MessageStore, results: list[PutStatus]) -> None:
    """A SYNC_MASTER send; its answer goes to ``results``."""
    results.append((await master.put(message(body=b"waiting"))).status)


async def _roll_past_a_waiting_send(
    master: MessageStore, nursery: trio.Nursery, results: list[PutStatus]
) -> tuple[int, int]:
    """Start a send that waits (:func:`_send`), then roll the CommitLog to a new segment with appends that wait for
    nothing: the send's end and the new segment's start."""
    await trio.sleep(0.01)
    nursery.start_soon(_send, master, results)
    await trio.sleep(0.1)
    end = master.commitlog.max_offset
    for _ in range(40):
        master.append(message(body=bytes(200)))
    floor = master.commitlog.queue.files[-1].file_from_offset
    assert end <= floor
    return end, floor


@pytest.mark.parametrize("report", [1 << 40, -5])
async def test_a_first_report_outside_the_masters_log_acknowledges_nothing(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, report: int
) -> None:
    """Any peer of the HA port (it has no ACL) sending one report: before, the first report went unchecked into
    ``push2slave_max_offset``, and every later SYNC_MASTER send was PUT_OK while any slave was connected."""
    master = ha_store(tmp_path, BrokerRole.SYNC_MASTER)
    async with trio.open_nursery() as nursery:
        await nursery.start(master.run)
        await _connect(master, nursery, "outside", report)
        await wait_until(lambda: not master.ha.connections, what="the connection's end")
        assert master.ha.push2slave_max_offset <= 0
        await _fake_slave(master, nursery, ack=False)  # a slave that acknowledges nothing
        await trio.sleep(0.01)
        result = await master.put(message())
        assert result.status is PutStatus.FLUSH_SLAVE_TIMEOUT
        nursery.cancel_scope.cancel()


def _old_masters_log(tmp_path: Path) -> tuple[bytes, int]:
    """The log of a master that held 12 records (an old master's, which a slave copied), and where its 12th starts."""
    old_master = ha_store(tmp_path / "old", BrokerRole.ASYNC_MASTER)
    for i in range(12):
        old_master.append(message(body=bytes(100 + i)))
    data = bytes(old_master.commitlog.read(0, old_master.commitlog.max_offset) or b"")
    boundary = old_master.consume_queue("TopicTest", 0).entry(11)[0]  # type: ignore[index]
    old_master.close()
    return data, boundary


def _recovered_master(tmp_path: Path, role: BrokerRole, past: int = 0) -> MessageStore:
    """The master after losing its unflushed tail: 5 of the old master's records, then records of its own until its
    log ends past ``past``; asserts no record of it starts at ``past``."""
    master = ha_store(tmp_path / "master", role)
    for i in range(5):
        master.append(message(body=bytes(100 + i)))
    while master.commitlog.max_offset <= past:
        master.append(message(body=bytes(333)))
    if past:
        cq = master.consume_queue("TopicTest", 0)
        starts = {entry[0] for entry in (cq.entry(o) for o in range(cq.max_offset)) if entry is not None}
        assert past not in starts  # the slave's end is inside one of the master's records
    return master


def _seed_slave(tmp_path: Path, data: bytes) -> None:
    """A slave's store holding ``data`` (what it copied from the old master), closed again."""
    seed = ha_store(tmp_path / "slave", BrokerRole.SLAVE)
    assert seed.replica is not None
    seed.replica.append(0, data)
    seed.close()


async def test_a_slave_ahead_of_a_recovered_master_is_refused_not_acknowledged(tmp_path: Path) -> None:
    """The slave holds 12 records, the master (which lost its unflushed tail) 5 of them: the slave's report is
    beyond the master's end, so the connection ends and a SYNC_MASTER send is never answered PUT_OK for bytes the
    slave holds differently."""
    data, _ = _old_masters_log(tmp_path)
    master = _recovered_master(tmp_path, BrokerRole.SYNC_MASTER)
    _seed_slave(tmp_path, data)
    async with trio.open_nursery() as nursery:
        await nursery.start(master.run)
        slave = ha_store(tmp_path / "slave", BrokerRole.SLAVE, master)
        assert slave.commitlog.max_offset > master.commitlog.max_offset
        await nursery.start(slave.run)
        with trio.fail_after(10):
            result = await master.put(message(body=b"acknowledged?"))
        assert result.status is not PutStatus.PUT_OK
        assert master.ha.push2slave_max_offset <= 0
        nursery.cancel_scope.cancel()


async def test_a_diverged_slave_keeps_its_log_once_the_recovered_master_grows_past_it(tmp_path: Path) -> None:
    """The slave holds 12 records, the recovered master 5 of them and then others of its own, until its log ends
    past the slave's: the master's bytes at the slave's end are the middle of one of its records. The slave must not
    append them after its own history (its log would hold a record that is half its own, half the master's);
    it refuses them and keeps its log as it was."""
    data, _ = _old_masters_log(tmp_path)
    master = _recovered_master(tmp_path, BrokerRole.ASYNC_MASTER, past=len(data))
    _seed_slave(tmp_path, data)
    async with trio.open_nursery() as nursery:
        await nursery.start(master.run)
        slave = ha_store(tmp_path / "slave", BrokerRole.SLAVE, master)
        await nursery.start(slave.run)
        client = slave.ha.client
        assert client is not None
        await wait_until(lambda: client.sessions >= 3 or slave.commitlog.max_offset != len(data), what="a session")
        assert slave.commitlog.max_offset == len(data)
        assert bytes(slave.commitlog.read(0, len(data)) or b"") == data
        assert slave.replica is not None and slave.replica.stalled is None
        nursery.cancel_scope.cancel()


async def test_a_diverged_slave_holding_part_of_a_record_keeps_its_records(tmp_path: Path) -> None:
    """As above, but the slave's connection to its old master dropped inside the 12th record: it holds 11 records and
    that record's first 50 bytes, and the recovered master's log has no record at either end. The master's bytes at
    the slave's end must not complete the slave's partial record (half the old master's, half the new one's, then
    acknowledged by the slave's next report): the slave keeps its 11 records and takes nothing of this master's."""
    data, boundary = _old_masters_log(tmp_path)
    held = data[: boundary + 50]
    master = _recovered_master(tmp_path, BrokerRole.ASYNC_MASTER, past=len(data))
    cq = master.consume_queue("TopicTest", 0)
    starts = {entry[0] for entry in (cq.entry(o) for o in range(cq.max_offset)) if entry is not None}
    assert boundary not in starts and len(held) not in starts  # both ends are inside the master's records
    async with trio.open_nursery() as nursery:
        await nursery.start(master.run)
        slave = ha_store(tmp_path / "slave", BrokerRole.SLAVE, master)
        assert slave.replica is not None
        slave.replica.append(0, held)  # what the session with the old master left: a partial record at the end
        assert slave.replica.dispatched == boundary
        await nursery.start(slave.run)
        client = slave.ha.client
        assert client is not None
        await wait_until(lambda: client.sessions >= 3 or slave.commitlog.max_offset > len(held), what="a session")
        assert slave.commitlog.max_offset <= len(held)
        assert bytes(slave.commitlog.read(0, boundary) or b"") == data[:boundary]
        assert slave.replica.dispatched == boundary and slave.replica.stalled is None
        nursery.cancel_scope.cancel()


async def test_a_first_report_inside_one_of_the_masters_records_acknowledges_no_send(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A diverged slave (it kept more than a recovered master, which grew past it) reports an offset inside one of the
    master's records: the end of no copy of this log. Its first report must not answer SEND_OK to a send ending
    below it: the slave refuses the master's bytes there and never holds that send's record."""
    master = ha_store(tmp_path, BrokerRole.SYNC_MASTER, slave_timeout=10_000)
    results: list[PutStatus] = []
    async with trio.open_nursery() as nursery:
        await nursery.start(master.run)
        await _fake_slave(master, nursery, ack=False)  # a slave that acknowledges nothing: the send waits
        for i in range(5):
            master.append(message(body=bytes(100 + i)))
        nursery.start_soon(_send, master, results)
        await wait_until(lambda: len(master.ha.waits) == 1, what="the waiting send")
        waiting_end = master.commitlog.max_offset
        master.append(message(body=bytes(300)))
        await _connect(master, nursery, "diverged", waiting_end + 10)  # inside the record after the waiting send
        await wait_until(lambda: bool(results), what="the waiting send's answer")
        assert results == [PutStatus.FLUSH_SLAVE_TIMEOUT]
        nursery.cancel_scope.cancel()


async def test_a_new_empty_slave_does_not_acknowledge_records_it_never_received(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """An empty slave is sent the master's current segment only: its acknowledgements release the sends of that
    segment, not a send still waiting for a record of an older one."""
    master = ha_store(tmp_path, BrokerRole.SYNC_MASTER)
    waiting: list[tuple[PutStatus, int]] = []
    async with trio.open_nursery() as nursery:
        await nursery.start(master.run)
        silent = await _fake_slave(master, nursery, ack=False)  # goes away before acknowledging

        async def send() -> None:
            result = await master.put(message(body=b"waiting"))
            waiting.append((result.status, result.append.end_offset))

        await trio.sleep(0.01)
        nursery.start_soon(send)
        await trio.sleep(0.1)
        for _ in range(40):  # appends that wait for nothing roll the CommitLog to a new segment
            master.append(message(body=bytes(200)))
        current = master.commitlog.queue.files[-1].file_from_offset
        await silent.aclose()
        await wait_until(lambda: not master.ha.connections, what="the first slave's end")
        await _fake_slave(master, nursery, ack=True)
        await wait_until(lambda: master.ha.push2slave_max_offset > current, what="the new slave's acknowledgement")
        later = await master.put(message(body=b"after"))
        assert later.status is PutStatus.PUT_OK
        await wait_until(lambda: bool(waiting), what="the waiting send's answer")
        assert waiting[0][1] <= current and waiting[0][0] is PutStatus.FLUSH_SLAVE_TIMEOUT
        nursery.cancel_scope.cancel()


async def test_an_empty_slave_that_reconnects_still_does_not_acknowledge_records_it_never_received(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Empty slave B, sent the current segment only, reconnects (a network blip, housekeeping, a restart) and reports
    the end of its copy: the master cannot tell where that copy began, so B's reports still do not release a send
    waiting for a record of an older segment (the floor was its first connection's only: PUT_OK, no slave held it)."""
    master = ha_store(tmp_path, BrokerRole.SYNC_MASTER, slave_timeout=20_000)
    results: list[PutStatus] = []
    async with trio.open_nursery() as nursery:
        await nursery.start(master.run)
        await _fake_slave(master, nursery, ack=False)  # slave A: connected, acknowledges nothing
        _, floor = await _roll_past_a_waiting_send(master, nursery, results)
        first = await _connect(master, nursery, "slave-b", 0)
        got = await _frames_end(first, master.commitlog.max_offset)
        assert got > floor
        await first.send_all(encode_report(got))
        await wait_until(lambda: master.ha.push2slave_max_offset == got, what="B's acknowledgement")
        await first.aclose()
        await wait_until(lambda: len(master.ha.connections) == 1, what="B's first connection's end")
        master.append(message(body=b"more"))
        second = await _connect(master, nursery, "slave-b", got)
        more = await _frames_end(second, master.commitlog.max_offset)
        await second.send_all(encode_report(more))
        await wait_until(lambda: master.ha.push2slave_max_offset == more, what="B's second acknowledgement")
        assert results == []
        nursery.start_soon(_send, master, results)  # a send after B's reconnect: B acknowledges it
        await wait_until(lambda: len(master.ha.waits) == 2, what="the second waiting send")
        await second.send_all(encode_report(await _frames_end(second, master.commitlog.max_offset)))
        await wait_until(lambda: bool(results), what="the second send's answer")
        assert results == [PutStatus.PUT_OK]
        await wait_until(lambda: len(results) == 2, what="the first send's answer")
        assert results == [PutStatus.PUT_OK, PutStatus.FLUSH_SLAVE_TIMEOUT]
        nursery.cancel_scope.cancel()


async def test_a_slave_that_reconnects_acknowledges_what_it_received_before(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """No empty slave joined since the master started: a slave whose connection dropped after it received a waiting
    send's record, before it acknowledged it, releases the send with its next connection's first report (as
    RocketMQ), rather than the send timing out."""
    master = ha_store(tmp_path, BrokerRole.SYNC_MASTER, slave_timeout=20_000)
    results: list[PutStatus] = []
    async with trio.open_nursery() as nursery:
        await nursery.start(master.run)
        first = await _connect(master, nursery, "slave", 0)  # the master is empty: the slave's copy begins at 0
        await trio.sleep(0.01)
        nursery.start_soon(_send, master, results)
        await wait_until(lambda: len(master.ha.waits) == 1, what="the waiting send")
        got = await _frames_end(first, master.commitlog.max_offset)
        await first.aclose()
        await wait_until(lambda: not master.ha.connections, what="the first connection's end")
        await _connect(master, nursery, "slave", got)  # its first report: the end of what it received
        await wait_until(lambda: bool(results), what="the waiting send's answer")
        assert results == [PutStatus.PUT_OK]
        nursery.cancel_scope.cancel()


async def test_a_peer_resetting_its_connection_does_not_stop_the_ha_listener(tmp_path: Path) -> None:
    """Connected and reset before the accept task ran: ``getpeername`` fails there, which used to end the HA
    service and the store with it."""
    master = ha_store(tmp_path / "master", BrokerRole.ASYNC_MASTER)
    async with trio.open_nursery() as nursery:
        await nursery.start(master.run)
        for _ in range(3):  # no yield to Trio in between: the accept task sees sockets already reset
            sock = socket.create_connection(("127.0.0.1", master.ha.port))
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.close()
        await trio.sleep(0.5)
        slave = ha_store(tmp_path / "slave", BrokerRole.SLAVE, master)
        await nursery.start(slave.run)
        await wait_until(lambda: reported(master), timeout=10, what="the slave's first report")
        nursery.cancel_scope.cancel()


async def test_a_transfer_batch_above_what_a_slave_takes_still_replicates(tmp_path: Path) -> None:
    """``haTransferBatchSize`` (changeable at run time) above the slave's 4 MiB frame limit: the frames are bounded
    by that limit, rather than refused by the slave, sent again and refused for ever."""
    segment = 8 << 20
    master = ha_store(tmp_path / "master", BrokerRole.ASYNC_MASTER, mapped_file_size_commit_log=segment,
                      ha_transfer_batch_size=6 << 20)  # fmt: skip
    async with trio.open_nursery() as nursery:
        await nursery.start(master.run)
        slave = ha_store(tmp_path / "slave", BrokerRole.SLAVE, master, mapped_file_size_commit_log=segment)
        for i in range(1300):  # ~5 MiB in the first segment, all readable at the slave's first report
            master.append(message(body=bytes(4000), queue_id=i % 4))
        await nursery.start(slave.run)
        await wait_until(lambda: caught_up(master, slave), timeout=30, what="the slave's catch-up")
        nursery.cancel_scope.cancel()


async def test_a_role_written_to_a_running_slave_waits_for_its_restart(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """UPDATE_BROKER_CONFIG ``brokerRole`` on a classic slave: the store goes on replicating as a slave, so the
    broker keeps its role too, and its metadata sync goes on (it used to stop for good, the broker half a master);
    a role that is none of RocketMQ's is refused."""
    async with EmbeddedCluster(tmp_path, slaves=1, **SMALL_STORE) as cluster:
        slave = cluster.slave_controllers[0]
        async with Admin(cluster.namesrv_addr) as admin:
            await admin.update_broker_config(cluster.slave_addrs[0], {"brokerRole": "ASYNC_MASTER"})
            with pytest.raises(MQClientError):
                await admin.update_broker_config(cluster.slave_addrs[0], {"brokerRole": "FOO"})
            await admin.create_topic("AfterUpdate", broker_addr=cluster.broker_addr)
        await trio.sleep(30)  # three metadata sync rounds
        assert slave.context.config.broker_role == "SLAVE" and slave.context.store.config.is_slave
        assert slave.context.topics.get("AfterUpdate") is not None


async def test_a_slave_that_cannot_make_its_next_segment_keeps_running(tmp_path: Path) -> None:
    """A slave whose next CommitLog segment cannot be made (a full disk; here a directory squats its name) logs it and
    reconnects later: the refusal escaped its HA client and ended the slave's store, and its broker."""
    master = ha_store(tmp_path / "master", BrokerRole.ASYNC_MASTER)
    for i in range(60):  # > 4 KiB: the slave needs its second segment
        master.append(message(body=bytes(100), queue_id=i % 4))
    assert master.commitlog.max_offset > 4096
    async with trio.open_nursery() as nursery:
        await nursery.start(master.run)
        slave = ha_store(tmp_path / "slave", BrokerRole.SLAVE, master)
        squatted = master.commitlog.queue.next_start()
        (tmp_path / "slave" / "commitlog" / segment_name(squatted)).mkdir(parents=True)
        await nursery.start(slave.run)
        end = master.commitlog.max_offset
        await wait_until(lambda: slave.commitlog.max_offset == end, timeout=10, what="the current segment's copy")
        for i in range(40):  # the master rolls past ``squatted``: the slave cannot
            master.append(message(body=bytes(100), queue_id=i % 4))
        await trio.sleep(3)  # the slave retries; its store (reads, the broker) must go on
        assert slave.commitlog.max_offset == squatted
        nursery.cancel_scope.cancel()


async def test_a_send_kept_below_an_empty_slaves_floor_is_released_by_another_slave(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Slave A has the master's log from its start but is slow to acknowledge; an empty slave B, sent only the current
    segment, races ahead. A send waiting for a record of an older segment is B's to ignore, and A's acknowledgement
    releases it (only reports past the maximum used to be looked at: it timed out)."""
    master = ha_store(tmp_path, BrokerRole.SYNC_MASTER, slave_timeout=20_000)
    results: list[PutStatus] = []
    async with trio.open_nursery() as nursery:
        await nursery.start(master.run)
        slow_a = await _connect(master, nursery, "slow-a", 0)  # the master is empty: A starts at 0

        async def drain() -> None:
            while await slow_a.receive_some(65536):
                pass

        nursery.start_soon(drain)
        end, floor = await _roll_past_a_waiting_send(master, nursery, results)
        await _fake_slave(master, nursery, ack=True)  # empty B: its copy begins at ``floor``
        await wait_until(lambda: master.ha.push2slave_max_offset > floor, what="B's acknowledgement")
        assert results == []  # B's acks do not cover it
        await slow_a.send_all(encode_report(end))  # A has the record
        await wait_until(lambda: bool(results), what="the waiting send's answer")
        assert results == [PutStatus.PUT_OK]
        nursery.cancel_scope.cancel()


async def test_a_transfer_batch_above_a_java_slaves_buffer_sends_frames_it_can_hold(tmp_path: Path) -> None:
    """A 4.9.8 slave reads frames into a 4 MiB buffer (``HAClient.READ_MAX_BUFFER_SIZE``,
    store/src/main/java/org/apache/rocketmq/store/ha/HAService.java) and parses one only once its 12-byte header and
    its body are all in it: a frame of 4 MiB plus the header never fits, and that slave waits for it for ever."""
    segment = 8 << 20
    master = ha_store(tmp_path / "master", BrokerRole.ASYNC_MASTER, mapped_file_size_commit_log=segment,
                      ha_transfer_batch_size=6 << 20)  # fmt: skip
    for i in range(1300):  # ~5 MiB readable at the slave's first report
        master.append(message(body=bytes(4000), queue_id=i % 4))
    async with trio.open_nursery() as nursery:
        await nursery.start(master.run)
        slave = await _connect(master, nursery, "java-slave", 0)
        header = await read_exactly(slave, HEADER_SIZE)
        offset, size = struct.unpack(">qi", header)
        assert offset == 0 and size > 0
        assert HEADER_SIZE + size <= 4 << 20
        nursery.cancel_scope.cancel()
