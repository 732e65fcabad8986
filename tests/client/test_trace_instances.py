"""The trace producers of a process share one client instance (client/trace/instances.py), as 4.9.8's
``MQClientManager`` hands every trace producer with one name server address the same ``MQClientInstance``."""

from __future__ import annotations

import contextlib

import anyio
import attrs
import pytest
import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from client.admin import Admin
from client.config import ClientConfig
from client.consumer.listener import ConsumeConcurrentlyStatus
from client.consumer.push import PushConsumer
from client.errors import ClientStateError, MQBrokerError
from client.instance import MQClientInstance
from client.message import Message, MessageExt, uniq_msg_id
from client.mqadmin_trace import find_traces
from client.producer import Producer
from client.trace import TraceDispatcher, TraceType
from client.trace.instances import _entries, running_trace_instances, trace_instance
from tests.client.helpers import create_topic
from tests.client.test_trace import _create, _traces
from tests.threaded_cluster import ThreadedCluster

TOPIC = "SharedTrace"
ALL = {TraceType.Pub, TraceType.SubBefore, TraceType.SubAfter}


async def _connections(cluster: EmbeddedCluster, group: str) -> set[tuple[str, str]]:
    """(client id, client address) of every connection the broker lists for the producer ``group``."""
    async with Admin(cluster.namesrv_addr) as admin:
        with contextlib.suppress(MQBrokerError):  # the group is not registered
            conns = (await admin.producer_connection(group, TOPIC)).connection_set
            return {(c.client_id, c.client_addr) for c in conns}
    return set()


async def _listed(cluster: EmbeddedCluster, group: str, *, gone: bool = False) -> set[tuple[str, str]]:
    """The group's connections once the broker lists some (``gone``: once it lists none)."""
    with trio.fail_after(120):
        while bool(conns := await _connections(cluster, group)) == gone:
            await trio.sleep(1)
    return conns


def _instance_of(trace: TraceDispatcher | None) -> MQClientInstance:
    assert trace is not None and trace._producer is not None
    return trace._producer.instance


def _consumer(cluster: EmbeddedCluster, consumed: list[str]) -> PushConsumer:
    def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
        consumed.extend(uniq_msg_id(m) for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer("shared-trace-cg", cluster.namesrv_addr, enable_msg_trace=True)
    consumer.subscribe(TOPIC)
    consumer.register_message_listener(listener)
    return consumer


async def _consumed_and_traced(
    cluster: EmbeddedCluster, consumed: list[str], msg_id: str, want: set[TraceType]
) -> None:
    with trio.fail_after(60):
        while msg_id not in consumed:
            await trio.sleep(0.2)
    await _traces(cluster, msg_id, None, want)


async def test_two_traced_producers_and_a_traced_consumer_share_one_trace_instance(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """Three traced clients of one process open one trace instance: the broker lists the three trace groups on one
    connection under ``ip@PID_CLIENT_INNER_TRACE_PRODUCER_<name server>``, and every client's records arrive."""
    await _create(embedded_cluster, TOPIC)
    consumed: list[str] = []
    addr = embedded_cluster.namesrv_addr
    async with (
        _consumer(embedded_cluster, consumed) as consumer,
        Producer("shared-trace-pg1", addr, enable_msg_trace=True) as p1,
        Producer("shared-trace-pg2", addr, enable_msg_trace=True) as p2,
    ):
        traces = (p1.trace, p2.trace, consumer.trace)
        instance = _instance_of(p1.trace)
        assert all(_instance_of(t) is instance for t in traces) and running_trace_instances() == [instance]
        assert instance.client_id == f"{p1.instance.config.client_ip}@PID_CLIENT_INNER_TRACE_PRODUCER_{addr}"
        listed = [await _listed(embedded_cluster, t.inner_group) for t in traces if t is not None]
        assert len(listed) == 3 and set().union(*listed) == {next(iter(listed[0]))}, listed
        assert next(iter(listed[0]))[0] == instance.client_id
        sent = [await p.send(Message(TOPIC, b"x")) for p in (p1, p2)]
        for result in sent:
            await _consumed_and_traced(embedded_cluster, consumed, result.msg_id, ALL)
    assert running_trace_instances() == []


async def test_traced_clients_closed_one_by_one_leave_the_others_tracing_and_the_last_closes_the_instance(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """A traced producer restarted and then closed leaves the shared instance to the others, whose records keep
    arriving; the last traced client's close stops the instance and the broker lists no trace group any more."""
    await _create(embedded_cluster, TOPIC)
    consumed: list[str] = []
    addr = embedded_cluster.namesrv_addr
    consumer = _consumer(embedded_cluster, consumed)
    p1 = Producer("shared-trace-pg1", addr, enable_msg_trace=True)
    p2 = Producer("shared-trace-pg2", addr, enable_msg_trace=True)
    async with consumer:
        async with p2:
            async with p1:
                instance = _instance_of(p1.trace)
                groups = [t.inner_group for t in (p1.trace, p2.trace, consumer.trace) if t is not None]
            async with p1:  # a restart: the same instance, the others untouched
                assert _instance_of(p1.trace) is instance
                sent = await p1.send(Message(TOPIC, b"after restart"))
                await _consumed_and_traced(embedded_cluster, consumed, sent.msg_id, ALL)
            await _listed(embedded_cluster, groups[0], gone=True)
            assert running_trace_instances() == [instance]
            sent = await p2.send(Message(TOPIC, b"p1 closed"))
            await _consumed_and_traced(embedded_cluster, consumed, sent.msg_id, ALL)
        async with Producer("shared-trace-untraced", addr) as plain:
            sent = await plain.send(Message(TOPIC, b"p2 closed"))
        await _consumed_and_traced(embedded_cluster, consumed, sent.msg_id, {TraceType.SubBefore, TraceType.SubAfter})
        assert running_trace_instances() == [instance]
        await _listed(embedded_cluster, groups[2])
    assert running_trace_instances() == []
    with pytest.raises(ClientStateError):
        instance.task_group  # noqa: B018 - stopped
    for group in groups:
        assert await _connections(embedded_cluster, group) == set()


async def test_hosts_with_other_credentials_get_a_trace_instance_of_their_own(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """Where Java's first trace producer's RPC hook would sign every later one's traces, a host with other
    credentials gets its own instance (under the same client id); hosts with equal configs share one."""
    addr = embedded_cluster.namesrv_addr
    signed = ClientConfig(namesrv_addr=addr, access_key="trace-ak", secret_key="trace-sk")
    async with (
        Producer("trace-plain-1", addr, enable_msg_trace=True) as plain1,
        Producer("trace-plain-2", addr, enable_msg_trace=True) as plain2,
        Producer("trace-signed", config=signed, enable_msg_trace=True) as signed_producer,
    ):
        shared, own = _instance_of(plain1.trace), _instance_of(signed_producer.trace)
        assert _instance_of(plain2.trace) is shared and own is not shared
        assert own.client_id == shared.client_id and own.config.access_key == "trace-ak"
        assert {id(i) for i in running_trace_instances()} == {id(shared), id(own)}
    assert running_trace_instances() == []


@pytest.mark.anyio
async def test_traced_producers_share_one_trace_instance_on_either_event_loop(cluster: ThreadedCluster) -> None:
    """The sharing runs on asyncio as on Trio: two traced producers on one instance, one restarted and closed while
    the other's records keep arriving, the instance stopped with the last."""
    ns = cluster.namesrv_addr
    await create_topic(ns, "SharedTraceLoop", queues=1)
    async with Producer("loop-trace-pg2", ns, enable_msg_trace=True) as p2:
        p1 = Producer("loop-trace-pg1", ns, enable_msg_trace=True)
        async with p1:
            instance = _instance_of(p1.trace)
            assert _instance_of(p2.trace) is instance and running_trace_instances() == [instance]
        async with p1:
            assert _instance_of(p1.trace) is instance
        sent = await p2.send(Message("SharedTraceLoop", b"x"))
        async with Admin(ns) as admin:
            with anyio.fail_after(60):
                while not [v for v in await find_traces(admin, sent.msg_id, None) if v.record.type is TraceType.Pub]:
                    await anyio.sleep(0.2)
        assert running_trace_instances() == [instance]
    assert running_trace_instances() == []
    with pytest.raises(ClientStateError):
        instance.task_group  # noqa: B018 - stopped


#: A name server nothing answers on: the instance starts (its route polls fail, logged) and stops.
OFFLINE = ClientConfig(namesrv_addr="127.0.0.1:1", instance_name="offline-trace")


@pytest.mark.anyio
async def test_a_trace_instance_acquire_cancelled_failed_or_racing_a_stop_leaves_nothing_behind() -> None:
    """The shared table's edges on either event loop: a user cancelled before its instance started, an instance whose
    start fails (a TLS file missing: the error reaches the user), users overlapping on one instance, and a user
    arriving while the last one stops it: each leaves no instance running and no entry behind."""
    with anyio.CancelScope() as scope:
        scope.cancel()
        async with trace_instance(OFFLINE):
            pytest.fail("entered a cancelled acquire")
    assert running_trace_instances() == [] and _entries() == {}
    broken = attrs.evolve(OFFLINE, tls=True, tls_ca_file="/nonexistent/ca.pem")
    with pytest.raises(FileNotFoundError):
        async with trace_instance(broken):
            pytest.fail("entered an instance that did not start")
    assert _entries() == {}
    seen: list[MQClientInstance] = []

    async def user(hold: float) -> None:
        async with trace_instance(OFFLINE) as instance:
            seen.append(instance)
            await anyio.sleep(hold)

    async with anyio.create_task_group() as group:
        for hold in (0.0, 0.05, 0.1):
            group.start_soon(user, hold)
    assert len({id(i) for i in seen}) == 1 and _entries() == {}
    seen.clear()
    async with anyio.create_task_group() as group:  # the second arrives while the first's exit stops the instance
        group.start_soon(user, 0.0)
        group.start_soon(user, 0.0)
    assert len(seen) == 2 and _entries() == {}
