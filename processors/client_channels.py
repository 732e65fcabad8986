"""The records of connected clients, as the broker's client registry keeps them and processors read them.

:class:`ClientChannelInfo` is one client connection as a member of a group (RocketMQ's ``ClientChannelInfo``);
:class:`ConsumerGroupInfo` is one consumer group's members and subscriptions (RocketMQ's ``ConsumerGroupInfo``). The
registry that owns and expires them is ``broker/client_registry.py``; only it mutates them, on the Trio thread.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from remoting.codec.bodies import ConsumeFromWhere, ConsumeType, MessageModel, SubscriptionData
from remoting.codec.codes import LanguageCode
from remoting.connection import Connection

__all__ = ["ClientChannelInfo", "ConsumerGroupInfo"]


@attrs.define(eq=False)
class ClientChannelInfo:
    """One client connection as a group member. ``last_update`` is ``trio.current_time()`` of its last heartbeat."""

    connection: Connection
    client_id: str
    language: LanguageCode = LanguageCode.JAVA
    version: int = 0
    last_update: float = 0.0

    @property
    def client_addr(self) -> str:
        host, port = self.connection.remote_address[:2]
        return f"{host}:{port}"


@attrs.define(eq=False)
class ConsumerGroupInfo:
    """A consumer group's members and what they consume."""

    group_name: str
    #: None: the heartbeat's field was null to Java (see ConsumerData)
    consume_type: ConsumeType | None = ConsumeType.CONSUME_PASSIVELY
    message_model: MessageModel | None = MessageModel.CLUSTERING
    consume_from_where: ConsumeFromWhere | None = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    channels: dict[Connection, ClientChannelInfo] = attrs.field(factory=dict)
    subscriptions: dict[str, SubscriptionData] = attrs.field(factory=dict)
    last_update: float = 0.0

    def client_ids(self) -> list[str]:
        return [info.client_id for info in self.channels.values()]

    def update_channel(self, info: ClientChannelInfo) -> bool:
        """Add or refresh ``info``'s channel; True when the channel is new or now carries another client id."""
        old = self.channels.get(info.connection)
        self.channels[info.connection] = info
        return old is None or old.client_id != info.client_id

    def update_subscriptions(self, subscriptions: Iterable[SubscriptionData]) -> bool:
        """Apply a heartbeat's subscription set; True when a topic was added or dropped (Java's rule: a larger
        ``subVersion`` replaces the data but does not count as a change)."""
        changed = False
        seen: set[str] = set()
        for sub in subscriptions:
            seen.add(sub.topic)
            old = self.subscriptions.get(sub.topic)
            if old is None:
                self.subscriptions[sub.topic] = sub
                changed = True
            elif sub.sub_version > old.sub_version:
                self.subscriptions[sub.topic] = sub
        for topic in [t for t in self.subscriptions if t not in seen]:
            del self.subscriptions[topic]
            changed = True
        return changed
