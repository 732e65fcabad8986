"""Our client signing every request (producer, push consumer, admin, mqadmin) against a broker with ACL on, the
ACL admin codes 50-53 through mqadmin's 4.9.8 commands, which here need an admin account, and 4.9.7's code 54 (every
account and white address, read by the dashboard's ACL page)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import trio
import yaml
from click.testing import CliRunner

from broker.embedded import EmbeddedCluster
from client import Message, Producer, SendResult
from client.acl_admin import acl_config
from client.admin import Admin
from client.config import ClientConfig
from client.errors import MQBrokerError, MQClientError
from client.mqadmin import main as mqadmin
from client.vip import broker_vip_channel
from remoting.client import RemotingClient
from remoting.codec.acl_signing import SessionCredentials
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request
from tests.acl.conftest import consume
from tests.client.helpers import wait_until
from tests.conftest import SMALL_STORE


def _config(cluster: EmbeddedCluster, access_key: str | None, secret_key: str | None = "12345678") -> ClientConfig:
    return ClientConfig(namesrv_addr=cluster.namesrv_addr, access_key=access_key, secret_key=secret_key)


async def _create_topic(cluster: EmbeddedCluster, topic: str) -> None:
    async with Admin(config=_config(cluster, "rocketmq2")) as admin:
        await admin.create_topic(topic, read_queue_nums=2, write_queue_nums=2, broker_addr=cluster.broker_addr)


async def test_a_signed_producer_and_consumer_work_and_a_refused_send_stores_nothing(
    acl_cluster: EmbeddedCluster,
) -> None:
    await _create_topic(acl_cluster, "topicB")
    await _create_topic(acl_cluster, "topicC")
    user = _config(acl_cluster, "RocketMQ")
    async with Producer("PG-acl", config=user) as producer:
        for i in range(5):
            await producer.send(Message("topicB", f"m{i}".encode(), keys=f"k{i}"))
        with pytest.raises(MQClientError, match="No default permission for topic:topicC"):
            await producer.send(Message("topicC", b"refused"))
    store = acl_cluster.controller.context.store
    assert sum(store.max_offset_in_queue("topicC", q) for q in range(2)) == 0

    received = await consume(_config(acl_cluster, "RocketMQ"), "groupB", "topicB", 5)
    assert sorted(received) == [f"m{i}".encode() for i in range(5)]


async def test_task_free_async_sends_are_signed_and_checked_on_the_fast_paths(acl_cluster: EmbeddedCluster) -> None:
    """Async sends go out as frames written from their fields (signed there) and the broker admits them from the
    parsed header: the allowed ones are stored, a refused one and a wrongly signed one get the ACL error and store
    nothing."""
    await _create_topic(acl_cluster, "topicB")
    await _create_topic(acl_cluster, "topicC")
    outcomes: list[SendResult | Exception] = []
    async with Producer("PG-acl-async", config=_config(acl_cluster, "RocketMQ")) as producer:
        await producer.send(Message("topicB", b"route"))  # route and connection ready: the frame path from now on
        for i in range(6):
            producer.send_async(Message("topicB", f"a{i}".encode()), outcomes.append)
        producer.send_async(Message("topicC", b"refused"), outcomes.append)
        await wait_until(lambda: len(outcomes) == 7)
    async with Producer("PG-acl-async", config=_config(acl_cluster, "RocketMQ", "wrong-secret")) as producer:
        with pytest.raises(MQClientError, match="Check signature failed for accessKey=RocketMQ"):
            await producer.send(Message("topicB", b"wrongly signed"))
    assert sum(isinstance(outcome, SendResult) for outcome in outcomes) == 6
    (refused,) = [outcome for outcome in outcomes if isinstance(outcome, Exception)]
    assert "No default permission for topic:topicC" in str(refused)
    store = acl_cluster.controller.context.store
    assert sum(store.max_offset_in_queue("topicC", q) for q in range(2)) == 0
    assert sum(store.max_offset_in_queue("topicB", q) for q in range(2)) == 7


async def test_the_fast_port_checks_acl_before_it_refuses_a_pull(acl_cluster: EmbeddedCluster) -> None:
    """4.9.8's BrokerController.registerServerRPCHook puts the ACL hook on the fast port too, and NettyRemotingAbstract
    runs the hooks before any processor, the default one that refuses PULL_MESSAGE there included: an unsigned pull
    or pop gets the ACL error the main port gives, a permitted one " request type 11 not supported"."""
    main = acl_cluster.broker_addr
    fast = broker_vip_channel(main)
    fields = {"topic": "topicB", "consumerGroup": "groupB"}
    async with RemotingClient() as unsigned:
        for code in (RequestCode.PULL_MESSAGE, RequestCode.POP_MESSAGE):
            on_main = await unsigned.invoke(main, request(code, fields), 5)
            on_fast = await unsigned.invoke(fast, request(code, fields), 5)
            assert on_main.code == ResponseCode.SYSTEM_ERROR and "No accessKey is configured" in (on_main.remark or "")
            assert (on_fast.code, on_fast.remark) == (on_main.code, on_main.remark)
    async with RemotingClient(credentials=SessionCredentials("RocketMQ", "12345678")) as signed:
        pull = await signed.invoke(fast, request(RequestCode.PULL_MESSAGE, fields), 5)
    assert (pull.code, pull.remark) == (ResponseCode.REQUEST_CODE_NOT_SUPPORTED, " request type 11 not supported")


async def test_an_unsigned_or_wrongly_signed_admin_is_refused(acl_cluster: EmbeddedCluster) -> None:
    for config, why in (
        (_config(acl_cluster, None), "No accessKey is configured"),
        (_config(acl_cluster, "rocketmq2", "not-the-secret"), "Check signature failed for accessKey=rocketmq2"),
        (_config(acl_cluster, "RocketMQ"), "Need admin permission for request code=17"),
    ):
        async with Admin(config=config) as admin:
            with pytest.raises(MQClientError, match=why):
                await admin.create_topic("Refused", broker_addr=acl_cluster.broker_addr)
    assert acl_cluster.controller.context.topics.get("Refused") is None


def _cli(*args: str, ok: bool = True) -> Any:
    result = CliRunner().invoke(mqadmin, [*args, "--json"], catch_exceptions=False)
    assert (result.exit_code == 0) == ok, result.output
    return json.loads(result.output) if ok else result.output


async def test_mqadmin_acl_commands_edit_the_file_atomically_and_need_an_admin(
    acl_cluster: EmbeddedCluster, acl_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ns, addr = acl_cluster.namesrv_addr, acl_cluster.broker_addr
    admin = ("--accessKey", "rocketmq2", "--secretKey", "12345678")
    run = trio.to_thread.run_sync
    acl_file = acl_home / "conf" / "plain_acl.yml"

    def accounts() -> dict[str, dict[str, Any]]:
        return {a["accessKey"]: a for a in yaml.safe_load(acl_file.read_text())["accounts"]}

    versions = await run(_cli, *admin, "clusterAclConfigVersion", "-n", ns, "-c", "DefaultCluster")
    before = versions["rows"][0]["AclConfigVersionNum"]
    created = await run(
        _cli, *admin, "updateAclConfig", "-n", ns, "-b", addr, "-a", "newcomer", "-s", "newcomer-secret",
        "-t", "topicB=PUB,topicC=SUB", "-g", "groupB=SUB", "-i", "DENY", "-u", "SUB",
    )  # fmt: skip
    assert created["brokers"] == [addr]
    entry = accounts()["newcomer"]
    assert entry["secretKey"] == "newcomer-secret" and entry["topicPerms"] == ["topicB=PUB", "topicC=SUB"]
    assert entry["admin"] is False and entry["defaultTopicPerm"] == "DENY"
    assert accounts()["RocketMQ"]["topicPerms"][0] == "topicA=DENY"  # the other accounts are kept as they were
    # An edit replaces what it names and keeps the rest.
    await run(
        _cli, *admin, "updateAclConfig", "-n", ns, "-c", "DefaultCluster", "-a", "newcomer", "-s", "changed-secret"
    )
    entry = accounts()["newcomer"]
    assert entry["secretKey"] == "changed-secret" and entry["topicPerms"] == ["topicB=PUB", "topicC=SUB"]
    async with Producer("PG-new", config=_config(acl_cluster, "newcomer", "changed-secret")) as producer:
        await _create_topic(acl_cluster, "topicB")
        assert (await producer.send(Message("topicB", b"from the new account"))).msg_id

    after = await run(_cli, *admin, "clusterAclConfigVersion", "-n", ns, "-b", addr)
    assert after["rows"][0]["AclConfigVersionNum"] == before + 2
    await run(_cli, *admin, "updateGlobalWhiteAddr", "-n", ns, "-b", addr, "-g", "10.1.1.*,10.2.2.2")
    assert yaml.safe_load(acl_file.read_text())["globalWhiteRemoteAddresses"] == ["10.1.1.*", "10.2.2.2"]
    outside = str(acl_home.parent / "elsewhere.yml")
    Path(outside).write_text("accounts: []\n")
    refused = await run(
        lambda: _cli(*admin, "updateGlobalWhiteAddr", "-n", ns, "-b", addr, "-g", "1.1.1.1", "-p", outside, ok=False)
    )
    assert "211" in refused
    await run(_cli, *admin, "deleteAclConfig", "-n", ns, "-b", addr, "-a", "newcomer")
    assert "newcomer" not in accounts()
    missing = await run(lambda: _cli(*admin, "deleteAccessConfig", "-n", ns, "-b", addr, "-a", "newcomer", ok=False))
    assert "has been deleted failed" in missing
    # A signed account without admin: refused, file unchanged (stricter than 4.9.8).
    text = acl_file.read_text()
    user = ("--accessKey", "RocketMQ", "--secretKey", "12345678")
    denied = await run(
        lambda: _cli(*user, "updateAclConfig", "-n", ns, "-b", addr, "-a", "sneaky1", "-s", "sneaky12", ok=False)
    )
    assert "Need admin permission for request code=50" in denied
    assert acl_file.read_text() == text
    # Without --accessKey, mqadmin signs with $ROCKETMQ_HOME/conf/tools.yml, as RocketMQ's tools do.
    (acl_home / "conf" / "tools.yml").write_text("accessKey: rocketmq2\nsecretKey: 12345678\n")
    monkeypatch.setenv("ROCKETMQ_HOME", str(acl_home))
    assert (await run(_cli, "clusterAclConfigVersion", "-n", ns, "-b", addr))["rows"]


async def test_code_54_lists_every_account_and_white_address_to_an_admin_only(
    acl_cluster: EmbeddedCluster, acl_home: Path, tmp_path: Path
) -> None:
    """4.9.7's GET_BROKER_CLUSTER_ACL_CONFIG: the accounts as their files write them (a key in two files once, from
    the first file loaded), the white addresses of every file joined; a plain account is refused (4.9.7 let it read
    every secret), and so is any account with ACL off."""
    extra = acl_home / "conf" / "acl" / "extra.yml"
    extra.parent.mkdir()
    extra.write_text(
        "globalWhiteRemoteAddresses: [10.9.9.9]\n"
        "accounts:\n  - {accessKey: extra-key, secretKey: extra-secret, groupPerms: [groupZ=SUB]}\n"
        "  - {accessKey: trusted-host, secretKey: shadowing}\n"
    )
    assert acl_cluster.controller.acl is not None
    acl_cluster.controller.acl.reload_changed(force=True)
    async with Admin(config=_config(acl_cluster, "rocketmq2")) as admin:
        config = await acl_config(admin, acl_cluster.broker_addr)
    assert config["globalWhiteAddrs"] == ["10.9.9.9", "10.10.103.*"]  # conf/acl/** first, then plain_acl.yml
    accounts = {a["accessKey"]: a for a in config["plainAccessConfigs"]}
    assert list(accounts) == ["extra-key", "trusted-host", "RocketMQ", "rocketmq2"]
    assert accounts["extra-key"] == {
        "accessKey": "extra-key", "secretKey": "extra-secret", "admin": False, "topicPerms": [],
        "groupPerms": ["groupZ=SUB"],
    }  # fmt: skip
    # The key in both files: the first file's (conf/acl/** loads first), as the checks see it.
    assert accounts["trusted-host"]["secretKey"] == "shadowing" and "whiteRemoteAddress" not in accounts["trusted-host"]
    assert accounts["RocketMQ"]["secretKey"] == "12345678" and accounts["RocketMQ"]["defaultGroupPerm"] == "SUB"
    assert accounts["RocketMQ"]["topicPerms"] == ["topicA=DENY", "topicB=PUB|SUB", "topicC=SUB", "topicP=PUB"]
    assert accounts["RocketMQ"]["defaultTopicPerm"] == "DENY" and "whiteRemoteAddress" not in accounts["RocketMQ"]
    assert accounts["rocketmq2"]["admin"] is True and accounts["rocketmq2"]["whiteRemoteAddress"] == "192.168.1.*"
    async with Admin(config=_config(acl_cluster, "RocketMQ")) as admin:
        with pytest.raises(MQBrokerError, match="Need admin permission for request code=54"):
            await acl_config(admin, acl_cluster.broker_addr)
    async with EmbeddedCluster(tmp_path / "acl-off", **SMALL_STORE) as plain, Admin(plain.namesrv_addr) as admin:
        with pytest.raises(MQBrokerError, match="ACL is not enabled") as refused:
            await acl_config(admin, plain.broker_addr)
        assert refused.value.code == 1


async def test_mqadmin_acl_commands_print_rocketmqs_lines(acl_cluster: EmbeddedCluster) -> None:
    """RocketMQ 4.9.8's tools/src/main/java/org/apache/rocketmq/tools/command/acl/*SubCommand.java print plain
    ``printf`` lines (one per broker, the version list with ``#``-headed columns), not a drawn table."""
    ns, addr = acl_cluster.namesrv_addr, acl_cluster.broker_addr
    admin = ["--accessKey", "rocketmq2", "--secretKey", "12345678"]

    def text(*args: str) -> list[str]:
        result = CliRunner().invoke(mqadmin, [*admin, *args], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return result.output.splitlines()

    run = trio.to_thread.run_sync
    lines = await run(text, "updateAclConfig", "-n", ns, "-b", addr, "-a", "printed", "-s", "printed-secret")
    assert lines[0] == f"create or update plain access config to {addr} success."
    assert await run(text, "updateGlobalWhiteAddr", "-n", ns, "-b", addr, "-g", "10.3.3.3") == [
        f"update global white remote addresses to {addr} success."
    ]
    assert await run(text, "deleteAclConfig", "-n", ns, "-c", "DefaultCluster", "-a", "printed") == [
        f"delete plain access config account from {addr} success.",
        "account's accesskey is:printed",
    ]
    fmt = "%-16s  %-22s  %-22s  %-20s  %-22s  %-22s"
    listed = await run(text, "clusterAclConfigVersion", "-n", ns, "-c", "DefaultCluster")
    header = ("#Cluster Name", "#Broker Name", "#Broker Addr", "#AclFilePath", "#AclConfigVersionNum")
    assert listed[0] == fmt % (*header, "#AclLastUpdateTime")
    assert listed[-1] == "get cluster's plain access config version success."
    row = listed[1]
    assert row.split()[:3] == ["DefaultCluster", "broker-a", addr] and "plain_acl.yml" in row
    assert re.fullmatch(r".*  \d{4}-\d\d-\d\d \d\d:\d\d:\d\d *", row), row  # UtilAll.YYYY_MM_DD_HH_MM_SS
    one = await run(text, "clusterAclConfigVersion", "-n", ns, "-b", addr)  # -b: no header line
    assert one[0].split()[:3] == ["DefaultCluster", "broker-a", addr]
    assert one[-1] == "get broker's plain access config version success."


async def test_mqadmin_update_acl_config_reads_its_options_as_rocketmqs_command(
    acl_cluster: EmbeddedCluster, acl_home: Path
) -> None:
    """4.9.8's ``UpdateAccessConfigSubCommand`` trims every value and reads ``-m`` with ``Boolean.parseBoolean``: only
    ``true`` (any case) makes an admin; ``1``, ``yes`` or ``maybe`` make a plain account, never a usage error."""
    ns, addr = acl_cluster.namesrv_addr, acl_cluster.broker_addr
    admin = ("--accessKey", "rocketmq2", "--secretKey", "12345678")
    acl_file = acl_home / "conf" / "plain_acl.yml"

    def accounts() -> dict[str, dict[str, Any]]:
        return {a["accessKey"]: a for a in yaml.safe_load(acl_file.read_text())["accounts"]}

    for key, flag, is_admin in (
        ("flag-one", "1", False),
        ("flag-yes", "yes", False),
        ("flag-maybe", "maybe", False),
        ("flag-true", " TRUE ", True),
    ):
        await trio.to_thread.run_sync(
            _cli, *admin, "updateAclConfig", "-n", ns, "-b", addr, "-a", key, "-s", "flag-secret", "-m", flag
        )
        assert accounts()[key]["admin"] is is_admin, (flag, accounts()[key])
    await trio.to_thread.run_sync(
        _cli, *admin, "updateAclConfig", "-n", ns, "-b", addr, "-a", " spaced-key ", "-s", " spaced-secret ",
        "-i", " PUB ", "-t", " topicB=PUB ",
    )  # fmt: skip
    entry = accounts()["spaced-key"]
    assert entry["secretKey"] == "spaced-secret"
    assert (entry["defaultTopicPerm"], entry["topicPerms"]) == ("PUB", ["topicB=PUB"])


async def test_mqadmin_acl_values_are_trimmed_as_java_string_trim(acl_cluster: EmbeddedCluster, acl_home: Path) -> None:
    """4.9.8's ACL commands read each value with ``getOptionValue(..).trim()``: Java's ``String.trim`` drops the
    characters up to U+0020 (control characters too) at both ends and keeps every other one (a no-break space, an
    ideographic space), so ``-m "true\\u3000"`` is ``Boolean.parseBoolean`` false (a plain account), a no-break space
    pasted after the key stays in it, and control characters around the secret go."""
    ns, addr = acl_cluster.namesrv_addr, acl_cluster.broker_addr
    admin = ("--accessKey", "rocketmq2", "--secretKey", "12345678")
    await trio.to_thread.run_sync(
        _cli, *admin, "updateAclConfig", "-n", ns, "-b", addr, "-a", "nbsp-key\u00a0", "-s", "\x01ctl-secret\x1b",
        "-m", "true\u3000",
    )  # fmt: skip
    accounts = {
        a["accessKey"]: a for a in yaml.safe_load((acl_home / "conf" / "plain_acl.yml").read_text())["accounts"]
    }
    entry = accounts["nbsp-key\u00a0"]
    assert (entry["secretKey"], entry["admin"]) == ("ctl-secret", False)


def _java_spread(text: str) -> int:
    """``HashMap.hash`` of ``text`` (ASCII): ``String.hashCode`` with its high half folded in."""
    h = 0
    for char in text:
        h = (31 * h + ord(char)) & 0xFFFFFFFF
    return h ^ (h >> 16)


def _java_version_rows(paths: list[str]) -> list[str]:
    """``ClusterAclConfigVersionListSubCommand``'s row order for ``allAclFileVersion`` sent with ``paths`` in this
    order (at most 12): fastjson's ``HashMap`` (16 buckets) copied into ``new HashMap<>(size, 1)`` (``tableSizeFor
    (size)`` buckets, never resized), each iterated by bucket, a bucket in the order put."""
    parsed = sorted(paths, key=lambda p: _java_spread(p) & 15)  # stable: a bucket keeps the JSON order
    capacity = 1 << (len(paths) - 1).bit_length()
    return sorted(parsed, key=lambda p: _java_spread(p) & (capacity - 1))


async def test_mqadmin_cluster_acl_config_version_lists_the_files_in_java_s_hash_map_order(
    tmp_path: Path, acl_home: Path
) -> None:
    """4.9.8's ``MQClientAPIImpl.getBrokerClusterAclInfo`` reads ``allAclFileVersion`` into a ``HashMap`` and
    ``ClusterAclConfigVersionListSubCommand`` prints its entries as they iterate, not sorted by path (ours sorted)."""
    acl_dir = acl_home / "conf" / "acl"
    acl_dir.mkdir()
    default = str(acl_home / "conf" / "plain_acl.yml")
    names: list[str] = []
    paths: list[str] = []
    for i in range(11):  # names whose Java order is not the sorted one (it depends on the temporary path)
        names.append(f"acl{i:02d}.yml")
        paths = [*sorted(str(acl_dir / name) for name in names), default]
        if len(names) >= 3 and _java_version_rows(paths) != sorted(paths):
            break
    assert _java_version_rows(paths) != sorted(paths)
    for name in names:
        (acl_dir / name).write_text("globalWhiteRemoteAddresses:\n  - 10.20.30.40\n")
    async with EmbeddedCluster(tmp_path / "c", acl_enable=True, rocketmq_home=str(acl_home), **SMALL_STORE) as c:
        args = ["--accessKey", "rocketmq2", "--secretKey", "12345678", "clusterAclConfigVersion"]
        args += ["-n", c.namesrv_addr, "-b", c.broker_addr]
        result = await trio.to_thread.run_sync(lambda: CliRunner().invoke(mqadmin, args, catch_exceptions=False))
    assert result.exit_code == 0, result.output
    rows = [line.split()[3] for line in result.output.splitlines()[:-1]]
    assert rows == _java_version_rows(paths)
