"""Helpers for broker tests that talk to an embedded cluster, or a broker started from a ``broker.conf``, over real
sockets."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import attrs
import trio

from broker.cli import build_config
from broker.controller import BrokerController
from broker.embedded import EmbeddedCluster
from remoting.client import RemotingClient
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand, request
from remoting.codec.message import MessageRecord
from tests.conftest import SMALL_STORE


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


@contextlib.asynccontextmanager
async def broker_from_conf(conf: Path, store: Path) -> AsyncIterator[tuple[BrokerController, str]]:
    """A broker started as ``mqbroker -c conf`` (``conf`` sets ``listenPort=0``), its store under ``store``, serving
    until the block ends; yields the controller and its address."""
    config = build_config(str(conf), [f"--storePathRootDir={store}"], "")
    controller = BrokerController(attrs.evolve(config, **SMALL_STORE), config_path=conf)
    async with trio.open_nursery() as nursery:
        host, port = await nursery.start(controller.serve)
        yield controller, f"{host}:{port}"
        nursery.cancel_scope.cancel()


async def update_once(conf: Path, store: Path, body: bytes) -> tuple[BrokerController, RemotingCommand]:
    """Start a broker from ``conf`` (:func:`broker_from_conf`), send it one UPDATE_BROKER_CONFIG with ``body`` and stop
    it; the controller and the answer."""
    async with broker_from_conf(conf, store) as (controller, addr), RemotingClient() as client:
        answer = await client.invoke(addr, request(RequestCode.UPDATE_BROKER_CONFIG, body=body), 5)
    return controller, answer
