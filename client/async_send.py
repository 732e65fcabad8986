"""``Producer.send_async`` without a task per message (for the async-send throughput target of docs/PERFORMANCE.md):
:class:`AsyncSend` writes the request and lets the connection's reader hand the response to
:meth:`AsyncSend._on_outcome`, which turns it into the :class:`~client.message.SendResult` or the exception the user's
callback gets.

Same outcomes as the awaitable path (``Producer._send_with_retries``): up to ``1 + retries`` attempts, each on the
next queue avoiding the broker that just failed (a retry goes through the slow path after the failed master is
marked and the route re-read, :mod:`client.master_watch`), retrying on transport errors and timeouts only, as Java's
``MQClientAPIImpl.sendMessageAsync`` (a sync send also retries the refusals of ``Producer.retry_response_codes``), all
within the one ``timeout`` (a retry gets what the attempts before it left: none follows one that timed out):
:class:`~client.errors.SendFailedError` once every attempt failed or the timeout is spent, a broker's refusal as
:class:`~client.errors.MQBrokerError` at once; the latency fault table is fed when enabled. A
send whose route or broker address is not cached, or whose master is marked as failed, continues in a task on the
slow path.

The user's callback runs in the connection's reader (or wherever the outcome was decided): it must not block. An
awaitable it returns is awaited in the client instance's callback task group, which its stop lets finish for at most
``rpc_timeout`` (:meth:`~client.instance.MQClientInstance.start_callback`); what it raises is logged.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, Final

import anyio

from client import api, hooks
from client.budget import time_left
from client.errors import ClientStateError, MQBrokerError, SendFailedError
from client.hooks import SendMessageContext
from client.message import SendResult
from client.route import TopicPublishInfo
from client.selector import select_one_message_queue
from client.send_request import PreparedSend
from remoting.codec.command import RemotingCommand, next_opaque
from remoting.codec.send_frame import send_result_json as _send_result_json
from remoting.errors import RemotingError
from remoting.future import outcome_of

if TYPE_CHECKING:
    from client.producer import Producer, SendCallback

log = logging.getLogger(__name__)

#: Response codes after which Java's sync send retries on another queue (``retryResponseCodes``' defaults; async sends
#: never).
RETRY_RESPONSE_CODES: Final = frozenset({17, 14, 1, 16, 204, 205})


class AsyncSend(PreparedSend):
    """One ``send_async`` in flight: the prepared send itself (the builder makes it as this kind, so that it alone
    stays alive while the send is in flight) and its attempts. Owned by nobody once launched: the pending-invocation
    table of a connection (or a retry task) holds it until its outcome has been delivered, exactly once.

    It is its own :class:`~remoting.future.Invocation` when the request goes out as plain JSON (the usual case):
    the reader hands it the response's parsed header (:meth:`complete_json`, the result read straight from it), the
    sweeper a timeout, close an error. So an in-flight send is one object of its own, and none is made per response
    but the result (fewer objects alive per send: the collector's cost grows with them). Only its first completion
    counts (a later one would retry a send already answered, or report it twice), as Java's ``ResponseFuture`` runs
    its callback once."""

    __slots__ = (
        "_address",
        "_attempts",
        "_began",
        "_broker_name",
        "_callback",
        "_done",
        "_hook_context",
        "_producer",
        "_retries",
        "_sent_ms",
        "_started",
        "_timeout",
        "deadline",
    )

    __eq__ = object.__eq__
    __hash__ = object.__hash__  # type: ignore[assignment]

    def launch(
        self, producer: Producer, callback: SendCallback, timeout: float, retries: int, info: TopicPublishInfo
    ) -> None:
        """Make it a send in flight (made by ``SendBuilder.single_as(msg, AsyncSend)``) and start its first attempt on
        one of ``info``'s queues. Never raises."""
        self._producer = producer
        self._callback = callback
        self._timeout = timeout
        self._retries = retries if retries > 0 else 0
        self._attempts: list[tuple[str, BaseException]] | None = None
        self._address = ""
        self._broker_name = ""
        self._started = 0.0
        self._sent_ms = 0
        self._done = False
        self._hook_context: SendMessageContext | None = None
        self.deadline = 0.0
        self._began = anyio.current_time()  # ``timeout`` covers every attempt from here
        self.start(info)

    def start(self, info: TopicPublishInfo) -> None:
        """Make the next attempt on one of ``info``'s queues: write the request, return. Never raises."""
        producer = self._producer
        fault = producer.fault if producer.send_latency_fault_enable else None
        attempts = self._attempts
        last_broker = attempts[-1][0] if attempts else None
        mq = select_one_message_queue(info, last_broker, fault)
        broker_name = mq.broker_name
        instance = producer.instance
        address = instance.find_broker_address(broker_name)
        if address is None or producer.master_watch.marked(address):
            self._continue_in_task(last_broker)  # the slow path looks it up, or watches a master that failed
            return
        self._address, self._broker_name = address, broker_name
        if fault is not None:
            self._started = anyio.current_time()
        if producer.trace is not None:
            self._sent_ms = time.time_ns() // 1_000_000
        if producer.send_hooks:
            hooked = getattr(self, "hooked", None)
            if hooked is not None:  # sendKernelImpl's before hook, for each attempt here
                self._hook_context = SendMessageContext(
                    producer.group,
                    hooked[0],
                    mq,
                    producer.hook_address(address),
                    hooked[1],
                    namespace=producer.namespace,
                )
                hooks.run_before(producer.send_hooks, self._hook_context)
        remoting, timeout = instance.remoting, self._timeout
        try:
            if remoting.writes_plain_json:
                opaque = next_opaque()
                frame = self.frame(opaque, mq.queue_id, broker_name)
                if remoting.invoke_frame_future(address, opaque, frame, self, timeout):
                    return
            fields, body = self.for_queue(mq.queue_id, broker_name), self.body
            if not remoting.invoke_fields_callback(address, self.code, fields, body, timeout, self._on_outcome):
                remoting.invoke_callback(address, api.send_command(fields, body), timeout, self._on_outcome, plain=True)
        except (RuntimeError, ClientStateError) as exc:  # the client is shutting down
            self._give_up(exc)

    # -- remoting.future.Invocation ----------------------------------------------------------------------------------

    def complete_json(self, fields: dict[str, Any], body: bytes) -> bool:
        if self._done:
            return True  # completed already: the answer is dropped
        result = _send_result_json(fields, api.STATUS_BY_CODE, SendResult, self.msg_id, self.topic, self._broker_name)
        if result is None:
            return False
        self._done = True
        try:
            self._succeeded(result)
        except Exception:
            log.exception("async send %s failed in its completion", self.msg_id)
        return True

    def complete(self, response: RemotingCommand | None = None, error: RemotingError | None = None) -> None:
        if self._done:
            return
        self._done = True
        outcome = outcome_of(response, error, self.code, self._address, self._timeout)
        try:
            self._on_outcome(outcome)
        except Exception:
            log.exception("async send %s failed in its completion", self.msg_id)

    # -- outcomes ----------------------------------------------------------------------------------------------------

    def _succeeded(self, result: SendResult) -> None:
        producer = self._producer
        producer.master_watch.succeeded(self._address)
        if producer.send_latency_fault_enable:
            self._report_latency(failed=False)
        trace = producer.trace
        if trace is not None:
            trace.on_sent(self._sent_ms, producer.hook_address(self._address), self, result)
        self._hook_after(result, None)
        self._deliver(result)

    def _on_outcome(self, outcome: RemotingCommand | RemotingError) -> None:
        error: RemotingError | MQBrokerError
        if isinstance(outcome, RemotingCommand):
            try:
                result = api.send_result(outcome, self._address, self._broker_name, self.topic, self.msg_id)
            except MQBrokerError as exc:
                error = exc
            else:
                self._succeeded(result)
                return
        else:
            error = outcome
        self._hook_after(None, error)
        self._report_latency(failed=True)  # every failure, retried or not (sendMessageAsync's updateFaultItem)
        if isinstance(error, MQBrokerError):
            # A broker's answer is never retried (MQClientAPIImpl.sendMessageAsync: onExceptionImpl with needRetry
            # false); the retry response codes are a sync send's (DefaultMQProducerImpl.sendDefaultImpl).
            self._deliver(error)
            return
        attempts = self._attempts
        if attempts is None:
            attempts = self._attempts = []
        attempts.append((self._broker_name, error))
        log.info("send to %s failed (%s), %d attempt(s) so far", self._broker_name, error, len(attempts))
        last = len(attempts) > self._retries
        if last or time_left(self._timeout, self._began) <= 0:
            # A retry gets ``timeoutMillis - cost`` and none is written once that is spent (MQClientAPIImpl's
            # sendMessageAsync and onExceptionImpl, NettyRemotingClient.invokeAsync's "invokeAsync call timeout").
            self._producer.master_watch.mark(self._address)  # before the callback can send again
            self._deliver(SendFailedError(self.topic, attempts, timed_out=not last))
            self._spawn(self._producer.master_watch.failed(self.topic, self._address))
            return
        # The route is re-read before the retry (client/master_watch.py), so it goes on the slow path.
        self._continue_in_task(self._broker_name, failed=self._address)

    def _hook_after(self, result: SendResult | None, error: Exception | None) -> None:
        """The after hooks of the attempt that just ended (as MQClientAPIImpl.sendMessageAsync runs them)."""
        context = self._hook_context
        if context is not None:
            self._hook_context = None
            context.send_result, context.exception = result, error
            hooks.run_after(self._producer.send_hooks, context)

    def _report_latency(self, *, failed: bool) -> None:
        producer = self._producer
        if producer.send_latency_fault_enable:
            elapsed_ms = int((anyio.current_time() - self._started) * 1000)
            producer.fault.report(self._broker_name, elapsed_ms, failed=failed)

    def _continue_in_task(self, last_broker: str | None, failed: str | None = None) -> None:
        """The remaining attempts on the slow path (route lookups may need to wait), after marking the master
        address that just ``failed``, if any."""
        try:
            self._producer.instance.task_group.start_soon(self._send_in_task, last_broker, failed)
        except (RuntimeError, ClientStateError) as exc:  # the client is shutting down
            self._give_up(exc)

    def _spawn(self, job: Coroutine[Any, Any, None]) -> None:
        try:
            self._producer.instance.task_group.start_soon(_run, job)
        except (RuntimeError, ClientStateError):  # shutting down: nothing left to refresh for
            job.close()

    def _give_up(self, exc: Exception) -> None:
        """No further attempt is possible: the attempts so far as a SendFailedError, or ``exc`` if none."""
        self._hook_after(None, exc)
        attempts = self._attempts
        self._deliver(SendFailedError(self.topic, attempts) if attempts else exc)

    async def _send_in_task(self, last_broker: str | None, failed: str | None) -> None:
        producer = self._producer
        outcome: SendResult | Exception
        try:
            if failed is not None:
                with anyio.move_on_after(time_left(self._timeout, self._began)):
                    await producer.master_watch.failed(self.topic, failed)
            info = await producer.publish_info(self.topic)
            attempts = self._attempts
            if attempts is None:
                attempts = self._attempts = []
            retries = self._retries - len(attempts)
            outcome = await producer.send_with_retries(
                info,
                self,
                self._timeout,
                retries,
                attempts=attempts,
                last_broker=last_broker,
                retry_refusals=False,
                started=self._began,
            )
        except Exception as exc:
            outcome = exc
        except anyio.get_cancelled_exc_class():
            # The instance is stopping with the send under way: the callback hears of it, as Java's failFast fails
            # the pending requests of the channels its shutdown closes (see Producer._send_then_call).
            self._give_up(ClientStateError(f"the client stopped before the send to {self.topic!r} ended"))
            raise
        self._deliver(outcome)

    def _deliver(self, outcome: SendResult | Exception) -> None:
        callback = self._callback
        try:
            result = callback(outcome)
        except Exception:
            log.exception("send callback %r failed", callback)
            return
        if result is not None and inspect.isawaitable(result):
            try:
                self._producer.instance.start_callback(_await_callback, callback, result)
            except (RuntimeError, ClientStateError):  # shutting down: nobody left to await it
                if inspect.iscoroutine(result):
                    result.close()


async def _run(job: Coroutine[Any, Any, None]) -> None:
    try:
        await job
    except Exception:
        log.exception("route refresh after a failed send failed")


async def _await_callback(callback: SendCallback, result: object) -> None:
    try:
        await result  # type: ignore[misc]
    except Exception:
        log.exception("send callback %r failed", callback)
