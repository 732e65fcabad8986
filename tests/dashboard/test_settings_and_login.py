"""Settings (properties file, environment, ACL credentials), the login and its users file, the replication column
and the trace seam, each through the code a user's request goes through."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import attrs
import httpx
import itsdangerous
import pytest
import trio

from broker.embedded import EmbeddedCluster
from broker.ports import BROKER, free_ports
from client.admin import Admin
from client.config import ClientConfig
from client.vip import VIP_CHANNEL_ENV
from dashboard.auth import Sessions
from dashboard.cluster import replication_state
from dashboard.settings import SettingsError, client_config, load_settings
from dashboard.trace import default_finder
from tests.dashboard.conftest import Dash, open_dash


def test_settings_from_a_properties_file_then_the_environment_then_options(tmp_path: Path) -> None:
    file = tmp_path / "dashboard.properties"
    file.write_text("rocketmq.config.namesrvAddr=10.0.0.1:9876\nserver.port=9090\nrocketmq.config.loginRequired=true\n")
    settings = load_settings(file, {})
    assert (settings.namesrv_addr, settings.port, settings.login_required) == ("10.0.0.1:9876", 9090, True)
    assert load_settings(file, {"NAMESRV_ADDR": "a:1;b:2"}).namesrv_addr == "a:1;b:2"
    assert load_settings(file, {"NAMESRV_ADDR": "a:1"}, namesrv_addr="c:3", port=None).namesrv_addr == "c:3"
    assert client_config(load_settings(None, {"NAMESRV_ADDR": "a:1;b:2"})).namesrv_addr == ("a:1", "b:2")
    file.write_text("rocketmq.config.nameSrv=x\n")
    with pytest.raises(SettingsError, match=r"unknown property .rocketmq\.config\.nameSrv."):
        load_settings(file, {})
    file.write_text("server.port=eighty\n")
    with pytest.raises(SettingsError):
        load_settings(file, {})
    for bad in ("sampleSeconds=0", "sampleConcurrency=0"):  # a 0 interval busy-looped
        file.write_text(f"rocketmq.config.{bad}\n")
        with pytest.raises(SettingsError):
            load_settings(file, {})


#: rocketmq-dashboard's shipped ``src/main/resources/application.properties`` (comments left out), a name server
#: added to its ``namesrvAddrs`` list and a timeout set.
ROCKETMQ_DASHBOARD_PROPERTIES = """\
server.address=0.0.0.0
server.port=8080
spring.application.name=rocketmq-dashboard
spring.http.encoding.charset=UTF-8
spring.http.encoding.enabled=true
spring.http.encoding.force=true
logging.level.root=INFO
logging.config=classpath:logback.xml
rocketmq.config.namesrvAddrs=10.1.2.3:9876,10.1.2.4:9876
rocketmq.config.isVIPChannel=
rocketmq.config.timeoutMillis=5000
rocketmq.config.dataPath=/tmp/rocketmq-console/data
rocketmq.config.enableDashBoardCollect=true
rocketmq.config.msgTrackTopicName=
rocketmq.config.ticketKey=ticket
rocketmq.config.loginRequired=false
rocketmq.config.useTLS=false
"""


def test_rocketmq_dashboards_own_settings_file_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``mqdashboard -c`` takes the ``application.properties`` rocketmq-dashboard ships: Spring's keys and its
    settings without a use here are ignored, empty values leave the defaults, ``namesrvAddrs`` gives the first name
    server and ``timeoutMillis`` the timeout (the file was refused at its first Spring key). A typo under
    ``rocketmq.config.`` is still refused."""
    monkeypatch.delenv("NAMESRV_ADDR", raising=False)
    file = tmp_path / "application.properties"
    file.write_text(ROCKETMQ_DASHBOARD_PROPERTIES)
    settings = load_settings(file, {})
    assert (settings.namesrv_addr, settings.host, settings.port) == ("10.1.2.3:9876", "0.0.0.0", 8080)
    assert settings.namesrv_addrs == ("10.1.2.3:9876", "10.1.2.4:9876")  # the Ops page's list
    assert (settings.rpc_timeout, settings.msg_track_topic_name) == (5.0, None)
    file.write_text("rocketmq.config.nameSrvAddr=10.1.2.3:9876\n")
    with pytest.raises(SettingsError, match="nameSrvAddr"):
        load_settings(file, {})


def test_the_first_of_namesrv_addrs_wins_over_namesrv_addr_as_spring_binds_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Spring Boot's ``JavaBeanBinder`` binds RMQConfigure's properties in the order of its sorted getters:
    ``namesrvAddr``, then ``namesrvAddrs``, whose setter (``RMQConfigure.setNamesrvAddrs``) makes the list's first
    the one in use, whatever the file's order. Ours let ``namesrvAddr`` win (found by a review)."""
    monkeypatch.delenv("NAMESRV_ADDR", raising=False)
    file = tmp_path / "application.properties"
    for text in (
        "rocketmq.config.namesrvAddr=10.9.9.9:9876\nrocketmq.config.namesrvAddrs=10.1.2.3:9876,10.1.2.4:9876\n",
        "rocketmq.config.namesrvAddrs=10.1.2.3:9876,10.1.2.4:9876\nrocketmq.config.namesrvAddr=10.9.9.9:9876\n",
    ):
        file.write_text(text)
        assert load_settings(file, {}).namesrv_addr == "10.1.2.3:9876"


def test_the_removed_history_seconds_setting_is_ignored_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``rocketmq.config.historySeconds`` (ours: how long the charts kept samples in memory) went when a day's
    samples moved to rocketmq-dashboard's day files; a settings file that still has it starts, with a warning,
    rather than be refused as an unknown property."""
    file = tmp_path / "application.properties"
    file.write_text("rocketmq.config.historySeconds=3600\nserver.port=9090\n")
    with caplog.at_level("WARNING", logger="dashboard.settings"):
        assert load_settings(file, {}).port == 9090
    assert "rocketmq.config.historySeconds" in caplog.text


def test_the_timeout_defaults_to_rocketmq_dashboards_five_seconds(tmp_path: Path) -> None:
    """rocketmq-dashboard's ``MQAdminFactory`` builds its ``DefaultMQAdminExt`` without a timeout when
    ``rocketmq.config.timeoutMillis`` is unset (its shipped file leaves it empty), so every admin call waits 5000 ms;
    ours waited 3 s, failing a page on a broker that rocketmq-dashboard still shows."""
    file = tmp_path / "application.properties"
    file.write_text("rocketmq.config.timeoutMillis=\n")
    for settings in (load_settings(None, {}), load_settings(file, {})):
        assert (settings.rpc_timeout, client_config(settings).rpc_timeout) == (5.0, 5.0)


def test_the_vip_channel_is_on_unless_turned_off_as_rocketmq_dashboards(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """rocketmq-dashboard's RMQConfigure ``isVIPChannel``: the property ``com.rocketmq.sendMessageWithVIPChannel``,
    else ``true``; an empty ``rocketmq.config.isVIPChannel`` keeps it (its setter ignores a blank value). It reaches
    the admin client (found by a review: the setting was ignored and the VIP channel never used)."""
    monkeypatch.delenv(VIP_CHANNEL_ENV, raising=False)
    file = tmp_path / "application.properties"
    file.write_text("rocketmq.config.isVIPChannel=\n")
    for settings in (load_settings(None, {}), load_settings(file, {})):
        assert settings.is_vip_channel is True and client_config(settings).vip_channel_enabled is True
    file.write_text("rocketmq.config.isVIPChannel=false\n")
    assert client_config(load_settings(file, {})).vip_channel_enabled is False
    monkeypatch.setenv(VIP_CHANNEL_ENV, "false")
    assert load_settings(None, {}).is_vip_channel is False


def test_an_empty_enable_dashboard_collect_turns_collection_off_as_rocketmq_dashboard(tmp_path: Path) -> None:
    """rocketmq-dashboard's RMQConfigure binds ``rocketmq.config.enableDashBoardCollect`` through the String setter
    ``setEnableDashBoardCollect(String)`` = ``Boolean.valueOf(value)``: an empty value is false, not our default
    (true)."""
    file = tmp_path / "application.properties"
    file.write_text("rocketmq.config.enableDashBoardCollect=\n")
    assert load_settings(file, {}).enable_collect is False


def test_acl_credentials_reach_a_signing_client_or_are_refused() -> None:
    settings = load_settings(None, {}, access_key="rocketmq2", secret_key="12345678")
    if "access_key" in attrs.fields_dict(ClientConfig):  # a client that signs requests
        config: Any = client_config(settings)
        assert (config.access_key, config.secret_key) == ("rocketmq2", "12345678")
    else:
        with pytest.raises(SettingsError, match="cannot sign"):
            client_config(settings)
    assert getattr(client_config(load_settings(None, {})), "access_key", None) is None


def test_use_tls_reaches_a_tls_client_or_is_refused(tmp_path: Path) -> None:
    file = tmp_path / "dashboard.properties"
    file.write_text("rocketmq.config.useTLS=true\n")
    settings = load_settings(file, {})
    assert settings.use_tls
    if "tls" in attrs.fields_dict(ClientConfig):  # a client that connects with TLS
        config: Any = client_config(settings)
        assert config.tls is True
    else:
        with pytest.raises(SettingsError, match="cannot connect with TLS"):
            client_config(settings)
    assert getattr(client_config(load_settings(None, {})), "tls", False) is False


def _users(tmp_path: Path) -> Path:
    users = tmp_path / "users.properties"
    users.write_text("# name=password[,1 for an administrator]\nadmin=s3cret,1\nviewer=look\n")
    return users


async def test_login_protects_pages_and_only_administrators_change_things(
    embedded_cluster: EmbeddedCluster, nursery: trio.Nursery, tmp_path: Path
) -> None:
    users = _users(tmp_path)
    async for dash in open_dash(embedded_cluster, nursery, login_required=True, users_file=str(users)):
        assert (await dash.http.get("/api/cluster")).status_code == 401
        page = await dash.http.get("/topics")
        assert page.status_code == 303 and page.headers["location"] == "/login?next=/topics"
        assert (await dash.http.get("/login")).status_code == 200
        assert (await dash.http.get("/static/dashboard.js")).status_code == 200
        wrong = await dash.http.post("/api/login", json={"username": "admin", "password": "nope"})
        assert wrong.status_code == 401 and "wrong" in wrong.json()["error"]["message"]
        assert await dash.post("/api/login", {"username": "viewer", "password": "look"}) == {
            "user": "viewer",
            "admin": False,
        }
        assert (await dash.get("/api/cluster"))["brokers"]
        refused = await dash.http.post("/api/topics", json={"topic": "ViewerTopic"})
        assert refused.status_code == 403 and "viewer" in refused.json()["error"]["message"]
        await dash.post("/api/logout", {})
        assert (await dash.http.get("/api/cluster")).status_code == 401
        await dash.post("/api/login", {"username": "admin", "password": "s3cret"})
        assert (await dash.post("/api/topics", {"topic": "AdminTopic", "clusterNameList": ["DefaultCluster"]}))[
            "brokers"
        ]
        users.write_text("admin=changed,1\n")  # read at every login: no restart needed
        await dash.post("/api/logout", {})
        assert (await dash.http.post("/api/login", json={"username": "admin", "password": "s3cret"})).status_code == 401


async def test_a_session_ends_with_logout(
    embedded_cluster: EmbeddedCluster, nursery: trio.Nursery, tmp_path: Path
) -> None:
    """As rocketmq-dashboard's servlet session, the login is kept on the server and logging out ends it: a copy of
    the session cookie (a shared machine, a proxy log) replayed afterwards is not logged in. The cookie lasts as long
    as the browser (no max-age, as a servlet's JSESSIONID), not Starlette's default 14 days."""
    users = _users(tmp_path)
    async for dash in open_dash(embedded_cluster, nursery, login_required=True, users_file=str(users)):
        login = await dash.http.post("/api/login", json={"username": "admin", "password": "s3cret"})
        assert login.status_code == 200 and "max-age" not in login.headers["set-cookie"].lower()
        stolen = dict(dash.http.cookies)
        assert (await dash.http.post("/api/logout")).status_code == 200
        assert (await dash.http.get("/api/topics")).status_code == 401  # this browser is logged out
        async with httpx.AsyncClient(base_url=str(dash.http.base_url), cookies=stolen) as replay:
            assert (await replay.get("/api/topics")).status_code == 401


def test_the_session_timeout_takes_every_spring_duration_form_as_tomcat_rounds_it(tmp_path: Path) -> None:
    """``server.servlet.session.timeout`` is read as Spring Boot's DurationStyle reads it (seconds without a unit,
    unit suffixes in any case, ISO-8601 ``PT30M``) and applied as Spring Boot hands it to Tomcat: whole minutes, at
    least one, and zero or less never ends a session."""
    assert load_settings(None, {}).session_timeout == 1800.0
    file = tmp_path / "dashboard.properties"
    file.write_text("server.servlet.session.timeout=10m\n")
    assert load_settings(file, {}).session_timeout == 600.0
    forms = ("PT30M", "30M", "1800", "pt1h", "P1DT2H", "2h", "45", "90s", "PT0.5S", "0", "-PT5M")
    seconds = [load_settings(None, {}, session_timeout=v).session_timeout for v in forms]
    assert seconds == [1800, 1800, 1800, 3600, 93600, 7200, 60, 60, 60, math.inf, math.inf]
    for wrong in ("soon", "30x", "PT", "P"):
        with pytest.raises(SettingsError):
            load_settings(None, {}, session_timeout=wrong)


async def _login_with_clocks(dash: Dash, now: list[float], monkeypatch: pytest.MonkeyPatch) -> None:
    """Log ``admin`` in with both session clocks on ``now``: Starlette's cookie signer and the server's Sessions."""
    monkeypatch.setattr(itsdangerous.TimestampSigner, "get_timestamp", lambda self: int(now[0]))
    dash.app.state.sessions = Sessions(dash.app.state.settings.session_timeout, clock=lambda: now[0])
    login = await dash.http.post("/api/login", json={"username": "admin", "password": "s3cret"})
    assert login.status_code == 200


async def test_a_session_ends_after_its_idle_timeout_and_each_request_restarts_it(
    embedded_cluster: EmbeddedCluster, nursery: trio.Nursery, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session unused for ``server.servlet.session.timeout`` ends, as a servlet session; a request in time starts
    its idle time again."""
    now = [1_900_000_000.0]
    users = str(_users(tmp_path))
    async for dash in open_dash(
        embedded_cluster, nursery, login_required=True, users_file=users, session_timeout="10m"
    ):
        await _login_with_clocks(dash, now, monkeypatch)
        now[0] += 599
        assert (await dash.http.get("/api/topics")).status_code == 200
        now[0] += 599  # 599 s after the last request
        assert (await dash.http.get("/api/topics")).status_code == 200
        now[0] += 601
        assert (await dash.http.get("/api/topics")).status_code == 401
        assert (await dash.http.get("/topics")).headers["location"] == "/login?next=/topics"


async def test_a_session_in_use_is_not_ended_by_its_idle_timeout_counted_from_login(
    embedded_cluster: EmbeddedCluster, nursery: trio.Nursery, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A user working without a pause stays logged in past the idle timeout counted from the login. Starlette
    re-sends its session cookie only when the session changes and refuses a cookie signed longer ago than its
    max-age, so the cookie has none (a browser-session cookie, as a servlet's JSESSIONID) and only
    :class:`dashboard.auth.Sessions` ends a login."""
    now = [1_900_000_000.0]
    async for dash in open_dash(embedded_cluster, nursery, login_required=True, users_file=str(_users(tmp_path))):
        await _login_with_clocks(dash, now, monkeypatch)
        now[0] += 1000  # a request 1000 s after the login: the session's idle time starts again
        busy = await dash.http.get("/topics")
        assert busy.status_code == 200
        now[0] += 900  # 900 s idle, 1900 s after the login
        later = await dash.http.get("/topics")
        assert later.status_code == 200, (later.status_code, later.headers.get("location"), busy.headers)


async def test_without_login_required_every_page_is_open(dash: Any) -> None:
    for path in ("/cluster", "/topics", "/groups", "/producers", "/messages", "/charts", "/topic?topic=X"):
        response = await dash.http.get(path)
        assert response.status_code == 200 and 'href="/charts"' in response.text
    assert (await dash.http.get("/")).headers["location"] == "/cluster"


def test_replication_column_from_the_ha_keys_and_from_the_commit_logs() -> None:
    master = {"haConnectionCount": "1", "slaveFallBehindMuch": "512", "commitLogMaxOffset": "4096"}
    assert replication_state("SYNC_MASTER", master, None) == "1 slave(s), 512 B not yet replicated"
    assert replication_state("ASYNC_MASTER", {"haConnectionCount": "0"}, None) == "no slave connected"
    slave = {"haMasterAddress": "127.0.0.1:10912", "haConnected": "true", "commitLogMaxOffset": "4000"}
    assert replication_state("SLAVE", slave, 4096) == "connected to 127.0.0.1:10912, 96 B behind"
    assert replication_state("SLAVE", {**slave, "haConnected": "false"}, None) == "disconnected to 127.0.0.1:10912"
    # The master did not answer: the slave's own figure, when it has learned the master's end.
    own = {**slave, "haConnected": "false", "haSlaveLagBytes": "700"}
    assert replication_state("SLAVE", own, None) == "disconnected to 127.0.0.1:10912, 700 B behind as last known"
    assert replication_state("SLAVE", {**own, "haSlaveLagBytes": "-1"}, None) == "disconnected to 127.0.0.1:10912"
    assert replication_state("SLAVE", own, 4096) == "disconnected to 127.0.0.1:10912, 96 B behind"
    # A broker without HA keys: the slave's commit log against its master's.
    assert replication_state("SLAVE", {"commitLogMaxOffset": "100"}, 300) == "200 B behind master"
    assert replication_state("SLAVE", {}, None) == "no master online"
    assert replication_state("ASYNC_MASTER", {"commitLogMaxOffset": "1"}, None) == ""


async def test_a_slave_of_the_same_broker_name_is_listed_with_its_role_and_lag(
    embedded_cluster: EmbeddedCluster, nursery: trio.Nursery, tmp_path: Path
) -> None:
    from broker.controller import BrokerController
    from client import Message, Producer
    from tests.client.helpers import create_topic

    await create_topic(embedded_cluster.namesrv_addr, "ReplTopic", queues=1)
    async with Producer("repl-pg", embedded_cluster.namesrv_addr) as producer:
        await producer.send(Message("ReplTopic", b"x" * 100))
    config = attrs.evolve(
        embedded_cluster.broker_config(),
        broker_id=1,
        broker_role="SLAVE",
        listen_port=free_ports(1, **BROKER)[0],  # room for the fast channel the dashboard uses by default
        store_path_root_dir=str(tmp_path / "slave"),
    )
    slave = BrokerController(config)
    await nursery.start(slave.serve)
    async for dash in open_dash(embedded_cluster, nursery):
        with trio.fail_after(60):
            while len((data := await dash.get("/api/cluster"))["brokers"]) < 2:
                await trio.sleep(0.05)
        rows = {b["brokerId"]: b for b in data["brokers"]}
        assert rows[0]["role"] == "ASYNC_MASTER" and rows[1]["role"] == "SLAVE"
        assert rows[1]["address"] == slave.broker_addr and rows[1]["brokerName"] == "broker-a"
        if "haMasterAddress" not in await dash.admin.broker_status(slave.broker_addr):
            # A broker without HA: the column compares the slave's commit log with its master's.
            assert rows[1]["replication"].endswith("B behind master")
        else:  # a replicating broker reports its HA state: wait for the slave to connect
            with trio.fail_after(60):
                while not rows[1]["replication"].startswith(f"connected to {embedded_cluster.host}"):
                    await trio.sleep(0.1)
                    rows = {b["brokerId"]: b for b in (await dash.get("/api/cluster"))["brokers"]}
            assert rows[0]["replication"].startswith("1 slave(s)")


def test_the_trace_finder_is_the_clients_when_it_has_one() -> None:
    try:
        import client.mqadmin_trace  # noqa: F401
    except ImportError:
        assert default_finder() is None
    else:
        assert default_finder() is not None


async def test_a_trace_finder_feeds_the_trace_endpoint(
    embedded_cluster: EmbeddedCluster, nursery: trio.Nursery
) -> None:
    from dashboard.app import create_app
    from dashboard.settings import DashboardSettings
    from tests.dashboard.live import serve_dashboard

    async def finder(admin: Admin, msg_id: str) -> list[dict[str, Any]]:
        return [
            {"type": "SubAfter", "group": "cg", "timestamp": 20, "status": "success"},
            {"type": "Pub", "group": "pg", "timestamp": 10, "status": "success", "msgId": msg_id},
        ]

    import httpx

    app = create_app(DashboardSettings(namesrv_addr=embedded_cluster.namesrv_addr), trace_finder=finder, sample=False)
    async with serve_dashboard(app, nursery) as url, httpx.AsyncClient(base_url=url) as http:
        trace = (await http.get("/api/message/trace?id=M1")).json()
    assert trace["available"] and [r["type"] for r in trace["records"]] == ["Pub", "SubAfter"]
    assert trace["records"][0]["msgId"] == "M1"
