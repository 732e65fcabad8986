"""The retry copy a pop revive writes, and the revive loop's broker settings (RocketMQ 5.3.3's PopReviveService and
BrokerConfig), in virtual time over the embedded broker."""

from __future__ import annotations

import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from broker.pop import PopService
from broker.pop.revive import ReviveService
from tests.proxy.test_pop import pop_all, send, start_pop
from tests.semantics.helpers import create_topic, use_virtual_store_clock


async def test_a_revived_copy_is_born_on_the_broker(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """5.3.3's PopReviveService.reviveRetry sets the retry copy's born host to the broker's store host, as its store
    host (broker/src/main/java/org/apache/rocketmq/broker/processor/PopReviveService.java); ours kept the producer's."""
    use_virtual_store_clock(embedded_cluster)
    pop, _ = await start_pop(embedded_cluster, nursery)
    await create_topic(embedded_cluster, "PopBorn", queues=1)
    await send(embedded_cluster, "PopBorn", b"slow")
    [first] = await pop_all(pop, "G", "PopBorn", invisible=10_000)
    assert first.message.born_host != first.message.store_host  # the producer's address
    await trio.sleep(14)
    [again] = await pop_all(pop, "G", "PopBorn", invisible=10_000)
    assert again.attempt == 2
    assert again.message.born_host == again.message.store_host == first.message.store_host
    assert again.message.born_timestamp == first.message.born_timestamp


async def test_revive_interval_is_a_broker_setting_read_at_each_round(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """5.3.3's BrokerConfig ``reviveInterval`` (1000 ms): PopReviveService waits that long before each round, read
    every time. Ours had it fixed at 1 s and refused the key as unknown."""
    use_virtual_store_clock(embedded_cluster)
    ctx = embedded_cluster.controller.context
    assert ctx.config.revive_interval == 1000
    pop: PopService
    revive: ReviveService
    pop, revive = await start_pop(embedded_cluster, nursery)
    assert await ctx.update_config({"reviveInterval": "60000"}) == []
    await create_topic(embedded_cluster, "PopSlow", queues=1)
    await send(embedded_cluster, "PopSlow", b"late")
    assert len(await pop_all(pop, "G", "PopSlow", invisible=10_000)) == 1
    await trio.sleep(30)  # due at 10 s, but no round before 61 s
    assert await pop_all(pop, "G", "PopSlow") == []
    assert revive.revived == 0
    await trio.sleep(32)
    [again] = await pop_all(pop, "G", "PopSlow")
    assert (again.message.body, again.attempt) == (b"late", 2)
