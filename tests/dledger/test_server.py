"""Three DLedgerServers (dledger/server.py) in one process on real sockets, under virtual time: elections, replication
and failover over DLedger's request codes and JSON bodies, and what bad input gets."""

from __future__ import annotations

import logging
import random
import struct
import tracemalloc
from pathlib import Path
from typing import Any

import attrs
import orjson
import pytest
import trio
import trio.testing

from dledger.codes import RequestCode, ResponseCode, Role
from dledger.config import DLedgerConfig
from dledger.effects import AppendDone
from dledger.entry import INDEX_UNIT_SIZE, POS_OFFSET
from dledger.messages import TERM_MAX, GetEntriesResponse, MetadataRequest, decode, encode
from dledger.server import PULL_REMARK, DLedgerServer
from remoting.client import RemotingClient
from remoting.codec.codes import ResponseCode as RemotingCode
from remoting.codec.command import request
from store.mapped_file import segment_name
from tests.dledger.ports import free_ports, peers_string


class Group:
    def __init__(self, tmp_path: Path, nursery: trio.Nursery, size: int = 3, **settings: Any) -> None:
        self.tmp_path = tmp_path
        self.settings = settings
        self.nursery = nursery
        self.peers = peers_string(free_ports(size))
        self.ids = [f"n{i}" for i in range(size)]
        self.servers: dict[str, DLedgerServer] = {}
        self.scopes: dict[str, trio.CancelScope] = {}
        self.ended: dict[str, trio.Event] = {}

    def config(self, member: str) -> DLedgerConfig:
        return DLedgerConfig(group="g", self_id=member, peers=self.peers, store_base_dir=str(self.tmp_path),
                             mapped_file_size_for_entry_data=1 << 16,
                             mapped_file_size_for_entry_index=1 << 12, **self.settings)  # fmt: skip

    def server(self, member: str) -> DLedgerServer:
        return DLedgerServer(self.config(member), rng=random.Random(member))

    async def start(self, member: str) -> DLedgerServer:
        return await self.run(self.server(member))

    async def run(self, server: DLedgerServer) -> DLedgerServer:
        """Run ``server`` (made by :meth:`server`, maybe loaded already) until :meth:`stop`."""
        member = server.config.self_id
        scope, ended = trio.CancelScope(), trio.Event()

        async def run(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
            try:
                with scope:
                    await server.run(task_status=task_status)
            finally:
                ended.set()

        await self.nursery.start(run)
        self.servers[member], self.scopes[member], self.ended[member] = server, scope, ended
        return server

    def stop(self, member: str) -> None:
        self.scopes.pop(member).cancel()
        self.servers.pop(member)

    async def halt(self, member: str) -> None:
        """:meth:`stop`, then wait until the server has closed its files (in a worker thread)."""
        ended = self.ended[member]
        self.stop(member)
        await ended.wait()

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
    term = leader.node.member.curr_term

    # The member that did not vote hears of the leader on its first heartbeat: wait for it, or it is still at term 0
    # (or at the leader's term as a candidate that lost, until that heartbeat makes it a follower).
    def settled() -> bool:
        others = [s for s in group.servers.values() if s is not leader]
        return {s.node.member.curr_term for s in group.servers.values()} == {term} and all(
            s.node.member.role is Role.FOLLOWER for s in others
        )

    while not settled():
        await trio.sleep(0.05)
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


async def follower_refusing_the_next_entry(group: Group) -> tuple[DLedgerServer, DLedgerServer, Path]:
    """Start ``group`` (three members): ``(leader, follower, in_the_way)``, the follower holding the leader's log to the
    end of its first index segment and unable to make the next one (``in_the_way``, a directory, in its place; EMFILE
    or ENOMEM from mmap alike), so its files cannot take the next entry until ``in_the_way`` goes."""
    index_size = group.config("n0").mapped_file_size_for_entry_index
    for member in group.ids:
        await group.start(member)
    leader = await group.leader()
    follower = next(s for s in group.servers.values() if s is not leader)
    while leader.ledger.end_index < index_size // INDEX_UNIT_SIZE - 1:
        await append(leader, b"fills the first index segment")
    while follower.ledger.end_index < leader.ledger.end_index:
        await trio.sleep(0.05)
    in_the_way = follower.ledger.index.dir_for(index_size) / segment_name(index_size)
    in_the_way.mkdir(parents=True)
    return leader, follower, in_the_way


async def test_a_follower_whose_files_cannot_take_an_entry_answers_406_and_catches_up_once_they_can(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """A follower's next index segment cannot be made (EMFILE, ENOMEM from mmap; here a directory in its place): its
    append raises OSError, which the follower logs (once) and answers 406 INCONSISTENT_STATE, as DLedger's
    ``handleDoAppend`` answers any Throwable; it keeps running (the error used to end its server) and, the files
    able again, takes the leader's next push of the entry. The group commits meanwhile with the other follower."""
    async with trio.open_nursery() as nursery:
        leader, follower, in_the_way = await follower_refusing_the_next_entry(Group(tmp_path, nursery))
        with caplog.at_level(logging.ERROR, "dledger.handler"):
            assert (await append(leader, b"next")).code == ResponseCode.SUCCESS
            for _ in range(1000):  # the leader pushes it again after each 406
                await trio.sleep(0)
        assert follower.running and follower.ledger.end_index == leader.ledger.end_index - 1
        logged = [r.getMessage() for r in caplog.records]
        assert len(logged) == 1 and logged[0].startswith(
            f"dledger {follower.config.self_id}: entry {leader.ledger.end_index} not written"
        ), logged
        in_the_way.rmdir()
        while follower.ledger.end_index < leader.ledger.end_index:
            await trio.sleep(0.05)
        assert follower.ledger.get(leader.ledger.end_index) == leader.ledger.get(leader.ledger.end_index)
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


async def test_get_answers_the_leaders_entry_at_an_index_as_dledger_does(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """GET (50002) as DLedger's client ``get(index)`` uses it: METADATA names the leader, the leader answers the entry
    at ``beginIndex`` (``DLedgerServer.handleGet``, dledger 0.3.2), a follower 404 NOT_LEADER naming the leader, an
    index outside the log 410 INDEX_OUT_OF_RANGE or, below the first entry retention left, 419; the base checks
    401 and 400; each refusal echoes the request's base fields with an empty ``entries``."""
    async with trio.open_nursery() as nursery:
        group = Group(tmp_path, nursery)
        for member in group.ids:
            await group.start(member)
        leader = await group.leader()
        # Small bodies come from the leader's recent entries, large ones from its files; 3 large ones fill a segment.
        bodies = [bytes([i]) * (20_000 if i % 2 else 10) for i in range(12)]
        assert (await append(leader, *bodies)).code == ResponseCode.SUCCESS
        me = leader.config.self_id
        follower = next(m for m in group.ids if m != me)
        async with RemotingClient() as client:

            async def call(code: int, member: str, **fields: object) -> dict[str, Any]:
                body = orjson.dumps({"group": "g", "remoteId": member, **fields})
                answer = await client.invoke(group.config(member).peer_map[member], request(code, body=body), 3)
                assert answer.code == 200  # the result is the body's code, as for every DLedger request
                return orjson.loads(answer.body)  # type: ignore[no-any-return]

            assert (await call(RequestCode.METADATA, follower))["leaderId"] == me
            ledger = leader.ledger
            for index in range(ledger.end_index + 1):
                got = await call(RequestCode.GET, me, beginIndex=index)
                assert (got["code"], got["group"]) == (200, "g") and "leaderId" not in got
                assert decode(GetEntriesResponse, orjson.dumps(got)).entries == (ledger.get(index),)
            assert [e.body for e in map(ledger.get, range(ledger.end_index + 1)) if e and e.body] == bodies
            refused = await call(RequestCode.GET, follower, beginIndex=1, localId="client-1", term=7)
            assert refused == {"code": 404, "entries": [], "group": "g", "leaderId": me, "localId": "client-1",
                               "remoteId": follower, "term": 7}  # fmt: skip
            for index in (-1, ledger.end_index + 1):
                assert (await call(RequestCode.GET, me, beginIndex=index))["code"] == ResponseCode.INDEX_OUT_OF_RANGE
            assert (await call(RequestCode.GET, me, beginIndex=1, remoteId="n9"))["code"] == ResponseCode.UNKNOWN_MEMBER
            assert (await call(RequestCode.GET, me, beginIndex=1, group="h"))["code"] == ResponseCode.UNKNOWN_GROUP
            assert (await call(RequestCode.GET, me))["code"] == ResponseCode.UNEXPECTED_ARGUMENT  # ours: Java throws
            assert ledger.delete_expired(0, ledger.committed_pos, force=True) > 0
            begin = ledger.begin_index
            below = await call(RequestCode.GET, me, beginIndex=begin - 1)
            assert below["code"] == ResponseCode.INDEX_LESS_THAN_LOCAL_BEGIN and below["entries"] == []
            assert (await call(RequestCode.GET, me, beginIndex=begin))["entries"][0]["index"] == begin
            # An entry whose record on disk names another position (DLedgerMmapFileStore.get's check): 414.
            large = next(e for e in map(ledger.get, range(begin, ledger.end_index + 1)) if e and len(e.body) > 10)
            segment = ledger.data.find(large.pos)
            assert segment is not None
            at = large.pos - segment.file_from_offset + POS_OFFSET
            segment.buf[at : at + 8] = struct.pack(">q", large.pos + 1)
            broken = await call(RequestCode.GET, me, beginIndex=large.index)
            assert broken["code"] == ResponseCode.DISK_ERROR and broken["entries"] == []
        nursery.cancel_scope.cancel()


async def test_pull_is_answered_system_error_as_dledger_which_serves_none(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """PULL (51003): DLedger 0.3.2 registers it but ``DLedgerServer.handlePull`` returns null, so whatever the body
    and whichever member, its remoting layer answers SYSTEM_ERROR with no body; a oneway PULL gets nothing. The
    member goes on serving."""
    async with trio.open_nursery() as nursery:
        group = Group(tmp_path, nursery)
        for member in group.ids:
            await group.start(member)
        leader = await group.leader()
        async with RemotingClient() as client:
            for member in group.ids:
                addr = group.config(member).peer_map[member]
                for body in (b'{"group":"g","remoteId":"%s","beginIndex":0,"nodeId":"n9"}' % member.encode(),
                             b"{not json", b""):  # fmt: skip
                    answer = await client.invoke(addr, request(RequestCode.PULL, body=body), 3)
                    assert (answer.code, answer.remark, answer.body) == (RemotingCode.SYSTEM_ERROR, PULL_REMARK, b"")
                await client.invoke_oneway(addr, request(RequestCode.PULL, body=b"{}", oneway=True), 3)
                metadata = encode(MetadataRequest(group="g", remote_id=member))
                answer = await client.invoke(addr, request(RequestCode.METADATA, body=metadata), 3)
                assert orjson.loads(answer.body)["leaderId"] == leader.config.self_id
        nursery.cancel_scope.cancel()


async def test_a_member_listens_on_its_port_on_every_interface_as_dledger_does(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """DLedgerRpcNettyService takes only the port of the member's own ``peers`` entry and NettyRemotingServer binds
    it on every interface (``new InetSocketAddress(listenPort)``), so a member whose peers entry names an address
    that is no interface of its host (a NAT or published port, a load balancer) still starts and is reached at its
    port. Binding the named host failed with "cannot assign requested address" and the member never started."""
    (port,) = free_ports(1)
    async with trio.open_nursery() as nursery:
        group = Group(tmp_path, nursery, size=1)
        group.peers = f"n0-192.0.2.1:{port}"  # TEST-NET-1: never an address of this host
        await group.start("n0")
        await group.leader()
        async with RemotingClient() as client:
            metadata = encode(MetadataRequest(group="g", remote_id="n0"))
            answer = await client.invoke(f"127.0.0.1:{port}", request(RequestCode.METADATA, body=metadata), 3)
            assert orjson.loads(answer.body)["leaderId"] == "n0"
        nursery.cancel_scope.cancel()


async def test_a_throttled_push_to_a_member_far_behind_does_not_copy_the_leaders_last_entry(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """DLedger's ``checkQuotaAndWait`` measures how far behind the leader's end an entry pushed to a member catching
    up lies from the data files' write position (``getMaxWrotePosition``), which reads nothing
    (dledger/src/main/java/io/openmessaging/storage/dledger/DLedgerEntryPusher.java). Here the leader's last entry
    was read whole for every push of an entry more than 1000 behind, its body copied out of the mapping when over
    the 8 KiB the pushes keep in memory: a 4 MB last message cost 0.4 ms a push, 85 times the read of the 1 KB entry
    pushed, on the leader's one thread, during the catch-up the throttle is meant to keep from the live traffic."""
    big = 2 << 20

    class LargeSegments(Group):
        def config(self, member: str) -> DLedgerConfig:
            return attrs.evolve(super().config(member), mapped_file_size_for_entry_data=4 << 20)

    async with trio.open_nursery() as nursery:
        group = LargeSegments(tmp_path, nursery, peer_push_throttle_point=64 * 1024, peer_push_quota=8 * 1024)
        for member in group.ids:
            await group.start(member)
        leader = await group.leader()
        behind = next(m for m in group.ids if m != leader.config.self_id)
        await group.halt(behind)
        for _ in range(13):
            assert (await append(leader, *[bytes(1000)] * 100)).code == ResponseCode.SUCCESS
        server = await group.start(behind)
        start = server.ledger.end_index
        while server.ledger.end_index == start:  # compared, and the first throttled pushes landed
            await trio.sleep(0.01)
        await trio.sleep(4)  # the pushes sent while it was away have timed out (their errors are no noise below)
        body = bytes(big)
        assert (await append(leader, body)).code == ResponseCode.SUCCESS  # the leader's last entry now
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            landed = server.ledger.end_index
            await trio.sleep(3)  # about 8 throttled pushes a second
            peak = tracemalloc.get_traced_memory()[1] - base
        finally:
            tracemalloc.stop()
        assert server.ledger.end_index - landed >= 16 and leader.ledger.end_index - server.ledger.end_index > 1000
        assert peak < big // 2, peak
        nursery.cancel_scope.cancel()


async def test_a_term_a_java_long_cannot_hold_is_refused_and_the_group_lives_on(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A heartbeat claiming a term past Java's long (or past TERM_MAX, which leaves room for the next elections) is
    answered UNEXPECTED_ARGUMENT. Taken as the member's term, it was saved, and the member that next led failed to
    write its first entry's header: every member's DLedger server died, again after each restart."""
    async with trio.open_nursery() as nursery:
        group = Group(tmp_path, nursery)
        for member in group.ids:
            await group.start(member)
        leader = await group.leader()
        target = next(m for m in group.ids if m != leader.config.self_id)
        other = next(m for m in group.ids if m != target)
        async with RemotingClient() as client:
            for term in (2**63, TERM_MAX + 1):
                body = orjson.dumps({"group": "g", "remoteId": target, "localId": other, "leaderId": other,
                                     "term": term, "code": 200})  # fmt: skip
                cmd = request(RequestCode.HEART_BEAT, body=body)
                answer = await client.invoke(group.config(target).peer_map[target], cmd, 3)
                assert orjson.loads(answer.body)["code"] == ResponseCode.UNEXPECTED_ARGUMENT
        await trio.sleep(10)
        assert all(s.running for s in group.servers.values())
        assert all(s.node.member.curr_term < 2**32 for s in group.servers.values())
        leader = await group.leader()
        assert (await append(leader, b"after")).code == ResponseCode.SUCCESS
        nursery.cancel_scope.cancel()


_FUZZ_KEYS = ["group", "remoteId", "localId", "leaderId", "term", "code", "ledgerEndIndex", "ledgerEndTerm", "type",
              "commitIndex", "entry", "batchEntry", "transferId", "transfereeId", "takeLeadershipLedgerIndex", "body",
              "peers", "count", "index", "beginIndex", "endIndex", "voteResult", "batch", "maxSize",
              "indexList"]  # fmt: skip
_ENTRY_KEYS = ["index", "term", "pos", "body", "magic", "size", "channel", "bodyCrc"]
#: Base64 bodies: mostly "hello", now and then not Base64 or not ASCII
_BODIES = ["aGVsbG8="] * 4 + ["!!", "\u00e9Q=="]


def _fuzz_value(rng: random.Random, live: dict[str, object], depth: int = 0) -> object:
    """A JSON value: the group's own names and numbers (so requests get past the first checks), edge numbers and
    strings, Base64, entry-like objects, nesting."""
    kind = rng.randrange(12 if depth < 2 else 9)
    if kind == 0:
        return rng.choice(list(live.values()))
    if kind == 1:
        return rng.choice([0, -1, 1, 2**31, -(2**31) - 1, 2**63 - 1, 2**63, -(2**63), 2**64 - 1])
    if kind == 2:
        return rng.randrange(-3, 40)
    if kind == 3:
        return rng.choice(["", "n0", "n1", "n2", "g", "é", "\u0000", "APPEND", "COMMIT", "COMPARE", "TRUNCATE",
                           "ACCEPT", "REJECT_ALREADY_VOTED", "aGVsbG8=", "!!", "é=="])  # fmt: skip
    if kind == 4:
        return rng.choice([True, False, None, 1.5])
    if kind == 5:
        return []
    if kind in (6, 7, 8):
        return rng.choice([live["term"], live["end"], live["next"], live["pos"]])
    if kind in (9, 10):  # an entry object, often shaped like the next one
        entry = {"index": live["next"], "term": live["term"], "pos": live["pos"], "body": "aGVsbG8="}
        for _ in range(rng.randrange(3)):
            entry[rng.choice(_ENTRY_KEYS)] = _fuzz_value(rng, live, depth + 1)
        return entry if kind == 9 else [entry, _fuzz_value(rng, live, depth + 1)]
    return {rng.choice(_FUZZ_KEYS): _fuzz_value(rng, live, depth + 1) for _ in range(rng.randrange(4))}


def _fuzz_body(rng: random.Random, live: dict[str, object]) -> bytes:
    """A request that usually gets past the group, member and term checks (the right names and term, each field
    replaced now and then), with random other fields; now and then not a JSON object at all."""
    if rng.random() < 0.05:
        return rng.choice([b"", b"{", b"[]", b"null", b"\xff\xfe", b'{"term":1}x'])
    body: dict[str, object] = {"group": "g", "remoteId": live["self"], "localId": live["leader"],
                               "leaderId": live["leader"], "term": live["term"]}  # fmt: skip
    for key in list(body):
        if rng.random() < 0.04:
            body[key] = _fuzz_value(rng, live)
    for key in rng.sample(_FUZZ_KEYS, rng.randrange(1, 7)):
        if key not in body or rng.random() < 0.3:
            body[key] = _fuzz_value(rng, live) if rng.random() < 0.1 else _plausible(rng, key, live)
    return orjson.dumps(body)


def _fuzz_entry(rng: random.Random, live: dict[str, object], at: int) -> dict[str, object]:
    """The entry a leader would push ``at`` entries after the end, a field replaced by a random value now and then."""
    assert isinstance(live["next"], int) and isinstance(live["pos"], int)
    entry: dict[str, object] = {"index": live["next"] + at, "term": live["term"], "pos": live["pos"] + 53 * at,
                                "body": rng.choice(_BODIES), "size": 53}  # fmt: skip
    if rng.random() < 0.4:
        entry[rng.choice(_ENTRY_KEYS)] = _fuzz_value(rng, live, 2)
    return entry


def _plausible(rng: random.Random, key: str, live: dict[str, object]) -> object:
    """A value of the right type for ``key``, often the right one for the group's state."""
    term, end = live["term"], live["end"]
    assert isinstance(term, int) and isinstance(end, int)
    values: dict[str, object] = {
        "term": rng.choice([term, term + 1, term - 1]), "code": 200, "ledgerEndTerm": term,
        "ledgerEndIndex": rng.choice([end, end + 5, -1]), "commitIndex": rng.choice([end, end + 3, -1]),
        "type": rng.choice(["APPEND", "COMMIT", "COMPARE", "TRUNCATE"]), "entry": _fuzz_entry(rng, live, 0),
        "batchEntry": [_fuzz_entry(rng, live, i) for i in range(rng.randrange(4))], "transferId": live["leader"],
        "transfereeId": rng.choice(["n0", "n1", "n2", "n9"]), "takeLeadershipLedgerIndex": end,
        "body": rng.choice(_BODIES), "peers": {}, "voteResult": "ACCEPT", "batch": rng.random() < 0.5,
    }  # fmt: skip
    return values.get(key, rng.randrange(-1, 9))


async def test_random_requests_to_every_member_get_answers_and_break_nothing(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Seeded fuzzing over the wire: 600 requests of every DLedger code with
    bodies built from the group's own names and numbers, edge values and malformed JSON, to the leader and the
    followers, each answered (a push from a member that is not the leader is refused). Every member stays up, and
    afterwards the group has a leader and commits an append."""
    rng = random.Random(20261128)
    codes = [*RequestCode]
    async with trio.open_nursery() as nursery:
        group = Group(tmp_path, nursery)
        for member in group.ids:
            await group.start(member)
        leader = await group.leader()
        assert (await append(leader, b"before")).code == ResponseCode.SUCCESS
        async with RemotingClient() as client:
            for _ in range(600):
                member = rng.choice(group.ids)
                server = group.servers[member]
                ledger = server.ledger
                # Requests claim another member as leader: Raft trusts its leader, so pushes forged in the leader's
                # own name and term could plant entries that contradict its log (outside what DLedger defends).
                impostor = rng.choice([m for m in [*group.ids, "n9"] if m != leader.config.self_id])
                live = {"group": "g", "self": member, "leader": impostor,
                        "term": server.node.member.curr_term, "end": ledger.end_index, "next": ledger.end_index + 1,
                        "pos": ledger.write_pos}  # fmt: skip
                cmd = request(rng.choice(codes), body=_fuzz_body(rng, live))
                with trio.move_on_after(3):
                    await client.invoke(group.config(member).peer_map[member], cmd, 3)
                assert all(s.running for s in group.servers.values())
        leader = await group.leader()
        assert (await append(leader, b"after")).code == ResponseCode.SUCCESS
        nursery.cancel_scope.cancel()
