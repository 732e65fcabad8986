"""DLedger members whose files fail them (dledger/server.py over dledger/file_store.py), on real sockets and real
files under virtual time: a file that cannot be made (a directory in its place) or a sync that fails (EIO from
``fdatasync``). The member's server keeps running, answers as DLedger 0.3.1.2 does, acknowledges nothing its files
do not hold, and takes up its work once the files can."""

from __future__ import annotations

import errno
import logging
import os
from pathlib import Path

import pytest
import trio
import trio.testing

from dledger.codes import ResponseCode, Role
from dledger.effects import AppendDone
from dledger.server import DLedgerServer
from store import mapped_file
from store.mapped_file import segment_name
from tests.dledger.test_server import Group, append, follower_refusing_the_next_entry


async def _caught_up(follower: DLedgerServer, leader: DLedgerServer) -> None:
    while follower.ledger.end_index < leader.ledger.end_index:
        await trio.sleep(0.05)
    end = leader.ledger.end_index
    assert follower.ledger.get(end) == leader.ledger.get(end)


class _Logged(logging.Handler):
    """Awaits the records of ``logger`` (logged on the Trio thread) whose message starts with ``start``: the files are
    written in worker threads, which the suite's clock waits for only up to its patience (tests/virtual_clock.py),
    so a test polling on virtual time could still race them."""

    def __init__(self, logger: str, start: str) -> None:
        super().__init__()
        self.logger, self.start, self.count = logging.getLogger(logger), start, 0
        self._more = trio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith(self.start):
            self.count += 1
            self._more.set()

    async def at_least(self, count: int) -> None:
        while self.count < count:
            await self._more.wait()
            self._more = trio.Event()

    def __enter__(self) -> _Logged:
        self.logger.addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        self.logger.removeHandler(self)


async def test_a_new_member_whose_first_truncation_cannot_be_written_answers_406_and_joins_once_it_can(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A member with an empty log joins a group that has entries: the leader's TRUNCATE to entry 0 writes its first
    index segment, which cannot be made. The member answers 406 INCONSISTENT_STATE, as DLedger's ``handleDoTruncate``
    answers any Throwable (the OSError stopped its server), with its log still empty; the leader pauses and compares
    again, and once the segment can be made the member takes the log."""
    async with trio.open_nursery() as nursery:
        group = Group(tmp_path, nursery)
        for member in ("n0", "n1"):
            await group.start(member)
        leader = await group.leader()
        await append(leader, b"before n2 joins")
        joining = group.server("n2")
        joining.load()
        in_the_way = joining.ledger.index.dir_for(0) / segment_name(0)
        in_the_way.mkdir(parents=True)
        with _Logged("dledger.handler", "dledger n2: entry 0 not written") as failed:
            await group.run(joining)
            await failed.at_least(1)
            await trio.sleep(3)  # the leader tries again every 500 ms
        assert joining.running and joining.node.member.is_follower
        assert (joining.ledger.begin_index, joining.ledger.end_index, joining.ledger.write_pos) == (-1, -1, 0)
        assert failed.count == 1  # logged once
        in_the_way.rmdir()
        await _caught_up(joining, await group.leader())
        nursery.cancel_scope.cancel()


async def test_a_leader_pauses_before_comparing_again_with_a_follower_that_refuses_the_same_entry_twice(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A follower whose files cannot take the next entry answers its every push 406; the leader then compares,
    finds the follower's log a match up to the entry before and pushes the entry again. It did so as fast as round
    trips go, for as long as the fault lasted (DLedger's dispatcher pauses 1 ms a loop). The same entry refused a
    second time with the follower's watermark unmoved, the leader now pauses 500 ms (DLedger's pause after a failed
    push) before comparing again: here the refusals stop while no time passes. The follower catches up once its
    files can take the entry."""
    async with trio.open_nursery() as nursery:
        leader, follower, in_the_way = await follower_refusing_the_next_entry(Group(tmp_path, nursery))
        dispatcher = leader.node.dispatchers[follower.config.self_id]
        assert (await append(leader, b"next")).code == ResponseCode.SUCCESS
        before = dispatcher.state_changes
        for _ in range(1000):  # no time passes: only a pause stops the cycle of APPEND, 406, COMPARE
            await trio.sleep(0)
        assert dispatcher.state_changes - before <= 3, dispatcher.state_changes - before
        assert follower.ledger.end_index == leader.ledger.end_index - 1
        in_the_way.rmdir()
        await _caught_up(follower, leader)
        nursery.cancel_scope.cancel()


async def test_a_new_leader_that_cannot_write_its_first_entry_steps_down_and_leads_once_it_can(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """A member elected leader appends an empty entry first (ours: the Raft commit rule); its first data segment
    cannot be made. It becomes a candidate again (the OSError stopped its server), votes in a later term after a
    vote interval (not at once, winning the same term again), and leads once the segment can be made."""
    async with trio.open_nursery() as nursery:
        group = Group(tmp_path, nursery, size=1)
        server = group.server("n0")
        server.load()
        in_the_way = server.ledger.data.dir_for(0) / segment_name(0)
        in_the_way.mkdir(parents=True)
        with caplog.at_level(logging.ERROR, "dledger.node"):
            await group.run(server)
            await trio.sleep(5)
        assert server.running and server.node.member.role is not Role.LEADER
        assert server.ledger.end_index == -1
        term = server.node.member.curr_term
        assert 2 <= term <= 20, term  # a vote interval (0.3-1 s) between tries
        assert any(r.getMessage().startswith("dledger n0: leader of term") for r in caplog.records)
        in_the_way.rmdir()
        leader = await group.leader()
        assert (await append(leader, b"after")).code == ResponseCode.SUCCESS
        nursery.cancel_scope.cancel()


def _failing_sync(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every ``fdatasync`` of this process fails with EIO (a disk that cannot write back), until undone."""

    def fail(fd: int) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(mapped_file.os, "fdatasync", fail)


async def test_a_flush_that_fails_is_tried_again_and_acknowledges_nothing_meanwhile(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``syncBeforeAck`` a single member's append waits for its flush, whose ``fdatasync`` fails (EIO): the
    flush task logs it and tries again (the error stopped the server; DLedger's flush service logs it and sleeps
    200 ms), the flushed index stays and the append stays unanswered. Once the sync succeeds, the append commits;
    a member stopped while its syncs fail closes its files and stops cleanly."""
    async with trio.open_nursery() as nursery:
        # The append waits however long the syncs take: a worker thread lets the virtual clock run ahead.
        group = Group(tmp_path, nursery, size=1, sync_before_ack=True, max_wait_ack_time_ms=1 << 40)
        server = await group.start("n0")
        await group.leader()
        flushed = server.ledger.flushed_index
        _failing_sync(monkeypatch)
        outcome: list[AppendDone] = []
        answered = trio.Event()

        def done(result: AppendDone) -> None:
            outcome.append(result)
            answered.set()

        with _Logged("dledger.server", "dledger n0: flush failed") as failed:
            assert server.append([(4, lambda _p: b"body")], done)[0] == ResponseCode.SUCCESS
            await failed.at_least(1)
        await trio.sleep(1)  # tried again meanwhile, without a word
        assert server.running and not outcome and server.ledger.flushed_index == flushed
        monkeypatch.undo()
        await answered.wait()
        assert [o.code for o in outcome] == [ResponseCode.SUCCESS]
        assert server.ledger.flushed_index == server.ledger.end_index
        _failing_sync(monkeypatch)
        assert server.append([(4, lambda _p: b"more")], outcome.append)[0] == ResponseCode.SUCCESS
        await group.halt("n0")
        assert [o.code for o in outcome][1:] == [ResponseCode.TERM_CHANGED]
        assert all(mf.fd == -1 for mf in server.ledger.data.files + server.ledger.index.files)
        nursery.cancel_scope.cancel()


async def test_a_checkpoint_that_cannot_be_written_is_written_at_the_next_interval(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """The ``checkpoint`` file cannot be replaced (its temporary file cannot be made: a directory in its place; a
    full disk alike): the member logs it at each interval and goes on (the OSError stopped its server; DLedger's
    flush service, which writes it, logs it and goes on) and commits appends; once the fault is gone, the next
    write records the committed index."""
    async with trio.open_nursery() as nursery:
        group = Group(tmp_path, nursery, size=1)
        server = await group.start("n0")
        leader = await group.leader()
        checkpoint = server.config.default_path / "checkpoint"
        in_the_way = checkpoint.with_name("checkpoint.tmp")
        in_the_way.mkdir(parents=True)
        with _Logged("dledger.server", "dledger n0: checkpoint not written") as failed:
            await failed.at_least(2)
        assert server.running
        assert (await append(leader, b"during")).code == ResponseCode.SUCCESS
        in_the_way.rmdir()
        await group.halt("n0")
        assert f"committedIndex={server.ledger.committed_index}\n" in checkpoint.read_text()
        nursery.cancel_scope.cancel()


async def test_a_member_whose_currterm_cannot_be_written_grants_no_vote_and_joins_once_it_can(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """The ``currterm`` file cannot be replaced (a directory in place of its temporary file): the member cannot
    record a vote or a new term, so it grants no vote and starts no term (a vote it could not record, granted, could
    be granted again to another candidate after a restart; DLedger logs the failure and votes anyway), and keeps
    running (the OSError of its own campaign stopped its server). The other two elect a leader and commit; once the
    file can be written, the member follows and catches up."""
    async with trio.open_nursery() as nursery:
        group = Group(tmp_path, nursery)
        stuck = group.server("n0")
        in_the_way = stuck.config.default_path / "currterm.tmp"
        in_the_way.mkdir(parents=True)
        for member in group.ids:
            await (group.run(stuck) if member == "n0" else group.start(member))
        leader = await group.leader()
        assert leader is not stuck
        assert (await append(leader, b"without n0")).code == ResponseCode.SUCCESS
        await trio.sleep(5)
        assert stuck.running and stuck.node.member.curr_term == 0 and stuck.node.member.vote_for is None
        assert stuck.ledger.end_index == -1
        in_the_way.rmdir()
        await _caught_up(stuck, leader)
        assert stuck.node.member.curr_term == leader.node.member.curr_term
        nursery.cancel_scope.cancel()
