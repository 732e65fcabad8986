"""A normal user's rights with ``loginRequired``, as rocketmq-dashboard's ``role-permission.yml`` and its
``PermissionAspect`` (found by a review): the actions its Normal role allows (every read, a test message, resending
and exporting dead letters) and a 403 for the rest; an administrator may do everything. Over a real socket against
the embedded cluster."""

from __future__ import annotations

import os
from pathlib import Path

import attrs
import pytest
import trio
from starlette.routing import Route

from broker.embedded import EmbeddedCluster
from dashboard.api import DASHBOARD_URLS, ROUTES
from dashboard.app import create_app
from dashboard.auth import OPEN_PATHS
from dashboard.permissions import PermissionFileError, url_pattern
from dashboard.settings import DashboardSettings
from tests.client.helpers import create_topic
from tests.dashboard.conftest import Dash, open_dash


def _users(tmp_path: Path) -> Path:
    users = tmp_path / "users.properties"
    users.write_text("admin=s3cret,1\nviewer=look\n")
    return users


async def _login(dash: Dash, name: str, password: str) -> None:
    await dash.post("/api/login", {"username": name, "password": password})


def test_every_endpoint_has_the_rocketmq_dashboard_url_its_permission_is_checked_on() -> None:
    endpoints = {
        (method, route.path)
        for route in ROUTES
        if isinstance(route, Route) and not route.path.startswith(OPEN_PATHS)
        for method in route.methods or ()
        if method != "HEAD"
    }
    assert endpoints == set(DASHBOARD_URLS)


def test_patterns_match_as_rocketmq_dashboards_matcher() -> None:
    one = url_pattern("/topic/*.query")
    assert one.fullmatch("/topic/list.query") and one.fullmatch("/topic/route.query")
    assert not one.fullmatch("/topic/a/b.query") and not one.fullmatch("/topic/list.queryTopicType")
    assert url_pattern("/acl/**").fullmatch("/acl/topic/add.do")
    assert url_pattern("/dlqMessage/exportDlqMessage.d?").fullmatch("/dlqMessage/exportDlqMessage.do")
    assert not url_pattern("/topic/*.query").fullmatch("/topic/createOrUpdate.do")


async def test_a_normal_user_may_read_send_a_test_message_and_resend_or_export_dead_letters_only(
    embedded_cluster: EmbeddedCluster, nursery: trio.Nursery, tmp_path: Path
) -> None:
    await create_topic(embedded_cluster.namesrv_addr, "ViewerTopic", queues=1)
    settings = {"login_required": True, "users_file": str(_users(tmp_path)), "data_path": str(tmp_path / "data")}
    async for dash in open_dash(embedded_cluster, nursery, **settings):
        await _login(dash, "viewer", "look")
        for url in ("/api/cluster", "/api/topics", "/api/groups", "/api/topic/config?topic=ViewerTopic", "/api/acl"):
            assert (await dash.http.get(url)).status_code == 200, url
        sent = await dash.post("/api/topic/message", {"topic": "ViewerTopic", "body": "from a viewer"})
        assert sent["sendStatus"] == "SEND_OK"
        resent = await dash.post("/api/dlq/resend", {"group": "viewer-cg", "originMsgIds": ["0A00"]})
        assert [r["originMsgId"] for r in resent["results"]] == ["0A00"]
        exported = await dash.http.post("/api/dlq/export", json={"group": "viewer-cg", "msgIds": ["0A00"]})
        assert exported.status_code == 502, exported.text  # allowed: the group has no DLQ topic to read it in
        refused = [
            ("POST", "/api/topics", {"topic": "ViewerMade"}),
            ("DELETE", "/api/topic?topic=ViewerTopic", None),
            (
                "POST",
                "/api/group/config",
                {"brokerNameList": ["broker-a"], "subscriptionGroupConfig": {"groupName": "v"}},
            ),
            ("POST", "/api/group/delete", {"groupName": "v", "brokerNameList": ["broker-a"]}),
            ("POST", "/api/group/reset", {"group": "v", "topic": "ViewerTopic", "timestamp": 0}),
            ("POST", "/api/message/resend", {"group": "v", "msgId": "0A00"}),
            ("POST", "/api/acl/white", {"addresses": ["10.*"]}),
        ]
        for method, url, body in refused:
            answer = await dash.http.request(method, url, json=body)
            assert answer.status_code == 403, (method, url, answer.text)
            assert "viewer has no permission" in answer.json()["error"]["message"]
        assert "ViewerMade" not in await dash.admin.topic_list()
        assert "ViewerTopic" in await dash.admin.topic_list()

        await dash.post("/api/logout", {})
        await _login(dash, "admin", "s3cret")
        assert (await dash.post("/api/topics", {"topic": "AdminMade", "clusterNameList": ["DefaultCluster"]}))[
            "brokerNames"
        ] == ["broker-a"]
        assert (await dash.http.post("/api/message/resend", json={"group": "v", "msgId": "0A00"})).status_code != 403


async def test_a_role_file_in_the_data_path_replaces_the_default_and_is_read_again_when_changed(
    embedded_cluster: EmbeddedCluster, nursery: trio.Nursery, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    rules = data / "role-permission.yml"
    rules.write_text("rolePerms:\n  Normal:\n    - /cluster/*.query\n    - /topic/createOrUpdate.do\n")
    settings = {"login_required": True, "users_file": str(_users(tmp_path)), "data_path": str(data)}
    async for dash in open_dash(embedded_cluster, nursery, **settings):
        await _login(dash, "viewer", "look")
        assert (await dash.http.get("/api/cluster")).status_code == 200
        assert (await dash.http.get("/api/topics")).status_code == 403
        assert (await dash.post("/api/topics", {"topic": "RuledTopic", "clusterNameList": ["DefaultCluster"]}))[
            "brokerNames"
        ] == ["broker-a"]

        rules.write_text("rolePerms:\n  Normal:\n    - /topic/**\n")
        os.utime(rules, ns=(0, 1_000_000_000))  # a different modification time, however coarse the clock
        assert (await dash.http.get("/api/topics")).status_code == 200
        assert (await dash.http.get("/api/cluster")).status_code == 403

        rules.write_text("rolePerms: [not, a, mapping]\n")  # a change that does not load keeps the rules before
        os.utime(rules, ns=(0, 2_000_000_000))
        assert (await dash.http.get("/api/topics")).status_code == 200


def test_a_role_file_that_does_not_load_stops_the_dashboard_from_starting(tmp_path: Path) -> None:
    (tmp_path / "role-permission.yml").write_text("rolePerms:\n  Normal: /topic/*.query\n")
    settings = DashboardSettings(login_required=True, data_path=str(tmp_path), port=0)
    with pytest.raises(PermissionFileError, match="must be a list"):
        create_app(settings, sample=False)
    create_app(attrs.evolve(settings, login_required=False), sample=False)  # without a login it is not read


async def test_a_normal_user_exports_one_dead_letter_but_not_a_batch(
    embedded_cluster: EmbeddedCluster, nursery: trio.Nursery, tmp_path: Path
) -> None:
    """rocketmq-dashboard's ``role-permission.yml`` lets the Normal role export one dead letter
    (``exportDlqMessage.do``) but not a batch (``batchExportDlqMessage.do`` is not listed); an administrator exports
    both. One export of several ids must not pass as the single one."""
    settings = {"login_required": True, "users_file": str(_users(tmp_path)), "data_path": str(tmp_path / "data")}
    async for dash in open_dash(embedded_cluster, nursery, **settings):
        await _login(dash, "viewer", "look")
        one = await dash.http.post("/api/dlq/export", json={"group": "viewer-cg", "msgIds": ["0A00"]})
        assert one.status_code == 502, one.text  # allowed: the group has no DLQ topic to read it in
        two = {"group": "viewer-cg", "msgIds": ["0A00", "0A01"]}
        assert (await dash.http.post("/api/dlq/export", json=two)).status_code == 400  # one id, or the batch
        batch = await dash.http.post("/api/dlq/export/batch", json=two)
        assert batch.status_code == 403 and "viewer has no permission" in batch.json()["error"]["message"]

        await dash.post("/api/logout", {})
        await _login(dash, "admin", "s3cret")
        batch = await dash.http.post("/api/dlq/export/batch", json=two)
        assert batch.status_code == 200 and batch.content.startswith(b"PK")


async def test_a_role_pattern_is_a_regular_expression_besides_its_wildcards(
    embedded_cluster: EmbeddedCluster, nursery: trio.Nursery, tmp_path: Path
) -> None:
    """rocketmq-dashboard's ``MatcherUtil`` turns ``**``, ``*`` and ``?`` into regular expressions and keeps every
    other character as it is in the ``java.util.regex`` pattern it matches the URL with: a file may use groups and
    alternatives, and its ``.`` is any character. A pattern that is not a regular expression does not load."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "role-permission.yml").write_text("rolePerms:\n  Normal:\n    - /cluster/(list|brokerConfig).query\n")
    settings = {"login_required": True, "users_file": str(_users(tmp_path)), "data_path": str(data)}
    async for dash in open_dash(embedded_cluster, nursery, **settings):
        await _login(dash, "viewer", "look")
        assert (await dash.http.get("/api/cluster")).status_code == 200
        assert (await dash.http.get(f"/api/broker?addr={embedded_cluster.broker_addr}")).status_code == 200
        assert (await dash.http.get("/api/topics")).status_code == 403
    assert url_pattern("/topic/list.query").fullmatch("/topic/list_query")
    assert url_pattern("/consumer/[a-zA-Z]+Config.query").fullmatch("/consumer/examineSubscriptionGroupConfig.query")
    (data / "role-permission.yml").write_text("rolePerms:\n  Normal:\n    - /cluster/(list.query\n")
    with pytest.raises(PermissionFileError, match="cluster"):
        create_app(DashboardSettings(login_required=True, data_path=str(data), port=0), sample=False)
