"""The broker's ACL rules: every ``plain_acl.yml`` loaded, the account index, the check of one request, and the
edits the ACL admin codes make (RocketMQ's
``acl/src/main/java/org/apache/rocketmq/acl/plain/PlainPermissionManager.java``).

Files (4.9.8's layout under ``rocketmqHome``, each named by its absolute path): every ``*.yml`` / ``*.yaml`` under
``conf/acl/`` (recursively, into linked directories too, ``tools.yml`` included), then the default file
``rocketmq.acl.plain.file`` (``conf/plain_acl.yml``, under ``rocketmqHome`` even when absolute; created empty when
missing). The watcher looks at all of them but ``conf/acl/tools.yml`` (srvutil's ``AclFileWatchService``): a change to
that file waits for the next full load. An access key belongs to the first file that names it at a full load; later
duplicates are logged and ignored. The owner is kept as 4.9.8's ``accessKeyTable`` keeps it: a file reloaded alone takes
only keys no file owns, and keeps its keys even those it no longer names (refused with "No PlainAccessResource for
accessKey=..." until a full load; an edit's delete frees the key), so a copy in another file never takes a key over
between full loads. Within one file, the first entry of a key counts after a full load (the start, or files added or
removed: 4.9.8's ``load()``), the last once that file is reloaded alone (a change the watcher sees, or an edit:
``load(String)``, whose map ``put`` keeps the last). The global white lists of all files are joined.

:meth:`AclManager.validate` runs RocketMQ's order: global white list, access key present, account known, the
account's white address, signature, ``RMQ_SYS_TRACE_TOPIC`` publish shortcut, admin flag, then each needed resource
against the account's entries or its defaults. A refusal raises :class:`AclDenied` with RocketMQ's message and the
Java frame its remark names; where RocketMQ's match of a white address throws (:mod:`broker.acl.remote_address`), with
that Java exception.

Loading never half-applies: a file that does not parse or compile (whatever the parser raises) is logged, the rules
from its last good load (or none, the first time) stay and the other files still load; it is read again only once it
changes. A file that becomes empty (or only comments) keeps its previous rules, as RocketMQ's per-file
``load(String)`` skips a file with no data; empty at a full load (the start, files added or removed: ``load()``), it
simply has no accounts.

Edits (:meth:`update_account`, :meth:`delete_account`, :meth:`update_global_white`) re-read the owning file from disk,
as RocketMQ's do (an update moves the key's first entry, edited, to the end of the file; a delete removes that entry
only), so a hand edit not yet reloaded (a revocation) is kept, then write it atomically with the next
``dataVersion`` (through a link, to the file it names, as 4.9.8's ``FileWriter``) and apply it at once; they raise
:class:`~broker.acl.plain_config.AclConfigError` (the file on disk is not UTF-8 or does not parse, has no data while
its last load or write had some, or the edit is refused) or ``OSError`` and then change nothing. A delete of an
account its file on disk no longer names answers False and changes nothing.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Final

import attrs

from broker.acl.permission import ADMIN_CODES, PUB, check_permission
from broker.acl.plain_config import (
    RETRY_PREFIX,
    Account,
    AccountConfig,
    AclConfigError,
    AclFile,
    build_acl_file,
    parse_acl_file,
    read_acl_file,
)
from broker.acl.remote_address import AddressMatcher, AddressMatchError
from broker.acl.resources import Needed, ResourceError, needed_resources
from remoting.codec.acl_signing import ACCESS_KEY, signature_matches
from remoting.codec.command import RemotingCommand
from remoting.codec.java_hash_order import java_hash_map_order
from remoting.codec.message_properties import java_hash
from store.metadata_files import replace_atomically

log = logging.getLogger(__name__)

TRACE_TOPIC: Final = "RMQ_SYS_TRACE_TOPIC"
_MANAGER: Final = "org.apache.rocketmq.acl.plain.PlainPermissionManager"


class AclDenied(Exception):
    """A refused request: ``message`` is RocketMQ's AclException text (or, when ``java_text`` is given, the reason of
    another exception RocketMQ's check throws, whose ``toString`` that is), ``frame`` the Java frame that raised it."""

    def __init__(self, message: str, frame: str, access_key: str | None = None, java_text: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.frame = frame
        self.access_key = access_key
        self.java_text = java_text or f"org.apache.rocketmq.acl.common.AclException: {message}"

    @property
    def remark(self) -> str:
        """What a Java broker puts in the response's remark (``RemotingHelper.exceptionSimpleDesc``)."""
        return f"{self.java_text}, {self.frame}"


def _frame(method: str, line: int) -> str:
    return f"{_MANAGER}.{method}(PlainPermissionManager.java:{line})"


#: Remembered permission grants before the set starts again (a bound against clients naming ever-new topics).
_MAX_GRANTED: Final = 4096
#: Grants naming more resources than this are not remembered (their size, not their count, would bound the memory).
_MAX_REMEMBERED_RESOURCES: Final = 16

PARSE_FRAME: Final = "org.apache.rocketmq.acl.plain.PlainAccessValidator.parse(PlainAccessValidator.java:134)"


def _absolute(home: Path | str | None) -> Path | None:
    return None if home is None else Path(os.path.abspath(home))


@attrs.frozen
class AclFiles:
    """Where the files are: ``home`` (``rocketmqHome``, made absolute so every file has one name, whatever the
    working directory or the spelling of a path; None when unset: no file at all, as in RocketMQ) and the default
    file relative to it."""

    home: Path | None = attrs.field(converter=_absolute)
    default_file: str = "conf/plain_acl.yml"

    @property
    def default_path(self) -> Path:
        """The default file, always under the home: ``PlainPermissionManager`` names it ``dealFilePath(fileHome +
        File.separator + rocketmq.acl.plain.file)``, so an absolute setting ``/etc/acl.yml`` is ``<home>/etc/acl.yml``
        (a path join would leave the home). Raises :class:`AclConfigError` without a home."""
        if self.home is None:
            raise AclConfigError("rocketmqHome (ROCKETMQ_HOME) is not set: there is no ACL file")
        return Path(os.path.normpath(f"{self.home}{os.sep}{self.default_file}"))

    def paths(self) -> list[Path]:
        """Every file to load, in load order (the ``conf/acl`` tree sorted, then the default file while it exists, as
        4.9.8's ``PlainPermissionManager.load`` and ``AclFileWatchService`` list it: deleting it is a file removed)."""
        if self.home is None:
            return []
        found = _acl_tree(self.home / "conf" / "acl")
        default = self.default_path
        if default not in found and default.exists():
            found.append(default)
        return found

    def watched(self, paths: list[Path]) -> list[Path]:
        """The files of ``paths`` the watcher looks at: all but ``conf/acl/tools.yml`` (unless it is the default
        file), as 4.9.8's ``AclFileWatchService.getAllAclFiles`` skips ``<aclPath>/tools.yml`` alone; a change to
        that file waits for a full load, which reads it."""
        if self.home is None:
            return paths
        unwatched = Path(os.path.normpath(self.home / "conf" / "acl" / "tools.yml"))
        return [p for p in paths if p != unwatched or p == self.default_path]


def _acl_tree(directory: Path) -> list[Path]:
    """Every ``*.yml`` / ``*.yaml`` file under ``directory``, sorted, following links to directories as 4.9.8's
    ``PlainPermissionManager.getAllAclFiles`` does (``java.io.File.isDirectory`` follows them), each real directory
    once: a link back up the tree is not followed for ever. A ``tools.yml`` too: that method skips only
    ``<home>/conf/tools.yml`` (``MixAll.ACL_CONF_TOOLS_FILE``), which is never under ``conf/acl``."""
    found: list[Path] = []
    seen: set[str] = set()
    for root, dirs, files in os.walk(directory, followlinks=True):
        real = os.path.realpath(root)
        if real in seen:
            dirs.clear()
            continue
        seen.add(real)
        for name in files:
            path = Path(os.path.normpath(os.path.join(root, name)))
            if path.suffix in (".yml", ".yaml") and path.is_file():
                found.append(path)
    return sorted(found)


class AclManager:
    """See the module docstring. Build it, then :meth:`load`; :mod:`broker.acl.watcher` calls :meth:`reload_changed`."""

    def __init__(self, files: AclFiles) -> None:
        self.files = files
        self._loaded: dict[Path, AclFile] = {}
        self._mtimes: dict[Path, tuple[int, int, int]] = {}
        #: The files of the last full load, in load order; a file reloaded alone keeps its place in it.
        self._order: list[Path] = []
        self._accounts: dict[str, Account] = {}
        self._owner: dict[str, Path] = {}
        #: Files reloaded alone since the last full load: their last entry of a key counts (see the module docstring).
        self._reloaded_alone: set[Path] = set()
        self._global_white: tuple[AddressMatcher, ...] = ()
        self._granted: set[tuple[object, ...]] = set()

    # -- loading -----------------------------------------------------------------------------------------------

    def load(self) -> None:
        """Load every file (creating the default one when missing); bad files are logged and skipped."""
        if self.files.home is None:
            log.warning("ACL is on but rocketmqHome (ROCKETMQ_HOME) is not set: no account can be loaded")
            return
        self.reload_changed(force=True)

    def _create_default(self) -> None:
        """Create the default file, empty, when it is missing, as every full load of 4.9.8 does
        (``PlainPermissionManager.assureAclConfigFilesExist``)."""
        default = self.files.default_path
        if default.exists():
            return
        try:
            default.parent.mkdir(parents=True, exist_ok=True)
            default.touch()
        except OSError as exc:
            log.warning("cannot create the default ACL file %s: %s", default, exc)

    def reload_changed(self, *, force: bool = False) -> list[Path]:
        """Re-read the watched files (:meth:`AclFiles.watched`) whose modification time, size or inode changed (all
        files, after creating the default file when missing, when the watched list changed or ``force``: a full load,
        which drops the rules of files that vanished). Returns the files read. Blocking (small files, a few stats)."""
        watched = self.files.watched(self.files.paths())
        changed = force or set(watched) != set(self._mtimes)
        if changed:
            if self.files.home is not None:
                self._create_default()  # a full load: the default file deleted comes back empty
            self._order = self.files.paths()
            watched = self.files.watched(self._order)
        paths = self._order
        mtimes = {path: _mtime(path) for path in watched}
        read = paths if changed else [p for p in watched if mtimes[p] != self._mtimes.get(p)]
        for path in set(self._loaded) - set(paths):
            del self._loaded[path]
        self._mtimes = mtimes  # before reading, as AclFileWatchService: a bad file is not retried every round
        if changed:
            self._reloaded_alone.clear()  # PlainPermissionManager.load(): the first entry of a key counts
        alone: list[Path] = []
        for path in read:
            if self._read(path, full=changed) and not changed:
                # load(String): the last one does, once it read the file; on "No data in {}, skip it" or a file
                # that does not parse it leaves before changing anything, so the kept rules keep their entry
                # (acl/src/main/java/org/apache/rocketmq/acl/plain/PlainPermissionManager.java).
                self._reloaded_alone.add(path)
                alone.append(path)
        if changed:
            self._owner = self._first_owners(paths)
        for path in alone:
            self._claim(path)
        if read or changed:
            self._reindex(paths)
        return read

    def _read(self, path: Path, full: bool) -> bool:
        """Load one file; any failure is that file's alone (its previous rules stay, the others still load). Whether
        its rules were replaced. ``full``: read by a full load, where a file with no data has no rules."""
        try:
            parsed = read_acl_file(path)
        except FileNotFoundError:
            self._loaded.pop(path, None)
            return False
        except Exception as exc:  # PyYAML and the int() of a counter raise more than AclConfigError
            kept = "keeping its previous rules" if path in self._loaded else "no rules from it"
            log.error("ACL file %s not loaded (%s): %s: %s", path, kept, type(exc).__name__, exc)
            return False
        if parsed.empty and path in self._loaded and not full:
            # PlainPermissionManager.load(String): "No data in {}, skip it"; load() builds new tables, skipping the
            # file ("No data in file {}"), so a full load drops its rules
            # (acl/src/main/java/org/apache/rocketmq/acl/plain/PlainPermissionManager.java).
            log.warning("No data in %s, skip it (keeping its previous rules)", path)
            return False
        self._loaded[path] = parsed
        log.info("ACL file %s loaded: %d accounts, version %d", path, len(parsed.accounts), parsed.data_version.counter)
        return True

    def _first_owners(self, order: list[Path]) -> dict[str, Path]:
        """Each key's owner at a full load: the first file naming it (``PlainPermissionManager.load()`` builds a new
        ``accessKeyTable``, a key already in it logged as repeated and ignored)."""
        owner: dict[str, Path] = {}
        for path in order:
            acl = self._loaded.get(path)
            for account in () if acl is None else acl.accounts:
                holder = owner.setdefault(account.access_key, path)
                if holder != path:
                    log.warning(
                        "ACL access key %s of %s is already defined in %s; ignored", account.access_key, path, holder
                    )
        return owner

    def _claim(self, path: Path) -> None:
        """The keys of ``path``, just reloaded alone, that no other file owns become its own; those another file owns
        stay that file's, and the keys it owned and no longer names stay owned by it, without an account: 4.9.8's
        ``load(String)`` takes a key only when ``accessKeyTable`` has no file for it or names this one, and never
        removes one (acl/src/main/java/org/apache/rocketmq/acl/plain/PlainPermissionManager.java)."""
        acl = self._loaded.get(path)
        for account in () if acl is None else acl.accounts:
            holder = self._owner.setdefault(account.access_key, path)
            if holder != path:
                log.warning(
                    "ACL access key %s of %s is already defined in %s; ignored", account.access_key, path, holder
                )

    def _reindex(self, order: list[Path]) -> None:
        """Each owned key's account from its owner's rules (the first entry of the key in the file, the last in a
        file reloaded alone), and the global white lists of every file, joined in load order."""
        white: list[AddressMatcher] = []
        by_file: dict[Path, dict[str, Account]] = {}
        for path in order:
            acl = self._loaded.get(path)
            if acl is None:
                continue
            white.extend(acl.global_white)
            found: dict[str, Account] = {}
            last_wins = path in self._reloaded_alone
            for account in acl.accounts:
                if last_wins or account.access_key not in found:
                    found[account.access_key] = account
            by_file[path] = found
        accounts: dict[str, Account] = {}
        for key, path in self._owner.items():
            owned = by_file.get(path, {}).get(key)
            if owned is not None:
                accounts[key] = owned
        self._accounts, self._global_white = accounts, tuple(white)
        self._granted = set()  # the rules changed: every cached permission decision is stale

    # -- the check ---------------------------------------------------------------------------------------------

    def validate(self, ip: str, cmd: RemotingCommand) -> None:
        """Admit ``cmd`` from ``ip`` or raise :class:`AclDenied` (see the module docstring)."""
        access_key = cmd.ext_fields.get(ACCESS_KEY)
        try:
            needed = needed_resources(cmd)
        except ResourceError as exc:
            raise AclDenied(str(exc), PARSE_FRAME, access_key) from None
        if self._global_white and self.globally_white(ip):
            return
        self.check(ip, access_key, functools.partial(signature_matches, cmd), cmd.code, needed)

    def globally_white(self, ip: str) -> bool:
        """Whether ``ip`` matches a ``globalWhiteRemoteAddresses`` pattern (then nothing else is checked), trying them
        in order; raises :class:`AclDenied` where RocketMQ's match of the first unmatched pattern throws."""
        return any(_white(matches, ip, None) for matches in self._global_white)

    def check(
        self, ip: str, access_key: str | None, signed_by: Callable[[str], bool], code: int, needed: Needed
    ) -> None:
        """The checks after the global white list, shared by the remoting and the gRPC front ends: the account of
        ``access_key``, its white address, ``signed_by(secret key)``, the trace-topic shortcut, then
        :func:`check_perm` of ``needed`` for request ``code``, whose grants are remembered per (access key, code,
        resources) until the rules next change (a steady producer is checked by one set lookup). Raises
        :class:`AclDenied`."""
        if access_key is None:
            raise AclDenied("No accessKey is configured", _frame("validate", 664))
        account = self._accounts.get(access_key)
        if account is None:
            if access_key in self._owner:  # its file no longer names it: accessKeyTable still does, until a full load
                raise AclDenied(
                    f"No PlainAccessResource for accessKey={access_key}", _frame("validate", 675), access_key
                )
            raise AclDenied(f"No acl config for {access_key}", _frame("validate", 668), access_key)
        if _white(account.white, ip, access_key):
            return
        if not signed_by(account.secret_key):
            raise AclDenied(f"Check signature failed for accessKey={access_key}", _frame("validate", 684), access_key)
        if needed.get(TRACE_TOPIC) == PUB:
            return
        if len(needed) > _MAX_REMEMBERED_RESOURCES:  # a heartbeat naming thousands of topics: not worth keeping
            check_perm(code, needed, account)
            return
        decision = (access_key, code, *needed.items())
        if decision in self._granted:
            return
        check_perm(code, needed, account)  # raises when refused: only grants are remembered
        if len(self._granted) >= _MAX_GRANTED:
            self._granted.clear()
        self._granted.add(decision)

    # -- reads for the admin codes -----------------------------------------------------------------------------

    def versions(self) -> dict[str, dict[str, int]]:
        """``{path: {counter, timestamp}}`` of every loaded file with data: 4.9.8's ``PlainPermissionManager.load``
        (``acl/src/main/java/org/apache/rocketmq/acl/plain/PlainPermissionManager.java``) skips a file with no data
        before recording its ``DataVersion``, so an empty file is not listed until an edit writes it."""
        return {str(path): acl.data_version.to_json() for path, acl in self._loaded.items() if not acl.empty}

    def default_version(self) -> dict[str, int]:
        acl = self._loaded.get(self.files.default_path) if self.files.home is not None else None
        return {"counter": 0, "timestamp": 0} if acl is None else acl.data_version.to_json()

    def account(self, access_key: str) -> Account | None:
        return self._accounts.get(access_key)

    def all_config(self) -> tuple[list[str], list[AccountConfig]]:
        """The global white addresses of every file, joined, and every account as its file writes it, the first
        file naming a key winning (4.9.7's ``getAllAclConfig``, over the rules as loaded). Between full loads this is
        not always the entry enforced: a key stays with the file that owns it (see the module docstring), so a copy
        in an earlier file is listed while the owner's entry is checked, and a key its owner no longer names is listed
        from another file's copy while it is refused."""
        white: list[str] = []
        entries: list[AccountConfig] = []
        seen: set[str | None] = set()
        for path in self._order:
            acl = self._loaded.get(path)
            if acl is None:
                continue
            white.extend(acl.global_white_addresses)
            for entry in acl.entries:
                if entry.access_key not in seen:
                    seen.add(entry.access_key)
                    entries.append(entry)
        return white, entries

    # -- edits -------------------------------------------------------------------------------------------------

    def update_account(self, change: AccountConfig, given: frozenset[str]) -> None:
        """Create ``change.access_key`` in the default file, or edit it where it lives: the fields named in ``given``
        (attribute names of :class:`AccountConfig`) and ``admin`` are replaced, the others kept, and the entry (the
        key's first in the file) moves to the end of the file, as 4.9.8's ``updateAccessConfig``
        (``acl/src/main/java/org/apache/rocketmq/acl/plain/PlainPermissionManager.java``) removes its map from the
        ``accounts`` list and appends it edited. A key its owning file on disk no longer names (removed by hand, not
        reloaded yet, or reloaded alone since) is not added back to a file that still has an ``accounts`` list: the
        file is written as it is, with the next version, and the revocation stands; only a file without ``accounts``
        gets it back ("Maybe deleted in file, add it back" in ``updateAccessConfig``)."""
        assert change.access_key is not None
        owner = self._owner.get(change.access_key)
        path = owner or self.files.default_path
        acl = self._on_disk(path)
        entries = list(acl.entries)
        for i, entry in enumerate(entries):
            if entry.access_key == change.access_key:
                updates = {name: getattr(change, name) for name in given | {"admin"}}
                del entries[i]
                entries.append(attrs.evolve(entry, **updates))
                break
        else:
            if owner is None or acl.document.get("accounts") is None:
                entries.append(change)
            else:
                log.warning("ACL access key %s is no longer in %s: not added back", change.access_key, path)
        self._write(path, acl, acl.global_white_addresses, entries)

    def delete_account(self, access_key: str) -> bool:
        """Remove the account's first entry from its file (another entry of the key stays, and is the account from
        then on, as 4.9.8's ``deleteAccessConfig`` stops at the first). False, changing nothing, when no file has it
        or its file on disk no longer names it (moved or removed by hand; the next reload decides); True, changing
        nothing, when that file is empty or gone on disk ("No data found in {} when deleting access config of {}"),
        as ``deleteAccessConfig`` answers."""
        path = self._owner.get(access_key)
        if path is None:
            return False
        acl = self._read_disk(path)
        if acl.empty:
            log.warning("No data found in %s when deleting access config of %s", path, access_key)
            return True
        entries = list(acl.entries)
        for i, entry in enumerate(entries):
            if entry.access_key == access_key:
                del entries[i]
                break
        else:
            return False
        del self._owner[access_key]  # deleteAccessConfig removes it from accessKeyTable: any file may take it again
        self._write(path, acl, acl.global_white_addresses, entries)
        return True

    def update_global_white(self, addresses: list[str], file_path: str | None) -> bool:
        """Replace the global white list of ``file_path`` (the default file when empty). False, changing nothing, when
        the file does not exist, is a directory or is not under ``rocketmqHome``, as 4.9.8's
        ``updateGlobalWhiteAddrsConfig`` answers (the reason is logged)."""
        path = self.files.default_path if not file_path else Path(os.path.abspath(file_path))
        home = self.files.home or Path("/")
        if not path.is_file() or home not in path.parents:
            log.warning("ACL file %s is not an existing file under %s: global white list not updated", file_path, home)
            return False
        acl = self._on_disk(path)
        self._write(path, acl, addresses, list(acl.entries))
        return True

    def _on_disk(self, path: Path) -> AclFile:
        """``path`` as it is on disk now, not as last loaded: RocketMQ's edits re-read the file
        (``AclUtils.getYamlDataObject``), so an edit keeps a hand edit the watcher has not loaded yet. A missing file
        is empty. Raises :class:`AclConfigError` when the file is not UTF-8 or does not parse, or when it has no data
        while its last load had some (truncated by an editor or a push about to write it again: an edit would drop
        every other account of it; 4.9.8's update and delete of its accounts write nothing then), ``OSError`` when it
        cannot be read."""
        acl = self._read_disk(path)
        loaded = self._loaded.get(path)
        if acl.empty and loaded is not None and not loaded.empty:
            raise AclConfigError(f"No data in {path}, which had some when last loaded: not editing it now")
        return acl

    @staticmethod
    def _read_disk(path: Path) -> AclFile:
        """``path`` parsed as it is on disk (a missing file is empty); raises as :meth:`_on_disk`."""
        try:
            return read_acl_file(path)
        except FileNotFoundError:
            return parse_acl_file("")

    def _write(
        self, path: Path, acl: AclFile, white: list[str] | tuple[str, ...], entries: list[AccountConfig]
    ) -> None:
        updated = build_acl_file(acl.document, white, entries, acl.data_version.next()).as_written()
        # Through a link to the file it names, as AclUtils.writeDataObject's FileWriter writes: the link stays.
        target = Path(os.path.realpath(path))
        data = updated.dump().encode("utf-8")
        replace_atomically(target, data, target.with_name(target.name + ".tmp"), keep_mode=True)
        self._loaded[path] = updated
        if self.files.watched([path]):  # conf/acl/tools.yml stays unseen by the watcher
            self._mtimes[path] = _mtime(path)
        self._reloaded_alone.add(path)  # as the watcher's load(String) of the file just written
        self._claim(path)
        self._reindex(self._order)


def _white(matches: AddressMatcher, ip: str, access_key: str | None) -> bool:
    """``matches(ip)``; where RocketMQ's match throws, the exception escapes ``validate`` and refuses the request:
    raises :class:`AclDenied` with that exception's text."""
    try:
        return matches(ip)
    except AddressMatchError as exc:
        raise AclDenied(exc.reason, exc.frame, access_key, exc.java_text) from None


def check_perm(code: int, needed: Needed, account: Account) -> None:
    """The admin flag, then each needed resource against the account, in Java's order (:func:`_in_hash_map_order`;
    ``PlainPermissionManager.checkPerm``)."""
    if code in ADMIN_CODES and not account.admin:
        raise AclDenied(
            f"Need admin permission for request code={code}, but accessKey={account.access_key} is not",
            _frame("checkPerm", 581),
            account.access_key,
        )
    if not needed or (account.perms is None and account.admin):
        return
    owned = account.perms or {}
    for resource in _in_hash_map_order(needed):
        perm = needed[resource]
        is_group = resource.startswith(RETRY_PREFIX)
        entry = owned.get(resource)
        if entry is None:
            entry = account.default_group_perm if is_group else account.default_topic_perm
        if not check_permission(perm, entry):
            name = resource[len(RETRY_PREFIX) :] if is_group else resource
            line = 606 if resource not in owned else 611
            raise AclDenied(
                f"No default permission for {'group' if is_group else 'topic'}:{name}",
                _frame("checkPerm", line),
                account.access_key,
            )


def _in_hash_map_order(needed: Needed) -> list[str]:
    """The resources in the order 4.9.8's ``checkPerm`` walks them: ``PlainAccessResource.resourcePermMap`` is a
    ``HashMap`` filled in ``needed``'s order (a resource put again keeps its place, as in ``needed``), so the first
    refused one, which the remark names, is the first by bucket, not the first put."""
    names = list(needed)
    if len(names) < 2:
        return names
    return [names[i] for i in java_hash_map_order([java_hash(name) for name in names])]


def _mtime(path: Path) -> tuple[int, int, int]:
    """What tells a rewrite: modification time, size and inode (a rewrite within one timestamp tick, or one that
    keeps the old time, ``cp -p``, still changes the size or the inode); all -1 when the file cannot be read."""
    try:
        st = path.stat()
    except OSError:
        return -1, -1, -1
    return st.st_mtime_ns, st.st_size, st.st_ino
