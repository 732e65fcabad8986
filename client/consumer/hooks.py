"""Consume hooks, as RocketMQ 4.9.8's ``client/src/main/java/org/apache/rocketmq/client/hook/ConsumeMessageHook.java``
and ``ConsumeMessageContext.java``: an object registered with ``register_consume_message_hook`` on a
:class:`~client.consumer.push.PushConsumer` or :class:`~client.consumer.lite_pull.LitePullConsumer` is told of each
listener call (each pulled batch, for lite pull) before and after, with one :class:`ConsumeMessageContext`.

The hooks run in the consumer's event loop, in the order registered, and must not block; what one raises is logged
and the next one still runs, as Java's ``executeHookBefore`` / ``executeHookAfter`` catch it.
"""

from __future__ import annotations

from typing import Protocol

import attrs

from client.hooks import call_each
from remoting.codec.bodies import MessageQueue
from remoting.codec.message import MessageExt

#: The ``props`` key of a push call's outcome (Java's ``MixAll.CONSUME_CONTEXT_TYPE``), a ``ConsumeReturnType`` name.
CONSUME_CONTEXT_TYPE = "ConsumeContextType"


@attrs.define(eq=False)
class ConsumeMessageContext:
    """One listener call (or pulled batch): ``success`` and ``status`` (the listener's status's name) are set for the
    after hooks; ``props`` and ``mq_trace_context`` are the hooks' to share between before and after."""

    consumer_group: str
    mq: MessageQueue
    msg_list: list[MessageExt]
    success: bool = False
    status: str | None = None
    props: dict[str, str] = attrs.Factory(dict)
    mq_trace_context: object = None
    #: The consumer's namespace (Java's ``ConsumeMessageContext.namespace``); the group and queue are the wire's.
    namespace: str | None = None


class ConsumeMessageHook(Protocol):
    """Java's ``ConsumeMessageHook``."""

    def hook_name(self) -> str: ...

    def consume_message_before(self, context: ConsumeMessageContext) -> None: ...

    def consume_message_after(self, context: ConsumeMessageContext) -> None: ...


def run_before(hooks: list[ConsumeMessageHook], context: ConsumeMessageContext) -> None:
    call_each(hooks, lambda hook: hook.consume_message_before(context), "consumeMessageHook", "executeHookBefore")


def run_after(hooks: list[ConsumeMessageHook], context: ConsumeMessageContext) -> None:
    call_each(hooks, lambda hook: hook.consume_message_after(context), "consumeMessageHook", "executeHookAfter")
