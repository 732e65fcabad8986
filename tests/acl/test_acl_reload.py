"""Hot reload of the ACL files under a running broker, in virtual time: new rules hold within the 5 s watch period,
a malformed file keeps the old rules and says why, files added and removed under conf/acl count."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
import trio
import trio.testing

from broker.acl.manager import AclDenied, AclFiles, AclManager
from broker.acl.watcher import WATCH_INTERVAL
from broker.embedded import EmbeddedCluster
from remoting.client import RemotingClient
from remoting.codec.acl_signing import SessionCredentials, sign
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand, request
from tests.acl.conftest import PLAIN_ACL

USER = SessionCredentials("RocketMQ", "12345678")


async def _refused(client: RemotingClient, cluster: EmbeddedCluster, creds: SessionCredentials, topic: str) -> bool:
    """Whether a pull of ``topic`` as groupB (needs SUB on both) is refused by the ACL."""
    fields = {
        "consumerGroup": "groupB",
        "topic": topic,
        "queueId": "0",
        "queueOffset": "0",
        "maxMsgNums": "1",
        "sysFlag": "0",
        "commitOffset": "0",
        "suspendTimeoutMillis": "0",
        "subscription": "*",
        "subVersion": "0",
    }
    answer: RemotingCommand = await client.invoke(cluster.broker_addr, sign(request(11, fields), creds), 5)
    return answer.code == ResponseCode.SYSTEM_ERROR and "AclException" in (answer.remark or "")


async def test_an_edited_file_applies_within_the_watch_period_and_a_malformed_one_keeps_the_old_rules(
    acl_cluster: EmbeddedCluster,
    acl_home: Path,
    autojump_clock: trio.testing.MockClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    acl_file = acl_home / "conf" / "plain_acl.yml"
    async with RemotingClient() as client:
        assert await _refused(client, acl_cluster, USER, "topicA")
        acl_file.write_text(PLAIN_ACL.replace("topicA=DENY", "topicA=SUB"))
        await trio.sleep(WATCH_INTERVAL + 0.5)
        assert not await _refused(client, acl_cluster, USER, "topicA")

        caplog.set_level(logging.ERROR, logger="broker.acl.manager")
        acl_file.write_text(PLAIN_ACL.replace("topicA=DENY", "topicA=PUB=SUB"))  # unparsable entry
        await trio.sleep(WATCH_INTERVAL + 0.5)
        assert not await _refused(client, acl_cluster, USER, "topicA")  # the previous good rules still hold
        assert any("Parse resource permission failed for topic:topicA=PUB=SUB" in r.message for r in caplog.records)
        assert any("keeping its previous rules" in r.message for r in caplog.records)

        acl_file.write_text("accounts: [\n")  # not YAML at all
        await trio.sleep(WATCH_INTERVAL + 0.5)
        assert not await _refused(client, acl_cluster, USER, "topicA")

        acl_file.write_text(PLAIN_ACL)  # fixed again: the file's own rules are back
        await trio.sleep(WATCH_INTERVAL + 0.5)
        assert await _refused(client, acl_cluster, USER, "topicA")


async def test_files_added_and_removed_under_conf_acl_are_picked_up(
    acl_cluster: EmbeddedCluster, acl_home: Path, autojump_clock: trio.testing.MockClock
) -> None:
    team = SessionCredentials("team-account", "team-secret")
    extra = acl_home / "conf" / "acl" / "team.yml"
    async with RemotingClient() as client:
        assert await _refused(client, acl_cluster, team, "topicB")
        extra.parent.mkdir(parents=True)
        extra.write_text(
            "accounts:\n  - {accessKey: team-account, secretKey: team-secret,"
            " defaultTopicPerm: SUB, defaultGroupPerm: SUB}\n"
        )
        await trio.sleep(WATCH_INTERVAL + 0.5)
        assert not await _refused(client, acl_cluster, team, "topicB")
        extra.unlink()
        await trio.sleep(WATCH_INTERVAL + 0.5)
        assert await _refused(client, acl_cluster, team, "topicB")


def test_a_rewrite_keeping_the_modification_time_is_applied(tmp_path: Path) -> None:
    """A file replaced with its old timestamp kept (``cp -p``, ``rsync -t``, ``tar x``, or two writes within one
    tick of a coarse clock) has another size or inode: the revoked grant goes."""
    grant = "accounts:\n  - accessKey: producer1\n    secretKey: '12345678'\n    topicPerms:\n      - orders=PUB\n"
    acl = tmp_path / "conf" / "plain_acl.yml"
    acl.parent.mkdir()
    acl.write_text(grant)
    manager = AclManager(AclFiles(tmp_path))
    manager.load()
    creds = SessionCredentials("producer1", "12345678")
    manager.validate("10.0.0.9", sign(request(RequestCode.SEND_MESSAGE_V2, {"a": "PG", "b": "orders"}), creds))
    before = acl.stat()
    replacement = acl.with_name("plain_acl.yml.new")
    replacement.write_text(grant.replace("orders=PUB", "orders=DENY") + "# revoked\n")
    os.utime(replacement, ns=(before.st_atime_ns, before.st_mtime_ns))
    os.replace(replacement, acl)
    assert manager.reload_changed() == [acl]
    with pytest.raises(AclDenied):
        manager.validate("10.0.0.9", sign(request(RequestCode.SEND_MESSAGE_V2, {"a": "PG", "b": "orders"}), creds))


async def test_deleting_the_default_file_is_a_file_removed_a_full_load_that_creates_it_again(
    acl_cluster: EmbeddedCluster, acl_home: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """4.9.8's ``AclFileWatchService`` lists the default file only while it exists, so deleting it changes the number
    of files: ``onFileNumChanged`` runs ``PlainPermissionManager.load()``, which creates it again, empty
    (``assureAclConfigFilesExist``), and rebuilds ``accessKeyTable`` from the files there are: a copy of a key added
    by hand to a ``conf/acl`` file since then owns the key, with its rules."""
    default = acl_home / "conf" / "plain_acl.yml"
    team = acl_home / "conf" / "acl" / "team.yml"
    team.parent.mkdir()
    other = "accounts:\n  - {accessKey: team-account, secretKey: team-secret}\n"
    team.write_text(other)
    await trio.sleep(WATCH_INTERVAL + 0.5)  # a file added: a full load
    copy = "  - {accessKey: RocketMQ, secretKey: '12345678', defaultTopicPerm: SUB, defaultGroupPerm: SUB}\n"
    team.write_text(other + copy)
    await trio.sleep(WATCH_INTERVAL + 0.5)  # reloaded alone: the key stays the default file's
    async with RemotingClient() as client:
        assert await _refused(client, acl_cluster, USER, "topicA")  # topicA=DENY in the default file
        default.unlink()
        await trio.sleep(WATCH_INTERVAL + 0.5)
        assert not await _refused(client, acl_cluster, USER, "topicA")  # the copy's defaultTopicPerm: SUB
    assert default.is_file() and default.read_text() == ""


def test_conf_acl_tools_yml_is_loaded_by_a_full_load_and_not_watched(tmp_path: Path) -> None:
    """4.9.8's PlainPermissionManager.getAllAclFiles skips only ``fileHome + MixAll.ACL_CONF_TOOLS_FILE``
    (``<home>/conf/tools.yml``, never under conf/acl), so a full load reads conf/acl/tools.yml and a nested one;
    srvutil's AclFileWatchService.getAllAclFiles skips ``<aclPath>/tools.yml`` alone, so only a full load (a file
    added or removed) sees conf/acl/tools.yml change, while a nested one is reloaded alone. Ours skipped every
    tools.yml."""
    top, nested = tmp_path / "conf" / "acl" / "tools.yml", tmp_path / "conf" / "acl" / "team" / "tools.yml"
    nested.parent.mkdir(parents=True)
    top.write_text("accounts:\n  - {accessKey: top-key, secretKey: top-secret-1}\n")
    nested.write_text("accounts:\n  - {accessKey: nested-key, secretKey: nested-secret-1}\n")
    manager = AclManager(AclFiles(tmp_path))
    manager.load()
    assert {k: _secret(manager, k) for k in ("top-key", "nested-key")} == {
        "top-key": "top-secret-1",
        "nested-key": "nested-secret-1",
    }
    for path, key in ((top, "top"), (nested, "nested")):
        path.write_text(f"accounts:\n  - {{accessKey: {key}-key, secretKey: {key}-secret-2}}\n")
        os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
    assert manager.reload_changed() == [nested]
    assert (_secret(manager, "top-key"), _secret(manager, "nested-key")) == ("top-secret-1", "nested-secret-2")
    (tmp_path / "conf" / "acl" / "more.yml").write_text("accounts: []\n")
    assert top in manager.reload_changed()  # a file added: a full load reads every file
    assert _secret(manager, "top-key") == "top-secret-2"


def _secret(manager: AclManager, access_key: str) -> str | None:
    account = manager.account(access_key)
    return None if account is None else account.secret_key
