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

from client.acl_admin import acl_versions, delete_acl_config, update_acl_config, update_global_white
from client.admin import Admin
from client.mqadmin_support import (
    Output,
    cluster_addrs,
    cluster_masters,
    common,
    format_date,
    java_bool,
    java_hash_set,
    run_job,
)
from remoting.codec.message_properties import java_hash

__all__ = ["COMMANDS"]


def _targets(fn: Callable[..., Any]) -> Callable[..., Any]:
    fn = click.option("-c", "--clusterName", "cluster", help="every broker of this cluster")(fn)
    return click.option("-b", "--brokerAddr", "broker_addr", help="this broker")(fn)


_VERSION_ROW = "%-16s  %-22s  %-22s  %-20s  %-22s  %-22s%n"
_VERSION_COLUMNS = (
    "#Cluster Name",
    "#Broker Name",
    "#Broker Addr",
    "#AclFilePath",
    "#AclConfigVersionNum",
    "#AclLastUpdateTime",
)


def _version_order(paths: list[str]) -> list[str]:
    """The ACL files of code 52's ``allAclFileVersion`` (``paths`` in the JSON's order) as 4.9.8 lists them:
    ``MQClientAPIImpl.getBrokerClusterAclInfo`` parses them into a ``HashMap`` and copies that into ``new
    HashMap<>(size, 1)`` (``tableSizeFor(size)`` buckets, never resized below nine keys a bucket), whose iteration
    ``ClusterAclConfigVersionListSubCommand`` prints: by bucket, a bucket in the order put."""
    parsed = java_hash_set(paths)
    buckets = (1 << (len(parsed) - 1).bit_length()) - 1 if parsed else 0

    def bucket(path: str) -> int:
        h = java_hash(path) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & buckets

    return sorted(parsed, key=bucket)  # stable: a bucket keeps the parsed map's order


def _finish(out: Output, addrs: list[str]) -> None:
    """The JSON document's fields of an edit: ``ok`` and the brokers it reached."""
    out.field("ok", True)
    out.field("brokers", addrs)


async def _brokers(admin: Admin, out: Output, o: dict[str, Any], *, slaves: bool) -> list[str]:
    """``-b`` alone, else the ``-c`` cluster's masters and, with ``slaves``, slaves in the order of the ``HashSet``
    4.9.8's ``CommandUtil.fetchMasterAndSlaveAddrByClusterName`` (the edits) or ``fetchMasterAddrByClusterName``
    (the version report) collects them in (tools/src/main/java/org/apache/rocketmq/tools/command/CommandUtil.java),
    with its ``[error]`` line for a cluster the name server does not know."""
    if o["broker_addr"]:
        return [o["broker_addr"]]
    return await (cluster_addrs if slaves else cluster_masters)(admin, out, o["cluster"])


def _one_target(o: dict[str, Any]) -> None:
    """Exactly one of ``-b`` / ``-c`` (the values come trimmed as Java's ``getOptionValue(..).trim()``, by
    :func:`client.mqadmin_support.common`)."""
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
@click.option("-m", "--admin", "is_admin", help="true makes an admin (Boolean.parseBoolean: anything else is false)")
def update_acl(ctx: click.Context, **o: Any) -> None:
    """Create or update an ACL account."""
    _one_target(o)

    async def job(admin: Admin, out: Output) -> None:
        addrs = await _brokers(admin, out, o, slaves=True)
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
                is_admin=java_bool(o["is_admin"]),  # UpdateAccessConfigSubCommand: parseBoolean
            )
            out.line("create or update plain access config to %s success.%n", addr)
        # Java then prints the PlainAccessConfig object itself, which has no toString in 4.9.8 (an identity hash).
        _finish(out, addrs)

    run_job(ctx, job)


@click.command("deleteAclConfig")
@common
@_targets
@click.option("-a", "--accessKey", "access_key", required=True)
def delete_acl(ctx: click.Context, **o: Any) -> None:
    """Delete an ACL account."""
    _one_target(o)

    async def job(admin: Admin, out: Output) -> None:
        addrs = await _brokers(admin, out, o, slaves=True)
        for addr in addrs:
            await delete_acl_config(admin, addr, o["access_key"])
            out.line("delete plain access config account from %s success.%n", addr)
        out.line("account's accesskey is:%s", o["access_key"])  # no line end, as Java's
        _finish(out, addrs)

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
        addrs = await _brokers(admin, out, o, slaves=True)
        for addr in addrs:
            await update_global_white(admin, addr, o["addresses"], o["path"])
            out.line("update global white remote addresses to %s success.%n", addr)
        _finish(out, addrs)

    run_job(ctx, job)


@click.command("clusterAclConfigVersion")
@common
@_targets
def acl_version(ctx: click.Context, **o: Any) -> None:
    """The ACL files' versions on each broker."""
    _one_target(o)

    async def job(admin: Admin, out: Output) -> None:
        # ClusterAclConfigVersionListSubCommand: the masters read first, then the header line with -c only, one row
        # per broker and ACL file.
        addrs = await _brokers(admin, out, o, slaves=False)
        out.header(_VERSION_ROW if o["cluster"] else "", *_VERSION_COLUMNS)
        for addr in addrs:
            info = await acl_versions(admin, addr)
            versions = info["allAclFileVersion"]
            for path in _version_order(list(versions)):
                version = versions[path]
                counter, stamp = version.get("counter", 0), version.get("timestamp", 0)
                out.row(
                    _VERSION_ROW, info["clusterName"], info["brokerName"], info["brokerAddr"], path, counter,
                    format_date(stamp),
                )  # fmt: skip
        out.line("get %s's plain access config version success.%n", "cluster" if o["cluster"] else "broker")

    run_job(ctx, job)


COMMANDS = (update_acl, delete_acl, update_white, acl_version)
