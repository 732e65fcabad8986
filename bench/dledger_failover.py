"""Failover of a DLedger group of three real ``mqbroker`` processes under 8 producers (docs/architecture.md#dledger).

One ``mqnamesrv`` and three ``mqbroker`` processes in DLedger mode (``enableDLegerCommitLog``, DLedger's default
timings unless given). Eight producers of our client (``client.Producer``, synchronous sends, 3 s send timeout, 2
retries) send to whatever the name server routes as brokerId 0; after a failed send a producer re-reads the route and
gives up a send waiting on a failed master once the route names another (client/master_watch.py). Each round
alternates:

- ``kill``: ``kill -9`` the leader, wait for the first acknowledgement from a new one, restart the killed process;
- ``stop``: ``SIGSTOP`` the leader for longer than the election timeout, ``SIGCONT`` it (a paused old leader must not
  acknowledge anything once a new leader exists).

Failover time is the time from the last acknowledgement the old leader gave to the first one a new leader gave.
Afterwards the members are given time to catch up (the same committed index everywhere), every process is stopped
cleanly and each member's store is opened offline: every acknowledged message must be at its queue offset on a
majority of members (``missing`` counts the members that lag behind), no member may hold another message there, and
no queue offset may hold different messages on different members.

With ``--classic N`` the members start from copies of one classic store holding N messages of the topic (a classic
broker's store taken over, RocketMQ's mixed CommitLog): those must then be at their queue offsets on every member too,
and the sends go on after them.

``python -m bench.dledger_failover --rounds 10`` prints one JSON line per round and a summary line; exits 1 when a
check fails. tests/dledger/test_failover_processes.py runs two rounds in CI, from a classic store and from none.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import attrs
import trio

from broker.ports import BROKER, free_ports
from client.errors import MQClientError
from client.message import Message, SendStatus
from client.producer import Producer
from dledger.commitlog_store import DLedgerMessageStore
from dledger.config import DLedgerConfig
from remoting.client import RemotingClient
from remoting.codec.bodies import KVTable
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request
from remoting.codec.message import MessageRecord, decode_record
from remoting.codec.msgid import decode_offset_msg_id
from remoting.errors import RemotingError
from store.message_store import MessageStore
from store.store_config import StoreConfig

TOPIC = "FailoverTopic"
QUEUES = 4
SEGMENT = 8 << 20
_BIN = Path(sys.executable).parent
#: The processes run this checkout's code: the venv's entry scripts would import the tree it was installed from.
_ROOT = str(Path(__file__).resolve().parents[1])


def run_env(code: str) -> dict[str, str]:
    """The environment whose processes import the checkout ``code`` (its tree first on ``PYTHONPATH``)."""
    return os.environ | {"PYTHONPATH": os.pathsep.join(p for p in (code, os.environ.get("PYTHONPATH")) if p)}


_ENV = run_env(_ROOT)
_NAMESRV_BOOT = re.compile(r"address (\S+)")


class CheckFailed(Exception):
    """An acknowledged message is missing or a queue offset holds two messages."""


@attrs.define
class Ack:
    producer: int
    queue_id: int
    queue_offset: int
    body: bytes
    addr: str
    at: float


@attrs.define
class Member:
    member_id: str
    port: int
    root: Path
    argv: list[str]
    process: trio.Process | None = None

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"


class Group:
    """The name server, three brokers, the producers and the checks. Owns its processes (killed on exit)."""

    def __init__(self, work: Path, producers: int, timings: dict[str, int], code: str = _ROOT) -> None:
        self.work = work
        #: the environment of the processes: they run the checkout ``code``
        self.env = run_env(code)
        work.mkdir(parents=True, exist_ok=True)
        self.producers = producers
        ports = free_ports(6, **BROKER)  # a broker binds its port - 2 and + 1 too
        peers = ";".join(f"n{i}-127.0.0.1:{ports[i]}" for i in range(3))
        self.namesrv_addr = ""
        self.namesrv: trio.Process | None = None
        self.members: dict[str, Member] = {}
        for i in range(3):
            member, root = f"n{i}", work / f"n{i}"
            argv = [str(_BIN / "mqbroker"), "--brokerName", "broker-a", "--listenHost", "127.0.0.1",
                    "--listenPort", str(ports[3 + i]), "--storePathRootDir", str(root),
                    "--fastChannelEnable", "false", "--mappedFileSizeCommitLog", str(SEGMENT),
                    "--enableDLegerCommitLog", "true", "--dLegerGroup", "broker-a", "--dLegerPeers", peers,
                    "--dLegerSelfId", member]  # fmt: skip
            for key, value in timings.items():
                argv += [f"--{key}", str(value)]
            self.members[member] = Member(member, ports[3 + i], root, argv)
        self.master: str | None = None
        #: ``(queue id, queue offset)`` -> body of each message of the classic store the members start from
        self.classic: dict[tuple[int, int], bytes] = {}
        self.acks: list[Ack] = []
        self.failed_sends = 0
        self.running = True

    def seed_classic(self, count: int) -> None:
        """Give every member a copy of one classic store holding ``count`` messages of the topic (written offline as
        a classic broker writes them)."""
        first = self.members["n0"].root
        store = MessageStore(StoreConfig(first, mapped_file_size_commit_log=SEGMENT))
        store.load()
        try:
            for i in range(count):
                body = f"classic-{i}".encode()
                msg = MessageRecord(topic=TOPIC, body=body, queue_id=i % QUEUES, born_host=store.store_host,
                                    store_host=store.store_host)  # fmt: skip
                result = store.append(msg)
                self.classic[(i % QUEUES, result.queue_offset)] = body
        finally:
            store.close()
        for member in list(self.members.values())[1:]:
            shutil.copytree(first, member.root)

    # ---- processes -------------------------------------------------------------------------------------------

    async def start_namesrv(self) -> None:
        log = (self.work / "namesrv.log").open("ab")
        proc = await trio.lowlevel.open_process([str(_BIN / "mqnamesrv"), "--listenPort", "0"], stdout=subprocess.PIPE,
                                                stderr=log, start_new_session=True, env=self.env)  # fmt: skip
        log.close()
        self.namesrv = proc
        assert proc.stdout is not None
        text = b""
        with trio.fail_after(60):
            while (found := _NAMESRV_BOOT.search(text.decode("utf-8", "replace"))) is None:
                text += await proc.stdout.receive_some()
        self.namesrv_addr = found.group(1)

    async def start(self, member: Member) -> None:
        log = (self.work / f"{member.member_id}.log").open("ab")
        member.process = await trio.lowlevel.open_process(
            [*member.argv, "-n", self.namesrv_addr], stdout=log, stderr=log, start_new_session=True, env=self.env
        )
        log.close()

    def signal(self, member: Member, sig: signal.Signals) -> None:
        assert member.process is not None
        member.process.send_signal(sig)

    async def kill_all(self) -> None:
        with trio.CancelScope(shield=True):
            for proc in [m.process for m in self.members.values()] + [self.namesrv]:
                if proc is not None and proc.returncode is None:
                    proc.send_signal(signal.SIGCONT)
                    proc.kill()
                    await proc.wait()

    async def stop_all(self) -> None:
        """SIGTERM every broker (a clean stop: flush, checkpoint) and wait."""
        for member in self.members.values():
            if member.process is not None and member.process.returncode is None:
                member.process.send_signal(signal.SIGTERM)
        with trio.fail_after(60):
            for member in self.members.values():
                if member.process is not None:
                    await member.process.wait()

    # ---- clients ---------------------------------------------------------------------------------------------

    async def create_topic(self, client: RemotingClient) -> None:
        fields = {"topic": TOPIC, "defaultTopic": "TBW102", "readQueueNums": str(QUEUES),
                  "writeQueueNums": str(QUEUES), "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0",
                  "order": "false"}  # fmt: skip
        # On the master only (a slave refuses topic changes); the followers copy it by their slave sync.
        with trio.fail_after(60):
            while True:
                for member in self.members.values():
                    try:
                        cmd = request(RequestCode.UPDATE_AND_CREATE_TOPIC, fields)
                        if (await client.invoke(member.addr, cmd, 5)).code == ResponseCode.SUCCESS:
                            return
                    except RemotingError:
                        pass
                await trio.sleep(0.2)

    async def follow_route(self, client: RemotingClient) -> None:
        while True:
            try:
                cmd = request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC})
                answer = await client.invoke(self.namesrv_addr, cmd, 3)
                if answer.code == ResponseCode.SUCCESS:
                    datas = json.loads(bytes(answer.body))["brokerDatas"]
                    self.master = datas[0]["brokerAddrs"].get("0") if datas else None
            except RemotingError:
                pass
            await trio.sleep(0.1)

    async def produce(self, k: int) -> None:
        """One producer of our client sending until the run ends; each SEND_OK is recorded with the queue offset and
        the broker (from the offset msgId's store host) that acknowledged it."""
        seq = 0
        async with Producer(f"PG{k}", self.namesrv_addr, send_msg_timeout=3.0) as producer:
            while self.running:
                body = f"p{k}-{seq}".encode()
                seq += 1
                try:
                    result = await producer.send(Message(TOPIC, body))
                except (MQClientError, RemotingError):
                    result = None
                if result is not None and result.send_status is SendStatus.SEND_OK:
                    host = decode_offset_msg_id(result.offset_msg_id)
                    addr = f"{host.host}:{host.port}"
                    self.acks.append(Ack(k, result.queue_id, result.queue_offset, body, addr, time.monotonic()))
                else:
                    self.failed_sends += 1
                    await trio.sleep(0.05)

    async def boot(self, client: RemotingClient, nursery: trio.Nursery) -> Member:
        """Start the name server and every member, create the topic, follow its route in ``nursery`` and return the
        member routed as brokerId 0 (``TooSlowError`` after 120 s without one)."""
        await self.start_namesrv()
        for member in self.members.values():
            await self.start(member)
        await self.create_topic(client)
        nursery.start_soon(self.follow_route, client)
        with trio.fail_after(120):
            while (leader := self.member_at(self.master)) is None:
                await trio.sleep(0.1)
        return leader

    # ---- rounds ----------------------------------------------------------------------------------------------

    def member_at(self, addr: str | None) -> Member | None:
        return next((m for m in self.members.values() if m.addr == addr), None)

    async def wait_new_leader_ack(self, old: str, since: int) -> Ack:
        with trio.fail_after(120):
            while True:
                fresh = [a for a in self.acks[since:] if a.addr != old]
                if fresh:
                    return fresh[0]
                await trio.sleep(0.05)

    async def round(self, number: int, kind: str, warm: float, pause: float) -> dict[str, Any]:
        await trio.sleep(warm)
        with trio.move_on_after(60):
            while self.member_at(self.master) is None:
                await trio.sleep(0.1)
        leader = self.member_at(self.master)
        if leader is None:
            raise CheckFailed(f"round {number}: no leader routed for 60 s")
        since = len(self.acks)
        self.signal(leader, signal.SIGKILL if kind == "kill" else signal.SIGSTOP)
        first_new = await self.wait_new_leader_ack(leader.addr, since)
        before = [a for a in self.acks[:since] if a.addr == leader.addr]
        last_old = before[-1].at if before else first_new.at
        if kind == "kill":
            assert leader.process is not None
            await leader.process.wait()
            await self.start(leader)
        else:
            await trio.sleep(pause)
            resumed = len(self.acks)
            self.signal(leader, signal.SIGCONT)
            await trio.sleep(3)
            late = [a for a in self.acks[resumed:] if a.addr == leader.addr]
            if late:
                raise CheckFailed(f"round {number}: the resumed old leader acknowledged {len(late)} sends")
        return {"round": number, "kind": kind, "old_leader": leader.member_id,
                "new_leader": getattr(self.member_at(first_new.addr), "member_id", "?"),
                "failover_s": round(first_new.at - last_old, 3), "acks": len(self.acks)}  # fmt: skip

    # ---- checks ----------------------------------------------------------------------------------------------

    async def caught_up(self, client: RemotingClient, timeout: float = 30) -> bool:
        """Wait until every member reports the same committed index (runtime info's ``dLedgerCommittedIndex``)."""
        with trio.move_on_after(timeout):
            while True:
                indexes = set()
                for member in self.members.values():
                    try:
                        answer = await client.invoke(member.addr, request(RequestCode.GET_BROKER_RUNTIME_INFO), 3)
                        indexes.add(KVTable.decode(answer.body).table.get("dLedgerCommittedIndex"))
                    except (RemotingError, ValueError):
                        indexes.add(None)
                if len(indexes) == 1 and None not in indexes:
                    return True
                await trio.sleep(0.2)
        return False

    def check(self) -> dict[str, Any]:
        """Open each member's store offline: every ack at its offset on a majority (and never a different message
        there on any member), members agreeing offset by offset."""
        queues = {member.member_id: _read_member(member) for member in self.members.values()}
        missing: dict[str, int] = dict.fromkeys(queues, 0)
        for ack in self.acks:
            key = (ack.queue_id, ack.queue_offset)
            holders = [m for m, held in queues.items() if held.get(key) == ack.body]
            for member_id, held in queues.items():
                got = held.get(key)
                if got is None:
                    missing[member_id] += 1
                elif got != ack.body:
                    raise CheckFailed(f"{member_id}: queue {key} holds {got!r}, acknowledged {ack.body!r}")
            if 2 * len(holders) <= len(queues):
                raise CheckFailed(f"queue {key} ({ack.body!r}) is held by {holders} only, not a majority")
        acked = {(a.queue_id, a.queue_offset) for a in self.acks}
        if len(acked) != len(self.acks):
            raise CheckFailed("two acknowledgements name the same queue offset")
        for key, body in self.classic.items():
            if key in acked:
                raise CheckFailed(f"a send was acknowledged at {key}, the offset of classic message {body!r}")
            if any(held.get(key) != body for held in queues.values()):
                raise CheckFailed(f"classic message {body!r} is not at {key} on every member")
        reference = queues["n0"]
        for member_id, held in queues.items():
            for key in reference.keys() & held.keys():
                if reference[key] != held[key]:
                    raise CheckFailed(f"queue {key} differs between n0 and {member_id}")
        return {"acked": len(self.acks), "stored": {m: len(q) for m, q in queues.items()}, "missing": missing}


async def cluster_list(namesrv_addr: str) -> list[dict[str, Any]]:
    """``mqadmin clusterList --json`` rows (with the DLedger role, term and leader of each broker)."""
    done = await trio.run_process([str(_BIN / "mqadmin"), "clusterList", "-n", namesrv_addr, "--json"],
                                  capture_stdout=True, check=False, env=_ENV)  # fmt: skip
    try:
        rows: list[dict[str, Any]] = json.loads(done.stdout)["rows"]
    except (ValueError, KeyError):
        return []
    return rows


def _read_member(member: Member) -> dict[tuple[int, int], bytes]:
    dledger = DLedgerConfig(group="broker-a", self_id=member.member_id, peers=f"{member.member_id}-127.0.0.1:1",
                            store_base_dir=str(member.root), mapped_file_size_for_entry_data=SEGMENT)  # fmt: skip
    store = DLedgerMessageStore(StoreConfig(member.root, mapped_file_size_commit_log=SEGMENT), dledger)
    store.load()
    try:
        out: dict[tuple[int, int], bytes] = {}
        for queue_id in range(QUEUES):
            for offset in range(store.max_offset_in_queue(TOPIC, queue_id)):
                got = store.get(TOPIC, queue_id, offset, 1)
                if got.messages:
                    out[(queue_id, offset)] = bytes(decode_record(got.messages[0]).body)
        return out
    finally:
        store.abandon()
        store.ledger.close()


async def run(work: Path, rounds: int, producers: int, warm: float, pause: float, timings: dict[str, int],
              classic: int = 0, kinds: tuple[str, ...] = ("kill", "stop")
              ) -> tuple[list[dict[str, Any]], dict[str, Any]]:  # fmt: skip
    """``kinds``: the faults of the rounds, in turn (``kill``, ``stop``)."""
    group = Group(work, producers, timings)
    if classic:
        group.seed_classic(classic)
    results = []
    try:
        async with RemotingClient() as client, trio.open_nursery() as nursery:
            await group.boot(client, nursery)
            for k in range(producers):
                nursery.start_soon(group.produce, k)
            for number in range(rounds):
                result = await group.round(number, kinds[number % len(kinds)], warm, pause)
                print(json.dumps(result), flush=True)
                results.append(result)
            await trio.sleep(warm)
            group.running = False
            await trio.sleep(3)  # in-flight sends end
            caught_up = await group.caught_up(client)
            nursery.cancel_scope.cancel()
        cluster = await cluster_list(group.namesrv_addr)
        await group.stop_all()
        summary = group.check() | {"cluster_list": cluster, "caught_up": caught_up}
    finally:
        await group.kill_all()
    times = [r["failover_s"] for r in results]
    summary |= {"rounds": len(results), "failover_p50_s": statistics.median(times) if times else None,
                "failover_max_s": max(times, default=None), "failed_sends": group.failed_sends,
                "classic": len(group.classic)}  # fmt: skip
    return results, summary


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.dledger_failover", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--producers", type=int, default=8)
    parser.add_argument("--warm", type=float, default=3.0, help="seconds of sending before each fault")
    parser.add_argument("--pause", type=float, default=10.0, help="seconds a SIGSTOPped leader stays stopped")
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument("--classic", type=int, default=0, help="messages of a classic store the members start from")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="dledger-failover-"))
    try:
        _, summary = trio.run(run, work, args.rounds, args.producers, args.warm, args.pause, {}, args.classic)
    except CheckFailed as exc:
        print(json.dumps({"failed": str(exc), "work": str(work)}), flush=True)
        sys.exit(1)
    print(json.dumps(summary | {"work": str(work)}), flush=True)
    os._exit(0)


if __name__ == "__main__":
    main()
