"""What the server binaries' mains share (``mqbroker``, ``mqnamesrv``, the embedded cluster, ``mqdashboard``).

- :data:`STOP_SIGNALS`: the signals that shut a server down cleanly, as the JVM runs its shutdown hooks on each;
  :func:`open_stop_signal_receiver` watches those of them the process was not started with ignored (``nohup``'s
  SIGHUP, the SIGINT of a non-interactive shell's ``&``), as the JVM installs no handler for a signal ignored at
  start (HotSpot's ``JVM_RegisterSignal``: ``os::Posix::is_sig_ignored``); one left unread when the server has
  stopped (a second Ctrl-C during the shutdown) is dropped, as the JVM runs its shutdown hooks once;
- :func:`run_main`: run the Trio main; a start-up failure of one of the expected types, alone inside the exception
  groups Trio nurseries wrap it in (:func:`~remoting.errors.sole_exception`), becomes one line on stderr and the exit
  status the main gives its type (``mqbroker`` and ``mqnamesrv``: Java's, :mod:`remoting.exit_status`; 1 by
  default). Anything else propagates with its traceback;
- :class:`ShutdownHookLog`: the lines a JVM shutdown hook logs as the shutdown begins and once it is over, with the
  time it took (:data:`BROKER_HOOK_LINES`, :data:`NAMESRV_HOOK_LINES`);
- :func:`stop_at_signal` and :func:`serving_until_stopped`: a stop signal is acted on from the start on, as
  BrokerStartup and NamesrvStartup add their shutdown hook before the controller starts: one during the start
  abandons it (nothing is left half started, no boot line follows), one later ends the serving;
- :func:`take_stop_signals`, called first by a server main: outside the receiver's life a stop signal behaves as the
  JVM's does outside its hooks' life. Before the receiver opens (the options read, nothing started) it ends the
  process of the signal, silently (status 128 + signal in a shell), as a JVM ends before a shutdown hook is added;
  SIGINT so raises no KeyboardInterrupt. Once the receiver has closed (the shutdown over, the last line and the exit
  pending) it is dropped, as ``java.lang.Shutdown.exit`` holds one arriving then and exits as after the first.
  A stop signal whose handler was installed from C (``signal.getsignal`` gives None) is left to it: Python could
  not put it back.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, Final

import click
import trio

from remoting.errors import sole_exception

STOP_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

#: BrokerStartup's shutdown hook (broker/src/main/java/org/apache/rocketmq/broker/BrokerStartup.java).
BROKER_HOOK_LINES: Final = ("Shutdown hook was invoked, %d", "Shutdown hook over, consuming total time(ms): %d")
#: NamesrvStartup's (srvutil/src/main/java/org/apache/rocketmq/srvutil/ShutdownHookThread.java).
NAMESRV_HOOK_LINES: Final = ("shutdown hook was invoked, %d times.", "shutdown hook done, consuming time total(ms): %d")


class ShutdownHookLog:
    """Logs a Java shutdown hook's two lines to ``logger``: :meth:`invoked` when the shutdown begins (each call
    counted, as the hook counts its invocations), :meth:`over` when it has ended, with the milliseconds since the
    first :meth:`invoked` (nothing when it was never invoked)."""

    def __init__(self, logger: logging.Logger, lines: tuple[str, str]) -> None:
        self.logger = logger
        self._invoked_line, self._over_line = lines
        self._times = 0
        self._began: float | None = None

    def invoked(self) -> None:
        self._times += 1
        self.logger.info(self._invoked_line, self._times)
        if self._began is None:
            self._began = time.monotonic()

    def over(self) -> None:
        if self._began is not None:
            self.logger.info(self._over_line, round((time.monotonic() - self._began) * 1000))


async def stop_at_signal(signals: AsyncIterator[int], hook: ShutdownHookLog, stop: Callable[[], object]) -> None:
    """Call ``stop`` at the first stop signal, logging it as Java's shutdown hook does. Started before the server's
    start, so that one arriving during the start stops the server then."""
    async for signum in signals:
        hook.logger.info("received %s, shutting down", signal.Signals(signum).name)
        hook.invoked()
        stop()
        return


class StopRequest:
    """Where a stop signal goes: until :meth:`started` it cancels :attr:`scope`, around the server's start and life,
    so the start is abandoned and its parts shut down as the cancellation unwinds; after it, it sets
    :attr:`requested`, which the serving waits for, so the shutdown runs uncancelled, in its own order."""

    def __init__(self) -> None:
        self.scope = trio.CancelScope()
        self.requested = trio.Event()
        self._starting = True

    def started(self) -> None:
        self._starting = False

    def stop(self) -> None:
        if self._starting:
            self.scope.cancel()
        self.requested.set()


@contextlib.asynccontextmanager
async def serving_until_stopped(hook: ShutdownHookLog) -> AsyncIterator[StopRequest]:
    """Watch the stop signals (:func:`open_stop_signal_receiver`) for the block's life, which runs the server inside
    the request's ``scope``: it starts it, calls ``started()`` (after its boot lines), then waits for ``requested``.
    The hook's closing line is logged once the block is over."""
    with open_stop_signal_receiver() as signals:
        async with trio.open_nursery() as nursery:
            request = StopRequest()
            nursery.start_soon(stop_at_signal, signals, hook, request.stop)
            yield request
            nursery.cancel_scope.cancel()
    hook.over()


def watched_stop_signals() -> tuple[signal.Signals, ...]:
    """The :data:`STOP_SIGNALS` whose disposition is not SIG_IGN: the ones the process was not started ignoring
    (trio restores the previous disposition when a receiver closes, so it is still the inherited one), nor handles
    from C (None: a handler Python cannot reinstall once replaced)."""
    return tuple(signum for signum in STOP_SIGNALS if signal.getsignal(signum) not in (signal.SIG_IGN, None))


#: The stop signals :func:`take_stop_signals` took: dropped once a receiver closed, instead of the default put back.
_TAKEN: set[signal.Signals] = set()


def take_stop_signals() -> None:
    """A server main's first step: until its receiver opens, each watched stop signal ends the process of it (for
    SIGINT: no KeyboardInterrupt); once the receiver has closed, :func:`open_stop_signal_receiver` drops it until the
    process exits. The kernel's default disposition, not a handler in Python: that one runs only when the main thread
    runs Python again, so a signal landing just before a blocking call (the read of a ``-c`` FIFO) waited for it."""
    for signum in watched_stop_signals():
        signal.signal(signum, signal.SIG_DFL)
        _TAKEN.add(signum)


@contextlib.contextmanager
def open_stop_signal_receiver() -> Iterator[AsyncIterator[int]]:
    """``trio.open_signal_receiver`` on :func:`watched_stop_signals`; with every one of them ignored, an iterator
    that never yields (the server runs until killed, as a JVM would). A stop signal still unread when the block exits
    (one that came while the server shut down) is dropped: the JVM runs its shutdown hooks once, and a signal arriving
    meanwhile only waits for them (``java.lang.Shutdown.exit``); trio would raise it again once the block exits."""
    watched = watched_stop_signals()
    if not watched:
        yield _never()
        return
    with _ignored_at_exit(watched), trio.open_signal_receiver(*watched) as receiver:
        yield receiver


@contextlib.contextmanager
def _ignored_at_exit(signums: tuple[signal.Signals, ...]) -> Iterator[None]:
    """Ignore ``signums`` around the block and restore their handlers after it: trio's receiver, opened inside,
    puts back SIG_IGN before it raises the signals it did not deliver again, so the kernel drops them. In a server
    main (:func:`take_stop_signals`) they are dropped from then on, by a handler that does nothing rather than
    SIG_IGN, which the processes it may still start (a test, a tool running the main in-process) would inherit."""
    previous = {signum: signal.getsignal(signum) for signum in signums}
    for signum in signums:
        signal.signal(signum, signal.SIG_IGN)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, _drop_signal if signum in _TAKEN and handler == signal.SIG_DFL else handler)


def _drop_signal(signum: int, frame: object) -> None:
    """A stop signal after the server main's shutdown: nothing more to do (``java.lang.Shutdown.exit`` lets it wait for
    the hooks already run). A Python handler, so exec resets it in a child, where SIG_IGN would be inherited."""


async def _never() -> AsyncIterator[int]:
    await trio.sleep_forever()
    yield 0  # pragma: no cover - unreachable: makes this an async generator


def run_main(
    main: Callable[..., Awaitable[object]],
    *args: object,
    failures: tuple[type[BaseException], ...],
    describe: Callable[[Any], str],
    statuses: tuple[tuple[type[BaseException] | tuple[type[BaseException], ...], int], ...] = (),
    status: int = 1,
) -> None:
    """``trio.run(main, *args)``; a failure of a type in ``failures`` is echoed as ``describe(failure)`` to stderr
    and exits with the status of the first ``(types, status)`` of ``statuses`` it is an instance of, else ``status``."""
    try:
        trio.run(main, *args)
    except BaseException as exc:
        found = sole_exception(exc)
        if not isinstance(found, failures):
            raise
        click.echo(describe(found), err=True)
        sys.exit(next((code for types, code in statuses if isinstance(found, types)), status))
