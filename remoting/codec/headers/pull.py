"""Pull headers (docs/protocol.md#34-pull_message-header): PULL_MESSAGE request and its response.

The four response fields must be present on **every** pull response code, so they are all required here: building a
:class:`PullMessageResponseHeader` forces a processor to supply them.
"""

from __future__ import annotations

import attrs

from remoting.codec.codes import RequestCode
from remoting.codec.headers.base import Header, wire


@attrs.frozen(slots=True)
class PullMessageRequestHeader(Header):
    """PULL_MESSAGE (11). ``sys_flag`` bits are in docs/protocol.md#35-pull-sysflag; ``subscription`` is set iff
    bit 2 is."""

    REQUEST_CODES = (RequestCode.PULL_MESSAGE,)

    consumer_group: str = attrs.field(metadata=wire("consumerGroup"))
    topic: str = attrs.field(metadata=wire("topic"))
    queue_id: int = attrs.field(metadata=wire("queueId", int32=True))
    queue_offset: int = attrs.field(metadata=wire("queueOffset"))
    max_msg_nums: int = attrs.field(metadata=wire("maxMsgNums", int32=True))
    sys_flag: int = attrs.field(metadata=wire("sysFlag", int32=True))
    commit_offset: int = attrs.field(metadata=wire("commitOffset"))
    suspend_timeout_millis: int = attrs.field(metadata=wire("suspendTimeoutMillis"))
    sub_version: int = attrs.field(metadata=wire("subVersion"))
    subscription: str | None = attrs.field(default=None, metadata=wire("subscription"))
    expression_type: str | None = attrs.field(default=None, metadata=wire("expressionType"))
    bname: str | None = attrs.field(default=None, metadata=wire("bname"))


@attrs.frozen(slots=True)
class PullMessageResponseHeader(Header):
    """PULL_MESSAGE response, for every response code (clients dereference all four fields unconditionally)."""

    suggest_which_broker_id: int = attrs.field(metadata=wire("suggestWhichBrokerId"))
    next_begin_offset: int = attrs.field(metadata=wire("nextBeginOffset"))
    min_offset: int = attrs.field(metadata=wire("minOffset"))
    max_offset: int = attrs.field(metadata=wire("maxOffset"))
