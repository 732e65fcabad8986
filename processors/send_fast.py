"""The send fast path: a SEND_MESSAGE_V2 (310) request answered from its parsed JSON header, in the connection's
reader, for :class:`~processors.send.SendMessageProcessor` (registered with
:meth:`remoting.dispatch.Dispatcher.register_fast`).

It takes only the common case and leaves everything else untouched for the general path (it returns False before writing
anything): a header whose fields are all strings shaped the way Java and our producers send them (no unknown
``extFields`` key, ACL 1.0's ``AccessKey``, ``Signature`` and ``SecurityToken`` being known; non-negative digit strings,
lower-case booleans), a single message (not ``batch``) to a topic that exists, is writable and is no retry topic, a
queue id inside the topic, properties without a transaction, a delay level or a timer, a connection not congested, and,
under SYNC_FLUSH / SYNC_MASTER, a store whose put waits can call back. What it stores is the record the general path
would store; the response is the general path's frame, written from a template (``tests/processors/test_send_fast.py``
proves both byte for byte). A store refusal also goes back to the general path, which appends again (nothing was
written) and answers the refusal.

Per send this skips the command objects of the request and the response, the header object, the pool queue and
four coroutines; docs/PERFORMANCE.md has the figures.
"""

from __future__ import annotations

import logging
import struct
import time
from typing import TYPE_CHECKING, Any, Final

import orjson

from processors.common import born_host
from processors.send_answer import answer
from processors.send_properties import has_sharding_key, rewrite_properties
from remoting.codec.acl_signing import ACCESS_KEY, SECURITY_TOKEN, SIGNATURE
from remoting.codec.codes import CURRENT_VERSION, RequestCode
from remoting.codec.command import RemotingCommand
from remoting.codec.message import SYSFLAG_MULTI_TAGS, MessageRecord
from remoting.codec.msgid import offset_msg_id
from remoting.codec.send_header import send_v2_fields
from remoting.codec.topics import NOT_ALLOWED_SEND_TOPICS, RETRY_GROUP_TOPIC_PREFIX
from remoting.connection import Connection
from remoting.errors import RemotingConnectError
from remoting.processor import RequestContext
from store.errors import PutRefusedError
from store.metadata_files import PERM_WRITE, TopicFilterType
from store.put_waits import FLUSH, INLINE, NO_WAIT
from store.results import AppendResult, PutStatus

if TYPE_CHECKING:
    from processors.send import SendMessageProcessor
    from store.services import GroupCommitService

__all__ = ["SendFastPath"]

log = logging.getLogger(__name__)

#: The V2 letters and ACL 1.0's fields (checked by the dispatcher's fast admission before this runs; the general
#: path ignores them too).
_V2_KEYS: Final = frozenset("abcdefghijklmn") | {ACCESS_KEY, SIGNATURE, SECURITY_TOKEN}
_HEAD: Final = struct.Struct(">ii")
_SEND_V2: Final = int(RequestCode.SEND_MESSAGE_V2)
#: The response header after the msgId: what ``encode_json`` writes for a PUT_OK answer's remaining fields.
_TAIL: Final = (
    b'","queueId":"%d","queueOffset":"%d"},"flag":1,"language":"JAVA","opaque":%d,'
    b'"serializeTypeCurrentRPC":"JSON","version":' + str(CURRENT_VERSION).encode() + b"}"
)


class SendFastPath:
    """Owned by one :class:`~processors.send.SendMessageProcessor`, whose config and seams it reads."""

    def __init__(self, processor: SendMessageProcessor) -> None:
        self._processor = processor
        self._base: dict[str, str] | None = None
        self._prefix = b""
        self._group_commit: GroupCommitService | None = None
        self._held: list[Connection] = []

    def __call__(self, ctx: RequestContext, fields: dict[str, Any], body: bytes) -> bool:
        """Store and answer the request when it is the common case (see the module docstring); else False."""
        group_commit = self._group_commit
        if group_commit is not None:
            group_commit.poll()  # answers of a sync that ended while this reader was busy go out first
        parsed = send_v2_fields(fields, _V2_KEYS)
        if parsed is None:
            return False
        opaque, topic, properties, queue_id, sys_flag, message_flag, born, reconsume = parsed
        processor = self._processor
        processor.adopt_config()
        if processor.start_accept_ms > 0 and time.time() * 1000 < processor.start_accept_ms:
            return False  # the general path refuses it (startAcceptSendRequestTimeStamp)
        broker = processor.broker
        config = broker.topics.get(topic)
        if config is None or topic in NOT_ALLOWED_SEND_TOPICS or topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return False
        if queue_id >= max(config.write_queue_nums, config.read_queue_nums) or not config.perm & PERM_WRITE:
            return False
        if config.order and not broker.config.broker_permission & PERM_WRITE:
            return False
        props = rewrite_properties(properties, processor.cluster)
        stored = props.stored
        if (
            props.transactional
            or props.bad_delay is not None
            or (props.delay_level > 0 and processor.delay_rewrite is not None)
            or (processor.timer_rewrite is not None and "TIMER_" in stored)
        ):
            return False
        store, connection = broker.store, ctx.connection
        plan = store.put_waits.plan(props.wait)
        if plan == INLINE or connection.congested:
            return False
        if config.topic_filter_type is TopicFilterType.MULTI_TAG:
            sys_flag |= SYSFLAG_MULTI_TAGS
        record = MessageRecord(
            topic, body, queue_id, message_flag, stored, sys_flag, born, born_host(ctx), broker.store_host, reconsume,
        )  # fmt: skip
        started = time.perf_counter_ns()
        try:
            appended = store.append(record)
        except PutRefusedError:
            return False  # nothing was written: the general path appends again and answers the refusal
        stats = broker.stats
        if has_sharding_key(stored):
            stats.record_fifo_put(topic, queue_id, appended.queue_offset)
            stats.message_sizes.record(topic, "fifo", appended.size)
        else:
            stats.message_sizes.record(topic, "normal", appended.size)
        latency = stats.put_latency
        if plan == NO_WAIT:
            latency.record(time.perf_counter_ns() - started)
            self._answer(connection, opaque, PutStatus.PUT_OK, appended, queue_id)
            return True
        group_commit = store.group_commit
        if group_commit is not self._group_commit:
            group_commit.add_pass_listener(self._release_held)
            self._group_commit = group_commit
        if plan == FLUSH:
            # The common SYNC_FLUSH case: the group commit calls back with a bool, with no status adapter between.

            def flushed(ok: bool) -> None:
                latency.record(time.perf_counter_ns() - started)
                if ok and not connection.congested:
                    self._write_ok(connection, opaque, appended, queue_id)
                else:
                    self._answer(
                        connection, opaque, PutStatus.PUT_OK if ok else PutStatus.FLUSH_DISK_TIMEOUT, appended, queue_id
                    )

            store.notify_flushed(appended.end_offset, flushed)
            return True

        def answered(status: PutStatus) -> None:
            latency.record(time.perf_counter_ns() - started)
            self._answer(connection, opaque, status, appended, queue_id)

        now = store.put_waits.notify(appended.end_offset, props.wait, answered)
        if now is not None:
            answered(now)
        return True

    def _answer(
        self, connection: Connection, opaque: int, status: PutStatus, appended: AppendResult, queue_id: int
    ) -> None:
        """Write the general path's response: PUT_OK from the template, any other status as a command."""
        if status is not PutStatus.PUT_OK or connection.congested:
            request = RemotingCommand(_SEND_V2, opaque)
            base = self._processor.base_fields
            self._processor.answers.write(connection, answer(request, status, appended, queue_id, base), opaque)
            return
        self._write_ok(connection, opaque, appended, queue_id)

    def _write_ok(self, connection: Connection, opaque: int, appended: AppendResult, queue_id: int) -> None:
        """PUT_OK from the template; inside a group commit's release pass the frame is held and leaves with the
        pass's other answers to that connection (:meth:`_release_held`)."""
        base = self._processor.base_fields
        if base is not self._base:
            # {"code":0,"extFields":{<base fields>,"msgId":"  -- the base fields are never empty (MSG_REGION, TRACE_ON)
            self._prefix = b'{"code":0,"extFields":' + orjson.dumps(base)[:-1] + b',"msgId":"'
            self._base = base
        header = (
            self._prefix
            + offset_msg_id(appended.store_host, appended.phy_offset).encode()
            + _TAIL % (queue_id, appended.queue_offset, opaque)
        )
        size = len(header)
        group_commit = self._group_commit
        try:
            if group_commit is not None and group_commit.releasing:
                if connection.hold_frame(_HEAD.pack(size + 4, size) + header):
                    self._held.append(connection)
            else:
                connection.send_frame_nowait(_HEAD.pack(size + 4, size) + header)
        except RemotingConnectError:
            log.debug("send response to opaque %d dropped: connection closed", opaque)
            connection.untime(opaque)  # no answer went out: nothing to time, as the general path
            return
        if connection.rpc_latency is not None:
            connection.fast_answered(opaque)

    def _release_held(self) -> None:
        """The group commit's pass ended: write each connection's held answers (one write each)."""
        held, self._held = self._held, []
        for connection in held:
            try:
                connection.release_held()
            except RemotingConnectError:
                log.debug("send responses dropped: connection closed")
