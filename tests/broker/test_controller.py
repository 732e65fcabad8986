"""BrokerController and registration: every name server gets the broker's real port, periodic and triggered rounds
(virtual time), unregistration at shutdown, a clean restart that keeps topics and offsets, and a failed start that lets
go of the store."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import trio
import trio.testing

from broker.broker_config import BrokerConfig, load_broker_config
from broker.controller import BrokerController
from broker.embedded import EmbeddedCluster
from broker.ports import BROKER, free_ports
from broker.registration import registration_period
from namesrv.config import NamesrvConfig
from namesrv.server import NamesrvServer
from remoting.client import RemotingClient
from remoting.codec.bodies import ClusterInfo, TopicRouteData
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request
from remoting.errors import sole_exception
from store.errors import StoreCorruptError
from store.metadata_files import TopicConfig
from tests.broker.helpers import create_topic_request, wait_for_route
from tests.client.test_instance_plumbing import FreezableProxy
from tests.conftest import SMALL_STORE


async def start_namesrvs(nursery: trio.Nursery, tmp_path: Path, count: int) -> list[str]:
    addrs = []
    for i in range(count):
        config = NamesrvConfig(listen_port=0, listen_host="127.0.0.1", kv_config_path=str(tmp_path / f"ns{i}.json"))
        host, port = await nursery.start(NamesrvServer(config).serve)
        addrs.append(f"{host}:{port}")
    return addrs


def broker_config(tmp_path: Path, namesrvs: list[str]) -> BrokerConfig:
    return BrokerConfig(
        broker_name="ctl-b",
        listen_port=0,
        listen_host="127.0.0.1",
        namesrv_addr=";".join(namesrvs),
        store_path_root_dir=str(tmp_path / "store"),
        **SMALL_STORE,  # type: ignore[arg-type]
    )


async def route(client: RemotingClient, namesrv: str, topic: str) -> TopicRouteData | None:
    answer = await client.invoke(namesrv, request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}), 5)
    return TopicRouteData.decode(answer.body) if answer.code == ResponseCode.SUCCESS else None


def test_registration_period_is_clamped_like_java() -> None:
    assert registration_period(30_000) == 30.0
    assert registration_period(1_000) == 10.0
    assert registration_period(600_000) == 60.0


async def test_the_broker_registers_its_real_port_with_every_name_server(tmp_path: Path) -> None:
    async with trio.open_nursery() as nursery, RemotingClient() as client:
        namesrvs = await start_namesrvs(nursery, tmp_path, 2)
        controller = BrokerController(broker_config(tmp_path, namesrvs))
        host, port = await nursery.start(controller.serve)
        assert port != 0 and controller.broker_addr == f"{host}:{port}" == f"127.0.0.1:{port}"
        for ns in namesrvs:
            found = await route(client, ns, "TBW102")
            assert found is not None and found.broker_datas[0].broker_addrs == {0: controller.broker_addr}
        # The store host written into msgIds is the broker's reachable address.
        assert controller.context.store_host == bytes([127, 0, 0, 1]) + port.to_bytes(4, "big")
        # The pop service is built with the broker (its revive loop running), but arrivals reach it only once a
        # receive waits: until then an append pays nothing for pops.
        assert controller.pop_service()[1].running
        assert controller.context.store.arrival_listener == controller.hold.notify_message_arriving
        nursery.cancel_scope.cancel()


async def test_shutdown_unregisters_from_every_name_server(tmp_path: Path) -> None:
    async with trio.open_nursery() as nursery, RemotingClient() as client:
        namesrvs = await start_namesrvs(nursery, tmp_path, 2)
        controller = BrokerController(broker_config(tmp_path, namesrvs))
        done = trio.Event()

        async def run_broker(task_status: trio.TaskStatus[tuple[str, int]]) -> None:
            with trio.CancelScope() as scope:
                scopes.append(scope)
                await controller.serve(task_status=task_status)
            done.set()

        scopes: list[trio.CancelScope] = []
        await nursery.start(run_broker)
        scopes[0].cancel()
        await done.wait()
        for ns in namesrvs:
            assert await route(client, ns, "TBW102") is None
        nursery.cancel_scope.cancel()


async def test_registration_repeats_periodically_and_at_once_on_topic_changes(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with trio.open_nursery() as nursery:
        namesrvs = await start_namesrvs(nursery, tmp_path, 1)
        controller = BrokerController(broker_config(tmp_path, namesrvs))
        await nursery.start(controller.serve)
        registration = controller.registration
        assert registration is not None and registration.rounds == 1
        assert registration.last_results == {namesrvs[0]: ResponseCode.SUCCESS}
        await trio.sleep(10.5)
        assert registration.rounds == 2
        await trio.sleep(30)
        assert registration.rounds == 3
        controller.context.topics.update_topic(TopicConfig("Triggered", 2, 2))
        await registration.wait_next_round()
        assert registration.rounds == 4
        nursery.cancel_scope.cancel()


async def test_a_restarted_broker_keeps_its_port_topics_and_offsets(embedded_cluster: EmbeddedCluster) -> None:
    async with RemotingClient() as client:
        addr = embedded_cluster.broker_addr
        answer = await client.invoke(addr, create_topic_request("Durable", queues=2), 5)
        assert answer.code == ResponseCode.SUCCESS
        embedded_cluster.controller.context.offsets.commit("g", "Durable", 1, 7)
        await embedded_cluster.restart_broker()
        assert embedded_cluster.broker_addr == addr
        ctx = embedded_cluster.controller.context
        durable = ctx.topics.get("Durable")
        assert durable is not None and durable.read_queue_nums == 2
        assert ctx.offsets.query("g", "Durable", 1) == 7
        await wait_for_route(client, embedded_cluster, "Durable")
        info = await client.invoke(addr, request(RequestCode.GET_BROKER_RUNTIME_INFO), 5)
        assert info.code == ResponseCode.SUCCESS


async def test_the_fast_channel_serves_everything_but_pull_and_pop(embedded_cluster: EmbeddedCluster) -> None:
    controller = embedded_cluster.controller
    port = int(embedded_cluster.broker_addr.rsplit(":", 1)[1])
    assert controller.fast_address is not None and controller.fast_address[1] == port - 2  # Java's fast port
    async with RemotingClient() as client:
        fast = f"127.0.0.1:{port - 2}"
        pull = await client.invoke(fast, request(RequestCode.PULL_MESSAGE, {"topic": "T"}), 5)
        assert (pull.code, pull.remark) == (ResponseCode.REQUEST_CODE_NOT_SUPPORTED, " request type 11 not supported")
        for code in (
            RequestCode.POP_MESSAGE,
            RequestCode.PEEK_MESSAGE,
            RequestCode.NOTIFICATION,
            RequestCode.POLLING_INFO,
        ):
            refused = await client.invoke(fast, request(code, {"topic": "T"}), 5)  # 5.3.3: the main port's only
            assert (refused.code, refused.remark) == (
                ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                f" request type {int(code)} not supported",
            )
        ack = await client.invoke(fast, request(RequestCode.ACK_MESSAGE, {"topic": "T"}), 5)
        assert ack.code == ResponseCode.SYSTEM_ERROR, "served on the fast port too: its header is incomplete"
        info = await client.invoke(fast, request(RequestCode.GET_BROKER_RUNTIME_INFO), 5)
        assert info.code == ResponseCode.SUCCESS


async def test_a_broker_whose_fast_port_is_taken_does_not_start(tmp_path: Path) -> None:
    """Another process holds ``listenPort - 2``. 4.9.8's BrokerController.start starts the fast remoting server
    beside the main one and a bind failure stops the broker (BrokerStartup exits). Ours started without it, with a
    warning, so a client with the VIP channel on (the dashboard's default) sent its admin calls to whatever held the
    port. It refuses to start now, naming the port and the setting that opts out; with ``fastChannelEnable=false`` it
    starts."""
    (port,) = free_ports(1, **BROKER)
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", port - 2))
        holder.listen()
        with pytest.raises(BaseException) as failed:
            async with EmbeddedCluster(tmp_path / "a", broker_port=port, **SMALL_STORE):
                pass
        refused = sole_exception(failed.value)
        assert isinstance(refused, OSError) and f"port {port - 2}" in str(refused), refused
        assert "fastChannelEnable=false" in str(refused)
        async with EmbeddedCluster(tmp_path / "b", broker_port=port, fast_channel_enable=False, **SMALL_STORE) as c:
            assert c.controller.fast_address is None


async def test_a_broker_whose_store_failed_to_load_does_not_keep_it_locked(tmp_path: Path) -> None:
    """A start that fails in MessageStore.load (here: CommitLog segments of another size than configured) lets go
    of the store: Java's BrokerController.initialize fails before the store is locked (DefaultMessageStore.start takes
    the lock) and BrokerStartup then calls controller.shutdown(). Found by a review: the failed controller kept the
    lock, so a later start in this process said the store was in use by another process."""
    data = tmp_path / "cluster"
    async with EmbeddedCluster(data, **SMALL_STORE):
        pass
    wrong = {**SMALL_STORE, "mapped_file_size_commit_log": 2 * SMALL_STORE["mapped_file_size_commit_log"]}
    with pytest.raises(BaseException) as failed:
        async with EmbeddedCluster(data, **wrong):
            pass
    assert isinstance(sole_exception(failed.value), StoreCorruptError), failed.value
    async with EmbeddedCluster(data, **SMALL_STORE) as cluster:
        assert cluster.controller.address is not None


async def test_a_registration_that_timed_out_reconnects_at_the_next_round(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """The broker's connection to its name server goes half-open (a NAT entry dropped, the host lost without a
    reset): the round on it times out, and the connection is closed then, as the broker's BrokerOuterAPI client
    (NettyRemotingClient.invokeSync, ``clientCloseSocketIfTimeout`` true by default) closes it, so the next round
    connects again and registers. Before: every round went to the dead connection and timed out, and the name server
    dropped the broker from every route once its 120 s passed."""
    async with trio.open_nursery() as nursery:
        [namesrv] = await start_namesrvs(nursery, tmp_path, 1)
        proxy = FreezableProxy(namesrv)
        via = await proxy.start(nursery)
        controller = BrokerController(broker_config(tmp_path, [via]))
        await nursery.start(controller.serve)
        registration = controller.registration
        assert registration is not None and registration.last_results == {via: ResponseCode.SUCCESS}
        proxy.freeze()
        await registration.wait_next_round()
        assert registration.last_results[via] != ResponseCode.SUCCESS  # timed out
        await registration.wait_next_round()
        assert registration.last_results == {via: ResponseCode.SUCCESS}
        assert proxy.accepted == 2
        nursery.cancel_scope.cancel()


async def test_a_broker_whose_conf_names_no_broker_registers_under_the_host_name(tmp_path: Path) -> None:
    """Two brokers started without ``brokerName`` on different hosts must not collide in the name server: RocketMQ
    4.9.8's default is the host's name (common/.../BrokerConfig.java ``localHostName()``), in DefaultCluster."""
    async with trio.open_nursery() as nursery, RemotingClient() as client:
        [namesrv] = await start_namesrvs(nursery, tmp_path, 1)
        conf = tmp_path / "broker.conf"
        conf.write_text(
            f"namesrvAddr={namesrv}\nlistenHost=127.0.0.1\nlistenPort=0\nstorePathRootDir={tmp_path / 'store'}\n"
            f"mappedFileSizeCommitLog={8 << 20}\n"
        )
        config, unknown = load_broker_config(conf)
        assert unknown == []
        controller = BrokerController(config)
        await nursery.start(controller.serve)
        answer = await client.invoke(namesrv, request(RequestCode.GET_BROKER_CLUSTER_INFO), 5)
        info = ClusterInfo.decode(answer.body)
        host = socket.gethostname()
        assert info.cluster_addr_table == {"DefaultCluster": [host]}
        assert info.broker_addr_table[host].broker_addrs == {0: controller.broker_addr}
        nursery.cancel_scope.cancel()
