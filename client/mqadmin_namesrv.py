"""``mqadmin`` name-server commands, as RocketMQ 4.9.8's ``tools/src/main/java/org/apache/rocketmq/tools/command/
namesrv/``: ``updateKvConfig``, ``deleteKvConfig``, ``wipeWritePerm``, ``addWritePerm``, ``getNamesrvConfig`` and
``updateNamesrvConfig``. KV and settings changes go to every name server of ``-n``, as Java's admin sends them.
Options, required options and printed lines are Java's; :mod:`client.mqadmin` registers them.
"""

from __future__ import annotations

from typing import Any

import click

from client.admin import Admin
from client.mqadmin_support import (
    Output,
    common,
    java_hash_set,
    java_properties_order,
    printf,
    run_job,
    split_addrs,
)

__all__ = ["COMMANDS"]


@click.command("updateKvConfig", help="Create or update KV config.")
@common
@click.option("-s", "--namespace", required=True, help="set the namespace")
@click.option("-k", "--key", required=True, help="set the key name")
@click.option("-v", "--value", required=True, help="set the key value")
def update_kv_config(ctx: click.Context, **o: Any) -> None:
    async def job(admin: Admin, out: Output) -> None:
        await admin.put_kv_config(o["namespace"], o["key"], o["value"])
        out.line("create or update kv config to namespace success.%n")
        out.field("ok", True)

    run_job(ctx, job)


@click.command("deleteKvConfig", help="Delete KV config.")
@common
@click.option("-s", "--namespace", required=True, help="set the namespace")
@click.option("-k", "--key", required=True, help="set the key name")
def delete_kv_config(ctx: click.Context, **o: Any) -> None:
    async def job(admin: Admin, out: Output) -> None:
        await admin.delete_kv_config(o["namespace"], o["key"])
        out.line("delete kv config from namespace success.%n")
        out.field("ok", True)

    run_job(ctx, job)


def _perm_command(name: str, verb: str, help_text: str) -> click.Command:
    """``wipeWritePerm`` / ``addWritePerm``: one request per name server, each reported (Java's loop)."""

    @click.command(name, help=help_text)
    @common
    @click.option("-b", "--brokerName", "broker", required=True, help="broker name")
    def command(ctx: click.Context, **o: Any) -> None:
        async def job(admin: Admin, out: Output) -> None:
            broker = o["broker"]
            change = admin.wipe_write_perm if verb == "wipe" else admin.add_write_perm
            for addr in admin.namesrv_addrs:
                try:
                    count = await change(addr, broker)
                except Exception:
                    out.entry(f"{verb} write perm of broker[{broker}] in name server[{addr}] Failed\n",
                              namesrv=addr, ok=False)  # fmt: skip
                    continue
                text = printf("%s write perm of broker[%s] in name server[%s] OK, %d%n", verb, broker, addr, count)
                out.entry(text, namesrv=addr, ok=True, topics=count)

        run_job(ctx, job)

    return command


wipe_write_perm = _perm_command("wipeWritePerm", "wipe", "Wipe write perm of broker in all name server")
add_write_perm = _perm_command("addWritePerm", "add", "Add write perm of broker in all name server")


@click.command("getNamesrvConfig", help="Get configs of name server.")
@common
def get_namesrv_config(ctx: click.Context, **o: Any) -> None:
    async def job(admin: Admin, out: Output) -> None:
        configs = await admin.namesrv_config(list(split_addrs(o["namesrv"])))
        # Java prints MQClientAPIImpl.getNameServerConfig's HashMap<>(4) keyed by address, each value the Properties
        # MixAll.string2Properties loaded, in their own orders (client/src/main/java/org/apache/rocketmq/client/impl/
        # MQClientAPIImpl.java, tools/src/main/java/org/apache/rocketmq/tools/command/namesrv/
        # GetNamesrvConfigCommand.java).
        for addr in java_hash_set(list(configs), capacity=4):
            props = configs[addr]
            out.line("============%s============\n", addr)
            for key in java_properties_order(list(props)):
                value = props[key]
                out.entry(printf("%-50s=  %s\n", key, value), namesrv=addr, key=key, value=value)

    run_job(ctx, job)


@click.command("updateNamesrvConfig", help="Update configs of name server.")
@common
@click.option("-k", "--key", required=True, help="config key")
@click.option("-v", "--value", required=True, help="config value")
def update_namesrv_config(ctx: click.Context, **o: Any) -> None:
    async def job(admin: Admin, out: Output) -> None:
        key, value = o["key"].strip(), o["value"].strip()  # Java trims both
        servers = list(split_addrs(o["namesrv"]))
        await admin.update_namesrv_config({key: value}, servers)
        # Java prints the list only when -n named it; NAMESRV_ADDR reaches the client's own config instead.
        named = ctx.get_parameter_source("namesrv") is not click.core.ParameterSource.ENVIRONMENT
        shown = "[" + ", ".join(servers) + "]" if named else ""
        out.line("update name server config success!%s\n%s : %s\n", shown, key, value)
        out.field("ok", True)

    run_job(ctx, job)


#: The commands :mod:`client.mqadmin` registers.
COMMANDS = (
    update_kv_config,
    delete_kv_config,
    wipe_write_perm,
    add_write_perm,
    get_namesrv_config,
    update_namesrv_config,
)
