"""The proxy's in-process calls into the broker (RocketMQ's local proxy mode, which hands remoting commands to the
broker's processors without a socket: proxy/src/main/java/org/apache/rocketmq/proxy/service/message/
LocalMessageService.java).

:class:`LocalInvoker` runs one request through a broker processor on the Trio thread and returns its response. A
processor that answers later (a SYNC_FLUSH send answers once the group commit is on disk) writes to the
:class:`LocalChannel`, which completes the waiting call. A processor that raises answers SYSTEM_ERROR, as on the wire.
"""

from __future__ import annotations

import logging
from typing import Any, cast

import trio

from processors.end_transaction import EndTransactionProcessor
from processors.recall import RecallMessageProcessor
from processors.send import SendMessageProcessor
from processors.send_back import ConsumerSendMsgBackProcessor
from remoting.codec import command as commands
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand
from remoting.codec.headers.send import SendMessageRequestHeader
from remoting.connection import Connection
from remoting.processor import Processor

__all__ = ["LocalChannel", "LocalInvoker"]

log = logging.getLogger(__name__)


class LocalChannel(Connection):
    """The connection a local request seems to come from (``remote`` is the gRPC peer): responses written to it
    complete the waiting :meth:`LocalInvoker.invoke`. Only a request still waited for takes its answer; one written
    after its wait ended (its timeout) is dropped instead of being kept for ever, as RocketMQ's local proxy channel
    answers only in-flight requests (proxy/src/main/java/org/apache/rocketmq/proxy/service/channel/
    InvocationChannel.java ``inFlightRequestMap``)."""

    def __init__(self, remote: tuple[str, int]) -> None:
        super().__init__(cast(Any, None), remote, ("127.0.0.1", 0))
        self.answers: dict[int, RemotingCommand] = {}
        self.events: dict[int, trio.Event] = {}

    def send_nowait(self, cmd: RemotingCommand) -> None:
        event = self.events.get(cmd.opaque)
        if event is None:
            log.debug("dropped a late local answer (opaque %d)", cmd.opaque)
            return
        self.answers[cmd.opaque] = cmd
        event.set()

    async def send(self, cmd: RemotingCommand) -> None:
        self.send_nowait(cmd)

    def end_wait(self, opaque: int) -> None:
        """The call of ``opaque`` is over, however it ended (answered, timed out, failed, or cancelled while its
        processor still awaited): its wait goes and a later answer is dropped, as InvocationChannel's in-flight entry
        goes (``eraseInvocationContext``, or ``clearExpireContext`` once expired)."""
        self.events.pop(opaque, None)
        self.answers.pop(opaque, None)


class LocalInvoker:
    """Routes SEND_MESSAGE_V2, END_TRANSACTION, CONSUMER_SEND_MSG_BACK and RECALL_MESSAGE to the broker's processors
    (built by :mod:`proxy.startup`)."""

    def __init__(
        self,
        send: SendMessageProcessor,
        end_transaction: EndTransactionProcessor,
        send_back: ConsumerSendMsgBackProcessor,
        recall: RecallMessageProcessor | None = None,
    ) -> None:
        self._send = send
        self._table: dict[int, Processor] = {
            RequestCode.SEND_MESSAGE_V2: send,
            RequestCode.END_TRANSACTION: end_transaction,
            RequestCode.CONSUMER_SEND_MSG_BACK: send_back,
        }
        if recall is not None:
            self._table[RequestCode.RECALL_MESSAGE] = recall
        self._channels: dict[tuple[str, int], LocalChannel] = {}

    def channel(self, peer: tuple[str, int]) -> LocalChannel:
        channel = self._channels.get(peer)
        if channel is None:
            if len(self._channels) > 4096:
                self._channels.clear()
            channel = self._channels[peer] = LocalChannel(peer)
        return channel

    async def invoke(self, request: RemotingCommand, peer: tuple[str, int], timeout: float = 10.0) -> RemotingCommand:
        channel = self.channel(peer)
        processor = self._table[request.code]
        channel.events[request.opaque] = trio.Event()
        try:
            try:
                response = await processor.process(channel.context, request)
            except Exception as exc:
                log.warning("local %d failed", request.code, exc_info=True)
                response = request.response(ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")
            return await self._answer(channel, request, response, timeout)
        finally:
            channel.end_wait(request.opaque)

    async def invoke_oneway(self, request: RemotingCommand, peer: tuple[str, int]) -> None:
        """``request`` (marked oneway) run through its processor, its refusal left to the processor's log, as
        LocalMessageService.endTransactionOneway runs END_TRANSACTION; an exception the processor raises propagates."""
        await self._table[request.code].process(self.channel(peer).context, request)

    async def send(
        self, header: SendMessageRequestHeader, body: bytes, peer: tuple[str, int], timeout: float = 10.0
    ) -> RemotingCommand:
        """A SEND_MESSAGE_V2 of ``header`` and ``body``, handed to the send processor already parsed (no header
        fields written and read back); answered as :meth:`invoke` answers."""
        channel = self.channel(peer)
        cmd = commands.request(RequestCode.SEND_MESSAGE_V2, {}, body)
        channel.events[cmd.opaque] = trio.Event()
        try:
            try:
                response = await self._send.process_parsed(channel.context, cmd, header)
            except Exception as exc:
                log.warning("local send failed", exc_info=True)
                response = cmd.response(ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")
            return await self._answer(channel, cmd, response, timeout)
        finally:
            channel.end_wait(cmd.opaque)

    @staticmethod
    async def _answer(
        channel: LocalChannel, request: RemotingCommand, response: RemotingCommand | None, timeout: float
    ) -> RemotingCommand:
        """The processor's response, or the one it writes to ``channel`` later (within ``timeout``)."""
        if response is not None:
            return response
        event = channel.events.get(request.opaque)
        if event is not None:
            with trio.move_on_after(timeout):
                await event.wait()
        answered = channel.answers.get(request.opaque)
        return answered or request.response(ResponseCode.SYSTEM_ERROR, "no answer from the broker in time")
