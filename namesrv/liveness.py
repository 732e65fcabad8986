"""The broker liveness scan: every ``interval`` seconds (first after ``initial_delay``), drop brokers that have not
registered for the route table's expiry and close their connections (docs/protocol.md#82-liveness-timings).

A Trio service: start it with ``await nursery.start(run_liveness_scan, route_table)`` and stop it by cancelling the
nursery. Time is Trio's clock, the same one the processor stamps registrations with, so tests run it under
``autojump_clock``. Closing a connection never raises here (``Connection.close`` is synchronous and idempotent); a
broker without a connection object is just forgotten.
"""

from __future__ import annotations

import logging

import trio

from namesrv.route_table import RouteTable

log = logging.getLogger(__name__)


async def run_liveness_scan(
    route_table: RouteTable,
    *,
    interval: float = 10.0,
    initial_delay: float = 5.0,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    task_status.started()
    await trio.sleep(initial_delay)
    while True:
        for broker in route_table.scan_not_active_brokers(trio.current_time()):
            log.warning(
                "broker %s expired: no registration for %.0f s",
                broker.broker_addr,
                route_table.broker_channel_expired_time,
            )
            close = getattr(broker.connection, "close", None)
            if close is not None:
                close()
        await trio.sleep(interval)
