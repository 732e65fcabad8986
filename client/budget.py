"""A 4.x producer call's time budget: what is left of ``timeout`` seconds begun at ``started`` on the event loop's
clock, Java's ``timeout - costTime`` (client/src/main/java/org/apache/rocketmq/client/impl/producer/
DefaultMQProducerImpl.java: sendDefaultImpl, sendSelectImpl, request). Zero or less means it is spent; what to do
then (raise, give up a retry) is the caller's.
"""

from __future__ import annotations

import anyio


def time_left(timeout: float, started: float) -> float:
    """Seconds left of ``timeout`` since ``started`` (``anyio.current_time()`` when the call began); negative once
    spent. Needs a running event loop."""
    return timeout - (anyio.current_time() - started)
