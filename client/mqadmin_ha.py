"""``mqadmin haStatus``, as RocketMQ 5.3.3's tools/src/main/java/org/apache/rocketmq/tools/command/ha/
HAStatusSubCommand.java: a broker's (``-b``) or every master's of a cluster (``-c``) replication state, from
GET_BROKER_HA_STATUS (907). A master prints its end, slave counts and a row per slave; a slave its master and its
own figures. ``-i`` repeats every that many seconds (3 when given empty) until interrupted, as in Java; ``--rounds``
(ours) stops after that many rounds. ``-b`` (even empty) wins over ``-c``; without either the help is printed, each
round with ``-i``. A broker's failure ends the command (Java catches none) with Java's ``HAStatusSubCommand command
failed`` line, and so does a wait of a negative ``int`` of milliseconds (Java's ``Thread.sleep(flushSecond * 1000)``),
after the first round.
A slave's time of 0 (between its sessions) prints as Java's, the epoch in local time.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import click

from client.admin import Admin
from client.mqadmin_support import JAVA_INT, Output, cluster_masters, common, java_time_text, run_job, say_failure
from remoting.codec.bodies.ha import HARuntimeInfo

__all__ = ["COMMANDS"]

_COLUMNS = "%-32s  %-16s %16s %16s %16s %16s%n"
_ROW = "%-32s  %-16d %16d %16.2f %16s %16d%n"


def _print_status(out: Output, addr: str, info: HARuntimeInfo) -> None:
    if info.master:
        out.line("%n#MasterAddr\t%s%n#MasterCommitLogMaxOffset\t%d%n#SlaveNum\t%d%n#InSyncSlaveNum\t%d%n", addr,
                 info.master_commit_log_max_offset, len(info.ha_connection_info), info.in_sync_slave_nums)  # fmt: skip
        out.header(_COLUMNS, "#SlaveAddr", "#SlaveAckOffset", "#Diff", "#TransferSpeed(KB/s)", "#Status",
                   "#TransferFromWhere")  # fmt: skip
        for c in info.ha_connection_info:
            out.row(_ROW, c.addr, c.slave_ack_offset, c.diff, c.transferred_byte_in_second / 1024.0,
                    "OK" if c.in_sync else "Fall Behind", c.transfer_from_where)  # fmt: skip
        return
    client = info.ha_client_runtime_info
    out.line("%n#MasterAddr\t%s%n", client.master_addr)
    out.line("#CommitLogMaxOffset\t%d%n", client.max_offset)
    out.line("#TransferSpeed(KB/s)\t%.2f%n", client.transferred_byte_in_second / 1024.0)
    out.line("#LastReadTime\t%s%n", java_time_text(client.last_read_timestamp))
    out.line("#LastWriteTime\t%s%n", java_time_text(client.last_write_timestamp))
    out.line("#MasterFlushOffset\t%s%n", client.master_flush_offset)


@click.command("haStatus", help="Fetch ha runtime status data.")
@common
@click.option("-c", "--clusterName", "cluster", help="which cluster")
@click.option("-b", "--brokerAddr", "broker_addr", help="which broker to fetch")
@click.option("-i", "--interval", help="the interval(second) of get info")
@click.option("--rounds", type=int, default=0, help="with -i, stop after this many rounds (rocketrio)")
def ha_status(ctx: click.Context, **o: Any) -> None:
    text = o["interval"]
    interval = None if text is None else JAVA_INT.convert(text.strip(), None, ctx) if text.strip() else 3
    broker, cluster = o["broker_addr"], o["cluster"]  # Java tests hasOption: an empty -b still names a broker

    async def listing(admin: Admin, out: Output) -> None:
        for addr in [broker] if broker is not None else await cluster_masters(admin, out, cluster or ""):
            _print_status(out, addr, await admin.ha_status(addr))

    async def usage() -> None:
        click.echo(ctx.get_help())

    if broker is not None or cluster is not None:
        run_job(ctx, lambda admin, out: _each_round(lambda: listing(admin, out), interval, o["rounds"]))
    elif interval is None:
        click.echo(ctx.get_help())
    else:  # Java's loop prints the help each round (no name server needed)
        try:
            anyio.run(_each_round, usage, interval, o["rounds"])
        except ValueError as exc:
            say_failure(ctx, exc)
            sys.exit(1)


async def _each_round(step: Callable[[], Awaitable[None]], interval: int | None, rounds: int) -> None:
    """``step`` once, or with an ``interval`` every that many seconds, ``rounds`` times (0: until interrupted).
    Raises ValueError after a round when the wait, Java's ``int`` product ``interval * 1000`` ms, is negative
    (``Thread.sleep``'s IllegalArgumentException)."""
    done = 0
    while True:
        await step()
        done += 1
        if interval is None:
            return
        wait_ms = (interval * 1000 + (1 << 31)) % (1 << 32) - (1 << 31)
        if wait_ms < 0:
            raise ValueError("timeout value is negative")
        if rounds and done >= rounds:
            return
        await anyio.sleep(wait_ms / 1000)


#: The commands :mod:`client.mqadmin` registers.
COMMANDS = (ha_status,)
