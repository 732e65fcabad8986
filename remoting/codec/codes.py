"""RocketMQ 4.x request, response, language and serialize-type codes (docs/protocol.md#2-request-and-response-codes,
docs/protocol.md#19-language-codes).

Plain ``IntEnum`` tables. Unknown numbers are legal on the wire: code that receives a command keeps the raw ``int``
and only converts with :func:`request_name` / ``ResponseCode(x)`` where it needs a name.
"""

from __future__ import annotations

import enum
import re
from typing import Final


class SerializeType(enum.IntEnum):
    """High byte of the header word. JSON and ROCKETMQ are RocketMQ's; CBOR is rocketrio's own.

    CBOR is only ever sent to a peer that used it first (responses mirror the request), so a RocketMQ peer never
    sees it.
    """

    JSON = 0
    ROCKETMQ = 1
    CBOR = 0xCB


class LanguageCode(enum.IntEnum):
    JAVA = 0
    CPP = 1
    DOTNET = 2
    PYTHON = 3
    DELPHI = 4
    ERLANG = 5
    RUBY = 6
    OTHER = 7
    HTTP = 8
    GO = 9
    PHP = 10
    OMS = 11
    RUST = 12
    NODE_JS = 13


class RequestCode(enum.IntEnum):
    SEND_MESSAGE = 10
    PULL_MESSAGE = 11
    QUERY_MESSAGE = 12
    QUERY_BROKER_OFFSET = 13
    QUERY_CONSUMER_OFFSET = 14
    UPDATE_CONSUMER_OFFSET = 15
    UPDATE_AND_CREATE_TOPIC = 17
    GET_ALL_TOPIC_CONFIG = 21
    GET_TOPIC_CONFIG_LIST = 22
    GET_TOPIC_NAME_LIST = 23
    UPDATE_BROKER_CONFIG = 25
    GET_BROKER_CONFIG = 26
    TRIGGER_DELETE_FILES = 27
    GET_BROKER_RUNTIME_INFO = 28
    SEARCH_OFFSET_BY_TIMESTAMP = 29
    GET_MAX_OFFSET = 30
    GET_MIN_OFFSET = 31
    GET_EARLIEST_MSG_STORETIME = 32
    VIEW_MESSAGE_BY_ID = 33
    HEART_BEAT = 34
    UNREGISTER_CLIENT = 35
    CONSUMER_SEND_MSG_BACK = 36
    END_TRANSACTION = 37
    GET_CONSUMER_LIST_BY_GROUP = 38
    CHECK_TRANSACTION_STATE = 39
    NOTIFY_CONSUMER_IDS_CHANGED = 40
    LOCK_BATCH_MQ = 41
    UNLOCK_BATCH_MQ = 42
    GET_ALL_CONSUMER_OFFSET = 43
    GET_ALL_DELAY_OFFSET = 45
    GET_TIMER_CHECK_POINT = 60  # RocketMQ 5
    GET_TIMER_METRICS = 61  # RocketMQ 5
    CHECK_CLIENT_CONFIG = 46
    UPDATE_AND_CREATE_ACL_CONFIG = 50
    DELETE_ACL_CONFIG = 51
    GET_BROKER_CLUSTER_ACL_INFO = 52
    UPDATE_GLOBAL_WHITE_ADDRS_CONFIG = 53
    GET_BROKER_CLUSTER_ACL_CONFIG = 54  # RocketMQ 4.7-4.9.7 (removed in 4.9.8): the accounts and white list
    PUT_KV_CONFIG = 100
    GET_KV_CONFIG = 101
    DELETE_KV_CONFIG = 102
    REGISTER_BROKER = 103
    UNREGISTER_BROKER = 104
    GET_ROUTEINFO_BY_TOPIC = 105
    GET_BROKER_CLUSTER_INFO = 106
    UPDATE_AND_CREATE_SUBSCRIPTIONGROUP = 200
    GET_ALL_SUBSCRIPTIONGROUP_CONFIG = 201
    GET_TOPIC_STATS_INFO = 202
    GET_CONSUMER_CONNECTION_LIST = 203
    GET_PRODUCER_CONNECTION_LIST = 204
    WIPE_WRITE_PERM_OF_BROKER = 205
    GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206
    DELETE_SUBSCRIPTIONGROUP = 207
    GET_CONSUME_STATS = 208
    SUSPEND_CONSUMER = 209
    RESUME_CONSUMER = 210
    RESET_CONSUMER_OFFSET_IN_CONSUMER = 211
    RESET_CONSUMER_OFFSET_IN_BROKER = 212
    ADJUST_CONSUMER_THREAD_POOL = 213
    WHO_CONSUME_THE_MESSAGE = 214
    DELETE_TOPIC_IN_BROKER = 215
    DELETE_TOPIC_IN_NAMESRV = 216
    GET_KVLIST_BY_NAMESPACE = 219
    RESET_CONSUMER_CLIENT_OFFSET = 220
    GET_CONSUMER_STATUS_FROM_CLIENT = 221
    INVOKE_BROKER_TO_RESET_OFFSET = 222
    INVOKE_BROKER_TO_GET_CONSUMER_STATUS = 223
    GET_TOPICS_BY_CLUSTER = 224
    UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST = 225  # RocketMQ 5: mqadmin updateSubGroupList
    QUERY_TOPIC_CONSUME_BY_WHO = 300
    REGISTER_FILTER_SERVER = 301
    REGISTER_MESSAGE_FILTER_CLASS = 302
    QUERY_CONSUME_TIME_SPAN = 303
    GET_SYSTEM_TOPIC_LIST_FROM_NS = 304
    GET_SYSTEM_TOPIC_LIST_FROM_BROKER = 305
    CLEAN_EXPIRED_CONSUMEQUEUE = 306
    GET_CONSUMER_RUNNING_INFO = 307
    QUERY_CORRECTION_OFFSET = 308
    CONSUME_MESSAGE_DIRECTLY = 309
    SEND_MESSAGE_V2 = 310
    GET_UNIT_TOPIC_LIST = 311
    GET_HAS_UNIT_SUB_TOPIC_LIST = 312
    GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST = 313
    CLONE_GROUP_OFFSET = 314
    VIEW_BROKER_STATS_DATA = 315
    CLEAN_UNUSED_TOPIC = 316
    GET_BROKER_CONSUME_STATS = 317
    UPDATE_NAMESRV_CONFIG = 318
    GET_NAMESRV_CONFIG = 319
    SEND_BATCH_MESSAGE = 320
    QUERY_CONSUME_QUEUE = 321
    QUERY_DATA_VERSION = 322
    RESUME_CHECK_HALF_MESSAGE = 323
    SEND_REPLY_MESSAGE = 324
    SEND_REPLY_MESSAGE_V2 = 325
    PUSH_REPLY_MESSAGE_TO_CLIENT = 326
    ADD_WRITE_PERM_OF_BROKER = 327
    GET_ALL_PRODUCER_INFO = 328
    DELETE_EXPIRED_COMMITLOG = 329
    QUERY_TOPICS_BY_CONSUMER = 343  # RocketMQ 5: the topics a group has offsets on
    QUERY_SUBSCRIPTION_BY_CONSUMER = 345  # RocketMQ 5: an online group's subscription of one topic
    GET_TOPIC_CONFIG = 351
    GET_SUBSCRIPTIONGROUP_CONFIG = 352  # RocketMQ 5: one group's config (a 5.x proxy asks it)
    RECALL_MESSAGE = 370  # RocketMQ 5.3: take back a timer message before its time
    QUERY_ASSIGNMENT = 400  # RocketMQ 5: a push consumer's queues and their mode (PULL / POP)
    SET_MESSAGE_REQUEST_MODE = 401
    GET_BROKER_HA_STATUS = 907  # RocketMQ 5: the store's replication state (mqadmin haStatus)
    #: RocketMQ 5's pop consumption (remoting/src/main/java/org/apache/rocketmq/remoting/protocol/RequestCode.java).
    POP_MESSAGE = 200050
    ACK_MESSAGE = 200051
    PEEK_MESSAGE = 200052
    CHANGE_MESSAGE_INVISIBLETIME = 200053
    NOTIFICATION = 200054
    POLLING_INFO = 200055
    POP_ROLLBACK = 200056  # 5.3: mqadmin exportPopRecord (the pop KV store to the file store)
    BATCH_ACK_MESSAGE = 200151


class ResponseCode(enum.IntEnum):
    SUCCESS = 0
    SYSTEM_ERROR = 1
    SYSTEM_BUSY = 2
    REQUEST_CODE_NOT_SUPPORTED = 3
    TRANSACTION_FAILED = 4
    FLUSH_DISK_TIMEOUT = 10
    SLAVE_NOT_AVAILABLE = 11
    FLUSH_SLAVE_TIMEOUT = 12
    MESSAGE_ILLEGAL = 13
    SERVICE_NOT_AVAILABLE = 14
    VERSION_NOT_SUPPORTED = 15
    NO_PERMISSION = 16
    TOPIC_NOT_EXIST = 17
    TOPIC_EXIST_ALREADY = 18
    PULL_NOT_FOUND = 19
    PULL_RETRY_IMMEDIATELY = 20
    PULL_OFFSET_MOVED = 21
    QUERY_NOT_FOUND = 22
    SUBSCRIPTION_PARSE_FAILED = 23
    SUBSCRIPTION_NOT_EXIST = 24
    SUBSCRIPTION_NOT_LATEST = 25
    SUBSCRIPTION_GROUP_NOT_EXIST = 26
    FILTER_DATA_NOT_EXIST = 27
    FILTER_DATA_NOT_LATEST = 28
    #: RocketMQ 5 (remoting/src/main/java/org/apache/rocketmq/remoting/protocol/ResponseCode.java).
    INVALID_PARAMETER = 29
    TRANSACTION_SHOULD_COMMIT = 200
    TRANSACTION_SHOULD_ROLLBACK = 201
    TRANSACTION_STATE_UNKNOW = 202
    TRANSACTION_STATE_GROUP_WRONG = 203
    NO_BUYER_ID = 204
    NOT_IN_CURRENT_UNIT = 205
    CONSUMER_NOT_ONLINE = 206
    CONSUME_MSG_TIMEOUT = 207
    NO_MESSAGE = 208
    UPDATE_AND_CREATE_ACL_CONFIG_FAILED = 209
    DELETE_ACL_CONFIG_FAILED = 210
    UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED = 211
    #: RocketMQ 5's pop answers (aliases of 4.x's ACL codes on the same numbers).
    POLLING_FULL = 209
    POLLING_TIMEOUT = 210
    FLOW_CONTROL = 215
    ILLEGAL_OPERATION = 604  # RocketMQ 5: e.g. a recall handle that does not decode or match


#: The response ``version`` rocketrio stamps on what it sends: V4_9_8, so SQL92-capable clients pull
#: (docs/protocol.md#110-version-numbers).
CURRENT_VERSION = 409

_REQUEST_NAMES = {c.value: c.name for c in RequestCode}


def request_name(code: int) -> str:
    """Name of a request code for logs and remarks; unknown codes print as their number."""
    return _REQUEST_NAMES.get(code, str(code))


#: Ordinals of ``MQVersion.Version`` from V4_0_0_SNAPSHOT to V5_9_9, where each release follows its snapshot.
_FIRST_V4_ORDINAL = 212
_LAST_V5_ORDINAL = 611


def version_desc(version: int) -> str:
    """Java's ``MQVersion.getVersionDesc`` for 4.x and 5.x clients (409 -> ``V4_9_8``); ``HIGHER_VERSION`` above 5.9.9
    and the number itself for 3.x ordinals, whose names follow no rule."""
    if version > _LAST_V5_ORDINAL:
        return "HIGHER_VERSION"
    if version < _FIRST_V4_ORDINAL:
        return str(version)
    index, release = divmod(version - _FIRST_V4_ORDINAL, 2)
    name = f"V{4 + index // 100}_{index // 10 % 10}_{index % 10}"
    return name if release else name + "_SNAPSHOT"


_VERSION_NAME: Final = re.compile(r"V([45])_(\d)_(\d)(_SNAPSHOT)?")


def version_ordinal(name: str) -> int | None:
    """The inverse of :func:`version_desc`: the ordinal of the 4.x or 5.x ``MQVersion.Version`` (or HIGHER_VERSION)
    ``name`` is, as ``Version.valueOf``; None for anything else (3.x names too)."""
    if name == "HIGHER_VERSION":
        return _LAST_V5_ORDINAL + 1
    match = _VERSION_NAME.fullmatch(name)
    if match is None:
        return None
    major, minor, patch, snapshot = match.groups()
    index = (int(major) - 4) * 100 + int(minor) * 10 + int(patch)
    return _FIRST_V4_ORDINAL + 2 * index + (0 if snapshot else 1)
