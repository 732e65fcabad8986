"""ACL reload faults, as RocketMQ 4.9.8's per-file reload (``PlainPermissionManager.load(String)`` called by
``srvutil/.../AclFileWatchService.java``) handles them: a file that becomes empty (or only comments) keeps its
previous rules ("No data in {}, skip it"); a file that fails to parse for any reason (PyYAML's ValueError for an
impossible date, anything else) keeps its old rules, is not retried until it changes (its modification time is
recorded before the load) and never stops the other files from reloading. The ACL admin edits (codes 50, 51, 53)
re-read their file from disk as ``updateAccessConfig`` / ``deleteAccessConfig`` / ``updateGlobalWhiteAddrsConfig``
do (``AclUtils.getYamlDataObject``), so a hand edit the watcher has not loaded yet is kept; an edit of a file that is
not UTF-8 or does not parse, or that is empty on disk while its last load was not, fails and writes nothing (a delete
then answers True, as 4.9.8's); a delete of an account its file no longer names answers False. Found by reviews;
failed before."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing

import broker.acl.plain_config
from broker.acl.manager import AclDenied, AclFiles, AclManager
from broker.acl.plain_config import AccountConfig, AclConfigError, parse_acl_file
from broker.acl.watcher import WATCH_INTERVAL
from broker.embedded import EmbeddedCluster
from remoting.client import RemotingClient
from remoting.codec.acl_signing import SessionCredentials, sign
from remoting.codec.codes import RequestCode
from remoting.codec.command import request
from tests.acl.conftest import PLAIN_ACL
from tests.acl.test_acl_reload import USER, _refused
from tests.conftest import SMALL_STORE

TEAM = SessionCredentials("team-account", "team-secret")
TEAM_YML = (
    "accounts:\n  - {accessKey: team-account, secretKey: team-secret, defaultTopicPerm: SUB, defaultGroupPerm: SUB}\n"
)
DATED = PLAIN_ACL + "  - accessKey: dated-account\n    secretKey: 2024-13-45\n"


async def test_an_emptied_file_keeps_its_previous_rules(
    acl_cluster: EmbeddedCluster, acl_home: Path, autojump_clock: trio.testing.MockClock
) -> None:
    acl_file = acl_home / "conf" / "plain_acl.yml"
    async with RemotingClient() as client:
        assert not await _refused(client, acl_cluster, USER, "topicB")  # RocketMQ: topicB=PUB|SUB, groupB=PUB|SUB
        acl_file.write_text("# being rewritten\n")
        await trio.sleep(WATCH_INTERVAL + 0.5)
        assert not await _refused(client, acl_cluster, USER, "topicB"), "an empty file dropped every account"


async def test_a_revocation_in_one_file_applies_while_another_file_is_broken(
    tmp_path: Path, acl_home: Path, autojump_clock: trio.testing.MockClock
) -> None:
    team = acl_home / "conf" / "acl" / "team.yml"
    team.parent.mkdir(parents=True)
    team.write_text(TEAM_YML)
    async with (
        EmbeddedCluster(tmp_path / "c", acl_enable=True, rocketmq_home=str(acl_home), **SMALL_STORE) as cluster,
        RemotingClient() as client,
    ):
        assert not await _refused(client, cluster, TEAM, "topicB")
        (acl_home / "conf" / "plain_acl.yml").write_text(DATED)  # an unquoted secret PyYAML reads as a bad date
        await trio.sleep(WATCH_INTERVAL + 0.5)
        team.write_text("accounts: []\n")  # team-account revoked
        await trio.sleep(3 * WATCH_INTERVAL)
        assert await _refused(client, cluster, TEAM, "topicB"), "the revoked account is still admitted"


def _manager(home: Path, default: str, team: str) -> AclManager:
    (home / "conf" / "acl").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(default)
    (home / "conf" / "acl" / "team.yml").write_text(team)
    manager = AclManager(AclFiles(home))
    manager.load()
    return manager


@pytest.mark.parametrize("text", ["", "# only a comment\n", "{}\n"])
def test_a_file_with_no_data_has_no_accounts_at_first_and_keeps_its_rules_later(tmp_path: Path, text: str) -> None:
    manager = _manager(tmp_path, PLAIN_ACL, text)
    assert manager.account("team-account") is None
    (tmp_path / "conf" / "acl" / "team.yml").write_text(TEAM_YML)
    manager.reload_changed()
    assert manager.account("team-account") is not None
    (tmp_path / "conf" / "acl" / "team.yml").write_text(text + "\n")
    manager.reload_changed()
    assert manager.account("team-account") is not None


def test_a_broken_file_is_not_retried_until_it_changes(tmp_path: Path) -> None:
    manager = _manager(tmp_path, PLAIN_ACL, TEAM_YML)
    default = tmp_path / "conf" / "plain_acl.yml"
    default.write_text(DATED)
    assert manager.reload_changed() == [default]
    assert manager.account("RocketMQ") is not None  # its previous rules stay
    assert manager.reload_changed() == []


def test_any_parse_failure_is_that_files_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    manager = _manager(tmp_path, PLAIN_ACL, TEAM_YML)

    def explode(text: str) -> object:
        if "RocketMQ" in text:
            raise RuntimeError("an unexpected parser failure")
        return parse_acl_file(text)

    monkeypatch.setattr(broker.acl.plain_config, "parse_acl_file", explode)
    (tmp_path / "conf" / "plain_acl.yml").write_text(PLAIN_ACL + "# touched\n")
    (tmp_path / "conf" / "acl" / "team.yml").write_text("accounts: []\n")
    manager.reload_changed()
    assert manager.account("team-account") is None
    assert manager.account("RocketMQ") is not None


def test_values_pyyaml_cannot_build_are_file_errors_and_an_infinite_counter_is_no_version() -> None:
    with pytest.raises(AclConfigError, match="not valid YAML"):
        parse_acl_file(DATED)
    assert parse_acl_file("dataVersion: [{counter: .inf, timestamp: 1}]\n").data_version.counter == 0


def _edit(manager: AclManager, edit: str) -> None:
    if edit == "update_account":
        manager.update_account(AccountConfig("carol-key", "carol-secret"), frozenset({"secret_key"}))
    elif edit == "delete_account":
        assert manager.delete_account("RocketMQ")
    elif not manager.update_global_white(["10.1.2.3"], None):  # a file that is gone: refused without a raise
        raise AclConfigError("the global white list was not updated")


@pytest.mark.parametrize("edit", ["update_account", "delete_account", "update_global_white"])
def test_an_admin_edit_keeps_a_revocation_made_in_the_file_since_the_last_reload(tmp_path: Path, edit: str) -> None:
    """An operator revokes team-account by editing the file; an mqadmin edit arriving before the 5 s watcher reloads
    changes the file as it is on disk, so the revoked account is neither written back nor admitted."""
    manager = _manager(tmp_path, PLAIN_ACL, "")
    default = tmp_path / "conf" / "plain_acl.yml"
    default.write_text(PLAIN_ACL + TEAM_YML.removeprefix("accounts:\n"))
    manager.reload_changed()
    assert manager.account("team-account") is not None
    default.write_text(PLAIN_ACL)  # team-account revoked by hand; the watcher has not run yet
    _edit(manager, edit)
    assert "team-account" not in default.read_text(), "the edit wrote the revoked account back into the file"
    assert manager.account("team-account") is None
    manager.reload_changed(force=True)
    with pytest.raises(AclDenied, match="No acl config for team-account"):
        manager.validate("10.9.9.9", sign(request(RequestCode.SEND_MESSAGE, {"topic": "T"}), TEAM))


@pytest.mark.parametrize("edit", ["update_account", "delete_account", "update_global_white"])
def test_an_admin_edit_of_a_file_that_does_not_parse_fails_and_changes_nothing(tmp_path: Path, edit: str) -> None:
    manager = _manager(tmp_path, PLAIN_ACL, "")
    default = tmp_path / "conf" / "plain_acl.yml"
    default.write_text(DATED)
    with pytest.raises(AclConfigError, match="not valid YAML"):
        _edit(manager, edit)
    assert default.read_text() == DATED
    assert manager.account("RocketMQ") is not None and manager.account("carol-key") is None


def _edit_existing(manager: AclManager, edit: str) -> None:
    if edit == "update_existing_account":
        manager.update_account(AccountConfig("rocketmq2", "new-secret-2"), frozenset({"secret_key"}))
    else:
        _edit(manager, edit)


def _no_data_on_disk(tmp_path: Path, on_disk: str) -> tuple[AclManager, Path]:
    manager = _manager(tmp_path, PLAIN_ACL, "")
    default = tmp_path / "conf" / "plain_acl.yml"
    if on_disk == "empty":
        default.write_text("")
        manager.reload_changed()
    else:
        default.unlink()
    assert manager.account("RocketMQ") is not None
    return manager, default


@pytest.mark.parametrize("edit", ["update_existing_account", "update_account", "update_global_white"])
@pytest.mark.parametrize("on_disk", ["empty", "missing"])
def test_an_admin_edit_while_the_file_has_no_data_on_disk_fails_and_keeps_the_files_other_accounts(
    tmp_path: Path, edit: str, on_disk: str
) -> None:
    """plain_acl.yml is momentarily empty (an editor or a config push truncates it before writing it again: the
    watcher keeps its previous rules, "No data in {}, skip it") or gone (before the watcher drops its rules). An mqadmin
    edit arriving then must not write a file of that one account (or none), which would drop every other account:
    4.9.8's update of an existing key fails then (``getYamlDataObject`` gives null). Every update of such a file is
    refused."""
    manager, default = _no_data_on_disk(tmp_path, on_disk)
    with pytest.raises(AclConfigError):
        _edit_existing(manager, edit)
    assert (default.read_text() == "") if on_disk == "empty" else not default.exists(), "the refused edit wrote"
    assert manager.account("RocketMQ") is not None and manager.account("rocketmq2") is not None


@pytest.mark.parametrize("on_disk", ["empty", "missing"])
def test_a_delete_while_the_file_has_no_data_on_disk_succeeds_deleting_nothing(tmp_path: Path, on_disk: str) -> None:
    """The same moment, a delete: 4.9.8's ``deleteAccessConfig`` answers true ("No data found in {} when deleting
    access config of {}", so code 51 answers SUCCESS), writing nothing and keeping the key in ``accessKeyTable``."""
    manager, default = _no_data_on_disk(tmp_path, on_disk)
    assert manager.delete_account("RocketMQ")
    assert (default.read_text() == "") if on_disk == "empty" else not default.exists(), "the delete wrote"
    assert manager.account("RocketMQ") is not None and manager.account("rocketmq2") is not None


def test_a_file_empty_since_its_first_load_takes_a_new_account(tmp_path: Path) -> None:
    manager = _manager(tmp_path, "", "")
    manager.update_account(AccountConfig("carol-key", "carol-secret"), frozenset({"secret_key"}))
    assert manager.account("carol-key") is not None
    assert "carol-key" in (tmp_path / "conf" / "plain_acl.yml").read_text()


def test_an_emptied_file_given_its_first_account_by_an_admin_edit_refuses_the_next_edit(tmp_path: Path) -> None:
    """The broker creates plain_acl.yml empty; mqadmin adds its first account. The edit's write is what the file
    had when last loaded, so once an editor or a push truncates it, the next edit is refused: it would write a file of
    its one account, dropping the first at the next reload."""
    manager = _manager(tmp_path, "", "")
    default = tmp_path / "conf" / "plain_acl.yml"
    manager.update_account(AccountConfig("alice-key", "alice-secret"), frozenset({"secret_key"}))
    default.write_text("")
    manager.reload_changed()  # "No data in {}, skip it": alice-key stays
    with pytest.raises(AclConfigError):
        manager.update_account(AccountConfig("carol-key", "carol-secret"), frozenset({"secret_key"}))
    assert default.read_text() == "", "the refused edit wrote the emptied file"
    assert manager.account("alice-key") is not None and manager.account("carol-key") is None


def test_with_a_relative_rocketmq_home_an_emptied_file_refuses_a_global_white_edit_and_is_listed_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``rocketmqHome=.`` or a relative ``ROCKETMQ_HOME``: every file has one (absolute) name, so the white-list edit
    finds the last load of the truncated plain_acl.yml and is refused, and a written file is listed once."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "home" / "conf").mkdir(parents=True)
    default = tmp_path / "home" / "conf" / "plain_acl.yml"
    default.write_text(PLAIN_ACL)
    manager = AclManager(AclFiles(Path("home")))
    manager.load()
    manager.update_global_white(["10.1.2.3"], None)
    assert list(manager.versions()) == [str(default)]
    default.write_text("")
    manager.reload_changed()  # "No data in {}, skip it": the accounts stay
    with pytest.raises(AclConfigError):
        manager.update_global_white(["10.1.2.4"], None)
    assert default.read_text() == "", "the refused edit wrote the emptied file"
    assert manager.account("RocketMQ") is not None


def test_deleting_an_account_moved_by_hand_to_another_file_fails_and_changes_nothing(tmp_path: Path) -> None:
    """The operator moved team-account from conf/acl/team.yml into plain_acl.yml; the watcher has not run yet. The
    delete finds nothing to delete in team.yml and answers False (code 51's DELETE_ACL_CONFIG_FAILED), as 4.9.8's
    ``deleteAccessConfig`` does when the key is not in its file on disk, rather than a success while the account is
    admitted again later. team.yml keeps the key at the watcher's per-file reloads (``accessKeyTable``); the
    full load of a restart gives it to plain_acl.yml."""
    manager = _manager(tmp_path, PLAIN_ACL, TEAM_YML)
    team = tmp_path / "conf" / "acl" / "team.yml"
    team.write_text("accounts: []\n")
    (tmp_path / "conf" / "plain_acl.yml").write_text(PLAIN_ACL + TEAM_YML.removeprefix("accounts:\n"))
    assert not manager.delete_account("team-account")
    assert team.read_text() == "accounts: []\n"
    manager.reload_changed()
    assert manager.account("team-account") is None
    manager.reload_changed(force=True)
    assert manager.account("team-account") is not None


@pytest.mark.parametrize("edit", ["update_account", "delete_account", "update_global_white"])
def test_an_admin_edit_of_a_file_that_is_not_utf8_fails_with_the_acl_error(tmp_path: Path, edit: str) -> None:
    """A hand edit leaves a Latin-1 byte in a comment: the edit fails with the code's failure answer (4.9.8's
    ``getYamlDataObject`` wraps every failure in an AclException), not an unexpected UnicodeDecodeError (SYSTEM_ERROR);
    the watcher keeps the file's previous rules."""
    manager = _manager(tmp_path, PLAIN_ACL, "")
    default = tmp_path / "conf" / "plain_acl.yml"
    latin1 = b"# r\xe9vision\n" + PLAIN_ACL.encode()
    default.write_bytes(latin1)
    with pytest.raises(AclConfigError, match="not UTF-8"):
        _edit(manager, edit)
    assert default.read_bytes() == latin1
    manager.reload_changed()
    assert manager.account("RocketMQ") is not None


def test_a_file_emptied_when_a_file_is_added_loses_its_rules_as_a_full_load_reads_it(tmp_path: Path) -> None:
    """A file emptied while another is added (one watch round, or two: the count change comes first) is read by the
    full ``PlainPermissionManager.load()`` (acl/src/main/java/org/apache/rocketmq/acl/plain/
    PlainPermissionManager.java; srvutil/.../AclFileWatchService.java calls it on ``onFileNumChanged``), which builds
    new tables and skips a file with no data ("No data in file {}"): its accounts are gone, as after a restart. Only
    the per-file ``load(String)`` keeps an emptied file's rules. Ours kept them on a full load too, until a restart."""
    manager = _manager(tmp_path, PLAIN_ACL, TEAM_YML)
    assert manager.account("team-account") is not None
    (tmp_path / "conf" / "acl" / "team.yml").write_text("")
    (tmp_path / "conf" / "acl" / "ops.yml").write_text(
        "accounts:\n  - {accessKey: ops-account, secretKey: ops-secret-1}\n"
    )
    manager.reload_changed()
    assert manager.account("ops-account") is not None and manager.account("RocketMQ") is not None
    assert manager.account("team-account") is None, "the emptied file's account outlived a full load"


TEAM_ELSEWHERE = "accounts:\n  - {accessKey: team-account, secretKey: other-secret, defaultTopicPerm: PUB}\n"


def _send_as(manager: AclManager, secret: str) -> None:
    cmd = request(RequestCode.SEND_MESSAGE, {"topic": "T"})
    manager.validate("10.9.9.9", sign(cmd, SessionCredentials("team-account", secret)))


def test_a_key_added_by_hand_to_an_earlier_file_stays_with_the_file_that_owns_it(tmp_path: Path) -> None:
    """team-account lives in plain_acl.yml; an operator also writes it into conf/acl/team.yml (loaded first). The
    watcher's per-file ``load(String)`` keeps a key with the file ``accessKeyTable`` names (4.9.8's
    acl/src/main/java/org/apache/rocketmq/acl/plain/PlainPermissionManager.java), so the copy does not take the
    account over until a full load (a restart, a file added or removed) makes the first file its owner."""
    manager = _manager(tmp_path, PLAIN_ACL + TEAM_YML.removeprefix("accounts:\n"), "accounts: []\n")
    (tmp_path / "conf" / "acl" / "team.yml").write_text(TEAM_ELSEWHERE)
    manager.reload_changed()
    account = manager.account("team-account")
    assert account is not None and account.secret_key == "team-secret", "a copy in another file took the key over"
    manager.reload_changed(force=True)
    account = manager.account("team-account")
    assert account is not None and account.secret_key == "other-secret"


def test_a_key_removed_by_hand_from_its_file_is_not_taken_by_another_files_copy_until_a_full_load(
    tmp_path: Path,
) -> None:
    """team-account lives in conf/acl/team.yml, a copy of it (ignored) in plain_acl.yml. Removed from team.yml by
    hand, team.yml still owns the key after the watcher's ``load(String)`` (it never drops a key from
    ``accessKeyTable``): the account is refused with "No PlainAccessResource for accessKey=..." until a full load lets
    the copy in plain_acl.yml have it."""
    team_pub = TEAM_ELSEWHERE.replace("other-secret", "team-secret")
    manager = _manager(tmp_path, PLAIN_ACL + TEAM_ELSEWHERE.removeprefix("accounts:\n"), team_pub)
    _send_as(manager, "team-secret")
    (tmp_path / "conf" / "acl" / "team.yml").write_text("accounts: []\n")
    manager.reload_changed()
    assert manager.account("team-account") is None, "the other file's copy took the key over at a per-file reload"
    with pytest.raises(AclDenied, match="No PlainAccessResource for accessKey=team-account") as denied:
        _send_as(manager, "other-secret")
    assert "PlainPermissionManager.validate(PlainPermissionManager.java:675)" in denied.value.remark
    manager.reload_changed(force=True)
    _send_as(manager, "other-secret")


@pytest.mark.parametrize(("left", "re_added"), [(PLAIN_ACL, False), ("globalWhiteRemoteAddresses: []\n", True)])
def test_an_update_of_an_account_removed_by_hand_re_adds_it_only_to_a_file_without_accounts(
    tmp_path: Path, left: str, re_added: bool
) -> None:
    """An operator removes team-account from plain_acl.yml by hand; an update of it arrives before the watcher
    reloads. 4.9.8's ``updateAccessConfig`` edits the key's entry in its file as read from disk: with an ``accounts``
    list not naming it, nothing is added (the file is written with the next version, the revocation stands); with
    no ``accounts`` at all it adds it back ("Maybe deleted in file, add it back")."""
    manager = _manager(tmp_path, PLAIN_ACL + TEAM_YML.removeprefix("accounts:\n"), "")
    default = tmp_path / "conf" / "plain_acl.yml"
    version = manager.default_version()["counter"]
    default.write_text(left)
    manager.update_account(AccountConfig("team-account", "new-secret"), frozenset({"secret_key"}))
    assert ("team-account" in default.read_text()) is re_added
    assert manager.default_version()["counter"] == version + 1
    manager.reload_changed()
    account = manager.account("team-account")
    if re_added:
        assert account is not None and account.secret_key == "new-secret"
    else:
        assert account is None, "the update brought back an account revoked by hand"
