"""How `python -m broker.embedded` (`make run`), `python -m broker.embedded_dledger`, `scripts/run`, `mqbroker` and
`mqdashboard` start and stop, as real processes (tests/e2e/harness.py's Process): start-up errors as one line, exit
statuses, SIGHUP (and a stop signal ignored at start, as under nohup), a parent's SIGKILL, and the store lock RocketMQ
takes. Found by a review; each failed before."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import signal
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from bench.load.procstat import children_of
from tests.e2e.harness import Process, kill_all, log_tail

PY = sys.executable
BIN = str(Path(sys.executable).parent)
SMALL = ["--mappedFileSizeCommitLog", str(1 << 20), "--maxHashSlotNum", "1024", "--maxIndexNum", "4096"]


@contextlib.contextmanager
def taken_port() -> Iterator[int]:
    """A port on 127.0.0.1 that another process (here: this one) listens on."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    try:
        yield sock.getsockname()[1]
    finally:
        sock.close()


def boots(proc: Process) -> list[str]:
    return [line for line in proc.lines if "boot success" in line and line.startswith("The broker[")]


def kill_group(proc: Process) -> None:
    """SIGKILL the process group Process started (start_new_session), so no child outlives the test."""
    if proc._proc is not None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc._proc.pid, signal.SIGKILL)


def mqbroker(store: Path, log: Path) -> Process:
    """A `mqbroker` on ``store``, listening on a free port of 127.0.0.1, told of a name server that is not there."""
    argv = [PY, "-m", "broker.cli", "-n", "127.0.0.1:1", "--listenPort", "0", "--listenHost", "127.0.0.1",
            "--storePathRootDir", str(store), *SMALL]  # fmt: skip
    return Process("mqbroker", argv, log)


async def exit_status(proc: Process, within: float, what: str) -> int:
    """Start ``proc`` and wait up to ``within`` seconds for its exit status (failing the test if it is still running,
    ``what`` hung); no process of its group is left afterwards."""
    try:
        async with trio.open_nursery() as nursery:
            await proc.start(nursery)
            status = await proc.wait_exit(within)
            assert status is not None, f"{what} hung"
            return status
    finally:
        kill_group(proc)
        await kill_all()


@pytest.mark.parametrize("which", ["namesrv", "broker"])
async def test_embedded_with_a_taken_port_exits_with_a_message_not_a_traceback(tmp_path: Path, which: str) -> None:
    """`python -m broker.embedded` (what `make run` starts) answers a taken port with one line and status 1, as
    `mqbroker` and `mqnamesrv` do, not an exception-group traceback."""
    with taken_port() as port:
        ports = (
            ["--namesrv-port", str(port), "--listenPort", "0"]
            if which == "namesrv"
            else ["--namesrv-port", "0", "--listenPort", str(port)]
        )
        proc = Process(
            "embedded",
            [PY, "-m", "broker.embedded", "--data", str(tmp_path / "data"), "--brokers", "1", *ports, *SMALL],
            tmp_path / "embedded.log",
        )
        status = await exit_status(proc, 90, "python -m broker.embedded on a taken port")
    err = log_tail(tmp_path / "embedded.log", 100_000)
    assert status == 1
    assert "Traceback" not in err, f"a taken {which} port gives a traceback, not a message:\n{err[-1500:]}"
    assert "embedded: cannot start: " in err and "Address already in use" in err


async def test_embedded_with_a_broker_process_that_cannot_start_exits_with_one_line(tmp_path: Path) -> None:
    """With `--brokers 2`, broker-b runs in a child process; when it cannot start (here: its store's `lock` held as
    RocketMQ holds it, which its mqbroker exits 255 for), `python -m broker.embedded` prints one line naming it, its
    status and its log, and exits with 1."""
    import fcntl

    data = tmp_path / "data"
    (data / "broker-b").mkdir(parents=True)
    fd = os.open(data / "broker-b" / "lock", os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
    proc = Process(
        "embedded",
        [PY, "-m", "broker.embedded", "--data", str(data), "--brokers", "2", "--namesrv-port", "0",
         "--listenPort", "0", *SMALL],
        tmp_path / "embedded.log",
    )  # fmt: skip
    try:
        status = await exit_status(proc, 90, "python -m broker.embedded with a locked broker-b")
    finally:
        os.close(fd)
    err = log_tail(tmp_path / "embedded.log", 100_000)
    assert status == 1
    assert "Traceback" not in err, f"a broker process that cannot start gives a traceback:\n{err[-1500:]}"
    line = next(line for line in err.splitlines() if line.startswith("embedded: cannot start: "))
    assert "broker-b exited with 255 before booting" in line and "is in use by another process" in line


async def test_mqdashboard_on_a_taken_port_exits_with_a_message_not_a_traceback(tmp_path: Path) -> None:
    """`mqdashboard` on a taken port (also what `make run` meets when 8080 is taken) prints one line and exits with 1:
    Hypercorn's bind error comes out of trio.run inside an exception group, and was printed as a traceback."""
    with taken_port() as port:
        proc = Process(
            "mqdashboard", [PY, "-m", "dashboard.cli", "-n", "127.0.0.1:1", "--port", str(port)], tmp_path / "d.log"
        )
        status = await exit_status(proc, 60, "mqdashboard on a taken port")
    err = log_tail(tmp_path / "d.log", 100_000)
    assert status == 1
    assert "Traceback" not in err, f"a taken port gives a traceback, not a message:\n{err[-1500:]}"
    assert "mqdashboard: cannot listen on " in err


async def test_scripts_run_exits_0_after_a_clean_sigterm_shutdown(tmp_path: Path) -> None:
    """scripts/run (`make run`) exits with the cluster's own status, 0 after a clean shutdown on SIGTERM: the `wait`
    the trapped signal interrupts (143, 130 for Ctrl-C) is not the script's status."""
    proc = Process(
        "scripts/run",
        ["env", f"BIN={BIN}", "DASHBOARD_PORT=0", "bash", "scripts/run", "--data", str(tmp_path / "data"),
         "--namesrv-port", "0", "--listenPort", "0", "--brokers", "1", *SMALL],
        tmp_path / "run.log",
    )  # fmt: skip
    try:
        async with trio.open_nursery() as nursery:
            await proc.start(nursery)
            await proc.wait_until(
                lambda: bool(boots(proc)) and any("mqdashboard listening" in line for line in proc.lines),
                90,
                "broker boot line and dashboard line",
            )
            proc.terminate()
            status = await proc.wait_exit(90)
            assert status is not None, "scripts/run did not stop after SIGTERM"
            await proc.wait_until(lambda: "The embedded cluster shutdown." in proc.lines, 30, "cluster shutdown line")
            assert not (tmp_path / "data" / "broker" / "abort").exists()  # the cluster did shut down cleanly
            assert status == 0, f"scripts/run exited {status} after a clean shutdown (cluster printed its shutdown)"
    finally:
        kill_group(proc)
        await kill_all()


async def test_embedded_restarts_on_its_data_after_kill_9(tmp_path: Path) -> None:
    """`python -m broker.embedded --brokers 2` SIGKILLed: broker-b's child process sees its stdin (a pipe from the
    parent) close and shuts down cleanly, freeing its port and store lock, so a restart on the same data directory
    boots both brokers, as a kill -9'd RocketMQ broker frees its lock with its process. (The child used to keep
    running: 'store .../broker-b is in use by another process'.)"""
    data = tmp_path / "data"
    argv = [PY, "-m", "broker.embedded", "--data", str(data), "--namesrv-port", "0", "--listenPort", "0",
            "--brokers", "2", *SMALL]  # fmt: skip
    first = Process("embedded-1", argv, tmp_path / "first.log")
    second = Process("embedded-2", argv, tmp_path / "second.log")
    orphans: list[int] = []
    try:
        async with trio.open_nursery() as nursery:
            await first.start(nursery)
            await first.wait_until(lambda: len(boots(first)) == 2, 90, "two broker boot lines")
            assert first._proc is not None
            orphans = children_of(first._proc.pid)
            first.kill()
            assert await first.wait_exit(30) is not None
            with trio.fail_after(60):
                while any(os.path.exists(f"/proc/{pid}") and not _zombie(pid) for pid in orphans):
                    await trio.sleep(0.1)
            assert not (data / "broker-b" / "abort").exists()  # broker-b shut down cleanly
            assert "The broker[broker-b] shutdown." not in first.lines  # its stdout had no reader left
            await second.start(nursery)
            await second.wait_until(lambda: len(boots(second)) == 2, 90, "two broker boot lines after kill -9")
            second.terminate()
            assert await second.wait_exit(90) == 0
    finally:
        for pid in orphans:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        kill_group(first)
        kill_group(second)
        await kill_all()


def _zombie(pid: int) -> bool:
    """Whether ``pid`` has exited and waits for its (new) parent to reap it."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


async def test_mqbroker_shuts_down_cleanly_on_sighup(tmp_path: Path) -> None:
    """Closing the terminal of a foreground `mqbroker` sends SIGHUP, and it shuts down cleanly (exit 0, no abort
    file): RocketMQ's BrokerStartup registers controller.shutdown() as a JVM shutdown hook
    (broker/src/main/java/org/apache/rocketmq/broker/BrokerStartup.java, addShutdownHook), which the JVM runs on
    SIGHUP as on SIGINT/SIGTERM. SIGHUP used to kill it outright."""
    store = tmp_path / "store"
    proc = mqbroker(store, tmp_path / "broker.log")
    try:
        async with trio.open_nursery() as nursery:
            await proc.start(nursery)
            await proc.wait_until(lambda: bool(boots(proc)), 90, "boot line")
            assert proc._proc is not None
            proc._proc.send_signal(signal.SIGHUP)
            status = await proc.wait_exit(60)
            assert status is not None, "mqbroker did not stop on SIGHUP"
            assert status == 0 and not (store / "abort").exists(), (
                f"SIGHUP: exit status {status}, abort file left: {(store / 'abort').exists()},"
                f" shutdown line printed: {any('shutdown' in line for line in proc.lines)}"
            )
    finally:
        kill_group(proc)
        await kill_all()


def ignoring(signum: int, argv: list[str]) -> list[str]:
    """``argv`` started with ``signum`` ignored, as ``nohup`` (SIGHUP) or a non-interactive shell's ``&`` (SIGINT)
    start a command: SIG_IGN, then exec."""
    launcher = (
        f"import os, signal, sys; signal.signal({int(signum)}, signal.SIG_IGN); os.execv(sys.argv[1], sys.argv[1:])"
    )
    return [PY, "-c", launcher, *argv]


@pytest.mark.parametrize(
    "server, ignored",
    [("mqnamesrv", signal.SIGHUP), ("mqnamesrv", signal.SIGINT), ("mqbroker", signal.SIGHUP)],
    ids=["mqnamesrv-SIGHUP", "mqnamesrv-SIGINT", "mqbroker-SIGHUP"],
)
async def test_a_stop_signal_ignored_at_start_stays_ignored_as_under_nohup(
    tmp_path: Path, server: str, ignored: signal.Signals
) -> None:
    """RocketMQ's quick start is ``nohup sh bin/mqnamesrv &`` and ``nohup sh bin/mqbroker -n localhost:9876 &``: the
    JVM installs no handler for a shutdown signal that was ignored when it started (HotSpot's JVM_RegisterSignal:
    ``if (os::Posix::is_sig_ignored(sig)) return (void*)1``), so a nohup'd server outlives its terminal and a script's
    background job outlives Ctrl-C. Ours replaced SIG_IGN with its own handler and shut down on it."""
    log = tmp_path / f"{server}.log"
    if server == "mqnamesrv":
        argv = [PY, "-m", "namesrv.cli", "--listenPort", "0", "--listenHost", "127.0.0.1",
                "--kvConfigPath", str(tmp_path / "kv.json")]  # fmt: skip
    else:
        argv = mqbroker(tmp_path / "store", log).argv
    proc = Process(server, ignoring(ignored, argv), log)
    try:
        async with trio.open_nursery() as nursery:
            await proc.start(nursery)
            await proc.wait_until(lambda: any("boot success" in line for line in proc.lines), 90, "boot line")
            assert proc._proc is not None
            proc._proc.send_signal(ignored)
            proc._proc.send_signal(signal.SIGTERM)
            status = await proc.wait_exit(60)
    finally:
        kill_group(proc)
        await kill_all()
    name, text = signal.Signals(ignored).name, log.read_text()
    assert f"received {name}" not in text, f"{server} started with {name} ignored shut down on {name}: {text[-300:]}"
    assert status == 0 and "received SIGTERM" in text, text[-800:]


async def test_mqbroker_refuses_a_store_whose_lock_a_java_broker_holds(tmp_path: Path) -> None:
    """`mqbroker` refuses (status 255) a store whose `lock` a Java broker holds: RocketMQ 4.9.8's DefaultMessageStore
    locks `<storePathRootDir>/lock` with `lockFile.getChannel().tryLock(0, 1, false)`
    (store/src/main/java/org/apache/rocketmq/store/DefaultMessageStore.java), a POSIX fcntl record lock on Linux,
    which Linux keeps apart from the BSD `flock` store/checkpoint.py took alone before. Here this test process holds
    the lock exactly as the JVM would."""
    import fcntl

    from tests.e2e.harness import ScenarioError

    store = tmp_path / "store"
    store.mkdir()
    fd = os.open(store / "lock", os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)  # Java's tryLock(0, 1, false)
    proc = mqbroker(store, tmp_path / "broker.log")
    try:
        async with trio.open_nursery() as nursery:
            await proc.start(nursery)
            booted = True
            try:
                await proc.wait_until(lambda: bool(boots(proc)), 90, "boot line")
            except ScenarioError:
                booted = False
            assert not booted, "mqbroker booted on a store whose `lock` another process holds as RocketMQ does"
            assert await proc.wait_exit(30) == 255  # BrokerStartup.start's catch: System.exit(-1)
    finally:
        os.close(fd)
        kill_group(proc)
        await kill_all()


async def test_embedded_dledger_group_shuts_down_cleanly_on_sighup(tmp_path: Path) -> None:
    """`python -m broker.embedded_dledger` stops on SIGHUP as on SIGINT and SIGTERM (exit 0), as every other server
    main here (remoting/server_main.py's STOP_SIGNALS) and as the JVM runs its shutdown hooks on SIGHUP. It used to
    die of the signal."""
    argv = [PY, "-m", "broker.embedded_dledger", "--data", str(tmp_path / "data"), "--members", "3"]
    proc = Process("embedded-dledger", argv, tmp_path / "dledger.log")
    try:
        async with trio.open_nursery() as nursery:
            await proc.start(nursery)
            await proc.wait_until(lambda: any("; leader n" in line for line in proc.lines), 90, "leader line")
            assert proc._proc is not None
            proc._proc.send_signal(signal.SIGHUP)
            status = await proc.wait_exit(60)
            assert status == 0, f"SIGHUP: exit status {status}"
    finally:
        kill_group(proc)
        await kill_all()


def mqnamesrv(log: Path) -> Process:
    """A `mqnamesrv` listening on a free port of 127.0.0.1."""
    argv = [PY, "-m", "namesrv.cli", "--listenPort", "0", "--listenHost", "127.0.0.1",
            "--kvConfigPath", str(log.with_name("kv.json"))]  # fmt: skip
    return Process("mqnamesrv", argv, log)


@pytest.mark.parametrize(
    ("which", "invoked", "over"),
    [
        ("broker", "Shutdown hook was invoked, 1", "Shutdown hook over, consuming total time(ms): "),
        ("namesrv", "shutdown hook was invoked, 1 times.", "shutdown hook done, consuming time total(ms): "),
    ],
)
async def test_a_stop_signal_logs_javas_shutdown_hook_lines(
    tmp_path: Path, which: str, invoked: str, over: str
) -> None:
    """SIGTERM logs the lines of Java's shutdown hook, which operators and scripts look for in the log: the count of
    invocations, then the time the shutdown took (broker/src/main/java/org/apache/rocketmq/broker/BrokerStartup.java
    ``addShutdownHook``; srvutil/src/main/java/org/apache/rocketmq/srvutil/ShutdownHookThread.java for the name
    server, NamesrvStartup's hook). Ours logged only the signal received."""
    log = tmp_path / f"{which}.log"
    proc = mqbroker(tmp_path / "store", log) if which == "broker" else mqnamesrv(log)
    try:
        async with trio.open_nursery() as nursery:
            await proc.start(nursery)
            await proc.wait_until(lambda: any("boot success" in line for line in proc.lines), 90, "boot line")
            assert proc._proc is not None
            proc._proc.send_signal(signal.SIGTERM)
            assert await proc.wait_exit(60) == 0
    finally:
        kill_group(proc)
        await kill_all()
    err = log_tail(log, 100_000)
    assert invoked in err and err.count(invoked) == 1, err[-1500:]
    tail = err[err.index(invoked) :]
    assert over in tail and tail[tail.index(over) + len(over) :].split()[0].isdigit(), err[-1500:]


async def wait_for_log(log: Path, text: str, within: float) -> None:
    with trio.fail_after(within):
        while text not in log_tail(log, 100_000):
            await trio.sleep(0.05)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
async def test_a_second_stop_signal_during_the_shutdown_is_ignored(tmp_path: Path, signum: signal.Signals) -> None:
    """A second SIGTERM or Ctrl-C while `mqbroker` shuts down leaves the shutdown to finish: the JVM runs its
    shutdown hooks once and a signal arriving meanwhile waits for them (java.lang.Shutdown.exit), so BrokerStartup's
    hook logs its end and the broker exits as after one signal. Ours finished the shutdown, then died of the second
    signal (killed by SIGTERM; "Aborted!" and status 1 for SIGINT) without its shutdown lines. The name server is
    stopped (SIGSTOP) so that the broker's UNREGISTER_BROKER, and with it the shutdown, waits for its timeout."""
    namesrv = mqnamesrv(tmp_path / "namesrv.log")
    broker: Process | None = None
    try:
        async with trio.open_nursery() as nursery:
            await namesrv.start(nursery)
            await namesrv.wait_until(lambda: any("boot success" in line for line in namesrv.lines), 90, "boot line")
            ns_addr = next(line for line in namesrv.lines if "boot success" in line).rsplit(" ", 1)[1]
            broker = mqbroker(tmp_path / "store", tmp_path / "broker.log")
            broker.argv[broker.argv.index("-n") + 1] = ns_addr
            await broker.start(nursery)
            await broker.wait_until(lambda: bool(boots(broker)), 90, "boot line")
            assert namesrv._proc is not None and broker._proc is not None
            namesrv._proc.send_signal(signal.SIGSTOP)
            broker._proc.send_signal(signum)
            await wait_for_log(tmp_path / "broker.log", "Shutdown hook was invoked, 1", 60)
            broker._proc.send_signal(signum)
            status = await broker.wait_exit(60)
            namesrv._proc.send_signal(signal.SIGCONT)
            err = log_tail(tmp_path / "broker.log", 100_000)
            assert status == 0, f"exit status {status}:\n{err[-1500:]}"
            assert any(line.endswith("] shutdown.") for line in broker.lines)
            assert "Shutdown hook over, consuming total time(ms): " in err
            assert not (tmp_path / "store" / "abort").exists()
            nursery.cancel_scope.cancel()  # the name server's output reader
    finally:
        for proc in (broker, namesrv):
            if proc is not None:
                kill_group(proc)
        await kill_all()


async def test_a_stop_signal_during_the_start_stops_the_broker_before_it_boots(tmp_path: Path) -> None:
    """SIGTERM while `mqbroker` starts (here its start-up REGISTER_BROKER waits for a stopped name server) stops it
    then: BrokerStartup's shutdown hook, added before BrokerController.start, runs controller.shutdown at once and the
    JVM exits without printing the boot line. Ours held the signal until the start had finished, so it printed
    "boot success" after being told to stop, and a script waiting for that line took the broker for started."""
    namesrv = mqnamesrv(tmp_path / "namesrv.log")
    broker: Process | None = None
    try:
        async with trio.open_nursery() as nursery:
            await namesrv.start(nursery)
            await namesrv.wait_until(lambda: any("boot success" in line for line in namesrv.lines), 90, "boot line")
            ns_addr = next(line for line in namesrv.lines if "boot success" in line).rsplit(" ", 1)[1]
            assert namesrv._proc is not None
            namesrv._proc.send_signal(signal.SIGSTOP)
            broker = mqbroker(tmp_path / "store", tmp_path / "broker.log")
            broker.argv[broker.argv.index("-n") + 1] = ns_addr
            await broker.start(nursery)
            await wait_for_log(tmp_path / "broker.log", "HA listening on port", 60)
            assert broker._proc is not None
            broker._proc.send_signal(signal.SIGTERM)
            status = await broker.wait_exit(60)
            namesrv._proc.send_signal(signal.SIGCONT)
            err = log_tail(tmp_path / "broker.log", 100_000)
            assert status == 0, f"exit status {status}:\n{err[-1500:]}"
            assert not boots(broker), "a broker told to stop during its start printed its boot line"
            assert "Shutdown hook was invoked, 1" in err
            assert not (tmp_path / "store" / "abort").exists()
            nursery.cancel_scope.cancel()  # the name server's output reader
    finally:
        for proc in (broker, namesrv):
            if proc is not None:
                kill_group(proc)
        await kill_all()


async def open_fifo_writer(path: Path, within: float = 90) -> int:
    """The write end of FIFO ``path``, once a process has opened it for reading (before that, ENXIO): from then on
    that reader waits in ``read`` until the write end is closed, when it gets end of file, as from an empty file."""
    with trio.fail_after(within):
        while True:
            try:
                return os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError as exc:
                if exc.errno != errno.ENXIO:
                    raise
            await trio.sleep(0.02)


def server_reading_kv_config(which: str, tmp_path: Path) -> tuple[Process, Path]:
    """``which`` server main and the ``kvConfig.json`` its name server reads at the start."""
    data = tmp_path / "data"
    if which == "mqnamesrv":
        return mqnamesrv(tmp_path / "mqnamesrv.log"), tmp_path / "kv.json"
    if which == "embedded":
        argv = [PY, "-m", "broker.embedded", "--data", str(data), "--namesrv-port", "0", "--broker-port", "0",
                "--brokers", "1", *SMALL]  # fmt: skip
    else:
        argv = [PY, "-m", "broker.embedded_dledger", "--data", str(data), "--members", "1"]
    return Process(which, argv, tmp_path / f"{which}.log"), data / "namesrv" / "kvConfig.json"


@pytest.mark.parametrize("which", ["mqnamesrv", "embedded", "embedded-dledger"])
async def test_a_stop_signal_while_the_start_waits_stops_the_server_before_it_boots(tmp_path: Path, which: str) -> None:
    """SIGTERM while the server's start waits (here: its name server reading kvConfig.json, a FIFO this test holds
    open) is acted on then, as BrokerStartup and NamesrvStartup add their shutdown hook before the controller starts
    (broker/src/main/java/org/apache/rocketmq/broker/BrokerStartup.java, namesrv/.../NamesrvStartup.java; the hook
    runs at once): the hook's line is logged while the start still waits, no boot line follows, status 0, nothing
    left running. Only `mqbroker` did so: these held the signal until their start had finished, printed their boot
    lines for a server told to stop, and only then shut down."""
    proc, kv_config = server_reading_kv_config(which, tmp_path)
    kv_config.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(kv_config)
    try:
        async with trio.open_nursery() as nursery:
            await proc.start(nursery)
            writer = await open_fifo_writer(kv_config)
            try:
                assert proc._proc is not None
                proc._proc.send_signal(signal.SIGTERM)
                await wait_for_log(proc.log_path, "received SIGTERM, shutting down", 30)
            finally:
                os.close(writer)
            status = await proc.wait_exit(60)
            err = log_tail(proc.log_path, 100_000)
            assert status == 0, f"exit status {status}:\n{err[-1500:]}"
            assert not any("boot success" in line or "; leader " in line for line in proc.lines), proc.lines
            assert "Traceback" not in err, err[-1500:]
            assert not list(tmp_path.glob("data/**/abort")), "a store left its abort file"
    finally:
        kill_group(proc)
        await kill_all()


async def read_until(stream: trio.lowlevel.FdStream, marker: bytes, within: float = 90) -> bytes:
    """What ``stream`` gives until a whole line with ``marker`` has come (with an empty ``marker``: up to EOF)."""
    data = b""
    with trio.fail_after(within):
        while not marker or marker not in data or not data.endswith(b"\n"):  # print may write "\n" on its own
            chunk = await stream.receive_some()
            if not chunk:
                break
            data += chunk
    return data


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
async def test_a_stop_signal_after_the_shutdown_hook_is_over_is_dropped(tmp_path: Path, signum: signal.Signals) -> None:
    """A stop signal once the shutdown is over, while `mqbroker` prints its last line and exits, leaves it to exit
    as after one signal: the JVM's exit (java.lang.Shutdown.exit) holds a signal arriving then until it has ended,
    with the first signal's outcome. Here that last line waits on a full stdout pipe. Ours had put the default
    handlers back once its signal receiver closed: SIGTERM killed the broker, SIGINT ended it with "Aborted!" and
    status 1, without its last line."""
    log = tmp_path / "broker.log"
    argv = mqbroker(tmp_path / "store", log).argv
    read_end, write_end = os.pipe()
    with log.open("ab") as err:
        proc = await trio.lowlevel.open_process(argv, stdout=write_end, stderr=err, start_new_session=True)
    try:
        async with trio.lowlevel.FdStream(read_end) as out:
            assert b"boot success" in await read_until(out, b"boot success")
            os.write(write_end, b"\0" * fcntl.fcntl(write_end, fcntl.F_GETPIPE_SZ))  # full: its next print waits
            proc.send_signal(signal.SIGTERM)
            await wait_for_log(log, "Shutdown hook over, consuming total time(ms): ", 60)
            proc.send_signal(signum)
            os.close(write_end)
            write_end = -1
            rest = await read_until(out, b"", 60)
        with trio.fail_after(60):
            status = await proc.wait()
        err_text = log_tail(log, 100_000)
        assert status == 0, f"exit status {status}:\n{err_text[-1500:]}"
        assert rest.rstrip(b"\0").endswith(b"] shutdown.\n"), rest[-200:]
        assert "Traceback" not in err_text and "Aborted!" not in err_text, err_text[-1500:]
    finally:
        if write_end >= 0:
            os.close(write_end)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)


async def test_ctrl_c_before_the_start_ends_mqbroker_of_it_without_a_traceback(tmp_path: Path) -> None:
    """Ctrl-C before `mqbroker` starts anything (here: while it reads its -c file, a FIFO this test holds open) ends
    the process of the signal, silently, as a JVM ends (status 128 + signal, no hook run) on a signal that comes
    before BrokerStartup has added its shutdown hook; SIGTERM did so already. Ours raised KeyboardInterrupt there:
    click's "Aborted!" and status 1."""
    conf = tmp_path / "broker.conf"
    os.mkfifo(conf)
    proc = mqbroker(tmp_path / "store", tmp_path / "broker.log")
    proc.argv[3:3] = ["-c", str(conf)]
    try:
        async with trio.open_nursery() as nursery:
            await proc.start(nursery)
            writer = await open_fifo_writer(conf)
            try:
                assert proc._proc is not None
                proc._proc.send_signal(signal.SIGINT)
                status = await proc.wait_exit(60)
            finally:
                os.close(writer)
            err = log_tail(proc.log_path, 100_000)
            assert status == -signal.SIGINT, f"exit status {status}:\n{err[-1500:]}"
            assert "Traceback" not in err and "Aborted!" not in err, err[-1500:]
            assert not boots(proc)
    finally:
        kill_group(proc)
        await kill_all()
