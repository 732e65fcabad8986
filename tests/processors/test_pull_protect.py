"""``disableConsumeIfConsumerReadSlowly``: RocketMQ's BrokerController.protectBroker
(broker/src/main/java/org/apache/rocketmq/broker/BrokerController.java), every 3 minutes, disables consumption for a
group whose last pull of a queue was more than ``consumerFallbehindThreshold`` CommitLog bytes behind the head
(DefaultMessageStore.getMessage's recordDiskFallBehindSize)."""

from __future__ import annotations

import trio
import trio.testing

from broker.protection import BrokerProtection
from processors.pull import PullMessageProcessor
from processors.send import SendMessageProcessor
from remoting.codec.codes import ResponseCode
from remoting.codec.command import RemotingCommand
from remoting.processor import RequestContext
from tests.processors.conftest import GROUP, MakeBroker, pull_request, send_request

NO_SUSPEND = 0x4


async def pull_one(broker: object, ctx: RequestContext, group: str, offset: int = 0) -> RemotingCommand:
    req = pull_request(sys_flag=NO_SUSPEND, max_msgs=1, group=group, offset=offset)
    response = PullMessageProcessor(broker).pull(ctx, req, allow_suspend=False)  # type: ignore[arg-type]
    assert response is not None
    return response


async def test_a_group_reading_too_far_behind_is_disabled_every_three_minutes(
    make_broker: MakeBroker, peer_ctx: RequestContext, autojump_clock: trio.testing.MockClock
) -> None:
    broker = make_broker(disable_consume_if_consumer_read_slowly=True, consumer_fallbehind_threshold=600)
    relaxed = make_broker(consumer_fallbehind_threshold=600)
    for b in (broker, relaxed):
        sender = SendMessageProcessor(b)
        for i in range(5):
            sent = await sender.process(peer_ctx, send_request(body=b"x" * 200 + bytes([i])))
            assert sent is not None and sent.code == ResponseCode.SUCCESS
        assert (await pull_one(b, peer_ctx, GROUP)).code == ResponseCode.SUCCESS  # 4 records behind the head
        assert (await pull_one(b, peer_ctx, "caught_up", offset=4)).code == ResponseCode.SUCCESS  # at the head
    async with trio.open_nursery() as nursery:
        for b in (broker, relaxed):
            await nursery.start(BrokerProtection(b).run)
        await trio.sleep(179)
        assert (await pull_one(broker, peer_ctx, GROUP, 1)).code == ResponseCode.SUCCESS
        await trio.sleep(2)
        refused = await pull_one(broker, peer_ctx, GROUP, 2)
        assert (refused.code, refused.remark) == (
            ResponseCode.NO_PERMISSION,
            f"subscription group no permission, {GROUP}",
        )
        group = broker.groups.get(GROUP)
        assert group is not None and not group.consume_enable
        assert (await pull_one(broker, peer_ctx, "caught_up", offset=4)).code == ResponseCode.SUCCESS
        # Without the switch nothing is disabled, however far behind.
        assert (await pull_one(relaxed, peer_ctx, GROUP, 1)).code == ResponseCode.SUCCESS
        nursery.cancel_scope.cancel()
