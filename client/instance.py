"""``MQClientInstance``: what every producer and consumer of one client id shares (Java's ``MQClientInstance``).

It owns

- one :class:`~remoting.client.RemotingClient` (a connection per name server and broker address, closed when a call
  on it times out, so the next call connects again),
- the route cache, refreshed 10 ms after the start and then every ``poll_name_server_interval`` (30 s) from the
  first name server that answers (each instance starts at a random one, as Java's ``NettyRemotingClient``; one that
  fails is skipped and the next one tried): the routes of the topics its producers and consumers use, and TBW102's,
  which Java's inner producer keeps in its publish table (see :data:`CLIENT_INNER_PRODUCER_GROUP`),
- the broker address table derived from it (Java's ``brokerAddrTable``): each broker name's addresses come from the
  route stored last that lists it, so a master that moved is found as soon as any route naming it is refreshed, and
  an address no cached route lists any more drops out (Java's ``cleanOfflineBroker``),
- heartbeats 1 s after the start and then every ``heartbeat_broker_interval`` (30 s) to every broker of that table
  (masters only when no consumer is registered), an admin's instance too (every heartbeat lists the inner producer),
  and, once a producer or consumer is registered, one at once to a broker a route lookup newly names (see
  :meth:`adopt_route`), again when one that dropped out of the table comes back,
- the rebalance timer (20 s, or at once when a broker sends NOTIFY_CONSUMER_IDS_CHANGED) and the offset persist timer
  (5 s) of its consumers,
- the handler for requests brokers push (see :mod:`client.handlers`),
- its consumers' pull and consume statistics (:mod:`client.consumer.stats`), their running info's ``statusTable``.

Use it with ``async with``; the timers run in its task group and stop when the block exits, and then the brokers
are told the inner producer's group is gone (UNREGISTER_CLIENT, as Java's ``shutdown``). Producers and consumers
create a private instance unless they are given one, so several of them may share an instance (and a client id)
explicitly; instances built from one config whose instance name was left to its default get names of their own.
Errors inside timers are logged and retried on the next tick; they never end the instance.
"""

from __future__ import annotations

import inspect
import logging
import random
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, Self

import anyio
import anyio.abc
import attrs

from client import api
from client.body_codecs import compressor, default_compress_level, default_compress_type
from client.config import ClientConfig, default_instance_name, default_namesrv_addr
from client.consumer.stats import ConsumerStats
from client.errors import ClientStateError, TopicRouteNotFoundError
from client.request_reply import ReplyTable
from client.route import MASTER_ID
from client.vip import vip_address
from remoting.client import RemotingClient
from remoting.codec.bodies import (
    BrokerData,
    ConsumerData,
    ConsumeType,
    HeartbeatData,
    MessageModel,
    MessageQueue,
    ProducerData,
    TopicRouteData,
)
from remoting.codec.bodies.admin import PROP_CLIENT_VERSION, PROP_CONSUME_TYPE, PROP_NAMESERVER_ADDR
from remoting.codec.codes import CURRENT_VERSION, version_desc
from remoting.codec.command import RemotingCommand
from remoting.codec.topics import AUTO_CREATE_TOPIC_KEY_TOPIC, RETRY_GROUP_TOPIC_PREFIX

if TYPE_CHECKING:
    from client.consumer.offset_store import OffsetStore
    from remoting.codec.message import MessageExt

log = logging.getLogger(__name__)


async def _await_callback(callback: Callable[[Any], object], result: Awaitable[object], what: str) -> None:
    try:
        await result
    except Exception:
        log.exception("%s callback %r failed", what, callback)


#: Client ids of the instances running in this process: brokers key consumers by client id, so two live instances
#: with one id would be taken for one consumer.
_running_client_ids: set[str] = set()

#: Default instance names (:func:`~client.config.default_instance_name`) instances of this process were built with.
_default_names_taken: set[str] = set()

#: Java's ``rebalanceInterval``.
REBALANCE_INTERVAL = 20.0

#: The group of the producer every instance starts for itself (``MixAll.CLIENT_INNER_PRODUCER_GROUP``): Java's
#: ``MQClientInstance.start`` starts it, registered in the instance's producer table, so every heartbeat lists it
#: (client/src/main/java/org/apache/rocketmq/client/impl/factory/MQClientInstance.java). Retry copies a consumer sends
#: itself carry it as their producer group. Its ``DefaultMQProducerImpl.start`` puts the create-topic key TBW102 in its
#: publish table, so every instance refreshes TBW102's route (:meth:`MQClientInstance.used_topics`) and heartbeats
#: every broker carrying TBW102 from its start, before its application sends or subscribes anything.
CLIENT_INNER_PRODUCER_GROUP = "CLIENT_INNER_PRODUCER"

#: The first route refresh and the first heartbeat after the start (Java's ``MQClientInstance.startScheduledTask``:
#: ``updateTopicRouteInfoFromNameServer`` after 10 ms, ``sendHeartbeatToAllBrokerWithLock`` after 1000 ms), the
#: following ones ``poll_name_server_interval`` and ``heartbeat_broker_interval`` apart.
FIRST_ROUTE_REFRESH = 0.01
FIRST_HEARTBEAT = 1.0


class ProducerInner(Protocol):
    """What the instance needs from a producer."""

    @property
    def group(self) -> str: ...

    def published_topics(self) -> set[str]: ...

    async def check_transaction_state(self, broker_addr: str, msg: MessageExt, request: RemotingCommand) -> None: ...


class ConsumerInner(Protocol):
    """What the instance needs from a consumer (push or lite pull)."""

    @property
    def group(self) -> str: ...

    @property
    def message_model(self) -> MessageModel: ...

    @property
    def consume_type(self) -> ConsumeType: ...

    def consumer_data(self) -> ConsumerData: ...

    def subscribed_topics(self) -> set[str]: ...

    async def do_rebalance(self) -> None: ...

    async def persist_offsets(self) -> None: ...

    def running_info(self) -> dict[str, Any]:
        """Java's ``ConsumerRunningInfo`` as JSON-ready dict: ``properties`` (str -> str), ``subscriptionSet``,
        ``mqTable``, ``statusTable`` (topic -> ``ConsumeStatus``)."""
        ...

    async def consume_directly(self, msg: MessageExt, broker_name: str | None) -> dict[str, object]: ...

    async def reset_offset(self, topic: str, offsets: dict[MessageQueue, int]) -> None: ...

    @property
    def offset_store(self) -> OffsetStore: ...


class MQClientInstance:
    """See the module docstring. ``client_id`` is ``config.client_id``."""

    def __init__(self, config: ClientConfig, *, shared_id: bool = False) -> None:
        self.config = config = _own_default_name(config)
        self.client_id = config.client_id
        #: Other running instances of the process may have this client id (the trace producers' instances, which
        #: Java's clients share, :mod:`client.trace.dispatcher`): never one with a consumer.
        self._shared_id = shared_id
        self.producers: dict[str, ProducerInner] = {}
        self.consumers: dict[str, ConsumerInner] = {}
        #: The consumers' pull and consume statistics (Java's ``ConsumerStatsManager``), their running info's
        #: ``statusTable``.
        self.consumer_stats = ConsumerStats()
        self.routes: dict[str, TopicRouteData] = {}
        self.broker_version: dict[str, int] = {}
        self._remoting: RemotingClient | None = None
        self._tasks: anyio.abc.TaskGroup | None = None
        #: Where what user callbacks returned is awaited (see :meth:`start_callback`): not cancelled at the stop.
        self._callbacks: anyio.abc.TaskGroup | None = None
        self._rebalance_wanted = anyio.Event()
        # A random start (Java's NettyRemotingClient); without name servers a lookup raises TopicRouteNotFoundError.
        self._namesrv_index = random.randrange(len(config.namesrv_addr)) if config.namesrv_addr else 0
        self._route_locks: dict[str, anyio.Lock] = {}
        self._greeted: set[str] = set()  # addresses of broker_table() a heartbeat was attempted to
        self._heartbeats_now: dict[str, anyio.Event] = {}  # heartbeat_now requests in flight, by address
        self._routes_version = 0  # bumped whenever a route is stored or forgotten
        self._brokers: dict[str, BrokerData] = {}  # broker name -> its addresses, see broker_table()
        self._brokers_version = -1
        self._inner_heartbeated = False  # a heartbeat (listing the inner producer) was sent: unregister it on exit
        #: Requests of this client's producers waiting for their reply (client/request_reply.py).
        self.replies = ReplyTable()
        #: The inner producer's body codec (its sysflag bits and function) and level, which Java's reads from the
        #: system properties when the instance makes it (see :func:`~client.body_codecs.default_compress_level`).
        self.inner_compressor = compressor(default_compress_type())
        self.inner_compress_level = default_compress_level()

    # -- lifecycle -------------------------------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        from client.handlers import ClientRequestHandler

        if self.client_id in _running_client_ids and not self._shared_id:
            raise ClientStateError(
                f"a client instance with id {self.client_id!r} is already running in this process: share it "
                "(pass instance=) or give this one another instance_name"
            )
        remoting = RemotingClient(
            ClientRequestHandler(self),
            connect_timeout=self.config.rpc_timeout,
            credentials=self.config.credentials,
            ssl_context=self.config.ssl_context(),
            close_on_timeout=True,  # Java's clientCloseSocketIfTimeout, true by default (see remoting/client.py)
            async_permits=self.config.client_async_semaphore_value,
            oneway_permits=self.config.client_oneway_semaphore_value,
            address_for=vip_address if self.config.vip_channel_enabled else None,
        )
        # Entered first, left last: the stop waits there for the callbacks still running (see start_callback).
        callbacks = anyio.create_task_group()
        await callbacks.__aenter__()
        try:
            await remoting.__aenter__()
        except BaseException:
            await callbacks.__aexit__(None, None, None)
            raise
        self._callbacks = callbacks
        if not self._shared_id:
            _running_client_ids.add(self.client_id)
        self._remoting = remoting
        tasks = anyio.create_task_group()
        await tasks.__aenter__()
        self._tasks = tasks
        tasks.start_soon(self._every, self.config.poll_name_server_interval, self.refresh_routes, FIRST_ROUTE_REFRESH)
        tasks.start_soon(
            self._every, self.config.heartbeat_broker_interval, self.send_heartbeat_to_all_brokers, FIRST_HEARTBEAT
        )
        tasks.start_soon(self._every, self.config.persist_consumer_offset_interval, self.persist_all_offsets)
        tasks.start_soon(self._rebalance_loop)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        tasks, self._tasks = self._tasks, None
        if not self._shared_id:
            _running_client_ids.discard(self.client_id)
        try:
            if tasks is not None:
                tasks.cancel_scope.cancel()
                await tasks.__aexit__(None, None, None)
            if self._remoting is not None:
                with anyio.CancelScope(shield=True):
                    await self._unregister_inner_producer()
        finally:
            remoting, self._remoting = self._remoting, None
            try:
                if remoting is not None:
                    await remoting.__aexit__(None, None, None)
            finally:
                await self._end_callbacks()

    def start_callback(self, fn: Callable[..., Coroutine[Any, Any, None]], *args: object) -> None:
        """Run ``fn(*args)``, the await of what a user callback returned (a coroutine callback), in a task group of
        its own, which the stop does not cancel: it waits for those still running at its end (also those of the
        requests it failed, its tasks cancelled, then its connections closed), all together for at most
        ``rpc_timeout``. Java's callbacks run on the remoting client's executor, which its shutdown stops with
        ``ExecutorService.shutdown``, letting a running callback finish, after ``failFast`` has handed it the
        pending requests (remoting/src/main/java/org/apache/rocketmq/remoting/netty/NettyRemotingClient.java,
        NettyRemotingAbstract.java). Raises :class:`ClientStateError` when the instance is not running."""
        if self._callbacks is None:
            raise ClientStateError("client instance is not started (use `async with`)")
        self._callbacks.start_soon(fn, *args)

    def call_back(self, callback: Callable[[Any], object], outcome: object, what: str) -> None:
        """Hand ``outcome`` to a user callback; an awaitable it returns is awaited as :meth:`start_callback` says
        (closed unawaited when the instance has stopped). What it raises is logged as ``<what> callback ...
        failed``."""
        try:
            result = callback(outcome)
        except Exception:
            log.exception("%s callback %r failed", what, callback)
            return
        if inspect.isawaitable(result):
            try:
                self.start_callback(_await_callback, callback, result, what)
            except ClientStateError:
                if inspect.iscoroutine(result):
                    result.close()

    async def _end_callbacks(self) -> None:
        callbacks, self._callbacks = self._callbacks, None
        if callbacks is None:
            return
        callbacks.cancel_scope.shield = True
        callbacks.cancel_scope.deadline = anyio.current_time() + self.config.rpc_timeout
        await callbacks.__aexit__(None, None, None)

    async def _unregister_inner_producer(self) -> None:
        """UNREGISTER_CLIENT for :data:`CLIENT_INNER_PRODUCER_GROUP` to every address of the broker table, once a
        heartbeat registered it: Java's ``MQClientInstance.shutdown`` shuts its inner producer down first, and
        ``DefaultMQProducerImpl.shutdown`` unregisters its group as any producer's (client/src/main/java/org/apache/
        rocketmq/client/impl/factory/MQClientInstance.java ``unregisterClient``), so the broker drops the group with
        its last member. The brokers are asked at once, each for at most ``rpc_timeout``; failures are logged."""
        if not self._inner_heartbeated:
            return
        async with anyio.create_task_group() as tg:
            for addr in self.broker_addresses(masters_only=False):
                tg.start_soon(self._unregister_at, addr, CLIENT_INNER_PRODUCER_GROUP, None)

    async def _unregister_at(self, addr: str, producer_group: str | None, consumer_group: str | None) -> None:
        """UNREGISTER_CLIENT of the groups at the broker ``addr``; a failure is logged."""
        try:
            await api.unregister_client(
                self.remoting,
                addr,
                self.client_id,
                self.config.rpc_timeout,
                producer_group=producer_group,
                consumer_group=consumer_group,
            )
        except Exception as exc:
            log.info(
                "unregister %s (%s) from %s failed: %s", self.client_id, producer_group or consumer_group, addr, exc
            )

    @property
    def remoting(self) -> RemotingClient:
        if self._remoting is None:
            raise ClientStateError("client instance is not started (use `async with`)")
        return self._remoting

    @property
    def task_group(self) -> anyio.abc.TaskGroup:
        if self._tasks is None:
            raise ClientStateError("client instance is not started (use `async with`)")
        return self._tasks

    # -- registry --------------------------------------------------------------------------------------------------

    def register_producer(self, producer: ProducerInner) -> None:
        if producer.group in self.producers or producer.group == CLIENT_INNER_PRODUCER_GROUP:
            raise ClientStateError(f"producer group {producer.group!r} already registered on {self.client_id}")
        self.producers[producer.group] = producer

    def register_consumer(self, consumer: ConsumerInner) -> None:
        if consumer.group in self.consumers:
            raise ClientStateError(f"consumer group {consumer.group!r} already registered on {self.client_id}")
        self.consumers[consumer.group] = consumer

    async def unregister(self, *, producer_group: str | None = None, consumer_group: str | None = None) -> None:
        """Forget the group and send UNREGISTER_CLIENT to every known broker (failures are logged)."""
        if producer_group is not None:
            self.producers.pop(producer_group, None)
        if consumer_group is not None:
            self.consumers.pop(consumer_group, None)
        for addr in self.broker_addresses(masters_only=False):
            await self._unregister_at(addr, producer_group, consumer_group)

    def consumer_running_info(self, group: str) -> dict[str, Any] | None:
        """Java's ``MQClientInstance.consumerRunningInfo``: ``group``'s running info with this instance's name servers,
        the group's consume type and the client version added to its properties; ``None`` if not running here."""
        consumer = self.consumers.get(group)
        if consumer is None:
            return None
        info = consumer.running_info()
        info["properties"] = {
            **info.get("properties", {}),
            PROP_NAMESERVER_ADDR: "".join(f"{addr};" for addr in self.config.namesrv_addr),
            PROP_CONSUME_TYPE: consumer.consume_type.name,
            PROP_CLIENT_VERSION: version_desc(CURRENT_VERSION),
        }
        return info

    # -- routes ----------------------------------------------------------------------------------------------------

    @property
    def current_namesrv(self) -> str:
        """The name server that answered last (at first a random one): route lookups start with it."""
        return self.config.namesrv_addr[self._namesrv_index]

    async def query_route(self, topic: str) -> TopicRouteData:
        """Ask the name servers for ``topic``'s route, starting with the last one that answered and failing over on
        transport errors; nothing is cached. Raises :class:`TopicRouteNotFoundError` naming every name server tried
        when none has a route (or none answers)."""
        addrs = self.config.namesrv_addr
        causes: list[str] = []
        for i in range(len(addrs)):
            index = (self._namesrv_index + i) % len(addrs)
            try:
                route = await api.get_topic_route(self.remoting, addrs[index], topic, self.config.rpc_timeout)
            except Exception as exc:  # transport failures and malformed answers alike: try the next one
                causes.append(f"{addrs[index]}: {exc}")
                continue
            self._namesrv_index = index
            if route is None:
                causes.append(f"{addrs[index]}: TOPIC_NOT_EXIST")
                raise TopicRouteNotFoundError(topic, addrs, "; ".join(causes), topic_not_exist=True)
            return route
        raise TopicRouteNotFoundError(topic, addrs, "; ".join(causes) or None)

    async def fetch_route(self, topic: str, *, wait_greeting: bool = False) -> TopicRouteData:
        """:meth:`query_route`, then :meth:`adopt_route`: the route the name servers have now, cached."""
        return await self.adopt_route(topic, await self.query_route(topic), wait_greeting=wait_greeting)

    async def adopt_route(self, topic: str, route: TopicRouteData, *, wait_greeting: bool = False) -> TopicRouteData:
        """Store ``route`` for ``topic`` as the newest route (the cached object when equal to it: callers compare by
        identity), and greet the brokers it newly names (:meth:`_greet_new_brokers`).

        A broker serves a consumer group's pulls and lists its members (rebalance) only once a heartbeat registered
        the client, so consumers pass ``wait_greeting`` to wait for the greeting, at most ``rpc_timeout`` (the
        heartbeats run concurrently). Producers do not: Java's ``tryToFindTopicPublishInfo`` only asks the name
        server, and a producer sharing its instance with a consumer must not wait for the consumer's sake."""
        cached = self.routes.get(topic)
        if cached is not None and cached == route:
            route = cached
        self.store_route(topic, route)
        greeting = self._greet_new_brokers()
        if greeting is not None and wait_greeting:
            with anyio.move_on_after(self.config.rpc_timeout):
                await greeting.wait()
        return route

    async def route(self, topic: str, *, wait_greeting: bool = False) -> TopicRouteData:
        """The cached route of ``topic``, fetched (once, even under concurrent callers) when unknown."""
        cached = self.routes.get(topic)
        if cached is not None:
            return cached
        lock = self._route_locks.setdefault(topic, anyio.Lock())
        async with lock:
            cached = self.routes.get(topic)
            return cached if cached is not None else await self.fetch_route(topic, wait_greeting=wait_greeting)

    def store_route(self, topic: str, route: TopicRouteData) -> None:
        """Cache ``route`` for ``topic`` as the newest route: its broker addresses now win over those of routes
        stored before (:meth:`broker_table`). The one way routes enter the cache; every route re-read from a name
        server is stored again (equal or not), so a route the name server no longer has (a deleted topic's) cannot
        stay newer than the routes still being refreshed."""
        self.routes.pop(topic, None)
        self.routes[topic] = route
        self._routes_version += 1

    def forget_route(self, topic: str) -> None:
        if self.routes.pop(topic, None) is not None:
            self._routes_version += 1

    def used_topics(self) -> set[str]:
        """The topics whose routes the refresh keeps: those producers publish to and consumers subscribe to, and
        TBW102, the create-topic key the inner producer's ``DefaultMQProducerImpl.start`` puts in its publish table
        (client/src/main/java/org/apache/rocketmq/client/impl/producer/DefaultMQProducerImpl.java), so the instance
        knows, and heartbeats, every broker carrying TBW102 from its start: a transactional producer restarted with
        half messages left unknown is registered for their check-backs before it sends anything. A name server without
        TBW102 (``autoCreateTopicEnable=false``) answers TOPIC_NOT_EXIST, which the refresh logs and ignores."""
        topics: set[str] = {AUTO_CREATE_TOPIC_KEY_TOPIC}
        for producer in self.producers.values():
            topics |= producer.published_topics()
        for consumer in self.consumers.values():
            topics |= consumer.subscribed_topics()
        return topics

    async def refresh_routes(self) -> None:
        """Refresh every topic producers and consumers use; a topic that fails keeps its cached route.

        Logged as Java's periodic ``MQClientInstance.updateTopicRouteInfoFromNameServer(topic)``
        (client/src/main/java/org/apache/rocketmq/client/impl/factory/MQClientInstance.java): a topic the name server
        does not have warns "get Topic [t] RouteInfoFromNameServer is not exist value" (``MQClientAPIImpl
        .getTopicRouteInfoFromNameServer`` with allowTopicNotExist), TBW102 included, and then, for any topic but
        TBW102 and retry topics, "updateTopicRouteInfoFromNameServer Exception"; no name server answering is an error
        (Java's RemotingException branch; ours goes on with the next topic)."""
        for topic in sorted(self.used_topics()):
            try:
                await self.fetch_route(topic)
            except TopicRouteNotFoundError as exc:
                if not exc.topic_not_exist:
                    log.error("updateTopicRouteInfoFromNameServer Exception: %s", exc)
                    continue
                log.warning("get Topic [%s] RouteInfoFromNameServer is not exist value", topic)
                if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX) and topic != AUTO_CREATE_TOPIC_KEY_TOPIC:
                    log.warning("updateTopicRouteInfoFromNameServer Exception: %s", exc)

    def broker_table(self) -> dict[str, BrokerData]:
        """Broker name -> its addresses (a :class:`BrokerData`), each from the route stored last that lists it (Java's
        ``brokerAddrTable``, which every changed route overwrites). Addresses only an older route lists are not in it,
        so a stale route (a deleted topic's, the TBW102 stand-in's) cannot hide a moved master. Rebuilt when the
        routes change: every send and pull asks."""
        if self._brokers_version != self._routes_version:
            table: dict[str, BrokerData] = {}
            for route in self.routes.values():  # in the order stored: newer routes overwrite
                for bd in route.broker_datas:
                    table[bd.broker_name] = bd
            self._brokers, self._brokers_version = table, self._routes_version
            self._forget_greetings_outside(table)
        return self._brokers

    def _forget_greetings_outside(self, table: dict[str, BrokerData]) -> None:
        """Drop the greeting of every address ``table`` no longer lists: a broker that left the routes may come back
        at the same address with an empty client registry, and must be greeted again when a route names it."""
        listed = {addr for bd in table.values() for addr in bd.broker_addrs.values()}
        self._greeted &= listed

    def find_broker_address(self, broker_name: str, *, master: bool = True) -> str | None:
        """``broker_name``'s master address in :meth:`broker_table` (Java's ``findBrokerAddressInPublish``); with
        ``master=False`` its lowest-id slave when it has no master (reads may go to a slave). ``None`` if unknown."""
        bd = self.broker_table().get(broker_name)
        if bd is None:
            return None
        return bd.master_addr if master else bd.select_broker_addr()

    def find_broker_address_by_topic(self, topic: str) -> str | None:
        """Java's ``findBrokerAddrByTopic``: a broker group of ``topic``'s cached route, picked at random, and its
        master or, without one, a slave. ``None`` when the route is not cached or names no address."""
        route = self.routes.get(topic)
        if route is None or not route.broker_datas:
            return None
        return random.choice(route.broker_datas).select_broker_addr()

    def find_broker_address_in_subscribe(
        self, broker_name: str, broker_id: int, *, only_this_broker: bool, topic: str | None = None
    ) -> tuple[str, bool] | None:
        """Java's ``findBrokerAddressInSubscribe``: the address of ``broker_id`` in ``broker_name``'s group; for a
        missing slave id the next id (DLedger shifts them); then, unless ``only_this_broker``, the group's lowest id
        (a pull still reaches a slave when the master is gone). ``(address, is_slave)`` or ``None``. The group's
        addresses come from ``topic``'s route when cached (the freshest for that topic's queues), else from
        :meth:`broker_table`."""
        own = self.routes.get(topic) if topic is not None else None
        in_own = [bd.broker_addrs for bd in own.broker_datas if bd.broker_name == broker_name] if own else []
        known = self.broker_table().get(broker_name)
        addrs = next((a for a in in_own if a), None) or (known.broker_addrs if known is not None else None)
        if not addrs:
            return None
        found = addrs.get(broker_id)
        if found is not None:
            return found, broker_id != MASTER_ID
        if broker_id != MASTER_ID and broker_id + 1 in addrs:
            return addrs[broker_id + 1], True
        if only_this_broker:
            return None
        lowest = min(addrs)
        return addrs[lowest], lowest != MASTER_ID

    def broker_addresses(self, *, masters_only: bool) -> list[str]:
        """Every address of :meth:`broker_table` (``masters_only``: its masters), sorted."""
        addrs: set[str] = set()
        for bd in self.broker_table().values():
            if not masters_only:
                addrs.update(bd.broker_addrs.values())
            elif bd.master_addr is not None:
                addrs.add(bd.master_addr)
        return sorted(addrs)

    # -- heartbeats ------------------------------------------------------------------------------------------------

    def heartbeat_data(self) -> HeartbeatData:
        """Java's ``prepareHeartbeatData``: the consumers, and the producers with the instance's inner one
        (:data:`CLIENT_INNER_PRODUCER_GROUP`), which Java's instance registers when it starts."""
        groups = sorted({CLIENT_INNER_PRODUCER_GROUP, *self.producers})
        return HeartbeatData(
            client_id=self.client_id,
            producer_data_set=tuple(ProducerData(g) for g in groups),
            consumer_data_set=tuple(c.consumer_data() for _, c in sorted(self.consumers.items())),
        )

    async def send_heartbeat_to_all_brokers(self) -> None:
        """HEART_BEAT to every broker of the table (masters only without consumers); failures are logged. An instance
        without producers or consumers of its own (an admin's) heartbeats too: Java's never has an empty producer set,
        its inner producer is always in it (``MQClientInstance.sendHeartbeatToAllBroker``)."""
        data = self.heartbeat_data()
        for addr in self.broker_addresses(masters_only=not self.consumers):
            self._greeted.add(addr)
            await self._heartbeat(addr, data)

    def _greet_new_brokers(self) -> anyio.Event | None:
        """Start HEART_BEAT to every address of the table no heartbeat went to since it (last) entered the table, all
        at once, in the task group (admins list a group's connections from heartbeats, too): the 30 s timer would
        greet them late. Returns an event set once all answered or failed, or ``None`` when there is none to greet."""
        tasks = self._tasks
        if tasks is None or not (self.producers or self.consumers):
            return None
        new = [addr for addr in self.broker_addresses(masters_only=not self.consumers) if addr not in self._greeted]
        if not new:
            return None
        self._greeted.update(new)
        done = anyio.Event()
        tasks.start_soon(self._greet, new, done)
        return done

    async def _greet(self, addrs: list[str], done: anyio.Event) -> None:
        data = self.heartbeat_data()
        try:
            async with anyio.create_task_group() as tg:
                for addr in addrs:
                    tg.start_soon(self._heartbeat, addr, data)
        finally:
            done.set()

    async def heartbeat_now(self, addr: str) -> None:
        """HEART_BEAT to ``addr`` at once, out of the 30 s round (a broker that refused a pull for a subscription it
        lost); callers for the same address while one is in flight wait for that one. Failures are logged."""
        pending = self._heartbeats_now.get(addr)
        if pending is not None:
            await pending.wait()
            return
        done = self._heartbeats_now[addr] = anyio.Event()
        try:
            await self._heartbeat(addr, self.heartbeat_data())
        finally:
            del self._heartbeats_now[addr]
            done.set()

    async def _heartbeat(self, addr: str, data: HeartbeatData) -> None:
        self._inner_heartbeated = True  # every heartbeat lists the inner producer (heartbeat_data)
        try:
            self.broker_version[addr] = await api.send_heartbeat(self.remoting, addr, data, self.config.rpc_timeout)
        except Exception as exc:
            log.info("heartbeat to %s failed: %s", addr, exc)

    # -- consumer timers -------------------------------------------------------------------------------------------

    def wake_rebalance(self) -> None:
        """Run every consumer's rebalance now (NOTIFY_CONSUMER_IDS_CHANGED, a consumer starting)."""
        self._rebalance_wanted.set()

    async def _rebalance_loop(self) -> None:
        while True:
            with anyio.move_on_after(REBALANCE_INTERVAL):
                await self._rebalance_wanted.wait()
            self._rebalance_wanted = anyio.Event()
            for consumer in list(self.consumers.values()):
                try:
                    await consumer.do_rebalance()
                except Exception:
                    log.exception("rebalance of group %s failed", consumer.group)

    async def persist_all_offsets(self) -> None:
        for consumer in list(self.consumers.values()):
            try:
                await consumer.persist_offsets()
            except Exception:
                log.exception("persisting offsets of group %s failed", consumer.group)

    async def _every(self, interval: float, job: Callable[[], Awaitable[None]], first: float | None = None) -> None:
        """Run ``job`` ``first`` seconds from now (default ``interval``), then every ``interval``."""
        delay = interval if first is None else first
        while True:
            await anyio.sleep(delay)
            delay = interval
            try:
                await job()
            except Exception:
                log.exception("client timer %s failed", getattr(job, "__name__", job))


def _own_default_name(config: ClientConfig) -> ClientConfig:
    """``config``, with a fresh default instance name when its own is a default one an instance was built with
    already: Java's clients turn the default name ``DEFAULT`` into ``pid#nanoTime`` each
    (client/src/main/java/org/apache/rocketmq/client/ClientConfig.java ``changeInstanceNameToPID``), so clients sharing
    one config (its credentials, say) get client ids of their own; a name the application chose is kept."""
    if config.instance_name_defaulted:
        if config.instance_name in _default_names_taken:
            config = attrs.evolve(config, instance_name=default_instance_name())
        _default_names_taken.add(config.instance_name)
    return config


def new_instance(config: ClientConfig | None, namesrv_addr: str | Sequence[str] | None) -> MQClientInstance:
    """A client instance for ``config`` (without one, a default one) pointed at ``namesrv_addr``, unless ``config``
    names name servers of its own (anything but :func:`~client.config.default_namesrv_addr`). ``namesrv_addr`` None:
    the config's, by default ``NAMESRV_ADDR``'s (else 127.0.0.1:9876), as Java's ``ClientConfig``."""
    if config is None:
        config = ClientConfig()
    if namesrv_addr is not None and config.namesrv_addr == default_namesrv_addr():
        addrs = namesrv_addr if isinstance(namesrv_addr, str) else tuple(namesrv_addr)
        config = attrs.evolve(config, namesrv_addr=addrs)
    return MQClientInstance(config)
