"""ACL administration over an :class:`~client.admin.Admin` (Java's ``DefaultMQAdminExt`` ACL calls): request codes
50-54 to one broker (54 is 4.9.7's ``examineBrokerClusterAclConfig``, which 4.9.8 dropped); :mod:`client.mqadmin_acl`
picks the brokers of a ``-c`` cluster as 4.9.8's ``mqadmin`` ACL commands do (masters and slaves for the edits,
masters only for the version report).

A refusal raises :class:`~client.errors.MQBrokerError` with the broker's code and remark (209 / 210 / 211, or 1 with
the ACL refusal when the signing account is not an admin).
"""

from __future__ import annotations

from typing import Any

import orjson

from client.admin import Admin
from remoting.codec.codes import RequestCode
from remoting.codec.command import request
from remoting.codec.errors import CodecError

__all__ = [
    "acl_config",
    "acl_versions",
    "delete_acl_config",
    "update_acl_config",
    "update_global_white",
]


async def update_acl_config(
    admin: Admin,
    addr: str,
    access_key: str,
    secret_key: str,
    *,
    white_remote_address: str | None = None,
    default_topic_perm: str | None = None,
    default_group_perm: str | None = None,
    topic_perms: str | None = None,
    group_perms: str | None = None,
    is_admin: bool = False,
) -> None:
    """UPDATE_AND_CREATE_ACL_CONFIG (50); ``topic_perms`` / ``group_perms`` are ``res=PERM`` comma lists."""
    fields = {"accessKey": access_key, "secretKey": secret_key, "admin": "true" if is_admin else "false"}
    optional = {
        "whiteRemoteAddress": white_remote_address,
        "defaultTopicPerm": default_topic_perm,
        "defaultGroupPerm": default_group_perm,
        "topicPerms": topic_perms,
        "groupPerms": group_perms,
    }
    fields.update({key: value for key, value in optional.items() if value is not None})
    await admin._call(addr, request(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, fields))


async def delete_acl_config(admin: Admin, addr: str, access_key: str) -> None:
    """DELETE_ACL_CONFIG (51)."""
    await admin._call(addr, request(RequestCode.DELETE_ACL_CONFIG, {"accessKey": access_key}))


async def update_global_white(admin: Admin, addr: str, addresses: str, file_path: str | None = None) -> None:
    """UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53): ``addresses`` is a comma list; no path means the default file (4.9.8's
    broker needs the field, so an empty one is sent)."""
    fields = {"globalWhiteAddrs": addresses, "aclFileFullPath": file_path or ""}
    await admin._call(addr, request(RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, fields))


async def acl_versions(admin: Admin, addr: str) -> dict[str, Any]:
    """GET_BROKER_CLUSTER_ACL_INFO (52): the broker's names, the default file's version and every file's."""
    fields = (await admin._call(addr, request(RequestCode.GET_BROKER_CLUSTER_ACL_INFO))).ext_fields
    return {
        "clusterName": fields.get("clusterName", ""),
        "brokerName": fields.get("brokerName", ""),
        "brokerAddr": fields.get("brokerAddr", addr),
        "version": orjson.loads(fields.get("version") or "{}"),
        "allAclFileVersion": orjson.loads(fields.get("allAclFileVersion") or "{}"),
    }


async def acl_config(admin: Admin, addr: str) -> dict[str, Any]:
    """GET_BROKER_CLUSTER_ACL_CONFIG (54): ``{"globalWhiteAddrs": [...], "plainAccessConfigs": [{accessKey,
    secretKey, whiteRemoteAddress, admin, defaultTopicPerm, defaultGroupPerm, topicPerms, groupPerms}]}`` as the
    broker sends it (a field it leaves out is absent; both lists always there). A body that is not that JSON raises
    :class:`~remoting.codec.errors.CodecError`."""
    body = bytes((await admin._call(addr, request(RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG))).body or b"{}")
    try:
        decoded = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise CodecError(f"the ACL config from {addr} is not JSON: {exc}") from None
    if not isinstance(decoded, dict):
        raise CodecError(f"the ACL config from {addr} is not a JSON object")
    white = decoded.get("globalWhiteAddrs") or []
    accounts = decoded.get("plainAccessConfigs") or []
    if not isinstance(white, list) or not isinstance(accounts, list):
        raise CodecError(f"the ACL config from {addr} has no lists of white addresses and accounts")
    if not all(isinstance(a, dict) and isinstance(a.get("accessKey"), str) for a in accounts):
        raise CodecError(f"the ACL config from {addr} has an account without an access key")
    return {"globalWhiteAddrs": [str(w) for w in white], "plainAccessConfigs": accounts}
