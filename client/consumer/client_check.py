"""CHECK_CLIENT_CONFIG (46) for a consumer's SQL92 subscriptions, as Java's ``MQClientInstance.checkClientInBroker``
(client/src/main/java/org/apache/rocketmq/client/impl/factory/MQClientInstance.java): each goes to one broker of its
topic's cached route (``findBrokerAddrByTopic``; a topic without a route is skipped), so a refused expression fails
the caller instead of every pull. Tag subscriptions are not checked (as Java). The push consumer runs it at start,
before its first heartbeat and rebalance (the route lookup's greeting of a new broker may already carry the
subscription, as Java's periodic heartbeat can before ``start`` fails); the lite pull consumer at ``subscribe``,
before the subscription is kept (so no heartbeat carries a refused one), and at a restart."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from client.errors import MQBrokerError
from client.instance import MQClientInstance
from remoting.codec.bodies import EXPRESSION_SQL92, SubscriptionData
from remoting.codec.bodies.admin import CheckClientRequestBody
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request
from remoting.errors import RemotingError

log = logging.getLogger(__name__)


async def check_sql92_subscriptions(
    instance: MQClientInstance, group: str, subscriptions: Iterable[SubscriptionData]
) -> None:
    """Raises :class:`MQBrokerError` with the broker's answer to the first subscription refused; transport failures
    are logged and passed over (Java fails on those too, but the heartbeat that follows tolerates an unreachable
    broker)."""
    for sub in subscriptions:
        if sub.expression_type != EXPRESSION_SQL92:
            continue
        addr = instance.find_broker_address_by_topic(sub.topic)
        if addr is None:
            continue
        body = CheckClientRequestBody(instance.client_id, group, sub).encode()
        try:
            response = await instance.remoting.invoke(
                addr, request(RequestCode.CHECK_CLIENT_CONFIG, body=body), instance.config.rpc_timeout
            )
        except RemotingError as exc:
            log.warning("consumer %s: CHECK_CLIENT_CONFIG to %s failed: %s", group, addr, exc)
            continue
        if response.code != ResponseCode.SUCCESS:
            raise MQBrokerError(response.code, response.remark, addr)
