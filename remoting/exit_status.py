"""The exit statuses of the server mains (``mqbroker``, ``mqnamesrv``) where their start fails, as Java's.

- :data:`REFUSED_STATUS` (253): BrokerStartup's ``System.exit(-3)``, a start refused by its checks or a failed
  ``initialize``;
- :data:`FAILED_STATUS` (255): ``System.exit(-1)``, the catch of every Throwable around BrokerStartup's and
  NamesrvStartup's start (a port that cannot be bound, a locked store, TLS files, a ``-c`` file that cannot be opened,
  a value the start cannot take);
- :data:`PARSE_FAILED_STATUS` (1): ServerUtil.parseCmdLine's ``System.exit(1)`` after commons-cli's ParseException
  (srvutil/src/main/java/org/apache/rocketmq/srvutil/ServerUtil.java); :class:`JavaStatusCommand` gives it to a
  command line click cannot parse (click's own status is 2).

Each failure keeps click's message; only the status changes. :class:`ConfigFilePath` and
:func:`config_file_properties` own the ``-c`` file: one it cannot read (a socket, a path under a regular file) ends
with one line naming it and the OS's reason, and :data:`FAILED_STATUS`, as FileInputStream's exception ends Java's.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Final

import click

from remoting.codec.java_properties import (
    CommandLineError,
    PropertiesError,
    decode_properties_file,
    parse_properties,
)

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
    """``-c``'s type: an existing file, else click's message (a missing file, a directory) or
    :func:`config_file_failure` (another reason the OS gives: a path under a regular file), and :data:`FAILED_STATUS`,
    as BrokerStartup and NamesrvStartup open it with a FileInputStream whose FileNotFoundException their catch ends
    with ``System.exit(-1)``."""

    def __init__(self) -> None:
        super().__init__(exists=True, dir_okay=False)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            os.stat(value)
        except FileNotFoundError:
            pass  # click's "does not exist"
        except OSError as exc:  # ENOTDIR, ELOOP, ENAMETOOLONG: click would say "does not exist" too
            raise config_file_failure(value, exc) from None
        try:
            return super().convert(value, param, ctx)
        except click.BadParameter as exc:
            raise _exit_with(exc, FAILED_STATUS) from None


def config_file_failure(path: str, exc: OSError) -> click.ClickException:
    """The one line (no usage) a ``-c`` file the OS refuses ends the start with: its path and the OS's reason, with
    :data:`FAILED_STATUS`."""
    return _exit_with(click.ClickException(f"cannot read the -c file {path}: {exc.strerror or exc}"), FAILED_STATUS)


def config_file_properties(config_file: str | None) -> dict[str, str]:
    """The ``-c`` file's properties (none without one), read as ``Properties.load(InputStream)`` reads it
    (ISO-8859-1); an OSError reading it (a socket, a device that fails) raises :func:`config_file_failure`, and one
    that does not load :class:`~remoting.codec.java_properties.PropertiesError`."""
    if not config_file:
        return {}
    try:
        raw = Path(config_file).read_bytes()
    except OSError as exc:
        raise config_file_failure(config_file, exc) from None
    return parse_properties(decode_properties_file(raw))


def start_failure(message: str, status: int) -> click.ClickException:
    """A usage error (click prints it with the usage line) that exits with ``status``: a setting refused before the
    start, with the status Java's start ends with."""
    return _exit_with(click.UsageError(message), status)


def settings_failure(exc: PropertiesError) -> click.ClickException:
    """:func:`start_failure` for the command line's or the ``-c`` file's settings: :data:`PARSE_FAILED_STATUS` for a
    token that is not ``--name`` (commons-cli's ParseException), else :data:`FAILED_STATUS` (a value the start cannot
    take, ``listenPort`` 70000: the exception Java's start ends with)."""
    return start_failure(str(exc), PARSE_FAILED_STATUS if isinstance(exc, CommandLineError) else FAILED_STATUS)
