"""A shared trace client instance that fails under its traced clients (client/trace/instances.py, client/trace/
dispatcher.py): 4.9.8's trace producer's ``MQClientInstance`` never dies of an error (its scheduled tasks and
``AsyncTraceDispatcher``'s sends log theirs and go on), so a traced client's traces keep going out; ours move to a
fresh shared instance instead of counting every later batch as failed until they restart.

The failure is a task of the instance's own task group that raises, as any error escaping one of its loops would."""

from __future__ import annotations

import anyio
import pytest
import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from client.admin import Admin
from client.errors import ClientStateError
from client.instance import MQClientInstance
from client.message import Message
from client.mqadmin_trace import find_traces
from client.producer import Producer
from client.trace import TraceDispatcher, TraceType
from client.trace.instances import _entries, running_trace_instances, trace_instance
from tests.client.helpers import create_topic
from tests.client.test_trace import _create, _traces
from tests.client.test_trace_instances import OFFLINE
from tests.threaded_cluster import ThreadedCluster

TOPIC = "FailingTrace"


async def _fail() -> None:
    raise RuntimeError("injected failure of the trace client instance")


def _kill(instance: MQClientInstance) -> None:
    instance.task_group.start_soon(_fail)


def _current(trace: TraceDispatcher | None) -> MQClientInstance | None:
    assert trace is not None
    producer = trace._producer
    return None if producer is None else producer.instance


async def _replaced(trace: TraceDispatcher | None, old: MQClientInstance) -> MQClientInstance:
    """The running instance ``trace`` sends through once it is another than ``old``."""
    with anyio.fail_after(60):
        while (instance := _current(trace)) is None or instance is old:
            await anyio.sleep(0.05)
    return instance


def _stopped(instance: MQClientInstance) -> bool:
    try:
        instance.task_group  # noqa: B018 - raises once stopped
    except ClientStateError:
        return True
    return False


async def test_traced_clients_move_to_a_fresh_trace_instance_when_theirs_fails(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """Two traced producers on a shared trace instance that fails: both go on together on one new instance (the
    failed one stopped and out of the share), their records arrive and no batch is counted as failed."""
    await _create(embedded_cluster, TOPIC)
    addr = embedded_cluster.namesrv_addr
    async with (
        Producer("failing-trace-pg1", addr, enable_msg_trace=True) as p1,
        Producer("failing-trace-pg2", addr, enable_msg_trace=True) as p2,
    ):
        old = _current(p1.trace)
        assert old is not None and _current(p2.trace) is old
        _kill(old)
        new = await _replaced(p1.trace, old)
        assert await _replaced(p2.trace, old) is new and running_trace_instances() == [new]
        assert _stopped(old) and not _stopped(new)
        for producer in (p1, p2):
            sent = await producer.send(Message(TOPIC, b"after the failure"))
            await _traces(embedded_cluster, sent.msg_id, None, {TraceType.Pub})
        assert [t.failed_batches for t in (p1.trace, p2.trace) if t is not None] == [0, 0]
    assert running_trace_instances() == [] and _entries() == {} and _stopped(new)


async def test_records_traced_between_two_trace_instances_go_out_through_the_new_one(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """A send answered while its dispatcher waits for a new trace instance is traced all the same: its record stays
    queued and goes out once the new instance runs, no batch lost or counted as failed."""
    await _create(embedded_cluster, TOPIC)
    async with Producer("between-trace-pg", embedded_cluster.namesrv_addr, enable_msg_trace=True) as producer:
        old = _current(producer.trace)
        assert old is not None
        _kill(old)
        with trio.fail_after(5):
            while _current(producer.trace) is not None:
                await trio.sleep(0.01)
        sent = await producer.send(Message(TOPIC, b"between two instances"))
        assert _current(producer.trace) is None  # the new one is 3 s away
        await _replaced(producer.trace, old)
        await _traces(embedded_cluster, sent.msg_id, None, {TraceType.Pub})
        assert producer.trace is not None and producer.trace.failed_batches == 0


async def test_a_trace_instance_that_keeps_failing_is_replaced_at_most_once_every_three_seconds(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """Every new instance killed as soon as it runs: the dispatcher keeps trying, one attempt every 3 s (no busy
    loop), and its client's close while it waits for the next attempt returns at once, leaving nothing behind."""
    producer = Producer("failing-trace-again-pg", embedded_cluster.namesrv_addr, enable_msg_trace=True)
    async with producer:
        instance = _current(producer.trace)
        assert instance is not None
        seen = [instance]
        began = trio.current_time()
        while trio.current_time() - began < 30:
            _kill(seen[-1])
            seen.append(await _replaced(producer.trace, seen[-1]))
        _kill(seen[-1])
        await trio.sleep(0.5)
        closing = trio.current_time()
    assert trio.current_time() - closing < 1.0
    assert 9 <= len(seen) - 1 <= 11, len(seen)
    assert running_trace_instances() == [] and _entries() == {} and all(_stopped(i) for i in seen)


async def test_a_user_arriving_while_a_failed_instance_stops_gets_a_fresh_one(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A failed instance is out of the share at once: a user arriving while it stops (its stop waiting for a user
    callback) waits for it to end and gets a new running instance, never the dying one."""
    async with trace_instance(OFFLINE) as first:
        first.start_callback(trio.sleep, 10)  # the stop waits for it up to rpc_timeout
        _kill(first)
        await trio.sleep(0.05)
        assert running_trace_instances() == []
        async with trace_instance(OFFLINE) as second:
            assert second is not first and not _stopped(second) and _stopped(first)
            assert running_trace_instances() == [second]
    assert _entries() == {}


@pytest.mark.anyio
async def test_a_failed_trace_instance_is_replaced_on_either_event_loop(cluster: ThreadedCluster) -> None:
    """The recovery runs on asyncio as on Trio: the traced producer's records arrive through the new instance."""
    ns = cluster.namesrv_addr
    await create_topic(ns, "FailingTraceLoop", queues=1)
    async with Producer("loop-failing-trace-pg", ns, enable_msg_trace=True) as producer:
        old = _current(producer.trace)
        assert old is not None
        _kill(old)
        new = await _replaced(producer.trace, old)
        assert running_trace_instances() == [new] and _stopped(old)
        sent = await producer.send(Message("FailingTraceLoop", b"x"))
        async with Admin(ns) as admin:
            with anyio.fail_after(60):
                while not [v for v in await find_traces(admin, sent.msg_id, None) if v.record.type is TraceType.Pub]:
                    await anyio.sleep(0.2)
        assert producer.trace is not None and producer.trace.failed_batches == 0
    assert running_trace_instances() == [] and _stopped(new)
