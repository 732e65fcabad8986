"""Kill -9 the broker with popped messages in flight: after the restart exactly the unacknowledged ones come again
(attempt 2) and the acknowledged ones do not. Real processes; the official 5.x client on both sides of the crash."""

from __future__ import annotations

import time
from typing import Any

import pytest
import trio

from client import Admin
from tests.proxy.cluster import GrpcCluster
from tests.proxy.official import drain, make_message, start_consumer, start_producer

pytestmark = pytest.mark.timeout(180)

SENT = 20
ACKED = 8
INVISIBLE = 6


def _before_crash(endpoint: str) -> tuple[list[str], list[str]]:
    producer = start_producer(endpoint, ["Crash"])
    for i in range(SENT):
        producer.send(make_message("Crash", f"m{i}".encode()))
    consumer = start_consumer(endpoint, "G-crash", "Crash", await_duration=5)
    popped = drain(consumer, SENT, invisible=INVISIBLE, ack=False)
    assert len(popped) == SENT
    for msg in popped[:ACKED]:
        consumer.ack(msg)
    consumer.shutdown()
    producer.shutdown()
    return [m.message_id for m in popped[:ACKED]], [m.message_id for m in popped[ACKED:]]


def _after_restart(endpoint: str) -> list[Any]:
    consumer = start_consumer(endpoint, "G-crash", "Crash", await_duration=5)
    got = drain(consumer, SENT - ACKED, invisible=30, within=40)
    got += consumer.receive(32, 30)  # nothing more may come: the acked ones stay acked
    consumer.shutdown()
    return got


async def test_in_flight_messages_survive_kill_9_and_acked_ones_stay_acked(
    grpc_cluster: GrpcCluster, nursery: trio.Nursery
) -> None:
    async with Admin(grpc_cluster.namesrv_addr) as admin:
        await admin.create_topic("Crash", read_queue_nums=4, write_queue_nums=4)
    acked, in_flight = await trio.to_thread.run_sync(_before_crash, grpc_cluster.endpoint)
    popped_at = time.monotonic()
    await trio.sleep(1.0)  # consumer offsets are saved every 200 ms here (flushConsumerOffsetInterval)
    await grpc_cluster.kill_broker()
    await grpc_cluster.start_broker(nursery)
    got = await trio.to_thread.run_sync(_after_restart, grpc_cluster.endpoint)
    assert sorted(m.message_id for m in got) == sorted(in_flight)
    assert not {m.message_id for m in got} & set(acked)
    assert all(m.delivery_attempt == 2 for m in got)
    assert time.monotonic() - popped_at >= INVISIBLE - 1  # not before their invisible time ended


def _long_poll(endpoint: str, outcome: list[str]) -> None:
    consumer = start_consumer(endpoint, "G-term", "Term", await_duration=20)
    try:
        consumer.receive(16, 30)
        outcome.append("answered")
    except Exception as exc:  # the broker went away mid-poll
        outcome.append(type(exc).__name__)
    finally:
        consumer.shutdown()


async def test_sigterm_with_clients_attached_shuts_down_cleanly(grpc_cluster: GrpcCluster) -> None:
    async with Admin(grpc_cluster.namesrv_addr) as admin:
        await admin.create_topic("Term", read_queue_nums=4, write_queue_nums=4)
    outcome: list[str] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.to_thread.run_sync, _long_poll, grpc_cluster.endpoint, outcome)
        await trio.sleep(4)  # the receive is parked in its long poll
        broker = grpc_cluster.broker
        assert broker is not None
        broker.terminate()
        assert await broker.wait_exit(30) == 0
    assert outcome and outcome != ["answered"]
    log = broker.log_path.read_text()
    assert "Traceback" not in log and "ERROR" not in log, log[-3000:]
