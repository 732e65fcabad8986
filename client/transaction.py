"""The transactional producer (Java's ``TransactionMQProducer`` with a ``TransactionListener``).

Usage::

    async def execute(msg: Message, arg: object) -> LocalTransactionState:
        ...   # run the local transaction, recorded under msg.transaction_id
        return LocalTransactionState.COMMIT_MESSAGE

    def check(msg: MessageExt) -> LocalTransactionState:     # plain functions run in a worker thread
        return LocalTransactionState.COMMIT_MESSAGE if done(msg.transaction_id) else LocalTransactionState.UNKNOWN

    async with TransactionProducer("tx-group", namesrv_addr, execute_local_transaction=execute,
                                   check_local_transaction=check) as producer:
        result = await producer.send_message_in_transaction(Message("TopicTest", b"order"), arg=order)
        result.local_transaction_state, result.send_result.msg_id

:meth:`TransactionProducer.send_message_in_transaction` sends a half message (``TRAN_MSG=true``, ``PGROUP``, sysFlag
PREPARED; a delay level is dropped as Java does), runs ``execute_local_transaction`` with it once it is stored (an
exception counts as UNKNOWN and its text travels in the remark), then sends END_TRANSACTION oneway to the broker that
stored it: commit, rollback, or unknown (the broker will ask later). The half message's ``UNIQ_KEY`` and
``transaction_id`` are the id a check-back's message carries (its ``transaction_id`` and ``uniq_msg_id``), as in
Java. A send that was not SEND_OK is rolled back without running the local transaction. Send failures raise as
:meth:`Producer.send` does; the END_TRANSACTION write is best effort (a lost one is resolved by the broker's
check-back) and waits behind a backlog the broker does not read at most ``send_msg_timeout``, as Java's invokeOneway
never waits past its timeout.

Check-backs (CHECK_TRANSACTION_STATE from a broker) run ``check_local_transaction`` in the instance's task group (not
on the connection's reader) and answer with END_TRANSACTION ``fromTransactionCheck=true`` naming the copy the broker
asked about. Callbacks may be coroutine functions (awaited) or plain functions (run in a worker thread).
"""

from __future__ import annotations

import enum
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from types import TracebackType
from typing import Any, Self

import anyio
import attrs
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from client.consumer.listener import exception_simple_desc, exception_string
from client.errors import MQClientError
from client.message import (
    DEFAULT_TRACE_REGION_ID,
    PROPERTY_TRANSACTION_PREPARED,
    Message,
    MessageExt,
    SendResult,
    SendStatus,
    uncompressed,
)
from client.namespace import strip_namespace, unwrap, wrap
from client.producer import Producer
from client.send_request import PreparedSend
from client.trace.codec import MessageType, TraceRecord, TraceType
from remoting.codec.codes import RequestCode
from remoting.codec.command import RemotingCommand, request
from remoting.codec.errors import CodecError
from remoting.codec.headers.transaction import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    CheckTransactionStateRequestHeader,
    EndTransactionRequestHeader,
)
from remoting.codec.message_properties import PROPERTY_DELAY, PROPERTY_UNIQ_KEY
from remoting.codec.msgid import decode_offset_msg_id
from remoting.errors import RemotingError

__all__ = [
    "CheckLocalTransaction",
    "ExecuteLocalTransaction",
    "LocalTransactionState",
    "TransactionProducer",
    "TransactionSendResult",
]

log = logging.getLogger(__name__)

PROPERTY_PRODUCER_GROUP = "PGROUP"
PROPERTY_CHECK_IMMUNITY_TIME = "CHECK_IMMUNITY_TIME_IN_SECONDS"
#: Seconds a check-back's END_TRANSACTION may wait to be written (Java's checkTransactionState passes 3000 ms; the
#: producer's own END_TRANSACTION gets ``send_msg_timeout``).
CHECK_ANSWER_TIMEOUT = 3.0


#: A check-back waiting for a worker: the broker's address, the half message, the request's header.
_Check = tuple[str, MessageExt, CheckTransactionStateRequestHeader]


class LocalTransactionState(enum.Enum):
    """The outcome of a local transaction (Java spells the last one ``UNKNOW``)."""

    COMMIT_MESSAGE = TRANSACTION_COMMIT_TYPE
    ROLLBACK_MESSAGE = TRANSACTION_ROLLBACK_TYPE
    UNKNOWN = TRANSACTION_NOT_TYPE


#: ``(message, arg) -> state``, sync or async.
ExecuteLocalTransaction = Callable[[Message, Any], LocalTransactionState | Awaitable[LocalTransactionState]]
#: ``(half message as the broker stored it, with its real topic) -> state``, sync or async.
CheckLocalTransaction = Callable[[MessageExt], LocalTransactionState | Awaitable[LocalTransactionState]]


@attrs.frozen(slots=True)
class TransactionSendResult:
    """The half message's :class:`SendResult` and what the local transaction decided."""

    send_result: SendResult
    local_transaction_state: LocalTransactionState

    @property
    def transaction_id(self) -> str:
        return self.send_result.msg_id


async def _call(callback: Callable[..., Any], *args: Any) -> LocalTransactionState:
    if inspect.iscoroutinefunction(callback):
        state = await callback(*args)
    else:
        state = await anyio.to_thread.run_sync(callback, *args)
        if inspect.isawaitable(state):
            state = await state
    if not isinstance(state, LocalTransactionState):
        raise MQClientError(f"transaction callback returned {state!r}, not a LocalTransactionState")
    return state


class TransactionProducer(Producer):
    """A :class:`~client.producer.Producer` that also sends transactional messages. See the module docstring;
    other keyword arguments are the producer's."""

    def __init__(
        self,
        group: str,
        namesrv_addr: str | Sequence[str] | None = None,
        *,
        execute_local_transaction: ExecuteLocalTransaction,
        check_local_transaction: CheckLocalTransaction,
        check_thread_pool_size: int = 1,
        check_request_hold_max: int = 2000,
        **options: Any,
    ) -> None:
        super().__init__(group, namesrv_addr, **options)
        self.execute_local_transaction = execute_local_transaction
        self.check_local_transaction = check_local_transaction
        #: Check-backs run on ``check_thread_pool_size`` workers (at least one), at most ``check_request_hold_max``
        #: waiting, later ones dropped (the broker asks again): Java's checkExecutor, a ThreadPoolExecutor of
        #: ``checkThreadPoolMinSize`` / ``checkThreadPoolMaxSize`` (1) threads over a queue of ``checkRequestHoldMax``
        #: (2000) (client/.../impl/producer/DefaultMQProducerImpl.java initTransactionEnv).
        self.check_thread_pool_size = check_thread_pool_size
        self.check_request_hold_max = check_request_hold_max
        self._checks: MemoryObjectSendStream[_Check] | None = None
        self._check_workers: anyio.CancelScope | None = None

    async def __aenter__(self) -> Self:
        # Before the check-back queue is replaced: a running producer's would be closed by the failed start.
        self._check_not_running()
        send, receive = anyio.create_memory_object_stream[_Check](max(0, self.check_request_hold_max))
        self._checks, self._check_workers = send, anyio.CancelScope()
        try:
            await super().__aenter__()
        except BaseException:
            send.close()
            receive.close()
            raise
        self.instance.task_group.start_soon(self._run_checks, receive)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._checks is not None:
            self._checks.close()
        if self._check_workers is not None:
            self._check_workers.cancel()  # as checkExecutor.shutdown() at the producer's shutdown
        await super().__aexit__(exc_type, exc, tb)

    async def _run_checks(self, receive: MemoryObjectReceiveStream[_Check]) -> None:
        assert self._check_workers is not None
        with self._check_workers, receive:
            async with anyio.create_task_group() as workers:
                for _ in range(max(1, self.check_thread_pool_size)):
                    workers.start_soon(self._check_worker, receive)

    async def _check_worker(self, receive: MemoryObjectReceiveStream[_Check]) -> None:
        async for broker_addr, msg, header in receive:
            try:
                await self._answer_check(broker_addr, msg, header)
            except Exception:
                log.exception("transaction check-back of %s failed", msg.msg_id)

    async def send_message_in_transaction(
        self, msg: Message, arg: object = None, *, timeout: float | None = None
    ) -> TransactionSendResult:
        """Send ``msg`` as a half message, run the local transaction, end it. Raises what :meth:`send` raises."""
        self._check_started()
        # Under a namespace the half goes to ``ns%Topic``; the local transaction sees the topic as given.
        topic = wrap(self.namespace, msg.topic)
        half = attrs.evolve(msg, topic=topic, properties=dict(msg.properties), delay_level=0)
        if half.properties.get(PROPERTY_DELAY, "0") != "0":  # sendMessageInTransaction clears a delay level too
            del half.properties[PROPERTY_DELAY]
        half.properties[PROPERTY_TRANSACTION_PREPARED] = "true"
        half.properties[PROPERTY_PRODUCER_GROUP] = self.group
        prepared = self._builder.single(half)
        # The listener gets the message as sent (sendKernelImpl's setUniqID, then msg.setTransactionId(UNIQ_KEY)).
        half.properties[PROPERTY_UNIQ_KEY] = half.transaction_id = prepared.msg_id
        fields = dict(prepared.fields)
        fields["f"] = str(int(fields["f"]) | TRANSACTION_PREPARED_TYPE)
        prepared = PreparedSend(fields, prepared.body, prepared.msg_id)
        self._hook(prepared, half, "SYNC")
        # The half is a SYNC send (``this.send(msg)`` in client/.../impl/producer/DefaultMQProducerImpl.java
        # sendMessageInTransaction), so retryAnotherBrokerWhenNotStoreOK moves one not stored OK to another broker.
        result = await self._dispatch(
            prepared,
            half,
            None,
            None,
            None,
            timeout,
            self.retry_times_when_send_failed,
            retry_not_stored=self.retry_another_broker_when_not_store_ok,
        )
        result, remark = self._unwrap_result(result), None
        if self.namespace:
            half = attrs.evolve(half, topic=msg.topic)
        if result.send_status is not SendStatus.SEND_OK:
            state = LocalTransactionState.ROLLBACK_MESSAGE
        else:
            try:
                state = await _call(self.execute_local_transaction, half, arg)
            except Exception as exc:
                log.warning("local transaction of %s failed: %r (state UNKNOWN)", result.msg_id, exc)
                # DefaultMQProducerImpl.endTransaction: "executeLocalTransactionBranch exception: " + e.toString()
                state = LocalTransactionState.UNKNOWN
                remark = f"executeLocalTransactionBranch exception: {exception_string(exc)}"
        await self._end_transaction(result, state, remark, half.all_properties())
        return TransactionSendResult(result, state)

    async def _end_transaction(
        self, result: SendResult, state: LocalTransactionState, remark: str | None, props: dict[str, str]
    ) -> None:
        try:
            commit_log_offset = decode_offset_msg_id(result.offset_msg_id).phy_offset
            addr = self.instance.find_broker_address(result.broker_name)
            if addr is None:
                raise MQClientError(f"broker {result.broker_name} has no master address")
            header = EndTransactionRequestHeader(
                producer_group=self.group,
                tran_state_table_offset=result.queue_offset,
                commit_log_offset=commit_log_offset,
                commit_or_rollback=state.value,
                msg_id=result.msg_id,
                transaction_id=result.msg_id,
                from_transaction_check=False,
            )
            command = request(RequestCode.END_TRANSACTION, header.to_ext_fields(), oneway=True)
            if remark:
                command = attrs.evolve(command, remark=remark)
            # Traced before the oneway, whatever becomes of it (DefaultMQProducerImpl.endTransaction runs
            # doExecuteEndTransactionHook first), with msg.getTransactionId(): the UNIQ_KEY sendMessageInTransaction
            # sets only once the half is SEND_OK, else none.
            transaction_id = result.msg_id if result.send_status is SendStatus.SEND_OK else None
            self._trace_end(result.topic, result.msg_id, addr, state, False, props, transaction_id)
            await self.instance.remoting.invoke_oneway(addr, command, self.send_msg_timeout)
        except (RemotingError, CodecError, MQClientError) as exc:
            log.warning("END_TRANSACTION for %s not sent (%s): the broker will check back", result.msg_id, exc)

    async def check_transaction_state(self, broker_addr: str, msg: MessageExt, request: RemotingCommand) -> None:
        """Called by the instance for CHECK_TRANSACTION_STATE: the answer is computed in the background, by the check
        workers (see ``check_thread_pool_size``)."""
        try:
            header = CheckTransactionStateRequestHeader.from_ext_fields(request.ext_fields)
        except CodecError as exc:
            log.warning("bad CHECK_TRANSACTION_STATE from %s: %s", broker_addr, exc)
            return
        try:
            if self._checks is None:
                raise anyio.ClosedResourceError
            self._checks.send_nowait((broker_addr, msg, header))
        except anyio.WouldBlock:
            log.warning(
                "check-back of %s dropped: %d check-backs waiting already", msg.msg_id, self.check_request_hold_max
            )
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            log.warning("check-back of %s dropped: the producer is not running", msg.msg_id)

    async def _answer_check(
        self, broker_addr: str, msg: MessageExt, header: CheckTransactionStateRequestHeader
    ) -> None:
        uniq = msg.properties.get(PROPERTY_UNIQ_KEY) or header.transaction_id or header.msg_id or msg.msg_id
        remark = None
        try:
            shown = uncompressed(msg)
            if self.namespace:  # Java's ClientRemotingProcessor.checkTransactionState unwraps the topic
                shown = attrs.evolve(shown, topic=unwrap(self.namespace, shown.topic))
            state = await _call(self.check_local_transaction, shown)
        except Exception as exc:
            log.warning("check of local transaction %s failed: %r (state UNKNOWN)", uniq, exc)
            # processTransactionState: "checkLocalTransactionState Exception: " + RemotingHelper.exceptionSimpleDesc(e)
            state = LocalTransactionState.UNKNOWN
            remark = f"checkLocalTransactionState Exception: {exception_simple_desc(exc)}"
        end = EndTransactionRequestHeader(
            producer_group=self.group,
            tran_state_table_offset=header.tran_state_table_offset,
            commit_log_offset=header.commit_log_offset,
            commit_or_rollback=state.value,
            msg_id=uniq,
            transaction_id=header.transaction_id or uniq,
            from_transaction_check=True,
        )
        command = request(RequestCode.END_TRANSACTION, end.to_ext_fields(), oneway=True)
        if remark:
            command = attrs.evolve(command, remark=remark)
        # Traced before the oneway, whatever becomes of it (client/src/main/java/org/apache/rocketmq/client/impl/
        # producer/DefaultMQProducerImpl.java processTransactionState: doExecuteEndTransactionHook, then the oneway).
        topic = msg.properties.get("REAL_TOPIC", msg.topic)
        self._trace_end(topic, uniq, broker_addr, state, True, msg.properties, header.transaction_id or uniq)
        try:
            await self.instance.remoting.invoke_oneway(broker_addr, command, CHECK_ANSWER_TIMEOUT)
        except RemotingError as exc:
            log.warning("END_TRANSACTION answer for %s to %s failed: %s", uniq, broker_addr, exc)

    def _trace_end(
        self,
        topic: str,
        msg_id: str,
        addr: str,
        state: LocalTransactionState,
        from_check: bool,
        props: dict[str, str] | None = None,
        transaction_id: str | None = None,
    ) -> None:
        """An EndTransaction trace record (Java's ``EndTransactionTraceHookImpl``), when trace is on; no
        ``transaction_id`` is written as ``null``."""
        if self.trace is None:
            return
        props = props or {}
        # Group and topic without their namespace (client/src/main/java/org/apache/rocketmq/client/trace/hook/
        # EndTransactionTraceHookImpl.java: NamespaceUtil.withoutNamespace of both); a check-back's REAL_TOPIC is wire.
        self.trace.append(
            TraceRecord(
                TraceType.EndTransaction,
                time.time_ns() // 1_000_000,
                props.get("MSG_REGION") or DEFAULT_TRACE_REGION_ID,
                strip_namespace(self.group),
                strip_namespace(topic),
                msg_id,
                props.get("TAGS"),
                props.get("KEYS"),
                addr,
                msg_type=MessageType.Trans_msg_Commit,
                transaction_id=transaction_id,
                transaction_state="UNKNOW" if state is LocalTransactionState.UNKNOWN else state.name,
                from_transaction_check=from_check,
            )
        )
