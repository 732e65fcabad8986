"""What the ACL admin codes answer and write, against 4.9.8's ``PlainPermissionManager`` (code 52's file versions,
the account entries code 50 writes), on a real broker over real sockets and real files."""

from __future__ import annotations

import time
from pathlib import Path

import orjson
import yaml

from broker.embedded import EmbeddedCluster
from remoting.client import RemotingClient
from remoting.codec.acl_signing import SessionCredentials, sign
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request

ADMIN = SessionCredentials("rocketmq2", "12345678")


async def test_code_52_lists_the_versions_of_files_with_data_only(acl_cluster: EmbeddedCluster, acl_home: Path) -> None:
    """4.9.8's ``PlainPermissionManager.load`` skips a file with no data ("No data in file") before it records the
    file's ``DataVersion``: ``allAclFileVersion`` names the files whose rules the broker holds, not an empty file
    under ``conf/acl`` (an editor's leftover, a file still to be written), which would show as a version 0 dated
    1970 in ``mqadmin clusterAclConfigVersion``."""
    empty = acl_home / "conf" / "acl" / "empty.yml"
    empty.parent.mkdir()
    empty.write_text("# to be filled in\n")
    assert acl_cluster.controller.acl is not None
    acl_cluster.controller.acl.reload_changed(force=True)
    async with RemotingClient() as client:
        answer = await client.invoke(
            acl_cluster.broker_addr, sign(request(RequestCode.GET_BROKER_CLUSTER_ACL_INFO), ADMIN), 5
        )
    assert answer.code == ResponseCode.SUCCESS, answer
    versions = orjson.loads(answer.ext_fields["allAclFileVersion"])
    assert list(versions) == [str(acl_home.resolve() / "conf" / "plain_acl.yml")]


async def test_code_50_writes_a_new_account_without_the_fields_it_was_not_given(
    acl_cluster: EmbeddedCluster, acl_home: Path
) -> None:
    """4.9.8's ``createAclAccessConfigMap`` puts ``whiteRemoteAddress`` (and the perms) into a new account's map only
    when the request carries them: the entry it writes is ``accessKey, secretKey, admin``, not a
    ``whiteRemoteAddress: null`` line."""
    fields = {"accessKey": "newcomer1", "secretKey": "newcomer-secret", "admin": "false", "defaultTopicPerm": "PUB"}
    async with RemotingClient() as client:
        answer = await client.invoke(
            acl_cluster.broker_addr, sign(request(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, fields), ADMIN), 5
        )
    assert answer.code == ResponseCode.SUCCESS, answer
    accounts = yaml.safe_load((acl_home / "conf" / "plain_acl.yml").read_text())["accounts"]
    (entry,) = [a for a in accounts if a["accessKey"] == "newcomer1"]
    assert list(entry) == ["accessKey", "secretKey", "admin", "defaultTopicPerm"]


async def test_codes_51_and_53_refused_edits_answer_rocketmqs_failed_remarks(
    acl_cluster: EmbeddedCluster, acl_home: Path, tmp_path: Path
) -> None:
    """4.9.8's ``updateGlobalWhiteAddrsConfig`` returns false (no exception) for a missing ``globalWhiteAddrs``, an
    ``aclFileFullPath`` that is not an existing file or not under the home, and ``deleteAccessConfig`` for a missing
    ``accessKey`` (``decodeCommandCustomHeader`` only logs a null field): ``AdminBrokerProcessor`` then answers 211
    ``The globalWhiteAddresses[<addrs>] has been updated failed.`` / 210 ``The accesskey[<ak>] corresponding to
    accessConfig has been deleted failed.``, Java's ``null`` text for a missing field; nothing is written."""
    outside = tmp_path / "outside.yml"
    outside.write_text("accounts: []\n")
    default = acl_home / "conf" / "plain_acl.yml"
    before = default.read_text()
    cases = [
        (
            RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
            {"globalWhiteAddrs": "10.1.1.1", "aclFileFullPath": str(outside)},
            ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED,
            "The globalWhiteAddresses[10.1.1.1] has been updated failed.",
        ),
        (
            RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
            {"globalWhiteAddrs": "10.1.1.2", "aclFileFullPath": str(acl_home / "conf" / "missing.yml")},
            ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED,
            "The globalWhiteAddresses[10.1.1.2] has been updated failed.",
        ),
        (
            RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
            {"aclFileFullPath": ""},
            ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED,
            "The globalWhiteAddresses[null] has been updated failed.",
        ),
        (
            RequestCode.DELETE_ACL_CONFIG,
            {},
            ResponseCode.DELETE_ACL_CONFIG_FAILED,
            "The accesskey[null] corresponding to accessConfig has been deleted failed.",
        ),
    ]
    async with RemotingClient() as client:
        for code, fields, failed, remark in cases:
            answer = await client.invoke(acl_cluster.broker_addr, sign(request(code, fields), ADMIN), 5)
            assert (answer.code, answer.remark) == (failed, remark), fields
    assert outside.read_text() == "accounts: []\n"
    assert default.read_text() == before


async def test_an_acl_edit_keeps_the_keys_it_does_not_know_in_every_account(
    acl_cluster: EmbeddedCluster, acl_home: Path
) -> None:
    """4.9.8's edits load the file as maps (``AclUtils.getYamlDataObject``), change only the edited account's map
    (``createAclAccessConfigMap`` puts the given fields into the existing map) and dump them back: a key RocketMQ
    does not read (an operator's note on an account) stays, in the edited account and in every other one."""
    default = acl_home / "conf" / "plain_acl.yml"
    text = (
        default.read_text()
        .replace("  - accessKey: rocketmq2\n", "  - accessKey: rocketmq2\n    owner: platform team\n")
        .replace("  - accessKey: trusted-host\n", "  - accessKey: trusted-host\n    ticket: OPS-1234\n")
    )
    default.write_text(text)
    assert acl_cluster.controller.acl is not None
    acl_cluster.controller.acl.reload_changed(force=True)
    fields = {"accessKey": "trusted-host", "secretKey": "87654321", "admin": "false", "topicPerms": "topicT=PUB"}
    async with RemotingClient() as client:
        answer = await client.invoke(
            acl_cluster.broker_addr, sign(request(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, fields), ADMIN), 5
        )
    assert answer.code == ResponseCode.SUCCESS, answer
    accounts = {a["accessKey"]: a for a in yaml.safe_load(default.read_text())["accounts"]}
    assert accounts["rocketmq2"]["owner"] == "platform team"
    assert accounts["trusted-host"]["ticket"] == "OPS-1234"
    assert accounts["trusted-host"]["topicPerms"] == ["topicT=PUB"]


async def test_code_52_dates_a_file_without_a_data_version_at_its_load(
    acl_cluster: EmbeddedCluster, acl_home: Path
) -> None:
    """4.9.8's ``PlainPermissionManager.load`` gives a file with data but no ``dataVersion`` (the stock
    ``plain_acl.yml``) a ``new DataVersion()``, whose timestamp is ``System.currentTimeMillis()`` at that load, and
    the default file's is code 52's ``version`` too: ``mqadmin clusterAclConfigVersion`` shows when the rules were
    loaded, counter 0, not a version dated 1970."""
    default = acl_home / "conf" / "plain_acl.yml"
    assert "dataVersion" not in default.read_text()
    assert acl_cluster.controller.acl is not None
    loaded_from = int(time.time() * 1000)
    acl_cluster.controller.acl.reload_changed(force=True)
    loaded_by = int(time.time() * 1000)
    async with RemotingClient() as client:
        answer = await client.invoke(
            acl_cluster.broker_addr, sign(request(RequestCode.GET_BROKER_CLUSTER_ACL_INFO), ADMIN), 5
        )
    assert answer.code == ResponseCode.SUCCESS, answer
    listed = orjson.loads(answer.ext_fields["allAclFileVersion"])[str(acl_home.resolve() / "conf" / "plain_acl.yml")]
    version = orjson.loads(answer.ext_fields["version"])
    for stamp in (listed, version):
        assert stamp["counter"] == 0
        assert loaded_from <= stamp["timestamp"] <= loaded_by, stamp


async def test_code_50_reads_admin_as_boolean_parse_boolean_without_a_trim(
    acl_cluster: EmbeddedCluster, acl_home: Path
) -> None:
    """4.9.8's ``decodeCommandCustomHeader`` reads the boolean ``admin`` field with ``Boolean.parseBoolean(value)``,
    no trim: ``TRUE`` makes an admin, ``" true"`` or ``"true\\n"`` a plain account."""
    cases = {"upper-admin": ("TRUE", True), "blank-admin": (" true", False), "newline-admin": ("true\n", False)}
    async with RemotingClient() as client:
        for key, (flag, _) in cases.items():
            fields = {"accessKey": key, "secretKey": "admin-secret", "admin": flag}
            answer = await client.invoke(
                acl_cluster.broker_addr, sign(request(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, fields), ADMIN), 5
            )
            assert answer.code == ResponseCode.SUCCESS, answer
    accounts = {
        a["accessKey"]: a for a in yaml.safe_load((acl_home / "conf" / "plain_acl.yml").read_text())["accounts"]
    }
    assert {key: accounts[key]["admin"] for key in cases} == {key: admin for key, (_, admin) in cases.items()}
