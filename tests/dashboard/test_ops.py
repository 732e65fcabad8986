"""The Ops page's name servers, as rocketmq-dashboard's ``OpsController`` (found by a review): the list and the one in
use, adding one, switching the one in use at run time so that every page (and the chart sampler) then reads through
it, TLS and the VIP channel on or off. Two real embedded clusters, each with its own name server, the dashboard
started on the first."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from broker.embedded import EmbeddedCluster
from client.vip import VIP_CHANNEL_ENV, broker_vip_channel
from tests.client.helpers import create_topic
from tests.conftest import SMALL_STORE
from tests.dashboard.browser import banner, click, table_rows, wait_for
from tests.dashboard.conftest import Dash, open_dash
from tests.dashboard.live import ThreadedDashboard
from tests.dashboard.test_pages import open_page


@pytest.fixture
async def second(tmp_path: Path) -> AsyncIterator[EmbeddedCluster]:
    async with EmbeddedCluster(tmp_path / "second", **SMALL_STORE) as cluster:
        yield cluster


async def _topics(dash: Dash) -> set[str]:
    return {t["topic"] for t in (await dash.get("/api/topics"))["topics"]}


async def test_switching_the_name_server_makes_every_page_read_the_other_cluster(
    embedded_cluster: EmbeddedCluster, second: EmbeddedCluster, nursery: trio.Nursery
) -> None:
    first_ns, second_ns = embedded_cluster.namesrv_addr, second.namesrv_addr
    await create_topic(first_ns, "FirstOnlyTopic", queues=1)
    await create_topic(second_ns, "SecondOnlyTopic", queues=1)
    async for dash in open_dash(embedded_cluster, nursery, namesrv_addrs=f"{first_ns},127.0.0.1:1"):
        home = await dash.get("/api/ops")
        assert home == {"currentNamesrv": first_ns, "namesvrAddrList": [first_ns, "127.0.0.1:1"],
                        "useVIPChannel": True, "useTLS": False}  # fmt: skip
        assert "FirstOnlyTopic" in await _topics(dash) and "SecondOnlyTopic" not in await _topics(dash)

        added = await dash.post("/api/ops/namesrv/add", {"newNamesrvAddr": second_ns})
        assert added["namesvrAddrList"] == [first_ns, "127.0.0.1:1", second_ns]
        assert added["currentNamesrv"] == first_ns  # offered, not used yet

        switched = await dash.post("/api/ops/namesrv", {"nameSvrAddrList": second_ns})
        assert switched["currentNamesrv"] == second_ns
        assert "SecondOnlyTopic" in await _topics(dash) and "FirstOnlyTopic" not in await _topics(dash)
        [broker] = (await dash.get("/api/cluster"))["brokers"]
        assert broker["address"] == second.broker_addr
        sent = await dash.post("/api/topic/message", {"topic": "SecondOnlyTopic", "body": "through the second"})
        assert sent["sendStatus"] == "SEND_OK" and sent["brokerName"] == "broker-a"
        assert (await dash.get("/api/topic?topic=SecondOnlyTopic"))["totalMessages"] == 1
        for _ in range(2):  # a topic's first sample has no point
            await dash.app.state.sampler.sample_once()
        charted = (await dash.get("/api/charts/topics"))["topics"]
        assert "SecondOnlyTopic" in charted and "FirstOnlyTopic" not in charted  # the sampler follows
        assert second_ns in (await dash.http.get("/topics")).text  # the header names the one in use

        back = await dash.post("/api/ops/namesrv", {"nameSvrAddrList": first_ns})
        assert back["currentNamesrv"] == first_ns and "FirstOnlyTopic" in await _topics(dash)


async def test_a_malformed_address_changes_nothing_and_the_vip_channel_switches(
    embedded_cluster: EmbeddedCluster, nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The VIP channel is on by default, as rocketmq-dashboard's RMQConfigure ``isVIPChannel`` (``true``), and
    ``updateIsVIPChannel.do`` turns it off and on for the next requests (found by a review: on was refused)."""
    monkeypatch.delenv(VIP_CHANNEL_ENV, raising=False)
    vip = broker_vip_channel(embedded_cluster.broker_addr)
    async for dash in open_dash(embedded_cluster, nursery):
        for bad in ("nohost", "host:99999", " ; ", "a:1;b"):
            error = (await dash.post("/api/ops/namesrv", {"nameSvrAddrList": bad}, status=400))["error"]["message"]
            assert "address" in error, error
            await dash.post("/api/ops/namesrv/add", {"newNamesrvAddr": bad}, status=400)
        await dash.post("/api/ops/namesrv", {}, status=400)
        assert await dash.get("/api/ops") == {"currentNamesrv": embedded_cluster.namesrv_addr,
                                              "namesvrAddrList": [embedded_cluster.namesrv_addr],
                                              "useVIPChannel": True, "useTLS": False}  # fmt: skip
        assert (await dash.get("/api/cluster"))["brokers"]  # GET_BROKER_RUNTIME_INFO: to port - 2
        assert vip in dash.admin.instance.remoting.connections
        assert (await dash.post("/api/ops/vip", {"useVIPChannel": False}))["useVIPChannel"] is False
        assert dash.admin.instance.config.vip_channel_enabled is False
        assert (await dash.get("/api/cluster"))["brokers"]
        assert vip not in dash.admin.instance.remoting.connections
        assert (await dash.post("/api/ops/vip", {"useVIPChannel": True}))["useVIPChannel"] is True
        assert (await dash.get("/api/cluster"))["brokers"]
        assert vip in dash.admin.instance.remoting.connections
        assert embedded_cluster.controller.fast_server.connections
        tls = await dash.post("/api/ops/tls", {"useTLS": True})
        assert tls["useTLS"] is True and dash.admin.instance.config.tls is True
        assert (await dash.post("/api/ops/tls", {"useTLS": False}))["useTLS"] is False
        assert (await dash.get("/api/cluster"))["brokers"]  # plain connections again


def test_the_ops_page_switches_the_name_server(browser: WebDriver, tmp_path: Path) -> None:
    with ThreadedDashboard(tmp_path / "one", enable_collect=False) as one:

        async def start_second(task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED) -> None:
            async with EmbeddedCluster(tmp_path / "two", **SMALL_STORE) as two:
                await create_topic(two.namesrv_addr, "OpsPageTopic", queues=1)
                task_status.started(two.namesrv_addr)
                await trio.sleep_forever()

        async def second() -> str:  # on the dashboard's loop, stopped with it
            namesrv: str = await one._extra.start(start_second)
            return namesrv

        two = one.call(second)
        open_page(browser, one, "/ops")
        assert table_rows(browser, "namesrvs", lambda r: len(r) == 1)[0] == [one.namesrv_addr, "in use"]
        form = browser.find_element(By.ID, "add-namesrv")
        form.find_element(By.NAME, "newNamesrvAddr").send_keys(two)
        form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        table_rows(browser, "namesrvs", lambda r: len(r) == 2)
        click(browser, f'button[data-use="{two}"]')
        wait_for(browser, lambda d: f"now reads the cluster through {two}" in banner(d).text)
        assert browser.find_element(By.CSS_SELECTOR, "header .meta .namesrv").text == two
        open_page(browser, one, "/topics")
        click(browser, 'button[data-kind="NORMAL"]')
        assert table_rows(browser, "topics", lambda r: any(c[0] == "OpsPageTopic" for c in r))
        assert browser.find_element(By.CSS_SELECTOR, "header .meta .namesrv").text == two

        open_page(browser, one, "/ops")  # the VIP channel, on by default, switched off from the page
        box = browser.find_element(By.CSS_SELECTOR, "#tls input[name=useVIPChannel]")
        wait_for(browser, lambda d: box.is_selected())
        box.click()
        browser.find_element(By.CSS_SELECTOR, "#tls button[type=submit]").click()
        wait_for(browser, lambda d: "VIP channel off" in banner(d).text)
        assert one.app is not None and one.app.state.admin.instance.config.vip_channel_enabled is False
