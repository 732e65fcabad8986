"""ACL files reached through symbolic links (a shared directory linked under ``conf/acl``, a ``plain_acl.yml`` kept
elsewhere by a deployment tool), on a real broker over real sockets and real files, as 4.9.8's ``java.io.File``
follows them (``PlainPermissionManager.getAllAclFiles``, ``AclUtils.writeDataObject``)."""

from __future__ import annotations

from pathlib import Path

import yaml

from broker.embedded import EmbeddedCluster
from remoting.client import RemotingClient
from remoting.codec.acl_signing import SessionCredentials, sign
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand, request
from tests.conftest import SMALL_STORE

ADMIN = SessionCredentials("rocketmq2", "12345678")
TEAM = SessionCredentials("team-key1", "team-secret1")

TEAM_ACL = """\
accounts:
  - accessKey: team-key1
    secretKey: team-secret1
    defaultTopicPerm: PUB
    defaultGroupPerm: SUB
"""


def _consumer_list(creds: SessionCredentials) -> RemotingCommand:
    return sign(request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "teamGroup"}), creds)


async def test_a_directory_linked_under_conf_acl_is_loaded(tmp_path: Path, acl_home: Path) -> None:
    """4.9.8's ``getAllAclFiles`` recurses into every entry ``File.isDirectory`` (which follows a link) says is a
    directory, so the accounts of a shared directory linked under ``conf/acl`` hold, as those of a real one. A link
    back up the tree is read once, not followed for ever."""
    shared = tmp_path / "shared" / "team"
    shared.mkdir(parents=True)
    (shared / "team.yml").write_text(TEAM_ACL)
    (shared / "loop").symlink_to(shared)
    (acl_home / "conf" / "acl").mkdir()
    (acl_home / "conf" / "acl" / "team").symlink_to(shared)
    cluster = EmbeddedCluster(tmp_path / "c", acl_enable=True, rocketmq_home=str(acl_home), **SMALL_STORE)
    async with cluster, RemotingClient() as client:
        answer = await client.invoke(cluster.broker_addr, _consumer_list(TEAM), 5)
    assert "AclException" not in (answer.remark or ""), answer


async def test_an_acl_edit_writes_through_a_linked_file_and_keeps_the_link(tmp_path: Path, acl_home: Path) -> None:
    """4.9.8's ``AclUtils.writeDataObject`` opens the file with a ``FileWriter``, which writes the file the link
    names: the link stays, the managed file gets the new account, and the broker enforces it."""
    default = acl_home / "conf" / "plain_acl.yml"
    managed = tmp_path / "managed" / "plain_acl.yml"
    managed.parent.mkdir()
    default.rename(managed)
    default.symlink_to(managed)
    fields = {"accessKey": "team-key1", "secretKey": "team-secret1", "admin": "false", "defaultGroupPerm": "SUB"}
    cluster = EmbeddedCluster(tmp_path / "c", acl_enable=True, rocketmq_home=str(acl_home), **SMALL_STORE)
    async with cluster, RemotingClient() as client:
        edit = sign(request(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, fields), ADMIN)
        answer = await client.invoke(cluster.broker_addr, edit, 5)
        assert answer.code == ResponseCode.SUCCESS, answer
        answer = await client.invoke(cluster.broker_addr, _consumer_list(TEAM), 5)
    assert "AclException" not in (answer.remark or ""), answer
    assert default.is_symlink()
    accounts = yaml.safe_load(managed.read_text())["accounts"]
    assert "team-key1" in [account["accessKey"] for account in accounts]
