"""``mqadmin``: RocketMQ 4.9.8's admin command line over :class:`client.admin.Admin`: every subcommand that needs no
replication parts, with RocketMQ's names, short and long options, required options and output (docs/mqadmin.md
lists them with their tests). ``-n`` falls back to ``NAMESRV_ADDR``; ``--json`` (before or after the command) prints
one JSON document instead of RocketMQ's text.

Requests are signed for a broker with ACL on when ``--accessKey`` / ``--secretKey`` are given before the command, or
else when ``$ROCKETMQ_HOME/conf/tools.yml`` holds ``accessKey`` and ``secretKey`` (RocketMQ's way); ``--tls`` (and
``--tlsCaFile`` to check the servers) connects with TLS.

    mqadmin updateTopic -n 127.0.0.1:9876 -t TopicTest -c DefaultCluster -r 4 -w 4
    NAMESRV_ADDR=127.0.0.1:9876 mqadmin consumerProgress -g my-group --json

As RocketMQ's ``MQAdminStartup``: commands are found by name or alias in any case (``QueryMsgTraceById``),
``mqadmin`` alone lists them, ``mqadmin help <command>`` shows one command's options, and an unknown command prints
``The sub command <name> not exist.`` (exit status 1 here). The commands live in modules by family:
:mod:`client.mqadmin_topics`, :mod:`client.mqadmin_groups`, :mod:`client.mqadmin_offsets`,
:mod:`client.mqadmin_cluster`, :mod:`client.mqadmin_namesrv`, :mod:`client.mqadmin_messages`,
:mod:`client.mqadmin_trace`, :mod:`client.mqadmin_stats`, :mod:`client.mqadmin_export` and
:mod:`client.mqadmin_acl`. A command that fails prints the error on stderr after Java's ``SubCommandException: <class>
command failed`` line (:data:`client.mqadmin_support.JAVA_FAILURES`) and exits with status 1; where Java goes
on past a broker that fails one step (its own try/catch), so does the command, saying it on stderr. Option values
are trimmed, as Java's ``getOptionValue(..).trim()`` (:func:`client.mqadmin_support.common`).
"""

from __future__ import annotations

import sys
from typing import Any

import click

from client.mqadmin_acl import COMMANDS as ACL_COMMANDS
from client.mqadmin_cluster import COMMANDS as CLUSTER_COMMANDS
from client.mqadmin_export import COMMANDS as EXPORT_COMMANDS
from client.mqadmin_groups import COMMANDS as GROUP_COMMANDS
from client.mqadmin_ha import COMMANDS as HA_COMMANDS
from client.mqadmin_messages import COMMANDS as MESSAGE_COMMANDS
from client.mqadmin_namesrv import COMMANDS as NAMESRV_COMMANDS
from client.mqadmin_offsets import COMMANDS as OFFSET_COMMANDS
from client.mqadmin_stats import COMMANDS as STATS_COMMANDS
from client.mqadmin_support import security_options
from client.mqadmin_topics import COMMANDS as TOPIC_COMMANDS
from client.mqadmin_trace import COMMANDS as TRACE_COMMANDS

#: Java's ``commandAlias`` values, lower-cased.
ALIASES = {"querymsgtracebyid": "queryMsgTraceById", "deleteaccessconfig": "deleteAclConfig"}


class MQAdminGroup(click.Group):
    """RocketMQ's command lookup and listing (see the module docstring)."""

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        wanted = ALIASES.get(name.lower(), name).lower()
        for command_name, command in self.commands.items():
            if command_name.lower() == wanted:
                return command
        return None

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        command = self.get_command(ctx, args[0])
        if command is None:
            click.echo(f"The sub command {args[0]} not exist.")
            ctx.exit(1)
        return command.name, command, args[1:]

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        lines = ["The most commonly used mqadmin commands are:"]
        for name in self.commands:
            if name == "help":
                continue
            lines.append(f"   {name:<20} {self.commands[name].get_short_help_str(limit=200)}")
        lines += ["", "See 'mqadmin help <command>' for more information on a specific command."]
        formatter.write("\n".join(lines) + "\n")


@click.group(cls=MQAdminGroup, context_settings={"help_option_names": ["-h", "--help"]}, invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="print JSON instead of RocketMQ's text")
@security_options
@click.pass_context
def main(ctx: click.Context, /, as_json: bool, **security: Any) -> None:
    """RocketMQ admin commands (rocketrio)."""
    ctx.ensure_object(dict)["json"] = as_json
    ctx.obj.update(security)
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())


@main.command("help")
@click.argument("command_name")
@click.pass_context
def help_command(ctx: click.Context, command_name: str) -> None:
    """Show one command's options."""
    group = ctx.parent.command if ctx.parent is not None else None
    command = group.get_command(ctx, command_name) if isinstance(group, click.Group) else None
    if command is None:
        click.echo(f"The sub command {command_name} not exist.")
        sys.exit(1)
    with click.Context(command, info_name=command.name, parent=ctx.parent) as sub:
        click.echo(command.get_help(sub))


_FAMILIES: tuple[tuple[Any, ...], ...] = (
    TOPIC_COMMANDS,
    GROUP_COMMANDS,
    OFFSET_COMMANDS,
    CLUSTER_COMMANDS,
    HA_COMMANDS,
    NAMESRV_COMMANDS,
    MESSAGE_COMMANDS,
    TRACE_COMMANDS,
    STATS_COMMANDS,
    EXPORT_COMMANDS,
    ACL_COMMANDS,
)
for _family in _FAMILIES:
    for _command in _family:
        main.add_command(_command)


if __name__ == "__main__":
    main()
