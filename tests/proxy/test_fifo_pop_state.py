"""The orderly (FIFO) pop state across the life of its queue and its file: a queue deleted and created again, a state
file from before the queue was recreated or written before the pop time was kept, retention under a message in
flight, a state lost in a kill -9, the attempt id of a delivery in flight across a restart, and changes of
invisibility that no longer apply. Real embedded broker, the broker's PopService or the proxy's Trio-side activity,
virtual time (``autojump_clock``)."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from broker.pop import AckOutcome, PopService
from client.admin import Admin
from proxy.common import Code, finish_now
from proxy.config import ProxyConfig
from proxy.pb import service
from proxy.startup import build_activity
from remoting.codec.bodies.broker_metadata import SubscriptionGroupConfig
from tests.proxy.test_consumer_rpcs import _ack_request, _activity, _messages, _receive_request
from tests.proxy.test_pop import SMALL_SEGMENTS, delete_topic, expire_old_segments, fill_a_segment, send, start_pop
from tests.proxy.test_renew import md
from tests.semantics.helpers import create_topic, use_virtual_store_clock

#: An invisible time the restart's file work (autojump) cannot outrun.
_LONG_MS = 3600 * 1000


async def _saved_and_stopped(pop: PopService, nursery: trio.Nursery, autojump_clock: trio.testing.MockClock) -> Path:
    """Wait until ``pop``'s FIFO state is on disk, then stop its revive loop; returns the state file's path. Virtual
    time stands still from here (the save is a thread's write: autojump would run the revive loop's timers on while
    it waits, tens of seconds on a loaded machine) while files close and open."""
    autojump_clock.autojump_threshold = math.inf
    await pop.fifo_persister.wait_saved()
    nursery.cancel_scope.cancel()
    return pop.fifo_persister.file.path


async def _restart_broker(
    cluster: EmbeddedCluster,
    autojump_clock: trio.testing.MockClock,
    clock: Callable[[], int],
    while_down: Callable[[], None] = lambda: None,
) -> None:
    """A clean restart, virtual time standing still; ``while_down`` runs while the broker is stopped."""
    autojump_clock.autojump_threshold = math.inf
    await cluster.stop_broker()
    while_down()
    await cluster.start_broker()
    autojump_clock.autojump_threshold = 0
    use_virtual_store_clock(cluster, clock)


def _drop_pop_times(path: Path) -> None:
    """popFifoState.json (and its .bak) as written before the pop time was kept: the same fields without popTime."""
    for file in (path, path.with_name(path.name + ".bak")):
        if file.exists():
            data = orjson.loads(file.read_bytes())
            for queue in data["queues"]:
                queue.pop("popTime", None)
            file.write_bytes(orjson.dumps(data))


def _remove_state_file(path: Path) -> None:
    """popFifoState.json (and its .bak) gone, as after a kill -9 before the first save."""
    for file in (path, path.with_name(path.name + ".bak")):
        file.unlink(missing_ok=True)


def _pop_all(pop: PopService, group: str, topic: str) -> list[tuple[bytes, int]]:
    """Pop and ack the queue until it hands out nothing: (body, attempt) of each message, in order."""
    handed: list[tuple[bytes, int]] = []
    while batch := pop.pop(group, topic, 32, 10_000, None, fifo=True):
        handed += [(p.message.body, p.attempt) for p in batch]
        for p in batch:
            assert pop.ack(group, topic, p.handle) is AckOutcome.OK
    return handed


async def test_a_fifo_queue_deleted_and_recreated_hands_out_every_new_message(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """The FIFO state of a deleted queue (offsets acknowledged past the first unacknowledged one, attempt counts,
    invisible times) goes with its ConsumeQueue: the new queue's messages at the same offsets are neither skipped as
    acknowledged nor start at attempt 2 (RocketMQ's ConsumerOrderInfoManager.autoClean drops the order info of a
    topic that no longer exists, and an order info only ever speaks of the offsets of its own pop)."""
    use_virtual_store_clock(embedded_cluster)
    pop, _ = await start_pop(embedded_cluster, nursery)
    await create_topic(embedded_cluster, "FifoRe", queues=1)
    await send(embedded_cluster, "FifoRe", b"old-0", b"old-1", b"old-2")
    old = pop.pop("GRe", "FifoRe", 32, 10_000, None, fifo=True)
    assert [p.message.body for p in old] == [b"old-0", b"old-1", b"old-2"]
    assert pop.ack("GRe", "FifoRe", old[0].handle) is AckOutcome.OK
    assert pop.ack("GRe", "FifoRe", old[2].handle) is AckOutcome.OK  # old-1 is still being consumed
    await delete_topic(embedded_cluster, "FifoRe", autojump_clock)
    await create_topic(embedded_cluster, "FifoRe", queues=1)
    await send(embedded_cluster, "FifoRe", b"new-0", b"new-1", b"new-2")
    await trio.sleep(11)
    assert _pop_all(pop, "GRe", "FifoRe") == [(b"new-0", 1), (b"new-1", 1), (b"new-2", 1)]


async def test_the_ack_of_a_deleted_queues_fifo_message_does_not_acknowledge_the_new_one_at_its_offset(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """A handle still in flight when its topic was deleted and created again names an offset the new queue reuses:
    its ack finds the queue no longer holds its message (another CommitLog offset there) and does nothing."""
    use_virtual_store_clock(embedded_cluster)
    pop, _ = await start_pop(embedded_cluster, nursery)
    await create_topic(embedded_cluster, "FifoOld", queues=1)
    await send(embedded_cluster, "FifoOld", b"old-0")
    [old] = pop.pop("GOld", "FifoOld", 32, _LONG_MS, None, fifo=True)
    await delete_topic(embedded_cluster, "FifoOld", autojump_clock)
    await create_topic(embedded_cluster, "FifoOld", queues=1)
    await send(embedded_cluster, "FifoOld", b"new-0", b"new-1")
    assert pop.ack("GOld", "FifoOld", old.handle) is AckOutcome.STALE
    assert _pop_all(pop, "GOld", "FifoOld") == [(b"new-0", 1), (b"new-1", 1)]


async def _state_saved_then_topic_deleted(
    cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, group: str, topic: str, acked: tuple[int, ...]
) -> None:
    """``topic`` gets old-0, old-1, old-2, all popped FIFO by ``group`` for an hour, those at ``acked`` acked; the
    state saved, the broker restarted without the gRPC front door (no pop service hears of it) deletes ``topic``."""
    clock = use_virtual_store_clock(cluster)
    await create_topic(cluster, topic, queues=1)
    await send(cluster, topic, b"old-0", b"old-1", b"old-2")
    async with trio.open_nursery() as nursery:
        pop, _ = await start_pop(cluster, nursery)
        old = pop.pop(group, topic, 32, _LONG_MS, None, fifo=True)
        assert [pop.ack(group, topic, old[i].handle) for i in acked] == [AckOutcome.OK] * len(acked)
        await _saved_and_stopped(pop, nursery, autojump_clock)
    await _restart_broker(cluster, autojump_clock, clock)
    await delete_topic(cluster, topic, autojump_clock)


@pytest.mark.parametrize("recreated", ["while the pop service is down", "after it started"])
async def test_a_state_file_from_before_its_queue_was_recreated_does_not_apply_to_the_new_queue(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, recreated: str
) -> None:
    """The broker ran without the gRPC front door (no pop service to hear of it) while a topic was deleted: the state
    file still speaks of the old queue. A topic gone at load is dropped (ConsumerOrderInfoManager.autoClean); one
    created again meanwhile keeps nothing of the old queue (see the next test), so neither blocks nor raises the attempt
    of its new messages."""
    await _state_saved_then_topic_deleted(embedded_cluster, autojump_clock, "GFile", "FifoFile", acked=(0,))
    if recreated == "while the pop service is down":
        await create_topic(embedded_cluster, "FifoFile", queues=1)
        await send(embedded_cluster, "FifoFile", b"new-0")
    async with trio.open_nursery() as nursery:
        pop, _ = await start_pop(embedded_cluster, nursery)
        if recreated != "while the pop service is down":
            await create_topic(embedded_cluster, "FifoFile", queues=1)
            await send(embedded_cluster, "FifoFile", b"new-0")
        assert _pop_all(pop, "GFile", "FifoFile") == [(b"new-0", 1)]
        nursery.cancel_scope.cancel()


async def test_a_queue_recreated_while_the_pop_service_was_down_and_refilled_past_the_old_offsets_starts_afresh(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """The state file speaks of the deleted queue (offset 1 in flight, offset 2 acknowledged ahead) and the queue
    created again holds offsets 1 and 2 before the first FIFO pop: their messages lie at other CommitLog offsets, so
    the state is the old queue's and goes; new-1 is not blocked for the old hour nor handed out at attempt 2, and
    new-2 is not skipped as acknowledged."""
    await _state_saved_then_topic_deleted(embedded_cluster, autojump_clock, "GRef", "FifoRef", acked=(0, 2))
    await create_topic(embedded_cluster, "FifoRef", queues=1)
    await send(embedded_cluster, "FifoRef", b"new-0", b"new-1", b"new-2")
    async with trio.open_nursery() as nursery:
        pop, _ = await start_pop(embedded_cluster, nursery)
        handed = _pop_all(pop, "GRef", "FifoRef")
        await trio.sleep(_LONG_MS / 1000 + 1)
        handed += _pop_all(pop, "GRef", "FifoRef")
        assert handed == [(b"new-0", 1), (b"new-1", 1), (b"new-2", 1)]
        nursery.cancel_scope.cancel()


async def test_retention_moving_the_min_offset_past_an_in_flight_fifo_message_keeps_the_queue_blocked(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Retention deletes the CommitLog segment of a FIFO message in flight and the queue's min offset moves past
    it: the queue stays blocked until the message is acked (or visible again), as RocketMQ's popMsgFromQueue asks
    ConsumerOrderInfoManager.checkBlock before it reads, whatever the min offset; the ack then frees the queue."""
    async with EmbeddedCluster(tmp_path / "cluster", **SMALL_SEGMENTS) as cluster, trio.open_nursery() as nursery:
        use_virtual_store_clock(cluster)
        pop, _ = await start_pop(cluster, nursery)
        await create_topic(cluster, "FifoRet", queues=1)
        await send(cluster, "FifoRet", b"a")
        assert _pop_all(pop, "GRet", "FifoRet") == [(b"a", 1)]  # the group's offset is committed: 1
        await send(cluster, "FifoRet", b"m0")
        [first] = pop.pop("GRet", "FifoRet", 32, _LONG_MS, None, fifo=True)
        assert first.message.body == b"m0"
        await fill_a_segment(cluster)
        await send(cluster, "FifoRet", b"m1")
        await expire_old_segments(cluster, autojump_clock)
        assert cluster.controller.context.store.min_offset_in_queue("FifoRet", 0) == 2  # m0 still in the client's hands
        then = pop.pop("GRet", "FifoRet", 32, _LONG_MS, None, fifo=True)
        assert [p.message.body for p in then] == [], "m1 handed out while m0 of the same FIFO queue is in flight"
        assert pop.ack("GRet", "FifoRet", first.handle) is AckOutcome.OK
        assert _pop_all(pop, "GRet", "FifoRet") == [(b"m1", 1)]
        nursery.cancel_scope.cancel()


async def test_a_fifo_delivery_in_flight_across_an_upgrade_from_the_old_state_file_still_acks(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """A state file written before the pop time was kept knows a delivery by its visible time (the offset's
    invisibleUntil equals the handle's): the handle of a delivery in flight at the upgrade still acks it, and the
    message does not come again (a duplicate the client could not tell)."""
    clock = use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "FifoUp", queues=1)
    await send(embedded_cluster, "FifoUp", b"u0", b"u1")
    async with trio.open_nursery() as nursery:
        pop, _ = await start_pop(embedded_cluster, nursery)
        [first] = pop.pop("GUp", "FifoUp", 1, _LONG_MS, None, fifo=True)
        path = await _saved_and_stopped(pop, nursery, autojump_clock)
    await _restart_broker(embedded_cluster, autojump_clock, clock, lambda: _drop_pop_times(path))
    async with trio.open_nursery() as nursery:
        pop, _ = await start_pop(embedded_cluster, nursery)
        assert not first.handle.expired(pop.now_ms())
        outcome = pop.ack("GUp", "FifoUp", first.handle)
        await trio.sleep(_LONG_MS / 1000 + 1)
        after = [(p.message.body, p.attempt) for p in pop.pop("GUp", "FifoUp", 1, 60_000, None, fifo=True)]
        assert (outcome, after) == (AckOutcome.OK, [(b"u1", 1)]), (outcome, after)
        nursery.cancel_scope.cancel()


async def test_the_attempt_id_of_a_fifo_delivery_in_flight_survives_a_clean_restart(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """The attempt id of the delivery in flight is saved with the queue's state (RocketMQ keeps it in
    consumerOrderInfo.json, OrderInfo's ``a``): after a restart a pop repeating it gets the batch again at the same
    attempt, while a pop with another attempt id is still blocked."""
    clock = use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "FifoAid", queues=1)
    await send(embedded_cluster, "FifoAid", b"a0", b"a1")
    async with trio.open_nursery() as nursery:
        pop, _ = await start_pop(embedded_cluster, nursery)
        first = pop.pop("GAid", "FifoAid", 32, _LONG_MS, None, fifo=True, attempt_id="aid-1")
        assert [(p.message.body, p.attempt) for p in first] == [(b"a0", 1), (b"a1", 1)]
        await _saved_and_stopped(pop, nursery, autojump_clock)
    await _restart_broker(embedded_cluster, autojump_clock, clock)
    async with trio.open_nursery() as nursery:
        pop, _ = await start_pop(embedded_cluster, nursery)
        other = pop.pop("GAid", "FifoAid", 32, _LONG_MS, None, fifo=True, attempt_id="aid-2")
        again = pop.pop("GAid", "FifoAid", 32, _LONG_MS, None, fifo=True, attempt_id="aid-1")
        assert (other, [(p.message.body, p.attempt) for p in again]) == ([], [(b"a0", 1), (b"a1", 1)])
        nursery.cancel_scope.cancel()


async def test_the_grpc_ack_of_a_fifo_handle_from_before_the_upgrade_is_not_silently_dropped(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """Same upgrade, seen by the client: AckMessage answers OK and the acknowledged message is not handed out
    again."""
    clock = use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "FifoUpG", queues=1)
    await send(embedded_cluster, "FifoUpG", b"g0")
    embedded_cluster.controller.context.groups.update(SubscriptionGroupConfig("GUpG", consume_message_orderly=True))
    async with trio.open_nursery() as nursery:
        activity, revive = build_activity(embedded_cluster.controller, ProxyConfig())
        await nursery.start(revive.run)
        req = _receive_request("GUpG", "FifoUpG", batch=1, invisible_s=_LONG_MS // 1000)
        [message] = _messages(activity.consuming.receive_now(req, md("c@1"), None))
        path = await _saved_and_stopped(activity.consuming.pop, nursery, autojump_clock)
    await _restart_broker(embedded_cluster, autojump_clock, clock, lambda: _drop_pop_times(path))
    async with trio.open_nursery() as nursery:
        activity, revive = build_activity(embedded_cluster.controller, ProxyConfig())
        await nursery.start(revive.run)
        response = finish_now(activity.consuming.ack(_ack_request("GUpG", "FifoUpG", message), md("c@1")))
        assert response.status.code == Code.OK
        await trio.sleep(_LONG_MS / 1000 + 1)
        again = _messages(activity.consuming.receive_now(req, md("c@1"), None))
        assert [m.body for m in again] == [], "a message whose ack was answered OK came again"
        nursery.cancel_scope.cancel()


async def test_fifo_acks_after_the_state_was_lost_acknowledge_their_messages(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """A kill -9 before the state file was saved: the queue knows no delivery in flight, and the acks of the
    handles the client holds acknowledge their messages (RocketMQ's ConsumerOrderInfoManager.commitAndNext commits
    without order info) rather than failing, so what the client consumed does not come again."""
    clock = use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "FifoLost", queues=1)
    await send(embedded_cluster, "FifoLost", b"s0", b"s1")
    async with trio.open_nursery() as nursery:
        pop, _ = await start_pop(embedded_cluster, nursery)
        held = pop.pop("GLost", "FifoLost", 32, _LONG_MS, None, fifo=True)
        path = await _saved_and_stopped(pop, nursery, autojump_clock)
    await _restart_broker(embedded_cluster, autojump_clock, clock, lambda: _remove_state_file(path))
    await send(embedded_cluster, "FifoLost", b"s2")
    async with trio.open_nursery() as nursery:
        pop, _ = await start_pop(embedded_cluster, nursery)
        assert [pop.ack("GLost", "FifoLost", p.handle) for p in held] == [AckOutcome.OK, AckOutcome.OK]
        assert _pop_all(pop, "GLost", "FifoLost") == [(b"s2", 1)]
        nursery.cancel_scope.cancel()


async def test_a_fifo_change_of_invisibility_of_an_acknowledged_message_answers_ok(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """RocketMQ's processChangeInvisibleTimeForOrder answers SUCCESS for an offset below the committed one (and for
    a pop time the order info no longer holds), changing nothing: a client renewing a message it acked meanwhile
    gets OK and a handle, not INTERNAL_SERVER_ERROR."""
    activity = await _activity(embedded_cluster, nursery)
    embedded_cluster.controller.context.groups.update(SubscriptionGroupConfig("GChg", consume_message_orderly=True))
    await create_topic(embedded_cluster, "FifoChg", queues=1)
    await send(embedded_cluster, "FifoChg", b"c0", b"c1")
    [message] = _messages(activity.consuming.receive_now(_receive_request("GChg", "FifoChg", batch=1), md("c@1"), None))
    acked = finish_now(activity.consuming.ack(_ack_request("GChg", "FifoChg", message), md("c@1")))
    assert acked.status.code == Code.OK
    req = service.ChangeInvisibleDurationRequest(
        receipt_handle=message.system_properties.receipt_handle, message_id=message.system_properties.message_id
    )
    req.group.name, req.topic.name = "GChg", "FifoChg"
    req.invisible_duration.FromSeconds(30)
    response = finish_now(activity.consuming.change_invisible(req, md("c@1")))
    assert (response.status.code, bool(response.receipt_handle)) == (Code.OK, True), response.status.message
    [then] = _messages(activity.consuming.receive_now(_receive_request("GChg", "FifoChg", batch=1), md("c@1"), None))
    assert then.body == b"c1"


async def test_the_fifo_state_of_a_deleted_group_is_forgotten_at_the_next_save(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """ConsumerOrderInfoManager.autoClean drops, when it saves, the order info of a group that no longer exists (and
    of a queue that is empty): a deleted group's in-flight delivery neither stays in memory and in the file for good
    nor blocks the group created again under its name once the state was saved."""
    use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "FifoGone", queues=1)
    await send(embedded_cluster, "FifoGone", b"g0")
    async with trio.open_nursery() as nursery:
        pop, _ = await start_pop(embedded_cluster, nursery)
        [first] = pop.pop("GGone", "FifoGone", 32, _LONG_MS, None, fifo=True)
        assert first.message.body == b"g0"
        await pop.fifo_persister.wait_saved()
        autojump_clock.autojump_threshold = math.inf
        async with Admin(embedded_cluster.namesrv_addr) as admin:
            cluster = embedded_cluster.controller.context.config.broker_cluster_name
            await admin.delete_subscription_group("GGone", cluster=cluster)
        autojump_clock.autojump_threshold = 0
        assert _pop_all(pop, "GLive", "FifoGone") == [(b"g0", 1)]  # a change of another group: the state is saved
        await pop.fifo_persister.wait_saved()
        saved = orjson.loads(pop.fifo_persister.file.path.read_bytes())
        assert [q["group"] for q in saved["queues"]] == [], "the deleted group's state is still saved"
        again = pop.pop("GGone", "FifoGone", 32, _LONG_MS, None, fifo=True)
        assert [(p.message.body, p.attempt) for p in again] == [(b"g0", 1)], "the group created again is blocked"
        nursery.cancel_scope.cancel()


async def test_a_fifo_receive_parked_after_a_restart_wakes_when_the_batch_from_before_is_visible_again(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """ConsumerOrderInfoLockManager.recover sets the lock-free timer of each queue whose order info, read back at
    start, is still in flight: a receive parked after a restart gets the batch popped before it once its invisible
    time ends, not at the end of its polling window."""
    clock = use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "FifoTimer", queues=1)
    await send(embedded_cluster, "FifoTimer", b"t0")
    embedded_cluster.controller.context.groups.update(SubscriptionGroupConfig("GTimer", consume_message_orderly=True))
    req = _receive_request("GTimer", "FifoTimer", batch=1, invisible_s=30)
    async with trio.open_nursery() as nursery:
        activity, revive = build_activity(embedded_cluster.controller, ProxyConfig())
        await nursery.start(revive.run)
        [message] = _messages(activity.consuming.receive_now(req, md("c@1"), None))
        visible_at = trio.current_time() + 30
        await _saved_and_stopped(activity.consuming.pop, nursery, autojump_clock)
    await _restart_broker(embedded_cluster, autojump_clock, clock)
    autojump_clock.autojump_threshold = math.inf  # the revive loop's start reads files in threads
    async with trio.open_nursery() as nursery:
        activity, revive = build_activity(embedded_cluster.controller, ProxyConfig())
        await nursery.start(revive.run)
        autojump_clock.autojump_threshold = 0
        await trio.sleep(visible_at - trio.current_time() - 5)
        stream = await activity.consuming.receive(req, md("c@1"), None)
        answered = trio.current_time()
        assert [(m.body, m.system_properties.delivery_attempt) for m in _messages(stream)] == [(message.body, 2)]
        assert answered - visible_at < 1, f"answered {answered - visible_at:.1f} s after the batch was visible"
        nursery.cancel_scope.cancel()
