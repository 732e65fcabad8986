"""A real client (ali-ons, the C++ core) producing through the SIGKILL of a DLedger leader, in processes of its own:
a name server and three ``mqbroker`` processes in DLedger mode (``tests.e2e.nodes``) with the short timings of
``tests.dledger.ports.FAST``.

Timeline: the group elects a leader, which registers as brokerId 0; the topic is created on it and the test waits
until both followers hold it (their slave sync copies it), so whichever member wins next can take sends. One producer
sends batches without a pause; once :data:`BEFORE` sends are acknowledged and :data:`WARM` seconds later, the leader
is SIGKILLed mid-stream. Its sends then fail (the address is dead) until the client's route, polled every 30 s by
both clients (ali-ons' ``pollNameServerInteval``, the C++ core's ``MQClientFactory::updateTopicRouteInfo``), names
the new leader as brokerId 0; the producer goes on until :data:`AFTER` sends begun after the kill are acknowledged,
which only the new leader can do (the old one is dead, followers refuse sends). A consumer of a fresh group then
reads the topic from the surviving pair until it holds every acknowledged key.
"""

from __future__ import annotations

import time
from pathlib import Path

import attrs
import trio

from broker.ports import BROKER
from client import Admin
from client.errors import MQBrokerError
from remoting.client import RemotingClient
from remoting.errors import RemotingError
from tests.dledger.ports import FAST, free_ports, peers_string
from tests.e2e.cluster import create_topic, wait_for_route
from tests.e2e.harness import Agent, ClientKind, Event, ScenarioError, kill_all
from tests.e2e.nodes import BrokerNode, NamesrvNode
from tests.e2e.scenarios import Session, describe, make_messages

STEP = 90.0  # bounds a wait on a client's route poll (30 s) plus an election, with room for a loaded machine
LIMIT = 300.0
QUEUES = 4
BATCH = 5
BEFORE = 20
#: The C++ core reads its route 3 s after it starts, then every 30 s; ali-ons every 30 s from its start. Killing
#: the leader later than that makes both fail over through their periodic poll, as a long-running producer does.
WARM = 5.0
AFTER = 20
BROKER_NAME = "broker-dl"


@attrs.define
class DLedgerReport:
    """What the producer saw (``sent``, in order) and the consumer got; ``error`` says why the run stopped early."""

    client: str
    log_dir: Path
    old_leader: str = ""
    new_leader: str = ""
    #: Wall-clock ms (the clients' own ``sendTs`` clock) once the SIGKILLed leader was reaped.
    killed_at: int = 0
    expected: dict[str, Event] = attrs.field(factory=dict)
    sent: list[Event] = attrs.field(factory=list)
    received: list[Event] = attrs.field(factory=list)
    error: str = ""

    def acked(self) -> set[str]:
        return {e["key"] for e in self.sent if e.get("ok")}

    def acked_after_kill(self) -> dict[str, int]:
        """Key -> ``sendTs`` of each acknowledged send begun after the kill (only the new leader can answer those)."""
        return {e["key"]: e["sendTs"] for e in self.sent if e.get("ok") and e["sendTs"] > self.killed_at}

    def first_ack_after_kill_ms(self) -> int | None:
        """From the kill to the start of the first send the new leader acknowledged, as the client saw it."""
        times = self.acked_after_kill().values()
        return min(times) - self.killed_at if times else None


class DLedgerRun:
    """Owns the run's processes through the session machinery of ``scenarios.py`` (its agents, logs and kill)."""

    def __init__(self, kind: ClientKind, work: Path, nursery: trio.Nursery) -> None:
        self.session = Session(kind, work, nursery)
        self.report = DLedgerReport(kind.name, self.session.logs)
        self.topic = f"e2e_{kind.name.replace('-', '_')}_dledger"
        self.namesrv = NamesrvNode("dl-namesrv", self.session.logs)
        self.members: list[BrokerNode] = []
        self.producing = True

    async def start_group(self) -> None:
        logs, nursery = self.session.logs, self.session.nursery
        await self.namesrv.start(nursery)
        ports = free_ports(6, **BROKER)  # in one call, so that no two overlap: the DLedger ports, then the brokers'
        peers = peers_string(ports[:3])
        for i in range(3):
            member = BrokerNode(f"dl-n{i}", logs, logs.parent / "dledger" / f"n{i}", self.namesrv.addr,
                                port=ports[3 + i], brokerName=BROKER_NAME, enableDLegerCommitLog="true",
                                dLegerGroup=BROKER_NAME, dLegerPeers=peers, dLegerSelfId=f"n{i}",
                                mappedFileSizeCommitLog=8 << 20, **FAST)  # fmt: skip
            self.members.append(member)
            await member.start(nursery)

    async def leader(self, admin: Admin, other_than: str = "") -> BrokerNode:
        """The member the name server routes as brokerId 0 (a live one, not ``other_than``)."""
        last = ""
        with trio.move_on_after(STEP):
            while True:
                try:
                    data = (await admin.cluster_info()).broker_addr_table.get(BROKER_NAME)
                    last = data.master_addr if data is not None and data.master_addr else ""
                except RemotingError as exc:
                    last = repr(exc)
                found = [m for m in self.members if m.addr == last and m.addr != other_than]
                if found:
                    return found[0]
                await trio.sleep(0.2)
        raise ScenarioError(f"no member of {BROKER_NAME} registered as master other than {other_than!r} ({last})")

    async def create_topic_everywhere(self, admin: Admin, leader: BrokerNode) -> None:
        async with RemotingClient() as client:
            await create_topic(client, leader.addr, self.topic, QUEUES)
            await wait_for_route(client, self.namesrv.addr, self.topic)
        for member in self.members:
            await _holds_topic(admin, member.addr, self.topic)

    async def produce(self, producer: Agent) -> None:
        """Batches until told to stop; a batch that had a failure is followed by a short pause, so a dead route does
        not turn into thousands of failed sends while the client waits for its next route poll."""
        number = 0
        while self.producing:
            batch = make_messages(self.topic, f"dl{number:04d}", BATCH)
            number += 1
            self.report.expected.update({m["keys"]: m for m in batch})
            sent = await producer.produce(batch, timeout=STEP)
            self.report.sent += sent
            if not all(e.get("ok") for e in sent):
                await trio.sleep(0.5)

    async def run(self) -> None:
        report = self.report
        await self.start_group()
        async with Admin(self.namesrv.addr) as admin:
            leader = await self.leader(admin)
            report.old_leader = leader.name
            await self.create_topic_everywhere(admin, leader)
            producer = await self.session.agent("producer", "PG_e2e_dledger", namesrv=self.namesrv.addr)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self.produce, producer)
                await producer.wait_until(lambda: len(report.acked()) >= BEFORE, STEP, f"{BEFORE} acknowledged sends")
                await trio.sleep(WARM)
                await leader.kill()  # reaped: no send begun after this can be answered by it
                report.killed_at = int(time.time() * 1000)
                await producer.wait_until(
                    lambda: len(report.acked_after_kill()) >= AFTER, STEP, f"{AFTER} sends acknowledged after the kill"
                )
                self.producing = False
            report.new_leader = (await self.leader(admin, other_than=leader.addr)).name
            await producer.stop()
        consumer = await self.session.agent("consumer", "CG_e2e_dledger", self.topic, "dl", namesrv=self.namesrv.addr)
        try:
            acked = report.acked()
            await consumer.wait_until(lambda: consumer.received_keys() >= acked, STEP, "every acknowledged message")
            await consumer.stop()
        finally:
            report.received = consumer.received


async def _holds_topic(admin: Admin, addr: str, topic: str) -> None:
    """Wait until the broker at ``addr`` has ``topic`` (a follower copies it by its slave sync, every 10 s)."""
    with trio.move_on_after(STEP):
        while True:
            try:
                await admin.topic_config(addr, topic)
                return
            except (MQBrokerError, RemotingError):
                await trio.sleep(0.5)
    raise ScenarioError(f"{addr} never held topic {topic}")


async def run_dledger(kind: ClientKind, work: Path) -> DLedgerReport:
    """Play the timeline for ``kind`` under ``work``; a failure is recorded in ``error``, never raised."""
    run: DLedgerRun | None = None
    try:
        with trio.move_on_after(LIMIT) as scope:
            async with trio.open_nursery() as nursery:
                run = DLedgerRun(kind, work, nursery)
                try:
                    await run.run()
                except Exception as exc:
                    run.report.error = describe(exc)
                nursery.cancel_scope.cancel()
        assert run is not None
        if scope.cancelled_caught:
            run.report.error = run.report.error or f"the run exceeded {LIMIT:.0f}s"
        for agent in run.session.agents:
            agent.dump_events(run.session.logs / f"{agent.name}.events.jsonl")
        return run.report
    finally:
        await kill_all()
