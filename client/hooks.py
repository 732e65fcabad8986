"""Send hooks, as RocketMQ 4.9.8's ``client/src/main/java/org/apache/rocketmq/client/hook/SendMessageHook.java`` and
``SendMessageContext.java``: an object registered with ``Producer.register_send_message_hook`` is told of each send
attempt before it is written and after its outcome, with one :class:`SendMessageContext` per attempt (Java's
``sendKernelImpl`` makes one per attempt of a sync send; an async send's retries here are attempts of their own, each
with its pair of calls, where Java calls ``sendMessageAfter`` once, for the last).

The hooks run in the producer's event loop, in the order registered, and must not block; what one raises is logged
and the next one still runs, as Java's ``executeSendMessageHookBefore`` / ``executeSendMessageHookAfter`` catch it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol, TypeVar

import attrs

from client.message import Message, SendResult
from remoting.codec.bodies import MessageQueue

log = logging.getLogger(__name__)


@attrs.define(eq=False)
class SendMessageContext:
    """One send attempt: ``communication_mode`` is ``"SYNC"``, ``"ASYNC"`` or ``"ONEWAY"``; ``message`` the message, or
    a batch's messages. ``send_result`` (none for a oneway send) or ``exception`` is set for the after hooks;
    ``props`` and ``mq_trace_context`` are the hooks' to share between before and after."""

    producer_group: str
    message: Message | Sequence[Message]
    mq: MessageQueue
    broker_addr: str
    communication_mode: str
    send_result: SendResult | None = None
    exception: Exception | None = None
    props: dict[str, str] = attrs.Factory(dict)
    mq_trace_context: object = None
    #: The producer's namespace (Java's ``SendMessageContext.namespace``); group and topics above are the wire's.
    namespace: str | None = None


class SendMessageHook(Protocol):
    """Java's ``SendMessageHook``."""

    def hook_name(self) -> str: ...

    def send_message_before(self, context: SendMessageContext) -> None: ...

    def send_message_after(self, context: SendMessageContext) -> None: ...


def run_before(hooks: list[SendMessageHook], context: SendMessageContext) -> None:
    call_each(hooks, lambda hook: hook.send_message_before(context), "sendMessageHook", "executeSendMessageHookBefore")


def run_after(hooks: list[SendMessageHook], context: SendMessageContext) -> None:
    call_each(hooks, lambda hook: hook.send_message_after(context), "sendMessageHook", "executeSendMessageHookAfter")


class NamedHook(Protocol):
    """What :func:`call_each` asks of a hook besides the call: its name, for the log."""

    def hook_name(self) -> str: ...


H = TypeVar("H", bound=NamedHook)


def call_each(hooks: Iterable[H], call: Callable[[H], object], kind: str, step: str) -> None:
    """``call(hook)`` for each of ``hooks`` in order (the send and the consume hooks' shared loop): what one raises
    is logged as ``"<kind> <hook name> <step> exception"`` and the next one still runs."""
    for hook in hooks:
        try:
            call(hook)
        except Exception:
            log.exception("%s %s %s exception", kind, _name(hook), step)


def _name(hook: NamedHook) -> str:
    try:
        return hook.hook_name()
    except Exception:
        return repr(hook)
