"""Three DLedgerServers (dledger/server.py) in one process on real sockets, under virtual time: elections, replication
and failover over DLedger's request codes and JSON bodies, and what bad input gets."""

from __future__ import annotations

import random
from pathlib import Path

import orjson
import trio
import trio.testing

from dledger.codes import RequestCode, ResponseCode, Role
from dledger.config import DLedgerConfig
from dledger.effects import AppendDone
from dledger.messages import MetadataRequest, encode
from dledger.server import DLedgerServer
from remoting.client import RemotingClient
from remoting.codec.codes import ResponseCode as RemotingCode
from remoting.codec.command import request
from tests.dledger.ports import free_ports, peers_string


class Group:
    def __init__(self, tmp_path: Path, nursery: trio.Nursery, size: int = 3) -> None:
        self.tmp_path = tmp_path
        self.nursery = nursery
        self.peers = peers_string(free_ports(size))
        self.ids = [f"n{i}" for i in range(size)]
        self.servers: dict[str, DLedgerServer] = {}
        self.scopes: dict[str, trio.CancelScope] = {}

    def config(self, member: str) -> DLedgerConfig:
        return DLedgerConfig(group="g", self_id=member, peers=self.peers, store_base_dir=str(self.tmp_path),
                             mapped_file_size_for_entry_data=1 << 16,
                             mapped_file_size_for_entry_index=1 << 12)  # fmt: skip

    async def start(self, member: str) -> DLedgerServer:
        server = DLedgerServer(self.config(member), rng=random.Random(member))
        scope = trio.CancelScope()

        async def run(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
            with scope:
                await server.run(task_status=task_status)

        await self.nursery.start(run)
        self.servers[member], self.scopes[member] = server, scope
        return server

    def stop(self, member: str) -> None:
        self.scopes.pop(member).cancel()
        self.servers.pop(member)

    def leaders(self) -> list[str]:
        return [i for i, s in self.servers.items() if s.running and s.node.member.role is Role.LEADER]

    async def leader(self) -> DLedgerServer:
        while True:
            leaders = self.leaders()
            if len(leaders) == 1:
                node = self.servers[leaders[0]].node
                if node.ledger.committed_index == node.ledger.end_index >= 0:
                    return self.servers[leaders[0]]
            await trio.sleep(0.05)


async def append(server: DLedgerServer, *bodies: bytes) -> AppendDone:
    done = trio.Event()
    outcome: list[AppendDone] = []

    def callback(result: AppendDone) -> None:
        outcome.append(result)
        done.set()

    code, _ = server.append([(len(b), lambda _p, b=b: b) for b in bodies], callback)
    assert code == ResponseCode.SUCCESS
    await done.wait()
    return outcome[0]


async def test_a_group_elects_replicates_and_fails_over(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    async with trio.open_nursery() as nursery:
        group = Group(tmp_path, nursery)
        for member in group.ids:
            await group.start(member)
        leader = await group.leader()
        done = await append(leader, b"first", b"second")
        assert done.code == ResponseCode.SUCCESS
        old = leader.config.self_id
        started = trio.current_time()
        group.stop(old)
        new = await group.leader()
        took = trio.current_time() - started
        # Its port refuses connections, so the followers campaign at once (no 4-6 s heartbeat leak): one random vote
        # interval (0.3-1 s) and the first commit.
        assert new.config.self_id != old and took <= 1.2
        assert (await append(new, b"third")).code == ResponseCode.SUCCESS
        await group.start(old)
        await trio.sleep(5)
        bodies = {m: [e.body for e in map(s.ledger.get, range(s.ledger.end_index + 1)) if e and e.body]
                  for m, s in group.servers.items()}  # fmt: skip
        assert all(b == [b"first", b"second", b"third"] for b in bodies.values()), bodies
        nursery.cancel_scope.cancel()
    # The files hold it after a clean stop: currterm, checkpoint, data and index.
    assert (tmp_path / f"dledger-{old}" / "currterm").read_text().startswith("currTerm=")
    assert "committedIndex=" in (tmp_path / f"dledger-{old}" / "checkpoint").read_text()


async def _leader_hangs_up(tmp_path: Path, nursery: trio.Nursery) -> tuple[Group, DLedgerServer]:
    """A group of three with a leader that has just closed its connections to the followers (it stays alive)."""
    group = Group(tmp_path, nursery)
    for member in group.ids:
        await group.start(member)
    leader = await group.leader()
    for member, server in group.servers.items():
        if server is not leader:
            assert leader._client is not None
            leader._client.close_connection(server.config.peer_map[member])
    return group, leader


async def test_a_closed_connection_from_a_live_leader_starts_no_election(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with trio.open_nursery() as nursery:
        group, leader = await _leader_hangs_up(tmp_path, nursery)
        term = leader.node.member.curr_term
        await trio.sleep(1)  # the probes connect: the leader is alive, so nobody campaigns
        assert group.leaders() == [leader.config.self_id]
        assert {s.node.member.curr_term for s in group.servers.values()} == {term}
        assert all(s.node.member.role is Role.FOLLOWER for s in group.servers.values() if s is not leader)
        nursery.cancel_scope.cancel()


async def test_a_leader_that_dies_just_after_its_connection_closed_is_found_by_a_later_probe(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # A killed process closes its connections one descriptor at a time: a probe right after the first close can
    # still connect to its listener. The probes are repeated (0, 0.1, 0.4 s later), so the next one is refused.
    async with trio.open_nursery() as nursery:
        group, leader = await _leader_hangs_up(tmp_path, nursery)
        old = leader.config.self_id
        await trio.sleep(0.05)  # the first probes connected
        started = trio.current_time()
        group.stop(old)
        new = await group.leader()
        took = trio.current_time() - started
        assert new.config.self_id != old and took <= 1.2, took
        nursery.cancel_scope.cancel()


async def test_metadata_and_bad_bodies_over_the_wire(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    async with trio.open_nursery() as nursery:
        group = Group(tmp_path, nursery, size=1)
        server = await group.start("n0")
        await group.leader()
        addr = group.config("n0").peer_map["n0"]
        async with RemotingClient() as client:
            metadata = encode(MetadataRequest(group="g", remote_id="n0"))
            answer = await client.invoke(addr, request(RequestCode.METADATA, body=metadata), 3)
            assert answer.code == 200  # DLedger answers with its own SUCCESS, the result in the body
            body = orjson.loads(answer.body)
            assert body["leaderId"] == "n0" and body["peers"] == {"n0": addr}
            bad = await client.invoke(addr, request(RequestCode.VOTE, body=b"{not json"), 3)
            assert orjson.loads(bad.body)["code"] == ResponseCode.UNEXPECTED_ARGUMENT
            appended = await client.invoke(addr, request(RequestCode.APPEND, body=b'{"group":"g","remoteId":"n0",'
                                                         b'"body":"aGVsbG8="}'), 3)  # fmt: skip
            result = orjson.loads(appended.body)
            assert result["code"] == 200 and result["index"] == server.ledger.end_index
            assert server.ledger.get(result["index"]).body == b"hello"  # type: ignore[union-attr]
            unknown = await client.invoke(addr, request(12345), 3)
            assert unknown.code == RemotingCode.REQUEST_CODE_NOT_SUPPORTED
            # Base64 with a character outside ASCII, in a push's entry and in an APPEND: refused, the server lives on.
            push = b'{"group":"g","remoteId":"n0","type":"APPEND","batchEntry":[{"index":0,"body":"\xc3\xa9"}]}'
            for code, body in ((RequestCode.PUSH, push), (RequestCode.APPEND, b'{"group":"g","body":"\xc3\xa9"}')):
                refused = await client.invoke(addr, request(code, body=body), 3)
                assert orjson.loads(refused.body)["code"] == ResponseCode.UNEXPECTED_ARGUMENT
            again = await client.invoke(addr, request(RequestCode.METADATA, body=metadata), 3)
            assert orjson.loads(again.body)["leaderId"] == "n0"
        nursery.cancel_scope.cancel()
