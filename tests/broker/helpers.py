"""Helpers for broker tests that talk to an embedded cluster over real sockets."""

from __future__ import annotations

import trio

from broker.embedded import EmbeddedCluster
from remoting.client import RemotingClient
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand, request
from remoting.codec.message import MessageRecord


async def route_of(client: RemotingClient, cluster: EmbeddedCluster, topic: str) -> RemotingCommand:
    """GET_ROUTEINFO_BY_TOPIC from the cluster's name server."""
    return await client.invoke(cluster.namesrv_addr, request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}), 5)


async def wait_for_route(client: RemotingClient, cluster: EmbeddedCluster, topic: str) -> bytes:
    """Wait (at most 10 s) until the name server routes ``topic``, re-checking after each completed registration
    round; returns the route body."""
    registration = cluster.controller.registration
    assert registration is not None
    with trio.fail_after(10):
        while True:
            answer = await route_of(client, cluster, topic)
            if answer.code == ResponseCode.SUCCESS:
                return bytes(answer.body)
            await registration.wait_next_round()


def create_topic_request(topic: str, queues: int = 4, perm: int = 6, order: bool = False) -> RemotingCommand:
    fields = {
        "topic": topic,
        "defaultTopic": "TBW102",
        "readQueueNums": str(queues),
        "writeQueueNums": str(queues),
        "perm": str(perm),
        "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": "0",
        "order": "true" if order else "false",
    }
    return request(RequestCode.UPDATE_AND_CREATE_TOPIC, fields)


def put_record(cluster: EmbeddedCluster, topic: str, queue_id: int, body: bytes) -> int:
    """Append one message straight to the embedded broker's store; its queue offset."""
    ctx = cluster.controller.context
    return ctx.store.append(MessageRecord(topic, body, queue_id, store_host=ctx.store_host)).queue_offset
