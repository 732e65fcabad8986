"""OFFSET_MOVED_EVENT: when a pull on a master is answered PULL_OFFSET_MOVED, the broker stores an
``OffsetMovedEvent`` in the ``OFFSET_MOVED_EVENT`` system topic (queue 0), as RocketMQ 4.x's
``PullMessageProcessor.generateOffsetMovedEvent`` does, so operators can see which group was moved where.

The message: body ``{"consumerGroup", "messageQueue": {"brokerName", "queueId", "topic"}, "offsetNew",
"offsetRequest"}`` (JSON, sorted keys as fastjson writes them), tags and keys the consumer group, ``DELAY=0``, born
and store host the broker's own address, born time now. Slaves never get here (their OFFSET_MOVED becomes
PULL_RETRY_IMMEDIATELY first).

Called synchronously from the pull (it never awaits): the append does not wait for a flush. A store that refuses the
write (disk full, shutting down) is logged and ignored, as in Java; the pull's answer is unaffected.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from remoting.codec.bodies import MessageQueue
from remoting.codec.bodies._json import dumps
from remoting.codec.message import MessageRecord
from remoting.codec.message_properties import encode_properties
from remoting.codec.topics import OFFSET_MOVED_EVENT
from store.errors import StoreError

if TYPE_CHECKING:
    from processors.context import BrokerContext

__all__ = ["offset_moved_event_body", "put_offset_moved_event"]

log = logging.getLogger(__name__)


def offset_moved_event_body(group: str, mq: MessageQueue, offset_request: int, offset_new: int) -> bytes:
    """The event's JSON body (Java's ``OffsetMovedEvent.encode()``)."""
    return dumps(
        {
            "consumerGroup": group,
            "messageQueue": mq.to_json(),
            "offsetNew": offset_new,
            "offsetRequest": offset_request,
        }
    )


def put_offset_moved_event(
    broker: BrokerContext, group: str, topic: str, queue_id: int, offset_request: int, offset_new: int
) -> None:
    """Append the event for ``group`` pulling ``topic``/``queue_id`` at ``offset_request``, moved to ``offset_new``."""
    mq = MessageQueue(topic, broker.config.broker_name, queue_id)
    record = MessageRecord(
        topic=OFFSET_MOVED_EVENT,
        body=offset_moved_event_body(group, mq, offset_request, offset_new),
        queue_id=0,
        properties=encode_properties({"TAGS": group, "KEYS": group, "DELAY": "0"}),
        born_timestamp=int(time.time() * 1000),
        born_host=broker.store_host,
        store_host=broker.store_host,
    )
    try:
        broker.store.append(record)
    except StoreError:
        log.warning("OFFSET_MOVED_EVENT for %s on %s not stored", group, mq, exc_info=True)
        return
    log.warning(
        "PULL_OFFSET_MOVED: correction offset. topic=%s, groupId=%s, requestOffset=%d, newOffset=%d",
        topic,
        group,
        offset_request,
        offset_new,
    )
