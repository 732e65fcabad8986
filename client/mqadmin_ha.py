"""``mqadmin haStatus``, as RocketMQ 5.3.3's tools/src/main/java/org/apache/rocketmq/tools/command/ha/
HAStatusSubCommand.java: a broker's (``-b``) or every master's of a cluster (``-c``) replication state, from
GET_BROKER_HA_STATUS (907). A master prints its end, slave counts and a row per slave; a slave its master and its
own figures. ``-i`` repeats every that many seconds (3 when given empty) until interrupted, as in Java; ``--rounds``
(ours) stops after that many rounds. Without ``-b`` or ``-c`` the help is printed. A broker's failure ends the
command (Java catches none). Ours: a timestamp of 0 (no session yet) prints ``-``.
"""

from __future__ import annotations

from typing import Any

import anyio
import click

from client.admin import Admin
from client.mqadmin_support import JAVA_INT, Output, cluster_masters, common, format_ts, run_job
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
    out.line("#LastReadTime\t%s%n", format_ts(client.last_read_timestamp))
    out.line("#LastWriteTime\t%s%n", format_ts(client.last_write_timestamp))
    out.line("#MasterFlushOffset\t%s%n", client.master_flush_offset)


@click.command("haStatus", help="Fetch ha runtime status data.")
@common
@click.option("-c", "--clusterName", "cluster", help="which cluster")
@click.option("-b", "--brokerAddr", "broker_addr", help="which broker to fetch")
@click.option("-i", "--interval", help="the interval(second) of get info")
@click.option("--rounds", type=int, default=0, help="with -i, stop after this many rounds (rocketrio)")
def ha_status(ctx: click.Context, **o: Any) -> None:
    if not (o["broker_addr"] or o["cluster"]):
        click.echo(ctx.get_help())
        return
    text = o["interval"]
    interval = None if text is None else JAVA_INT.convert(text.strip(), None, ctx) if text.strip() else 3

    async def job(admin: Admin, out: Output) -> None:
        broker, cluster = (o["broker_addr"] or "").strip(), (o["cluster"] or "").strip()
        done = 0
        while True:
            for addr in [broker] if broker else await cluster_masters(admin, out, cluster):
                _print_status(out, addr, await admin.ha_status(addr))
            done += 1
            if interval is None or (o["rounds"] and done >= o["rounds"]):
                return
            await anyio.sleep(interval)

    run_job(ctx, job)


#: The commands :mod:`client.mqadmin` registers.
COMMANDS = (ha_status,)
