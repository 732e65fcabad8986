"""``mqnamesrv``: run a name server from the command line, like RocketMQ's ``bin/mqnamesrv``.

Options, as NamesrvStartup's: ``-c/--configFile FILE`` (a RocketMQ properties file: ``listenPort``,
``kvConfigPath``, ``rocketmqHome``, ``orderMessageEnable``, ``serverWorkerThreads`` ...; read as
``java.util.Properties`` reads it, ISO-8859-1 with ``\\uXXXX`` escapes, and where UPDATE_NAMESRV_CONFIG writes every
setting back, as NamesrvStartup sets ``configStorePath`` to it), ``-p/--printConfigItem`` (print every setting and
exit), ``-n`` (accepted, unused), and any property as ``--name value`` or ``--name=value`` (``--listenPort 0``,
default 9876; ``--kvConfigPath /tmp/kv.json``). Later sources win: defaults, then the file, then ``--name value``
properties.

With ``-c`` it first prints Java's ``load config properties file OK, FILE``. When listening it prints Java's boot
line with the bound address, so scripts can wait for it::

    The Name Server boot success. serializeType=JSON, address 127.0.0.1:9876

SIGINT (Ctrl-C), SIGTERM and SIGHUP (the terminal closed) stop it cleanly (connections closed, exit status 0;
ShutdownHookThread's ``shutdown hook was invoked, 1 times.`` and ``shutdown hook done, consuming time total(ms): T``
logged), each unless the process started with it ignored (``nohup``), as a JVM does (:mod:`remoting.server_main`); one
during the start stops it then, without the boot line; one before it (the options being read) ends the process of it,
silently, one after the shutdown is dropped. A command line that does not parse (an option without its value, ``-x``)
exits with status 1, ServerUtil.parseCmdLine's; a ``-c`` file that is not there or cannot be read (one line naming
it and the OS's reason), a property value the start cannot
take (``listenPort`` outside 0..65535), a port that cannot be bound, a corrupt ``kvConfig.json`` or a TLS certificate,
key or trust file that does not load exit with 255, NamesrvStartup.main0's ``System.exit(-1)``
(:mod:`remoting.exit_status`); each with a message.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Final

import attrs
import click
import trio

from namesrv.config import NamesrvConfig
from namesrv.server import NamesrvServer
from remoting.codec.java_properties import (
    PropertiesError,
    apply_properties,
    in_print_order,
    parse_property_args,
    property_texts,
)
from remoting.connection import Address
from remoting.exit_status import (
    FAILED_STATUS,
    ConfigFilePath,
    JavaStatusCommand,
    config_file_properties,
    settings_failure,
)
from remoting.server import NETTY_SERVER_CONFIG_ORDER
from remoting.server_main import (
    NAMESRV_HOOK_LINES,
    ShutdownHookLog,
    open_stop_signal_receiver,
    run_main,
    stop_at_signal,
    take_stop_signals,
)
from remoting.tls import TlsContextError
from store.metadata_files import ConfigFileError

log = logging.getLogger("namesrv")

#: The order ``-p`` prints settings in: NamesrvStartup prints NamesrvConfig's declared fields, then
#: NettyServerConfig's (namesrv/src/main/java/org/apache/rocketmq/namesrv/NamesrvStartup.java, RocketMQ 4.9.8);
#: our own settings follow.
PRINT_ORDER: Final = (
    "rocketmqHome", "kvConfigPath", "configStorePath", "productEnvName", "clusterTest", "orderMessageEnable",
    "configBlackList", *NETTY_SERVER_CONFIG_ORDER,
)  # fmt: skip

_WILDCARDS = frozenset({"0.0.0.0", "::", ""})


def build_config(config_file: str | None, extra: list[str]) -> NamesrvConfig:
    """The effective config; unknown property names are reported on stderr, not fatal (as Java does)."""
    props = config_file_properties(config_file)
    props.update(parse_property_args(extra))
    config, unknown = apply_properties(NamesrvConfig(), props)
    for key in unknown:
        click.echo(f"mqnamesrv: ignoring unknown property {key!r}", err=True)
    if config_file:
        # NamesrvStartup.java: namesrvConfig.setConfigStorePath(file), so UPDATE_NAMESRV_CONFIG persists there.
        config = attrs.evolve(config, config_store_path=config_file)
    return config


def boot_line(address: Address) -> str:
    host, port = address
    shown = "127.0.0.1" if host in _WILDCARDS else host
    return f"The Name Server boot success. serializeType=JSON, address {shown}:{port}"


async def run(config: NamesrvConfig, config_file: Path | None = None) -> None:
    """Serve until a stop signal (:func:`~remoting.server_main.open_stop_signal_receiver`; one during the start stops
    it before its boot line), then shut down by cancelling the nursery. ``config_file``: the ``-c`` file, if any."""
    server = NamesrvServer(config, config_file)
    hook = ShutdownHookLog(log, NAMESRV_HOOK_LINES)
    with open_stop_signal_receiver() as signals:
        async with trio.open_nursery() as nursery:
            # Watched from the start on: NamesrvStartup adds its shutdown hook before NamesrvController.start.
            nursery.start_soon(stop_at_signal, signals, hook, nursery.cancel_scope.cancel)
            address = await nursery.start(server.serve)
            print(boot_line(address), flush=True)
    hook.over()
    print("The Name Server shutdown.", flush=True)


@click.command(
    cls=JavaStatusCommand,
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": ["-h", "--help"]},
)
@click.option("-c", "--configFile", "config_file", type=ConfigFilePath(), help="RocketMQ properties file.")
@click.option("-p", "--printConfigItem", "print_all", is_flag=True, help="Print every setting and exit.")
@click.option("-n", "--namesrvAddr", "namesrv_addr", default=None, help="Accepted and ignored, as by NamesrvStartup.")
@click.option("--listen-port", "listen_port", default=None, hidden=True, help="Old spelling of --listenPort.")
@click.pass_context
def main(
    ctx: click.Context, config_file: str | None, print_all: bool, namesrv_addr: str | None, listen_port: str | None
) -> None:
    """Start a RocketMQ 4.x-compatible name server (``--listenPort``, default 9876, and other ``--name value`` pairs
    set properties), or with ``-p`` print every setting and exit, as NamesrvStartup."""
    take_stop_signals()  # a stop signal before the start ends the process of it, as a JVM before its hook
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    try:
        port = [] if listen_port is None else ["--listenPort", listen_port]
        config = build_config(config_file, list(ctx.args) + port)
    except PropertiesError as exc:
        raise settings_failure(exc) from None
    if config_file:
        click.echo(f"load config properties file OK, {config_file}")  # NamesrvStartup, before -p and the start
    if print_all:
        click.echo("\n".join(f"{key}={text}" for key, text in in_print_order(property_texts(config), PRINT_ORDER)))
        return

    def describe(failure: OSError | ConfigFileError | TlsContextError) -> str:
        if isinstance(failure, OSError):
            return f"mqnamesrv: cannot listen on {config.listen_host}:{config.listen_port}: {failure}"
        return f"mqnamesrv: {failure}"

    # NamesrvStartup: registerConfig(properties), every key of the -c file, those no setting has too.
    c_file = Path(config_file) if config_file else None
    failures = (OSError, ConfigFileError, TlsContextError)
    run_main(run, config, c_file, failures=failures, describe=describe, status=FAILED_STATUS)


if __name__ == "__main__":
    main()
