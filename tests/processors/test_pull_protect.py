"""``disableConsumeIfConsumerReadSlowly``: RocketMQ's BrokerController.protectBroker
(broker/src/main/java/org/apache/rocketmq/broker/BrokerController.java), every 3 minutes, disables consumption for a
group whose last pull of a queue was more than ``consumerFallbehindThreshold`` CommitLog bytes behind the head
(DefaultMessageStore.getMessage's recordDiskFallBehindSize)."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from broker.context import config_dir_of
from broker.pop import PopService
from broker.protection import BrokerProtection
from broker.timer.service import TimerMessageService
from processors.common import RequestRejected
from processors.pull import PullMessageProcessor
from processors.send import SendMessageProcessor
from remoting.codec.codes import ResponseCode
from remoting.codec.command import RemotingCommand
from remoting.processor import RequestContext
from store.metadata_files import TopicConfig
from tests.processors.conftest import GROUP, TOPIC, MakeBroker, pull_request, send_request

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


async def test_a_pop_group_reading_too_far_behind_is_disabled_too(
    make_broker: MakeBroker, peer_ctx: RequestContext
) -> None:
    """RocketMQ 5.3.3's PopMessageProcessor reads through DefaultMessageStore.getMessageAsync with the group, which
    records how far behind the read was (recordDiskFallBehindSize) as for a pull: protectBroker disables a 5.x pop
    group reading too far behind as well, and its pops then answer NO_PERMISSION."""
    broker = make_broker(disable_consume_if_consumer_read_slowly=True, consumer_fallbehind_threshold=600)
    broker.topics.update_topic(TopicConfig(TOPIC, 1, 1))
    sender = SendMessageProcessor(broker)
    for i in range(5):
        sent = await sender.process(peer_ctx, send_request(body=b"x" * 200 + bytes([i])))
        assert sent is not None and sent.code == ResponseCode.SUCCESS
    pop = PopService(broker, TimerMessageService(broker.store, config_dir_of(broker.config)).rewrite)
    popped = pop.pop("pop_group", TOPIC, 1, 30_000, None)
    assert [p.message.queue_offset for p in popped] == [0]  # 4 records behind the head
    assert BrokerProtection(broker).protect() == ["pop_group"]
    with pytest.raises(RequestRejected) as refused:
        pop.pop("pop_group", TOPIC, 1, 30_000, None)
    assert (refused.value.code, refused.value.remark) == (
        ResponseCode.NO_PERMISSION,
        "subscription group no permission, pop_group",
    )
