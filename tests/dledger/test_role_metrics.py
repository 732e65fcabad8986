"""What a DLedger member's ``/metrics`` counts as incoming messages follows its role (broker/dledger_mode.py
``follow_roles``, broker/stats/manager.py): three brokers on real sockets under virtual time."""

from __future__ import annotations

from pathlib import Path

import orjson
import trio
import trio.testing

from broker.dledger_mode import dledger_config_of
from broker.embedded_dledger import EmbeddedDLedgerGroup
from broker.metrics.snapshot import take_snapshot
from dledger.codes import RequestCode as DLedgerCode
from dledger.codes import ResponseCode as DLedgerResult
from dledger.messages import LeadershipTransferRequest, encode
from remoting.client import RemotingClient
from remoting.codec.command import request
from tests.broker.helpers import create_topic_request
from tests.conftest import SMALL_STORE
from tests.processors.conftest import send_request

TOPIC = "DLedgerIncoming"


def incoming(group: EmbeddedDLedgerGroup) -> dict[str, float]:
    """Each member's ``rocketmq_messages_in_total`` of TOPIC, as a scrape would read it."""
    counts = {}
    for member, controller in group.controllers.items():
        snapshot = take_snapshot(controller.context, {})
        counts[member] = snapshot.incoming.get(TOPIC, (0, 0))[0]
    return counts


async def dispatched_everywhere(group: EmbeddedDLedgerGroup, count: int) -> None:
    with trio.fail_after(60):
        while any(group.store(m).max_offset_in_queue(TOPIC, 0) < count for m in group.controllers):
            await trio.sleep(0.1)


async def hand_leadership_to(group: EmbeddedDLedgerGroup, client: RemotingClient, member: str) -> None:
    """DLedger's LEADERSHIP_TRANSFER from whoever leads to ``member``, once it holds the leader's log."""
    leader = await group.leader()
    with trio.fail_after(60):
        while group.store(member).ledger.end_index != group.store(leader).ledger.end_index:
            await trio.sleep(0.1)
    term = group.store(leader).server.node.member.curr_term
    transfer = LeadershipTransferRequest(
        group="broker-a", remote_id=leader, term=term, transfer_id=leader, transferee_id=member
    )
    peers = dledger_config_of(group.config(leader)).peer_map
    answer = await client.invoke(peers[leader], request(DLedgerCode.LEADERSHIP_TRANSFER, body=encode(transfer)), 10)
    assert orjson.loads(answer.body)["code"] == DLedgerResult.SUCCESS
    assert await group.leader() == member


async def test_followers_count_no_incoming_messages_and_a_new_leader_counts_from_its_promotion(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """As a classic slave (RocketMQ 5.3.3 counts incoming messages in SendMessageProcessor, which a follower never
    runs for them), a follower replicates the leader's messages without counting them as incoming; handed the
    leadership, it counts the sends it takes from then on, and the former leader counts no more."""
    async with EmbeddedDLedgerGroup(tmp_path, **SMALL_STORE) as group, RemotingClient() as client:
        x = await group.leader()
        assert (await client.invoke(group.addr(x), create_topic_request(TOPIC, queues=1), 5)).code == 0
        for i in range(3):
            assert (await client.invoke(group.addr(x), send_request(TOPIC, b"x%d" % i, queue_id=0), 10)).code == 0
        await dispatched_everywhere(group, 3)
        assert incoming(group) == {m: 3 if m == x else 0 for m in group.ids}

        y = next(m for m in group.ids if m != x)
        await hand_leadership_to(group, client, y)
        for i in range(2):
            assert (await client.invoke(group.addr(y), send_request(TOPIC, b"y%d" % i, queue_id=0), 10)).code == 0
        await dispatched_everywhere(group, 5)
        assert incoming(group) == {m: 3 if m == x else 2 if m == y else 0 for m in group.ids}
