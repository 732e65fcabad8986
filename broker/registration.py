"""Broker registration with every name server (docs/protocol.md#82-liveness-timings,
docs/protocol.md#314-name-server-headers and docs/protocol.md#46-registerbrokerbody).

:class:`BrokerRegistration` sends REGISTER_BROKER to **each** configured name server: once at start, then every
``registerNameServerPeriod`` (30 s, clamped to [10 s, 60 s]), and at once whenever :meth:`trigger` is called (the
topic manager calls it after a topic change, so a new ``%RETRY%group`` or auto-created topic is routable within
milliseconds). Triggers that arrive while a round is running coalesce into one more round. :meth:`register_now`
triggers one and waits for its answers (a ``brokerPermission`` update answers then); :meth:`register_increment`
registers one topic alone and waits likewise (UPDATE_AND_CREATE_TOPIC; BrokerController.java
``registerIncrementBrokerData``). One registration is sent at a time, as Java's are ``synchronized``. With
``forceRegister=false`` a periodic round first sends QUERY_DATA_VERSION to every name server and registers only if
one lacks the current topic table (the query alone keeps the broker alive there); ``compressedRegister=true`` sends
the zlib body. On cancellation
(shutdown) it sends UNREGISTER_BROKER to every name server, shielded and bounded by the request timeout, through a
client with the periodic client's TLS context (RocketMQ's BrokerOuterAPI uses one remoting client for both).

The body is a RegisterBrokerBody carrying the topic manager's wrapper and DataVersion; ``brokerAddr`` is read from the
context at send time, so a broker bound to port 0 registers its real port. A broker whose ``brokerPermission`` is not
read+write registers every topic with that permission (broker/.../BrokerController.java ``registerBrokerAll``), so
producers stop routing to a read-only broker; its own topic table is left as it is.

The first answering name server's ORDER_TOPIC_CONFIG table (the answer's body, when there is one) goes to the topic
manager's ``update_order_topic_config`` (``doRegisterBrokerAll``; Java does so on its start-up and periodic rounds,
here every round does, which only applies the name server's table sooner).

A slave learns its master from the answers (RocketMQ's ``updateMasterHAServerAddrPeriodically``): after each round
the first name server's response header (``haServerAddr``, ``masterAddr``, both set only while the master is
registered) goes to :attr:`BrokerRegistration.on_master`.

Errors: a name server that is down, refuses or times out is logged and retried on the next round; it never stops the
others or the broker.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import trio

from broker.context import BrokerState
from remoting.client import RemotingClient
from remoting.codec.bodies import (
    KVTable,
    RegisterBrokerBody,
    TopicConfigSerializeWrapper,
    body_crc32,
    decode_data_version,
    encode_data_version,
)
from remoting.codec.codes import LanguageCode, RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand, request
from remoting.codec.errors import CodecError
from remoting.codec.headers import (
    QueryDataVersionRequestHeader,
    QueryDataVersionResponseHeader,
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    UnRegisterBrokerRequestHeader,
)
from remoting.errors import RemotingError
from store.metadata_files import PERM_READ, PERM_WRITE, TopicConfig

log = logging.getLogger(__name__)

#: Delay before the first periodic round (the start-up registration happens at once).
PERIODIC_INITIAL_DELAY = 10.0


def registration_period(period_ms: int) -> float:
    """Java clamps ``registerNameServerPeriod`` to [10 s, 60 s]."""
    return min(max(period_ms, 10_000), 60_000) / 1000


class BrokerRegistration:
    """Registers ``broker`` with every address of ``namesrv_addrs()`` (re-read each round, so it can change)."""

    def __init__(
        self,
        broker: BrokerState,
        client: RemotingClient,
        namesrv_addrs: Callable[[], list[str]] | None = None,
    ) -> None:
        self.broker = broker
        self.client = client
        self._namesrv_addrs = namesrv_addrs or (lambda: broker.config.namesrv_addrs)
        self._wakeup = trio.Event()
        self.rounds = 0
        #: Rounds :meth:`run` has begun, and the last of them completed (:meth:`register_now`).
        self._begun = 0
        self._done_through = 0
        self.last_results: dict[str, int | str] = {}
        self._round_done = trio.Event()
        self._registering = trio.Lock()
        #: Called after each round with the first answering name server's view of this broker's master:
        #: ``(haServerAddr, masterAddr)``, each ``None`` when the master is not registered.
        self.on_master: Callable[[str | None, str | None], None] | None = None

    @property
    def timeout(self) -> float:
        return self.broker.config.register_broker_timeout_mills / 1000

    def trigger(self) -> None:
        """Ask for an immediate registration round. Never blocks."""
        self._wakeup.set()

    async def register_now(self) -> None:
        """Trigger a round and return once one begun after this call has completed, so the name servers that
        answered route the current table: UPDATE_AND_CREATE_TOPIC answers then (AdminBrokerProcessor.java
        ``registerIncrementBrokerData``, whose registerBrokerAll waits for the answers). Bounded by two register
        timeouts (a round in progress, then ours); without a running :meth:`run` it returns after that bound."""
        self.trigger()
        wanted = self._begun + 1
        with trio.move_on_after(2 * self.timeout):
            while self._done_through < wanted:
                await self._round_done.wait()

    def register_request(self, wrapper: TopicConfigSerializeWrapper | None = None) -> RemotingCommand:
        """REGISTER_BROKER carrying ``wrapper`` (by default :meth:`registered_wrapper`, the whole table)."""
        config = self.broker.config
        # compressedRegister: the zlib form, CRC32 of the bytes sent (broker/.../out/BrokerOuterAPI.java).
        body = RegisterBrokerBody(wrapper or self.registered_wrapper()).encode(config.compressed_register)
        header = RegisterBrokerRequestHeader(
            broker_name=config.broker_name,
            broker_addr=self.broker.broker_addr,
            cluster_name=config.broker_cluster_name,
            ha_server_addr=config.ha_server_addr,
            broker_id=config.broker_id,
            compressed=config.compressed_register,
            body_crc32=body_crc32(body),
        )
        return request(RequestCode.REGISTER_BROKER, header.to_ext_fields(), body, language=LanguageCode.JAVA)

    def registered_wrapper(self) -> TopicConfigSerializeWrapper:
        """The topic table as registered: every topic gets ``brokerPermission`` as its perm (and Java's other
        defaults) unless the broker is both readable and writable (BrokerController.java ``registerBrokerAll``)."""
        wrapper = self.broker.topics.wrapper()
        return TopicConfigSerializeWrapper(self._with_broker_perm(wrapper.topic_config_table), wrapper.data_version)

    def _with_broker_perm(self, table: dict[str, TopicConfig]) -> dict[str, TopicConfig]:
        """``table`` as registered: each topic with ``brokerPermission`` unless the broker is read+write."""
        perm = self.broker.config.broker_permission
        if perm & PERM_READ and perm & PERM_WRITE:
            return table
        return {name: TopicConfig(name, tc.read_queue_nums, tc.write_queue_nums, perm) for name, tc in table.items()}

    async def register_increment(self, topic: TopicConfig) -> dict[str, int | str]:
        """Register one changed topic with every name server and return once they answered (or timed out):
        BrokerController.java ``registerIncrementBrokerData``, whose body holds only that topic with the table's
        DataVersion (the name server keeps the broker's other topics). Not counted as a round."""
        table = self._with_broker_perm({topic.topic_name: topic})
        wrapper = TopicConfigSerializeWrapper(table, self.broker.topics.data_version)
        return await self._register(self.register_request(wrapper))

    def unregister_request(self) -> RemotingCommand:
        config = self.broker.config
        header = UnRegisterBrokerRequestHeader(
            broker_name=config.broker_name,
            broker_addr=self.broker.broker_addr,
            cluster_name=config.broker_cluster_name,
            broker_id=config.broker_id,
        )
        return request(RequestCode.UNREGISTER_BROKER, header.to_ext_fields(), language=LanguageCode.JAVA)

    async def need_register(self) -> bool:
        """Whether any name server lacks this broker's topic table: QUERY_DATA_VERSION to each concurrently; one that
        answers ``changed`` or another DataVersion, or does not answer, needs it; a refusal does not
        (broker/.../out/BrokerOuterAPI.java ``needRegister``)."""
        config = self.broker.config
        version = self.broker.topics.wrapper().data_version
        header = QueryDataVersionRequestHeader(
            broker_name=config.broker_name,
            broker_addr=self.broker.broker_addr,
            cluster_name=config.broker_cluster_name,
            broker_id=config.broker_id,
        )
        cmd = request(
            RequestCode.QUERY_DATA_VERSION,
            header.to_ext_fields(),
            encode_data_version(version),
            language=LanguageCode.JAVA,
        )
        changed: list[str] = []

        async def one(addr: str) -> None:
            try:
                response = await self.client.invoke(addr, cmd, self.timeout)
                if response.code != ResponseCode.SUCCESS:
                    return
                answer = QueryDataVersionResponseHeader.from_ext_fields(response.ext_fields or {})
                if answer.changed or (response.body and decode_data_version(response.body) != version):
                    changed.append(addr)
            except (RemotingError, CodecError) as exc:
                log.warning("query data version from name server %s failed: %s", addr, exc)
                changed.append(addr)

        async with trio.open_nursery() as nursery:
            for addr in self._namesrv_addrs():
                nursery.start_soon(one, addr)
        return bool(changed)

    async def register_all(self) -> dict[str, int | str]:
        """One round: register with every name server concurrently. Returns address -> response code or error."""
        results = await self._register(None)
        self._finish_round(results)
        return results

    async def _register(self, cmd: RemotingCommand | None) -> dict[str, int | str]:
        """Send ``cmd`` (built under the lock when ``None``: the whole table) to every name server concurrently and
        adopt the first answer; one registration at a time, as Java's ``synchronized`` registerBrokerAll and
        registerIncrementBrokerData. Returns address -> response code or error."""
        try:  # no scheduling point when free: a round's request leaves before the task that triggered it goes on
            self._registering.acquire_nowait()
        except trio.WouldBlock:
            await self._registering.acquire()
        try:
            return await self._register_locked(cmd or self.register_request())
        finally:
            self._registering.release()

    async def _register_locked(self, cmd: RemotingCommand) -> dict[str, int | str]:
        results: dict[str, int | str] = {}
        answers: dict[str, RegisterBrokerResponseHeader] = {}
        order_tables: dict[str, KVTable | None] = {}

        async def one(addr: str) -> None:
            try:
                response = await self.client.invoke(addr, cmd, self.timeout)
            except RemotingError as exc:
                log.warning("register broker to name server %s failed: %s", addr, exc)
                results[addr] = repr(exc)
                return
            if response.code != ResponseCode.SUCCESS:
                log.warning("name server %s refused registration: %s %s", addr, response.code, response.remark)
            else:
                answers[addr] = RegisterBrokerResponseHeader.from_ext_fields(response.ext_fields or {})
                order_tables[addr] = _order_table(addr, response)
            results[addr] = response.code

        async with trio.open_nursery() as nursery:
            for addr in self._namesrv_addrs():
                nursery.start_soon(one, addr)
        first = next((a for a in self._namesrv_addrs() if a in answers), None)
        if first is not None:
            self._adopt_answer(answers[first], order_tables[first])
        return results

    def _finish_round(self, results: dict[str, int | str]) -> None:
        """Count the round (one that only found every name server up to date registers nothing: empty results) and
        wake :meth:`wait_next_round`."""
        self.rounds += 1
        self._done_through = self._begun
        self.last_results = results
        done, self._round_done = self._round_done, trio.Event()
        done.set()

    def _adopt_answer(self, header: RegisterBrokerResponseHeader, order_table: KVTable | None) -> None:
        """The first answer's master (slaves) and ORDER_TOPIC_CONFIG table (BrokerController.java
        ``doRegisterBrokerAll``)."""
        if self.on_master is not None:
            self.on_master(header.ha_server_addr, header.master_addr)
        if order_table is not None:
            self.broker.topics.update_order_topic_config(order_table.table.keys())

    async def wait_next_round(self) -> None:
        """Return when the next registration round (one in progress, or the next one) has completed."""
        await self._round_done.wait()

    async def unregister_all(self, client: RemotingClient | None = None) -> None:
        """UNREGISTER_BROKER to every name server, each bounded by the timeout; failures are logged."""
        cmd = self.unregister_request()
        via = client or self.client

        async def one(addr: str) -> None:
            try:
                await via.invoke(addr, cmd, self.timeout)
            except RemotingError as exc:
                log.warning("unregister broker from name server %s failed: %s", addr, exc)

        async with trio.open_nursery() as nursery:
            for addr in self._namesrv_addrs():
                nursery.start_soon(one, addr)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Register now, then periodically and on triggers, until cancelled; then unregister (shielded)."""
        try:
            self._begun += 1
            await self.register_all()
            task_status.started()
            period = registration_period(self.broker.config.register_name_server_period)
            next_round = trio.current_time() + PERIODIC_INITIAL_DELAY
            while True:
                with trio.move_on_at(next_round):
                    await self._wakeup.wait()
                triggered = self._wakeup.is_set()
                self._wakeup = trio.Event()
                self._begun += 1
                if trio.current_time() >= next_round:
                    next_round = trio.current_time() + period
                # Only a periodic round honours forceRegister=false; topic changes always register
                # (BrokerController.java: the scheduled registerBrokerAll passes isForceRegister()).
                if triggered or self.broker.config.force_register or await self.need_register():
                    await self.register_all()
                else:
                    self._finish_round({})
        finally:
            # The periodic client's connections die with the cancelled scope, so shutdown uses a fresh client
            # whose tasks live inside the shield, with the same TLS context (BrokerOuterAPI: one client for both).
            with trio.CancelScope(shield=True), trio.move_on_after(self.timeout + 1):
                async with self._shutdown_client() as client:
                    await self.unregister_all(client)

    def _shutdown_client(self) -> RemotingClient:
        """A client configured like the periodic one (TLS, serialization, connect timeout)."""
        return RemotingClient(
            connect_timeout=self.client.connect_timeout,
            serialize_type=self.client.serialize_type,
            ssl_context=self.client.ssl_context,
        )


def _order_table(addr: str, response: RemotingCommand) -> KVTable | None:
    """The answer's ORDER_TOPIC_CONFIG table; ``None`` without a body (the name server has no such namespace) or
    with one that does not decode (logged)."""
    if not response.body:
        return None
    try:
        return KVTable.decode(response.body)
    except CodecError as exc:
        log.warning("name server %s answered a register body that is not a KVTable: %s", addr, exc)
        return None
