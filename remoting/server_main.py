"""What the server binaries' mains share (``mqbroker``, ``mqnamesrv``, the embedded cluster, ``mqdashboard``).

- :data:`STOP_SIGNALS`: the signals that shut a server down cleanly, as the JVM runs its shutdown hooks on each;
- :func:`run_main`: run the Trio main; a start-up failure of one of the expected types, alone inside the exception
  groups Trio nurseries wrap it in (:func:`~remoting.errors.sole_exception`), becomes one line on stderr and exit
  status 1. Anything else propagates with its traceback.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Awaitable, Callable
from typing import Any, Final

import click
import trio

from remoting.errors import sole_exception

STOP_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


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
