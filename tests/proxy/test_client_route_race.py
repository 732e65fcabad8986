"""The official 5.x client's route race, forced both ways against a real ``mqbroker --enable-proxy``: each QueryRoute
is answered before the client adds its callback. The client as shipped then loses the route and cannot send; with
the mend of :func:`tests.proxy.official.route_callbacks_on_the_client_loop` (applied to every test here) it sends."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from rocketmq import Producer
from rocketmq.v5.client.connection.rpc_client import RpcClient

from tests.proxy.cluster import GrpcCluster
from tests.proxy.official import _CallbacksOnLoop, configuration, make_message
from tests.proxy.test_official_client import create_topic

pytestmark = pytest.mark.timeout(120)


def _send_with_answers_first(endpoint: str, mended: bool) -> tuple[str, str]:
    original = RpcClient.query_topic_route_async.original  # type: ignore[attr-defined]

    def answered_first(self: RpcClient, *args: Any, **kwargs: Any) -> Any:
        future = original(self, *args, **kwargs)
        future.exception(timeout=10)  # the answer is in before the caller adds its callback
        return _CallbacksOnLoop(future) if mended else future

    producer = Producer(configuration(endpoint), ("TRace",))
    saved = RpcClient.query_topic_route_async
    RpcClient.query_topic_route_async = answered_first  # type: ignore[method-assign]
    try:
        producer.startup()
        return "sent", producer.send(make_message("TRace", b"race")).message_id
    except Exception as exc:
        return "failed", str(exc)
    finally:
        RpcClient.query_topic_route_async = saved  # type: ignore[method-assign]
        producer.shutdown()


async def test_a_route_answered_before_the_callback_is_added(grpc_cluster: GrpcCluster) -> None:
    await create_topic(grpc_cluster, "TRace")
    as_shipped = await trio.to_thread.run_sync(_send_with_answers_first, grpc_cluster.endpoint, False)
    mended = await trio.to_thread.run_sync(_send_with_answers_first, grpc_cluster.endpoint, True)
    assert as_shipped == ("failed", "failed to fetch topic:TRace route."), as_shipped
    assert mended[0] == "sent", mended
