"""QUERY_ASSIGNMENT (400) and SET_MESSAGE_REQUEST_MODE (401) as RocketMQ 5.3.3's QueryAssignmentProcessor answers
them (broker/src/main/java/org/apache/rocketmq/broker/processor/QueryAssignmentProcessor.java), the modes kept as its
MessageRequestModeManager keeps them (broker/.../loadbalance/MessageRequestModeManager.java) in
``config/messageRequestMode.json``.

A 5.x Java push consumer asks the broker for its queues of a topic; each comes with the mode of the (topic, group)
pair, POP making it pop instead of pull. Without a mode set, a retry topic is PULL and any other topic
``defaultMessageRequestMode`` (PULL), POP with ``defaultPopShareQueueNum``. The topic's queues are its route's
readable ones from the name server (TopicRouteInfoManager.getTopicSubscribeInfo), kept in a table refreshed every
``loadBalancePollNameServerInterval`` by :meth:`QueryAssignmentProcessor.run` (a failed refresh keeps them). A topic
no name server knows, a group without live consumers or an unknown strategy answer SUCCESS without assignments (the
client keeps what it had); a route without readable queue is an empty set of them; a POP group pops every queue
(id -1) unless ``popShareQueueNum`` limits it to its own share and that of the consumers following it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Final

import orjson
import trio

from broker.context import BrokerState, config_dir_of
from broker.persistence import ConfigPersister
from processors.common import RequestRejected
from remoting.client import RemotingClient
from remoting.codec.bodies._json import load_object
from remoting.codec.bodies.assignment import (
    MessageQueueAssignment,
    MessageRequestMode,
    QueryAssignmentRequestBody,
    QueryAssignmentResponseBody,
    SetMessageRequestModeRequestBody,
)
from remoting.codec.bodies.heartbeat import MessageModel
from remoting.codec.bodies.route import TopicRouteData
from remoting.codec.bodies.tables import MessageQueue
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand, request
from remoting.codec.errors import CodecError
from remoting.codec.headers.namesrv import GetRouteInfoRequestHeader
from remoting.errors import RemotingError
from remoting.processor import RequestContext
from store.metadata_files import PERM_READ, ConfigFile, ConfigFileError
from store.multi_dispatch import LMQ_QUEUE_ID, is_lmq

__all__ = ["QueryAssignmentProcessor", "RequestModes"]

log = logging.getLogger(__name__)

RETRY_PREFIX: Final = "%RETRY%"
#: TopicRouteInfoManager's GET_TOPIC_ROUTE_TIMEOUT (3 s).
_ROUTE_TIMEOUT: Final = 3.0
#: What the remoting layer answers for the NullPointerException a body without a topic or model throws.
_NPE: Final = "java.lang.NullPointerException"
_Table = dict[str, dict[str, SetMessageRequestModeRequestBody]]
Allocate = Callable[[str, list[MessageQueue], list[str]], list[MessageQueue]]


def _encode(table: _Table) -> bytes:
    modes = {t: {g: body.to_json() for g, body in groups.items()} for t, groups in table.items()}
    return orjson.dumps({"messageRequestModeMap": modes}, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)


def _decode(data: bytes) -> _Table:
    try:
        raw = orjson.loads(data).get("messageRequestModeMap") or {}
        return {str(t): {str(g): SetMessageRequestModeRequestBody.from_json(b) for g, b in groups.items()}
                for t, groups in raw.items()}  # fmt: skip
    except (orjson.JSONDecodeError, CodecError, AttributeError, TypeError) as exc:
        raise ConfigFileError(f"bad messageRequestMode.json: {exc!r}") from None


class RequestModes:
    """MessageRequestModeManager: the mode set per topic and group, saved in ``config/messageRequestMode.json``."""

    def __init__(self, broker: BrokerState) -> None:
        file = ConfigFile(config_dir_of(broker.config) / "messageRequestMode.json", _encode, _decode)
        self._table: _Table = {}
        self.persister = ConfigPersister(file, lambda: {t: dict(g) for t, g in self._table.items()})

    def load(self) -> None:
        self._table = self.persister.load() or {}

    def get(self, topic: str, group: str) -> SetMessageRequestModeRequestBody | None:
        return self._table.get(topic, {}).get(group)

    def set(self, body: SetMessageRequestModeRequestBody) -> None:
        self._table.setdefault(body.topic, {})[body.consumer_group] = body
        self.persister.write_through()


def _averagely(current: str, mqs: list[MessageQueue], cids: list[str]) -> list[MessageQueue]:
    """AllocateMessageQueueAveragely (client/.../consumer/rebalance/)."""
    index, mod = cids.index(current), len(mqs) % len(cids)
    first = mod > 0 and index < mod  # one of the consumers taking one queue more
    average = 1 if len(mqs) <= len(cids) else len(mqs) // len(cids) + (1 if first else 0)
    start = index * average if first else index * average + mod
    return [mqs[(start + i) % len(mqs)] for i in range(min(average, len(mqs) - start))]


def _by_circle(current: str, mqs: list[MessageQueue], cids: list[str]) -> list[MessageQueue]:
    """AllocateMessageQueueAveragelyByCircle."""
    return mqs[cids.index(current) :: len(cids)]


#: The strategies QueryAssignmentProcessor registers, by ``getName()``.
STRATEGIES: Final[dict[str, Allocate]] = {"AVG": _averagely, "AVG_BY_CIRCLE": _by_circle}


def _allocate(strategy: Allocate, current: str, mqs: list[MessageQueue], cids: list[str]) -> list[MessageQueue]:
    """AbstractAllocateMessageQueueStrategy.check, then the strategy: nothing for a client not in ``cids``."""
    if not current or not mqs or not cids:
        raise ValueError("currentCID, mqAll and cidAll must not be empty")
    return strategy(current, mqs, cids) if current in cids else []


def allocate_for_pop(
    strategy: Allocate, current: str, mqs: list[MessageQueue], cids: list[str], share: int
) -> list[MessageQueue]:
    """QueryAssignmentProcessor.allocate4Pop: every queue as id -1, or this client's share and that of the ``share``
    clients following it, or with more clients than queues one queue each."""
    if share <= 0 or share >= len(cids) - 1:
        return [MessageQueue(mq.topic, mq.broker_name, -1) for mq in mqs]
    if len(cids) > len(mqs):
        if not current or not mqs or not cids:
            raise ValueError("currentCID, mqAll and cidAll must not be empty")
        return [mqs[cids.index(current) % len(mqs)]] if current in cids else []
    result = _allocate(strategy, current, mqs, cids)
    if current in cids:
        index = cids.index(current)
        for i in range(1, share + 1):
            result += _allocate(strategy, cids[(index + i) % len(cids)], mqs, cids)
    return result


class QueryAssignmentProcessor:
    """Serves QUERY_ASSIGNMENT and SET_MESSAGE_REQUEST_MODE (see the module docstring). :attr:`client` is the
    broker's name-server client once the broker serves."""

    REQUEST_CODES: Final = (RequestCode.QUERY_ASSIGNMENT, RequestCode.SET_MESSAGE_REQUEST_MODE)

    def __init__(self, broker: BrokerState) -> None:
        self.broker = broker
        self.modes = RequestModes(broker)
        self.client: RemotingClient | None = None
        #: the readable queues of each topic asked for (TopicRouteInfoManager's topicSubscribeInfoTable)
        self._routes: dict[str, frozenset[MessageQueue]] = {}
        self._fetching = trio.Lock()  # one route fetch at a time (its lockNamesrv)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """TopicRouteInfoManager's scheduled refresh, until cancelled: every ``loadBalancePollNameServerInterval``
        the routes asked for are fetched again (:meth:`_refresh`)."""
        task_status.started()
        while True:
            await trio.sleep(max(self.broker.config.load_balance_poll_name_server_interval, 1000) / 1000)
            for topic in list(self._routes):
                await self._refresh(topic)

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        try:
            if request.code == RequestCode.SET_MESSAGE_REQUEST_MODE:
                fields = load_object(request.body or b"", "SetMessageRequestModeRequestBody")
                mode = SetMessageRequestModeRequestBody.from_json(fields)
                if fields.get("topic") is None:  # Java's field stays null, where ours reads "": topic.startsWith throws
                    return request.response(ResponseCode.SYSTEM_ERROR, _NPE)
                self._set_mode(mode)
                return request.response(ResponseCode.SUCCESS)
            fields = load_object(request.body or b"", "QueryAssignmentRequestBody")
            body = QueryAssignmentRequestBody.from_json(fields)
            # MessageRequestModeManager.getMessageRequestMode's map lookup of a null topic, or doLoadBalance's switch
            # on a null model, throws
            if fields.get("topic") is None or body.message_model is None:
                return request.response(ResponseCode.SYSTEM_ERROR, _NPE)
        except RequestRejected as rejected:
            return request.response(rejected.code, rejected.remark)
        except CodecError as exc:  # Java's decode throws out of the processor
            return request.response(ResponseCode.SYSTEM_ERROR, str(exc))
        answer = QueryAssignmentResponseBody(await self._assignments(body))
        return request.response(ResponseCode.SUCCESS, body=answer.encode())

    def _set_mode(self, body: SetMessageRequestModeRequestBody) -> None:
        if body.topic.startswith(RETRY_PREFIX):
            raise RequestRejected(ResponseCode.NO_PERMISSION, "retry topic is not allowed to set mode")
        if self.broker.topics.get(body.topic) is None:
            raise RequestRejected(ResponseCode.TOPIC_NOT_EXIST, f"topic[{body.topic}] not exist")
        if self.broker.groups.find(body.consumer_group) is None:
            raise RequestRejected(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "subscription group does not exist")
        self.modes.set(body)

    def _mode(self, topic: str, group: str) -> SetMessageRequestModeRequestBody:
        found = self.modes.get(topic, group)
        if found is not None:
            return found
        config = self.broker.config
        if topic.startswith(RETRY_PREFIX):  # a retry topic is always pulled
            return SetMessageRequestModeRequestBody(topic, group, MessageRequestMode.PULL)
        mode = MessageRequestMode[config.default_message_request_mode]
        share = config.default_pop_share_queue_num if mode is MessageRequestMode.POP else 0
        return SetMessageRequestModeRequestBody(topic, group, mode, share)

    async def _assignments(self, body: QueryAssignmentRequestBody) -> tuple[MessageQueueAssignment, ...] | None:
        mode = self._mode(body.topic, body.consumer_group)
        queues = await self._balance(body, mode)
        if queues is None:
            return None
        return tuple(MessageQueueAssignment(mq, mode.mode) for mq in sorted(set(queues)))

    async def _balance(
        self, body: QueryAssignmentRequestBody, mode: SetMessageRequestModeRequestBody
    ) -> Sequence[MessageQueue] | None:
        """doLoadBalance: ``None`` when there is no valid answer."""
        clustering = body.message_model is MessageModel.CLUSTERING
        if clustering and is_lmq(body.topic):  # a light message queue: its one queue on this broker
            queues: frozenset[MessageQueue] | None = frozenset(
                [MessageQueue(body.topic, self.broker.config.broker_name, LMQ_QUEUE_ID)]
            )
        else:
            queues = await self.subscribe_info(body.topic)
        if not clustering or queues is None:
            return None if queues is None else sorted(queues)
        if not self.broker.config.server_load_balancer_enable:
            return sorted(queues)
        cids = sorted(self.broker.clients.consumer_ids(body.consumer_group))
        strategy = STRATEGIES.get(body.strategy_name)
        if not cids or strategy is None:
            log.warning("QueryLoad: no assignment for group[%s] topic[%s] (clients %s, strategy %r)",
                        body.consumer_group, body.topic, cids, body.strategy_name)  # fmt: skip
            return None
        try:
            if mode.mode is MessageRequestMode.POP:
                return allocate_for_pop(strategy, body.client_id, sorted(queues), cids, mode.pop_share_queue_num)
            return _allocate(strategy, body.client_id, sorted(queues), cids)
        except ValueError as exc:
            log.error("QueryLoad: no assignment for group[%s] topic[%s]: %s", body.consumer_group, body.topic, exc)
            return None

    async def subscribe_info(self, topic: str) -> frozenset[MessageQueue] | None:
        """TopicRouteInfoManager.getTopicSubscribeInfo: the readable queues of the topic's route as the table holds
        them, fetched in the request when it holds none or an empty set (a topic since made readable)."""
        if not self._routes.get(topic):
            await self._refresh(topic)
        return self._routes.get(topic)

    async def _refresh(self, topic: str) -> None:
        """Fetch the topic's route into the table, within :data:`_ROUTE_TIMEOUT` in all: a topic the name server
        does not know leaves it, a fetch no name server answered leaves the
        table as it was (TopicRouteInfoManager.updateTopicRouteInfoFromNameServer)."""
        with trio.move_on_after(_ROUTE_TIMEOUT):
            async with self._fetching:
                answered, route = await self._fetch(topic)
            if not answered:
                return
            queues = frozenset(
                MessageQueue(topic, data.broker_name, qid)
                for data in ([] if route is None else route.queue_datas)
                if data.perm & PERM_READ
                for qid in range(data.read_queue_nums)
            )
            if route is None:
                self._routes.pop(topic, None)
            else:  # no readable queue: an empty set, kept (updateSubscribeInfoTable)
                self._routes[topic] = queues

    async def _fetch(self, topic: str) -> tuple[bool, TopicRouteData | None]:
        """GET_ROUTEINFO_BY_TOPIC, one name server after the other until one answers: whether one did, and the
        route (``None``: TOPIC_NOT_EXIST)."""
        if self.client is None:
            return False, None
        cmd = request(RequestCode.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader(topic=topic).to_ext_fields())
        for addr in self.broker.config.namesrv_addrs:
            try:
                response = await self.client.invoke(addr, cmd, _ROUTE_TIMEOUT)
                if response.code == ResponseCode.SUCCESS:
                    return True, TopicRouteData.decode(response.body or b"")
                if response.code == ResponseCode.TOPIC_NOT_EXIST:
                    return True, None
            except (RemotingError, CodecError) as exc:
                log.warning("route of %s from name server %s failed: %s", topic, addr, exc)
        return False, None
