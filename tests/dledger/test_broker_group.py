"""Three brokers in DLedger mode and a name server in one process, on real sockets under virtual time: the leader
registers as brokerId 0, sends are acknowledged once a majority has them and land in every member's ConsumeQueue,
a follower refuses sends with SERVICE_NOT_AVAILABLE, and when the leader stops another member takes over with
every acknowledged message in place and queue offsets that go on from where they were."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import orjson
import pytest
import trio
import trio.testing

from broker.broker_config import BrokerConfig
from broker.controller import BrokerController
from dledger.commitlog_store import DLedgerMessageStore
from namesrv.config import NamesrvConfig
from namesrv.server import NamesrvServer
from remoting.client import RemotingClient
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request
from remoting.codec.message import decode_record
from tests.broker.helpers import create_topic_request
from tests.conftest import SMALL_STORE
from tests.dledger.ports import free_ports
from tests.processors.conftest import send_request

TOPIC = "DLedgerTopic"


class BrokerGroup:
    """Three DLedger brokers (broker-a, peers n0..n2) registering with one name server."""

    def __init__(self, tmp_path: Path, nursery: trio.Nursery, namesrv: str, batch: bool = False) -> None:
        self.tmp_path, self.nursery, self.namesrv, self.batch = tmp_path, nursery, namesrv, batch
        ports = free_ports(6)
        self.peers = ";".join(f"n{i}-127.0.0.1:{ports[i]}" for i in range(3))
        self.broker_ports = {f"n{i}": ports[3 + i] for i in range(3)}
        self.controllers: dict[str, BrokerController] = {}
        self.scopes: dict[str, trio.CancelScope] = {}

    def config(self, member: str) -> BrokerConfig:
        settings: dict[str, Any] = {
            **SMALL_STORE,
            "broker_ip1": "127.0.0.1",
            "listen_host": "127.0.0.1",
            "listen_port": self.broker_ports[member],
            "fast_channel_enable": False,
            "namesrv_addr": self.namesrv,
            "store_path_root_dir": str(self.tmp_path / member),
            "enable_dleger_commit_log": True,
            "dleger_group": "broker-a",
            "dleger_peers": self.peers,
            "dleger_self_id": member,
            "enable_batch_push": self.batch,
        }
        return attrs.evolve(BrokerConfig(), **settings)

    async def start(self, member: str) -> BrokerController:
        controller = BrokerController(self.config(member))
        scope = trio.CancelScope()

        async def run(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
            with scope:
                await controller.serve(task_status=task_status)

        await self.nursery.start(run)
        self.controllers[member], self.scopes[member] = controller, scope
        return controller

    def stop(self, member: str) -> None:
        self.scopes.pop(member).cancel()
        self.controllers.pop(member)

    def store(self, member: str) -> DLedgerMessageStore:
        store = self.controllers[member].context.store
        assert isinstance(store, DLedgerMessageStore)
        return store

    async def leader(self) -> str:
        while True:
            writable = [m for m in self.controllers if self.store(m).writable]
            if len(writable) == 1:
                return writable[0]
            await trio.sleep(0.1)

    def addr(self, member: str) -> str:
        return f"127.0.0.1:{self.broker_ports[member]}"


async def send(client: RemotingClient, addr: str, body: bytes, queue_id: int = 0) -> tuple[int, dict[str, str]]:
    answer = await client.invoke(addr, send_request(TOPIC, body, queue_id=queue_id), 10)
    return answer.code, answer.ext_fields


@pytest.mark.parametrize("batch", [False, True], ids=["push", "batch_push"])
async def test_a_dledger_group_acknowledges_on_a_majority_and_fails_over(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, batch: bool
) -> None:
    async with trio.open_nursery() as nursery, RemotingClient() as client:
        namesrv = NamesrvServer(NamesrvConfig(listen_port=0, listen_host="127.0.0.1",
                                              kv_config_path=str(tmp_path / "kv.json")))  # fmt: skip
        host, port = await nursery.start(namesrv.serve)
        group = BrokerGroup(tmp_path, nursery, f"{host}:{port}", batch)
        for member in ("n0", "n1", "n2"):
            await group.start(member)
        for member in ("n0", "n1", "n2"):
            answer = await client.invoke(group.addr(member), create_topic_request(TOPIC, queues=2), 5)
            assert answer.code == ResponseCode.SUCCESS
        leader = await group.leader()
        assert group.controllers[leader].context.config.broker_id == 0
        follower = next(m for m in group.controllers if m != leader)
        assert group.controllers[follower].context.config.broker_role == "SLAVE"
        assert group.controllers[follower].context.config.broker_id == int(follower[1:]) + 1

        acked: list[tuple[int, bytes]] = []

        async def one(body: bytes) -> None:
            code, fields = await send(client, group.addr(leader), body)
            assert code == ResponseCode.SUCCESS, fields
            acked.append((int(fields["queueOffset"]), body))

        async with trio.open_nursery() as senders:  # together, so a batch push carries several
            for i in range(5):
                senders.start_soon(one, b"m%d" % i)
        acked.sort()
        assert [o for o, _ in acked] == list(range(5))
        code, _ = await send(client, group.addr(follower), b"refused")
        assert code == ResponseCode.SERVICE_NOT_AVAILABLE
        # The name server routes the topic to the leader as brokerId 0.
        await trio.sleep(2)
        route = await client.invoke(f"{host}:{port}", request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC}), 5)
        brokers = orjson.loads(route.body)["brokerDatas"]
        assert brokers[0]["brokerAddrs"]["0"] == group.addr(leader)

        group.stop(leader)
        new_leader = await group.leader()
        assert new_leader != leader
        code, fields = await send(client, group.addr(new_leader), b"after")
        assert code == ResponseCode.SUCCESS, fields
        acked.append((int(fields["queueOffset"]), b"after"))
        assert acked[-1][0] == 5  # offsets go on from the old leader's
        await trio.sleep(3)
        for member in group.controllers:
            store = group.store(member)
            for offset, body in acked:
                got = store.get(TOPIC, 0, offset, 1)
                assert got.messages, (member, offset)
                assert decode_record(got.messages[0]).body == body
        await group.start(leader)  # the old leader comes back as a follower and catches up
        await trio.sleep(5)
        assert not group.store(leader).writable
        assert group.store(leader).ledger.committed_index == group.store(new_leader).ledger.committed_index
        got = group.store(leader).get(TOPIC, 0, 5, 1)
        assert got.messages and decode_record(got.messages[0]).body == b"after"
        nursery.cancel_scope.cancel()
