"""Topic and group names: reserved topics, prefixes and the validation rules of
docs/protocol.md#71-topic-and-group-names.

Pure functions, no state. The validators return ``None`` for a valid name, else the remark RocketMQ answers with, so
callers (send, admin) put it straight into a SYSTEM_ERROR response.
"""

from __future__ import annotations

import re
from typing import Final

AUTO_CREATE_TOPIC_KEY_TOPIC: Final = "TBW102"
SELF_TEST_TOPIC: Final = "SELF_TEST_TOPIC"
BENCHMARK_TOPIC: Final = "BenchmarkTest"
OFFSET_MOVED_EVENT: Final = "OFFSET_MOVED_EVENT"
SCHEDULE_TOPIC: Final = "SCHEDULE_TOPIC_XXXX"
TRACE_TOPIC: Final = "RMQ_SYS_TRACE_TOPIC"
TRANS_HALF_TOPIC: Final = "RMQ_SYS_TRANS_HALF_TOPIC"
TRANS_OP_HALF_TOPIC: Final = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
TRANS_CHECK_MAX_TIME_TOPIC: Final = "TRANS_CHECK_MAX_TIME_TOPIC"
TIMER_TOPIC: Final = "rmq_sys_wheel_timer"
REPLY_TOPIC_POSTFIX: Final = "REPLY_TOPIC"

RETRY_GROUP_TOPIC_PREFIX: Final = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX: Final = "%DLQ%"
SYSTEM_TOPIC_PREFIX: Final = "rmq_sys_"
SYSTEM_GROUP_PREFIX: Final = "CID_RMQ_SYS_"

TOPIC_MAX_LENGTH: Final = 127
SCHEDULE_QUEUE_NUMS: Final = 18

#: Topics the broker owns: they cannot be created or deleted through admin requests.
SYSTEM_TOPICS: Final = frozenset(
    {
        AUTO_CREATE_TOPIC_KEY_TOPIC,
        SCHEDULE_TOPIC,
        BENCHMARK_TOPIC,
        TRANS_HALF_TOPIC,
        TRACE_TOPIC,
        TRANS_OP_HALF_TOPIC,
        TRANS_CHECK_MAX_TIME_TOPIC,
        TIMER_TOPIC,
        SELF_TEST_TOPIC,
        OFFSET_MOVED_EVENT,
    }
)

#: Topics a producer may not send to directly (docs/protocol.md#72-system-topics).
NOT_ALLOWED_SEND_TOPICS: Final = frozenset(
    {
        SCHEDULE_TOPIC,
        TRANS_HALF_TOPIC,
        TRANS_OP_HALF_TOPIC,
        TRANS_CHECK_MAX_TIME_TOPIC,
        TIMER_TOPIC,
        SELF_TEST_TOPIC,
        OFFSET_MOVED_EVENT,
    }
)

_VALID_NAME: Final = re.compile(r"[%|a-zA-Z0-9_-]+")  # fullmatch only: ``$`` would let a final newline through
VALID_NAME_PATTERN: Final = "^[%|a-zA-Z0-9_-]+$"


def retry_topic(group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_GROUP_TOPIC_PREFIX + group


def pop_retry_topic(group: str, topic: str) -> str:
    """The V1 pop retry topic of ``group`` on ``topic`` (RocketMQ 5's KeyBuilder.buildPopRetryTopicV1,
    common/src/main/java/org/apache/rocketmq/common/KeyBuilder.java)."""
    return f"{RETRY_GROUP_TOPIC_PREFIX}{group}_{topic}"


def pop_normal_topic(group: str, topic: str) -> str:
    """The topic whose pops by ``group`` ``topic`` holds the retries of, or ``topic`` itself when it is no pop retry
    topic of ``group`` (KeyBuilder.parseNormalTopic)."""
    return topic.removeprefix(pop_retry_topic(group, ""))


def reply_topic(cluster_name: str) -> str:
    return f"{cluster_name}_{REPLY_TOPIC_POSTFIX}"


def is_system_topic(topic: str) -> bool:
    return topic in SYSTEM_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX)


def is_retry_or_dlq_topic(topic: str) -> bool:
    """A group's retry (``%RETRY%``) or dead-letter (``%DLQ%``) topic."""
    return topic.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX))


def is_system_group(group: str) -> bool:
    return group.startswith(SYSTEM_GROUP_PREFIX)


def is_legal_name(name: str) -> bool:
    """Whether every character of a topic or group name is one of :data:`VALID_NAME_PATTERN`'s (Java's
    TopicValidator.isTopicOrGroupIllegal, negated; an empty name passes, as there)."""
    return not name or _VALID_NAME.fullmatch(name) is not None


def validate_topic(topic: str) -> str | None:
    """``None`` if ``topic`` is a legal name, else the broker's remark for it (4.9.8's TopicValidator.validateTopic,
    common/src/main/java/org/apache/rocketmq/common/topic/TopicValidator.java)."""
    if not topic or not topic.strip():
        return "The specified topic is blank."
    if not is_legal_name(topic):
        return f"The specified topic contains illegal characters, allowing only {VALID_NAME_PATTERN}"
    if len(topic) > TOPIC_MAX_LENGTH:
        return "The specified topic is longer than topic max length."
    return None


def validate_group(group: str) -> str | None:
    """``None`` if ``group`` is a legal consumer/producer group name, else the remark."""
    if not group or not group.strip():
        return "the specified group is blank"
    if not is_legal_name(group):
        return f"the specified group[{group}] contains illegal characters, allowing only {VALID_NAME_PATTERN}"
    if len(group) > 255:
        return "the specified group is longer than group max length 255."
    return None
