"""``mqadmin`` cluster and broker commands, as RocketMQ 4.9.8's ``tools/.../command/cluster/`` and ``broker/``:
``clusterList``, ``brokerStatus``, ``clusterRT``, ``sendMsgStatus``, ``cleanExpiredCQ`` and ``deleteExpiredCommitLog``.
Options, required options and printed lines are Java's; :mod:`client.mqadmin` registers them. ``clusterList -i`` and
``clusterRT`` repeat until interrupted, as in Java; ``--rounds`` (ours) stops them after that many rounds.
"""

from __future__ import annotations

import decimal
import math
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import click

from client.admin import Admin, transferred_tps
from client.message import Message, SendResult
from client.mqadmin_support import (
    JAVA_INT,
    JAVA_LONG,
    Output,
    broker_may_fail,
    cluster_addrs,
    common,
    java_hash_set,
    java_text,
    maintenance_targets,
    print_result,
    printf,
    run_job,
)
from client.producer import Producer
from remoting.codec.bodies import ClusterInfo
from remoting.codec.java_format import java_fixed

__all__ = ["COMMANDS", "send_result_text"]

_BASE = "%-16s  %-22s  %-4s  %-22s %-16s %19s %19s %10s %5s %6s%n"
_DLEDGER = "  %-9s %5s %-6s%n"
_MORE = "%-16s  %-32s %14s %14s %14s %14s%n"
_MORE_ROW = "%-16s  %-32s %14d %14d %14d %14d%n"


def _brokers(info: ClusterInfo) -> list[tuple[str, str, int, str]]:
    """(cluster, broker name, broker id, address) in ClusterListSubCommand's order
    (tools/src/main/java/org/apache/rocketmq/tools/command/cluster/ClusterListSubCommand.java): the clusters as
    ``ClusterInfo.clusterAddrTable``, a ``HashMap``, iterates them, each cluster's broker names sorted (its
    ``TreeSet``), a name's addresses by broker id."""
    out = []
    for cluster in java_hash_set(list(info.cluster_addr_table)):
        names = info.cluster_addr_table[cluster]
        for name in sorted(names):
            data = info.broker_addr_table.get(name)
            for bid, addr in sorted(data.broker_addrs.items()) if data else ():
                out.append((cluster, name, bid, addr))
    return out


def _first(text: str | None) -> float:
    token = (text or "").split(" ")[0]
    try:
        return float(token)
    except ValueError:
        return 0.0


async def _runtime_or_none(admin: Admin, addr: str) -> dict[str, str]:
    """A broker's runtime info, or nothing when it does not answer: its row shows zeros and the others are listed
    (ClusterListSubCommand catches each broker's failure)."""
    with broker_may_fail(addr):
        return await admin.runtime_info(addr)
    return {}


#: ClusterListSubCommand's InTPS/OutTPS cell: ``String.format("%9.2f(%s,%sms)", tps, queue size, head wait)``.
_LOAD = "%9.2f(%s,%sms)"


async def _base_rows(admin: Admin, out: Output) -> None:
    info = await admin.cluster_info()
    brokers = [(c, name, bid, addr, await _runtime_or_none(admin, addr)) for c, name, bid, addr in _brokers(info)]
    # Ours: brokers in DLedger mode add their Raft role, term and leader (the dLedger* runtime-info keys).
    raft = any("dLedgerTerm" in kv for *_, kv in brokers)
    fmt = _BASE[:-2] + _DLEDGER if raft else _BASE
    out.header(fmt, "#Cluster Name", "#Broker Name", "#BID", "#Addr", "#Version", "#InTPS(LOAD)", "#OutTPS(LOAD)",
               "#PCWait(ms)", "#Hour", "#SPACE", *(("#DLedgerRole", "#Term", "#Leader") if raft else ()))  # fmt: skip
    for cluster, name, bid, addr, kv in brokers:
        extra = (kv.get("dLedgerRole", "-"), kv.get("dLedgerTerm", "-"), kv.get("dLedgerLeaderId", "-")) if raft else ()

        def text(key: str, kv: dict[str, str] = kv) -> str:
            # ClusterListSubCommand.printClusterBaseInfo starts each figure as "" and only a fetched runtime table
            # replaces it (a key it lacks then prints as Java's null): a broker that did not answer shows "".
            return "" if not kv else str(java_text(kv.get(key)))

        in_tps, out_tps = _first(kv.get("putTps")), _first(transferred_tps(kv))
        earliest = kv.get("earliestMessageTimeStamp")
        hours = (time.time() * 1000 - int(earliest)) / 3_600_000 if earliest else 0.0
        space = float(kv.get("commitLogDiskRatio") or 0.0)
        out.row(
            fmt, cluster, name, bid, addr, text("brokerVersionDesc"),
            printf(_LOAD, in_tps, text("sendThreadPoolQueueSize"), text("sendThreadPoolQueueHeadWaitTimeMills")),
            printf(_LOAD, out_tps, text("pullThreadPoolQueueSize"), text("pullThreadPoolQueueHeadWaitTimeMills")),
            text("pageCacheLockTimeMills"), printf("%2.2f", hours), printf("%.4f", space), *extra,
        )  # fmt: skip


async def _more_rows(admin: Admin, out: Output) -> None:
    info = await admin.cluster_info()
    out.header(
        _MORE, "#Cluster Name", "#Broker Name", "#InTotalYest", "#OutTotalYest", "#InTotalToday", "#OutTotalToday"
    )
    for cluster, name, _, addr in _brokers(info):
        kv = {
            k: int(v)
            for k, v in (await _runtime_or_none(admin, addr)).items()
            if k.startswith("msg") and v.lstrip("-").isdigit()
        }
        put_today, get_today = kv.get("msgPutTotalTodayMorning", 0), kv.get("msgGetTotalTodayMorning", 0)
        out.row(
            _MORE_ROW, cluster, name,
            put_today - kv.get("msgPutTotalYesterdayMorning", 0), get_today - kv.get("msgGetTotalYesterdayMorning", 0),
            kv.get("msgPutTotalTodayNow", 0) - put_today, kv.get("msgGetTotalTodayNow", 0) - get_today,
        )  # fmt: skip


@click.command("clusterList", help="List all of clusters")
@common
@click.option("-m", "--moreStats", "more", is_flag=True, help="Print more stats")
@click.option("-i", "--interval", type=JAVA_LONG, help="specify intervals numbers, it is in seconds")
@click.option("--rounds", type=int, default=0, help="with -i, stop after this many rounds (rocketrio)")
def cluster_list(ctx: click.Context, **o: Any) -> None:
    async def job(admin: Admin, out: Output) -> None:
        done = 0
        while True:
            await (_more_rows if o["more"] else _base_rows)(admin, out)
            done += 1
            if o["interval"] is None or (o["rounds"] and done >= o["rounds"]):
                return
            await anyio.sleep(o["interval"])

    run_job(ctx, job)


@click.command("brokerStatus", help="Fetch broker runtime status data")
@common
@click.option("-b", "--brokerAddr", "broker_addr", help="Broker address")
@click.option("-c", "--clusterName", "cluster", help="which cluster")
def broker_status(ctx: click.Context, **o: Any) -> None:
    async def job(admin: Admin, out: Output) -> None:
        if o["broker_addr"]:
            out.header("", "Key", "Value")
            for key, value in sorted((await admin.runtime_info(o["broker_addr"])).items()):
                out.row("%-32s: %s%n", key, value)
        elif o["cluster"]:
            out.header("", "Broker", "Key", "Value")
            for addr in await cluster_addrs(admin, out, o["cluster"]):  # masters and slaves, as Java's
                with broker_may_fail(addr):  # as Java's: one broker's failure does not end the listing
                    for key, value in sorted((await admin.runtime_info(addr)).items()):
                        out.row("%-24s %-32s: %s%n", addr, key, value)

    run_job(ctx, job)


def send_result_text(r: SendResult) -> str:
    """Java's ``SendResult.toString()``."""
    return (
        f"SendResult [sendStatus={r.send_status.name}, msgId={r.msg_id}, offsetMsgId={r.offset_msg_id}, "
        f"messageQueue=MessageQueue [topic={r.topic}, brokerName={r.broker_name}, queueId={r.queue_id}], "
        f"queueOffset={r.queue_offset}]"
    )


@click.command("sendMsgStatus", help="send msg to broker.")
@common
@click.option("-b", "--brokerName", "broker", required=True, help="Broker Name")
@click.option("-s", "--messageSize", "size", type=JAVA_INT, default=128, help="Message Size, Default: 128")
@click.option("-c", "--count", type=JAVA_INT, default=50, help="send message count, Default: 50")
def send_msg_status(ctx: click.Context, **o: Any) -> None:
    def body(size: int) -> bytes:
        return ("hello jodie" * ((size + 10) // 11)).encode()  # Java appends it per 11 bytes asked

    async def job(admin: Admin, out: Output) -> None:
        topic = o["broker"]
        async with Producer("PID_SMSC", instance=admin.instance) as producer:
            await producer.send(Message(topic, body(16)))
            for _ in range(o["count"]):
                begin = time.monotonic()
                result = await producer.send(Message(topic, body(o["size"])))
                rt = int((time.monotonic() - begin) * 1000)
                out.entry(f"rt={rt}ms, SendResult={send_result_text(result)}\n", rt=rt, status=result.send_status.name)

    run_job(ctx, job)


@click.command("clusterRT", help="List All clusters Message Send RT")
@common
@click.option("-a", "--amount", type=JAVA_LONG, default=100, help="message amount | default 100")
@click.option("-s", "--size", type=JAVA_LONG, default=128, help="message size | default 128 Byte")
@click.option("-c", "--cluster", help="cluster name | default display all cluster")
@click.option("-p", "--printLog", "print_log", help="print as tlog | default false")
@click.option("-m", "--machineRoom", "machine_room", default="noname", help="machine room name | default noname")
@click.option("-i", "--interval", type=JAVA_LONG, default=10, help="print interval | default 10 seconds")
@click.option("--rounds", type=int, default=0, help="stop after this many rounds (rocketrio; 0: run until stopped)")
def cluster_rt(ctx: click.Context, **o: Any) -> None:
    tlog = (o["print_log"] or "").lower() == "true"

    async def job(admin: Admin, out: Output) -> None:
        info = await admin.cluster_info()
        # CLusterSendMsgRTCommand goes over ClusterInfo.clusterAddrTable's keys (a HashMap) and each cluster's
        # broker names as fastjson fills their Set, a HashSet, neither sorted
        # (tools/src/main/java/org/apache/rocketmq/tools/command/cluster/CLusterSendMsgRTCommand.java).
        clusters = [o["cluster"]] if o["cluster"] else java_hash_set(list(info.cluster_addr_table))
        if not tlog:
            out.header("%-24s  %-24s  %-4s  %-8s  %-8s%n", "#Cluster Name", "#Broker Name", "#RT", "#successCount",
                       "#failCount")  # fmt: skip
        async with Producer(str(int(time.time() * 1000)), instance=admin.instance) as producer:
            done = 0
            while True:
                for cluster in clusters:
                    names = info.cluster_addr_table.get(cluster)
                    if names is None:
                        out.line("cluster [%s] not exist", cluster)
                        break
                    for name in java_hash_set(list(names)):
                        await _probe(producer, out, cluster, name, o["amount"], o["size"], tlog, o["machine_room"])
                done += 1
                if o["rounds"] and done >= o["rounds"]:
                    return
                await anyio.sleep(o["interval"])

    run_job(ctx, job)


async def _probe(
    producer: Producer, out: Output, cluster: str, name: str, amount: int, size: int, tlog: bool, room: str
) -> None:
    ok = failed = 0
    elapsed = 0
    for i in range(amount):
        start = time.monotonic_ns() // 1_000_000
        try:
            await producer.send(Message(name, b"a" * size))
            ok += 1
        except Exception:
            failed += 1
        if i:
            elapsed += time.monotonic_ns() // 1_000_000 - start
    rounded, two_places = rt_texts(elapsed, amount)
    if tlog:
        if rounded == "NaN":  # ``new BigDecimal(NaN)`` throws NumberFormatException, failing the command
            raise ValueError("Infinite or NaN")
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(time.time() + 8 * 3600))
        out.line("%s", f"{stamp}|{room}|{cluster}|{name}|{rounded}\n")
    else:
        out.row("%-24s  %-24s  %-8s  %-16s  %-16s%n", cluster, name, two_places, ok, failed)


def rt_texts(elapsed_ms: int, amount: int) -> tuple[str, str]:
    """``clusterRT``'s average of ``elapsed_ms`` (whole milliseconds) over all sends but the first, as the ``-p true``
    line prints it and as the table does, both rounded half up as Java's: ``new BigDecimal(rt).setScale(0,
    ROUND_HALF_UP)`` and ``String.format("%.2f", rt)``, which rounds the shortest decimal of the double half up
    (tools/src/main/java/org/apache/rocketmq/tools/command/cluster/CLusterSendMsgRTCommand.java). As Java's
    ``(double) elapsed / (amount - 1)``, one send is 0.0 / 0, NaN (``rounded`` then ``NaN``: Java's BigDecimal
    throws), and none 0.0 / -1, -0.0."""
    rt = elapsed_ms / (amount - 1) if amount != 1 else math.nan
    rounded = decimal.Decimal(rt).quantize(decimal.Decimal(1), rounding=decimal.ROUND_HALF_UP)
    return str(rounded.copy_abs() if rounded.is_zero() else rounded), java_fixed(rt, 2)  # BigDecimal has no -0


def _maintenance(name: str, help_text: str, act: Callable[[Admin, str], Awaitable[None]]) -> click.Command:
    """``cleanExpiredCQ`` / ``deleteExpiredCommitLog``: one request to ``-b``, else to every broker of ``-c`` (or
    of every cluster), then Java's ``success``, or ``false`` when no broker was asked (no newline)."""

    @click.command(name, help=help_text)
    @common
    @click.option("-b", "--brokerAddr", "broker_addr", help="Broker address")
    @click.option("-c", "--cluster", help="clustername")
    def command(ctx: click.Context, **o: Any) -> None:
        async def job(admin: Admin, out: Output) -> None:
            targets = await maintenance_targets(admin, o["broker_addr"], o["cluster"])
            for addr in targets:
                await act(admin, addr)
            print_result(out, bool(targets))

        run_job(ctx, job)

    return command


clean_expired_cq = _maintenance(
    "cleanExpiredCQ", "Clean expired ConsumeQueue on broker.", lambda a, addr: a.clean_expired_consume_queue(addr)
)
delete_expired_commit_log = _maintenance(
    "deleteExpiredCommitLog", "Delete expired CommitLog files", lambda a, addr: a.delete_expired_commit_log(addr)
)


#: The commands :mod:`client.mqadmin` registers.
COMMANDS = (cluster_list, broker_status, cluster_rt, send_msg_status, clean_expired_cq, delete_expired_commit_log)
