"""An embedded DLedger group: one name server and a group of brokers in DLedger mode (three by default) in one process
and one nursery, for tests and notebooks (docs/architecture.md#dledger)::

    async with EmbeddedDLedgerGroup(tmp_path, mapped_file_size_commit_log=8 << 20) as group:
        leader = await group.leader()                 # "n0".."n2", once it takes sends
        group.addr(leader), group.namesrv_addr        # "127.0.0.1:PORT"
        await group.stop(leader); await group.leader()  # a failover
        await group.start(leader)                     # back as a follower, same ports and data

and ``python -m broker.embedded_dledger --data ./data`` (Ctrl-C, SIGTERM or SIGHUP stop it cleanly, during its start
too, the leader's election included: then without its line).

Each member's DLedger port must be known to the others before it binds (``dLegerPeers``), so the ports are picked
free up front (:func:`broker.ports.free_ports`); another process taking one meanwhile makes that member fail to start,
loudly. Data: ``<data>/namesrv/kvConfig.json`` and ``<data>/<member>/`` as each broker's
``storePathRootDir``. Leaving the ``async with`` block stops every broker, then the name server.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import attrs
import click
import trio

from broker.broker_config import BrokerConfig
from broker.controller import BrokerController
from broker.embedded_base import NurseryOwner
from broker.ports import BROKER, free_ports
from dledger.commitlog_store import DLedgerMessageStore
from namesrv.config import NamesrvConfig
from namesrv.server import NamesrvServer
from remoting.connection import Address
from remoting.local_address import advertised_host
from remoting.server_main import BROKER_HOOK_LINES, ShutdownHookLog, serving_until_stopped, take_stop_signals

log = logging.getLogger(__name__)


class EmbeddedDLedgerGroup(NurseryOwner):
    """A name server and ``members`` DLedger brokers (ids ``n0``..) of one broker name; overrides are BrokerConfig
    fields (snake_case) applied to every member."""

    def __init__(self, data_dir: str | Path, *, members: int = 3, host: str = "127.0.0.1", **broker_overrides: Any):
        self.data_dir = Path(data_dir)
        self.host = host
        self.ids = [f"n{i}" for i in range(members)]
        ports = free_ports(2 * members, host, **BROKER)  # a broker binds its port - 2 and + 1 too
        self.advertised = advertised_host(host)  # what the peers and the routes name: not 0.0.0.0
        self.peers = ";".join(f"{m}-{self.advertised}:{ports[i]}" for i, m in enumerate(self.ids))
        self.broker_ports = {m: ports[members + i] for i, m in enumerate(self.ids)}
        self._overrides = broker_overrides
        self.controllers: dict[str, BrokerController] = {}
        self._scopes: dict[str, trio.CancelScope] = {}
        self._done: dict[str, trio.Event] = {}
        self.namesrv_addr = ""

    def config(self, member: str) -> BrokerConfig:
        settings: dict[str, Any] = {
            "broker_ip1": self.advertised,
            "listen_host": self.host,
            "listen_port": self.broker_ports[member],
            "namesrv_addr": self.namesrv_addr,
            "store_path_root_dir": str(self.data_dir / member),
            "enable_dleger_commit_log": True,
            "broker_name": "broker-a",  # named, as conf/dledger/broker-n0.conf is: not the host name default
            "dleger_group": self._overrides.get("broker_name", "broker-a"),
            "dleger_peers": self.peers,
            "dleger_self_id": member,
        }
        settings.update(self._overrides)
        return attrs.evolve(BrokerConfig(), **settings)

    def addr(self, member: str) -> str:
        return f"{self.advertised}:{self.broker_ports[member]}"

    def store(self, member: str) -> DLedgerMessageStore:
        store = self.controllers[member].context.store
        assert isinstance(store, DLedgerMessageStore)
        return store

    # ---- life cycle --------------------------------------------------------------------------------------------

    async def _start_all(self, nursery: trio.Nursery) -> None:
        namesrv_dir = self.data_dir / "namesrv"  # its files with the group's, as EmbeddedCluster keeps them
        namesrv = NamesrvServer(
            NamesrvConfig(
                listen_port=0,
                listen_host=self.host,
                kv_config_path=str(namesrv_dir / "kvConfig.json"),
                config_store_path=str(namesrv_dir / "namesrv.properties"),
            )
        )
        host, port = await nursery.start(namesrv.serve)
        self.namesrv_addr = f"{advertised_host(host)}:{port}"  # bound to every interface: the host's address
        for member in self.ids:
            await self.start(member)

    async def _stop_all(self) -> None:
        """Every member stops (all at once) and is waited for before the name server is cancelled, so each can still
        unregister from it."""
        members = list(self._scopes)
        for member in members:
            self.stop_soon(member)
        for member in members:
            await self._done[member].wait()

    async def start(self, member: str) -> BrokerController:
        """Start ``member`` (again: same ports and data); returns once it serves."""
        assert self._nursery is not None, "the group is not running"
        controller = BrokerController(self.config(member))
        scope = trio.CancelScope()

        done = self._done[member] = trio.Event()

        async def run(task_status: trio.TaskStatus[Address] = trio.TASK_STATUS_IGNORED) -> None:
            try:
                with scope:
                    await controller.serve(task_status=task_status)
            finally:
                done.set()

        await self._nursery.start(run)
        self.controllers[member], self._scopes[member] = controller, scope
        return controller

    def stop_soon(self, member: str) -> None:
        """Begin a clean stop of ``member`` (it keeps taking part in the group until its store has stopped)."""
        self._scopes.pop(member).cancel()
        self.controllers.pop(member)

    async def stop(self, member: str) -> None:
        """Stop ``member`` cleanly and wait until it has (DLedger server down, files closed)."""
        self.stop_soon(member)
        await self._done[member].wait()

    async def leader(self) -> str:
        """The member that takes sends, once exactly one does."""
        while True:
            writable = [m for m in self.controllers if self.store(m).writable]
            if len(writable) == 1:
                return writable[0]
            await trio.sleep(0.1)


async def run_group(data_dir: Path, members: int) -> None:
    """Serve until a stop signal (:func:`~remoting.server_main.serving_until_stopped`; one during the start, the
    leader's election included, stops it before its line)."""
    group = EmbeddedDLedgerGroup(data_dir, members=members)
    async with serving_until_stopped(ShutdownHookLog(log, BROKER_HOOK_LINES)) as stop:
        with stop.scope:
            async with group:
                leader = await group.leader()
                members_text = ", ".join(f"{m} {group.addr(m)}" for m in group.ids)
                line = f"name server {group.namesrv_addr}; DLedger group broker-a: {members_text}; leader {leader}"
                print(line, flush=True)
                stop.started()
                await stop.requested.wait()


@click.command()
@click.option("--data", "data_dir", type=click.Path(file_okay=False), default="./data-dledger", show_default=True)
@click.option("--members", type=click.IntRange(1, 9), default=3, show_default=True)
def main(data_dir: str, members: int) -> None:
    """Run a name server and a DLedger group of brokers in one process."""
    take_stop_signals()  # a stop signal before the start ends the process of it, as a JVM before its hook
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    trio.run(run_group, Path(data_dir), members)


if __name__ == "__main__":
    main()
