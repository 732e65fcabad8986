"""The exit statuses of the server mains (``mqbroker``, ``mqnamesrv``) where their start fails, as Java's.

- :data:`REFUSED_STATUS` (253): BrokerStartup's ``System.exit(-3)``, a start refused by its checks or a failed
  ``initialize``;
- :data:`FAILED_STATUS` (255): ``System.exit(-1)``, the catch of every Throwable around BrokerStartup's and
  NamesrvStartup's start (a port that cannot be bound, a locked store, TLS files, a ``-c`` file that cannot be opened,
  a value the start cannot take);
- :data:`PARSE_FAILED_STATUS` (1): ServerUtil.parseCmdLine's ``System.exit(1)`` after commons-cli's ParseException
  (srvutil/src/main/java/org/apache/rocketmq/srvutil/ServerUtil.java); :class:`JavaStatusCommand` gives it to a
  command line click cannot parse (click's own status is 2).

Each failure keeps click's message; only the status changes.
"""

from __future__ import annotations

from typing import Any, Final

import click

from remoting.codec.java_properties import CommandLineError, PropertiesError

#: BrokerStartup's ``System.exit(-3)`` (broker/src/main/java/org/apache/rocketmq/broker/BrokerStartup.java).
REFUSED_STATUS: Final = 253
#: A start that fails otherwise (an exception BrokerStartup's or NamesrvStartup's catch ends): ``System.exit(-1)``.
FAILED_STATUS: Final = 255
#: A command line commons-cli cannot parse: ``System.exit(1)``. ProxyStartup.main ends any start failure so too.
PARSE_FAILED_STATUS: Final = 1


def _exit_with(error: click.ClickException, status: int) -> click.ClickException:
    """``error``, which click's standalone main ends with ``status``: it reads ``exit_code`` from the instance."""
    error.exit_code = status  # type: ignore[misc]  # a ClassVar in click's stubs; click reads the instance's
    return error


class JavaStatusCommand(click.Command):
    """A server main's click command: a command line that does not parse (an option without its value, ``-x``)
    exits with :data:`PARSE_FAILED_STATUS` after click's message, unless the error carries a status of its own
    (:class:`ConfigFilePath`'s)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as exc:
            if "exit_code" not in vars(exc):
                _exit_with(exc, PARSE_FAILED_STATUS)
            raise


class ConfigFilePath(click.Path):
    """``-c``'s type: an existing file, else click's message and :data:`FAILED_STATUS`, as BrokerStartup and
    NamesrvStartup open it with a FileInputStream whose FileNotFoundException their catch ends with
    ``System.exit(-1)``."""

    def __init__(self) -> None:
        super().__init__(exists=True, dir_okay=False)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            return super().convert(value, param, ctx)
        except click.BadParameter as exc:
            raise _exit_with(exc, FAILED_STATUS) from None


def start_failure(message: str, status: int) -> click.ClickException:
    """A usage error (click prints it with the usage line) that exits with ``status``: a setting refused before the
    start, with the status Java's start ends with."""
    return _exit_with(click.UsageError(message), status)


def settings_failure(exc: PropertiesError) -> click.ClickException:
    """:func:`start_failure` for the command line's or the ``-c`` file's settings: :data:`PARSE_FAILED_STATUS` for a
    token that is not ``--name`` (commons-cli's ParseException), else :data:`FAILED_STATUS` (a value the start cannot
    take, ``listenPort`` 70000: the exception Java's start ends with)."""
    return start_failure(str(exc), PARSE_FAILED_STATUS if isinstance(exc, CommandLineError) else FAILED_STATUS)
