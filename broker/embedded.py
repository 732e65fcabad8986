"""An embedded cluster: one name server and one or more master brokers (each with its slaves), started and stopped
together.

For tests and notebooks (port 0, a temporary data directory)::

    async with EmbeddedCluster(tmp_path, mapped_file_size_commit_log=4 << 20) as cluster:
        cluster.namesrv_addr, cluster.broker_addr     # "127.0.0.1:PORT" each
        cluster.controller                            # the BrokerController (its context, store, managers)
        await cluster.restart_broker()                # same port and data: a clean broker restart

With ``slaves=N`` the broker is a master (``broker_role="SYNC_MASTER"`` or the default ASYNC_MASTER) and N slave
brokers of the same name (``brokerId`` 1..N, data under ``<data>/broker-slave<i>``) replicate it; they learn the
master's HA address from the name server. ``cluster.slave_addrs``, ``cluster.slave_controllers``,
``stop_slave(i)`` / ``start_slave(i)`` and ``await cluster.wait_replicated()`` serve tests of replication and
fail-over; a restarted master keeps its ports (main and HA), so its slaves reconnect. A broker asked for port 0 is
given a free port below the kernel's ephemeral range at the cluster's start (:func:`broker.ports.free_ports`, with room
for its fast channel at port - 2 and HA listener at port + 1), so that a restart on the same port cannot find it
taken meanwhile as some outgoing connection's local port.

With ``brokers=N`` the cluster has N masters in one cluster (``broker-a``, ``broker-b``, ...; brokerClusterName
``DefaultCluster``, one name server), as RocketMQ's ``distribution/conf/2m-noslave/`` deploys two. ``broker-a`` is
the one described above; the others have data under ``<data>/broker-b`` ... and, with a fixed ``broker_port``, listen on
``broker_port + 10 * i`` (room for the fast channel at port - 2 and HA at port + 1). Each master ``i`` serves its own
Prometheus metrics (``metricsExporterType PROM``) on ``metricsPromExporterPort + i`` and each slave on one of the ports
after the masters' (0: a free port each), as separately configured RocketMQ brokers on one host must. By default they
run in this process (``cluster.controllers``); ``broker_processes=True`` runs each in a child process
(:mod:`broker.broker_process`), which is what gives each a core: brokers in one process share the interpreter lock.
``cluster.broker_addrs`` lists every master's address either way.

``brokers=N, slaves=M`` together are RocketMQ's ``distribution/conf/2m-2s-async/`` layout: every master has M slaves
of its own (its brokerName, ``brokerId`` 1..M, ``brokerRole=SLAVE``, free ports). ``broker-a``'s are the slaves
described above; master ``i``'s run as it does (in this process, or each in a child process with
``broker_processes``), with data under ``<data>/broker-b-s1`` ... and files named ``broker-b-s1`` (properties, log);
like ``broker-a``'s, they learn their master's HA address from the name server. ``cluster.slave_addr_table`` maps
every broker name to its running slaves' addresses. Master ``i``'s slave ``j`` serves metrics on
``metricsPromExporterPort + N + i * M + j - 1``.

and for the README's ``make run`` (``python -m broker.embedded --data ./data``: ports 9876 and 10911, both boot lines
printed, Ctrl-C, SIGTERM or SIGHUP shut down cleanly, during the start too: then no boot line, a start-up error is one
line on stderr and status 1; ``--brokers N`` or ``ROCKETRIO_BROKERS=N``: N masters, the extra ones in processes of their
own, ports 10911, 10921, ...; by default one per core on machines with more than two cores, else one; ``--slaves M`` or
``ROCKETRIO_SLAVES=M``: M slaves for every master, the extra masters' each in a process of its own, and then one master
unless ``--brokers`` says; ``--host 0.0.0.0``: the brokers are given, and the boot line shows, the name server at the
host's address). Data layout: ``<data>/namesrv/kvConfig.json`` and ``<data>/broker`` as the broker's
``storePathRootDir``.

With ``proxy=ProxyConfig(enable_proxy=True, ...)`` (``--enable-proxy`` or ``--enableProxy true`` on the command line,
as ``mqbroker``) every master also serves RocketMQ 5 gRPC clients (:mod:`proxy.startup`, RocketMQ's local proxy
mode): ``broker-a`` on ``grpcServerPort`` (8081 by default), master ``i`` on ``grpcServerPort + 10 * i`` (0: a free
port each); ``cluster.grpc_endpoints`` names them. Slaves serve no gRPC.

Ownership: the cluster owns its nursery; leaving the ``async with`` block cancels it, which shuts the broker down
(unregister, flush, checkpoint, save config files) and then the name server. Start-up errors (a port in use, a locked
store) propagate out of ``__aenter__``.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import attrs
import click
import trio

from broker.broker_config import BrokerConfig
from broker.broker_process import BrokerProcess, BrokerProcessError
from broker.cli import STARTUP_FAILURES, boot_line, proxy_boot_line, proxy_config_of
from broker.controller import BrokerController
from broker.embedded_base import NurseryOwner
from broker.ports import BROKER, free_ports
from namesrv.cli import boot_line as namesrv_boot_line
from namesrv.config import NamesrvConfig
from namesrv.server import NamesrvServer
from proxy.config import PROXY_KEYS, ProxyConfig
from remoting.codec.java_properties import PropertiesError, config_from_properties, parse_property_args, property_name
from remoting.connection import Address
from remoting.cpus import available_cpus
from remoting.local_address import advertised_host
from remoting.server_main import (
    BROKER_HOOK_LINES,
    ShutdownHookLog,
    run_main,
    serving_until_stopped,
    take_stop_signals,
)

log = logging.getLogger(__name__)

#: Port distance between the masters of a cluster with a fixed ``broker_port`` (each also binds port - 2 and + 1).
PORT_STEP = 10
#: At most this many masters (``broker-a`` .. ``broker-z``).
MAX_BROKERS = 26


def broker_names(count: int, first: str = "broker-a") -> list[str]:
    """``broker-a``, ``broker-b``, ...: ``first`` then its last letter advanced; a name not ending in a letter that
    can advance that far gets ``-1``, ``-2``, ... instead (``shard`` gives ``shard-1``)."""
    if not 1 <= count <= MAX_BROKERS:
        raise ValueError(f"brokers must be 1..{MAX_BROKERS}, not {count}")
    stem, last = first[:-1], first[-1:]
    if "a" <= last <= "z" and ord(last) + count - 1 <= ord("z"):
        return [first] + [f"{stem}{chr(ord(last) + i)}" for i in range(1, count)]
    return [first] + [f"{first}-{i}" for i in range(1, count)]


def default_brokers(cores: int | None = None) -> int:
    """One broker per core this process may use (:func:`~remoting.cpus.available_cpus`) when there are more than two,
    else one (a broker process is one core's worth: on two cores, the clients and the OS need the other)."""
    cores = cores if cores is not None else available_cpus()
    return min(cores, MAX_BROKERS) if cores > 2 else 1


def _nth_port(first: int, offset: int) -> int:
    """The port ``offset`` above broker-a's ``first``, for a broker of the cluster that must not share it; 0 (any
    free port) stays 0."""
    return first + offset if first else 0


class EmbeddedCluster(NurseryOwner):
    """A name server and a broker on ``host``; ``broker_overrides`` are BrokerConfig fields (snake_case), and the
    ``tls_*`` ones apply to the name server too."""

    def __init__(
        self,
        data_dir: str | Path,
        *,
        host: str = "127.0.0.1",
        namesrv_port: int = 0,
        broker_port: int = 0,
        slaves: int = 0,
        brokers: int = 1,
        broker_processes: bool = False,
        proxy: ProxyConfig | None = None,
        **broker_overrides: Any,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.host = host
        self.namesrv_config = NamesrvConfig(
            listen_port=namesrv_port,
            listen_host=host,
            kv_config_path=str(self.data_dir / "namesrv" / "kvConfig.json"),
            config_store_path=str(self.data_dir / "namesrv" / "namesrv.properties"),
            # One process, one set of tls.* settings (JVM-wide system properties in RocketMQ).
            **{name: value for name, value in broker_overrides.items() if name.startswith("tls_")},
        )
        self._broker_port = broker_port
        self._first_port = broker_port  # as asked: 0 stays 0 for every master
        self._broker_overrides = broker_overrides
        self.namesrv: NamesrvServer | None = None
        self.namesrv_address: Address | None = None
        self._master = _BrokerSlot(0)
        self._ha_port = 0
        self._slaves: list[_BrokerSlot] = [_BrokerSlot(i) for i in range(1, slaves + 1)]
        self._names = broker_names(brokers, broker_overrides.get("broker_name", "broker-a"))
        self._broker_processes = broker_processes
        self._proxy = proxy if proxy is not None and proxy.enable_proxy else None
        self._others: list[_BrokerSlot] = [_BrokerSlot(0) for _ in self._names[1:]]
        #: Master ``i``'s slaves at ``[i - 1]`` (``broker-a``'s are ``_slaves``).
        self._other_slaves: list[list[_BrokerSlot]] = [
            [_BrokerSlot(j) for j in range(1, slaves + 1)] for _ in self._names[1:]
        ]

    # ---- addresses ---------------------------------------------------------------------------------------------

    @property
    def namesrv_addr(self) -> str:
        """The name server's address as the brokers and clients use it: bound to every interface, the host's
        address (as the brokers advertise), never 0.0.0.0."""
        if self.namesrv_address is None:
            raise RuntimeError("the cluster is not running")
        return f"{advertised_host(self.namesrv_address[0])}:{self.namesrv_address[1]}"

    @property
    def controller(self) -> BrokerController:
        if self._master.controller is None:
            raise RuntimeError("the broker is not running")
        return self._master.controller

    @property
    def broker_addr(self) -> str:
        return self.controller.broker_addr

    def broker_config(self) -> BrokerConfig:
        """The broker's config: our host, ports and data directory, then the overrides."""
        settings: dict[str, Any] = {
            "broker_ip1": advertised_host(self.host),  # every interface: the host's address, as brokerIP1's default
            "listen_host": self.host,
            "listen_port": self._broker_port,
            "namesrv_addr": self.namesrv_addr,
            "store_path_root_dir": str(self.data_dir / "broker"),
            "broker_name": self._names[0],  # named, as conf/broker.conf is: not the host name default
        }
        settings.update(self._broker_overrides)
        return attrs.evolve(BrokerConfig(), **settings)

    def other_config(self, index: int) -> BrokerConfig:
        """Master ``index`` (1: ``broker-b``, ...): broker-a's settings with its own name, ports and data."""
        config = self.broker_config()
        return attrs.evolve(
            config,
            broker_name=self._names[index],
            listen_port=self._others[index - 1].port or _nth_port(self._first_port, PORT_STEP * index),
            ha_listen_port=0,
            metrics_prom_exporter_port=_nth_port(config.metrics_prom_exporter_port, index),
            store_path_root_dir=str(self.data_dir / self._names[index]),
        )

    def proxy_config(self, index: int) -> ProxyConfig | None:
        """Master ``index``'s gRPC settings (0: ``broker-a``), None without the proxy: its ports ``PORT_STEP * index``
        above broker-a's, so the masters of one host never share one (0, a free port, stays 0)."""
        if self._proxy is None:
            return None
        tls = self._proxy.grpc_tls_server_port
        return attrs.evolve(
            self._proxy,
            grpc_server_port=_nth_port(self._proxy.grpc_server_port, PORT_STEP * index),
            grpc_tls_server_port=_nth_port(tls, PORT_STEP * index) if tls > 0 else tls,
        )

    @property
    def grpc_ports(self) -> list[tuple[int, int]]:
        """Every running master's (grpcServerPort, TLS-only port or 0), ``broker-a`` first; empty without the proxy."""
        slots = [self._master, *self._others]
        return [slot.grpc_ports for slot in slots if slot.scope is not None and slot.grpc_ports is not None]

    @property
    def grpc_endpoints(self) -> list[str]:
        """Every running master's gRPC endpoint (``host:port``: plaintext, or both with a certificate in the default
        permissive mode), ``broker-a`` first; empty without the proxy."""
        return [f"{advertised_host(self.host)}:{port}" for port, _ in self.grpc_ports]

    @property
    def broker_addrs(self) -> list[str]:
        """Every running master's address, ``broker-a`` first."""
        others = [slot.broker_addr for slot in self._others if slot.scope is not None]
        return [self.broker_addr, *others]

    @property
    def controllers(self) -> list[BrokerController]:
        """The masters running in this process (all of them unless ``broker_processes``), ``broker-a`` first."""
        others = [s.controller for s in self._others if s.controller is not None and s.scope is not None]
        return [self.controller, *others]

    @property
    def broker_processes(self) -> list[BrokerProcess]:
        """The masters running in processes of their own (``broker_processes=True``)."""
        return [slot.process for slot in self._others if slot.process is not None and slot.scope is not None]

    def slave_config(self, index: int, master: int = 0) -> BrokerConfig:
        """Slave ``index`` (1-based, its ``brokerId``) of master ``master`` (0: ``broker-a``): the master's settings as
        a SLAVE with its own ports and data (``<data>/broker-slave<index>`` for broker-a's, ``<data>/<name>-s<index>``
        for the others')."""
        if master == 0:
            slot, config = self._slaves[index - 1], self.broker_config()
            root = self.data_dir / f"broker-slave{index}"
        else:
            slot, config = self._other_slaves[master - 1][index - 1], self.other_config(master)
            root = self.data_dir / self._slave_label(master, index)
        base = self.broker_config().metrics_prom_exporter_port
        metrics_index = len(self._names) + master * len(self._slaves) + index - 1  # after every master's
        return attrs.evolve(
            config,
            broker_role="SLAVE",
            broker_id=index,
            listen_port=slot.port,
            ha_listen_port=0,
            metrics_prom_exporter_port=_nth_port(base, metrics_index),
            store_path_root_dir=str(root),
        )

    def _slave_label(self, master: int, index: int) -> str:
        """``broker-b-s1``: what a slave's files are named (RocketMQ's ``broker-b-s.properties``)."""
        return f"{self._names[master]}-s{index}"

    @property
    def slave_controllers(self) -> list[BrokerController]:
        """The running slaves' controllers (a stopped slave is left out)."""
        return [slot.controller for slot in self._slaves if slot.controller is not None and slot.scope is not None]

    @property
    def slave_addrs(self) -> list[str]:
        """``broker-a``'s running slaves' addresses, by ``brokerId``."""
        return [controller.broker_addr for controller in self.slave_controllers]

    @property
    def slave_addr_table(self) -> dict[str, list[str]]:
        """Every broker name, ``broker-a`` first, with its running slaves' addresses by ``brokerId`` (empty: none)."""
        table = {self._names[0]: self.slave_addrs}
        for name, slots in zip(self._names[1:], self._other_slaves, strict=True):
            table[name] = [slot.broker_addr for slot in slots if slot.scope is not None]
        return table

    @property
    def slave_processes(self) -> list[BrokerProcess]:
        """The extra masters' slaves running in processes of their own (``broker_processes=True``), by master."""
        slots = [slot for slots in self._other_slaves for slot in slots]
        return [slot.process for slot in slots if slot.process is not None and slot.scope is not None]

    # ---- life cycle --------------------------------------------------------------------------------------------

    async def _start_all(self, nursery: trio.Nursery) -> None:
        self._pick_free_ports()
        self.namesrv = NamesrvServer(self.namesrv_config)
        self.namesrv_address = await nursery.start(self.namesrv.serve)
        await self.start_broker()
        for index in range(1, len(self._names)):
            await self._start_other(index)

    def _pick_free_ports(self) -> None:
        """Fix the port of every broker asked for port 0 (the slaves always are), below the ephemeral range, before
        its first start: each restart binds the same ports again."""
        slaves = [*self._slaves, *(slot for group in self._other_slaves for slot in group)]
        slots = [slot for slot in [*(self._others if self._first_port == 0 else []), *slaves] if not slot.port]
        master = self._broker_port == 0
        if not slots and not master:
            return
        ports = free_ports(len(slots) + master, self.host, **BROKER)
        if master:
            self._broker_port = ports.pop()
        for slot, port in zip(slots, ports, strict=True):
            slot.port = port

    async def _stop_all(self) -> None:
        # The brokers go first so they can still unregister from the name server; slaves before their master.
        for slot, slaves in zip(self._others, self._other_slaves, strict=True):
            for slave in slaves:
                await slave.stop()
            await slot.stop()
        for slot in self._slaves:
            await slot.stop()
        await self.stop_broker()

    async def start_broker(self) -> Address:
        """Start the broker (after :meth:`stop_broker`: on the same port and data). Returns its address."""
        if self._nursery is None:
            raise RuntimeError("the cluster is not running")
        if self._master.scope is not None:
            raise RuntimeError("the broker is already running")
        config = self.broker_config()
        if self._ha_port and not config.ha_listen_port:
            config = attrs.evolve(config, ha_listen_port=self._ha_port)  # a restart keeps the HA address slaves know
        controller = BrokerController(config)
        address: Address = await self._nursery.start(self._master.run, controller, self.proxy_config(0))
        self._broker_port = address[1]
        self._ha_port = controller.context.store.ha.port
        for slot in self._slaves:
            if slot.scope is None and not slot.stopped:
                await self.start_slave(slot.index)
        return address

    async def _start_other(self, index: int) -> None:
        """Master ``index`` (``broker-b`` ...), then its slaves, each as the masters run (a process or a task)."""
        slot = self._others[index - 1]
        slot.port = await self._start_slot(slot, self.other_config(index), self.proxy_config(index))
        for slave in self._other_slaves[index - 1]:
            config = self.slave_config(slave.index, index)
            slave.port = await self._start_slot(slave, config, None, self._slave_label(index, slave.index))

    async def _start_slot(
        self, slot: _BrokerSlot, config: BrokerConfig, proxy: ProxyConfig | None, label: str = ""
    ) -> int:
        """Run ``config`` in ``slot``: a child process with ``broker_processes``, else a task. Returns its port."""
        assert self._nursery is not None
        if self._broker_processes:
            process = BrokerProcess(config, self.data_dir, proxy, label=label)
            address: Address = await self._nursery.start(slot.run_process, process)
        else:
            address = await self._nursery.start(slot.run, BrokerController(config), proxy)
        return address[1]

    async def start_slave(self, index: int) -> Address:
        """Start slave ``index`` (again after :meth:`stop_slave`: same port and data). Returns its address."""
        if self._nursery is None:
            raise RuntimeError("the cluster is not running")
        slot = self._slaves[index - 1]
        if slot.scope is not None:
            raise RuntimeError(f"slave {index} is already running")
        controller = BrokerController(self.slave_config(index))
        slot.stopped = False
        address: Address = await self._nursery.start(slot.run, controller)
        slot.port = address[1]
        return address

    async def stop_slave(self, index: int) -> None:
        """Shut slave ``index`` down cleanly; it stays down (also across master restarts) until started again."""
        slot = self._slaves[index - 1]
        slot.stopped = True
        await slot.stop()

    async def wait_replicated(self, timeout: float = 30) -> None:
        """Wait until every running slave holds and has dispatched the master's whole CommitLog. Raises
        ``TimeoutError`` after ``timeout`` seconds."""
        master = self.controller.context.store
        with trio.move_on_after(timeout):
            while True:
                end = master.commitlog.max_offset
                stores = [c.context.store for c in self.slave_controllers]
                if all(s.replica is not None and s.replica.dispatched == end for s in stores):
                    return
                await trio.sleep(0.01)
        raise TimeoutError(f"slaves did not catch up with the master within {timeout} s")

    async def stop_broker(self) -> None:
        """Shut the broker down cleanly and wait until it has (store closed, files saved). Its slaves keep running."""
        await self._master.stop()

    async def restart_broker(self) -> Address:
        """A clean broker restart on the same port and data directory."""
        await self.stop_broker()
        return await self.start_broker()


class _BrokerSlot:
    """One broker of an :class:`EmbeddedCluster` (the master, or slave ``index``): its controller, port and cancel
    scope while it runs."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.port = 0
        self.controller: BrokerController | None = None
        self.process: BrokerProcess | None = None
        self.scope: trio.CancelScope | None = None
        self.done: trio.Event | None = None
        self.stopped = False
        self._grpc_ports: tuple[int, int] | None = None

    async def run(
        self,
        controller: BrokerController,
        proxy: ProxyConfig | None = None,
        *,
        task_status: trio.TaskStatus[Address] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serve ``controller`` and, with ``proxy``, its gRPC front door beside it, both ended by :meth:`stop`."""
        self.controller = controller
        if proxy is None:
            await self._serve(controller.serve, task_status)
            return

        async def serve_both(*, task_status: trio.TaskStatus[Address]) -> None:
            from proxy.startup import serve_proxy  # loads grpcio only when asked to

            async with trio.open_nursery() as nursery:
                address = await nursery.start(controller.serve)
                self._grpc_ports = await nursery.start(serve_proxy, controller, proxy)
                task_status.started(address)

        await self._serve(serve_both, task_status)

    async def run_process(
        self, process: BrokerProcess, *, task_status: trio.TaskStatus[Address] = trio.TASK_STATUS_IGNORED
    ) -> None:
        self.process = process
        await self._serve(process.run, task_status)

    async def _serve(self, serve: Callable[..., Awaitable[None]], task_status: trio.TaskStatus[Address]) -> None:
        """Run ``serve`` in a scope :meth:`stop` cancels; ``done`` is set however it ends."""
        done = self.done = trio.Event()
        try:
            with trio.CancelScope() as scope:
                self.scope = scope
                await serve(task_status=task_status)
        finally:
            self.scope = None
            self._grpc_ports = None
            done.set()

    @property
    def grpc_ports(self) -> tuple[int, int] | None:
        """(grpcServerPort, TLS-only port or 0) while it serves gRPC, else None."""
        return self.process.grpc_ports if self.process is not None else self._grpc_ports

    @property
    def broker_addr(self) -> str:
        if self.process is not None:
            return self.process.broker_addr
        assert self.controller is not None
        return self.controller.broker_addr

    async def stop(self) -> None:
        scope, done = self.scope, self.done
        if scope is None or done is None:
            return
        scope.cancel()
        await done.wait()


async def run_embedded(
    data_dir: Path,
    host: str,
    namesrv_port: int,
    broker_port: int,
    broker_overrides: dict[str, Any] | None = None,
    slaves: int = 0,
    brokers: int = 1,
    proxy: ProxyConfig | None = None,
) -> None:
    """Serve until a stop signal (:func:`~remoting.server_main.serving_until_stopped`; one during the start abandons
    it before any boot line), printing the boot lines once ready (:func:`print_boot_lines`); the masters after the
    first, and their slaves, run in processes of their own. A stop signal after the start stops the brokers before
    the name server, as leaving an :class:`EmbeddedCluster` does."""
    overrides = broker_overrides or {}
    cluster = EmbeddedCluster(
        data_dir,
        host=host,
        namesrv_port=namesrv_port,
        broker_port=broker_port,
        slaves=slaves,
        brokers=brokers,
        broker_processes=True,
        proxy=proxy,
        **overrides,
    )
    async with serving_until_stopped(ShutdownHookLog(log, BROKER_HOOK_LINES)) as stop:
        with stop.scope:  # a stop signal during the start abandons it: nothing is left half started
            async with cluster:
                print_boot_lines(cluster)
                stop.started()
                await stop.requested.wait()
    print("The embedded cluster shutdown.", flush=True)


def print_boot_lines(cluster: EmbeddedCluster) -> None:
    """The name server's line, then each broker's, each slave's and each gRPC front door's, as each of them prints
    it when started alone."""
    assert cluster.namesrv_address is not None and cluster.controller.address is not None
    host, port = cluster.namesrv_addr.rsplit(":", 1)  # the address the brokers were given
    print(namesrv_boot_line((host, int(port))), flush=True)
    for controller in [cluster.controller, *cluster.slave_controllers]:
        assert controller.address is not None
        print(boot_line(controller.context.config, controller.address), flush=True)
    for process in [*cluster.broker_processes, *cluster.slave_processes]:
        assert process.address is not None
        print(boot_line(process.config, process.address), flush=True)
    for grpc_port, tls_port in cluster.grpc_ports:
        print(proxy_boot_line(grpc_port, tls_port), flush=True)


def broker_overrides_of(args: list[str]) -> dict[str, Any]:
    """``--name value`` broker properties as BrokerConfig field overrides (the fields they name, whatever the value:
    a ``brokerIP1`` equal to its default, the host's address, still overrides the cluster's host). A property that is
    neither the broker's nor the 5.x proxy's is reported on stderr and ignored.

    Raises :class:`click.UsageError` for a malformed argument or a port out of range (a broker setting's number that
    does not parse is skipped, as MixAll.properties2Object does; a 5.x proxy setting's value is :func:`proxy_of`'s
    to refuse, when the proxy runs).
    """
    try:
        props = parse_property_args(args)
        config, unknown = config_from_properties(BrokerConfig, props)
    except PropertiesError as exc:
        raise click.UsageError(str(exc)) from None
    for key in (key for key in unknown if key not in PROXY_KEYS):
        click.echo(f"embedded: ignoring unknown broker property {key!r}", err=True)
    return {f.name: getattr(config, f.name) for f in attrs.fields(BrokerConfig) if property_name(f) in props}


def proxy_of(args: list[str], enable: bool) -> ProxyConfig | None:
    """The 5.x front door's settings among the same ``--name value`` pairs (``--grpcServerPort 0``), with
    ``--enable-proxy`` or ``--enableProxy true``, as ``mqbroker`` reads them (:func:`broker.cli.proxy_config_of`);
    else None. Raises :class:`click.UsageError` for a value of the wrong type."""
    try:
        proxy = proxy_config_of(parse_property_args(args), enable)
    except PropertiesError as exc:
        raise click.UsageError(str(exc)) from None
    return proxy if proxy.enable_proxy else None


@click.command(
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": ["-h", "--help"]}
)
@click.option("--data", "data_dir", type=click.Path(file_okay=False), default="./data", show_default=True)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address every server binds and advertises (the host's address when it binds every interface).",
)
@click.option("--namesrv-port", type=click.IntRange(0, 65535), default=9876, show_default=True)
@click.option("--broker-port", type=click.IntRange(0, 65535), default=None, help="Broker port [default: 10911].")
@click.option(
    "--slaves",
    type=click.IntRange(0, 8),
    default=0,
    envvar="ROCKETRIO_SLAVES",
    show_default=True,
    help="Slaves of every master (its brokerName, brokerId 1..M; RocketMQ's 2m-2s layout with --brokers 2), the "
    "extra masters' each in its own process [env ROCKETRIO_SLAVES].",
)
@click.option(
    "--brokers",
    type=click.IntRange(1, MAX_BROKERS),
    default=None,
    envvar="ROCKETRIO_BROKERS",
    help="Master brokers (broker-a, broker-b, ...), the extra ones each in its own process "
    "[env ROCKETRIO_BROKERS; default: one per core above two cores, else 1; 1 with --slaves].",
)
@click.option(
    "--enable-proxy",
    "enable_proxy",
    is_flag=True,
    help="Every master also serves RocketMQ 5 gRPC clients (broker-a on grpcServerPort, 8081; the next +10 each).",
)
@click.pass_context
def main(
    ctx: click.Context,
    data_dir: str,
    host: str,
    namesrv_port: int,
    broker_port: int | None,
    slaves: int,
    brokers: int | None,
    enable_proxy: bool = False,
) -> None:
    """Run a name server and N master brokers, each with M slaves (the README's ``make run``): the name server,
    ``broker-a`` and its slaves in this process, ``broker-b`` ... and their slaves each in a process of its own.

    Extra ``--name value`` pairs are broker properties (``--listenPort 0``, ``--flushDiskType SYNC_FLUSH``) and, with
    ``--enable-proxy`` or ``--enableProxy true``, the proxy's (``--grpcServerPort 0``).
    """
    take_stop_signals()  # a stop signal before the start ends the process of it, as a JVM before its hook
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    overrides = broker_overrides_of(list(ctx.args))
    proxy = proxy_of(list(ctx.args), enable_proxy)
    port = overrides.pop("listen_port", 10911) if broker_port is None else broker_port
    overrides.pop("listen_port", None)
    count = brokers if brokers is not None else (1 if slaves else default_brokers())
    run_main(
        run_embedded,
        Path(data_dir),
        host,
        namesrv_port,
        port,
        overrides,
        slaves,
        count,
        proxy,
        failures=(*STARTUP_FAILURES, BrokerProcessError),  # a broker process that did not boot, too
        describe=_startup_line,
    )


def _startup_line(failure: BaseException) -> str:
    summary = failure.summary if isinstance(failure, BrokerProcessError) else failure
    return f"embedded: cannot start: {summary}"


if __name__ == "__main__":
    main()
