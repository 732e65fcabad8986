"""A topic's readable queues as the public consumer APIs list them (Java's
``MQAdminImpl.fetchSubscribeMessageQueues``, client/src/main/java/org/apache/rocketmq/client/impl/MQAdminImpl.java),
shared by the push consumer's ``fetch_subscribe_message_queues`` and the lite pull consumer's
``fetch_message_queues``."""

from __future__ import annotations

from client.errors import FAQ_HINT, MQClientError
from client.instance import MQClientInstance
from client.namespace import unwrap_queue, wrap
from client.route import subscribe_queues
from remoting.codec.bodies import MessageQueue


async def fetch_subscribe_message_queues(
    instance: MQClientInstance, namespace: str | None, topic: str
) -> list[MessageQueue]:
    """Every readable queue of ``topic`` (wrapped in ``namespace`` on the wire), named without the namespace. No
    route, no readable queue or any other failure raises :class:`MQClientError` "Can not find Message Queue for this
    topic, <namespaced topic>" with the FAQ hint and the failure as its cause, as Java wraps them all."""
    wire = wrap(namespace, topic)
    try:
        mqs = subscribe_queues(wire, await instance.fetch_route(wire, wait_greeting=True))
        if not mqs:
            raise MQClientError(f"Can not find Message Queue for this topic, {wire} Namesrv return empty")
    except Exception as exc:
        raise MQClientError(f"Can not find Message Queue for this topic, {wire}{FAQ_HINT}") from exc
    return [unwrap_queue(namespace, mq) for mq in mqs] if namespace else mqs
