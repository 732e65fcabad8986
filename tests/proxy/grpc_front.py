"""An embedded name server + broker with the gRPC front door served in-process on 127.0.0.1 (port 0, plaintext),
raw unary calls made from a worker thread, and 5.x messages to send (tests/proxy/test_send_checks.py,
test_route_checks.py, test_server_limits.py)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import grpc
import trio

from broker.embedded import EmbeddedCluster
from proxy.config import ProxyConfig
from proxy.pb import definition, service
from proxy.startup import serve_proxy

PREFIX = "/apache.rocketmq.v2.MessagingService/"
META = (("x-mq-client-id", "checks@1@0@x"), ("x-mq-language", "PYTHON"))


class Front:
    def __init__(self, cluster: EmbeddedCluster, port: int) -> None:
        self.cluster = cluster
        self.endpoint = f"127.0.0.1:{port}"

    @property
    def ctx(self) -> Any:
        return self.cluster.controller.context

    def stored(self, topic: str) -> int:
        config = self.ctx.topics.get(topic)
        if config is None:
            return 0
        return sum(self.ctx.store.max_offset_in_queue(topic, q) for q in range(config.write_queue_nums))

    async def call(self, method: str, req: Any, resp: Any, metadata: Any = META) -> Any:
        def run() -> Any:
            with grpc.insecure_channel(self.endpoint) as channel:
                fn = channel.unary_unary(
                    PREFIX + method,
                    request_serializer=type(req).SerializeToString,
                    response_deserializer=resp.FromString,
                )
                return fn(req, timeout=10, metadata=metadata)

        return await trio.to_thread.run_sync(run)

    async def send(self, *messages: Any, metadata: Any = META) -> Any:
        return await self.call(
            "SendMessage", service.SendMessageRequest(messages=list(messages)), service.SendMessageResponse, metadata
        )


@asynccontextmanager
async def front(tmp_path: Path, config: ProxyConfig | None = None, **overrides: Any) -> AsyncIterator[Front]:
    config = config or ProxyConfig(enable_proxy=True, grpc_server_port=0, tls_test_mode_enable=False)
    async with EmbeddedCluster(tmp_path / "cluster", **overrides) as cluster, trio.open_nursery() as nursery:
        port, _ = await nursery.start(serve_proxy, cluster.controller, config)
        yield Front(cluster, port)
        nursery.cancel_scope.cancel()


_counter = iter(range(1, 1 << 30))


def message(topic: str, body: bytes = b"body", **system: Any) -> Any:
    msg = definition.Message(body=body)
    msg.topic.name = topic
    sp = msg.system_properties
    sp.message_id = f"01CHECKS{next(_counter):024X}"
    sp.born_timestamp.FromMilliseconds(int(time.time() * 1000))
    sp.message_type = definition.MessageType.NORMAL
    for name, value in system.items():
        if name == "keys":
            sp.keys.extend(value)
        elif name == "user":
            msg.user_properties.update(value)
        else:
            setattr(sp, name, value)
    return msg
