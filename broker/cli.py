"""``mqbroker``: run a broker from the command line, like RocketMQ's ``bin/mqbroker``.

Options: ``-c FILE`` (a RocketMQ ``broker.conf`` properties file, read as ``java.util.Properties`` reads it:
ISO-8859-1 with ``\\uXXXX`` escapes), ``-n "addr[;addr]"`` (name servers, same as ``namesrvAddr``; each must be
``host:port``, as BrokerStartup checks), ``-p``/``-m`` (print every setting / the important ones as ``name=value``
lines and exit 0, BrokerStartup's ``printConfigItem``/``printImportantConfig``, with its role rules applied: a master's
``brokerId`` printed as 0, DLedger mode's as -1, a slave's 0 refused), and any property as ``--name value``
or ``--name=value`` (``--listenPort 0``, ``--storePathRootDir DIR``, ``--flushDiskType SYNC_FLUSH``, ``--brokerName
b``, ``--autoCreateTopicEnable true``).
Later sources win: defaults, then the file, then ``--name value`` properties, then ``-n``; without any of them the
``NAMESRV_ADDR`` environment variable names the name servers, as in Java.

When serving it prints Java's boot line with the real bound address, so scripts can wait for it::

    The broker[broker-a, 127.0.0.1:10911] boot success. serializeType=JSON and name server is 127.0.0.1:9876

(without a name server, the line ends at ``serializeType=JSON``, as Java's).

UPDATE_BROKER_CONFIG (``mqadmin updateBrokerConfig``) writes the properties it changes back into the ``-c`` file
(:mod:`broker.broker_conf_file`), so a restart keeps them.

SIGINT (Ctrl-C), SIGTERM and SIGHUP (the terminal closed) shut down cleanly (unregister from name servers, flush,
checkpoint, save config files; exit status 0), as BrokerStartup's JVM shutdown hook does, logging its lines (``Shutdown
hook was invoked, 1``, then ``Shutdown hook over, consuming total time(ms): T``); a signal the process started with
ignored (``nohup``) stays ignored, as the JVM leaves it (:mod:`remoting.server_main`); one before the start (the options
being read) ends the process of it, silently, one after the shutdown is dropped. ``--exit-with-stdin`` (used by
:mod:`broker.broker_process`) also shuts down so when stdin reaches end of file: the parent has gone.

A failed start exits with BrokerStartup's status (:mod:`remoting.exit_status`) and a message: 1 for a command line
that does not parse (an option without its value, ``-x``: ServerUtil.parseCmdLine's ``System.exit(1)``); 253 for what
BrokerStartup ends with ``System.exit(-3)`` (:data:`STARTUP_REFUSALS`): an illegal name server address, a slave's
brokerId of 0 or less, a config file and its .bak that do not load, a store that does not load; 255 for the rest, as
its catch's ``System.exit(-1)``: a ``-c`` file that is not there or cannot be read (one line naming it and the
OS's reason), a property value the start cannot take
(``listenPort`` outside 0..65535; a number Java cannot parse is only logged and skipped, as MixAll.properties2Object
does), a port that cannot be bound, a locked store, a TLS certificate, key or trust file that does not load, a period
of 0 or less. With ``--enable-proxy`` the proxy's own failures (a proxy setting that does not parse, a gRPC port or
certificate) exit 1, as 5.3.3's ``mqbroker --enable-proxy`` runs ProxyStartup, whose main ends them so.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import attrs
import click
import trio

from broker.broker_config import IMPORTANT_PROPERTIES, JAVA_PRINT_ORDER, BrokerConfig, SlaveIdError, checked_roles
from broker.context import check_enums
from broker.controller import BrokerController
from broker.security import client_use_tls
from proxy.config import PROXY_KEYS, ProxyConfig, proxy_config_from
from proxy.errors import ProxyStartError
from remoting.codec.java_properties import (
    PropertiesError,
    config_from_properties,
    in_print_order,
    parse_property_args,
    property_texts,
)
from remoting.connection import Address
from remoting.exit_status import (
    FAILED_STATUS,
    REFUSED_STATUS,
    ConfigFilePath,
    JavaStatusCommand,
    config_file_properties,
    settings_failure,
    start_failure,
)
from remoting.server_main import (
    BROKER_HOOK_LINES,
    ShutdownHookLog,
    open_stop_signal_receiver,
    run_main,
    stop_at_signal,
    take_stop_signals,
)
from store.errors import StoreCorruptError, StoreError
from store.metadata_files import ConfigFileError
from store.store_config import DelayLevelError

log = logging.getLogger("broker")

#: What a broker's start can fail with, reported as one line: a port that cannot be bound, a locked or corrupt store,
#: a setting the store refuses, TLS files that do not load (``remoting.tls.TlsContextError``).
STARTUP_FAILURES = (OSError, StoreError, ValueError)
#: Those of them BrokerStartup ends with ``System.exit(-3)``, status 253 (:data:`REFUSED_STATUS`): a slave's brokerId
#: of 0 or less, and ``BrokerController.initialize`` returning false, as it does for a config file and its .bak that
#: do not load (ConfigManager.load), a store that does not load (a segment of the wrong size, a bad messageDelayLevel).
STARTUP_REFUSALS = (SlaveIdError, ConfigFileError, StoreCorruptError, DelayLevelError)
#: The others end with ``System.exit(-1)``, status 255 (:data:`~remoting.server_main.FAILED_STATUS`), but for the
#: proxy's (``--enable-proxy``: its settings, :class:`~proxy.errors.ProxyStartError`), which 5.3.3's mqbroker leaves to
#: ProxyStartup.main: ``System.exit(1)``.
PROXY_FAILED_STATUS = 1


class IllegalNamesrvAddrError(PropertiesError):
    """A ``namesrvAddr`` entry is not ``host:port``: BrokerStartup refuses the start (``System.exit(-3)``)."""


def check_namesrv_addr(namesrv_addr: str) -> None:
    """BrokerStartup's check: each ``;``-separated entry is ``host:port`` (``RemotingUtil.string2SocketAddress``)."""
    entries = namesrv_addr.rstrip(";")  # Java's String.split drops trailing empty entries
    for addr in entries.split(";") if entries else []:
        _, colon, port = addr.strip(" \t").rpartition(":")  # ours: blanks around an entry are ignored
        if not colon or not port.isascii() or not port.isdigit() or int(port) > 65535:
            raise IllegalNamesrvAddrError(
                f"The Name Server Address[{namesrv_addr}] illegal, please set it as follows,"
                ' "127.0.0.1:9876;192.168.0.1:9876"'
            )


def build_config(config_file: str | None, extra: list[str], namesrv_addr: str | None) -> BrokerConfig:
    """The effective config; unknown property names are reported on stderr, not fatal (as Java does)."""
    props = config_file_properties(config_file)
    props.update(parse_property_args(extra))
    config, unknown = config_from_properties(BrokerConfig, props)
    for key in unknown:  # a proxy setting's value is the proxy's to refuse (build_proxy_config), when it runs
        if key not in PROXY_KEYS:
            click.echo(f"mqbroker: ignoring unknown property {key!r}", err=True)
    if config.duplication_enable:
        click.echo("mqbroker: duplicationEnable=true is not supported, ignored", err=True)
    if namesrv_addr is None and "namesrvAddr" not in props:
        # Java's BrokerConfig defaults namesrvAddr to the NAMESRV_ADDR environment variable; a namesrvAddr the file
        # or a property sets, even empty, replaces it (MixAll.properties2Object sets every key present, and
        # broker/src/main/java/org/apache/rocketmq/broker/BrokerStartup.java of 5.3.3 then runs without name servers).
        namesrv_addr = os.environ.get("NAMESRV_ADDR")
    if namesrv_addr is not None:
        config = attrs.evolve(config, namesrv_addr=namesrv_addr)
    check_enums(config)
    check_namesrv_addr(config.namesrv_addr)
    return config


def printed_config(config: BrokerConfig) -> BrokerConfig:
    """The settings ``-p``/``-m`` print: after BrokerStartup's role rules (broker/src/main/java/org/apache/rocketmq/
    broker/BrokerStartup.java), a master's brokerId 0, DLedger mode's -1 (its role handler picks the id it registers
    with); raises ``ValueError`` for a slave's brokerId of 0 or less, which the start refuses too. The HA address is
    the one the broker registers: brokerIP2 defaults to the local address as brokerIP1 does (common/src/main/java/org/
    apache/rocketmq/common/BrokerConfig.java; ours: brokerIP1's value), and BrokerStartup sets haListenPort to
    listenPort + 1 before printing (ours keeps a configured one, as 5.x's BrokerStartup does)."""
    config = checked_roles(config)
    config = attrs.evolve(config, broker_ip2=config.broker_ip2 or config.broker_ip1, ha_listen_port=config.ha_bind_port)
    config = attrs.evolve(config, use_tls=client_use_tls(config))  # BrokerStartup's default unless the file sets it
    return attrs.evolve(config, broker_id=-1) if config.enable_dleger_commit_log else config


def config_lines(config: BrokerConfig, important_only: bool) -> list[str]:
    """``name=value`` per setting, as ``mqbroker -p`` (``-m``: only Java's ``@ImportantField`` ones) prints them: in
    :data:`~broker.broker_config.JAVA_PRINT_ORDER`, then the settings of ours Java lacks."""
    texts = in_print_order(property_texts(config), JAVA_PRINT_ORDER)
    return [f"{key}={text}" for key, text in texts if not important_only or key in IMPORTANT_PROPERTIES]


def boot_line(config: BrokerConfig, address: Address) -> str:
    """BrokerStartup.start's line: the name servers are named only when some are set (Java's ``namesrvAddr`` is
    null otherwise)."""
    host, port = address
    line = f"The broker[{config.broker_name}, {host}:{port}] boot success. serializeType=JSON"
    return f"{line} and name server is {config.namesrv_addr}" if config.namesrv_addr else line


def build_proxy_config(config_file: str | None, extra: list[str], enable: bool) -> ProxyConfig:
    """The 5.x front door's settings from the same sources as the broker's (docs/grpc.md#settings). The proxy runs
    with ``enable`` (``--enable-proxy``) or ``enableProxy=true`` among them; else the defaults, nothing else read, as
    no proxy runs (RocketMQ's broker never reads the proxy's settings, so one that does not parse stops only a start
    that runs the proxy: proxy/src/main/java/org/apache/rocketmq/proxy/config/Configuration.java). ``enableProxy``
    itself is read as the proxy reads it (a value other than true/false refused): it decides whether the proxy runs."""
    props = config_file_properties(config_file)
    props.update(parse_property_args(extra))
    return proxy_config_of(props, enable)


def proxy_config_of(props: dict[str, str], enable: bool) -> ProxyConfig:
    """:func:`build_proxy_config` from properties already read (``python -m broker.embedded`` shares it, so both
    starts run the proxy for the same options)."""
    switch = {key: props[key] for key in ("enableProxy",) if key in props}
    if not enable and not proxy_config_from(switch)[0].enable_proxy:
        return ProxyConfig()
    proxy_config, _ = proxy_config_from(props, enable)
    return proxy_config


def proxy_boot_line(grpc_port: int, tls_port: int) -> str:
    """The line the 5.x front door prints once it serves (``tls_port`` 0: none)."""
    return f"The proxy[grpcServerPort={grpc_port}, tlsPort={tls_port}] boot success."


async def stop_at_stdin_eof(scope: trio.CancelScope) -> None:
    """Cancel ``scope`` (the broker's) once stdin reaches end of file (its writer, the parent process, has gone)."""
    stdin = trio.lowlevel.FdStream(os.dup(0))
    async with stdin:
        while await stdin.receive_some():
            pass
    log.info("stdin closed: the parent process has gone, shutting down")
    scope.cancel()


async def run(
    config: BrokerConfig,
    config_path: Path | None = None,
    proxy: ProxyConfig | None = None,
    exit_with_stdin: bool = False,
) -> None:
    """Serve until a stop signal (:func:`~remoting.server_main.open_stop_signal_receiver`; one during the start stops
    it before its boot line) or, with ``exit_with_stdin``, stdin's end, then shut down by cancelling the nursery.
    ``config_path`` is the ``-c`` file, where UPDATE_BROKER_CONFIG persists changed properties; ``proxy`` (when
    enabled) starts the gRPC endpoint too."""
    controller = BrokerController(config, config_path=config_path)
    hook = ShutdownHookLog(log, BROKER_HOOK_LINES)
    with open_stop_signal_receiver() as signals:
        async with trio.open_nursery() as nursery:
            # Watched from the start on: BrokerStartup adds its shutdown hook before BrokerController.start, so a
            # signal during the start stops the broker then, without its boot line.
            nursery.start_soon(stop_at_signal, signals, hook, nursery.cancel_scope.cancel)
            if exit_with_stdin:
                nursery.start_soon(stop_at_stdin_eof, nursery.cancel_scope)
            address = await nursery.start(controller.serve)
            if proxy is not None and proxy.enable_proxy:
                from proxy.startup import serve_proxy  # loads grpcio and the generated code only when asked to

                grpc_port, tls_port = await nursery.start(serve_proxy, controller, proxy)
                print(proxy_boot_line(grpc_port, tls_port), flush=True)
            print(boot_line(config, address), flush=True)
    hook.over()
    print(f"The broker[{config.broker_name}] shutdown.", flush=True)


@click.command(
    cls=JavaStatusCommand,
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": ["-h", "--help"]},
)
@click.option("-c", "--configFile", "config_file", type=ConfigFilePath(), help="RocketMQ broker.conf file.")
@click.option("-n", "--namesrv-addr", "namesrv_addr", default=None, help="Name servers, 'host:port[;host:port]'.")
@click.option("--enable-proxy", "enable_proxy", is_flag=True, help="Also serve RocketMQ 5 gRPC clients (local proxy).")
@click.option("-p", "--printConfigItem", "print_all", is_flag=True, help="Print every setting and exit.")
@click.option("-m", "--printImportantConfig", "print_important", is_flag=True, help="Print the important settings.")
@click.option("--exit-with-stdin", is_flag=True, hidden=True, help="Shut down cleanly at stdin's end of file.")
@click.pass_context
def main(
    ctx: click.Context,
    config_file: str | None,
    namesrv_addr: str | None,
    enable_proxy: bool = False,
    print_all: bool = False,
    print_important: bool = False,
    exit_with_stdin: bool = False,
) -> None:
    """Start a RocketMQ 4.x-compatible broker. Extra ``--name value`` pairs set properties."""
    take_stop_signals()  # a stop signal before the start ends the process of it, as a JVM before its hook
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    try:
        config = build_config(config_file, list(ctx.args), namesrv_addr)
    except IllegalNamesrvAddrError as exc:  # BrokerStartup prints it and calls System.exit(-3)
        click.echo(str(exc), err=True)
        sys.exit(REFUSED_STATUS)
    except PropertiesError as exc:
        raise settings_failure(exc) from None
    try:
        proxy = build_proxy_config(config_file, list(ctx.args), enable_proxy)
    except PropertiesError as exc:  # ProxyStartup's configuration fails: System.exit(1)
        raise start_failure(str(exc), PROXY_FAILED_STATUS) from None
    if print_all or print_important:
        try:
            shown = printed_config(config)
        except ValueError as exc:  # as the start reports it (run_main's status)
            click.echo(f"mqbroker: cannot start broker {config.broker_name}: {exc}", err=True)
            sys.exit(REFUSED_STATUS if isinstance(exc, STARTUP_REFUSALS) else FAILED_STATUS)
        click.echo("\n".join(config_lines(shown, important_only=not print_all)))
        return
    run_main(
        run,
        config,
        Path(config_file) if config_file else None,
        proxy,
        exit_with_stdin,
        failures=STARTUP_FAILURES,
        describe=lambda failure: f"mqbroker: cannot start broker {config.broker_name}: {failure}",
        statuses=((STARTUP_REFUSALS, REFUSED_STATUS), (ProxyStartError, PROXY_FAILED_STATUS)),
        status=FAILED_STATUS,
    )


if __name__ == "__main__":
    main()
