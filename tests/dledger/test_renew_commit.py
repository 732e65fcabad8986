"""The proxy's auto-renew in DLedger mode adopts a renewed handle only once its change of invisibility committed, as
RocketMQ 5.3.3's DefaultReceiptHandleManager.startRenewMessage updates the handle only from an OK answer of
ChangeInvisibleTimeProcessor (which answers once its new CK committed) and otherwise keeps the old one, retried at the
next scan; an ack of the handle while its renewal is in flight waits for it (ReceiptHandleGroup's per-handle lock)
and acknowledges the renewed handle. Three members on real sockets under virtual time; the followers stopped so the
leader cannot commit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio
import trio.testing

from broker.embedded_dledger import EmbeddedDLedgerGroup
from proxy.common import Code
from proxy.config import ProxyConfig
from proxy.messaging import MessagingActivity
from proxy.pb import definition, service
from proxy.startup import build_activity
from remoting.client import RemotingClient
from tests.broker.test_pop_wire import GROUP
from tests.conftest import SMALL_STORE
from tests.dledger.test_broker_group import LONG_LEASE, virtual_time_still
from tests.dledger.test_pop_commit import LONG_QUORUM_WAIT, TOPIC, popped_then_alone
from tests.dledger.test_role_services import virtual_store_clock
from tests.proxy.test_consumer_rpcs import _ack_request, _messages, _receive_request
from tests.proxy.test_renew import md
from tests.proxy.test_sessions import consumer_settings

PUSH = "push@1"


async def keep_alive(activity: MessagingActivity, *, task_status: trio.TaskStatus[None]) -> None:
    """A push consumer of GROUP: its settings, then a heartbeat every 10 s, as the official client sends them."""
    command = consumer_settings(GROUP, TOPIC)
    command.settings.client_type = definition.ClientType.PUSH_CONSUMER
    command.settings.subscription.subscriptions[0].expression.expression = "*"
    activity.telemetry(command, md(PUSH))
    task_status.started()
    while True:
        beat = service.HeartbeatRequest(client_type=definition.ClientType.PUSH_CONSUMER)
        beat.group.name = GROUP
        activity.heartbeat(beat, md(PUSH))
        await trio.sleep(10)


async def renewed_receive_then_alone(
    group: EmbeddedDLedgerGroup, client: RemotingClient, nursery: trio.Nursery
) -> tuple[str, MessagingActivity, Any]:
    """The leader, its gRPC activity and a message its push consumer received with ``auto_renew``, once its
    followers stopped."""
    leader, _ = await popped_then_alone(group, client, pop=False)
    virtual_store_clock(group)
    activity, _ = build_activity(group.controllers[leader], ProxyConfig())
    await nursery.start(keep_alive, activity)
    with virtual_time_still():
        await group.start(next(m for m in group.ids if m != leader))  # a quorum for the receive's CK
    req = _receive_request(GROUP, TOPIC)
    req.auto_renew = True
    req.ClearField("invisible_duration")
    [message] = _messages(await activity.consuming.receive(req, md(PUSH), 20.0))
    with virtual_time_still():
        await group.stop(next(m for m in group.ids if m != leader and m in group.controllers))
    return leader, activity, message


async def test_a_renewal_is_adopted_only_once_its_checkpoint_is_committed(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A renewal whose new CK the quorum did not commit (the broker's SYSTEM_ERROR) keeps the handle it renewed and
    counts a retry; the next scan, once a follower is back, renews it. Ours adopted the new handle at once."""
    async with (
        EmbeddedDLedgerGroup(tmp_path, **SMALL_STORE, **LONG_LEASE) as group,
        RemotingClient() as client,
        trio.open_nursery() as nursery,
    ):
        leader, activity, _ = await renewed_receive_then_alone(group, client, nursery)
        renew = activity.consuming.renew
        [held] = renew.held.values()
        first = held.handle
        await nursery.start(renew.run)
        with trio.fail_after(70):
            while held.retries == 0 and held.handle == first:
                await trio.sleep(0.1)
        assert held.handle == first, "a renewal not committed was adopted"
        assert (held.renewals, held.retries) == (0, 1)
        with virtual_time_still():
            await group.start(next(m for m in group.ids if m != leader))
        with trio.fail_after(10):
            while held.renewals == 0:
                await trio.sleep(0.1)
        assert held.handle != first and held.retries == 0
        assert list(renew.held.values()) == [held]
        nursery.cancel_scope.cancel()


async def test_an_ack_while_its_handle_is_renewed_acknowledges_the_renewed_handle(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """An ack with the handle the client holds, sent while that handle's renewal waits for its commit, waits for the
    renewal (ReceiptHandleGroup's per-handle lock) and acknowledges the renewed handle: had it acknowledged the old
    one, the renewed CK would stay unacknowledged and the message would come back a minute later."""
    overrides = {**SMALL_STORE, **LONG_LEASE, **LONG_QUORUM_WAIT}
    async with (
        EmbeddedDLedgerGroup(tmp_path, **overrides) as group,
        RemotingClient() as client,
        trio.open_nursery() as nursery,
    ):
        leader, activity, message = await renewed_receive_then_alone(group, client, nursery)
        renew = activity.consuming.renew
        await trio.sleep(55)  # due for renewal (within renewAheadTimeMillis of its 60 s)
        nursery.start_soon(renew.scan)
        await trio.sleep(0.5)  # the renewal waits for its CK's commit
        answers: list[Any] = []

        async def ack() -> None:
            answers.append(await activity.consuming.ack(_ack_request(GROUP, TOPIC, message), md(PUSH)))

        nursery.start_soon(ack)
        await trio.sleep(0.5)
        with virtual_time_still():
            await group.start(next(m for m in group.ids if m != leader))
        with trio.fail_after(10):
            while not answers:
                await trio.sleep(0.1)
        assert answers[0].status.code == Code.OK, answers[0]
        assert renew.held == {}
        await trio.sleep(3 * 60)  # past the renewed CK's minute, and the revive loop's passes
        other = await activity.consuming.receive(_receive_request(GROUP, TOPIC), md("other@1"), 20.0)
        assert _messages(other) == [], "the renewed handle was left unacknowledged"
        nursery.cancel_scope.cancel()


async def test_a_nack_while_its_handle_is_renewed_releases_the_renewed_handle(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A receive stream that broke (its messages nacked, visible 1 s later) while a renewal of one of its handles
    waits for its commit: the renewal, once over, makes the handle it leaves visible. Nacked on the old handle, the
    renewed CK would stay unacknowledged and bring the message back a second time a minute later."""
    overrides = {**SMALL_STORE, **LONG_LEASE, **LONG_QUORUM_WAIT}
    async with (
        EmbeddedDLedgerGroup(tmp_path, **overrides) as group,
        RemotingClient() as client,
        trio.open_nursery() as nursery,
    ):
        leader, activity, message = await renewed_receive_then_alone(group, client, nursery)
        renew = activity.consuming.renew
        await trio.sleep(55)  # due for renewal (within renewAheadTimeMillis of its 60 s)
        nursery.start_soon(renew.scan)
        await trio.sleep(0.5)  # the renewal waits for its CK's commit
        req = _receive_request(GROUP, TOPIC)
        activity.consuming.nack_unwritten([service.ReceiveMessageResponse(message=message)], req, md(PUSH))
        with virtual_time_still():
            await group.start(next(m for m in group.ids if m != leader))
        with trio.fail_after(30):
            while not (again := _messages(await activity.consuming.receive(req, md("other@1"), 20.0))):
                pass
        assert [m.system_properties.delivery_attempt for m in again] == [2]
        assert renew.held == {}
        answer = await activity.consuming.ack(_ack_request(GROUP, TOPIC, *again), md("other@1"))
        assert answer.status.code == Code.OK, answer
        await trio.sleep(3 * 60)  # past the renewed CK's minute, and the revive loop's passes
        other = await activity.consuming.receive(req, md("other@1"), 20.0)
        assert _messages(other) == [], "the renewed handle was left unacknowledged"
        nursery.cancel_scope.cancel()
