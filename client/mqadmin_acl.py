"""``mqadmin`` ACL commands of RocketMQ 4.9.8 with their options (``tools/src/main/java/org/apache/rocketmq/tools/
command/acl/``): ``updateAclConfig``, ``deleteAclConfig`` (alias ``deleteAccessConfig``, in
:data:`client.mqadmin.ALIASES`), ``updateGlobalWhiteAddr`` and ``clusterAclConfigVersion``. Each takes exactly one
of ``-b brokerAddr`` / ``-c clusterName``; with ``-c`` the edits go to every master and slave of the cluster, the
version report to its masters. :mod:`client.mqadmin` adds them to its command group; output and errors as in
:mod:`client.mqadmin`. The signing account (``--accessKey`` / ``--secretKey`` or ``$ROCKETMQ_HOME/conf/tools.yml``)
must be an admin on a rocketrio broker.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from client.acl_admin import acl_targets, acl_versions, delete_acl_config, update_acl_config, update_global_white
from client.admin import Admin
from client.mqadmin_support import Output, common, format_ts, run_job

__all__ = ["COMMANDS"]


def _targets(fn: Callable[..., Any]) -> Callable[..., Any]:
    fn = click.option("-c", "--clusterName", "cluster", help="every broker of this cluster")(fn)
    return click.option("-b", "--brokerAddr", "broker_addr", help="this broker")(fn)


def _one_target(o: dict[str, Any]) -> None:
    if bool(o["broker_addr"]) == bool(o["cluster"]):
        raise click.UsageError("give exactly one of -b brokerAddr and -c clusterName")


@click.command("updateAclConfig")
@common
@_targets
@click.option("-a", "--accessKey", "access_key", required=True)
@click.option("-s", "--secretKey", "secret_key", required=True)
@click.option("-w", "--whiteRemoteAddress", "white")
@click.option("-i", "--defaultTopicPerm", "topic_perm")
@click.option("-u", "--defaultGroupPerm", "group_perm")
@click.option("-t", "--topicPerms", "topic_perms", help="topicA=DENY,topicD=SUB")
@click.option("-g", "--groupPerms", "group_perms", help="groupD=DENY,groupD=SUB")
@click.option("-m", "--admin", "is_admin", type=bool, default=False)
def update_acl(ctx: click.Context, **o: Any) -> None:
    """Create or update an ACL account."""
    _one_target(o)

    async def job(admin: Admin, out: Output) -> None:
        addrs = await acl_targets(admin, o["broker_addr"], o["cluster"], slaves=True)
        for addr in addrs:
            await update_acl_config(
                admin,
                addr,
                o["access_key"],
                o["secret_key"],
                white_remote_address=o["white"],
                default_topic_perm=o["topic_perm"],
                default_group_perm=o["group_perm"],
                topic_perms=o["topic_perms"],
                group_perms=o["group_perms"],
                is_admin=o["is_admin"],
            )
        out.done(f"create or update plain access config to {', '.join(addrs)} success.", brokers=addrs)

    run_job(ctx, job)


@click.command("deleteAclConfig")
@common
@_targets
@click.option("-a", "--accessKey", "access_key", required=True)
def delete_acl(ctx: click.Context, **o: Any) -> None:
    """Delete an ACL account."""
    _one_target(o)

    async def job(admin: Admin, out: Output) -> None:
        addrs = await acl_targets(admin, o["broker_addr"], o["cluster"], slaves=True)
        for addr in addrs:
            await delete_acl_config(admin, addr, o["access_key"])
        out.done(f"delete plain access config from {', '.join(addrs)} success.", brokers=addrs)

    run_job(ctx, job)


@click.command("updateGlobalWhiteAddr")
@common
@_targets
@click.option("-g", "--globalWhiteRemoteAddresses", "addresses", required=True, help="comma list")
@click.option("-p", "--aclFileFullPath", "path", help="the ACL file to edit (default: plain_acl.yml)")
def update_white(ctx: click.Context, **o: Any) -> None:
    """Replace the global white list of an ACL file."""
    _one_target(o)

    async def job(admin: Admin, out: Output) -> None:
        addrs = await acl_targets(admin, o["broker_addr"], o["cluster"], slaves=True)
        for addr in addrs:
            await update_global_white(admin, addr, o["addresses"], o["path"])
        out.done(f"update global white remote addresses to {', '.join(addrs)} success.", brokers=addrs)

    run_job(ctx, job)


@click.command("clusterAclConfigVersion")
@common
@_targets
def acl_version(ctx: click.Context, **o: Any) -> None:
    """The ACL files' versions on each broker."""
    _one_target(o)

    async def job(admin: Admin, out: Output) -> None:
        rows = []
        for addr in await acl_targets(admin, o["broker_addr"], o["cluster"], slaves=False):
            info = await acl_versions(admin, addr)
            for path, version in sorted(info["allAclFileVersion"].items()):
                counter, stamp = version.get("counter", 0), version.get("timestamp", 0)
                rows.append(
                    [info["clusterName"], info["brokerName"], info["brokerAddr"], path, counter, format_ts(stamp)]
                )
        columns = [
            "Cluster Name",
            "Broker Name",
            "Broker Addr",
            "AclFilePath",
            "AclConfigVersionNum",
            "AclLastUpdateTime",
        ]
        out.table("ACL config versions", columns, rows)

    run_job(ctx, job)


COMMANDS = (update_acl, delete_acl, update_white, acl_version)
