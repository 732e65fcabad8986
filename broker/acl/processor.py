"""The ACL admin request codes 50-54 (RocketMQ's ``broker/src/main/java/org/apache/rocketmq/broker/processor/
AdminBrokerProcessor.java``): create or update an account, delete one, report the files' versions, replace a file's
global white list, and (4.7 to 4.9.7's GET_BROKER_CLUSTER_ACL_CONFIG, which rocketmq-dashboard's ACL page reads;
4.9.8 dropped it) every account and global white address. Each edit changes the owning ``plain_acl.yml`` as it is on
disk, rewrites it atomically and applies it at once (:class:`broker.acl.manager.AclManager`).

Answers as 4.9.8's: SUCCESS with no remark; on failure 209 / 210 / 211 with RocketMQ's remark, or the validation
message (a key of 6 characters or fewer, a bad ``res=PERM``, a file on disk that is not UTF-8 or does not parse, or
is empty while its last load was not: 4.9.8 fails an update then, but answers a delete SUCCESS deleting nothing).
Code 54 answers 4.9.7's body, ``{"globalWhiteAddrs": [...], "plainAccessConfigs": [{"accessKey", "secretKey", ...}]}``
(a field the file leaves out is left out). Stricter than 4.9.8: the admission check only lets admin accounts (or
white-listed addresses) send these codes (4.9.7 let any signed account read every secret key with code 54), and with
``aclEnable=false`` they are refused with a remark saying so (4.9.8 fails with a NullPointerException, or sends
nothing for code 52; 4.9.7 nothing for code 54).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import orjson

from broker.acl.permission import is_valid_perm_text
from broker.acl.plain_config import AccountConfig, AclConfigError, check_keys, split_resource_entry
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand
from remoting.processor import RequestContext

if TYPE_CHECKING:
    from broker.acl.manager import AclManager
    from broker.context import BrokerState

log = logging.getLogger(__name__)

REQUEST_CODES = (
    RequestCode.UPDATE_AND_CREATE_ACL_CONFIG,
    RequestCode.DELETE_ACL_CONFIG,
    RequestCode.GET_BROKER_CLUSTER_ACL_INFO,
    RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
    RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG,
)
_FAILED: dict[int, int] = {
    RequestCode.UPDATE_AND_CREATE_ACL_CONFIG: ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED,
    RequestCode.DELETE_ACL_CONFIG: ResponseCode.DELETE_ACL_CONFIG_FAILED,
    RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED,
    RequestCode.GET_BROKER_CLUSTER_ACL_INFO: ResponseCode.SYSTEM_ERROR,
    RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG: ResponseCode.SYSTEM_ERROR,
}
#: Header field -> AccountConfig attribute, for the optional fields of code 50.
_ACCOUNT_FIELDS = {
    "whiteRemoteAddress": "white_remote_address",
    "defaultTopicPerm": "default_topic_perm",
    "defaultGroupPerm": "default_group_perm",
    "topicPerms": "topic_perms",
    "groupPerms": "group_perms",
}

#: Fields code 50 sets only when not empty.
_DEFAULT_PERMS = frozenset({"defaultTopicPerm", "defaultGroupPerm"})


def _java(text: str | None) -> str:
    """A header field as Java's string concatenation writes it: ``null`` when missing."""
    return "null" if text is None else text


def _split(text: str | None) -> tuple[str, ...]:
    return tuple(item.strip() for item in (text or "").split(",") if item.strip())


def _split_entries(text: str | None) -> tuple[str, ...]:
    """Code 50's ``topicPerms``/``groupPerms`` split as 4.9.8 splits them (``UtilAll.split``, Java's
    ``String.split(",")`` in ``broker/src/main/java/org/apache/rocketmq/broker/processor/AdminBrokerProcessor.java``):
    only trailing empty items are dropped, a text without a comma (even ``""``) is the only item, items are not
    trimmed; so ``""`` or ``"a=PUB,,b=SUB"`` hold an empty entry, which :func:`_check_resource_perms` refuses."""
    if text is None:
        return ()
    if "," not in text:
        return (text,)
    items = text.split(",")
    while items and not items[-1]:
        items.pop()
    return tuple(items)


def _check_resource_perms(entries: tuple[str, ...]) -> None:
    """RocketMQ's ``Permission.checkResourcePerms`` with its messages."""
    for entry in entries:
        parts = split_resource_entry(entry)
        if len(parts) != 2:
            raise AclConfigError(
                f"Parse Resource format error for {entry}.\nThe expected resource format is 'Res=Perm'. "
                "For example: topicA=SUB"
            )
        if not is_valid_perm_text(parts[1]):
            raise AclConfigError(
                f"Parse resource permission error for {entry}.\n"
                "The expected permissions are 'SUB' or 'PUB' or 'SUB|PUB' or 'PUB|SUB'."
            )


def account_change(fields: dict[str, str]) -> tuple[AccountConfig, frozenset[str]]:
    """Code 50's header as an account and the attributes it sets. Raises :class:`AclConfigError`.

    An empty ``defaultTopicPerm`` / ``defaultGroupPerm`` sets nothing: 4.9.8's ``createAclAccessConfigMap``
    (``acl/src/main/java/org/apache/rocketmq/acl/plain/PlainPermissionManager.java``) writes them only when
    ``!StringUtils.isEmpty``, so an edit keeps the account's and a new account has none (DENY)."""
    access_key, secret_key = fields.get("accessKey"), fields.get("secretKey")
    check_keys(access_key, secret_key)
    fields = {key: value for key, value in fields.items() if key not in _DEFAULT_PERMS or value}
    change = AccountConfig(
        access_key=access_key,
        secret_key=secret_key,
        white_remote_address=fields.get("whiteRemoteAddress"),
        # decodeCommandCustomHeader: Boolean.parseBoolean(value), no trim (remoting/.../protocol/RemotingCommand.java)
        admin=fields.get("admin", "false").lower() == "true",
        default_topic_perm=fields.get("defaultTopicPerm"),
        default_group_perm=fields.get("defaultGroupPerm"),
        topic_perms=_split_entries(fields.get("topicPerms")),
        group_perms=_split_entries(fields.get("groupPerms")),
    )
    _check_resource_perms(change.topic_perms)
    _check_resource_perms(change.group_perms)
    given = {"secret_key"} | {attr for key, attr in _ACCOUNT_FIELDS.items() if key in fields}
    return change, frozenset(given)


def access_config_json(entry: AccountConfig) -> dict[str, object]:
    """One account as 4.9.7's ``PlainAccessConfig`` serializes it (fastjson leaves out a null field)."""
    out: dict[str, object] = {"accessKey": entry.access_key, "secretKey": entry.secret_key}
    out["whiteRemoteAddress"] = entry.white_remote_address
    out["admin"] = entry.admin
    out["defaultTopicPerm"] = entry.default_topic_perm
    out["defaultGroupPerm"] = entry.default_group_perm
    out["topicPerms"] = list(entry.topic_perms)
    out["groupPerms"] = list(entry.group_perms)
    return {key: value for key, value in out.items() if value is not None}


class AclAdminProcessor:
    """Serves codes 50-54 over ``manager`` (None: ACL is off); ``state`` gives code 52's broker and cluster names."""

    def __init__(self, manager: AclManager | None, state: BrokerState) -> None:
        self.manager = manager
        self.state = state

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        code = request.code
        if self.manager is None:
            return request.response(_FAILED[code], "ACL is not enabled on this broker (aclEnable=false)")
        fields = request.ext_fields
        try:
            if code == RequestCode.GET_BROKER_CLUSTER_ACL_INFO:
                return self._versions(request)
            if code == RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG:
                return self._all_config(request)
            if code == RequestCode.UPDATE_AND_CREATE_ACL_CONFIG:
                change, given = account_change(fields)
                self.manager.update_account(change, given)
            elif code == RequestCode.DELETE_ACL_CONFIG:
                # A missing field is only logged by decodeCommandCustomHeader; deleteAccessConfig answers false.
                access_key = fields.get("accessKey")
                if access_key is None or not self.manager.delete_account(access_key):
                    what = f"The accesskey[{_java(access_key)}]"
                    remark = f"{what} corresponding to accessConfig has been deleted failed."
                    return request.response(ResponseCode.DELETE_ACL_CONFIG_FAILED, remark)
            else:
                # updateGlobalWhiteAddrsConfig answers false for no list, or a path that is no file under the home.
                addresses = fields.get("globalWhiteAddrs")
                if addresses is None or not self.manager.update_global_white(
                    list(_split(addresses)), fields.get("aclFileFullPath")
                ):
                    remark = f"The globalWhiteAddresses[{_java(addresses)}] has been updated failed."
                    return request.response(ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED, remark)
        except (AclConfigError, OSError) as exc:
            log.warning("ACL admin request code %d from %s failed: %s", code, ctx.remote_address, exc)
            return request.response(_FAILED[code], str(exc))
        log.info("ACL admin request code %d from %s applied", code, ctx.remote_address)
        return request.response(ResponseCode.SUCCESS)

    def _all_config(self, request: RemotingCommand) -> RemotingCommand:
        assert self.manager is not None
        white, entries = self.manager.all_config()
        body = {"globalWhiteAddrs": white, "plainAccessConfigs": [access_config_json(e) for e in entries]}
        return request.response(ResponseCode.SUCCESS, body=orjson.dumps(body))

    def _versions(self, request: RemotingCommand) -> RemotingCommand:
        assert self.manager is not None
        fields = {
            "version": orjson.dumps(self.manager.default_version()).decode(),
            "allAclFileVersion": orjson.dumps(self.manager.versions()).decode(),
            "brokerName": self.state.config.broker_name,
            "brokerAddr": self.state.broker_addr,
            "clusterName": self.state.config.broker_cluster_name,
        }
        return request.response(ResponseCode.SUCCESS, ext_fields=fields)
