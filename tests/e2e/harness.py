"""Child processes for the real-client end-to-end tests, and the client drivers ("agents") among them.

Ownership: every process started here belongs to the ``trio`` run that started it and is killed (SIGKILL) by
:func:`kill_all` in that run's ``finally``, so a failing scenario never leaks a broker or a client. Every wait is
bounded and raises :class:`ScenarioError` naming what did not happen, with the tail of the process's log.

The drivers (``node/agent.js`` for ali-ons, ``cpp/agent.py`` for the C++ core under ``.venv-cvs``) speak one JSON
line protocol, documented in ``node/agent.js``: commands on stdin, events on stdout.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

E2E_DIR = Path(__file__).resolve().parent
REPO_ROOT = E2E_DIR.parent.parent
NODE_AGENT = E2E_DIR / "node" / "agent.js"
ALI_ONS_PACKAGE = E2E_DIR / "node" / "node_modules" / "ali-ons" / "package.json"
CPP_AGENT = E2E_DIR / "cpp" / "agent.py"
CVS_PYTHON = REPO_ROOT / ".venv-cvs" / "bin" / "python"
#: ``mappedFileSizeCommitLog`` for the brokers the tests start as processes: the 1 GiB default is preallocated, and a
#: few dozen such brokers per suite run would take tens of GB of disk for a few MB of messages.
SMALL_COMMITLOG = ("--mappedFileSizeCommitLog", str(64 << 20))

Event = dict[str, Any]
#: What the C++ core prints when its ``shutdown()`` aborts (see :meth:`Agent.stop`).
NATIVE_SHUTDOWN_ABORT = "terminate called after throwing an instance of 'boost::thread_interrupted'"


class ScenarioError(Exception):
    """A step of a scenario did not happen within its bound, or a process failed."""


@attrs.frozen
class ClientKind:
    """One real RocketMQ client: how to run its driver, and why it cannot run here (``None`` when it can)."""

    name: str
    program: tuple[str, ...]
    install_hint: str

    def missing_reason(self) -> str | None:
        if self.name == "ali-ons":
            if shutil.which("node") is None:
                return "node is not on PATH"
            if not ALI_ONS_PACKAGE.is_file():
                return f"ali-ons is not installed in {ALI_ONS_PACKAGE.parent.parent}"
            return None
        if not CVS_PYTHON.is_file():
            return f"{CVS_PYTHON.parent.parent} does not exist"
        probe = subprocess.run([str(CVS_PYTHON), "-c", "import rocketmq.client"], capture_output=True, timeout=60)
        if probe.returncode != 0:
            return f"rocketmq-python-cvs does not import: {probe.stderr.decode(errors='replace')[-300:]}"
        return None

    def argv(self, role: str, **options: str | int) -> list[str]:
        args = [*self.program, role]
        for name, value in options.items():
            if value not in ("", None):
                args += [f"--{name.replace('_', '-')}", str(value)]
        return args


ALI_ONS = ClientKind("ali-ons", ("node", str(NODE_AGENT)), "make e2e-deps (npm install in tests/e2e/node)")
CPP = ClientKind("cpp", (str(CVS_PYTHON), str(CPP_AGENT)), "make e2e-deps (rocketmq-python-cvs in .venv-cvs)")
CLIENT_KINDS = {kind.name: kind for kind in (ALI_ONS, CPP)}


def require(kind: ClientKind) -> None:
    """Fail the calling test when ``kind`` cannot run here. ``make test`` installs both clients, so a missing one is
    a broken set-up, never a reason to skip."""
    reason = kind.missing_reason()
    if reason is not None:
        pytest.fail(f"{kind.name} client not installed: {reason}; install with {kind.install_hint}")


def log_tail(path: Path, limit: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-limit:]
    except OSError:
        return ""


class _Changes:
    """Wakes every waiter whenever any child process prints a line or exits.

    Waits are predicates over several processes (two consumers splitting a topic), so a line from any of them must
    re-check every wait, not only the waits of the process that printed it.
    """

    def __init__(self) -> None:
        self._event = trio.Event()

    def notify(self) -> None:
        self._event.set()
        self._event = trio.Event()

    async def wait(self) -> None:
        await self._event.wait()


_CHANGES = _Changes()


class Process:
    """A child process whose stdout lines are collected; stderr goes to ``log_path``."""

    def __init__(self, name: str, argv: list[str], log_path: Path) -> None:
        self.name = name
        self.argv = argv
        self.log_path = log_path
        self.lines: list[str] = []
        self._proc: trio.Process | None = None
        #: Set once stdout is drained and the process reaped: only then can no further line arrive.
        self._finished = False

    async def start(self, nursery: trio.Nursery) -> None:
        log = self.log_path.open("ab")
        try:
            self._proc = await trio.lowlevel.open_process(
                self.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                cwd=str(REPO_ROOT),
                start_new_session=True,
            )
        finally:
            log.close()
        _ALL.append(self)
        nursery.start_soon(self._read_stdout)

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.returncode is None

    async def _read_stdout(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        buf = b""
        async for chunk in self._proc.stdout:
            buf += chunk
            *complete, buf = buf.split(b"\n")
            for raw in complete:
                self.on_line(raw.decode("utf-8", "replace"))
        if buf:
            self.on_line(buf.decode("utf-8", "replace"))
        await self._proc.wait()
        self._finished = True
        self._notify()

    def on_line(self, line: str) -> None:
        self.lines.append(line)
        self._notify()

    def _notify(self) -> None:
        _CHANGES.notify()

    async def wait_until(self, predicate: Callable[[], bool], timeout: float, what: str) -> None:
        """Wait for ``predicate()`` to hold, re-checked on every line any child prints. Raises ScenarioError after
        ``timeout``, or at once if this process has ended without the predicate holding."""
        with trio.move_on_after(timeout):
            while not predicate():
                if self._finished and self._proc is not None:
                    raise ScenarioError(f"{self.name} exited ({self._proc.returncode}) before {what}{self.context()}")
                await _CHANGES.wait()
            return
        raise ScenarioError(f"{self.name}: no {what} within {timeout:.0f}s{self.context()}")

    def context(self) -> str:
        return f"\n--- {self.name} stderr tail ({self.log_path}) ---\n{log_tail(self.log_path)}"

    async def send_line(self, line: str) -> None:
        assert self._proc is not None and self._proc.stdin is not None
        await self._proc.stdin.send_all(line.encode() + b"\n")

    def kill(self) -> None:
        if self._proc is not None and self._proc.returncode is None:
            self._proc.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        """SIGTERM: a clean shutdown."""
        if self._proc is not None and self._proc.returncode is None:
            self._proc.send_signal(signal.SIGTERM)

    async def wait_exit(self, timeout: float) -> int | None:
        assert self._proc is not None
        with trio.move_on_after(timeout):
            return await self._proc.wait()
        return None


_ALL: list[Process] = []


async def kill_all() -> None:
    """SIGKILL every process still running (called in each session's ``finally``)."""
    with trio.CancelScope(shield=True):
        for proc in _ALL:
            proc.kill()
        for proc in _ALL:
            if proc._proc is not None:
                await proc.wait_exit(10)
        _ALL.clear()


class Agent(Process):
    """A client driver: JSON events from stdout in ``events``, commands answered by a ``done`` event."""

    def __init__(self, name: str, argv: list[str], log_path: Path) -> None:
        super().__init__(name, argv, log_path)
        self.events: list[Event] = []
        self.native_log_dir: Path | None = None
        self.shutdown_aborted = False
        self._next_id = 0

    def on_line(self, line: str) -> None:
        try:
            event = json.loads(line)
        except ValueError:
            event = {"ev": "noise", "line": line}
        if not isinstance(event, dict):
            event = {"ev": "noise", "line": line}
        self.events.append(event)
        super().on_line(line)

    def dump_events(self, path: Path) -> None:
        """Write every event seen, one JSON object per line, for post-mortems."""
        with path.open("w") as out:
            for event in self.events:
                out.write(json.dumps(event, ensure_ascii=False) + "\n")

    def of(self, ev: str) -> list[Event]:
        return [e for e in self.events if e.get("ev") == ev]

    @property
    def received(self) -> list[Event]:
        return self.of("recv")

    def received_keys(self) -> set[str]:
        return {e["keys"] for e in self.received}

    def _aborted_in_native_shutdown(self) -> bool:
        assert self._proc is not None
        return self._proc.returncode == -signal.SIGABRT and NATIVE_SHUTDOWN_ABORT in log_tail(self.log_path)

    def native_log_lines(self, needle: str) -> list[str]:
        """Lines containing ``needle`` in the client's own log files (the C++ core logs to files, not stderr)."""
        if self.native_log_dir is None or not self.native_log_dir.is_dir():
            return []
        return [
            line
            for path in sorted(self.native_log_dir.iterdir())
            for line in path.read_text(errors="replace").splitlines()
            if needle in line
        ]

    def client_errors(self) -> list[str]:
        """What the client reported as errors, and its abort in its own shutdown (:meth:`stop`) if it had one."""
        errors = [str(e.get("message")) for e in self.events if e.get("ev") in {"client_error", "fatal", "noise"}]
        return errors + (["aborted in its own shutdown()"] if self.shutdown_aborted else [])

    async def started(self, nursery: trio.Nursery, timeout: float = 60) -> Agent:
        await self.start(nursery)
        await self.wait_until(lambda: bool(self.of("ready")), timeout, "ready event")
        return self

    async def command(self, op: str, timeout: float, **fields: Any) -> Event:
        self._next_id += 1
        cid = self._next_id
        await self.send_line(json.dumps({"op": op, "id": cid, **fields}))

        def answered() -> bool:
            return any(e.get("id") == cid and e.get("ev") in {"done", "error"} for e in self.events)

        await self.wait_until(answered, timeout, f"answer to {op}")
        answer = next(e for e in self.events if e.get("id") == cid and e.get("ev") in {"done", "error"})
        if answer["ev"] == "error":
            raise ScenarioError(f"{self.name}: {op} failed: {answer.get('error')}")
        return answer

    async def produce(self, messages: list[Event], timeout: float) -> list[Event]:
        """Send ``messages`` one by one (synchronous sends); returns their ``sent`` events."""
        before = len(self.of("sent"))
        await self.command("produce", timeout, messages=messages)
        return self.of("sent")[before:]

    async def stop(self, timeout: float = 60) -> None:
        """Close the client cleanly (consumers persist offsets and unregister) and wait for the process to exit.

        The C++ 2.1.0 core's ``shutdown()`` now and then aborts on an uncaught ``boost::thread_interrupted`` from
        one of the threads it interrupts (upstream rocketmq-client-cpp issues 202 and 335). That abort is recorded
        in ``shutdown_aborted`` and not raised: the broker saw the connection close, and whatever the lost final
        offset commit or unregistration matters to, the scenario's own checks still see."""
        try:
            await self.command("stop", timeout)
        except ScenarioError:
            if not self._aborted_in_native_shutdown():
                raise
            self.shutdown_aborted = True
            return
        if await self.wait_exit(timeout) is None:
            raise ScenarioError(f"{self.name} did not exit after stop{self.context()}")
