"""Pop consumption under faults and hostile input (found by a review, each test failing on the code before): an idle
long poll that waits again after an arrival, a refused retry copy or checkpoint that neither stalls redelivery nor loses
messages, acknowledgements surviving a restart after a minute down, an ack of a forged handle that does not hold the
revive progress, acknowledgements still cancelling their checkpoints after timerMaxDelaySec is lowered, FIFO handles of
an earlier delivery acking nothing, a message the gRPC form cannot carry, a refused renewal, a DLQ read over gRPC,
sessions of clients that never sent Settings, and the messages of a receive stream that broke before it wrote them. Real
embedded broker, virtual time."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from broker.embedded import EmbeddedCluster
from broker.pop import AckOutcome, PopService, ReceiptHandle
from broker.pop.revive import REVIVE_GROUP, ReviveService
from client.message import Message
from client.producer import Producer
from processors.common import RequestRejected
from proxy.bridge import TrioBridge
from proxy.common import Code, finish_now
from proxy.config import ProxyConfig
from proxy.pb import service
from proxy.servicer import MessagingServicer
from proxy.startup import build_activity
from remoting.codec.bodies.broker_metadata import SubscriptionGroupConfig
from store.errors import PutRefusedError
from tests.conftest import SMALL_STORE
from tests.proxy.test_pop import pop_all, send, start_pop
from tests.proxy.test_renew import TOPIC, keep_alive, md, received
from tests.semantics.helpers import create_topic, use_virtual_store_clock


@pytest.fixture
async def popper(embedded_cluster: EmbeddedCluster, nursery: trio.Nursery) -> tuple[PopService, ReviveService]:
    """A pop service and its revive loop over the embedded broker, store time following Trio's clock."""
    use_virtual_store_clock(embedded_cluster)
    return await start_pop(embedded_cluster, nursery)


async def test_a_long_poll_waits_again_after_an_arrival_on_its_topic(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, popper: tuple[PopService, ReviveService]
) -> None:
    """A receive long-polls on the topic and its retry topic; a message arrives on the topic. The next receive with
    nothing to pop must wait its window again, not return at once (and spin the receive loop) for ever after."""
    await create_topic(embedded_cluster, "PopW")
    pop, _ = popper
    topics = ["PopW", "%RETRY%GW_PopW"]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(pop.wait_arrival, topics, 10.0)
        await trio.sleep(1)
        await send(embedded_cluster, "PopW", b"wake")  # the store's arrival listener is not chained here: notify
        pop.notify_arrival("PopW", 0, 0, 0)
    assert [p.message.body for p in await pop_all(pop, "GW", "PopW")] == [b"wake"]
    for _ in range(3):
        start = trio.current_time()
        await pop.wait_arrival(topics, 5.0)  # nothing arrives: this should take the whole 5 s
        assert trio.current_time() - start >= 5.0, "wait_arrival returned at once: the receive loop spins"


async def test_a_revive_record_whose_retry_copy_is_refused_does_not_stall_redelivery_for_everyone(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, popper: tuple[PopService, ReviveService]
) -> None:
    """Group + topic names too long for the V1 pop retry topic (> 127 bytes): its retry copy is refused as
    MESSAGE_ILLEGAL, so it goes to the DLQ. That used to stop the revive loop for every group, for good."""
    long_topic = "T" * 60
    long_group = "G" * 70  # %RETRY%<70>_<60> is 139 bytes
    await create_topic(embedded_cluster, long_topic)
    await create_topic(embedded_cluster, "PopOK")
    pop, _ = popper
    await send(embedded_cluster, "PopOK", b"first")
    await send(embedded_cluster, long_topic, b"poison")
    await send(embedded_cluster, "PopOK", b"later")
    [first] = pop.pop("G1", "PopOK", 1, 10_000, None)
    assert first.message.body == b"first"
    assert len(pop.pop(long_group, long_topic, 1, 10_000, None)) == 1
    await trio.sleep(1)
    [later] = pop.pop("G1", "PopOK", 1, 10_000, None)
    assert later.message.body == b"later"
    await trio.sleep(20)
    again = sorted(p.message.body for p in pop.pop("G1", "PopOK", 32, 10_000, None))
    assert again == [b"first", b"later"]
    assert embedded_cluster.controller.context.store.max_offset_in_queue("%DLQ%" + long_group, 0) == 1


async def test_a_pop_whose_checkpoint_is_refused_does_not_lose_its_messages(tmp_path: Path) -> None:
    """timerMaxDelaySec below the receive's invisible time (both settings in range): the CK cannot be parked, the pop
    fails, and the messages it read must still be there for the next pop."""
    async with EmbeddedCluster(tmp_path / "c", **SMALL_STORE, timer_max_delay_sec=3600) as cluster:
        await create_topic(cluster, "PopK")
        await send(cluster, "PopK", b"precious")
        async with trio.open_nursery() as nursery:
            pop, _ = await start_pop(cluster, nursery)
            with pytest.raises(RequestRejected, match="the max delay 3600000ms"):
                pop.pop("GK", "PopK", 32, 2 * 3600 * 1000, None)  # 2 h: within maxInvisibleTimeMills (12 h)
            popped = pop.pop("GK", "PopK", 32, 30_000, None)
            assert [p.message.body for p in popped] == [b"precious"], "the message is gone: offset moved, no CK"
            nursery.cancel_scope.cancel()


async def test_acks_survive_a_restart_after_a_minute_down(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """40 messages popped and all acknowledged; the broker is stopped cleanly and comes back 2 minutes later. None of
    the acknowledged messages may be handed out again."""
    clock = use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "PopA")
    await send(embedded_cluster, "PopA", *(f"m{i}".encode() for i in range(40)))
    async with trio.open_nursery() as nursery:
        pop, _ = await start_pop(embedded_cluster, nursery)
        popped = await pop_all(pop, "GA", "PopA", invisible=10_000)
        popped += await pop_all(pop, "GA", "PopA", invisible=10_000)
        assert len(popped) == 40
        for p in popped:
            assert pop.ack("GA", "PopA", p.handle) is AckOutcome.OK
        await trio.sleep(2)
        nursery.cancel_scope.cancel()
    await embedded_cluster.stop_broker()
    await trio.sleep(120)
    await embedded_cluster.start_broker()
    use_virtual_store_clock(embedded_cluster, clock)
    async with trio.open_nursery() as nursery:
        pop, revive = await start_pop(embedded_cluster, nursery)
        await trio.sleep(10)
        again = await pop_all(pop, "GA", "PopA")
        assert (len(again), revive.revived) == (0, 0), f"{len(again)} acknowledged messages redelivered"
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("forged", ["pop time", "invisible time"])
async def test_an_ack_of_a_handle_forged_far_ahead_does_not_hold_the_revive_progress(
    embedded_cluster: EmbeddedCluster,
    autojump_clock: trio.testing.MockClock,
    popper: tuple[PopService, ReviveService],
    forged: str,
) -> None:
    """A handle whose pop time or invisible time is far ahead (each within Java's long) is not expired, so its ack
    writes an ACK due in millions of years. Kept until a CK due after it is read, it was never forgotten: every later
    ACK stayed in memory and CID_RMQ_SYS_REVIVE_GROUP's offset stayed at it (each restart re-reading the revive queue
    from there). No CK can be due that far past its ACK (the timer parks one at most timerMaxDelaySec), so the revive
    loop drops such an ACK (RocketMQ's timer refuses it)."""
    pop, _ = popper
    ctx = embedded_cluster.controller.context
    await create_topic(embedded_cluster, "Pinned", queues=1)
    now = pop.now_ms()
    pop_time, invisible = (1 << 62, 10_000) if forged == "pop time" else (now, 1 << 62)
    handle = ReceiptHandle(0, pop_time, invisible, 0, 0, ctx.config.broker_name, 0, 0, 0)
    assert pop.ack("GPin", "Pinned", handle) is AckOutcome.OK  # as RocketMQ's broker, which checks no pop time
    for i in range(3):  # ordinary pops and acks, each CK due well over a minute after the previous
        await send(embedded_cluster, "Pinned", b"m%d" % i)
        for p in pop.pop("GPin", "Pinned", 32, 10_000, None):
            assert pop.ack("GPin", "Pinned", p.handle) is AckOutcome.OK
        await trio.sleep(80)
    assert ctx.offsets.query(REVIVE_GROUP, pop.revive_topic, 0) > 0, "the revive progress is held at the forged ACK"


@pytest.mark.parametrize("popped", ["before the change", "after the change"])
async def test_an_ack_still_cancels_its_checkpoint_after_timer_max_delay_sec_is_lowered(
    embedded_cluster: EmbeddedCluster,
    autojump_clock: trio.testing.MockClock,
    popper: tuple[PopService, ReviveService],
    popped: str,
) -> None:
    """UPDATE_BROKER_CONFIG (mqadmin updateBrokerConfig) lowers timerMaxDelaySec at runtime; the CKs the timer parked
    before stay parked: a message popped for 120 s (well within the proxy's 12 h) and acknowledged at once must not
    come back because its ACK is now further ahead than the new limit of 60 s. After the change the limit applies
    to new CKs at once (RocketMQ 5's HookUtils.transformTimerMessage reads it per message): a pop for 120 s is
    refused and leaves the message, which a pop within the limit then gets."""
    pop, _ = popper
    ctx = embedded_cluster.controller.context
    await create_topic(embedded_cluster, "LowMax", queues=1)
    await send(embedded_cluster, "LowMax", b"m0")
    invisible = 120_000
    if popped == "after the change":
        await ctx.update_config({"timerMaxDelaySec": "60"})
        with pytest.raises(RequestRejected, match="the max delay 60000ms"):
            pop.pop("GLow", "LowMax", 32, invisible, None)
        invisible = 50_000
    [p] = pop.pop("GLow", "LowMax", 32, invisible, None)  # the CK is accepted by the timer
    if popped == "before the change":
        await ctx.update_config({"timerMaxDelaySec": "60"})
    assert ctx.config.timer_max_delay_sec == 60
    assert pop.ack("GLow", "LowMax", p.handle) is AckOutcome.OK
    await trio.sleep(140)  # past the CK's due time
    again = pop.pop("GLow", "LowMax", 32, 10_000, None)
    assert [q.message.body for q in again] == [], "an acknowledged message was redelivered"


async def test_an_ack_still_cancels_its_checkpoint_after_a_restart_with_a_lower_timer_max_delay_sec(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """The same through a restart: the CK parked under the old timerMaxDelaySec (3 days) stays parked, and the revive
    loop, reading the ACK again after the restart with timerMaxDelaySec at 60 s, must keep it for that CK, as
    RocketMQ's timer delivers both the ACK and the CK it parked before the restart."""
    clock = use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "LowMaxR", queues=1)
    await send(embedded_cluster, "LowMaxR", b"m0")
    async with trio.open_nursery() as nursery:
        pop, _ = await start_pop(embedded_cluster, nursery)
        [p] = pop.pop("GLowR", "LowMaxR", 32, 120_000, None)
        assert pop.ack("GLowR", "LowMaxR", p.handle) is AckOutcome.OK
        await trio.sleep(2)
        nursery.cancel_scope.cancel()
    await embedded_cluster.stop_broker()
    embedded_cluster._broker_overrides["timer_max_delay_sec"] = 60  # the operator's broker.conf, read at start
    await embedded_cluster.start_broker()
    use_virtual_store_clock(embedded_cluster, clock)
    assert embedded_cluster.controller.context.config.timer_max_delay_sec == 60
    async with trio.open_nursery() as nursery:
        pop, revive = await start_pop(embedded_cluster, nursery)
        await trio.sleep(140)  # past the CK's due time
        again = pop.pop("GLowR", "LowMaxR", 32, 10_000, None)
        assert ([q.message.body for q in again], revive.revived) == ([], 0), "an acknowledged message was redelivered"
        nursery.cancel_scope.cancel()


async def test_a_stale_fifo_handle_does_not_ack_the_current_delivery(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, popper: tuple[PopService, ReviveService]
) -> None:
    """Consumer A pops a FIFO message for 60 s, then shortens it to 10 s (ChangeInvisibleDuration); it is handed to B
    (attempt 2). A's first handle still claims 60 s: acking it must not acknowledge B's delivery (STALE: nothing done,
    answered OK as RocketMQ's ackOrderly answers a pop time the queue's order info no longer holds), and B's ack must
    work."""
    await create_topic(embedded_cluster, "PopFS")
    pop, _ = popper
    await send(embedded_cluster, "PopFS", b"f0", b"f1")
    [a] = pop.pop("GFS", "PopFS", 1, 60_000, None, fifo=True)
    await trio.sleep(1)
    outcome, _ = pop.change_invisible("GFS", "PopFS", a.handle, 10_000)
    assert outcome is AckOutcome.OK
    await trio.sleep(12)
    [b] = pop.pop("GFS", "PopFS", 1, 60_000, None, fifo=True)
    assert (b.message.body, b.attempt) == (b"f0", 2)
    await trio.sleep(1)
    stale = pop.ack("GFS", "PopFS", a.handle)
    assert pop.pop("GFS", "PopFS", 1, 60_000, None, fifo=True) == [], "f1 handed out while f0 is still in flight"
    assert stale is AckOutcome.STALE
    assert pop.ack("GFS", "PopFS", b.handle) is AckOutcome.OK


async def test_a_message_the_grpc_form_cannot_carry_does_not_fail_the_whole_receive(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """A 4.x producer's message with a ``TIMER_OUT_MS`` property past year 9999 (nothing refuses it at send) lands
    in a batch with a good one. The receive must answer a status (and the good message), not raise out of the
    activity (grpcio then ends the call with UNKNOWN, and both messages were popped for nothing)."""

    use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "PopX")
    activity, _ = build_activity(embedded_cluster.controller, ProxyConfig())
    async with Producer("pg-x", embedded_cluster.namesrv_addr) as producer:
        await producer.send(Message("PopX", b"good"))
        await producer.send(Message("PopX", b"odd", properties={"TIMER_OUT_MS": "99999999999999999"}))
    req = service.ReceiveMessageRequest(batch_size=32)
    req.group.name = "GX"
    req.message_queue.topic.name = "PopX"
    req.filter_expression.expression = "*"
    req.invisible_duration.FromSeconds(30)
    stream = activity.receive_now(req, md("cx"), None)
    assert stream is not None and stream[0].HasField("status")
    assert b"good" in [r.message.body for r in stream if r.HasField("message")]


async def test_a_refused_renewal_does_not_end_the_renew_loop(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """A push consumer holds an auto-renewed message; the disk passes the critical ratio (the store refuses appends).
    The renew scan's change of invisibility is refused; the scan must not raise (its module says nothing there
    raises): RenewTable.run has no handler, so the exception ends serve_proxy's nursery, the broker's main one.
    (The scan is called directly, right after setting the store's refusal, because the store's own disk check would
    reset it in virtual time.)"""

    use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, TOPIC)
    activity, revive = build_activity(embedded_cluster.controller, ProxyConfig())
    await nursery.start(revive.run)
    async with Producer("pg-renew", embedded_cluster.namesrv_addr) as producer:
        await producer.send(Message(TOPIC, b"slow"))
    await nursery.start(keep_alive, activity, "push@1")
    [_] = received(activity, "push@1")
    await trio.sleep(55)  # due for renewal (within renewAheadTimeMillis of its 60 s)
    embedded_cluster.controller.context.store.disk_full_reason = "disk full (test)"
    try:
        await activity.consuming.renew.scan()
    finally:
        embedded_cluster.controller.context.store.disk_full_reason = None


async def test_sessions_of_clients_that_never_sent_settings_are_forgotten(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """Heartbeats (or Telemetry streams opened and closed) from client ids that never send Settings each leave a
    ClientSession: it has no channel, so the registry never expires it and _forget_gone never drops it."""

    use_virtual_store_clock(embedded_cluster)
    activity, _ = build_activity(embedded_cluster.controller, ProxyConfig())
    for i in range(1000):
        activity.heartbeat(service.HeartbeatRequest(), md(f"ghost-{i}"))
        activity.telemetry_opened(md(f"ghost-t{i}"), print)
        activity.telemetry_closed(md(f"ghost-t{i}"), print)
    await trio.sleep(600)  # long past channelExpiredTimeout
    embedded_cluster.controller.context.clients.scan_not_active_channels()
    activity.telemetry_opened(md("newcomer"), print)  # a new session (a heartbeat without Settings makes none)
    assert len(activity.sessions.sessions) < 100, f"{len(activity.sessions.sessions)} sessions kept"


async def test_a_refused_retry_copy_does_not_redeliver_the_rest_of_its_batch_every_second(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, popper: tuple[PopService, ReviveService]
) -> None:
    """As above, with the good CK read in the same revive batch before the refused one: the batch is re-read every
    second and the good message is copied into its retry topic again each time."""
    long_topic, long_group = "T" * 60, "G" * 70
    await create_topic(embedded_cluster, long_topic)
    await create_topic(embedded_cluster, "PopOK")
    pop, revive = popper
    await send(embedded_cluster, "PopOK", b"first")
    await send(embedded_cluster, long_topic, b"poison")
    await trio.sleep(0.5)
    assert len(pop.pop("G1", "PopOK", 1, 10_000, None)) == 1
    await trio.sleep(0.3)
    assert len(pop.pop(long_group, long_topic, 1, 10_000, None)) == 1
    await trio.sleep(20)
    store = embedded_cluster.controller.context.store
    copies = store.max_offset_in_queue("%RETRY%G1_PopOK", 0)
    dead = store.max_offset_in_queue("%DLQ%" + long_group, 0)
    assert (copies, dead, revive.revived) == (1, 1, 2)


async def test_a_message_consumed_from_a_dlq_over_grpc_stays_acknowledged(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """docs/grpc.md: the DLQ is "readable by a 5.x consumer of that topic". Its messages carry RETRY_TOPIC (the
    original topic), which the receive used to report as the message's topic; the official client acks with that
    topic, so the ACK named the original topic while the CK named %DLQ%<group>: the acknowledged message came back."""

    use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "PopDQ")
    ctx = embedded_cluster.controller.context
    ctx.groups.update(SubscriptionGroupConfig("GDQ", retry_max_times=0))
    activity, revive = build_activity(embedded_cluster.controller, ProxyConfig())
    async with trio.open_nursery() as nursery:
        await nursery.start(revive.run)
        async with Producer("pg-dq", embedded_cluster.namesrv_addr) as producer:
            await producer.send(Message("PopDQ", b"dead"))

        def receive(group: str, topic: str) -> list[object]:
            req = service.ReceiveMessageRequest(batch_size=32)
            req.group.name, req.message_queue.topic.name = group, topic
            req.filter_expression.expression = "*"
            req.invisible_duration.FromSeconds(10)
            stream = activity.receive_now(req, md("c1"), None) or []
            return [r.message for r in stream if r.HasField("message")]

        assert len(receive("GDQ", "PopDQ")) == 1
        await trio.sleep(15)  # not acked, one attempt allowed: the next receive moves it into %DLQ%GDQ
        assert receive("GDQ", "PopDQ") == []
        [dead] = receive("GDLQReader", "%DLQ%GDQ")
        req = service.AckMessageRequest()
        req.group.name, req.topic.name = "GDLQReader", dead.topic.name  # what the official client sends
        req.entries.add(
            message_id=dead.system_properties.message_id, receipt_handle=dead.system_properties.receipt_handle
        )
        assert dead.topic.name == "%DLQ%GDQ"  # the topic it was read from, which its CK names
        assert finish_now(activity.consuming.ack(req, md("c1"))).status.code == Code.OK
        await trio.sleep(15)
        assert revive.revived == 1, f"{revive.revived - 1} acknowledged DLQ message(s) redelivered"
        nursery.cancel_scope.cancel()


async def test_an_acked_message_of_a_half_revived_ck_is_not_redelivered(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock
) -> None:
    """A CK whose revival the store refuses part-way (a full disk) is read again from itself, progress being per
    record: the ACKs it met must still be there then, or its acknowledged message is handed out again."""
    use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "PopHalf")
    await send(embedded_cluster, "PopHalf", b"acked", b"not-acked")
    controller = embedded_cluster.controller
    store = controller.context.store
    # The broker's own revive loop (running since it started) waits past this test after its first round.
    controller.context.config = attrs.evolve(controller.context.config, revive_interval=10**9)
    pop = PopService(controller.context, controller.timer.rewrite)
    revive = ReviveService(pop, interval_ms=10**9)  # driven by hand below
    popped = pop.pop("GH", "PopHalf", 32, 5_000, None)
    assert [p.message.body for p in popped] == [b"acked", b"not-acked"]  # one CK naming both
    assert pop.ack("GH", "PopHalf", popped[0].handle) is AckOutcome.OK
    await trio.sleep(10)  # the CK is due (5.5 s) and the timer has put it into the revive queue
    store.disk_full_reason = "disk full (test)"
    try:
        with pytest.raises(PutRefusedError):
            while revive.revive_once():
                pass
    finally:
        store.disk_full_reason = None
    while revive.revive_once():
        pass
    again = [p.message.body for p in pop.pop("GH", "PopHalf", 32, 5_000, None)]
    assert again == [b"not-acked"], f"redelivered: {again}"


class _GoneClientContext:
    """The three things ``MessagingServicer.ReceiveMessage`` reads of grpcio's context."""

    def time_remaining(self) -> float:
        return 20.0

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return tuple(md("gone@1").items())

    def peer(self) -> str:
        return "ipv4:127.0.0.1:40000"


async def test_messages_a_broken_receive_stream_did_not_write_come_back_in_a_second(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """A client reads a ReceiveMessage stream's status and goes away before the messages are written (grpcio then
    closes the handler's generator). RocketMQ's proxy nacks each message it could not write (1 s,
    ReceiveMessageResponseStreamWriter.processThrowableWhenWriteMessage); they must not stay hidden for the
    receive's whole invisible time (30 s here). The servicer runs on a real asyncio loop in a worker thread, as on
    grpcio's; virtual time stands still meanwhile."""

    use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "PopGone")
    activity, revive = build_activity(embedded_cluster.controller, ProxyConfig())
    await nursery.start(revive.run)
    await send(embedded_cluster, "PopGone", b"one", b"two", b"three")
    req = service.ReceiveMessageRequest(batch_size=32)
    req.group.name = "GGone"
    req.message_queue.topic.name = "PopGone"
    req.filter_expression.expression = "*"
    req.invisible_duration.FromSeconds(30)
    servicer = MessagingServicer(TrioBridge(nursery), activity, lambda peer: peer)

    async def read_status_and_go() -> Any:
        stream = servicer.ReceiveMessage(req, _GoneClientContext())
        first = await anext(stream)
        await stream.aclose()
        return first

    autojump_clock.autojump_threshold = math.inf
    try:
        first = await trio.to_thread.run_sync(asyncio.run, read_status_and_go())
        await trio.testing.wait_all_tasks_blocked()
    finally:
        autojump_clock.autojump_threshold = 0
    assert first.status.code == Code.OK
    await trio.sleep(5)
    again = activity.consuming.receive_now(req, md("back@1"), None) or []
    back = [(r.message.body, r.message.system_properties.delivery_attempt) for r in again if r.HasField("message")]
    assert sorted(back) == [(b"one", 2), (b"three", 2), (b"two", 2)]


async def test_pop_bookkeeping_of_short_lived_groups_and_topics_is_not_kept_for_good(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, popper: tuple[PopService, ReviveService]
) -> None:
    """A broker serving many short-lived groups and topics: each pop filed a turn counter under its (group, topic)
    and each long poll that ended without an arrival left its event filed under its topics, for good. RocketMQ's
    PopLongPollingService bounds its maps and cleans what names a topic or group that is gone; here the structures
    must not grow with the number of groups and topics ever served."""
    pop, _ = popper
    ctx = embedded_cluster.controller.context
    await create_topic(embedded_cluster, "Steady", queues=1)
    for i in range(3000):
        group = f"GShort{i}"
        ctx.groups.update(SubscriptionGroupConfig(group))
        assert pop.pop(group, "Steady", 32, 10_000, None) == []
        ctx.groups.delete(group)
    for i in range(300):
        await pop.wait_arrival([f"Gone{i}", f"%RETRY%G_Gone{i}"], 1.0)  # nothing arrives
    counts = (len(pop._turns), len(pop._arrivals))
    assert counts[0] < 1500 and counts[1] == 0, f"{counts[0]} turn counters, {counts[1]} wake events kept"
    assert not pop.waiting("Gone0", 0)


async def test_a_wake_that_finds_its_receive_cancelled_wakes_the_next_receive_of_the_group(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, popper: tuple[PopService, ReviveService]
) -> None:
    """An arrival wakes one receive per group (PopLongPollingService.notifyMessageArriving), and pollRemotingCommands
    skips a request whose channel is no longer active for the next one. A receive cancelled (its client gone) but not
    yet unfiled when the arrival comes took the wake with it: the group's other receive slept its whole window
    while the message waited."""
    await create_topic(embedded_cluster, "PopC")
    pop, _ = popper
    woken: list[tuple[str, float]] = []

    async def wait(name: str, *, task_status: trio.TaskStatus[trio.CancelScope]) -> None:
        with trio.CancelScope() as scope:
            task_status.started(scope)
            start = trio.current_time()
            await pop.wait_arrival(["PopC"], 30.0, "GC")
            woken.append((name, trio.current_time() - start))

    async with trio.open_nursery() as nursery:
        first = await nursery.start(wait, "first")
        await nursery.start(wait, "second")
        await trio.testing.wait_all_tasks_blocked()
        first.cancel()  # its client went away; the arrival comes before the task runs its cleanup
        pop.notify_arrival("PopC", 0, 0, 0)
        await trio.testing.wait_all_tasks_blocked()
        assert woken == [("second", 0.0)]
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("resolved", [False, True], ids=["answer-on-its-way", "answer-resolved"])
async def test_messages_a_receive_answered_as_its_client_went_away_come_back_in_a_second(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery, resolved: bool
) -> None:
    """A receive long-polls; a message arrives and the receive answers with it, but its client cancels the call
    before it takes the answer (still crossing to the gRPC thread, or just handed to it). RocketMQ's proxy writes
    the answer to the cancelled stream, fails, and nacks each message (1 s, ReceiveMessageResponseStreamWriter
    .processThrowableWhenWriteMessage). Ours dropped the answer: the message stayed hidden for the receive's whole
    invisible time (30 s here). The servicer runs on a real asyncio loop in a worker thread, held while the Trio
    side answers; virtual time stands still meanwhile."""
    use_virtual_store_clock(embedded_cluster)
    await create_topic(embedded_cluster, "PopLate")
    activity, revive = build_activity(embedded_cluster.controller, ProxyConfig())
    await nursery.start(revive.run)
    req = service.ReceiveMessageRequest(batch_size=32)
    req.group.name = "GLate"
    req.message_queue.topic.name = "PopLate"
    req.filter_expression.expression = "*"
    req.invisible_duration.FromSeconds(30)
    bridge = TrioBridge(nursery)
    servicer = MessagingServicer(bridge, activity, lambda peer: peer)
    pop = activity.consuming.pop

    async def arrive() -> None:
        await send(embedded_cluster, "PopLate", b"late")
        await trio.testing.wait_all_tasks_blocked()  # the woken receive has popped it and answered

    async def first_response() -> Any:
        return await anext(servicer.ReceiveMessage(req, _GoneClientContext()))

    async def receive_then_go() -> None:
        task = asyncio.ensure_future(first_response())
        while not await bridge.call_sync(lambda: pop._parked_total):
            await asyncio.sleep(0)
        trio.from_thread.run(arrive)  # holds this loop: the answer waits to be resolved
        if resolved:
            await asyncio.sleep(0)  # the answer is resolved; the receive's task has not run yet
        task.cancel()  # the client goes away before its answer is taken
        with pytest.raises(asyncio.CancelledError):
            await task

    autojump_clock.autojump_threshold = math.inf
    try:
        await trio.to_thread.run_sync(asyncio.run, receive_then_go())
        await trio.testing.wait_all_tasks_blocked()
    finally:
        autojump_clock.autojump_threshold = 0
    await trio.sleep(5)
    again = activity.consuming.receive_now(req, md("back@1"), None) or []
    back = [(r.message.body, r.message.system_properties.delivery_attempt) for r in again if r.HasField("message")]
    assert back == [(b"late", 2)]
