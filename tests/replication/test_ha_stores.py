"""Replication between two stores in one process: a master and a slave over a real 127.0.0.1 HA connection (bounded
wall-clock waits, no timing assertions), and SYNC_MASTER's answers in virtual time against a slave played by the
test over an in-memory stream."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
import trio
import trio.testing

from store.ha.frames import encode_report
from store.message_store import MessageStore
from store.results import PutStatus
from store.store_config import BrokerRole, FlushDiskType
from tests.conftest import needs_ipv6_loopback
from tests.replication.ha_helpers import caught_up, ha_store, reported, wait_until, written_segments
from tests.store.store_helpers import files_of, message


def _put_some(master: MessageStore, count: int, start: int = 0) -> None:
    for i in range(start, start + count):
        if i % 7 == 3:
            master.append_batch([message(body=bytes(40 + j), queue_id=1, keys=f"b{i}.{j}") for j in range(4)])
        else:
            master.append(message(body=bytes(60 + i % 300), queue_id=i % 3, tags=f"t{i % 2}", keys=f"k{i}"))


async def test_async_master_slave_files_are_byte_identical_after_catch_up(tmp_path: Path) -> None:
    master = ha_store(tmp_path / "master", BrokerRole.ASYNC_MASTER)
    async with trio.open_nursery() as nursery:
        await nursery.start(master.run)
        slave = ha_store(tmp_path / "slave", BrokerRole.SLAVE, master)
        await nursery.start(slave.run)
        # Until its first report the master does not know where the slave starts (an empty slave: the current
        # segment), so the writes wait for it.
        await wait_until(lambda: reported(master), what="the slave's first report")
        for round_ in range(5):  # in rounds, so transfers interleave with appends
            _put_some(master, 60, round_ * 60)
            await trio.sleep(0.05)
        await wait_until(lambda: caught_up(master, slave), what="catch-up")
        await wait_until(lambda: master.ha.push2slave_max_offset == master.commitlog.max_offset, what="the ack")
        assert len(master.commitlog.queue.files) > 3
        nursery.cancel_scope.cancel()
    assert written_segments(slave.root) == written_segments(master.root)
    assert files_of(slave.root / "consumequeue") == files_of(master.root / "consumequeue")
    assert sorted(files_of(slave.root / "index").values()) == sorted(files_of(master.root / "index").values())


async def test_a_new_slave_starts_at_the_master_s_current_segment(tmp_path: Path) -> None:
    master = ha_store(tmp_path / "master", BrokerRole.ASYNC_MASTER)
    _put_some(master, 200)
    current = master.commitlog.queue.files[-1].file_from_offset
    assert current > 0
    async with trio.open_nursery() as nursery:
        await nursery.start(master.run)
        slave = ha_store(tmp_path / "slave", BrokerRole.SLAVE, master)
        await nursery.start(slave.run)
        await wait_until(lambda: caught_up(master, slave), what="catch-up")
        assert slave.commitlog.min_offset == current
        # Records of older segments are not on the slave; those of the current one are, at the same offsets.
        first = master.consume_queue("TopicTest", 0)
        mine = slave.consume_queue("TopicTest", 0)
        assert mine.max_offset == first.max_offset and mine.min_offset > 0
        for offset in range(mine.min_offset, mine.max_offset):
            entry = first.entry(offset)
            assert entry is not None and entry[0] >= current and mine.entry(offset) == entry
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("flush", list(FlushDiskType))
async def test_sync_master_answers_only_once_the_slave_has_the_message(tmp_path: Path, flush: FlushDiskType) -> None:
    master = ha_store(tmp_path / "master", BrokerRole.SYNC_MASTER, flush_disk_type=flush)
    async with trio.open_nursery() as nursery:
        await nursery.start(master.run)
        slave = ha_store(tmp_path / "slave", BrokerRole.SLAVE, master)
        await nursery.start(slave.run)
        await wait_until(lambda: reported(master), what="the slave's first report")
        for i in range(40):
            result = await master.put(message(body=bytes(100 + i), queue_id=i % 2))
            assert result.status is PutStatus.PUT_OK
            assert slave.commitlog.max_offset >= result.append.end_offset
            if flush is FlushDiskType.SYNC_FLUSH:
                assert master.flush_watermark >= result.append.end_offset
        nursery.cancel_scope.cancel()


async def _fake_slave(
    master: MessageStore, nursery: trio.Nursery, *, ack: bool
) -> trio.StapledStream[trio.testing.MemorySendStream, trio.testing.MemoryReceiveStream]:
    """Connect a slave played by the test: it reports 0 and then, with ``ack``, acknowledges every frame."""
    ours, theirs = trio.testing.memory_stream_pair()
    nursery.start_soon(master.ha.serve_connection, theirs, "fake-slave")
    await ours.send_all(encode_report(0))

    async def read_and_ack() -> None:
        buffered = b""
        while True:
            try:
                data = await ours.receive_some(65536)
            except (trio.ClosedResourceError, trio.BrokenResourceError):
                return
            if not data:
                return
            buffered += data
            while len(buffered) >= 12:
                offset, size = struct.unpack_from(">qi", buffered)
                if len(buffered) < 12 + size:
                    break
                buffered = buffered[12 + size :]
                if ack and size:
                    await ours.send_all(encode_report(offset + size))

    nursery.start_soon(read_and_ack)
    return ours


async def test_sync_master_answers_slave_not_available_flush_slave_timeout_and_ok(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    master = ha_store(tmp_path, BrokerRole.SYNC_MASTER)
    async with trio.open_nursery() as nursery:
        await nursery.start(master.run)
        start = trio.current_time()
        assert (await master.put(message())).status is PutStatus.SLAVE_NOT_AVAILABLE  # no slave: at once
        assert (await master.put(message(), wait_flush=False)).status is PutStatus.PUT_OK  # WAIT=false never waits
        assert trio.current_time() == start
        silent = await _fake_slave(master, nursery, ack=False)
        await trio.sleep(0.01)
        start = trio.current_time()
        assert (await master.put(message())).status is PutStatus.FLUSH_SLAVE_TIMEOUT
        assert trio.current_time() - start == 3.0  # slaveTimeout
        await silent.aclose()
        await wait_until(lambda: not master.ha.connections, what="the silent slave's removal")
        await _fake_slave(master, nursery, ack=True)
        await trio.sleep(0.01)
        results = [await master.put(message(body=bytes(i))) for i in range(5)]
        assert [r.status for r in results] == [PutStatus.PUT_OK] * 5
        assert master.ha.push2slave_max_offset >= results[-1].append.end_offset
        nursery.cancel_scope.cancel()


async def test_a_slave_too_far_behind_makes_sends_slave_not_available(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    master = ha_store(tmp_path, BrokerRole.SYNC_MASTER, ha_slave_fallbehind_max=500)
    _put_some(master, 5)
    async with trio.open_nursery() as nursery:
        await nursery.start(master.run)
        await _fake_slave(master, nursery, ack=False)  # reported 0, acknowledges nothing
        await trio.sleep(0.01)
        assert (await master.put(message())).status is PutStatus.SLAVE_NOT_AVAILABLE
        nursery.cancel_scope.cancel()


async def test_a_slave_refuses_appends_but_serves_reads(tmp_path: Path) -> None:
    slave = ha_store(tmp_path, BrokerRole.SLAVE)
    try:
        master_like = ha_store(tmp_path / "m", BrokerRole.ASYNC_MASTER)
        _put_some(master_like, 10)
        assert slave.replica is not None
        slave.replica.append(0, bytes(master_like.commitlog.read(0, master_like.commitlog.max_offset) or b""))
        for refused in (lambda: slave.append(message()), lambda: slave.append_batch([message()])):
            try:
                refused()
            except Exception as exc:
                assert getattr(exc, "put_status", None) == "SERVICE_NOT_AVAILABLE"
                assert "slave" in str(exc)
            else:
                raise AssertionError("a slave accepted an append")
        assert slave.get("TopicTest", 0, 0, 32).messages
        master_like.close()
    finally:
        slave.close()


async def test_two_slaves_both_end_with_the_master_s_log(tmp_path: Path) -> None:
    master = ha_store(tmp_path / "master", BrokerRole.SYNC_MASTER)
    async with trio.open_nursery() as nursery:
        await nursery.start(master.run)
        slaves = [ha_store(tmp_path / f"slave{i}", BrokerRole.SLAVE, master) for i in range(2)]
        for slave in slaves:
            await nursery.start(slave.run)
        await wait_until(lambda: reported(master, 2), what="both slaves' first reports")
        results = [await master.put(message(body=bytes(200 + i), queue_id=i % 2)) for i in range(60)]
        assert {r.status for r in results} == {PutStatus.PUT_OK}  # the fastest slave's acknowledgement suffices
        for slave in slaves:
            await wait_until(lambda s=slave: caught_up(master, s), what="catch-up")  # type: ignore[misc]
        nursery.cancel_scope.cancel()
    for slave in slaves:
        assert written_segments(slave.root) == written_segments(master.root)


@needs_ipv6_loopback
async def test_a_slave_replicates_from_a_bracketed_ipv6_master_address(tmp_path: Path) -> None:
    # A Java master registers its HA address as brokerIP2:haListenPort, an IPv6 brokerIP2 written "[v6]"
    # (RemotingUtil.normalizeHostAddress); haMasterAddress takes the same form.
    master = ha_store(tmp_path / "master", BrokerRole.ASYNC_MASTER, ha_listen_host="::1")
    _put_some(master, 20)
    async with trio.open_nursery() as nursery:
        await nursery.start(master.run)
        slave = ha_store(tmp_path / "slave", BrokerRole.SLAVE, ha_master_address=f"[::1]:{master.ha.port}")
        await nursery.start(slave.run)
        await wait_until(lambda: caught_up(master, slave), 15, "catch-up over IPv6")
        nursery.cancel_scope.cancel()
