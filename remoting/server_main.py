"""What the server binaries' mains share (``mqbroker``, ``mqnamesrv``, the embedded cluster, ``mqdashboard``).

- :data:`STOP_SIGNALS`: the signals that shut a server down cleanly, as the JVM runs its shutdown hooks on each;
  :func:`open_stop_signal_receiver` watches those of them the process was not started with ignored (``nohup``'s
  SIGHUP, the SIGINT of a non-interactive shell's ``&``), as the JVM installs no handler for a signal ignored at
  start (HotSpot's ``JVM_RegisterSignal``: ``os::Posix::is_sig_ignored``);
- :func:`run_main`: run the Trio main; a start-up failure of one of the expected types, alone inside the exception
  groups Trio nurseries wrap it in (:func:`~remoting.errors.sole_exception`), becomes one line on stderr and exit
  status 1. Anything else propagates with its traceback.
"""

from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, Final

import click
import trio

from remoting.errors import sole_exception

STOP_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def watched_stop_signals() -> tuple[signal.Signals, ...]:
    """The :data:`STOP_SIGNALS` whose disposition is not SIG_IGN: the ones the process was not started ignoring
    (trio restores the previous disposition when a receiver closes, so it is still the inherited one)."""
    return tuple(signum for signum in STOP_SIGNALS if signal.getsignal(signum) != signal.SIG_IGN)


@contextlib.contextmanager
def open_stop_signal_receiver() -> Iterator[AsyncIterator[int]]:
    """``trio.open_signal_receiver`` on :func:`watched_stop_signals`; with every one of them ignored, an iterator
    that never yields (the server runs until killed, as a JVM would)."""
    watched = watched_stop_signals()
    if not watched:
        yield _never()
        return
    with trio.open_signal_receiver(*watched) as receiver:
        yield receiver


async def _never() -> AsyncIterator[int]:
    await trio.sleep_forever()
    yield 0  # pragma: no cover - unreachable: makes this an async generator


def run_main(
    main: Callable[..., Awaitable[object]],
    *args: object,
    failures: tuple[type[BaseException], ...],
    describe: Callable[[Any], str],
) -> None:
    """``trio.run(main, *args)``; a failure of a type in ``failures`` is echoed as ``describe(failure)`` to stderr
    and exits with status 1."""
    try:
        trio.run(main, *args)
    except BaseException as exc:
        found = sole_exception(exc)
        if not isinstance(found, failures):
            raise
        click.echo(describe(found), err=True)
        sys.exit(1)
