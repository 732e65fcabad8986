"""``ClientRegistry``: producers and consumers known from heartbeats
(docs/protocol.md#74-client-registry-and-heartbeats), RocketMQ's ``ProducerManager`` and ``ConsumerManager`` in one
place.

State: per producer group and per consumer group, the live channels (one :class:`ClientChannelInfo` per connection:
client id, language, version, last heartbeat on Trio's clock). Per consumer group also its consume type, message
model, consume-from-where and subscription table (topic -> SubscriptionData; a subscription is replaced only by a
larger ``subVersion``, topics missing from a heartbeat are dropped).

Change notification: when a consumer group's channel set or subscribed topics change (register, unregister, closed
connection, expiry) and the group still has channels, NOTIFY_CONSUMER_IDS_CHANGED (40, oneway, extField
``consumerGroup``) is queued for **every** channel of that group, if notification is enabled. A group has at most one
notification pending: changes made before it is sent share it, and it goes to the channels the group has when it is
sent. All mutations are synchronous (close listeners and processors call them); the notifications themselves are
written by :meth:`ClientRegistry.run`'s task, which also scans every 10 s for channels silent longer than the expiry
(120 s), drops them and closes their connections. Sending to a connection that closed meanwhile is ignored.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable
from typing import Final

import trio

from processors.client_channels import ClientChannelInfo, ConsumerGroupInfo
from remoting.codec.bodies import ConsumeFromWhere, ConsumeType, MessageModel, SubscriptionData
from remoting.codec.codes import LanguageCode, RequestCode
from remoting.codec.command import request
from remoting.codec.headers import NotifyConsumerIdsChangedRequestHeader
from remoting.connection import Connection
from remoting.errors import RemotingError

log = logging.getLogger(__name__)

SCAN_INTERVAL: Final = 10.0


class ClientRegistry:
    """See the module docstring. ``clock`` is Trio's by default so expiry follows ``autojump_clock`` in tests."""

    def __init__(
        self,
        *,
        channel_expired_timeout: float = 120.0,
        subscription_expired_timeout: float = 600.0,
        notify_enabled: bool = True,
        scan_interval: float = SCAN_INTERVAL,
        clock: Callable[[], float] = trio.current_time,
    ) -> None:
        self.channel_expired_timeout = channel_expired_timeout
        self.subscription_expired_timeout = subscription_expired_timeout
        #: ConsumerManager's consumerCompensationTable: group -> topic -> the subscription its last pop recorded and
        #: when (:meth:`compensate_subscription`)
        self._compensated: dict[str, dict[str, tuple[SubscriptionData, float]]] = {}
        self.notify_enabled = notify_enabled
        self.scan_interval = scan_interval
        self._clock = clock
        self._consumers: dict[str, ConsumerGroupInfo] = {}
        self._producers: dict[str, dict[Connection, ClientChannelInfo]] = {}
        #: Producer client id -> its connections -> the groups each is registered in: a reply finds its requester
        #: without scanning every producer (ProducerManager's ``clientChannelTable``).
        self._producer_clients: dict[str, dict[Connection, set[str]]] = {}
        #: Groups with a notification queued and not yet sent (see :meth:`_notify`).
        self._notify_pending: set[str] = set()
        send, receive = trio.open_memory_channel[str](math.inf)
        self._notify_send = send
        self._notify_receive = receive
        self.notifications_sent = 0
        #: Called with (group, member) for each consumer channel that leaves a group (unregistered, closed, expired):
        #: ConsumerManager's CLIENT_UNREGISTER event to its ConsumerIdsChangeListeners.
        self.consumer_unregister_listeners: list[Callable[[str, ClientChannelInfo], None]] = []

    def channel_info(
        self, connection: Connection, client_id: str, language: LanguageCode = LanguageCode.JAVA, version: int = 0
    ) -> ClientChannelInfo:
        """A channel info stamped with the current time."""
        return ClientChannelInfo(connection, client_id, language, version, self._clock())

    # ---- consumers ---------------------------------------------------------------------------------------------

    def register_consumer(
        self,
        group: str,
        info: ClientChannelInfo,
        consume_type: ConsumeType | None,
        message_model: MessageModel | None,
        consume_from_where: ConsumeFromWhere | None,
        subscriptions: Iterable[SubscriptionData],
        notify: bool = True,
        update_subscriptions: bool = True,
    ) -> bool:
        """Record a consumer heartbeat; returns True when the group's channels or topics changed (then, with
        ``notify``, every channel of the group is told to rebalance). Without ``update_subscriptions`` the group's
        subscriptions stay as they are (ConsumerManager.registerConsumer's flag: a 5.x client's Heartbeat, whose
        subscriptions only its Settings change)."""
        group_info = self._consumers.get(group)
        if group_info is None:
            group_info = self._consumers[group] = ConsumerGroupInfo(group)
        group_info.consume_type = consume_type
        group_info.message_model = message_model
        group_info.consume_from_where = consume_from_where
        group_info.last_update = self._clock()
        channel_changed = group_info.update_channel(info)
        topics_changed = update_subscriptions and group_info.update_subscriptions(subscriptions)
        changed = channel_changed or topics_changed
        if changed and notify:
            self._notify(group_info)
        return changed

    def unregister_consumer(self, group: str, connection: Connection, notify: bool = True) -> bool:
        """Remove the connection from the group (UNREGISTER_CLIENT); True if it was a member."""
        group_info = self._consumers.get(group)
        info = None if group_info is None else group_info.channels.pop(connection, None)
        if group_info is None or info is None:
            return False
        self._consumer_unregistered(group, info)
        self._after_channel_removed(group_info, notify)
        return True

    def _consumer_unregistered(self, group: str, info: ClientChannelInfo) -> None:
        """Tell the listeners ``info`` left ``group``, as ConsumerManager fires CLIENT_UNREGISTER from
        unregisterConsumer, doChannelCloseEvent and scanNotActiveChannel (broker/src/main/java/org/apache/rocketmq/
        broker/client/ConsumerManager.java). A listener that raises is logged; the others still run."""
        for listener in self.consumer_unregister_listeners:
            try:
                listener(group, info)
            except Exception:
                log.exception("consumer unregister listener failed for %s of group %s", info.client_id, group)

    def _after_channel_removed(self, group_info: ConsumerGroupInfo, notify: bool = True) -> None:
        if not group_info.channels:
            # Java drops an empty group and its subscriptions (a consumer restarting re-subscribes anyway).
            del self._consumers[group_info.group_name]
        elif notify:
            self._notify(group_info)

    def consumer_group(self, group: str) -> ConsumerGroupInfo | None:
        return self._consumers.get(group)

    @property
    def consumer_groups(self) -> dict[str, ConsumerGroupInfo]:
        return dict(self._consumers)

    def consumer_ids(self, group: str) -> list[str]:
        """Client ids of the group's live channels (empty when the group is unknown)."""
        group_info = self._consumers.get(group)
        return [] if group_info is None else group_info.client_ids()

    def find_subscription(self, group: str, topic: str) -> SubscriptionData | None:
        """The group's subscription of ``topic``: its consumers', else the one a pop recorded
        (ConsumerManager.findSubscriptionData, which falls back to the compensation table)."""
        group_info = self._consumers.get(group)
        found = None if group_info is None else group_info.subscriptions.get(topic)
        if found is None and (compensated := self._compensated.get(group)) is not None:
            entry = compensated.get(topic)
            found = None if entry is None else entry[0]
        return found

    def not_subscribed(self, group: str, topic: str) -> bool:
        """The group's consumers subscribe to something, and nobody to ``topic`` (findSubscriptionDataCount > 0 and
        no findSubscriptionData): the test AdminBrokerProcessor skips a topic of the group's offsets by."""
        group_info = self._consumers.get(group)
        if group_info is None or not group_info.subscriptions:
            return False
        return self.find_subscription(group, topic) is None

    def compensated(self, group: str, topic: str) -> SubscriptionData | None:
        """The subscription of ``topic`` a pop of ``group`` recorded, if any."""
        entry = self._compensated.get(group, {}).get(topic)
        return None if entry is None else entry[0]

    def compensated_groups(self) -> dict[str, list[str]]:
        """The groups known from their pops only (no consumer connection) and the topics they recorded: what
        ConsumerManager.getConsumerGroupInfo(group, true) finds in the compensation table."""
        return {group: list(topics) for group, topics in self._compensated.items() if group not in self._consumers}

    def compensate_subscription(self, group: str, topic: str, subscription: SubscriptionData) -> None:
        """A pop's subscription of ``topic``, for a group that may send no heartbeat (ConsumerManager
        .compensateSubscribeData); forgotten ``subscription_expired_timeout`` after the last."""
        self._compensated.setdefault(group, {})[topic] = (subscription, self._clock())

    def _expire_compensated(self) -> None:
        """ConsumerManager.removeExpireConsumerGroupInfo: drop recorded subscriptions older than the expiry, and a
        group left with none."""
        deadline = self._clock() - self.subscription_expired_timeout
        for group, topics in list(self._compensated.items()):
            for topic in [t for t, (_, at) in topics.items() if at < deadline]:
                del topics[topic]
            if not topics:
                del self._compensated[group]

    def find_consumer_channel(self, group: str, client_id: str) -> ClientChannelInfo | None:
        group_info = self._consumers.get(group)
        if group_info is None:
            return None
        return next((c for c in group_info.channels.values() if c.client_id == client_id), None)

    def groups_subscribing(self, topic: str) -> list[str]:
        """Consumer groups whose subscription table has ``topic``."""
        return [g for g, info in self._consumers.items() if topic in info.subscriptions]

    # ---- producers ---------------------------------------------------------------------------------------------

    def register_producer(self, group: str, info: ClientChannelInfo) -> None:
        channels = self._producers.setdefault(group, {})
        old = channels.get(info.connection)
        if old is not None and old.client_id != info.client_id:
            self._unindex_producer(old, group)
        channels[info.connection] = info
        self._producer_clients.setdefault(info.client_id, {}).setdefault(info.connection, set()).add(group)

    def unregister_producer(self, group: str, connection: Connection) -> bool:
        channels = self._producers.get(group)
        if channels is None:
            return False
        info = channels.pop(connection, None)
        if info is None:
            return False
        self._unindex_producer(info, group)
        if not channels:
            del self._producers[group]
        return True

    def _unindex_producer(self, info: ClientChannelInfo, group: str) -> None:
        """``info``'s connection is no longer a producer of ``group``."""
        connections = self._producer_clients.get(info.client_id)
        if connections is None:
            return
        groups = connections.get(info.connection)
        if groups is not None:
            groups.discard(group)
            if not groups:
                del connections[info.connection]
        if not connections:
            del self._producer_clients[info.client_id]

    def producer_connections(self, group: str) -> list[ClientChannelInfo]:
        return list(self._producers.get(group, {}).values())

    def has_producer_group(self, group: str) -> bool:
        """A producer of ``group`` registered and not every member unregistered: a group whose connections closed or
        expired stays, empty, as in broker/src/main/java/org/apache/rocketmq/broker/client/ProducerManager.java
        (``doChannelCloseEvent`` and ``scanNotActiveChannel`` keep it, ``unregisterProducer`` of the last drops it)."""
        return group in self._producers

    @property
    def producer_groups(self) -> list[str]:
        return list(self._producers)

    def find_producer_channel(self, client_id: str) -> ClientChannelInfo | None:
        """The most recently heartbeated open connection of producer ``client_id``, read from the client-id index
        as broker/src/main/java/org/apache/rocketmq/broker/client/ProducerManager.java ``findChannel`` reads its
        ``clientChannelTable``: a reply costs the same among ten producers or thousands."""
        found: ClientChannelInfo | None = None
        for connection, groups in self._producer_clients.get(client_id, {}).items():
            if connection.closed:
                continue
            for group in groups:
                info = self._producers[group][connection]
                if found is None or info.last_update > found.last_update:
                    found = info
        return found

    # ---- connection life ---------------------------------------------------------------------------------------

    def unregister(self, connection: Connection, producer_group: str | None, consumer_group: str | None) -> None:
        """UNREGISTER_CLIENT: drop the connection from the named groups."""
        if producer_group:
            self.unregister_producer(producer_group, connection)
        if consumer_group:
            self.unregister_consumer(consumer_group, connection)

    def connection_closed(self, connection: Connection) -> None:
        """Forget the connection everywhere at once (the server's close listener)."""
        for group, channels in self._producers.items():
            info = channels.pop(connection, None)
            if info is not None:
                self._unindex_producer(info, group)
        for group_info in list(self._consumers.values()):
            info = group_info.channels.pop(connection, None)
            if info is not None:
                log.info("consumer %s of group %s disconnected", connection, group_info.group_name)
                self._consumer_unregistered(group_info.group_name, info)
                self._after_channel_removed(group_info)

    def scan_not_active_channels(self) -> int:
        """Drop (and close) channels whose last heartbeat is older than the expiry; returns how many. Expired
        subscriptions recorded by pops go too (ConsumerManager.scanNotActiveChannel)."""
        self._expire_compensated()
        deadline = self._clock() - self.channel_expired_timeout
        dropped = 0
        for group, channels in list(self._producers.items()):
            for conn, info in list(channels.items()):
                if info.last_update < deadline:
                    del channels[conn]
                    self._unindex_producer(info, group)
                    conn.close()
                    dropped += 1
                    log.warning("producer channel %s of group %s expired", info.client_id, group)
        for group_info in list(self._consumers.values()):
            expired = [(c, i) for c, i in group_info.channels.items() if i.last_update < deadline]
            for conn, info in expired:
                del group_info.channels[conn]
                log.warning("consumer channel %s of group %s expired", info.client_id, group_info.group_name)
                self._consumer_unregistered(group_info.group_name, info)
                conn.close()
                dropped += 1
            if expired:
                self._after_channel_removed(group_info)
        return dropped

    # ---- notification and housekeeping ---------------------------------------------------------------------------

    def _notify(self, group_info: ConsumerGroupInfo) -> None:
        """Queue the group's notification unless one is already pending: it is sent to the members the group has
        then, so a burst of N joins (a broker restart) costs N frames, not N * (N + 1) / 2. RocketMQ 5's
        broker/src/main/java/org/apache/rocketmq/broker/client/DefaultConsumerIdsChangeListener.java likewise drops
        a group's notification that a newer change supersedes (``NotifyTaskControl.interrupt``)."""
        group = group_info.group_name
        if self.notify_enabled and group_info.channels and group not in self._notify_pending:
            self._notify_pending.add(group)
            self._notify_send.send_nowait(group)

    async def _send_notifications(self) -> None:
        async for group in self._notify_receive:
            self._notify_pending.discard(group)
            group_info = self._consumers.get(group)
            if group_info is None:  # emptied meanwhile: nobody left to tell
                continue
            header = NotifyConsumerIdsChangedRequestHeader(consumer_group=group).to_ext_fields()
            for conn in list(group_info.channels):
                # Never waits for a member that does not read (Java's invokeOneway gives up on a peer after 10 ms):
                # one that is not writable (congested, or a 5.x client without its stream) is skipped; it learns the
                # change at its next rebalance (every 20 s).
                if not conn.writable:
                    continue
                try:
                    conn.send_nowait(request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, dict(header), oneway=True))
                    self.notifications_sent += 1
                except RemotingError as exc:
                    log.debug("notify %s of group %s failed: %r", conn, group, exc)
            await trio.lowlevel.checkpoint()

    async def _scan(self) -> None:
        while True:
            await trio.sleep(self.scan_interval)
            self.scan_not_active_channels()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Send queued notifications and scan for silent channels until cancelled."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._send_notifications)
            nursery.start_soon(self._scan)
            task_status.started()
