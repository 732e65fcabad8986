"""PULL_MESSAGE and replication (RocketMQ 4.9.8's PullMessageProcessor): a master whose unread backlog is beyond
``accessMessageInMemoryMaxRatio`` of RAM suggests ``whichBrokerWhenConsumeSlowly`` when ``slaveReadEnable`` is on
and the master otherwise; a slave serves the pull whatever ``slaveReadEnable`` says and suggests the master when it
is off (the PULL_RETRY_IMMEDIATELY RocketMQ sets first is overwritten by its status switch)."""

from __future__ import annotations

import pytest

from remoting.codec.codes import ResponseCode
from remoting.processor import RequestContext
from store.metadata_files import SubscriptionGroupConfig
from tests.processors.conftest import GROUP, MakeBroker, pull_request
from tests.processors.test_pull import NO_SUSPEND, fields, pull, put

#: With a ratio of 0 % any message but the newest is "not in memory".
NOTHING_IN_MEMORY = {"access_message_in_memory_max_ratio": 0}


@pytest.mark.parametrize(("slave_read_enable", "suggested"), [(True, 2), (False, 0)])
async def test_a_backlog_beyond_memory_suggests_the_slow_consumers_broker_with_slave_read(
    make_broker: MakeBroker, peer_ctx: RequestContext, slave_read_enable: bool, suggested: int
) -> None:
    broker = make_broker(slave_read_enable=slave_read_enable, store_overrides=NOTHING_IN_MEMORY)
    broker.groups.update(SubscriptionGroupConfig(GROUP, which_broker_when_consume_slowly=2))
    await put(broker, peer_ctx, "A", "B", "C")
    behind = pull(broker, peer_ctx, pull_request(sys_flag=NO_SUSPEND, max_msgs=1))
    assert behind.code == ResponseCode.SUCCESS and fields(behind)[0] == suggested


async def test_a_slave_without_slave_read_serves_the_pull_and_suggests_the_master(
    make_broker: MakeBroker, peer_ctx: RequestContext
) -> None:
    broker = make_broker(broker_role="SLAVE", broker_id=1)
    await put(broker, peer_ctx, "A", "B")  # this test's store takes appends: the processor only sees the role
    response = pull(broker, peer_ctx, pull_request(sys_flag=NO_SUSPEND))
    assert (response.code, response.remark) == (ResponseCode.SUCCESS, "FOUND")
    assert fields(response)[0] == 0 and response.body


async def test_a_slave_with_slave_read_suggests_the_group_s_broker(
    make_broker: MakeBroker, peer_ctx: RequestContext
) -> None:
    broker = make_broker(broker_role="SLAVE", broker_id=1, slave_read_enable=True)
    broker.groups.update(SubscriptionGroupConfig(GROUP, broker_id=1))
    await put(broker, peer_ctx, "A")
    response = pull(broker, peer_ctx, pull_request(sys_flag=NO_SUSPEND))
    assert response.code == ResponseCode.SUCCESS and fields(response)[0] == 1
