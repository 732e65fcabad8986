"""A broker's registration as RocketMQ 4.9.8's BrokerController.registerBrokerAll/doRegisterBrokerAll: a broker that
is not read+write registers its topics with its own perm (at once after UPDATE_BROKER_CONFIG), and the register answer's
ORDER_TOPIC_CONFIG table sets the topics' ``order`` flags. Found by a review; failed before (real sockets)."""

from __future__ import annotations

from pathlib import Path

import attrs
import trio
import trio.testing

from broker.broker_config import BrokerConfig
from broker.context import build_context
from broker.controller import BrokerController
from broker.topic_config_manager import TopicConfigManager
from namesrv.config import NamesrvConfig
from namesrv.server import NamesrvServer
from remoting.client import RemotingClient
from remoting.codec.bodies import TopicRouteData
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request
from store.metadata_files import TopicConfig
from tests.conftest import SMALL_STORE

TIMEOUT = 5.0
NS = {"namespace": "ORDER_TOPIC_CONFIG"}


async def _start_namesrv(nursery: trio.Nursery, tmp_path: Path) -> str:
    config = NamesrvConfig(listen_port=0, listen_host="127.0.0.1", kv_config_path=str(tmp_path / "ns.json"))
    host, port = await nursery.start(NamesrvServer(config).serve)
    return f"{host}:{port}"


def _broker_config(tmp_path: Path, namesrv: str, **overrides: object) -> BrokerConfig:
    return BrokerConfig(
        broker_name="rev-b",
        listen_port=0,
        listen_host="127.0.0.1",
        namesrv_addr=namesrv,
        store_path_root_dir=str(tmp_path / "store"),
        **SMALL_STORE,  # type: ignore[arg-type]
        **overrides,  # type: ignore[arg-type]
    )


async def _route(client: RemotingClient, namesrv: str, topic: str) -> TopicRouteData:
    answer = await client.invoke(namesrv, request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}), TIMEOUT)
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    return TopicRouteData.decode(answer.body)


async def test_read_only_broker_registers_its_topics_read_only(tmp_path: Path) -> None:
    """BrokerController.registerBrokerAll (4.9.8) replaces every topic's perm by brokerPermission when the broker is
    not both readable and writable, so producers stop routing to a broker set read-only (brokerPermission=4)."""
    async with trio.open_nursery() as nursery, RemotingClient() as client:
        namesrv = await _start_namesrv(nursery, tmp_path)
        controller = BrokerController(_broker_config(tmp_path, namesrv, broker_permission=4))
        await nursery.start(controller.serve)
        route = await _route(client, namesrv, "TBW102")
        assert [qd.perm for qd in route.queue_datas] == [4]
        nursery.cancel_scope.cancel()


async def test_update_broker_permission_reregisters_read_only_at_once(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """AdminBrokerProcessor.updateBrokerConfig (4.9.8): a changed brokerPermission bumps the topic DataVersion and
    calls registerBrokerAll at once; the route then carries the broker's permission."""
    # Jump only after 0.1 s of real idleness, so a localhost answer is never overtaken by a virtual timeout.
    autojump_clock.autojump_threshold = 0.1
    async with trio.open_nursery() as nursery, RemotingClient() as client:
        namesrv = await _start_namesrv(nursery, tmp_path)
        controller = BrokerController(_broker_config(tmp_path, namesrv))
        await nursery.start(controller.serve)
        assert [qd.perm for qd in (await _route(client, namesrv, "TBW102")).queue_datas] == [7]
        update = request(RequestCode.UPDATE_BROKER_CONFIG, body=b"brokerPermission=4\n")
        answer = await client.invoke(controller.broker_addr, update, TIMEOUT)
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        with trio.move_on_after(5):  # virtual time: the periodic round is 10-30 s away
            while [qd.perm for qd in (await _route(client, namesrv, "TBW102")).queue_datas] != [4]:
                await trio.sleep(0.1)
        assert [qd.perm for qd in (await _route(client, namesrv, "TBW102")).queue_datas] == [4]
        nursery.cancel_scope.cancel()


async def test_broker_applies_the_order_topic_config_from_the_register_answer(tmp_path: Path) -> None:
    """BrokerController.doRegisterBrokerAll (4.9.8) hands the REGISTER_BROKER answer's KVTable to
    TopicConfigManager.updateOrderTopicConfig: topics named in ORDER_TOPIC_CONFIG become order=true."""
    async with trio.open_nursery() as nursery, RemotingClient() as client:
        namesrv = await _start_namesrv(nursery, tmp_path)
        fields = {**NS, "key": "TBW102", "value": "rev-b:8"}
        assert (await client.invoke(namesrv, request(RequestCode.PUT_KV_CONFIG, fields), TIMEOUT)).code == 0
        controller = BrokerController(_broker_config(tmp_path, namesrv))
        await nursery.start(controller.serve)
        registration = controller.registration
        assert registration is not None
        registration.trigger()
        await registration.wait_next_round()
        config = controller.context.topics.get("TBW102")
        assert config is not None and config.order is True
        nursery.cancel_scope.cancel()


def test_order_topic_config_clears_the_flag_of_unlisted_topics(tmp_path: Path) -> None:
    """TopicConfigManager.updateOrderTopicConfig: an order topic the table no longer lists stops being one (an
    emptied namespace clears them all); a change moves the DataVersion on without re-registering."""
    manager = TopicConfigManager(BrokerConfig(), tmp_path / "config")
    manager.load()
    manager.update_topic(TopicConfig("A", 4, 4, order=True))
    manager.update_topic(TopicConfig("B", 4, 4))
    calls: list[None] = []
    manager.on_changed = lambda: calls.append(None)
    before = manager.data_version.counter
    assert manager.update_order_topic_config({"B", "Unknown"})
    assert [manager.get(t).order for t in ("A", "B")] == [False, True]  # type: ignore[union-attr]
    assert manager.update_order_topic_config(set())
    assert [manager.get(t).order for t in ("A", "B")] == [False, False]  # type: ignore[union-attr]
    assert not manager.update_order_topic_config(set())
    assert (manager.data_version.counter, calls) == (before + 2, [])


async def test_a_broker_permission_update_is_in_the_conf_file_before_its_registration_waits(tmp_path: Path) -> None:
    """AdminBrokerProcessor.updateBrokerConfig (4.9.8) writes the file (Configuration.update) before
    registerBrokerAll waits for the name servers: a broker stopped while they do not answer keeps the new perm."""
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerName=b\n")
    ctx = build_context(attrs.evolve(BrokerConfig(store_path_root_dir=str(tmp_path / "store")), **SMALL_STORE))
    ctx.config_path = conf
    registering = trio.Event()

    async def name_servers_silent() -> None:
        registering.set()
        await trio.sleep_forever()

    ctx.register_hook = name_servers_silent
    async with trio.open_nursery() as nursery:
        nursery.start_soon(ctx.update_config, {"brokerPermission": "4"})
        await registering.wait()
        nursery.cancel_scope.cancel()  # the broker stops before the name servers answered
    assert "brokerPermission=4" in conf.read_text()
