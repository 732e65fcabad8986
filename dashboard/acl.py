"""The ACL page's data and edits: RocketMQ 4.x ACL 1.0 (``plain_acl.yml``), as rocketmq-dashboard's ACL page
(``AclController``, ``AclServiceImpl``), through the admin client's ACL calls (:mod:`client.acl_admin`) only.

Reading (:func:`acl_overview`): every broker the name servers know, masters first, with its ``aclEnable`` setting
(GET_BROKER_CONFIG) or the error it answered; then the accounts and global white addresses of the first master, by
broker name, with ACL on that answers GET_BROKER_CLUSTER_ACL_CONFIG (54), as rocketmq-dashboard reads the first
master's. A broker that does not answer is named with its error, never left out; when no master could be read the
overview carries the last refusal (its code and remark), or the first broker's error, instead of accounts.

Edits go to every broker, masters and slaves, of every cluster, as rocketmq-dashboard's ``getBrokerAddrs`` (each
broker enforces its own ``plain_acl.yml``; the slaves' metadata sync does not copy it), each broker read (54) and
written (50, 51, 53) on its own, concurrently: adding an account refuses a key some broker already has and writes
nothing then; an update keeps each broker's topic and group permissions (it creates the account, with the ones the
page showed, on a broker that lacks it, so an update also repairs a broker that missed the add); a permission is
added, changed or removed in each broker's own list. One broker failing does not stop the others: the edit answers
each broker's outcome and raises :class:`EditFailed` naming those that refused (with their code and remark) or did
not answer, after the others were written.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final

import anyio
import attrs

from client.acl_admin import acl_config, delete_acl_config, update_acl_config, update_global_white
from client.admin import BROKER_FAILURES, Admin
from client.errors import MQBrokerError, MQClientError

#: The permissions an account's defaults and entries take (``Permission.java``'s texts).
PERMS: Final = ("DENY", "PUB", "SUB", "PUB|SUB", "SUB|PUB")
#: What a new account gets unless told otherwise (rocketmq-dashboard's add dialog).
DEFAULT_TOPIC_PERM: Final = "DENY"
DEFAULT_GROUP_PERM: Final = "SUB"


@attrs.frozen
class Broker:
    cluster: str
    name: str
    broker_id: int
    address: str

    @property
    def role(self) -> str:
        return "MASTER" if self.broker_id == 0 else "SLAVE"

    def row(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "brokerName": self.name, "brokerId": self.broker_id, "address": self.address}

    def label(self) -> str:
        return f"{self.name} {self.address}"


class EditFailed(MQClientError):
    """An edit some broker refused or did not answer. ``outcomes`` has every broker's; ``refusal`` is the first
    broker refusal (code and remark), if any."""

    def __init__(self, outcomes: list[dict[str, Any]], refusal: MQBrokerError | None) -> None:
        self.outcomes = outcomes
        self.refusal = refusal
        super().__init__("not applied on every broker:\n" + summary(outcomes))


def summary(outcomes: list[dict[str, Any]]) -> str:
    """One line per broker: what the edit did there, or its error."""
    lines = []
    for o in outcomes:
        what = f"failed: {o['error']['message']}" if o["error"] else o["done"]
        lines.append(f"{o['brokerName']} {o['address']}: {what}")
    return "\n".join(lines)


async def brokers(admin: Admin) -> list[Broker]:
    """Every broker address of every cluster, masters first, then by name and id."""
    info = await admin.cluster_info()
    cluster_of = {name: cluster for cluster, names in info.cluster_addr_table.items() for name in names}
    found = [
        Broker(cluster_of.get(name, ""), name, broker_id, addr)
        for name, bd in info.broker_addr_table.items()
        for broker_id, addr in bd.broker_addrs.items()
    ]
    return sorted(found, key=lambda b: (b.broker_id != 0, b.name, b.broker_id))


def error_body(exc: BaseException) -> dict[str, Any]:
    """An error as the JSON endpoints show it: the message, and a broker's code, remark and address."""
    body: dict[str, Any] = {"message": str(exc) or type(exc).__name__}
    if isinstance(exc, MQBrokerError):
        body.update(code=exc.code, remark=exc.remark, address=exc.address)
    return body


def account_row(raw: dict[str, Any], *, show_secret: bool) -> dict[str, Any]:
    """An account of GET_BROKER_CLUSTER_ACL_CONFIG with every field present (``None`` for one the file leaves out;
    the secret key ``None`` unless ``show_secret``)."""
    return {
        "accessKey": raw["accessKey"],
        "secretKey": raw.get("secretKey") if show_secret else None,
        "whiteRemoteAddress": raw.get("whiteRemoteAddress"),
        "admin": raw.get("admin") is True,
        "defaultTopicPerm": raw.get("defaultTopicPerm"),
        "defaultGroupPerm": raw.get("defaultGroupPerm"),
        "topicPerms": [str(p) for p in raw.get("topicPerms") or []],
        "groupPerms": [str(p) for p in raw.get("groupPerms") or []],
    }


async def acl_overview(admin: Admin, *, show_secrets: bool) -> dict[str, Any]:
    """``{"aclEnabled", "brokers": [row...], "source", "globalWhiteAddrs", "accounts", "error"}`` (see the module
    docstring); ``source`` is the master the accounts were read from (``None`` when none was)."""
    targets = await brokers(admin)
    settings: dict[str, dict[str, str] | BaseException] = {}

    async def ask(broker: Broker) -> None:
        try:
            settings[broker.address] = await admin.broker_config(broker.address)
        except BROKER_FAILURES as exc:
            settings[broker.address] = exc

    async with anyio.create_task_group() as tg:
        for broker in targets:
            tg.start_soon(ask, broker)
    rows = []
    for broker in targets:
        answer = settings[broker.address]
        enabled = None if isinstance(answer, BaseException) else answer.get("aclEnable", "false").lower() == "true"
        error = error_body(answer) if isinstance(answer, BaseException) else None
        rows.append({**broker.row(), "role": broker.role, "aclEnable": enabled, "error": error})
    known = [r["aclEnable"] for r in rows if r["aclEnable"] is not None]
    overview: dict[str, Any] = {
        # True: some broker has ACL on; False: every broker answered that it has not; None: no broker said it has.
        "aclEnabled": True if any(known) else (False if len(known) == len(rows) else None),
        "brokers": rows,
        "source": None,
        "globalWhiteAddrs": [],
        "accounts": [],
        "error": None,
    }
    for broker, row in zip(targets, rows, strict=True):
        if broker.broker_id != 0 or not row["aclEnable"]:
            continue
        try:
            config = await acl_config(admin, broker.address)
        except BROKER_FAILURES as exc:
            row["error"] = overview["error"] = error_body(exc)
            continue
        overview.update(source=broker.address, globalWhiteAddrs=config["globalWhiteAddrs"], error=None)
        accounts = [account_row(a, show_secret=show_secrets) for a in config["plainAccessConfigs"]]
        overview["accounts"] = accounts
        break
    if overview["source"] is None and overview["error"] is None:
        overview["error"] = next((r["error"] for r in rows if r["error"]), None)
    return overview


# -- edits ----------------------------------------------------------------------------------------------------

#: One broker's part of an edit: what it did there ("updated", "created", ...).
Step = Callable[[Broker], Awaitable[str]]


async def _on_every_broker(admin: Admin, step: Step) -> list[dict[str, Any]]:
    """Run ``step`` on every broker concurrently; their outcomes, or :class:`EditFailed` when one failed."""
    targets = await brokers(admin)
    if not targets:
        raise MQClientError("the name servers know no broker")
    outcomes: dict[str, dict[str, Any]] = {}
    refusals: dict[str, MQBrokerError] = {}

    async def run(broker: Broker) -> None:
        outcome: dict[str, Any] = {**broker.row(), "role": broker.role, "done": None, "error": None}
        try:
            outcome["done"] = await step(broker)
        except BROKER_FAILURES as exc:
            outcome["error"] = error_body(exc)
            if isinstance(exc, MQBrokerError):
                refusals[broker.address] = exc
        outcomes[broker.address] = outcome

    async with anyio.create_task_group() as tg:
        for broker in targets:
            tg.start_soon(run, broker)
    ordered = [outcomes[b.address] for b in targets]
    if any(o["error"] for o in ordered):
        first = next((refusals[b.address] for b in targets if b.address in refusals), None)
        raise EditFailed(ordered, first)
    return ordered


async def _account_on(admin: Admin, broker: Broker, access_key: str) -> dict[str, Any] | None:
    """``access_key``'s account on ``broker`` as it sends it, ``None`` when it has none."""
    config = await acl_config(admin, broker.address)
    return next((a for a in config["plainAccessConfigs"] if a["accessKey"] == access_key), None)


@attrs.frozen
class AccountChange:
    """An account as the page's form gives it; ``None``: not given."""

    access_key: str
    secret_key: str
    admin: bool = False
    white_remote_address: str | None = None
    default_topic_perm: str | None = None
    default_group_perm: str | None = None
    #: For a broker that lacks the account (an add, or an update repairing that broker).
    topic_perms: tuple[str, ...] = ()
    group_perms: tuple[str, ...] = ()


async def _write(admin: Admin, broker: Broker, change: AccountChange, *, perms: bool) -> None:
    """UPDATE_AND_CREATE_ACL_CONFIG of ``change`` to ``broker``; its permission lists only with ``perms`` (and only
    those with entries: a broker keeps what it is not sent)."""
    await update_acl_config(
        admin,
        broker.address,
        change.access_key,
        change.secret_key,
        white_remote_address=change.white_remote_address,
        default_topic_perm=change.default_topic_perm,
        default_group_perm=change.default_group_perm,
        topic_perms=",".join(change.topic_perms) if perms and change.topic_perms else None,
        group_perms=",".join(change.group_perms) if perms and change.group_perms else None,
        is_admin=change.admin,
    )


async def add_account(admin: Admin, change: AccountChange) -> list[dict[str, Any]]:
    """Create the account on every broker; when some broker already has its access key, nothing is written and
    :class:`ValueError` names the brokers (rocketmq-dashboard's ``exist accessKey``). A broker that cannot be read
    is written all the same and named with its error."""
    targets = await brokers(admin)
    holders: list[str] = []

    async def look(broker: Broker) -> None:
        try:
            if await _account_on(admin, broker, change.access_key) is not None:
                holders.append(broker.label())
        except BROKER_FAILURES:
            pass  # the write below meets the same failure and names it

    async with anyio.create_task_group() as tg:
        for broker in targets:
            tg.start_soon(look, broker)
    if holders:
        raise ValueError(f"access key {change.access_key} already exists on {', '.join(sorted(holders))}")
    with_defaults = attrs.evolve(
        change,
        white_remote_address=change.white_remote_address or None,
        default_topic_perm=change.default_topic_perm or DEFAULT_TOPIC_PERM,
        default_group_perm=change.default_group_perm or DEFAULT_GROUP_PERM,
    )

    async def create(broker: Broker) -> str:
        await _write(admin, broker, with_defaults, perms=True)
        return "created"

    return await _on_every_broker(admin, create)


async def update_account(admin: Admin, change: AccountChange) -> list[dict[str, Any]]:
    """Replace the account's secret key, admin flag, white remote address and default permissions (those given) on
    every broker, keeping each broker's topic and group permissions; a broker without the account gets it whole.
    A broker answers success but adds nothing back when the ACL file owning the key had it removed by hand (4.9.8's
    ``updateAccessConfig``: the revocation stands until the broker's next full load), and GET_BROKER_CLUSTER_ACL_CONFIG
    cannot tell that case apart, so the outcome still reads "created" (or "updated" when another file lists a
    copy of the key)."""

    async def update(broker: Broker) -> str:
        if await _account_on(admin, broker, change.access_key) is None:
            await _write(admin, broker, change, perms=True)
            return "created"
        await _write(admin, broker, change, perms=False)
        return "updated"

    return await _on_every_broker(admin, update)


async def delete_account(admin: Admin, access_key: str) -> list[dict[str, Any]]:
    """DELETE_ACL_CONFIG on every broker that has the account (rocketmq-dashboard's ``isExistAccessKey``)."""

    async def delete(broker: Broker) -> str:
        if await _account_on(admin, broker, access_key) is None:
            return "absent"
        await delete_acl_config(admin, broker.address, access_key)
        return "deleted"

    return await _on_every_broker(admin, delete)


def resource_of(entry: str) -> str:
    """The topic or group of a ``res=PERM`` entry."""
    return entry.split("=", 1)[0].strip()


def check_resource(kind: str, resource: str) -> None:
    """A topic or group name a ``res=PERM`` comma list can carry; ValueError otherwise."""
    if kind not in ("topic", "group"):
        raise ValueError(f"kind must be topic or group, got {kind!r}")
    if not resource or any(c in resource for c in "=, \t"):
        raise ValueError(f"{kind} {resource!r} cannot be named in a permission (empty, or has '=', ',' or a blank)")


def with_perm(entries: list[str], resource: str, perm: str | None) -> list[str]:
    """``entries`` with ``resource``'s entry set to ``perm`` (in the place of its first entry, or added at the end),
    or removed when ``perm`` is ``None``."""
    out: list[str] = []
    placed = perm is None
    for entry in entries:
        if resource_of(entry) != resource:
            out.append(entry)
        elif not placed:
            out.append(f"{resource}={perm}")
            placed = True
    return out if placed else [*out, f"{resource}={perm}"]


async def set_permission(
    admin: Admin, access_key: str, kind: str, resource: str, perm: str | None
) -> list[dict[str, Any]]:
    """Add, change (``perm``) or remove (``None``) the account's permission on topic or group ``resource`` on every
    broker, each in its own list. A broker without the account fails with a message saying so."""
    check_resource(kind, resource)
    field = "topicPerms" if kind == "topic" else "groupPerms"

    async def edit(broker: Broker) -> str:
        account = await _account_on(admin, broker, access_key)
        if account is None:
            raise MQClientError(f"no account {access_key} on this broker: update the account to copy it there")
        before = [str(e) for e in account.get(field) or []]
        after = with_perm(before, resource, perm)
        if after == before:
            return "unchanged"
        if not after:
            await _rewrite_without(admin, broker, account, field)
            return "removed"
        listed = ",".join(after)
        secret = str(account.get("secretKey") or "")
        is_admin = account.get("admin") is True
        if kind == "topic":
            await update_acl_config(admin, broker.address, access_key, secret, topic_perms=listed, is_admin=is_admin)
        else:
            await update_acl_config(admin, broker.address, access_key, secret, group_perms=listed, is_admin=is_admin)
        had = any(resource_of(e) == resource for e in before)
        return "removed" if perm is None else "updated" if had else "added"

    return await _on_every_broker(admin, edit)


async def _rewrite_without(admin: Admin, broker: Broker, account: dict[str, Any], field: str) -> None:
    """The account written again without its ``field`` list: UPDATE_AND_CREATE_ACL_CONFIG cannot empty a list (4.9.8's
    AdminBrokerProcessor splits ``""`` into one empty entry, which ``Permission.checkResourcePerms`` refuses, and an
    absent list keeps the old one), so the account is deleted and created again with everything else it had. A
    write that fails after the delete is said loudly: the account is then missing on that broker."""
    access_key = str(account.get("accessKey") or "")
    others = [str(e) for e in account.get("groupPerms" if field == "topicPerms" else "topicPerms") or []]

    def text(name: str) -> str | None:
        value = account.get(name)
        return None if value is None or value == "" else str(value)

    await delete_acl_config(admin, broker.address, access_key)
    try:
        await update_acl_config(
            admin,
            broker.address,
            access_key,
            str(account.get("secretKey") or ""),
            white_remote_address=text("whiteRemoteAddress"),
            default_topic_perm=text("defaultTopicPerm"),
            default_group_perm=text("defaultGroupPerm"),
            topic_perms=",".join(others) if others and field == "groupPerms" else None,
            group_perms=",".join(others) if others and field == "topicPerms" else None,
            is_admin=account.get("admin") is True,
        )
    except BROKER_FAILURES as exc:
        raise MQClientError(
            f"account {access_key} was deleted to empty its {field} and could not be written again ({exc}): add it"
            " again"
        ) from exc


async def set_global_white(admin: Admin, addresses: list[str]) -> list[dict[str, Any]]:
    """Replace the global white addresses of every broker's default ACL file (UPDATE_GLOBAL_WHITE_ADDRS_CONFIG)."""
    for address in addresses:
        if not address or "," in address:
            raise ValueError(f"a white address cannot be empty or hold a comma: {address!r}")

    async def replace(broker: Broker) -> str:
        await update_global_white(admin, broker.address, ",".join(addresses))
        return "updated"

    return await _on_every_broker(admin, replace)
