"""The broker's registration settings as RocketMQ 4.9.8's BrokerController/BrokerOuterAPI read them:
``compressedRegister`` (the zlib REGISTER_BROKER body) and ``forceRegister`` (false: a periodic round first asks each
name server QUERY_DATA_VERSION and registers only where the table changed). Found by a review; failed before (real
sockets, the name server's own processor behind a recorder of the request codes it is sent)."""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing

from broker.broker_config import BrokerConfig
from broker.controller import BrokerController
from namesrv.config import NamesrvConfig
from namesrv.processor import NamesrvProcessor
from namesrv.server import NamesrvServer
from remoting.client import RemotingClient
from remoting.codec.bodies import RegisterBrokerBody, TopicRouteData, body_crc32
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand, request
from remoting.codec.java_properties import config_from_properties
from remoting.processor import RequestContext
from tests.broker.helpers import create_topic_request
from tests.conftest import SMALL_STORE

TIMEOUT = 5.0


class _Recorder:
    """Every request the name server is sent, then handed to its own processor."""

    def __init__(self, inner: NamesrvProcessor) -> None:
        self.inner = inner
        self.requests: list[RemotingCommand] = []
        #: Seconds each REGISTER_BROKER waits before the name server takes it (a slow or hung name server).
        self.register_delay = 0.0

    @property
    def codes(self) -> list[int]:
        return [r.code for r in self.requests]

    async def process(self, ctx: RequestContext, req: RemotingCommand) -> RemotingCommand | None:
        self.requests.append(req)
        if req.code == RequestCode.REGISTER_BROKER:
            await trio.sleep(self.register_delay)
        return await self.inner.process(ctx, req)


async def _start_namesrv(nursery: trio.Nursery, tmp_path: Path, **settings: object) -> tuple[str, _Recorder]:
    config = NamesrvConfig(
        listen_port=0,
        listen_host="127.0.0.1",
        kv_config_path=str(tmp_path / "ns.json"),
        **settings,  # type: ignore[arg-type]
    )
    server = NamesrvServer(config)
    recorder = _Recorder(server.processor)
    server.remoting_server.dispatcher.register(NamesrvProcessor.request_codes(), recorder, server.pool)
    host, port = await nursery.start(server.serve)
    return f"{host}:{port}", recorder


#: The store's flushes and the timer's checkpoint once a minute, which no test here tests: with a test's 0.1 s
#: autojump threshold each of their wake-ups costs 0.1 s of real time.
_QUIET_FILES = {
    "flushIntervalCommitLog": "60000",
    "flushIntervalConsumeQueue": "60000",
    "timerFlushIntervalMs": "60000",
}


def _broker_config(tmp_path: Path, namesrv: str, props: dict[str, str]) -> BrokerConfig:
    """Settings as a ``-c`` file gives them (over :data:`_QUIET_FILES`), so a setting the broker does not know is
    reported, not raised."""
    config, unknown = config_from_properties(
        BrokerConfig,
        {**_QUIET_FILES, **props},
        broker_name="reg-b",
        listen_port=0,
        listen_host="127.0.0.1",
        namesrv_addr=namesrv,
        store_path_root_dir=str(tmp_path / "store"),
        **SMALL_STORE,
    )
    assert unknown == [], f"settings the broker ignores: {unknown}"
    return config


async def _start_pair(
    nursery: trio.Nursery, tmp_path: Path, props: dict[str, str]
) -> tuple[str, _Recorder, BrokerController]:
    """A name server behind a recorder and a broker with ``props`` registered with it."""
    namesrv, recorder = await _start_namesrv(nursery, tmp_path)
    controller = BrokerController(_broker_config(tmp_path, namesrv, props))
    await nursery.start(controller.serve)
    return namesrv, recorder, controller


async def _route_perms(client: RemotingClient, namesrv: str, topic: str) -> list[int]:
    route = await client.invoke(namesrv, request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}), TIMEOUT)
    return [qd.perm for qd in TopicRouteData.decode(route.body).queue_datas]


async def _routed(client: RemotingClient, namesrv: str, topic: str) -> bool:
    answer = await client.invoke(namesrv, request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}), TIMEOUT)
    return answer.code == ResponseCode.SUCCESS


async def test_compressed_register_sends_the_zlib_body_and_the_route_is_built(tmp_path: Path) -> None:
    """BrokerOuterAPI.registerBrokerAll (4.9.8) sets the header's ``compressed`` and encodes the RegisterBrokerBody
    with zlib when ``compressedRegister=true`` (the way a topic table too large for a 16 MiB frame registers); the
    body's CRC32 is that of the bytes sent."""
    async with trio.open_nursery() as nursery, RemotingClient() as client:
        namesrv, recorder = await _start_namesrv(nursery, tmp_path)
        controller = BrokerController(_broker_config(tmp_path, namesrv, {"compressedRegister": "true"}))
        await nursery.start(controller.serve)
        registers = [r for r in recorder.requests if r.code == RequestCode.REGISTER_BROKER]
        assert registers
        sent = registers[0]
        assert sent.ext_fields["compressed"] == "true"
        assert int(sent.ext_fields["bodyCrc32"]) == body_crc32(sent.body)
        body = RegisterBrokerBody.decode(sent.body, compressed=True)
        assert "TBW102" in body.topic_config_serialize_wrapper.topic_config_table
        assert await _routed(client, namesrv, "TBW102")
        nursery.cancel_scope.cancel()


async def test_force_register_false_asks_the_data_version_and_registers_only_a_change(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """BrokerController.registerBrokerAll (4.9.8) with ``forceRegister=false``: a periodic round sends
    QUERY_DATA_VERSION to each name server (BrokerOuterAPI.needRegister) and REGISTER_BROKER only when one answers
    ``changed``; the query keeps the broker alive past the name server's expiry, and a name server that lost the
    broker (as after its restart) gets the whole table again at the next round."""
    autojump_clock.autojump_threshold = 0.1  # a localhost answer is never overtaken by a virtual timeout
    async with trio.open_nursery() as nursery, RemotingClient() as client:
        # Rounds every 10 s, a broker expiring after 25 s silent: only the queries keep it past the fourth round.
        namesrv, recorder = await _start_namesrv(nursery, tmp_path, broker_channel_expired_time=25.0)
        props = {"forceRegister": "false", "registerNameServerPeriod": "10000"}
        controller = BrokerController(_broker_config(tmp_path, namesrv, props))
        await nursery.start(controller.serve)
        registration = controller.registration
        assert registration is not None
        assert recorder.codes == [RequestCode.REGISTER_BROKER]  # the start-up round always registers
        for _ in range(4):
            await registration.wait_next_round()
        assert set(recorder.codes[1:]) == {RequestCode.QUERY_DATA_VERSION}
        assert await _routed(client, namesrv, "TBW102")

        config = controller.context.config
        forget = {
            "brokerName": config.broker_name,
            "brokerAddr": controller.context.broker_addr,
            "clusterName": config.broker_cluster_name,
            "brokerId": str(config.broker_id),
        }
        answer = await client.invoke(namesrv, request(RequestCode.UNREGISTER_BROKER, forget), TIMEOUT)
        assert answer.code == ResponseCode.SUCCESS
        assert not await _routed(client, namesrv, "TBW102")
        del recorder.requests[:]
        await registration.wait_next_round()
        assert recorder.codes == [RequestCode.QUERY_DATA_VERSION, RequestCode.REGISTER_BROKER]
        assert await _routed(client, namesrv, "TBW102")
        nursery.cancel_scope.cancel()


async def test_update_and_create_topic_answers_once_the_name_servers_route_it(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """AdminBrokerProcessor.updateAndCreateTopic (4.9.8) calls registerIncrementBrokerData before it answers, and
    BrokerOuterAPI.registerBrokerAll waits for the name servers' answers: a route query right after the answer finds
    the topic, even from a name server slow to take the registration."""
    autojump_clock.autojump_threshold = 0.1  # a localhost answer is never overtaken by a virtual timeout
    async with trio.open_nursery() as nursery, RemotingClient() as client:
        namesrv, recorder, controller = await _start_pair(nursery, tmp_path, {})
        recorder.register_delay = 1.0
        answer = await client.invoke(controller.broker_addr, create_topic_request("RegisteredFirst"), TIMEOUT)
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        assert await _routed(client, namesrv, "RegisteredFirst")
        nursery.cancel_scope.cancel()


async def test_update_and_create_topic_answers_after_the_register_timeout_when_a_name_server_hangs(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A name server that never answers holds UPDATE_AND_CREATE_TOPIC's answer for the registration's
    ``registerBrokerTimeoutMills`` at most (BrokerOuterAPI.registerBrokerAll's latch, 4.9.8), then SUCCESS."""
    autojump_clock.autojump_threshold = 0.1
    async with trio.open_nursery() as nursery, RemotingClient() as client:
        namesrv, recorder = await _start_namesrv(nursery, tmp_path)
        props = {"registerBrokerTimeoutMills": "2000"}
        controller = BrokerController(_broker_config(tmp_path, namesrv, props))
        await nursery.start(controller.serve)
        recorder.register_delay = 3600.0
        start = trio.current_time()
        answer = await client.invoke(controller.broker_addr, create_topic_request("NameServerHangs"), 60.0)
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        assert trio.current_time() - start <= 2 * 2.0
        nursery.cancel_scope.cancel()


async def test_update_broker_permission_answers_once_the_routes_carry_it(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """AdminBrokerProcessor.updateBrokerConfig (4.9.8) moves the topic DataVersion on and calls
    registerBrokerAll(false, false, true) before it answers: right after ``brokerPermission=4`` is answered, the
    routes carry the read-only perm, even from a name server slow to take the registration."""
    autojump_clock.autojump_threshold = 0.1
    async with trio.open_nursery() as nursery, RemotingClient() as client:
        namesrv, recorder, controller = await _start_pair(nursery, tmp_path, {})
        recorder.register_delay = 1.0
        update = request(RequestCode.UPDATE_BROKER_CONFIG, body=b"brokerPermission=4\n")
        answer = await client.invoke(controller.broker_addr, update, TIMEOUT)
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        assert await _route_perms(client, namesrv, "TBW102") == [4]
        nursery.cancel_scope.cancel()


def _registered_topics(req: RemotingCommand) -> dict[str, int]:
    """Topic -> perm of a REGISTER_BROKER request's body."""
    body = RegisterBrokerBody.decode(req.body, compressed=req.ext_fields.get("compressed") == "true")
    return {name: tc.perm for name, tc in body.topic_config_serialize_wrapper.topic_config_table.items()}


async def test_update_and_create_topic_registers_only_that_topic(tmp_path: Path) -> None:
    """AdminBrokerProcessor.updateAndCreateTopic (4.9.8) calls registerIncrementBrokerData: one REGISTER_BROKER whose
    body holds only the new topic, with the table's DataVersion and, on a read-only broker, the broker's perm; the
    name server (RouteInfoManager.registerBroker) keeps routing the broker's other topics."""
    async with trio.open_nursery() as nursery, RemotingClient() as client:
        namesrv, recorder, controller = await _start_pair(nursery, tmp_path, {"brokerPermission": "4"})
        del recorder.requests[:]
        answer = await client.invoke(controller.broker_addr, create_topic_request("OnlyMe"), TIMEOUT)
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        registers = [r for r in recorder.requests if r.code == RequestCode.REGISTER_BROKER]
        assert [_registered_topics(r) for r in registers] == [{"OnlyMe": 4}]
        body = RegisterBrokerBody.decode(registers[0].body)
        assert body.topic_config_serialize_wrapper.data_version == controller.context.topics.data_version
        assert await _routed(client, namesrv, "OnlyMe")
        assert await _routed(client, namesrv, "TBW102")
        nursery.cancel_scope.cancel()


async def test_update_broker_config_requests_apply_one_at_a_time(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """AdminBrokerProcessor.updateBrokerConfig (4.9.8) is ``synchronized``: a second UPDATE_BROKER_CONFIG is not
    applied while the first still waits for the name servers to take its ``brokerPermission``, so the two apply and
    register in the order they came."""
    autojump_clock.autojump_threshold = 0.1
    async with trio.open_nursery() as nursery, RemotingClient() as client:
        namesrv, recorder, controller = await _start_pair(nursery, tmp_path, {})
        recorder.register_delay = 5.0
        answers: list[int] = []

        async def update(body: bytes) -> None:
            answer = await client.invoke(
                controller.broker_addr, request(RequestCode.UPDATE_BROKER_CONFIG, body=body), 60
            )
            answers.append(answer.code)

        nursery.start_soon(update, b"brokerPermission=4\n")
        await trio.sleep(1.0)  # the first waits for its registration
        nursery.start_soon(update, b"brokerPermission=6\n")
        await trio.sleep(1.0)
        assert controller.context.config.broker_permission == 4
        while len(answers) < 2:
            await trio.sleep(1.0)
        assert answers == [ResponseCode.SUCCESS, ResponseCode.SUCCESS]
        assert controller.context.config.broker_permission == 6
        assert await _route_perms(client, namesrv, "TBW102") == [7]  # read+write: its own
        nursery.cancel_scope.cancel()
