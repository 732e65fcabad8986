"""Routes over the whole cluster, as RocketMQ 5.3.3's local proxy builds them
(proxy/src/main/java/org/apache/rocketmq/proxy/service/route/LocalTopicRouteService.java ``getTopicRouteForProxy``,
TopicRouteService.java, ProxyTopicRouteData.java).

A topic's route comes from the name server, through the broker's own name-server client (GET_ROUTEINFO_BY_TOPIC, one
name server after the other until one answers), cached per topic as TopicRouteService's Caffeine cache keeps it: a route
older than ``topicRouteServiceCacheRefreshSeconds`` (20 s) is still answered while it is fetched again in the background
(refreshAfterWrite, in :meth:`ClusterRoutes.announce`'s nursery), a refresh no name server answers keeps the old route
(``reload`` returning the old value) and tries again a refresh period later, and a route not asked for during
``topicRouteServiceCacheExpiredSeconds`` (300 s) is dropped (expireAfterAccess). Each broker of the route is offered at
its own gRPC endpoint: the host of its broker address with its gRPC port. RocketMQ assumes one ``grpcServerPort`` for
the whole cluster (each broker on a host of its own); brokers sharing a host (the embedded cluster, tests) cannot share
a port, so each proxy publishes the port it bound in the name server's KV config (namespace :data:`GRPC_PORT_NAMESPACE`,
key its broker address, the same store RocketMQ keeps ORDER_TOPIC_CONFIG in), and the routes read that namespace with
the route. A broker without an entry (no proxy of ours) is offered at this proxy's port, RocketMQ's rule; a route naming
such a broker is not cached, so a proxy that publishes late is found at the next query. The entry is deleted at a clean
shutdown.

A proxy with a TLS-only port (``grpcTlsServerPort``, ours) publishes it too (:data:`GRPC_TLS_PORT_NAMESPACE`): a
request that came in on a TLS-only port is answered with every broker at its TLS-only port (its main port when it has
none), since with ``tls.server.mode`` disabled the main ports speak plaintext only.

Every broker, the serving one too, is named at the same endpoint whichever proxy answers (the official clients compare
queues with their endpoints; an endpoint that changed with the proxy asked would make a push consumer drop and rebuild
its queues), never at the endpoint the client dialled. The serving broker's own queues come from its own topic table
(what its sends and receives check; the name server may lag a registration behind); a topic this broker lacks is not
routed to it. A broker the name server no longer names (unregistered, or expired after 120 s)
leaves the route at the next refresh. Without a name server, or when none answers and nothing is cached, the route is
this broker's alone.
"""

from __future__ import annotations

import ipaddress
import logging
from typing import Any, Final

import attrs
import trio

from broker.context import BrokerState
from broker.registration import registration_period
from proxy.common import routed_perm
from proxy.config import ProxyConfig
from proxy.pb import definition
from remoting.client import RemotingClient
from remoting.codec.bodies import KVTable
from remoting.codec.bodies.broker_metadata import TopicConfig
from remoting.codec.bodies.route import TopicRouteData
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request
from remoting.codec.errors import CodecError
from remoting.codec.headers.namesrv import (
    DeleteKVConfigRequestHeader,
    GetKVConfigRequestHeader,
    GetKVConfigResponseHeader,
    GetKVListByNamespaceRequestHeader,
    GetRouteInfoRequestHeader,
    PutKVConfigRequestHeader,
)
from remoting.codec.topics import validate_topic
from remoting.errors import RemotingError

__all__ = ["GRPC_PORT_NAMESPACE", "GRPC_TLS_PORT_NAMESPACE", "BrokerQueues", "ClusterRoutes", "grpc_endpoints"]

log = logging.getLogger(__name__)

#: The name server KV namespace where each proxy publishes its gRPC port under its broker's address (ours).
GRPC_PORT_NAMESPACE: Final = "ROCKETRIO_GRPC_SERVER_PORT"
#: The same for the TLS-only port of a proxy that serves one (ours).
GRPC_TLS_PORT_NAMESPACE: Final = "ROCKETRIO_GRPC_TLS_SERVER_PORT"
#: TopicRouteService reads a route within 3 s (``getTopicRouteInfoFromNameServer(topic, 3000)``).
_NAMESRV_TIMEOUT: Final = 3.0


@attrs.frozen
class BrokerQueues:
    """One broker name's share of a topic: its queue data and its members' gRPC endpoints by broker id."""

    name: str
    perm: int
    read_queue_nums: int
    write_queue_nums: int
    members: tuple[tuple[int, Any], ...]

    @property
    def master(self) -> Any | None:
        """The master's endpoints (broker id 0), or None."""
        return next((endpoints for broker_id, endpoints in self.members if broker_id == 0), None)


@attrs.define
class _Route:
    route: TopicRouteData
    ports: dict[str, int]
    #: When it was fetched, or last refreshed in vain (the next refresh is due a refresh period later).
    at: float
    tls_ports: dict[str, int] = attrs.field(factory=dict)
    #: When a request last asked for it (it expires that long after).
    used: float = 0.0


class _Unreachable:
    """No name server answered."""


_UNREACHABLE: Final = _Unreachable()


def grpc_endpoints(broker_addr: str, port: int) -> Any:
    """The gRPC endpoints of a broker at ``broker_addr`` (``host:port``) serving gRPC on ``port``: the broker's host
    with that port, its scheme as proxy/.../common/Address.java buildScheme gives it (IPv4, IPv6, else a domain)."""
    host = broker_addr.rpartition(":")[0] or broker_addr
    host = host.removeprefix("[").removesuffix("]")
    kind = definition.AddressScheme
    try:
        scheme = kind.IPv4 if ipaddress.ip_address(host).version == 4 else kind.IPv6
    except ValueError:
        scheme = kind.DOMAIN_NAME
    return definition.Endpoints(scheme=scheme, addresses=[definition.Address(host=host, port=port)])


class ClusterRoutes:
    """The routes of one proxy (see the module docstring); ``client`` is the broker's name-server client (None: no
    name server, routes name this broker alone). :attr:`grpc_port` is the port this proxy serves and :attr:`tls_port`
    its TLS-only one (None: none), set by :meth:`announce`."""

    def __init__(self, broker: BrokerState, config: ProxyConfig, client: RemotingClient | None) -> None:
        self.broker = broker
        self.config = config
        self.client = client
        self.grpc_port = config.grpc_server_port
        self.tls_port: int | None = None
        self._cache: dict[str, _Route] = {}
        self._refreshing: set[str] = set()
        #: :meth:`announce`'s nursery, where stale routes are fetched again (None: not running, fetched at once).
        self._nursery: trio.Nursery | None = None

    # ---- routes ---------------------------------------------------------------------------------------------------

    async def queues(self, topic: str, tls: bool = False) -> list[BrokerQueues] | None:
        """The topic's queues by broker name (sorted): this broker's from its topic table, the others' from the name
        server's route, at their TLS-only ports when ``tls`` (the request came in on this proxy's); None when neither
        this broker nor the name server knows the topic."""
        found = await self._route(topic)
        route = found.route if isinstance(found, _Route) else TopicRouteData()
        ports = self._ports_of(found if isinstance(found, _Route) else None, tls)
        brokers = {data.broker_name: data for data in route.broker_datas}
        own_name = self.broker.config.broker_name
        entries = []
        local = self.broker.topics.get(topic)
        if local is not None:
            data = brokers.get(own_name)
            entries.append(self.own_queues(local, {} if data is None else data.broker_addrs, ports, tls))
        for queue_data in route.queue_datas:
            data = brokers.get(queue_data.broker_name)
            if queue_data.broker_name == own_name or data is None:
                continue
            members = tuple(
                (broker_id, grpc_endpoints(addr, ports.get(addr, self._own_port(tls))))
                for broker_id, addr in sorted(data.broker_addrs.items())
            )
            entries.append(
                BrokerQueues(
                    queue_data.broker_name,
                    queue_data.perm,
                    queue_data.read_queue_nums,
                    queue_data.write_queue_nums,
                    members,
                )
            )
        return sorted(entries, key=lambda entry: entry.name) or None

    def own_queues(
        self,
        config: TopicConfig,
        addrs: dict[int, str] | None = None,
        ports: dict[str, int] | None = None,
        tls: bool = False,
    ) -> BrokerQueues:
        """This broker's queues of the topic ``config``: its perm as registered (:func:`routed_perm`), itself at its
        address's host with the port this proxy serves (its TLS-only one when ``tls``), the other members of its
        broker name (``addrs``, from the name server) at theirs."""
        broker = self.broker
        own_addr, own_id = broker.broker_addr, broker.config.broker_id
        port = self._own_port(tls)
        members = {
            broker_id: grpc_endpoints(addr, (ports or {}).get(addr, port))
            for broker_id, addr in (addrs or {}).items()
            if addr != own_addr
        }
        members[own_id] = grpc_endpoints(own_addr, port)
        perm = routed_perm(config.perm, broker.config.broker_permission)
        return BrokerQueues(
            broker.config.broker_name,
            perm,
            config.read_queue_nums,
            config.write_queue_nums,
            tuple(sorted(members.items(), key=lambda member: member[0])),
        )

    def _own_port(self, tls: bool) -> int:
        """This proxy's port for a request that came in on its TLS-only port (``tls``) or on its main port."""
        return self.tls_port if tls and self.tls_port is not None else self.grpc_port

    @staticmethod
    def _ports_of(found: _Route | None, tls: bool) -> dict[str, int]:
        """The published ports by broker address; for ``tls`` a broker's TLS-only port where it published one."""
        if found is None:
            return {}
        return {**found.ports, **found.tls_ports} if tls else found.ports

    async def _route(self, topic: str) -> _Route | _Unreachable | None:
        """The cached route of ``topic`` (a stale one refreshed in the background), else the name server's, fetched
        while the request waits; None: the name server does not know the topic (never cached, as an auto-created topic
        is registered at once)."""
        now = trio.current_time()
        cached = self._cache.get(topic)
        if cached is not None and now - cached.used >= self.config.topic_route_service_cache_expired_seconds:
            del self._cache[topic]
            cached = None
        if cached is not None:
            cached.used = now
            if now - cached.at < self.config.topic_route_service_cache_refresh_seconds:
                return cached
            if self._nursery is not None:
                if topic not in self._refreshing:
                    self._refreshing.add(topic)
                    self._nursery.start_soon(self._refresh, topic)
                return cached
        fetched = await self._fetch(topic)
        if isinstance(fetched, _Unreachable):
            return cached or fetched
        self._store(topic, fetched, now)
        return fetched

    async def _refresh(self, topic: str) -> None:
        """Fetch ``topic``'s cached route again; a refresh no name server answers keeps the old route."""
        try:
            fetched = await self._fetch(topic)
        except Exception:  # a background task: no request to fail, and the proxy must go on serving
            log.exception("refreshing the route of %s failed", topic)
            return
        finally:
            self._refreshing.discard(topic)
        old = self._cache.get(topic)
        if old is None:
            return  # expired or evicted meanwhile
        if isinstance(fetched, _Unreachable):
            old.at = trio.current_time()
            return
        self._store(topic, fetched, old.used)

    def _store(self, topic: str, fetched: _Route | None, used: float) -> None:
        """Cache ``fetched`` if complete (the oldest entry evicted past ``topicRouteServiceCacheMaxNum``), else forget
        the topic's route (gone from the name server, or a broker's gRPC port not published yet)."""
        self._cache.pop(topic, None)
        if fetched is not None and self._complete(fetched):
            while len(self._cache) >= max(1, self.config.topic_route_service_cache_max_num):
                del self._cache[next(iter(self._cache))]
            fetched.used = used
            self._cache[topic] = fetched

    def _complete(self, found: _Route) -> bool:
        """Every broker of the route besides this one has published its gRPC port."""
        own = self.broker.broker_addr
        addrs = {addr for data in found.route.broker_datas for addr in data.broker_addrs.values()}
        return all(addr in found.ports for addr in addrs if addr != own)

    async def _fetch(self, topic: str) -> _Route | _Unreachable | None:
        """GET_ROUTEINFO_BY_TOPIC, one name server after the other until one answers, then the gRPC ports of the
        same name server."""
        if self.client is None or validate_topic(topic) is not None:
            return _UNREACHABLE
        cmd = request(RequestCode.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader(topic=topic).to_ext_fields())
        for addr in self.broker.config.namesrv_addrs:
            try:
                response = await self.client.invoke(addr, cmd, _NAMESRV_TIMEOUT)
                if response.code == ResponseCode.TOPIC_NOT_EXIST:
                    return None
                if response.code != ResponseCode.SUCCESS:
                    log.warning("name server %s answered %d for the route of %s", addr, response.code, topic)
                    continue
                route = TopicRouteData.decode(response.body or b"")
            except (RemotingError, CodecError) as exc:
                log.warning("route of %s from name server %s failed: %s", topic, addr, exc)
                continue
            ports = await self._ports(addr, GRPC_PORT_NAMESPACE)
            # Only a proxy serving a TLS-only port answers requests that ask for TLS-only ports.
            tls_ports = {} if self.tls_port is None else await self._ports(addr, GRPC_TLS_PORT_NAMESPACE)
            return _Route(route, ports, trio.current_time(), tls_ports)
        return _UNREACHABLE

    async def _ports(self, namesrv: str, namespace: str) -> dict[str, int]:
        """The gRPC ports the proxies published at ``namesrv`` in ``namespace`` by broker address (none when it has
        none)."""
        header = GetKVListByNamespaceRequestHeader(namespace=namespace)
        assert self.client is not None
        try:
            response = await self.client.invoke(
                namesrv, request(RequestCode.GET_KVLIST_BY_NAMESPACE, header.to_ext_fields()), _NAMESRV_TIMEOUT
            )
            if response.code != ResponseCode.SUCCESS or not response.body:
                return {}
            table = KVTable.decode(response.body).table
        except (RemotingError, CodecError) as exc:
            log.warning("gRPC ports from name server %s failed: %s", namesrv, exc)
            return {}
        return {addr: int(port) for addr, port in table.items() if port.isdigit()}

    # ---- publishing this proxy's port --------------------------------------------------------------------------

    async def announce(
        self, port: int, tls_port: int | None = None, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Publish ``port`` (bound), and ``tls_port`` (the TLS-only port, None: none, an entry left by an earlier run
        deleted), under this broker's address in every name server's KV config, now and at every registration period
        (a name server that lost them gets them again), until cancelled; then delete them (shielded, within a
        name-server call's timeout: a name server that is gone delays no shutdown). Stale routes are fetched again in
        its nursery meanwhile."""
        self.grpc_port, self.tls_port = port, tls_port
        if self.client is None:
            task_status.started()
            return
        period = registration_period(self.broker.config.register_name_server_period)
        published = {
            GRPC_PORT_NAMESPACE: str(port),
            GRPC_TLS_PORT_NAMESPACE: None if tls_port is None else str(tls_port),
        }
        try:
            async with trio.open_nursery() as nursery:
                for namespace, value in published.items():
                    await self._publish(namespace, value)
                self._nursery = nursery
                task_status.started()
                while True:
                    await trio.sleep(period)
                    for namespace, value in published.items():
                        await self._publish(namespace, value)
        finally:
            self._nursery = None
            with trio.CancelScope(shield=True), trio.move_on_after(_NAMESRV_TIMEOUT):
                async with RemotingClient(
                    connect_timeout=self.client.connect_timeout,
                    serialize_type=self.client.serialize_type,
                    ssl_context=self.client.ssl_context,
                ) as client:
                    await self._withdraw(client)

    async def _publish(self, namespace: str, value: str | None) -> None:
        """This broker's entry of ``namespace`` set to ``value`` (None: deleted) where a name server holds another."""
        assert self.client is not None
        key = self.broker.broker_addr
        get = GetKVConfigRequestHeader(namespace=namespace, key=key).to_ext_fields()
        if value is None:
            code, fields = RequestCode.DELETE_KV_CONFIG, DeleteKVConfigRequestHeader(namespace, key).to_ext_fields()
        else:
            code, fields = RequestCode.PUT_KV_CONFIG, PutKVConfigRequestHeader(namespace, key, value).to_ext_fields()
        for addr in self.broker.config.namesrv_addrs:
            try:
                known = await self.client.invoke(addr, request(RequestCode.GET_KV_CONFIG, get), _NAMESRV_TIMEOUT)
                held = GetKVConfigResponseHeader.from_ext_fields(known.ext_fields or {}).value
                if (held if known.code == ResponseCode.SUCCESS else None) == value:
                    continue
                answer = await self.client.invoke(addr, request(code, fields), _NAMESRV_TIMEOUT)
                if answer.code != ResponseCode.SUCCESS:
                    log.warning("name server %s refused the gRPC port: %d %s", addr, answer.code, answer.remark)
            except (RemotingError, CodecError) as exc:
                log.warning("publishing the gRPC port to name server %s failed: %s", addr, exc)

    async def _withdraw(self, client: RemotingClient) -> None:
        """DELETE_KV_CONFIG of this broker's entries at every name server at once."""
        namespaces = [GRPC_PORT_NAMESPACE] + ([] if self.tls_port is None else [GRPC_TLS_PORT_NAMESPACE])

        async def one(addr: str, namespace: str) -> None:
            fields = DeleteKVConfigRequestHeader(namespace=namespace, key=self.broker.broker_addr)
            try:
                cmd = request(RequestCode.DELETE_KV_CONFIG, fields.to_ext_fields())
                await client.invoke(addr, cmd, _NAMESRV_TIMEOUT)
            except RemotingError as exc:
                log.warning("withdrawing the gRPC port from name server %s failed: %s", addr, exc)

        async with trio.open_nursery() as nursery:
            for addr in self.broker.config.namesrv_addrs:
                for namespace in namespaces:
                    nursery.start_soon(one, addr, namespace)
