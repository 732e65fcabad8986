"""The Proxy page, as rocketmq-dashboard's ``ProxyController``: the proxy addresses the dashboard knows
(``rocketmq.config.proxyAddrs``, ``proxyAddr``), the current one, adding one (``addProxyAddr.do``) and picking the
current one (``updateProxyAddr.do``); nothing is written to a file, as rocketmq-dashboard keeps them in its
``RMQConfigure``."""

from __future__ import annotations

from pathlib import Path

import trio
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from broker.embedded import EmbeddedCluster
from dashboard.settings import load_settings
from tests.dashboard.browser import banner, click, table_rows, wait_for
from tests.dashboard.conftest import open_dash
from tests.dashboard.live import ThreadedDashboard
from tests.dashboard.test_pages import open_page

FIRST, SECOND, THIRD = "127.0.0.1:8081", "127.0.0.1:9081", "10.0.0.7:8081"


def test_the_proxy_addresses_are_read_from_rocketmq_dashboards_settings(tmp_path: Path) -> None:
    """``RMQConfigure.setProxyAddrs``: the first of ``proxyAddrs`` is the current one, even when ``proxyAddr`` names
    another: Spring Boot's ``JavaBeanBinder`` binds RMQConfigure's properties in the order of its sorted getters,
    ``proxyAddr`` before ``proxyAddrs``, whose setter then makes the list's first current (ours let ``proxyAddr``
    win; found by a review). ``proxyAddr`` alone is current."""
    file = tmp_path / "application.properties"
    file.write_text(f"rocketmq.config.proxyAddrs={FIRST},{SECOND}\n")
    settings = load_settings(file, {})
    assert (settings.proxy_addr, settings.proxy_addrs) == (FIRST, (FIRST, SECOND))
    file.write_text(f"rocketmq.config.proxyAddrs={FIRST},{SECOND}\nrocketmq.config.proxyAddr={SECOND}\n")
    assert load_settings(file, {}).proxy_addr == FIRST
    file.write_text(f"rocketmq.config.proxyAddr={SECOND}\n")
    assert load_settings(file, {}).proxy_addr == SECOND
    assert (load_settings(None, {}).proxy_addr, load_settings(None, {}).proxy_addrs) == (None, ())


async def test_a_proxy_address_is_added_and_made_current(
    embedded_cluster: EmbeddedCluster, nursery: trio.Nursery
) -> None:
    async for dash in open_dash(embedded_cluster, nursery, proxy_addrs=(FIRST, SECOND), proxy_addr=FIRST):
        assert await dash.get("/api/proxy") == {"currentProxyAddr": FIRST, "proxyAddrList": [FIRST, SECOND]}
        added = await dash.post("/api/proxy/add", {"newProxyAddr": THIRD})
        assert added == {"currentProxyAddr": FIRST, "proxyAddrList": [FIRST, SECOND, THIRD]}
        assert (await dash.post("/api/proxy/add", {"newProxyAddr": SECOND}))["proxyAddrList"] == added["proxyAddrList"]
        assert (await dash.post("/api/proxy/current", {"proxyAddr": THIRD}))["currentProxyAddr"] == THIRD
        for bad in ("nohost", "127.0.0.1:99999", ""):
            await dash.post("/api/proxy/add", {"newProxyAddr": bad}, status=400)
            await dash.post("/api/proxy/current", {"proxyAddr": bad}, status=400)
        assert await dash.get("/api/proxy") == {"currentProxyAddr": THIRD, "proxyAddrList": [FIRST, SECOND, THIRD]}


async def test_adding_a_proxy_address_makes_the_first_one_current_again(
    embedded_cluster: EmbeddedCluster, nursery: trio.Nursery
) -> None:
    """rocketmq-dashboard's ``ProxyServiceImpl.addProxyAddrList`` hands the list back to ``RMQConfigure.setProxyAddrs``,
    which makes its first address the current one: an add (even of a known address) undoes a pick, and the first
    address added to an empty list is current. Ours kept the picked one (found by a review)."""
    async for dash in open_dash(embedded_cluster, nursery, proxy_addrs=(FIRST, SECOND), proxy_addr=SECOND):
        added = await dash.post("/api/proxy/add", {"newProxyAddr": THIRD})
        assert added == {"currentProxyAddr": FIRST, "proxyAddrList": [FIRST, SECOND, THIRD]}
        await dash.post("/api/proxy/current", {"proxyAddr": THIRD})
        assert (await dash.post("/api/proxy/add", {"newProxyAddr": SECOND}))["currentProxyAddr"] == FIRST
    async for dash in open_dash(embedded_cluster, nursery):
        assert await dash.post("/api/proxy/add", {"newProxyAddr": THIRD}) == {
            "currentProxyAddr": THIRD,
            "proxyAddrList": [THIRD],
        }


def test_the_proxy_page_adds_an_address_and_picks_the_current_one(browser: WebDriver, tmp_path: Path) -> None:
    with ThreadedDashboard(tmp_path / "cluster", enable_collect=False, proxy_addrs=(FIRST,)) as live:
        open_page(browser, live, "/proxy")
        assert table_rows(browser, "proxies", lambda r: len(r) == 1)[0] == [FIRST, "current"]
        form = browser.find_element(By.ID, "add-proxy")
        form.find_element(By.NAME, "newProxyAddr").send_keys(SECOND)
        form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        table_rows(browser, "proxies", lambda r: len(r) == 2)
        click(browser, f'button[data-use="{SECOND}"]')
        wait_for(browser, lambda d: f"{SECOND} is now the current proxy" in banner(d).text)
        open_page(browser, live, "/proxy")  # held by the dashboard, not the page
        assert table_rows(browser, "proxies", lambda r: len(r) == 2) == [[FIRST, "use"], [SECOND, "current"]]
