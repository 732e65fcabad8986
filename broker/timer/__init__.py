"""The durable timer for timer messages (``TIMER_DELIVER_MS`` / ``TIMER_DELAY_SEC`` / ``TIMER_DELAY_MS``):
on-disk wheel and log (:mod:`broker.timer.wheel`), the synchronous core (:mod:`broker.timer.timer_store`) and the
broker service with its send-path seam (:mod:`broker.timer.service`)."""

from broker.timer.service import TimerMessageService
from broker.timer.timer_store import TIMER_TOPIC, TimerStore

__all__ = ["TIMER_TOPIC", "TimerMessageService", "TimerStore"]
