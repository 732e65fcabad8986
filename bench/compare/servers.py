"""Peer broker servers for the comparison: installed on demand (Debian packages), started on 127.0.0.1, stopped.

Each :class:`PeerServer` owns a temporary directory, a free port and a child process in its own session, so that
:meth:`PeerServer.stop` ends the whole tree it started (RabbitMQ's wrapper script, beam). :func:`ensure_installed`
runs ``apt-get install`` once for a missing binary and returns a reason string when the package cannot be had; the
suite reports that peer as skipped. Start-up is bounded (:data:`START_TIMEOUT`); a server that does not listen in
time raises :class:`PeerUnavailable`.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Final

START_TIMEOUT: Final = 60.0

#: binary -> Debian package
PACKAGES: Final = {
    "redis-server": "redis-server",
    "rabbitmq-server": "rabbitmq-server",
    "mosquitto": "mosquitto",
    "nats-server": "nats-server",
}
SBIN: Final = ("/usr/sbin", "/usr/bin", "/sbin")


class PeerUnavailable(RuntimeError):
    """The peer's package is not installable here or its server did not come up."""


def find_binary(name: str) -> str | None:
    return shutil.which(name) or next((f"{d}/{name}" for d in SBIN if os.path.exists(f"{d}/{name}")), None)


def missing(binary: str) -> str | None:
    """None when ``binary`` is installed, else the skip reason (nothing is installed)."""
    return None if find_binary(binary) else f"{binary} is not installed (package {PACKAGES.get(binary, binary)})"


def ensure_installed(binary: str) -> str | None:
    """None when ``binary`` exists (installing its package if needed), else why not."""
    if find_binary(binary):
        return None
    if os.geteuid() != 0:
        return f"{binary} is not installed and apt-get needs root"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    done = subprocess.run(
        ["apt-get", "install", "-y", "--no-install-recommends", PACKAGES[binary]],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    if done.returncode != 0 or not find_binary(binary):
        return f"apt-get install {PACKAGES[binary]} failed: {done.stderr.strip().splitlines()[-1:]}"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_listening(port: int, proc: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise PeerUnavailable(f"the server exited with {proc.returncode} before listening")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return
        time.sleep(0.1)
    raise PeerUnavailable(f"nothing listened on {port} within {timeout:.0f}s")


class PeerServer:
    """A started server: ``port``, ``stop()``; build one with the ``start_*`` functions below."""

    def __init__(self, name: str, argv: list[str], port: int, workdir: Path, env: dict[str, str] | None = None):
        self.name, self.port, self.workdir = name, port, workdir
        log = (workdir / "server.log").open("wb")
        self.proc = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, cwd=workdir, env=env, start_new_session=True
        )
        try:
            wait_listening(port, self.proc, START_TIMEOUT)
        except PeerUnavailable:
            self.stop()
            raise

    def stop(self) -> None:
        """SIGTERM to the server and every process it started (RabbitMQ's beam runs in a session of its own),
        SIGKILL to what is left after 20 s; removes the data directory."""
        tree = [self.proc.pid, *descendants(self.proc.pid)]
        _signal_all(tree, signal.SIGTERM)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and any(_alive(pid) for pid in tree):
            self.proc.poll()
            time.sleep(0.1)
        _signal_all(tree, signal.SIGKILL)
        self.proc.wait()
        shutil.rmtree(self.workdir, ignore_errors=True)


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (from /proc parent links)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(entry.name))
    found: list[int] = []
    stack = [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _signal_all(pids: list[int], signum: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signum)


def _workdir(name: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=f"bench-peer-{name}-"))


def start_redis(appendfsync: str) -> PeerServer:
    """Redis with the append-only file on (``appendfsync`` everysec or always) and RDB snapshots off."""
    port, workdir = free_port(), _workdir("redis")
    binary = find_binary("redis-server") or "redis-server"
    argv = [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(workdir), "--save", ""]
    argv += ["--appendonly", "yes", "--appendfsync", appendfsync, "--daemonize", "no", "--protected-mode", "no"]
    return PeerServer(f"redis-{appendfsync}", argv, port, workdir)


def start_mosquitto() -> PeerServer:
    """Mosquitto with persistence on and no queue limit (QoS 1 messages for offline sessions are kept)."""
    port, workdir = free_port(), _workdir("mosquitto")
    conf = workdir / "mosquitto.conf"
    conf.write_text(
        f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence true\npersistence_location {workdir}/\n"
        "max_queued_messages 0\nmax_inflight_messages 0\nautosave_interval 1\n"
    )
    with contextlib.suppress(KeyError):
        shutil.chown(workdir, "mosquitto")  # mosquitto drops root privileges to its own user
    return PeerServer("mosquitto", [find_binary("mosquitto") or "mosquitto", "-c", str(conf)], port, workdir)


def start_nats() -> PeerServer:
    """nats-server with JetStream on file storage under a temporary directory."""
    port, workdir = free_port(), _workdir("nats")
    argv = [find_binary("nats-server") or "nats-server", "-a", "127.0.0.1", "-p", str(port), "-js", "-sd", str(workdir)]
    return PeerServer("nats", argv, port, workdir)


def start_rabbitmq() -> PeerServer:
    """A private RabbitMQ node (own node name, ports, mnesia and log directories) on 127.0.0.1."""
    port, dist = free_port(), free_port()
    return _rabbitmq_node(f"bench{port}@localhost", port, dist, None)


def _rabbitmq_node(name: str, port: int, dist: int, conf: str | None) -> PeerServer:
    """One RabbitMQ node named ``name`` on AMQP ``port`` and distribution port ``dist``, with ``conf`` as its
    ``rabbitmq.conf`` when given."""
    workdir = _workdir("rabbitmq")
    for sub in ("mnesia", "log"):
        (workdir / sub).mkdir()
    env = {
        **os.environ,
        "HOME": str(workdir),
        "RABBITMQ_NODENAME": name,
        "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
        "RABBITMQ_NODE_PORT": str(port),
        "RABBITMQ_DIST_PORT": str(dist),
        "RABBITMQ_MNESIA_BASE": str(workdir / "mnesia"),
        "RABBITMQ_LOG_BASE": str(workdir / "log"),
        "RABBITMQ_LOGS": "-",
        "RABBITMQ_ENABLED_PLUGINS_FILE": str(workdir / "plugins"),
    }
    owned = [workdir, workdir / "mnesia", workdir / "log"]
    if conf is not None:
        (workdir / "rabbitmq.conf").write_text(conf)
        owned.append(workdir / "rabbitmq.conf")
        env["RABBITMQ_CONFIG_FILE"] = str(workdir / "rabbitmq.conf")
        # the nodes of one cluster must share an Erlang cookie
        env["RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS"] = "-setcookie rocketrio-bench"
    with contextlib.suppress(KeyError):
        user = pwd.getpwnam("rabbitmq")  # the start script drops to this user, which must own its directories
        for path in owned:
            os.chown(path, user.pw_uid, user.pw_gid)
    return PeerServer("rabbitmq", [find_binary("rabbitmq-server") or "rabbitmq-server"], port, workdir, env)


def start_rabbitmq_cluster(nodes: int = 3) -> PeerGroup:
    """``nodes`` RabbitMQ nodes forming one cluster as they boot (classic-config peer discovery: each node's
    rabbitmq.conf lists them all); clients connect to the first."""
    ports = [(free_port(), free_port()) for _ in range(nodes)]
    names = [f"bench{port}@localhost" for port, _dist in ports]
    conf = "cluster_formation.peer_discovery_backend = classic_config\n"
    conf += "".join(f"cluster_formation.classic_config.nodes.{i} = {name}\n" for i, name in enumerate(names, 1))
    members: list[PeerServer] = []
    try:
        for name, (port, dist) in zip(names, ports, strict=True):
            members.append(_rabbitmq_node(name, port, dist, conf))
    except PeerUnavailable:
        for member in reversed(members):
            member.stop()
        raise
    return PeerGroup(members)


class PeerGroup:
    """Several started servers serving as one peer (a primary and its replicas, a cluster): clients connect to
    ``port`` (the first server's); :meth:`stop` stops them all, the first last."""

    def __init__(self, members: list[PeerServer]) -> None:
        self.members = members
        self.port = members[0].port

    def stop(self) -> None:
        for member in reversed(self.members):
            member.stop()


def start_redis_replicated() -> PeerGroup:
    """A Redis primary (``appendfsync everysec``) and one replica of it (the same settings, ``replicaof`` the
    primary); the driver waits for the replica's link before it publishes."""
    primary = start_redis("everysec")
    try:
        port, workdir = free_port(), _workdir("redis-replica")
        binary = find_binary("redis-server") or "redis-server"
        argv = [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(workdir), "--save", ""]
        argv += ["--appendonly", "yes", "--appendfsync", "everysec", "--daemonize", "no", "--protected-mode", "no"]
        argv += ["--replicaof", "127.0.0.1", str(primary.port)]
        replica = PeerServer("redis-replica", argv, port, workdir)
    except PeerUnavailable:
        primary.stop()
        raise
    return PeerGroup([primary, replica])


def start_nats_cluster(nodes: int = 3) -> PeerGroup:
    """``nodes`` nats-servers with JetStream on file storage, routed to each other as one cluster (JetStream's
    replicas need one); clients connect to the first."""
    ports = [(free_port(), free_port()) for _ in range(nodes)]
    routes = ",".join(f"nats://127.0.0.1:{cluster}" for _client, cluster in ports)
    members: list[PeerServer] = []
    try:
        for i, (port, cluster) in enumerate(ports):
            workdir = _workdir(f"nats{i}")
            argv = [find_binary("nats-server") or "nats-server", "-a", "127.0.0.1", "-p", str(port), "-js"]
            argv += ["-sd", str(workdir), "-n", f"bench{i}", "--cluster_name", "bench"]
            argv += ["--cluster", f"nats://127.0.0.1:{cluster}", "--routes", routes]
            members.append(PeerServer(f"nats{i}", argv, port, workdir))
    except PeerUnavailable:
        for member in reversed(members):
            member.stop()
        raise
    return PeerGroup(members)
