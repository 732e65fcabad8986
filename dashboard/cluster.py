"""The Cluster page's data: every broker of every cluster with its role, address, version, rates, disk use and
replication state, from GET_BROKER_CLUSTER_INFO, GET_BROKER_RUNTIME_INFO and GET_BROKER_CONFIG (the calls behind
``mqadmin clusterList``).

A broker that does not answer is listed with its error instead of its figures, so one dead broker does not hide
the others. Replication state (:func:`replication_state`) reads the HA keys a replicating broker adds to its runtime
info (``haConnectionCount``, ``slaveFallBehindMuch`` on a master; ``haMasterAddress``, ``haConnected`` on a slave)
and, on a broker without them, compares a slave's commit log with its master's. A slave's lag is its commit log
against its master's row when the master answered, else the slave's own ``haSlaveLagBytes`` (behind the master's end
as the slave last learned it: the HA stream, or the master's runtime info every 10 s).
"""

from __future__ import annotations

from typing import Any

import anyio

from client.admin import BROKER_FAILURES, Admin, transferred_tps


def first_rate(value: str | None) -> float:
    """The first of the three rates of a runtime ``putTps``-style value (``"10s 60s 600s"``), 0.0 when absent."""
    try:
        return float((value or "0").split()[0])
    except (ValueError, IndexError):
        return 0.0


def get_rate(runtime: dict[str, str]) -> float:
    """The broker's first transfer rate, under its 5.x or its 4.9.8 name (:func:`client.admin.transferred_tps`), as
    rocketmq-dashboard's ``cluster.jsx`` reads either."""
    return first_rate(transferred_tps(runtime))


def _int(value: str | None) -> int:
    try:
        return int(value or 0)
    except ValueError:
        return 0


def role_of(broker_id: int, config_role: str | None) -> str:
    """``brokerRole`` as the broker reports it, else what its id says (0: a master)."""
    if config_role:
        return config_role
    return "MASTER" if broker_id == 0 else "SLAVE"


def replication_state(role: str, info: dict[str, str], master_max_offset: int | None) -> str:
    """A short text for the replication column (see the module docstring); ``""`` when there is nothing to say."""
    if role == "SLAVE":
        if "haMasterAddress" in info:
            state = "connected" if info.get("haConnected") == "true" else "disconnected"
            own = _int(info.get("haSlaveLagBytes", "-1"))
            if master_max_offset is not None:
                behind = f", {_behind(info, master_max_offset)} B behind"
            else:
                behind = f", {own} B behind as last known" if own >= 0 else ""
            return f"{state} to {info['haMasterAddress']}{behind}"
        if master_max_offset is None:
            return "no master online"
        return f"{_behind(info, master_max_offset)} B behind master"
    if "haConnectionCount" in info:
        count = _int(info["haConnectionCount"])
        pending = _int(info.get("slaveFallBehindMuch"))
        return f"{count} slave(s), {pending} B not yet replicated" if count else "no slave connected"
    return ""


def _behind(info: dict[str, str], master_max_offset: int) -> int:
    return max(0, master_max_offset - _int(info.get("commitLogMaxOffset")))


async def _broker_facts(admin: Admin, addr: str) -> tuple[dict[str, str], dict[str, str], str | None]:
    """Runtime info and settings of one broker, or the error text when it does not answer."""
    try:
        info = await admin.broker_status(addr)
        config = await admin.broker_config(addr)
    except BROKER_FAILURES as exc:
        return {}, {}, str(exc)
    return info, config, None


async def cluster_overview(admin: Admin) -> dict[str, Any]:
    """``{"brokers": [row...], "clusters": {cluster: [broker name...]}}``; a row per broker address, masters first.
    The brokers are asked concurrently."""
    info = await admin.cluster_info()
    cluster_of = {name: cluster for cluster, names in info.cluster_addr_table.items() for name in names}
    targets = [
        (bd.broker_name, broker_id, addr)
        for bd in info.broker_addr_table.values()
        for broker_id, addr in sorted(bd.broker_addrs.items())
    ]
    facts: dict[str, tuple[dict[str, str], dict[str, str], str | None]] = {}

    async def ask(addr: str) -> None:
        facts[addr] = await _broker_facts(admin, addr)

    async with anyio.create_task_group() as tg:
        for _, _, addr in targets:
            tg.start_soon(ask, addr)
    masters = {name: addr for name, broker_id, addr in targets if broker_id == 0}
    rows = []
    for name, broker_id, addr in sorted(targets):
        runtime, config, error = facts[addr]
        master = facts.get(masters.get(name, ""), ({}, {}, None))[0]
        master_max = _int(master["commitLogMaxOffset"]) if "commitLogMaxOffset" in master else None
        role = role_of(broker_id, config.get("brokerRole"))
        rows.append(
            {
                "cluster": cluster_of.get(name, ""),
                "brokerName": name,
                "brokerId": broker_id,
                "address": addr,
                "role": role,
                "version": runtime.get("brokerVersionDesc", ""),
                "putTps": round(first_rate(runtime.get("putTps")), 2),
                "getTps": round(get_rate(runtime), 2),
                "diskRatio": _disk_ratio(runtime),
                **_day_counts(runtime),
                "replication": replication_state(role, runtime, master_max) if not error else "",
                "error": error,
            }
        )
    return {"brokers": rows, "clusters": {c: sorted(n) for c, n in sorted(info.cluster_addr_table.items())}}


#: The runtime info's day totals (``msgPutTotalTodayNow``...), by when they were read.
_DAY_KEYS = ("TodayNow", "TodayMorning", "YesterdayMorning")


def _day_counts(runtime: dict[str, str]) -> dict[str, int]:
    """Messages put and got today so far and yesterday, from the runtime info's day totals, as rocketmq-dashboard's
    cluster page (frontend-new/src/pages/Cluster/cluster.jsx) and ``mqadmin clusterList`` compute them."""
    counts = {}
    for kind in ("Put", "Get"):
        now, morning, yesterday = (_int(runtime.get(f"msg{kind}Total{day}")) for day in _DAY_KEYS)
        counts[f"msg{kind}Today"] = now - morning
        counts[f"msg{kind}Yesterday"] = morning - yesterday
    return counts


def _disk_ratio(runtime: dict[str, str]) -> float | None:
    try:
        return round(float(runtime["commitLogDiskRatio"]), 4)
    except (KeyError, ValueError):
        return None


async def broker_detail(admin: Admin, addr: str) -> dict[str, Any]:
    """Every runtime key and setting of one broker (the Cluster page's "status" and "config" views)."""
    runtime = await admin.broker_status(addr)
    config = await admin.broker_config(addr)
    return {"address": addr, "runtime": dict(sorted(runtime.items())), "config": dict(sorted(config.items()))}
