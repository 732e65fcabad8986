"""ACL permissions: the bits, their text form in ``plain_acl.yml``, the check, and the admin-only request codes
(RocketMQ's ``acl/src/main/java/org/apache/rocketmq/acl/common/Permission.java``).

``DENY`` wins over everything; ``ANY`` (never written in a file) asks for PUB or SUB; otherwise the needed and owned
bits must share one. Text that is not ``PUB``, ``SUB``, ``PUB|SUB``, ``SUB|PUB`` or ``DENY`` parses as DENY, as in
RocketMQ, so a typo never grants anything.
"""

from __future__ import annotations

from typing import Final

from remoting.codec.codes import RequestCode

DENY: Final = 1
ANY: Final = 2
PUB: Final = 4
SUB: Final = 8

_BY_TEXT: Final = {"PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB, "SUB|PUB": PUB | SUB, "DENY": DENY}

#: Codes only an ``admin: true`` account may send: RocketMQ's five, RocketMQ 5's bulk form of one of them
#: (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST), plus (stricter than 4.9.8, which lets any signed account manage ACLs)
#: the ACL-management codes, among them 4.9.7's GET_BROKER_CLUSTER_ACL_CONFIG, whose answer holds every secret key.
ADMIN_CODES: Final = frozenset(
    {
        RequestCode.UPDATE_AND_CREATE_TOPIC,
        RequestCode.UPDATE_BROKER_CONFIG,
        RequestCode.DELETE_TOPIC_IN_BROKER,
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST,
        RequestCode.DELETE_SUBSCRIPTIONGROUP,
        RequestCode.UPDATE_AND_CREATE_ACL_CONFIG,
        RequestCode.DELETE_ACL_CONFIG,
        RequestCode.GET_BROKER_CLUSTER_ACL_INFO,
        RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
        RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG,
    }
)


def parse_perm(text: object) -> int:
    """A permission from its text (trimmed); ``None`` or anything unknown is DENY."""
    if not isinstance(text, str):
        return DENY
    return _BY_TEXT.get(text.strip(), DENY)


def is_valid_perm_text(text: str) -> bool:
    return text.strip() in _BY_TEXT


def check_permission(needed: int, owned: int) -> bool:
    """Whether ``owned`` grants ``needed``."""
    if owned & DENY:
        return False
    if needed & ANY:
        return bool(owned & (PUB | SUB))
    return bool(needed & owned)
