"""UPDATE_BROKER_CONFIG written back to ``broker.conf``: the text rewrite (comments, unknown keys, separators kept)
and the round trip through a served broker and a restart's config loading; the keys of ``configBlackList`` refused."""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from broker.broker_conf_file import persist_properties, rewrite_properties
from broker.cli import build_config
from broker.embedded import EmbeddedCluster
from remoting.client import RemotingClient
from remoting.codec.bodies import KVTable
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request
from remoting.codec.java_properties import parse_properties
from tests.broker.helpers import broker_from_conf, create_topic_request, put_record, update_once
from tests.processors.conftest import send_request
from tests.remoting.helpers import RawPeer, write_self_signed

SAMPLE = """# RocketMQ broker
brokerClusterName = DefaultCluster
brokerName=broker-a
! a bang comment
messageDelayLevel=1s 5s \\
   10s
customUnknownKey: keep me

deleteWhen=04
"""


def test_changed_keys_are_rewritten_in_place_and_everything_else_is_kept() -> None:
    out = rewrite_properties(
        SAMPLE, {"brokerClusterName": "Other", "messageDelayLevel": "1s 2s", "autoCreateTopicEnable": "false"}
    )
    assert out == (
        "# RocketMQ broker\n"
        "brokerClusterName = Other\n"
        "brokerName=broker-a\n"
        "! a bang comment\n"
        "messageDelayLevel=1s 2s\n"
        "customUnknownKey: keep me\n"
        "\n"
        "deleteWhen=04\n"
        "autoCreateTopicEnable=false\n"
    )


def test_a_file_without_a_final_newline_gets_one_before_appended_keys() -> None:
    assert rewrite_properties("a=1", {"b": "2"}) == "a=1\nb=2\n"
    assert rewrite_properties("", {"b": "2"}) == "b=2\n"
    assert rewrite_properties("a=1\r\nb=1\r\n", {"a": "3"}) == "a=3\r\nb=1\r\n"
    assert rewrite_properties("A=\nA=\n", {"A": "0"}) == "A=0\nA=0\n"
    assert rewrite_properties("flag \n", {"flag": "on"}) == "flag=on\n"


_KEY = st.from_regex(r"[a-zA-Z][a-zA-Z0-9.]{0,8}", fullmatch=True)
_VALUE = st.from_regex(r"[a-zA-Z0-9;/._-]([a-zA-Z0-9 ;:/._=-]{0,10}[a-zA-Z0-9;/._-])?", fullmatch=True) | st.just("")
_LINE = st.one_of(
    st.builds(lambda k, v: f"{k}={v}", _KEY, _VALUE),
    st.builds(lambda k, v: f"  {k} : {v}", _KEY, _VALUE),
    st.builds(lambda k: f"{k} ", _KEY),
    st.builds(lambda c: f"# {c}", _VALUE),
    st.just(""),
)


@given(st.lists(_LINE, max_size=12), st.dictionaries(_KEY, _VALUE, max_size=5))
def test_reading_the_rewritten_file_gives_the_old_settings_with_the_changes(
    lines: list[str], changes: dict[str, str]
) -> None:
    text = "\n".join(lines)
    assert parse_properties(rewrite_properties(text, changes)) == {**parse_properties(text), **changes}


async def test_updated_config_is_written_back_shown_and_kept_by_a_restart(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("# mine\nbrokerName=conf-b\nlistenPort=0\nlistenHost=127.0.0.1\nfancyKey=1\n")
    async with broker_from_conf(conf, tmp_path / "store") as (controller, addr), RemotingClient() as client:
        assert controller.context.config.broker_name == "conf-b"
        update = request(RequestCode.UPDATE_BROKER_CONFIG, body=b"autoCreateTopicEnable=false\nmaxMessageSize=1024\n")
        assert (await client.invoke(addr, update, 5)).code == ResponseCode.SUCCESS
        refused = request(RequestCode.UPDATE_BROKER_CONFIG, body=b"brokerConfigPath=/etc/passwd\n")
        answer = await client.invoke(addr, refused, 5)
        assert (answer.code, answer.remark) == (ResponseCode.NO_PERMISSION, "Can not update config in black list.")
        shown = bytes((await client.invoke(addr, request(RequestCode.GET_BROKER_CONFIG), 5)).body).decode()
        assert "autoCreateTopicEnable=false\n" in shown and "maxMessageSize=1024\n" in shown
    assert conf.read_text() == (
        "# mine\nbrokerName=conf-b\nlistenPort=0\nlistenHost=127.0.0.1\nfancyKey=1\n"
        "autoCreateTopicEnable=false\nmaxMessageSize=1024\n"
    )
    restarted = build_config(str(conf), [], "")
    assert (restarted.auto_create_topic_enable, restarted.max_message_size) == (False, 1024)


def test_persisting_into_a_missing_file_creates_it_and_leaves_no_temp_file(tmp_path: Path) -> None:
    persist_properties(tmp_path / "new.conf", {"a": "1"})
    assert (tmp_path / "new.conf").read_text() == "a=1\n"
    assert [p.name for p in tmp_path.iterdir()] == ["new.conf"]


async def test_an_update_after_the_conf_file_was_removed_writes_every_setting(tmp_path: Path) -> None:
    """4.9.8's Configuration.persist writes every property it holds (the four config objects' fields and the ``-c``
    file's keys) to the broker's config path with MixAll.string2File, whatever is there (common/src/main/java/org/
    apache/rocketmq/common/Configuration.java): a ``-c`` file removed while the broker runs comes back whole at the
    next update. Ours wrote only the updated keys, so the next start lost the broker's name and every other
    setting."""
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerName=conf-b\nlistenPort=0\nlistenHost=127.0.0.1\nfancyKey=1\n")
    async with broker_from_conf(conf, tmp_path / "store") as (_, addr), RemotingClient() as client:
        conf.unlink()
        update = request(RequestCode.UPDATE_BROKER_CONFIG, body=b"autoCreateTopicEnable=false\n")
        assert (await client.invoke(addr, update, 5)).code == ResponseCode.SUCCESS
    written = parse_properties(conf.read_text())
    assert (written["brokerName"], written["fancyKey"], written["storePathRootDir"]) == (
        "conf-b",
        "1",
        str(tmp_path / "store"),
    )
    restarted = build_config(str(conf), [], "")
    assert (restarted.broker_name, restarted.auto_create_topic_enable) == ("conf-b", False)


async def test_update_broker_config_refuses_the_keys_of_config_black_list_in_broker_conf(tmp_path: Path) -> None:
    """``configBlackList`` read from broker.conf (RocketMQ 4.9.8's BrokerConfig, default
    ``configBlackList;brokerConfigPath``) adds its ``;``-separated keys to the fixed ones
    (AdminBrokerProcessor.initConfigBlackList): an update naming one answers NO_PERMISSION and changes nothing, in the
    running broker or in the file."""
    conf = tmp_path / "broker.conf"
    conf.write_text("listenPort=0\nlistenHost=127.0.0.1\nconfigBlackList=autoCreateTopicEnable;brokerPermission\n")
    controller, answer = await update_once(conf, tmp_path / "store", b"autoCreateTopicEnable=false\n")
    assert (answer.code, answer.remark) == (ResponseCode.NO_PERMISSION, "Can not update config in black list.")
    assert controller.context.config.auto_create_topic_enable is True
    assert "autoCreateTopicEnable=false" not in conf.read_text()


async def test_the_thread_pool_settings_of_broker_conf_size_the_pools(tmp_path: Path) -> None:
    """BrokerController.java builds each business pool from BrokerConfig's ``*ThreadPoolNums`` and
    ``*QueueCapacity`` settings, and GET_BROKER_RUNTIME_INFO reports those capacities. Found by a review: the pools
    always had the default sizes, whatever broker.conf said (sendThreadPoolQueueCapacity, sendMessageThreadPoolNums...
    were read and ignored)."""
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "listenPort=0\nlistenHost=127.0.0.1\n"
        "sendMessageThreadPoolNums=2\nsendThreadPoolQueueCapacity=2345\n"
        "pullMessageThreadPoolNums=3\npullThreadPoolQueueCapacity=3456\n"
        "queryMessageThreadPoolNums=5\nqueryThreadPoolQueueCapacity=4567\n"
        "adminBrokerThreadPoolNums=6\nheartbeatThreadPoolNums=7\nheartbeatThreadPoolQueueCapacity=5678\n"
        "endTransactionThreadPoolNums=9\nendTransactionPoolQueueCapacity=6789\n"
    )
    async with broker_from_conf(conf, tmp_path / "store") as (controller, addr), RemotingClient() as client:
        pools = controller.pools
        sizes = {name: (pools[name].workers, pools[name].queue_capacity) for name in pools}
        assert sizes["send"] == (2, 2345)
        assert sizes["pull"] == (3, 3456)
        assert sizes["query"] == (5, 4567)
        assert sizes["admin"][0] == 6
        assert sizes["heartbeat"] == (7, 5678)
        assert sizes["end_transaction"] == (9, 6789)
        info = await client.invoke(addr, request(RequestCode.GET_BROKER_RUNTIME_INFO), 5)
        table = KVTable.decode(info.body).table
        assert table["sendThreadPoolQueueCapacity"] == "2345"
        assert table["pullThreadPoolQueueCapacity"] == "3456"
        assert table["queryThreadPoolQueueCapacity"] == "4567"
        assert table["EndTransactionThreadPoolQueueCapacity"] == "6789"


async def test_an_updated_listen_port_is_written_back_for_the_next_start(tmp_path: Path) -> None:
    """UPDATE_BROKER_CONFIG ``listenPort``: Configuration.update sets it on NettyServerConfig (the bound port does not
    move) and Configuration.persist writes it into the broker's config file, so the next start listens there. Found
    by a review: the admin processor dropped the key, so it never reached broker.conf."""
    conf = tmp_path / "broker.conf"
    conf.write_text("listenPort=0\nlistenHost=127.0.0.1\n")
    async with broker_from_conf(conf, tmp_path / "store") as (controller, addr), RemotingClient() as client:
        update = request(RequestCode.UPDATE_BROKER_CONFIG, body=b"listenPort=10999\n")
        assert (await client.invoke(addr, update, 5)).code == ResponseCode.SUCCESS
        assert controller.broker_addr == addr  # still registered and serving where it listens
        assert (await client.invoke(addr, request(RequestCode.GET_BROKER_CONFIG), 5)).code == ResponseCode.SUCCESS
    assert conf.read_text() == "listenPort=10999\nlistenHost=127.0.0.1\n"
    assert build_config(str(conf), [], "").listen_port == 10999


async def test_retention_settings_updated_at_run_time_rule_the_next_pass(embedded_cluster: EmbeddedCluster) -> None:
    """Configuration.update sets UPDATE_BROKER_CONFIG's properties on the live MessageStoreConfig, and
    CleanCommitLogService reads ``deleteWhen``, ``fileReservedTime`` and the disk ratios from it at every pass
    (store/.../DefaultMessageStore.java), so ``mqadmin updateBrokerConfig -k fileReservedTime`` frees the disk
    without a restart. Found by a review: GET_BROKER_CONFIG showed the new values while the store kept its start-up
    ones until the next start."""
    ctx = embedded_cluster.controller.context
    store = ctx.store
    for _ in range(12):
        put_record(embedded_cluster, "Old", 0, bytes(2 << 20))
    store.flush_all_blocking()
    assert len(store.commitlog.queue.files) >= 3
    every_hour = ";".join(f"{hour:02d}" for hour in range(24))
    body = f"deleteWhen={every_hour}\nfileReservedTime=0\n".encode()
    async with RemotingClient() as client:
        update = request(RequestCode.UPDATE_BROKER_CONFIG, body=body)
        assert (await client.invoke(embedded_cluster.broker_addr, update, 5)).code == ResponseCode.SUCCESS
    await store.retention.check_once()
    assert len(store.commitlog.queue.files) == 1


async def test_tls_settings_are_not_broker_settings_an_update_can_change(tmp_path: Path) -> None:
    """RocketMQ's ``tls.*`` are JVM system properties (remoting/.../netty/TlsSystemConfig.java), not fields of the
    BrokerConfig, NettyServerConfig, NettyClientConfig and MessageStoreConfig whose keys 4.9.8's
    Configuration.update sets and persists: UPDATE_BROKER_CONFIG answers SUCCESS and leaves them alone, so an update
    cannot turn TLS off (or its test mode on) in the broker.conf the next start reads; the other keys still apply.
    Found by a review: the name server's UPDATE_NAMESRV_CONFIG was fixed, the broker's wrote them into broker.conf."""
    conf = tmp_path / "broker.conf"
    cert, key = write_self_signed(tmp_path)  # test mode off: a start needs them, as in RocketMQ
    conf.write_text(
        "listenPort=0\nlistenHost=127.0.0.1\ntls.server.mode=permissive\ntls.test.mode.enable=false\n"
        f"tls.server.certPath={cert}\ntls.server.keyPath={key}\n"
    )
    async with broker_from_conf(conf, tmp_path / "store") as (controller, addr), RemotingClient() as client:
        body = b"tls.server.mode=disabled\ntls.test.mode.enable=true\nautoCreateTopicEnable=false\n"
        answer = await client.invoke(addr, request(RequestCode.UPDATE_BROKER_CONFIG, body=body), 5)
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        config = controller.context.config
        assert config.auto_create_topic_enable is False
        assert (config.tls_server_mode, config.tls_test_mode_enable) == ("permissive", False)
    restarted = build_config(str(conf), [], "")
    assert (restarted.tls_server_mode, restarted.tls_test_mode_enable) == ("permissive", False)
    assert restarted.auto_create_topic_enable is False


async def test_get_broker_config_shows_only_the_tls_keys_of_the_conf_file_and_a_rewrite_keeps_them(
    tmp_path: Path,
) -> None:
    """4.9.8's BrokerController builds its Configuration from BrokerConfig, NettyServerConfig, NettyClientConfig and
    MessageStoreConfig, and BrokerStartup registers the ``-c`` file's properties; ``tls.*`` are JVM system properties
    (remoting/src/main/java/org/apache/rocketmq/remoting/netty/TlsSystemConfig.java), in none of them. So
    GET_BROKER_CONFIG shows only the ``tls.*`` keys broker.conf held, with their text, and a rewrite of a removed file
    keeps them (a key password too, never shown). Ours showed every ``tls.*`` setting and the rewrite dropped them."""
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "listenPort=0\nlistenHost=127.0.0.1\ntls.server.need.client.auth=optional\ntls.server.keyPassword=s3cret\n"
    )
    async with broker_from_conf(conf, tmp_path / "store") as (_, addr), RemotingClient() as client:
        answer = await client.invoke(addr, request(RequestCode.GET_BROKER_CONFIG), 5)
        shown = parse_properties(bytes(answer.body).decode())
        conf.unlink()
        update = request(RequestCode.UPDATE_BROKER_CONFIG, body=b"autoCreateTopicEnable=false\n")
        assert (await client.invoke(addr, update, 5)).code == ResponseCode.SUCCESS
    written = parse_properties(conf.read_text())
    assert {key: text for key, text in shown.items() if key.startswith("tls.")} == {
        "tls.server.need.client.auth": "optional"
    }
    assert {key: text for key, text in written.items() if key.startswith("tls.")} == {
        "tls.server.need.client.auth": "optional",
        "tls.server.keyPassword": "s3cret",
    }


async def test_warm_maped_file_enable_updated_at_run_time_warms_the_next_segment(
    embedded_cluster: EmbeddedCluster,
) -> None:
    """AllocateMappedFileService and CommitLog read ``isWarmMapedFileEnable()`` from the live MessageStoreConfig at
    every new segment (store/.../AllocateMappedFileService.java, CommitLog.java), which Configuration.update sets,
    so ``mqadmin updateBrokerConfig -k warmMapedFileEnable -v true`` warms the next segments without a restart.
    Found by a review: GET_BROKER_CONFIG showed true while the store kept the start-up value."""
    store = embedded_cluster.controller.context.store
    assert not store.config.warm_mapped_file_enable
    async with RemotingClient() as client:
        update = request(RequestCode.UPDATE_BROKER_CONFIG, body=b"warmMapedFileEnable=true\n")
        assert (await client.invoke(embedded_cluster.broker_addr, update, 5)).code == ResponseCode.SUCCESS
    assert embedded_cluster.controller.context.config.warm_mapped_file_enable
    assert store.config.warm_mapped_file_enable


async def test_an_updated_max_message_size_rules_the_next_send(embedded_cluster: EmbeddedCluster) -> None:
    """4.9.8's CommitLog.updateMaxMessageSize reads ``maxMessageSize`` from the live MessageStoreConfig before every
    put (store/src/main/java/org/apache/rocketmq/store/CommitLog.java), the object Configuration.update sets, so
    ``mqadmin updateBrokerConfig -k maxMessageSize`` changes which sends are refused without a restart. The store
    kept its start-up limit while GET_BROKER_CONFIG showed the new one."""
    body = bytes(2048)
    async with RemotingClient() as client:
        create = create_topic_request("SizeTopic", queues=1)
        assert (await client.invoke(embedded_cluster.broker_addr, create, 5)).code == ResponseCode.SUCCESS
        sent = await client.invoke(embedded_cluster.broker_addr, send_request("SizeTopic", body), 5)
        assert sent.code == ResponseCode.SUCCESS, sent.remark
        update = request(RequestCode.UPDATE_BROKER_CONFIG, body=b"maxMessageSize=1024\n")
        assert (await client.invoke(embedded_cluster.broker_addr, update, 5)).code == ResponseCode.SUCCESS
        refused = await client.invoke(embedded_cluster.broker_addr, send_request("SizeTopic", body), 5)
        assert refused.code == ResponseCode.MESSAGE_ILLEGAL, refused.remark
        assert "1024" in (refused.remark or "")
        update = request(RequestCode.UPDATE_BROKER_CONFIG, body=b"maxMessageSize=4096\n")
        assert (await client.invoke(embedded_cluster.broker_addr, update, 5)).code == ResponseCode.SUCCESS
        again = await client.invoke(embedded_cluster.broker_addr, send_request("SizeTopic", body), 5)
        assert again.code == ResponseCode.SUCCESS, again.remark


async def test_an_updated_max_message_size_below_10_is_not_taken(embedded_cluster: EmbeddedCluster) -> None:
    """CommitLog.updateMaxMessageSize (4.9.8) takes a new limit only from 10 bytes up: ``maxMessageSize=0`` (a typo, a
    slip of the dashboard) leaves the limit the store had, where ours refused every send after it."""
    async with RemotingClient() as client:
        create = create_topic_request("TinyLimit", queues=1)
        assert (await client.invoke(embedded_cluster.broker_addr, create, 5)).code == ResponseCode.SUCCESS
        for text in (b"maxMessageSize=0\n", b"maxMessageSize=9\n", b"maxMessageSize=-1\n"):
            update = request(RequestCode.UPDATE_BROKER_CONFIG, body=text)
            assert (await client.invoke(embedded_cluster.broker_addr, update, 5)).code == ResponseCode.SUCCESS
            sent = await client.invoke(embedded_cluster.broker_addr, send_request("TinyLimit", bytes(20)), 5)
            assert sent.code == ResponseCode.SUCCESS, (text, sent.remark)


async def test_an_updated_max_idle_time_applies_to_connections_opened_after_it(
    embedded_cluster: EmbeddedCluster, mock_clock: trio.testing.MockClock
) -> None:
    """NettyRemotingServer gives each new channel an ``IdleStateHandler`` built from NettyServerConfig's
    ``serverChannelMaxIdleTimeSeconds`` at that moment (remoting/src/main/java/org/apache/rocketmq/remoting/netty/
    NettyRemotingServer.java ``initChannel``, 4.9.8), a field the broker's Configuration.update sets: a connection
    opened after UPDATE_BROKER_CONFIG is closed after the new idle time. The broker kept the start's 120 s."""
    server = embedded_cluster.controller.remoting_server
    host, port = embedded_cluster.broker_addr.rsplit(":", 1)
    async with RemotingClient() as client:
        update = request(RequestCode.UPDATE_BROKER_CONFIG, body=b"serverChannelMaxIdleTimeSeconds=5\n")
        assert (await client.invoke(embedded_cluster.broker_addr, update, 5)).code == ResponseCode.SUCCESS
        before = len(server.connections)
        peer = await RawPeer.connect((host, int(port)))
        await peer.send(request(RequestCode.GET_BROKER_CONFIG))
        assert await peer.receive() is not None
        assert len(server.connections) == before + 1
        mock_clock.jump(6)
        await trio.testing.wait_all_tasks_blocked()
        assert len(server.connections) == before, "the idle connection was not closed after 5 s"
        await peer.aclose()


async def test_updated_client_settings_apply_to_the_brokers_own_connections(
    embedded_cluster: EmbeddedCluster, mock_clock: trio.testing.MockClock
) -> None:
    """The broker's NettyClientConfig is one of the objects its Configuration.update sets, and BrokerOuterAPI's
    NettyRemotingClient reads it as it goes (remoting/src/main/java/org/apache/rocketmq/remoting/netty/
    NettyRemotingClient.java, 4.9.8): ``clientChannelMaxIdleTimeSeconds`` when a channel is opened (``initChannel``),
    ``clientCloseSocketIfTimeout`` at every timed-out ``invokeSync``. The broker kept the start's values."""
    controller, namesrv = embedded_cluster.controller, embedded_cluster.namesrv_addr
    assert controller.registration is not None
    outer = controller.registration.client  # BrokerOuterAPI's client
    before = outer.connections[namesrv]
    async with RemotingClient() as client:
        body = b"clientChannelMaxIdleTimeSeconds=5\nclientCloseSocketIfTimeout=false\n"
        update = request(RequestCode.UPDATE_BROKER_CONFIG, body=body)
        assert (await client.invoke(embedded_cluster.broker_addr, update, 5)).code == ResponseCode.SUCCESS
    assert before.close_on_timeout is False
    outer.close_connection(namesrv)
    await controller.context.register_now()
    assert outer.connections[namesrv].close_on_timeout is False
    mock_clock.jump(6)
    await trio.testing.wait_all_tasks_blocked()
    assert namesrv not in outer.connections, "the idle connection was not closed after 5 s"
