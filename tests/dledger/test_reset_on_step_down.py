"""An admin's reset of a queue held by a DLedger leader (``useServerSideResetOffset``) that steps down before a pull
takes it: the member, a slave now, keeps the in-memory reset and answers the pull that takes it the slave's way.
5.3.3's PullMessageProcessor gives the pull status OFFSET_RESET, and DefaultPullMessageResultHandler turns its
PULL_OFFSET_MOVED on a slave without ``offsetCheckInSlave`` into PULL_RETRY_IMMEDIATELY, suggesting the group's
broker, with no OFFSET_MOVED_EVENT. Three members on real sockets under virtual time."""

from __future__ import annotations

from pathlib import Path

import orjson
import trio
import trio.testing

from broker.embedded_dledger import EmbeddedDLedgerGroup
from remoting.client import RemotingClient
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand, request
from remoting.codec.topics import OFFSET_MOVED_EVENT
from tests.broker.helpers import create_topic_request
from tests.conftest import SMALL_STORE
from tests.dledger.test_role_services import transfer_leadership
from tests.processors.conftest import send_request

TOPIC = "ResetStepDown"
GROUP = "reset-step-down-group"


def pull_request(offset: int) -> RemotingCommand:
    fields = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "0", "queueOffset": str(offset), "maxMsgNums": "32",
              "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": "*",
              "subVersion": "0"}  # fmt: skip
    return request(RequestCode.PULL_MESSAGE, fields)


def reset_request(offset: int) -> RemotingCommand:
    fields = {"topic": TOPIC, "group": GROUP, "timestamp": "-1", "isForce": "false", "queueId": "0",
              "offset": str(offset)}  # fmt: skip
    return request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, fields)


async def test_a_reset_taken_on_a_member_that_stepped_down_is_answered_as_a_slave_answers(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with (
        EmbeddedDLedgerGroup(tmp_path, use_server_side_reset_offset=True, **SMALL_STORE) as group,
        RemotingClient() as client,
    ):
        x = await group.leader()
        addr = group.addr(x)
        assert (await client.invoke(addr, create_topic_request(TOPIC, queues=1), 5)).code == ResponseCode.SUCCESS
        subscription = request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=orjson.dumps({"groupName": GROUP}))
        assert (await client.invoke(addr, subscription, 5)).code == ResponseCode.SUCCESS
        for body in (b"m0", b"m1", b"m2"):
            assert (await client.invoke(addr, send_request(TOPIC, body), 10)).code == ResponseCode.SUCCESS
        assert (await client.invoke(addr, reset_request(1), 10)).code == ResponseCode.SUCCESS
        await transfer_leadership(group, client, x, next(m for m in group.ids if m != x))
        answer = await client.invoke(addr, pull_request(3), 10)
        assert (answer.code, answer.remark) == (ResponseCode.PULL_RETRY_IMMEDIATELY, "OFFSET_RESET")
        assert (answer.ext_fields["nextBeginOffset"], answer.ext_fields["suggestWhichBrokerId"]) == ("1", "0")
        moved = request(RequestCode.GET_MAX_OFFSET, {"topic": OFFSET_MOVED_EVENT, "queueId": "0"})
        assert (await client.invoke(addr, moved, 5)).ext_fields["offset"] == "0"
