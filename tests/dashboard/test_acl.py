"""The dashboard against a secured cluster. With ACL on: its own credentials (``rocketmq.config.accessKey`` /
``secretKey``) sign its calls; without them the broker's refusal reaches the page as its code and remark. With TLS
enforced: ``rocketmq.config.useTLS`` reaches it; plain text is turned away."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from broker.embedded import EmbeddedCluster
from tests.conftest import SMALL_STORE
from tests.dashboard.conftest import open_dash

#: One administrator account, as a RocketMQ home's conf/plain_acl.yml.
PLAIN_ACL = """\
accounts:
  - accessKey: dashboard
    secretKey: dashboard-secret
    admin: true
"""


@pytest.fixture
async def acl_cluster(tmp_path: Path) -> AsyncIterator[EmbeddedCluster]:
    home = tmp_path / "rocketmq-home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(PLAIN_ACL)
    async with EmbeddedCluster(tmp_path / "cluster", acl_enable=True, rocketmq_home=str(home), **SMALL_STORE) as c:
        yield c


async def test_signed_calls_pass_and_unsigned_ones_show_the_refusal(
    acl_cluster: EmbeddedCluster, nursery: trio.Nursery
) -> None:
    async for dash in open_dash(acl_cluster, nursery, access_key="dashboard", secret_key="dashboard-secret"):
        [broker] = (await dash.get("/api/cluster"))["brokers"]
        assert broker["error"] is None and broker["version"] == "V4_9_8"
        picked = {"clusterNameList": ["DefaultCluster"]}
        assert (await dash.post("/api/topics", {"topic": "AclPageTopic", **picked}))["brokers"]
    async for dash in open_dash(acl_cluster, nursery):
        refused = (await dash.post("/api/topics", {"topic": "UnsignedTopic", **picked}, status=502))["error"]
        assert refused["code"] == 1 and refused["remark"] and "Traceback" not in refused["message"]
        [broker] = (await dash.get("/api/cluster"))["brokers"]
        assert broker["error"]  # the broker refuses its runtime info: the row says why
    assert "UnsignedTopic" not in await _topics(acl_cluster)


async def test_the_dashboard_reaches_an_enforcing_tls_cluster_with_use_tls(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    overrides = {"tls_server_mode": "enforcing", "tls_config_file": str(tmp_path / "none"), **SMALL_STORE}
    async with EmbeddedCluster(tmp_path / "cluster", **overrides) as cluster:
        async for dash in open_dash(cluster, nursery, use_tls=True):
            [broker] = (await dash.get("/api/cluster"))["brokers"]
            assert broker["error"] is None and broker["address"] == cluster.broker_addr
        async for dash in open_dash(cluster, nursery):  # plain text: turned away, the page says so
            assert (await dash.get("/api/cluster", status=502))["error"]["message"]


async def _topics(cluster: EmbeddedCluster) -> list[str]:
    from client.admin import Admin

    async with Admin(cluster.namesrv_addr) as admin:
        return await admin.topic_list()
