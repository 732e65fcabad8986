"""Master fail-over with the real clients (ali-ons, the C++ core), in processes of its own beside the session's
broker: a name server, a SYNC_MASTER and its slave (``tests.e2e.nodes``).

Timeline: a consumer reads batch A1 from the master and stops (its offsets reach the slave with the slave's metadata
sync); batch A2 is sent; the master is SIGKILLed; a consumer of the same group, started with only the slave alive,
reads exactly A2 (the rest) from the slave; the master restarts on its port; batch B is sent to it and the same
consumer reads B. Both clients find the slave by RocketMQ's rule (``findBrokerAddressInSubscribe``: the suggested
broker id, else any address of the group) once their route (polled every 30 s) has dropped the dead master.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs
import trio

from client import Admin, api
from remoting.client import RemotingClient
from remoting.codec.bodies import MessageQueue
from remoting.errors import RemotingError
from tests.e2e.cluster import create_topic, wait_for_route
from tests.e2e.harness import Event, ScenarioError
from tests.e2e.nodes import BrokerNode, NamesrvNode

if TYPE_CHECKING:
    from tests.e2e.scenarios import Session

STEP = 90.0
QUEUES = 4
BATCH = 40
GROUP = "CG_e2e_failover"


@attrs.define
class FailoverReport:
    """Keys of each batch, and what each consumer received (``second`` runs from the master's kill to the end)."""

    a1: set[str] = attrs.field(factory=set)
    a2: set[str] = attrs.field(factory=set)
    b: set[str] = attrs.field(factory=set)
    first: list[Event] = attrs.field(factory=list)
    second: list[Event] = attrs.field(factory=list)
    #: Keys the second consumer had when the master came back: all read from the slave.
    from_slave: set[str] = attrs.field(factory=set)
    #: What was sent, by key.
    sent: dict[str, Event] = attrs.field(factory=dict)

    def altered(self, events: list[Event]) -> list[str]:
        """Keys of received messages whose body or tags differ from what was sent."""
        return [e["keys"] for e in events if (e["body"], e["tags"]) != _sent_fields(self.sent.get(e["keys"]))]


def _sent_fields(sent: Event | None) -> tuple[object, object]:
    return (None, None) if sent is None else (sent["body"], sent["tags"])


async def failover_scenario(session: Session) -> None:
    from tests.e2e.scenarios import make_messages

    report = session.report.failover
    topic = f"e2e_{session.kind.name.replace('-', '_')}_failover"
    nursery, logs = session.nursery, session.logs
    namesrv = NamesrvNode("fo-namesrv", logs)
    await namesrv.start(nursery)
    data = logs.parent / "failover"
    props = {"brokerName": "broker-fo", "mappedFileSizeCommitLog": 1 << 20}
    master = BrokerNode("fo-master", logs, data / "master", namesrv.addr, brokerRole="SYNC_MASTER", **props)
    slave = BrokerNode("fo-slave", logs, data / "slave", namesrv.addr, brokerRole="SLAVE", brokerId=1, **props)
    await master.start(nursery)
    await slave.start(nursery)
    async with RemotingClient() as admin:
        await create_topic(admin, master.addr, topic, QUEUES)
        await wait_for_route(admin, namesrv.addr, topic)
        batches = {name: make_messages(topic, f"fo{name}", BATCH) for name in ("a1", "a2", "b")}
        report.a1, report.a2, report.b = ({m["keys"] for m in batches[n]} for n in ("a1", "a2", "b"))
        report.sent = {m["keys"]: m for batch in batches.values() for m in batch}
        await _send(session, namesrv.addr, batches["a1"])  # SYNC_MASTER: each SEND_OK is on the slave too
        first = await session.agent("consumer", GROUP, topic, "fo-1", namesrv=namesrv.addr)
        try:
            await first.wait_until(lambda: first.received_keys() >= report.a1, STEP, "batch A1 from the master")
            await first.stop()
        finally:
            report.first = first.received
        await _send(session, namesrv.addr, batches["a2"])
        await _offsets_reached_slave(admin, master.addr, slave.addr, topic)
        # Restarted, the master listens for its slave where it did (its HA port is otherwise listenPort + 1).
        async with Admin(namesrv.addr) as status:
            master.properties["haListenPort"] = (await status.broker_status(master.addr))["haListenPort"]
        await master.kill()
        second = await session.agent("consumer", GROUP, topic, "fo-2", namesrv=namesrv.addr)
        try:
            await second.wait_until(lambda: second.received_keys() >= report.a2, STEP, "batch A2 from the slave")
            report.from_slave = second.received_keys()
            await master.start(nursery)
            async with Admin(namesrv.addr) as status:  # a SYNC_MASTER answers SLAVE_NOT_AVAILABLE until then
                await _slave_connected(status, master.addr)
            await _send(session, namesrv.addr, batches["b"])
            await second.wait_until(lambda: second.received_keys() >= report.b, STEP, "batch B after the restart")
            await second.stop()
        finally:
            report.second = second.received


async def _send(session: Session, namesrv: str, messages: list[Event]) -> None:
    producer = await session.agent("producer", "PG_e2e_failover", namesrv=namesrv)
    try:
        sent = await producer.produce(messages, timeout=STEP)
    finally:
        await producer.stop()
    failed = [e for e in sent if not e.get("ok")]
    if failed:
        raise ScenarioError(f"{len(failed)} fail-over sends failed, first: {failed[0]}")


async def _offsets_reached_slave(admin: RemotingClient, master: str, slave: str, topic: str) -> None:
    """Wait until the slave holds the master's consumer offsets of the group (its metadata sync runs every 10 s)."""
    last: list[int | None] = []
    with trio.move_on_after(STEP):
        while True:
            try:
                wanted = [await _offset(admin, master, topic, q) for q in range(QUEUES)]
                last = [await _offset(admin, slave, topic, q) for q in range(QUEUES)]
            except RemotingError:
                last = []
            if last and last == wanted and any(wanted):
                return
            await trio.sleep(0.5)
    raise ScenarioError(f"the slave never took the master's offsets of {GROUP} (last seen {last})")


async def _slave_connected(status: Admin, broker: str) -> None:
    with trio.move_on_after(STEP):
        while (await status.broker_status(broker)).get("haConnectionCount") != "1":
            await trio.sleep(0.2)
        return
    raise ScenarioError(f"no slave reconnected to the restarted master {broker}")


async def _offset(admin: RemotingClient, broker: str, topic: str, queue_id: int) -> int | None:
    mq = MessageQueue(topic, "broker-fo", queue_id)
    return await api.query_consumer_offset(admin, broker, GROUP, mq, 5)
