"""remoting/server_main.py's stop signals: which ones a server main watches, as the JVM chooses its shutdown signals.
The processes themselves: tests/broker/test_operations.py."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest
import trio

from remoting.server_main import STOP_SIGNALS, open_stop_signal_receiver, watched_stop_signals


@contextlib.contextmanager
def ignored(*signums: signal.Signals) -> Iterator[None]:
    """``signums`` set to SIG_IGN, their handlers put back after."""
    before = {signum: signal.getsignal(signum) for signum in signums}
    try:
        for signum in signums:
            signal.signal(signum, signal.SIG_IGN)
        yield
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)


def test_a_stop_signal_ignored_at_start_is_not_watched() -> None:
    with ignored(signal.SIGHUP):
        assert watched_stop_signals() == (signal.SIGINT, signal.SIGTERM)
    assert watched_stop_signals() == STOP_SIGNALS


async def test_with_every_stop_signal_ignored_the_receiver_never_yields(autojump_clock: trio.abc.Clock) -> None:
    """Nothing to watch: the server runs until killed, as a JVM started with all three ignored."""
    with ignored(*STOP_SIGNALS), open_stop_signal_receiver() as signals:
        with trio.move_on_after(3600) as waited:
            async for _ in signals:
                break
        assert waited.cancelled_caught


async def test_a_stop_signal_handled_outside_python_is_left_to_its_handler(monkeypatch: pytest.MonkeyPatch) -> None:
    """``signal.getsignal`` gives None for a handler installed from C (a program embedding Python): Python cannot
    put such a handler back, so the receiver leaves that signal alone, as it leaves one ignored at start. It used to
    take it over and then fail to restore it (``signal.signal(signum, None)``: TypeError)."""
    getsignal = signal.getsignal
    monkeypatch.setattr(signal, "getsignal", lambda signum: None if signum == signal.SIGHUP else getsignal(signum))
    before = getsignal(signal.SIGHUP)
    with open_stop_signal_receiver():
        assert getsignal(signal.SIGHUP) is before
        assert signal.SIGHUP not in watched_stop_signals()
    assert getsignal(signal.SIGHUP) is before


_AFTER_A_MAIN = """
import signal, subprocess, sys
import trio
from remoting.server_main import open_stop_signal_receiver, take_stop_signals

async def serve():
    with open_stop_signal_receiver():
        pass

take_stop_signals()
trio.run(serve)
child = "import signal; print(*(signal.getsignal(s) == signal.SIG_IGN for s in (signal.SIGTERM, signal.SIGINT)))"
print(subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, check=True).stdout.strip())
"""


def test_a_process_a_server_main_ran_in_starts_children_with_the_default_stop_signals() -> None:
    """After a server main's receiver closes, a stop signal is dropped until the process exits; a process that goes
    on (a test, a tool running the main in-process) must not hand an ignored SIGTERM or SIGINT down to the processes
    it starts, which exec keeps (a Python handler it resets): the suite's later brokers never stopped on SIGTERM (found
    by the full run: "slave did not stop within 60s")."""
    done = subprocess.run([sys.executable, "-c", _AFTER_A_MAIN], capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["False", "False"], done.stderr[-2000:]  # neither ignored


_TAKEN_WHILE_BLOCKED = """
import os, signal, threading, time
from remoting.server_main import take_stop_signals

take_stop_signals()
threading.Thread(target=time.sleep, args=(120,), daemon=True).start()
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})  # only the other thread can take it now
read_end, _ = os.pipe()
print("reading", flush=True)
os.read(read_end, 1)
"""


def test_a_stop_signal_taken_while_the_main_thread_waits_in_a_system_call_ends_the_process() -> None:
    """Before the receiver opens a stop signal ends the process even when the main thread sits in a blocking call that
    the signal does not interrupt: here it is taken by another thread, as it is when it lands just before the call
    starts (`mqbroker -c` reading a FIFO: one Ctrl-C in about 50 never ended the process). A handler in Python runs
    only when the main thread runs Python again, so the default disposition must do it."""
    child = subprocess.Popen([sys.executable, "-c", _TAKEN_WHILE_BLOCKED], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "reading"
        child.send_signal(signal.SIGINT)
        try:
            status = child.wait(timeout=60)
        except subprocess.TimeoutExpired:
            status = None
        assert status == -signal.SIGINT
    finally:
        child.kill()
        child.wait()
