"""The DLedger columns of ``mqadmin clusterList``: each broker's Raft role, term and leader, read from the
``dLedger*`` keys of its runtime info (GET_BROKER_RUNTIME_INFO). A broker that does not answer shows ``-``."""

from __future__ import annotations

import anyio

from client.admin import Admin
from client.errors import MQClientError
from remoting.errors import RemotingError


async def dledger_columns(admin: Admin, addrs: list[str]) -> dict[str, list[str]]:
    """``addr -> [role, term, leader]`` for every address, or ``{}`` when no broker runs in DLedger mode."""
    tables: dict[str, dict[str, str]] = {}

    async def one(addr: str) -> None:
        try:
            tables[addr] = await admin.broker_status(addr)
        except (MQClientError, RemotingError):
            tables[addr] = {}

    async with anyio.create_task_group() as tasks:
        for addr in set(addrs):
            tasks.start_soon(one, addr)
    if not any("dLedgerTerm" in t for t in tables.values()):
        return {}
    return {
        addr: [t.get("dLedgerRole", "-"), t.get("dLedgerTerm", "-"), t.get("dLedgerLeaderId", "-")]
        for addr, t in tables.items()
    }
