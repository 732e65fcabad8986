"""The ACL page's JSON endpoints (``/api/acl...``) over a real socket against an embedded cluster with ``aclEnable``
and a ``plain_acl.yml``, the dashboard signing as an admin account: each edit is proved by what the broker then
enforces on a client of the edited account (a send, a heartbeat, an unsigned send from a white-listed address), not
by the file alone. Also: a broker's refusal answered with its code and remark, a master that does not answer named,
a dashboard account without the admin flag, and the read-only users of ``loginRequired``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio
import yaml

from broker.embedded import EmbeddedCluster
from client import Message, Producer
from client.acl_admin import delete_acl_config
from client.config import ClientConfig
from client.errors import MQClientError
from remoting.client import RemotingClient
from remoting.codec.acl_signing import SessionCredentials, sign
from remoting.codec.bodies import ConsumerData, HeartbeatData, SubscriptionData
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request
from tests.client.test_master_watch import register_as_master
from tests.conftest import SMALL_STORE
from tests.dashboard.conftest import Dash, open_dash

DASHBOARD = {"access_key": "dashboard", "secret_key": "dashboard-secret"}
#: The dashboard's admin account, a plain account shaped like RocketMQ's sample, and a global white list.
PLAIN_ACL = """\
globalWhiteRemoteAddresses:
  - 10.10.103.*
accounts:
  - accessKey: dashboard
    secretKey: dashboard-secret
    admin: true
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
    groupPerms:
      - groupA=DENY
"""
TOPIC = "AclPageTopic"


@pytest.fixture
def acl_file(tmp_path: Path) -> Path:
    path = tmp_path / "rocketmq-home" / "conf" / "plain_acl.yml"
    path.parent.mkdir(parents=True)
    path.write_text(PLAIN_ACL)
    return path


@pytest.fixture
async def acl_cluster(tmp_path: Path, acl_file: Path) -> AsyncIterator[EmbeddedCluster]:
    home = str(acl_file.parents[1])
    async with EmbeddedCluster(tmp_path / "cluster", acl_enable=True, rocketmq_home=home, **SMALL_STORE) as c:
        yield c


@pytest.fixture
async def acl_dash(acl_cluster: EmbeddedCluster, nursery: trio.Nursery) -> AsyncIterator[Dash]:
    async for dash in open_dash(acl_cluster, nursery, **DASHBOARD):
        await dash.post(
            "/api/topics",
            {"topic": TOPIC, "readQueueNums": 1, "writeQueueNums": 1, "clusterNameList": ["DefaultCluster"]},
        )
        yield dash


async def send_refusal(cluster: EmbeddedCluster, access_key: str | None, secret_key: str | None) -> str | None:
    """``None`` when a producer signing as ``access_key`` can send to :data:`TOPIC`, else the broker's refusal."""
    config = ClientConfig(namesrv_addr=cluster.namesrv_addr, access_key=access_key, secret_key=secret_key)
    async with Producer("acl-page-pg", config=config) as producer:
        try:
            await producer.send(Message(TOPIC, b"probe"))
        except MQClientError as exc:
            return str(exc)
    return None


async def heartbeat_refusal(cluster: EmbeddedCluster, access_key: str, secret_key: str, group: str) -> str | None:
    """``None`` when a consumer of ``group`` signing as ``access_key`` may heartbeat (the group's SUB), else the
    broker's remark."""
    consumer = ConsumerData(group, subscription_data_set=(SubscriptionData(TOPIC),))
    body = HeartbeatData("127.0.0.1@acl-page", consumer_data_set=(consumer,)).encode()
    cmd = sign(request(RequestCode.HEART_BEAT, {}, body), SessionCredentials(access_key, secret_key))
    async with RemotingClient() as client:
        answer = await client.invoke(cluster.broker_addr, cmd, 5)
    return None if answer.code == ResponseCode.SUCCESS else answer.remark


def accounts(overview: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {a["accessKey"]: a for a in overview["accounts"]}


async def test_the_page_shows_acl_on_every_account_and_the_white_list(acl_dash: Dash) -> None:
    overview = await acl_dash.get("/api/acl")
    addr = acl_dash.cluster.broker_addr
    assert overview["aclEnabled"] is True and overview["source"] == addr and overview["error"] is None
    [broker] = overview["brokers"]
    assert (broker["brokerName"], broker["address"], broker["role"], broker["aclEnable"]) == (
        "broker-a",
        addr,
        "MASTER",
        True,
    )
    assert overview["globalWhiteAddrs"] == ["10.10.103.*"]
    assert overview["writable"] is True and overview["signedAs"] == "dashboard"
    assert accounts(overview)["RocketMQ"] == {
        "accessKey": "RocketMQ",
        "secretKey": "12345678",
        "whiteRemoteAddress": None,
        "admin": False,
        "defaultTopicPerm": "DENY",
        "defaultGroupPerm": "SUB",
        "topicPerms": ["topicA=DENY", "topicB=PUB|SUB"],
        "groupPerms": ["groupA=DENY"],
    }
    assert accounts(overview)["dashboard"]["admin"] is True


async def test_an_account_sends_only_once_added_and_permitted_and_never_after_deletion(
    acl_dash: Dash, acl_file: Path
) -> None:
    cluster = acl_dash.cluster
    assert "No acl config for newcomer" in (await send_refusal(cluster, "newcomer", "newcomer-secret") or "")
    added = await acl_dash.post("/api/acl/accounts", {"accessKey": "newcomer", "secretKey": "newcomer-secret"})
    assert [(b["address"], b["done"], b["error"]) for b in added["brokers"]] == [(cluster.broker_addr, "created", None)]
    entry = accounts(await acl_dash.get("/api/acl"))["newcomer"]
    assert (entry["defaultTopicPerm"], entry["defaultGroupPerm"], entry["admin"]) == ("DENY", "SUB", False)
    # Added with rocketmq-dashboard's defaults (topics DENY): signed correctly now, but not yet allowed to publish.
    assert "No default permission for topic:AclPageTopic" in (
        await send_refusal(cluster, "newcomer", "newcomer-secret") or ""
    )

    perm = {"accessKey": "newcomer", "kind": "topic", "resource": TOPIC, "perm": "PUB"}
    assert (await acl_dash.post("/api/acl/permission", perm))["brokers"][0]["done"] == "added"
    assert await send_refusal(cluster, "newcomer", "newcomer-secret") is None
    changed = await acl_dash.post("/api/acl/permission", {**perm, "perm": "SUB"})
    assert changed["brokers"][0]["done"] == "updated"
    assert accounts(await acl_dash.get("/api/acl"))["newcomer"]["topicPerms"] == [f"{TOPIC}=SUB"]
    assert "No default permission for topic:AclPageTopic" in (
        await send_refusal(cluster, "newcomer", "newcomer-secret") or ""
    )
    await acl_dash.post("/api/acl/permission", perm)

    # The same key cannot be added twice; nothing is written then.
    again = await acl_dash.post("/api/acl/accounts", {"accessKey": "newcomer", "secretKey": "other-secret"}, 400)
    assert "already exists on broker-a" in again["error"]["message"]
    # An update replaces the secret and keeps the account's permissions.
    update = {"accessKey": "newcomer", "secretKey": "rotated-secret", "defaultGroupPerm": "DENY"}
    assert (await acl_dash.post("/api/acl/account", update))["brokers"][0]["done"] == "updated"
    refused = await send_refusal(cluster, "newcomer", "newcomer-secret")
    assert "Check signature failed for accessKey=newcomer" in (refused or "")
    assert await send_refusal(cluster, "newcomer", "rotated-secret") is None
    entry = accounts(await acl_dash.get("/api/acl"))["newcomer"]
    assert (entry["secretKey"], entry["defaultGroupPerm"], entry["topicPerms"]) == (
        "rotated-secret",
        "DENY",
        [f"{TOPIC}=PUB"],
    )
    # Removing the permission takes the right away again. It was the account's last topic permission, a list
    # UPDATE_AND_CREATE_ACL_CONFIG cannot empty: the account is written again, all else kept.
    query = f"accessKey=newcomer&kind=topic&resource={TOPIC}"
    assert (await acl_dash.delete(f"/api/acl/permission?{query}"))["brokers"][0]["done"] == "removed"
    assert "No default permission" in (await send_refusal(cluster, "newcomer", "rotated-secret") or "")
    entry = accounts(await acl_dash.get("/api/acl"))["newcomer"]
    assert (entry["secretKey"], entry["defaultTopicPerm"], entry["defaultGroupPerm"], entry["admin"]) == (
        "rotated-secret",
        "DENY",
        "DENY",
        False,
    )
    assert not entry["topicPerms"]
    await acl_dash.post("/api/acl/permission", perm)
    assert await send_refusal(cluster, "newcomer", "rotated-secret") is None

    deleted = await acl_dash.delete("/api/acl/account?accessKey=newcomer")
    assert deleted["brokers"][0]["done"] == "deleted"
    assert "No acl config for newcomer" in (await send_refusal(cluster, "newcomer", "rotated-secret") or "")
    assert "newcomer" not in accounts(await acl_dash.get("/api/acl"))
    assert "newcomer" not in {a["accessKey"] for a in yaml.safe_load(acl_file.read_text())["accounts"]}
    # Deleting what no broker has is not an error: each broker says it had none.
    assert (await acl_dash.delete("/api/acl/account?accessKey=newcomer"))["brokers"][0]["done"] == "absent"


async def test_an_update_gives_the_account_back_to_a_broker_that_lost_it(acl_dash: Dash) -> None:
    """rocketmq-dashboard's update creates the account where a broker has none (a broker that missed the add, or
    lost it): here with the permissions the page showed, so the account works there as before."""
    cluster = acl_dash.cluster
    body = {"accessKey": "wanderer", "secretKey": "wanderer-secret"}
    await acl_dash.post("/api/acl/accounts", body)
    await acl_dash.post("/api/acl/permission", {**body, "kind": "topic", "resource": TOPIC, "perm": "PUB"})
    shown = accounts(await acl_dash.get("/api/acl"))["wanderer"]
    await delete_acl_config(acl_dash.admin, cluster.broker_addr, "wanderer")  # behind the page's back
    assert "No acl config for wanderer" in (await send_refusal(cluster, "wanderer", "wanderer-secret") or "")
    update = {**shown, "whiteRemoteAddress": "", "topicPerms": shown["topicPerms"], "groupPerms": []}
    assert (await acl_dash.post("/api/acl/account", update))["brokers"][0]["done"] == "created"
    assert await send_refusal(cluster, "wanderer", "wanderer-secret") is None
    again = accounts(await acl_dash.get("/api/acl"))["wanderer"]
    assert again["topicPerms"] == [f"{TOPIC}=PUB"] and again["groupPerms"] == []


async def test_a_group_permission_decides_a_consumers_heartbeat(acl_dash: Dash) -> None:
    cluster = acl_dash.cluster
    base = {"accessKey": "consumer1", "secretKey": "consumer-secret", "defaultGroupPerm": "DENY"}
    await acl_dash.post("/api/acl/accounts", {**base, "defaultTopicPerm": "SUB"})
    assert "No default permission for group:page-cg" in (
        await heartbeat_refusal(cluster, "consumer1", "consumer-secret", "page-cg") or ""
    )
    perm = {"accessKey": "consumer1", "kind": "group", "resource": "page-cg", "perm": "SUB"}
    await acl_dash.post("/api/acl/permission", perm)
    assert await heartbeat_refusal(cluster, "consumer1", "consumer-secret", "page-cg") is None
    await acl_dash.post("/api/acl/permission", {**perm, "perm": "DENY"})
    assert await heartbeat_refusal(cluster, "consumer1", "consumer-secret", "page-cg")
    assert accounts(await acl_dash.get("/api/acl"))["consumer1"]["groupPerms"] == ["page-cg=DENY"]


async def test_the_global_white_list_edited_in_the_page_admits_unsigned_clients(acl_dash: Dash) -> None:
    cluster = acl_dash.cluster
    assert "No accessKey is configured" in (await send_refusal(cluster, None, None) or "")
    white = await acl_dash.post("/api/acl/white", {"addresses": ["10.10.103.*", "127.0.0.1"]})
    assert white["brokers"][0]["done"] == "updated"
    assert (await acl_dash.get("/api/acl"))["globalWhiteAddrs"] == ["10.10.103.*", "127.0.0.1"]
    assert await send_refusal(cluster, None, None) is None  # the loopback is white-listed: no signature needed
    await acl_dash.post("/api/acl/white", {"addresses": ["10.10.103.*"]})
    assert "No accessKey is configured" in (await send_refusal(cluster, None, None) or "")
    bad = await acl_dash.post("/api/acl/white", {"addresses": "127.0.0.1"}, 400)
    assert "addresses must be a list" in bad["error"]["message"]


async def test_a_brokers_refusal_answers_its_code_and_remark(acl_dash: Dash) -> None:
    """A key of 6 characters or fewer is refused by the broker (209, RocketMQ's remark), not by the dashboard."""
    refused = (await acl_dash.post("/api/acl/accounts", {"accessKey": "shorty", "secretKey": "12345678"}, 502))["error"]
    assert refused["code"] == 209 and "length should longer than 6" in refused["remark"]
    assert refused["address"] == acl_dash.cluster.broker_addr and "Traceback" not in refused["message"]
    assert refused["brokers"][0]["error"]["code"] == 209
    perm = {"accessKey": "RocketMQ", "kind": "topic", "resource": "t", "perm": "ALL"}
    assert "perm must be one of" in (await acl_dash.post("/api/acl/permission", perm, 400))["error"]["message"]
    perm = {"accessKey": "RocketMQ", "kind": "topic", "resource": "a,b", "perm": "PUB"}
    assert "cannot be named" in (await acl_dash.post("/api/acl/permission", perm, 400))["error"]["message"]
    missing = await acl_dash.post("/api/acl/permission", {**perm, "accessKey": "nobody1", "resource": "t"}, 502)
    assert "no account nobody1 on this broker" in missing["error"]["message"]
    assert (await acl_dash.post("/api/acl/accounts", {"accessKey": "only-key"}, 400))["error"]["message"] == (
        "missing field 'secretKey'"
    )
    response = await acl_dash.http.post(
        "/api/acl/white", content=b'{"addresses": []}', headers={"Content-Type": "text/plain"}
    )
    assert response.status_code == 415


async def test_a_master_that_does_not_answer_is_named_and_the_others_are_edited(acl_dash: Dash) -> None:
    cluster = acl_dash.cluster
    async with RemotingClient() as client:
        await register_as_master(client, cluster.namesrv_addr, "127.0.0.1:1", "DeadAclTopic", "broker-dead")
        overview = await acl_dash.get("/api/acl")
        rows = {b["brokerName"]: b for b in overview["brokers"]}
        assert rows["broker-dead"]["aclEnable"] is None and rows["broker-dead"]["error"]["message"]
        assert overview["source"] == cluster.broker_addr and "RocketMQ" in accounts(overview)
        failed = await acl_dash.post("/api/acl/accounts", {"accessKey": "halfway", "secretKey": "halfway-secret"}, 502)
        error = failed["error"]
        assert (
            "broker-dead 127.0.0.1:1: failed" in error["message"]
            and f"broker-a {cluster.broker_addr}: created" in (error["message"])
        )
        assert [b["done"] for b in error["brokers"]] == ["created", None]
    assert "No default permission" in (await send_refusal(cluster, "halfway", "halfway-secret") or "")  # it exists


async def test_a_dashboard_account_without_the_admin_flag_gets_the_brokers_refusal(
    acl_cluster: EmbeddedCluster, nursery: trio.Nursery
) -> None:
    async for dash in open_dash(acl_cluster, nursery, access_key="RocketMQ", secret_key="12345678"):
        overview = await dash.get("/api/acl")
        assert overview["aclEnabled"] is True and overview["accounts"] == [] and overview["source"] is None
        assert overview["error"]["code"] == 1
        assert "Need admin permission for request code=54" in overview["error"]["remark"]
        refused = await dash.post("/api/acl/white", {"addresses": ["127.0.0.1"]}, 502)
        assert refused["error"]["code"] == 1 and "request code=53" in refused["error"]["remark"]
    assert "No accessKey is configured" in (await send_refusal(acl_cluster, None, None) or "")


async def test_with_login_only_an_administrator_edits_and_sees_the_secret_keys(
    acl_cluster: EmbeddedCluster, nursery: trio.Nursery, tmp_path: Path
) -> None:
    users = tmp_path / "users.properties"
    users.write_text("admin=s3cret,1\nviewer=look\n")
    async for dash in open_dash(acl_cluster, nursery, login_required=True, users_file=str(users), **DASHBOARD):
        assert (await dash.http.get("/api/acl")).status_code == 401
        await dash.post("/api/login", {"username": "viewer", "password": "look"})
        overview = await dash.get("/api/acl")
        assert overview["writable"] is False and {a["secretKey"] for a in overview["accounts"]} == {None}
        body = {"accessKey": "sneaky1", "secretKey": "sneaky-secret"}
        assert (await dash.http.post("/api/acl/accounts", json=body)).status_code == 403
        assert (await dash.http.delete("/api/acl/account?accessKey=RocketMQ")).status_code == 403
        assert (await dash.http.post("/api/acl/white", json={"addresses": []})).status_code == 403
        await dash.post("/api/logout", {})
        await dash.post("/api/login", {"username": "admin", "password": "s3cret"})
        overview = await dash.get("/api/acl")
        assert overview["writable"] is True and accounts(overview)["RocketMQ"]["secretKey"] == "12345678"
        await dash.post("/api/acl/accounts", body)
    assert "No default permission" in (await send_refusal(acl_cluster, "sneaky1", "sneaky-secret") or "")


async def test_the_page_and_its_navigation_link_are_served(acl_dash: Dash) -> None:
    page = await acl_dash.http.get("/acl")
    assert page.status_code == 200 and '<a href="/acl" class="active">ACL</a>' in page.text
    assert "/static/acl.js" in page.text
    script = await acl_dash.http.get("/static/acl.js")
    assert script.status_code == 200 and "/api/acl" in script.text
