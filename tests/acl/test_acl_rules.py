"""The ACL rules without a broker: permissions, white-address patterns, plain_acl.yml parsing, several files."""

from __future__ import annotations

import os
from pathlib import Path

import attrs
import pytest
import yaml

from broker.acl.manager import _MAX_GRANTED, AclDenied, AclFiles, AclManager
from broker.acl.permission import ANY, DENY, PUB, SUB, check_permission, parse_perm
from broker.acl.plain_config import AclConfigError, parse_acl_file
from broker.acl.processor import account_change
from broker.acl.remote_address import AddressPatternError, address_matcher
from broker.broker_config import BrokerConfig
from broker.security import acl_manager_of
from remoting.codec.acl_signing import SessionCredentials, sign
from remoting.codec.bodies import ConsumerData, HeartbeatData, SubscriptionData
from remoting.codec.codes import RequestCode
from remoting.codec.command import RemotingCommand, request


@pytest.mark.parametrize(
    ("text", "bits"),
    [
        ("PUB", PUB),
        ("SUB", SUB),
        ("PUB|SUB", PUB | SUB),
        (" SUB|PUB ", PUB | SUB),
        ("DENY", DENY),
        ("ANY", DENY),
        ("pub", DENY),
        (None, DENY),
        ("", DENY),
    ],
)
def test_permission_texts_parse_as_rocketmq_with_anything_else_deny(text: str | None, bits: int) -> None:
    assert parse_perm(text) == bits


@pytest.mark.parametrize(
    ("needed", "owned", "ok"),
    [
        (PUB, PUB, True),
        (PUB, SUB, False),
        (SUB, PUB | SUB, True),
        (PUB, DENY, False),
        (PUB, DENY | PUB, False),
        (ANY, SUB, True),
        (ANY, PUB, True),
        (ANY, DENY, False),
    ],
)
def test_check_permission(needed: int, owned: int, ok: bool) -> None:
    assert check_permission(needed, owned) is ok


@pytest.mark.parametrize(
    ("pattern", "matching", "not_matching"),
    [
        ("", [], ["127.0.0.1"]),
        ("*", ["1.2.3.4", "::1"], []),
        ("*.*.*.*", ["1.2.3.4"], []),
        ("10.10.103.*", ["10.10.103.1", "10.10.103.255"], ["10.10.104.1", "10.10.1.3"]),
        ("192.168.1-10.*", ["192.168.1.7", "192.168.10.0"], ["192.168.11.1", "192.168.0.1"]),
        ("192.168.*.5", ["192.168.77.9"], ["192.169.1.5"]),  # octets after the varying one are ignored (RocketMQ)
        ("192.168.1.{1,2,3}", ["192.168.1.2"], ["192.168.1.4"]),
        ("127.0.0.1,10.0.0.1", ["10.0.0.1", "127.0.0.1"], ["10.0.0.2"]),
        ("127.0.0.1", ["127.0.0.1"], ["127.0.0.2"]),
        ("::1", ["0:0:0:0:0:0:0:1", "::1"], ["::2"]),
        ("1050:0:0:0:5:600:300c:*", ["1050::5:600:300c:1"], ["1050::5:600:300d:1"]),
        ("1050:0:0:0:5:600:300c:1-a", ["1050::5:600:300c:a"], ["1050::5:600:300c:b"]),
        ("192.168.1.1-2-3", ["192.168.1.2"], ["192.168.1.3"]),  # StringUtils.split: the first two bounds
    ],
)
def test_white_address_patterns(pattern: str, matching: list[str], not_matching: list[str]) -> None:
    match = address_matcher(pattern)
    assert all(match(ip) for ip in matching)
    assert not any(match(ip) for ip in not_matching)


@pytest.mark.parametrize("pattern", ["10.10.103.256-3", "1.2.3.-4", "abc", "1.2.{3,4}", "192.168.1.{1,x}", "1.2.3.4.5"])
def test_bad_white_address_patterns_are_refused(pattern: str) -> None:
    with pytest.raises(AddressPatternError):
        address_matcher(pattern)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "accounts:\n  - accessKey: short\n    secretKey: 12345678\n",
            "cannot be null and length should longer than 6",
        ),
        ("accounts:\n  - accessKey: longenough\n", "cannot be null and length should longer than 6"),
        (
            "accounts:\n  - accessKey: longenough\n    secretKey: 12345678\n    topicPerms: [a=PUB=SUB]\n",
            "Parse resource permission failed for topic:a=PUB=SUB",
        ),
        (
            "accounts:\n  - accessKey: longenough\n    secretKey: 12345678\n    whiteRemoteAddress: 1.2.3\n",
            "Netaddress examine Exception",
        ),
        ("accounts: [unclosed\n", "not valid YAML"),
        ("- a list\n", "must be a map"),
    ],
)
def test_bad_files_are_refused_with_rocketmq_messages(text: str, message: str) -> None:
    with pytest.raises(AclConfigError, match=message.replace("[", r"\[")):
        parse_acl_file(text)


@pytest.mark.parametrize(
    ("entry", "perm"),
    [("topicA==PUB", PUB), ("=topicA=PUB", PUB), ("topicA=PUB=", PUB), (" topicA = SUB|PUB ", PUB | SUB)],
)
def test_a_resource_entry_splits_as_string_utils_split_drops_empty_parts(tmp_path: Path, entry: str, perm: int) -> None:
    """``Permission.parseResourcePerms`` splits ``res=PERM`` with ``StringUtils.split(resource, "=")``, which drops
    empty parts: ``topicA==PUB`` is ``topicA`` with PUB, and RocketMQ loads the file (ours refused the whole file,
    so none of its accounts was known); ``topicA=`` and ``=PUB`` have one part and are refused. An admin edit
    (code 50, whose ``checkResourcePerms`` splits the same way) writes such an entry too."""
    text = f"accounts:\n  - accessKey: longenough\n    secretKey: 12345678\n    topicPerms: ['{entry}']\n"
    text += f"    groupPerms: ['{entry.replace('topicA', 'groupA')}']\n"
    (account,) = parse_acl_file(text).accounts
    assert account.perms == {"topicA": perm, "%RETRY%groupA": perm}
    for bad in ("topicA=", "=PUB", "="):
        with pytest.raises(AclConfigError, match=f"Parse resource permission failed for topic:{bad}$"):
            parse_acl_file(text.replace(f"['{entry}']", f"['{bad}']", 1))
    (tmp_path / "conf").mkdir()
    manager = AclManager(AclFiles(tmp_path))
    manager.load()
    change, given = account_change({"accessKey": "another-key", "secretKey": "12345678", "topicPerms": entry})
    manager.update_account(change, given)
    edited = manager.account("another-key")
    assert edited is not None and edited.perms == {"topicA": perm}


def test_numbers_in_yaml_are_keys_as_text_and_an_empty_file_is_empty() -> None:
    acl = parse_acl_file("accounts:\n  - accessKey: 123456789\n    secretKey: 12345678\n    admin: true\n")
    assert acl.accounts[0].access_key == "123456789" and acl.accounts[0].secret_key == "12345678"
    assert acl.accounts[0].admin and acl.accounts[0].perms is None
    assert parse_acl_file("").accounts == ()


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_files_under_conf_acl_and_the_default_file_merge_first_one_wins(tmp_path: Path) -> None:
    _write(
        tmp_path / "conf" / "acl" / "team" / "a.yml",
        "globalWhiteRemoteAddresses: [10.0.0.*]\naccounts:\n"
        "  - {accessKey: shared-key, secretKey: from-team-a, defaultTopicPerm: PUB}\n",
    )
    _write(tmp_path / "conf" / "acl" / "b.yaml", "accounts:\n  - {accessKey: other-key, secretKey: 12345678}\n")
    _write(tmp_path / "conf" / "acl" / "tools.yml", "accounts:\n  - {accessKey: tools-key, secretKey: 12345678}\n")
    _write(
        tmp_path / "conf" / "plain_acl.yml",
        "globalWhiteRemoteAddresses: [10.9.9.9]\naccounts:\n  - {accessKey: shared-key, secretKey: from-default}\n",
    )
    manager = AclManager(AclFiles(tmp_path))
    manager.load()
    account = manager.account("shared-key")
    assert account is not None and account.secret_key == "from-team-a"
    assert manager.account("other-key") is not None and manager.account("tools-key") is not None
    cmd = request(RequestCode.SEND_MESSAGE, {"topic": "T"})
    manager.validate("10.0.0.7", cmd)  # white-listed by a.yml
    manager.validate("10.9.9.9", cmd)  # and by the default file
    with pytest.raises(AclDenied, match="No accessKey is configured"):
        manager.validate("10.1.0.7", cmd)
    manager.validate("10.1.0.7", sign(cmd, SessionCredentials("shared-key", "from-team-a")))
    assert len(manager.versions()) == 4


def test_a_missing_default_file_is_created_empty(tmp_path: Path) -> None:
    manager = AclManager(AclFiles(tmp_path))
    manager.load()
    assert (tmp_path / "conf" / "plain_acl.yml").is_file()
    with pytest.raises(AclDenied, match="No acl config for someone"):
        manager.validate("127.0.0.1", sign(request(RequestCode.SEND_MESSAGE, {}), SessionCredentials("someone", "x")))


def test_without_a_home_nothing_loads_nothing_is_created_and_edits_are_refused(tmp_path: Path) -> None:
    manager = AclManager(AclFiles(None))
    manager.load()
    with pytest.raises(AclDenied, match="No acl config for someone"):
        manager.validate("127.0.0.1", sign(request(RequestCode.SEND_MESSAGE, {}), SessionCredentials("someone", "x")))
    with pytest.raises(AclConfigError, match="rocketmqHome"):
        manager.update_account(parse_acl_file("accounts: [{accessKey: newcomer, secretKey: 12345678}]").entries[0],
                               frozenset())  # fmt: skip
    assert manager.versions() == {} and manager.default_version() == {"counter": 0, "timestamp": 0}


def _edit(manager: AclManager, fields: str, given: frozenset[str]) -> None:
    """``update_account`` of producer1 (secret secret12) with these YAML ``fields``."""
    entry = parse_acl_file(f"accounts: [{{accessKey: producer1, secretKey: secret12, {fields}}}]").entries[0]
    manager.update_account(entry, given)


def test_remembered_grants_are_dropped_when_the_rules_change(tmp_path: Path) -> None:
    """A grant is remembered per (access key, code, resources): a reload or an edit that revokes it refuses the next
    request, and a client naming ever-new topics cannot grow the memory past its bound."""
    acl_file = tmp_path / "conf" / "plain_acl.yml"
    _write(acl_file, "accounts:\n  - {accessKey: producer1, secretKey: secret12, topicPerms: [T=PUB]}\n")
    manager = AclManager(AclFiles(tmp_path))
    manager.load()
    creds = SessionCredentials("producer1", "secret12")
    send = sign(request(RequestCode.SEND_MESSAGE, {"topic": "T"}), creds)
    manager.validate("10.1.0.7", send)
    manager.validate("10.1.0.7", send)  # now from the remembered grant
    _write(acl_file, "accounts:\n  - {accessKey: producer1, secretKey: secret12, topicPerms: [T=DENY]}\n")
    os.utime(acl_file, ns=(1, 1))  # a modification time the manager has not seen, however coarse the clock
    assert manager.reload_changed() == [acl_file]
    with pytest.raises(AclDenied, match="No default permission for topic:T"):
        manager.validate("10.1.0.7", send)

    _edit(manager, "topicPerms: [T=PUB]", frozenset({"topic_perms"}))
    manager.validate("10.1.0.7", send)
    _edit(manager, "topicPerms: [T=SUB]", frozenset({"topic_perms"}))
    with pytest.raises(AclDenied, match="No default permission for topic:T"):
        manager.validate("10.1.0.7", send)

    for i in range(_MAX_GRANTED + 10):
        topic_send = sign(request(RequestCode.SEND_MESSAGE, {"topic": f"T{i}"}), creds)
        with pytest.raises(AclDenied):
            manager.validate("10.1.0.7", topic_send)  # refusals are never remembered
    assert not manager._granted
    _edit(manager, "defaultTopicPerm: PUB", frozenset({"default_topic_perm", "topic_perms"}))
    for i in range(_MAX_GRANTED + 10):
        manager.validate("10.1.0.7", sign(request(RequestCode.SEND_MESSAGE, {"topic": f"T{i}"}), creds))
    assert 0 < len(manager._granted) <= _MAX_GRANTED


def test_grants_naming_many_resources_are_checked_each_time_not_remembered(tmp_path: Path) -> None:
    """A heartbeat listing thousands of topics: remembering its grant kept the whole list (4,096 such grants, tens
    of GB with 16 MB frames). Its check still refuses what it must."""
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "plain_acl.yml").write_text(
        "accounts:\n  - accessKey: consumer1\n    secretKey: '12345678'\n    defaultTopicPerm: SUB\n"
        "    defaultGroupPerm: SUB\n    topicPerms:\n      - closed=DENY\n"
    )
    manager = AclManager(AclFiles(tmp_path))
    manager.load()
    creds = SessionCredentials("consumer1", "12345678")

    def heartbeat(n: int, topics: list[str]) -> RemotingCommand:
        subs = tuple(SubscriptionData(topic) for topic in topics)
        data = HeartbeatData(f"c{n}", consumer_data_set=(ConsumerData(f"g{n}", subscription_data_set=subs),))
        return sign(request(RequestCode.HEART_BEAT, body=data.encode()), creds)

    for n in range(20):
        manager.validate("10.0.0.9", heartbeat(n, [f"t{n}-{i}" for i in range(2000)]))
    assert not manager._granted
    with pytest.raises(AclDenied):
        manager.validate("10.0.0.9", heartbeat(99, [*(f"t{i}" for i in range(100)), "closed"]))
    manager.validate("10.0.0.9", heartbeat(100, ["t1", "t2"]))
    assert len(manager._granted) == 1


@pytest.mark.parametrize(
    ("value", "admin"),
    [
        ("true", True),
        ("yes", True),  # YAML 1.1: a boolean for SnakeYAML and PyYAML alike
        ("1", True),
        ("1.0", True),
        ("4294967297", True),  # Number.intValue() keeps the low 32 bits: 1
        ("'1'", True),
        ("'TRUE'", True),
        ("Y", True),
        ("y", True),
        ("T", True),
        ("false", False),
        ("0", False),
        ("2", False),
        ("'0'", False),
        ("F", False),
        ("f", False),
        ("N", False),
        ("''", False),  # castToBoolean gives null: the primitive keeps false
        ("'null'", False),
        ("", False),
    ],
)
def test_the_admin_flag_is_read_as_fastjson_casts_it(tmp_path: Path, value: str, admin: bool) -> None:
    """4.9.8 loads the file with SnakeYAML and turns each account into a ``PlainAccessConfig`` with fastjson
    (``accounts.toJavaList`` in ``PlainPermissionManager.load``), whose ``TypeUtils.castToBoolean`` takes a number
    whose ``intValue()`` is 1, and the texts ``true`` (any case), ``1``, ``Y``/``y``, ``T`` as true: ``admin: 1`` is
    an admin there, so may send the admin-only codes."""
    text = f"accounts:\n  - accessKey: longenough\n    secretKey: 12345678\n    admin: {value}\n"
    (account,) = parse_acl_file(text).accounts
    assert account.admin is admin
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "plain_acl.yml").write_text(text)
    manager = AclManager(AclFiles(tmp_path))
    manager.load()
    creds = SessionCredentials("longenough", "12345678")
    cmd = sign(request(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "T"}), creds)
    if admin:
        manager.validate("10.0.0.1", cmd)
    else:
        with pytest.raises(AclDenied, match="Need admin permission"):
            manager.validate("10.0.0.1", cmd)


def test_creating_subscription_groups_in_bulk_needs_an_admin_as_creating_one_does(tmp_path: Path) -> None:
    """RocketMQ 5's UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST creates what UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, an
    admin code, creates: a plain account may not send it either."""
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "plain_acl.yml").write_text("accounts:\n  - accessKey: plainuser\n    secretKey: 12345678\n")
    manager = AclManager(AclFiles(tmp_path))
    manager.load()
    cmd = sign(
        request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST), SessionCredentials("plainuser", "12345678")
    )
    with pytest.raises(AclDenied, match="Need admin permission"):
        manager.validate("10.0.0.1", cmd)


@pytest.mark.parametrize("value", ["maybe", "t", "n", "' true'"])
def test_an_admin_flag_fastjson_cannot_cast_fails_the_file(value: str) -> None:
    """``castToBoolean`` throws for any other text, so RocketMQ does not load the file."""
    with pytest.raises(AclConfigError, match="can not cast to boolean"):
        parse_acl_file(f"accounts:\n  - accessKey: longenough\n    secretKey: 12345678\n    admin: {value}\n")


def test_an_absolute_acl_plain_file_is_read_under_rocketmq_home(tmp_path: Path) -> None:
    """``PlainPermissionManager`` names the default file ``dealFilePath(fileHome + "/" + rocketmq.acl.plain.file)``:
    an absolute setting is still under ``rocketmqHome`` (``/etc/acl.yml`` is ``<home>/etc/acl.yml``), never a file
    elsewhere on the machine."""
    home, outside = tmp_path / "home", tmp_path / "elsewhere" / "plain.yml"
    _write(outside, "accounts:\n  - {accessKey: outside-key, secretKey: 12345678}\n")
    under = home / str(outside).lstrip(os.sep)
    _write(under, "accounts:\n  - {accessKey: inside-key, secretKey: 12345678}\n")
    config = attrs.evolve(BrokerConfig(), acl_enable=True, rocketmq_home=str(home), acl_plain_file=str(outside))
    manager = acl_manager_of(config)
    assert manager is not None
    manager.load()
    assert manager.files.default_path == under
    assert manager.account("inside-key") is not None and manager.account("outside-key") is None


def _on_disk(path: Path) -> list[tuple[str, str]]:
    """``(accessKey, secretKey)`` of each account entry of ``path``, in file order."""
    return [(str(a["accessKey"]), str(a["secretKey"])) for a in yaml.safe_load(path.read_text())["accounts"]]


def _admits(manager: AclManager, access_key: str, secret_key: str) -> bool:
    try:
        manager.validate("10.1.0.7", sign(request(RequestCode.SEND_MESSAGE, {"topic": "T"}), SessionCredentials(
            access_key, secret_key)))  # fmt: skip
    except AclDenied:
        return False
    return True


def _accounts_file(tmp_path: Path, *accounts: tuple[str, str]) -> Path:
    path = tmp_path / "conf" / "plain_acl.yml"
    lines = [f"  - {{accessKey: {key}, secretKey: {secret}, defaultTopicPerm: PUB}}\n" for key, secret in accounts]
    _write(path, "accounts:\n" + "".join(lines))
    return path


def test_an_acl_update_of_an_existing_account_moves_it_to_the_end_of_its_file(tmp_path: Path) -> None:
    """4.9.8's ``updateAccessConfig`` (acl/src/main/java/org/apache/rocketmq/acl/plain/PlainPermissionManager.java)
    takes the account's map out of the file's ``accounts`` list, puts the given fields into it and appends it: the
    edited account ends up last, in the file and in GET_BROKER_CLUSTER_ACL_CONFIG's list. Ours edited it in place."""
    alice, bob, carol = ("alice-key", "alice-secret"), ("bob-key", "bob-secret"), ("carol-key", "carol-sec")
    path = _accounts_file(tmp_path, alice, bob, carol)
    manager = AclManager(AclFiles(tmp_path))
    manager.load()
    manager.update_account(*account_change({"accessKey": "alice-key", "secretKey": "alice-secret-2"}))
    assert _on_disk(path) == [bob, carol, ("alice-key", "alice-secret-2")]
    assert [entry.access_key for entry in manager.all_config()[1]] == ["bob-key", "carol-key", "alice-key"]
    assert _admits(manager, "alice-key", "alice-secret-2") and not _admits(manager, *alice)


_FIRST, _OTHER, _SECOND = ("dup-key", "first-secret"), ("bob-key", "bob-secret"), ("dup-key", "second-secret")


def test_an_acl_update_of_an_access_key_written_twice_in_a_file_moves_its_first_entry(tmp_path: Path) -> None:
    """``updateAccessConfig`` (acl/src/main/java/org/apache/rocketmq/acl/plain/PlainPermissionManager.java) stops at
    the first entry naming the key and moves it, edited, to the end; the other entry stays. The edited account is what
    the broker checks from then on: its in-memory account, and the file's last entry for the key when
    ``load(String)`` reloads the file (its map ``put`` keeps the last). Ours edited the first entry in place."""
    path = _accounts_file(tmp_path, _FIRST, _OTHER, _SECOND)
    manager = AclManager(AclFiles(tmp_path))
    manager.load()
    assert _admits(manager, *_FIRST) and not _admits(manager, *_SECOND)  # the first entry of a file wins at start
    manager.update_account(*account_change({"accessKey": "dup-key", "secretKey": "third-secret"}))
    assert _on_disk(path) == [_OTHER, _SECOND, ("dup-key", "third-secret")]
    assert _admits(manager, "dup-key", "third-secret") and not _admits(manager, *_SECOND)


def test_an_acl_delete_of_an_access_key_written_twice_in_a_file_removes_its_first_entry_only(tmp_path: Path) -> None:
    """``deleteAccessConfig`` (acl/src/main/java/org/apache/rocketmq/acl/plain/PlainPermissionManager.java) removes
    the first entry naming the key and writes the file: the other entry stays and is the account once the file is
    reloaded. Ours removed every entry of the key."""
    path = _accounts_file(tmp_path, _FIRST, _OTHER, _SECOND)
    manager = AclManager(AclFiles(tmp_path))
    manager.load()
    assert manager.delete_account("dup-key")
    assert _on_disk(path) == [_OTHER, _SECOND]
    assert _admits(manager, *_SECOND) and not _admits(manager, *_FIRST)


@pytest.mark.parametrize("written", ["", "accounts: [\n"], ids=["emptied", "unparsable"])
def test_a_reload_that_keeps_a_files_rules_keeps_the_first_entry_of_a_key_written_twice(
    tmp_path: Path, written: str
) -> None:
    """A file that becomes empty or does not parse keeps its rules as they were: 4.9.8's ``load(String)``
    (acl/src/main/java/org/apache/rocketmq/acl/plain/PlainPermissionManager.java) returns on "No data in {}, skip
    it", and ``AclUtils.getYamlDataObject``'s exception leaves it before it changed anything, so the entry the full
    load took for a key written twice (the first) stays the account. Ours took the file's last entry then, as if the
    file had been reloaded."""
    path = _accounts_file(tmp_path, _FIRST, _OTHER, _SECOND)
    manager = AclManager(AclFiles(tmp_path))
    manager.load()
    assert _admits(manager, *_FIRST) and not _admits(manager, *_SECOND)
    path.write_text(written)
    assert manager.reload_changed() == [path]
    assert _admits(manager, *_FIRST) and not _admits(manager, *_SECOND)
