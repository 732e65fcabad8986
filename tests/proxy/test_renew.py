"""Auto-renewed invisibility for push consumers, in virtual time (``autojump_clock``): a handle received with
``auto_renew`` stays invisible while the client is there, an ack with the handle the client holds acknowledges the
renewed one, renewing stops after ``renewMaxTimeMillis`` and a gone client's messages come back at once. The
activity, its revive loop and its renew loop run over the embedded broker; requests are the generated protobuf
messages the official client sends."""

from __future__ import annotations

import time
from typing import Any

import pytest
import trio

from broker.embedded import EmbeddedCluster
from client.message import Message
from client.producer import Producer
from proxy.common import Code, finish_now
from proxy.config import ProxyConfig, proxy_config_from
from proxy.messaging import MessagingActivity
from proxy.pb import definition, service
from proxy.startup import build_activity
from store.metadata_files import SubscriptionGroupConfig
from tests.proxy.test_sessions import consumer_settings
from tests.semantics.helpers import create_topic, use_virtual_store_clock

GROUP, TOPIC = "GRenew", "TRenew"


def md(client_id: str) -> dict[str, str]:
    return {"x-mq-client-id": client_id, "x-mq-language": "PYTHON", "x-rocketrio-peer": "ipv4:127.0.0.1:40000"}


def push_settings() -> Any:
    command = consumer_settings(GROUP, TOPIC)
    command.settings.client_type = definition.ClientType.PUSH_CONSUMER
    command.settings.subscription.subscriptions[0].expression.expression = "*"
    return command


async def keep_alive(
    activity: MessagingActivity, client_id: str, *, task_status: trio.TaskStatus[trio.CancelScope]
) -> None:
    """Settings once, then a Heartbeat every 10 s, as the official client does, until the scope it starts with is
    cancelled."""
    with trio.CancelScope() as scope:
        activity.telemetry(push_settings(), md(client_id))
        task_status.started(scope)
        while True:
            beat = service.HeartbeatRequest(client_type=definition.ClientType.PUSH_CONSUMER)
            beat.group.name = GROUP  # ClientActivity.heartbeat registers the consumer under it
            activity.heartbeat(beat, md(client_id))
            await trio.sleep(10)


def receive_request(auto_renew: bool) -> Any:
    req = service.ReceiveMessageRequest(batch_size=32, auto_renew=auto_renew)
    req.group.name = GROUP
    req.message_queue.topic.name = TOPIC
    req.message_queue.id = -1
    req.filter_expression.expression = "*"
    if not auto_renew:
        req.invisible_duration.FromSeconds(60)
    return req


def received(activity: MessagingActivity, client_id: str, auto_renew: bool = True) -> list[Any]:
    stream = activity.consuming.receive_now(receive_request(auto_renew), md(client_id), None) or []
    return [r.message for r in stream if r.HasField("message")]


async def start(
    cluster: EmbeddedCluster,
    nursery: trio.Nursery,
    config: ProxyConfig,
    *,
    first: bytes | None = b"slow",
    loop: bool = True,
) -> MessagingActivity:
    """The activity and its revive loop over ``cluster`` with topic TRenew, its renew loop unless ``loop`` is false,
    and the message ``first`` sent."""
    use_virtual_store_clock(cluster)
    await create_topic(cluster, TOPIC)
    activity, revive = build_activity(cluster.controller, config)
    await nursery.start(revive.run)
    if loop:
        await nursery.start(activity.consuming.renew.run)
    if first is not None:
        async with Producer("pg-renew", cluster.namesrv_addr) as producer:
            await producer.send(Message(TOPIC, first))
    return activity


def ack(activity: MessagingActivity, client_id: str, message: Any) -> int:
    req = service.AckMessageRequest()
    req.group.name, req.topic.name = GROUP, TOPIC
    req.entries.add(
        message_id=message.system_properties.message_id, receipt_handle=message.system_properties.receipt_handle
    )
    return int(finish_now(activity.consuming.ack(req, md(client_id))).status.code)


@pytest.mark.parametrize("auto_renew", [True, False])
async def test_auto_renew_keeps_a_slow_message_invisible_and_the_first_handle_acks_it(
    quiet_timer_cluster: EmbeddedCluster,
    autojump_clock: trio.testing.MockClock,
    nursery: trio.Nursery,
    auto_renew: bool,
) -> None:
    activity = await start(quiet_timer_cluster, nursery, ProxyConfig())
    await nursery.start(keep_alive, activity, "push@1")
    [message] = received(activity, "push@1", auto_renew)
    assert message.system_properties.delivery_attempt == 1
    await trio.sleep(10 * 60)  # a listener running ten minutes, ten times the first invisible time
    if not auto_renew:  # without renewing it came back after 60 s: the case auto-renew exists for
        [again] = received(activity, "other@1")
        assert again.system_properties.delivery_attempt == 2
        return
    assert received(activity, "other@1") == []
    assert ack(activity, "push@1", message) == definition.Code.OK
    assert activity.consuming.renew.held == {}
    await trio.sleep(15 * 60)  # past the last renewal's time (+10 m at about 575 s)
    assert received(activity, "other@1") == []  # the renewed handle was the one acknowledged


async def test_renewing_stops_after_its_maximum_and_a_gone_client_releases_at_once(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    activity = await start(embedded_cluster, nursery, ProxyConfig(renew_max_time_millis=5 * 60_000))
    await nursery.start(keep_alive, activity, "push@1")
    [first] = received(activity, "push@1")
    await trio.sleep(4 * 60)
    assert received(activity, "other@1") == []
    # Renewals at about 50 s (+1 m) and 105 s (+3 m) are within the 5 min maximum, so is the one at about 280 s
    # (+5 m); the next due one, at about 575 s, is past it: released with the retry delay of attempt 1 (10 s).
    await trio.sleep(6 * 60)
    push2 = await nursery.start(keep_alive, activity, "push@2")
    [again] = received(activity, "push@2")
    assert (again.body, again.system_properties.delivery_attempt) == (first.body, 2)
    assert len(activity.consuming.renew.held) == 1
    await trio.sleep(4 * 60)
    assert received(activity, "other@1", auto_renew=False) == []  # push@2 is there: renewed
    push2.cancel()
    activity.notify_termination(
        service.NotifyClientTerminationRequest(group=definition.Resource(name=GROUP)), md("push@2")
    )
    await trio.sleep(30)  # the next scan (5 s) releases it, visible 1 s later (invisibleTimeMillisWhenClear)
    [third] = received(activity, "other@1", auto_renew=False)
    assert third.system_properties.delivery_attempt == 3
    assert activity.consuming.renew.held == {}


async def test_a_message_renewed_to_the_maximum_comes_back_after_the_groups_retry_delay(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """RocketMQ's DefaultReceiptHandleManager releases it after the group retry policy's
    nextDelayDuration(reconsumeTimes), which reads its table (1 s, 5 s, 10 s, 30 s, ...) at reconsumeTimes + 2: 10 s
    after a first delivery, not 1 s."""
    activity = await start(embedded_cluster, nursery, ProxyConfig(renew_max_time_millis=0), loop=False)
    await nursery.start(keep_alive, activity, "push@1")
    [first] = received(activity, "push@1")
    await trio.sleep(55)
    await activity.consuming.renew.scan()  # due within renewAheadTimeMillis and renewed long enough: released
    await trio.sleep(8)
    assert received(activity, "other@1", auto_renew=False) == []
    await trio.sleep(7)
    [again] = received(activity, "other@1", auto_renew=False)
    assert (again.body, again.system_properties.delivery_attempt) == (first.body, 2)


def _send_with_id(activity: MessagingActivity, message_id: str, body: bytes) -> None:
    msg = definition.Message(body=body)
    msg.topic.name = TOPIC
    msg.system_properties.message_id = message_id
    msg.system_properties.born_timestamp.FromMilliseconds(int(time.time() * 1000))
    msg.system_properties.message_type = definition.MessageType.NORMAL
    response = activity.send_now(service.SendMessageRequest(messages=[msg]), md("p@1"))
    assert response is not None and response.status.code == Code.OK


async def test_auto_renew_keeps_both_messages_of_one_message_id_invisible(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """A send the official client retried after a timeout is stored twice under one message id. A push consumer
    receiving both with auto-renew has both renewed: the table keeps every handle of a message id, keyed by the handle,
    as RocketMQ's ReceiptHandleGroup does (keyed by message id alone, the second receive replaced the first, whose
    message came back after 60 s while the listener still held it)."""
    activity = await start(embedded_cluster, nursery, ProxyConfig(), first=None)
    await nursery.start(keep_alive, activity, "push@1")
    message_id = "01" + "AB" * 15
    _send_with_id(activity, message_id, b"first try")
    _send_with_id(activity, message_id, b"retried send")
    held = received(activity, "push@1")
    assert sorted(m.body for m in held) == [b"first try", b"retried send"]
    await trio.sleep(5 * 60)  # the listener runs five minutes
    assert received(activity, "other@1", auto_renew=False) == [], "a message the push consumer holds came again"


async def test_enable_proxy_auto_renew_false_takes_the_requests_invisible_time_and_renews_nothing(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """ReceiveMessageActivity gives an auto-renew receive the default invisible time, and has its handles renewed,
    only while ProxyConfig's ``enableProxyAutoRenew`` (true by default) is on; with it off the request's
    invisible_duration is checked against [minInvisibleTimeMillsForRecv, maxInvisibleTimeMills] and used, and nothing
    is renewed. The setting was unknown: a proxy configured so still renewed the message for hours."""
    config, unknown = proxy_config_from({"enableProxyAutoRenew": "false"})
    assert unknown == []
    activity = await start(embedded_cluster, nursery, config)
    await nursery.start(keep_alive, activity, "push@1")
    req = receive_request(auto_renew=True)
    stream = activity.consuming.receive_now(req, md("push@1"), None) or []
    assert stream[0].status.code == Code.ILLEGAL_INVISIBLE_TIME  # no invisible_duration: 0 ms, below the 10 s minimum
    req.invisible_duration.FromSeconds(30)
    [message] = [r.message for r in activity.consuming.receive_now(req, md("push@1"), None) or [] if r.message.body]
    assert activity.consuming.renew.held == {}
    await trio.sleep(35)  # past the request's 30 s, not renewed
    [again] = received(activity, "other@1", auto_renew=False)
    assert (again.body, again.system_properties.delivery_attempt) == (message.body, 2)


async def test_a_stopping_proxy_makes_the_messages_it_renews_visible_again_at_once(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """DefaultReceiptHandleManager's shutdown clears every handle it renews (clearAllHandle): each message becomes
    visible after ``invisibleTimeMillisWhenClear`` (1 s), for the consumers of the restarted or another proxy. Ours
    dropped them with the renew loop: each stayed invisible for its last renewal, up to an hour."""
    activity = await start(embedded_cluster, nursery, ProxyConfig(), loop=False)
    await nursery.start(keep_alive, activity, "push@1")
    async with trio.open_nursery() as proxy:
        await proxy.start(activity.consuming.renew.run)
        [message] = received(activity, "push@1")
        await trio.sleep(2 * 60)  # renewed at about 50 s (+1 m) and 105 s (+3 m)
        assert received(activity, "other@1", auto_renew=False) == []
        proxy.cancel_scope.cancel()  # the proxy stops
    await trio.sleep(10)  # visible 1 s after the release, redelivered at the revive loop's next pass
    [again] = received(activity, "other@1", auto_renew=False)
    assert (again.body, again.system_properties.delivery_attempt) == (message.body, 2)
    assert activity.consuming.renew.held == {}


async def test_a_renewal_refused_max_renew_retry_times_in_a_row_is_given_up(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """DefaultReceiptHandleManager.startRenewMessage tries a refused renewal again at the next scans, counting the
    tries (a success resets the count), and stops renewing the message once ``maxRenewRetryTimes`` (3) tries in a
    row failed: it becomes visible when its handle says. Ours tried again at every scan for as long as the store
    refused (``maxRenewRetryTimes`` was unknown)."""
    activity = await start(embedded_cluster, nursery, ProxyConfig(), loop=False)
    await nursery.start(keep_alive, activity, "push@1")
    [message] = received(activity, "push@1")
    store, renew = embedded_cluster.controller.context.store, activity.consuming.renew

    async def refused_scan() -> None:  # the store's own disk check resets the refusal in virtual time: set it each time
        store.disk_full_reason = "disk full (test)"
        try:
            await renew.scan()
        finally:
            store.disk_full_reason = None

    await trio.sleep(55)  # due for renewal (within renewAheadTimeMillis of its 60 s)
    await refused_scan()
    await refused_scan()
    await renew.scan()  # renewed: +1 m, the count of failed tries starts again
    await trio.sleep(55)
    for _ in range(3):
        await refused_scan()
    assert len(renew.held) == 1  # three tries in a row failed: still renewed on the next scan, were it to succeed
    await renew.scan()
    assert renew.held == {}, "renewing went on after maxRenewRetryTimes failed tries"
    await trio.sleep(20)  # past the visible time of the last renewal (+1 m at 55 s), and the revive loop's pass
    [again] = received(activity, "other@1", auto_renew=False)
    assert (again.body, again.system_properties.delivery_attempt) == (message.body, 2)


async def test_a_message_renewed_to_the_maximum_comes_back_after_the_groups_own_retry_policy_delay(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """DefaultReceiptHandleManager takes the delay from the group's ``groupRetryPolicy`` (RocketMQ 5.3.3's
    SubscriptionGroupConfig): an EXPONENTIAL policy's nextDelayDuration(0) is its ``initial`` (20 s here), not the
    default customized table's 10 s."""
    policy = {"type": "EXPONENTIAL", "exponentialRetryPolicy": {"initial": 20000, "max": 60000, "multiplier": 2}}
    groups = embedded_cluster.controller.context.groups
    groups.update(SubscriptionGroupConfig.from_json({"groupName": GROUP, "groupRetryPolicy": policy}))
    activity = await start(embedded_cluster, nursery, ProxyConfig(renew_max_time_millis=0), loop=False)
    await nursery.start(keep_alive, activity, "push@1")
    [first] = received(activity, "push@1")
    await trio.sleep(55)
    await activity.consuming.renew.scan()
    await trio.sleep(15)
    assert received(activity, "other@1", auto_renew=False) == []
    await trio.sleep(9)
    [again] = received(activity, "other@1", auto_renew=False)
    assert (again.body, again.system_properties.delivery_attempt) == (first.body, 2)


async def test_notify_client_termination_releases_the_groups_renewed_handles_at_once(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """NotifyClientTermination of a consumer unregisters it from its group, and DefaultReceiptHandleManager's
    CLIENT_UNREGISTER listener clears that (client, group)'s handles there and then: visible again after
    invisibleTimeMillisWhenClear (1 s). They were released only by the next renew scan (up to 5 s later; never with
    the scan not running, as here)."""
    activity = await start(embedded_cluster, nursery, ProxyConfig(), loop=False)
    scope = await nursery.start(keep_alive, activity, "push@1")
    [first] = received(activity, "push@1")
    scope.cancel()
    answer = activity.notify_termination(
        service.NotifyClientTerminationRequest(group=definition.Resource(name=GROUP)), md("push@1")
    )
    assert answer.status.code == Code.OK, answer.status
    assert activity.consuming.renew.held == {}
    # 1 s invisible, then the timer wheel's CK delivery, the next revive pass and the retry copy: 5 s leaves room for
    # all of them whatever the millisecond phase (2 s missed it now and then), well inside the first 60 s.
    await trio.sleep(5)
    [again] = received(activity, "other@1", auto_renew=False)
    assert (again.body, again.system_properties.delivery_attempt) == (first.body, 2)


async def test_a_consumer_the_client_registry_expires_has_its_renewed_handles_released_at_once(
    embedded_cluster: EmbeddedCluster, autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """A push consumer that goes away without NotifyClientTermination (killed, its connection gone) is dropped by
    the client registry's scan once silent for channelExpiredTimeout (120 s): ConsumerManager.scanNotActiveChannel
    fires CLIENT_UNREGISTER, and DefaultReceiptHandleManager's listener clears that (channel, group)'s handles there
    and then (proxy/src/main/java/org/apache/rocketmq/proxy/service/receipt/DefaultReceiptHandleManager.java). Ours
    released them only at the next renew scan (up to renewSchedulePeriodMillis later; never with the scan not
    running, as here: the test renews by hand)."""
    activity = await start(embedded_cluster, nursery, ProxyConfig(), loop=False)
    renew, clients = activity.consuming.renew, embedded_cluster.controller.context.clients
    scope = await nursery.start(keep_alive, activity, "push@1")
    [first] = received(activity, "push@1")
    scope.cancel()  # no heartbeat from now on
    for _ in range(2):  # renewed while the client is registered: +1 m at 55 s, +3 m at 110 s
        await trio.sleep(55)
        await renew.scan()
        assert len(renew.held) == 1
    while clients.find_consumer_channel(GROUP, "push@1") is not None:  # the registry's scan, every 10 s
        await trio.sleep(0.5)
    assert renew.held == {}
    await trio.sleep(5)  # visible 1 s later (invisibleTimeMillisWhenClear), then revived through the retry topic
    [again] = received(activity, "other@1", auto_renew=False)
    assert (again.body, again.system_properties.delivery_attempt) == (first.body, 2)
