"""The broker side of the end-to-end tests: ``python -m broker.embedded`` as a child process, and the admin
requests the scenarios make with our own :class:`~remoting.client.RemotingClient` (create topics, wait for routes and
group membership).

Every wait is bounded and raises :class:`~tests.e2e.harness.ScenarioError` naming what did not happen.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import trio

from broker.ports import BROKER, free_ports
from remoting.client import RemotingClient
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request
from remoting.errors import RemotingError
from tests.e2e.harness import SMALL_COMMITLOG, ScenarioError
from tests.e2e.nodes import BROKER_BOOT, NAMESRV_BOOT, Node


class EmbeddedBroker(Node):
    """``python -m broker.embedded`` (name server + broker in one process) with SYNC_FLUSH under ``data_dir`` and a
    1 s transaction check interval and timeout.

    Every start binds the same ports, so clients keep their addresses.
    """

    def __init__(self, data_dir: Path, log_dir: Path, extra_args: tuple[str, ...] = ()) -> None:
        super().__init__("broker", log_dir)
        self.data_dir = data_dir
        self.extra_args = extra_args
        self.namesrv_addr = ""
        self.broker_addr = ""
        self.broker_name = ""
        # The name server's and the broker's ports, below the ephemeral range, so no client connection takes one
        # during a restart (broker.ports), with room for the broker's fast channel and HA listener.
        self.ports = free_ports(2, **BROKER)

    def argv(self) -> list[str]:
        argv = [sys.executable, "-m", "broker.embedded", "--data", str(self.data_dir), "--flushDiskType", "SYNC_FLUSH"]
        argv += SMALL_COMMITLOG
        # Check-backs within seconds for the transaction scenario (RocketMQ's defaults: 60 s rounds, 6 s timeout).
        argv += ["--transactionCheckInterval", "1000", "--transactionTimeOut", "1000"]
        # One broker whatever the cores (with a fixed port, extra masters would take unreserved ports above it).
        argv += ["--namesrv-port", str(self.ports[0]), "--listenPort", str(self.ports[1]), "--brokers", "1"]
        return argv + list(self.extra_args)

    def booted(self, text: str) -> bool:
        namesrv, broker = NAMESRV_BOOT.search(text), BROKER_BOOT.search(text)
        if namesrv is None or broker is None:
            return False
        self.namesrv_addr = namesrv.group(1)
        self.broker_name, self.broker_addr = broker.group(1), broker.group(2)
        self.addr = self.broker_addr
        return True

    async def kill_and_restart(self, nursery: trio.Nursery) -> None:
        """SIGKILL (no flush, no checkpoint: only what SYNC_FLUSH made durable survives), then start again."""
        await self.kill()
        await self.start(nursery)


async def create_topic(admin: RemotingClient, broker_addr: str, topic: str, queues: int) -> None:
    """UPDATE_AND_CREATE_TOPIC (17) on the broker, read/write queue numbers ``queues``, perm RW."""
    fields = {
        "topic": topic,
        "defaultTopic": "TBW102",
        "readQueueNums": str(queues),
        "writeQueueNums": str(queues),
        "perm": "6",
        "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": "0",
        "order": "false",
    }
    answer = await admin.invoke(broker_addr, request(RequestCode.UPDATE_AND_CREATE_TOPIC, fields), 10)
    if answer.code != ResponseCode.SUCCESS:
        raise ScenarioError(f"creating topic {topic} answered {answer.code} {answer.remark}")


async def wait_for_consumers(
    admin: RemotingClient, broker_addr: str, group: str, count: int, timeout: float = 30
) -> list[str]:
    """Poll GET_CONSUMER_LIST_BY_GROUP (38) until the broker lists exactly ``count`` clients in ``group``."""
    ids: list[str] = []
    with trio.move_on_after(timeout):
        while True:
            try:
                answer = await admin.invoke(
                    broker_addr, request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group}), 5
                )
            except RemotingError:
                ids = []
            else:
                body = json.loads(bytes(answer.body) or b"{}") if answer.code == ResponseCode.SUCCESS else {}
                ids = list(body.get("consumerIdList", []))
                if len(ids) == count:
                    return ids
            # Heartbeats and unregistrations land asynchronously; re-ask shortly.
            await trio.sleep(0.2)
    raise ScenarioError(f"group {group} never had {count} consumers within {timeout:.0f}s (last: {ids})")


async def wait_for_route(admin: RemotingClient, namesrv_addr: str, topic: str, timeout: float = 30) -> bytes:
    """Poll GET_ROUTEINFO_BY_TOPIC (105) until the name server knows ``topic``; returns the route body."""
    last = "no answer"
    with trio.move_on_after(timeout):
        while True:
            try:
                answer = await admin.invoke(
                    namesrv_addr, request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}), 5
                )
            except RemotingError as exc:
                last = repr(exc)
            else:
                if answer.code == ResponseCode.SUCCESS:
                    return bytes(answer.body)
                last = f"{answer.code} {answer.remark}"
            # The broker registers topic changes with the name server asynchronously; re-ask shortly.
            await trio.sleep(0.2)
    raise ScenarioError(f"name server never routed {topic} within {timeout:.0f}s (last: {last})")
