"""``clusterTest`` mode: routes a test-environment name server does not have, asked of the product environment's name
servers, as RocketMQ 4.9.8's
``namesrv/src/main/java/org/apache/rocketmq/namesrv/processor/ClusterTestRequestProcessor.java`` asks them through a
``DefaultMQAdminExt`` of unit ``productEnvName`` (``examineTopicRouteInfo``, the admin's 5 s ``timeoutMillis``).

The product name servers are the admin client's defaults: the ``NAMESRV_ADDR`` environment variable
(``NameServerAddressUtils``; its ``rocketmq.namesrv.addr`` system property is a JVM thing). With none, every miss stays
TOPIC_NOT_EXIST (Java's admin would then ask the ``rocketmq.namesrv.domain`` HTTP lookup for unit ``productEnvName``'s
addresses, which no rocketrio client does). Each product name server is tried in turn until one answers. Errors never
escape: a name server that cannot be reached is logged and passed over ("get route info by topic from product
environment failed", as Java logs it); an answer other than SUCCESS is a miss. The admin client talks TLS when the name
server's ``tls.enable`` is true (ClientConfig's ``useTLS`` defaults to ``TlsSystemConfig.tlsEnable``, false unless
set), with the context ``TlsHelper.buildSslContext(true)`` makes of its ``tls.*`` settings
(:func:`remoting.tls.settings_client_context`).
"""

from __future__ import annotations

import logging
import os
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Final

from remoting.client import RemotingClient
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request
from remoting.errors import RemotingError

#: DefaultMQAdminExt's ``timeoutMillis``.
ADMIN_TIMEOUT: Final = 5.0

log = logging.getLogger(__name__)


def product_namesrv_addrs() -> tuple[str, ...]:
    """The ``NAMESRV_ADDR`` list (``host:port;host:port``), empty when unset."""
    return tuple(a.strip() for a in os.environ.get("NAMESRV_ADDR", "").split(";") if a.strip())


class ProductEnvRoutes:
    """Asks the product environment's name servers for a route; use :func:`open_product_env_routes`."""

    def __init__(self, client: RemotingClient, addrs: tuple[str, ...], env_name: str) -> None:
        self._client = client
        self.addrs = addrs
        self.env_name = env_name

    async def route(self, topic: str) -> bytes | None:
        """The route's JSON from the first product name server that answers, ``None`` when none routes the topic."""
        for addr in self.addrs:
            try:
                answer = await self._client.invoke(
                    addr, request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}), ADMIN_TIMEOUT
                )
            except (RemotingError, OSError) as exc:
                log.info(
                    "get route info by topic from product environment failed. envName=%s, %s: %s",
                    self.env_name,
                    addr,
                    exc,
                )
                continue
            return bytes(answer.body) if answer.code == ResponseCode.SUCCESS and answer.body else None
        return None


@asynccontextmanager
async def open_product_env_routes(
    env_name: str, ssl_context: ssl.SSLContext | None = None
) -> AsyncIterator[ProductEnvRoutes]:
    async with RemotingClient(ssl_context=ssl_context) as client:
        yield ProductEnvRoutes(client, product_namesrv_addrs(), env_name)
