"""How long mqdashboard's pages take against a cluster of many topics (1,000 by default), in headless Chromium.

    python -m bench.dashboard [--topics 1000] [--groups 50] [--rounds 5]

An embedded cluster and the dashboard run on 127.0.0.1 (one Trio loop in a thread, as the browser tests); the
topics and subscription groups are created through the admin client. One line times a chart sample over every topic
(``sample_ms``: the dashboard's background work every ``sample_interval``). Then, ``--rounds`` times for every page,
``page_ms`` is from the navigation's start to the page's table (or chart) being drawn with its data, measured in the
page, and ``api_ms`` the JSON call behind it alone, from Python. Each figure is the min, median and max over the
rounds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import urllib.request
from pathlib import Path

from selenium.webdriver.remote.webdriver import WebDriver

from client.sync import Admin
from remoting.codec.bodies.broker_metadata import SubscriptionGroupConfig
from tests.dashboard.browser import HANG_GUARD, chromium
from tests.dashboard.live import ThreadedDashboard

#: page -> (JSON call behind it, a CSS selector present once it is drawn with its data).
PAGES = {
    "/cluster": ("/api/cluster", 'table[data-table="brokers"] tbody tr'),
    "/topics": ("/api/topics", 'table[data-table="topics"] tbody tr'),
    "/topic?topic=BenchTopic0": ("/api/topic?topic=BenchTopic0", 'table[data-table="queues"] tbody tr'),
    "/groups": ("/api/groups", 'table[data-table="groups"] tbody tr'),
    "/messages?mode=time&topic=BenchTopic0": ("/api/messages/time?topic=BenchTopic0", 'table[data-table="messages"]'),
    "/charts": ("/api/charts/brokers", "#broker-charts canvas"),
}


def emit(record: dict[str, object]) -> None:
    print(json.dumps({"bench": "dashboard", **record}), flush=True)


def spread(samples: list[float]) -> dict[str, float]:
    return {
        "min": round(min(samples), 1),
        "median": round(statistics.median(samples), 1),
        "max": round(max(samples), 1),
    }


def populate(namesrv: str, topics: int, groups: int) -> float:
    """Create the topics and groups; seconds taken."""
    started = time.perf_counter()
    with Admin(namesrv) as admin:
        for i in range(topics):
            admin.create_topic(f"BenchTopic{i}", read_queue_nums=4, write_queue_nums=4)
        for i in range(groups):
            admin.create_subscription_group(SubscriptionGroupConfig(group_name=f"bench-cg-{i}"))
        deadline = time.monotonic() + HANG_GUARD
        while sum(t.startswith("BenchTopic") for t in admin.topic_list()) < topics:
            assert time.monotonic() < deadline, "the name server never listed every topic"
            time.sleep(0.1)
    return time.perf_counter() - started


_OBSERVER = """(() => {
  const selector = %s;
  const check = () => {
    if (window.__drawn === undefined && document.querySelector(selector)) window.__drawn = performance.now();
  };
  new MutationObserver(check).observe(document, { childList: true, subtree: true });
})();"""


def page_ms(driver: WebDriver, url: str, selector: str) -> float:
    """Milliseconds from the navigation's start to ``selector`` matching, measured in the page (a MutationObserver
    installed before the page's own scripts), so the driver's round trips do not count."""
    script = driver.execute_cdp_cmd(
        "Page.addScriptToEvaluateOnNewDocument", {"source": _OBSERVER % json.dumps(selector)}
    )
    try:
        driver.get(url)
        deadline = time.monotonic() + HANG_GUARD
        while (drawn := driver.execute_script("return window.__drawn === undefined ? null : window.__drawn")) is None:
            assert time.monotonic() < deadline, f"{url} never drew {selector}"
            time.sleep(0.01)
    finally:
        driver.execute_cdp_cmd("Page.removeScriptToEvaluateOnNewDocument", {"identifier": script["identifier"]})
    return float(drawn)


def api_ms(url: str) -> float:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=HANG_GUARD) as response:
        response.read()
    return (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--groups", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory(prefix="bench-dashboard-") as tmp,
        ThreadedDashboard(Path(tmp) / "cluster", sample_interval=3600.0) as live,
    ):
        seconds = populate(live.namesrv_addr, args.topics, args.groups)
        emit({"what": "populate", "topics": args.topics, "groups": args.groups, "seconds": round(seconds, 2)})
        assert live.app is not None
        sampler = live.app.state.sampler
        samples = []
        for _ in range(max(2, args.rounds)):
            started = time.perf_counter()
            live.call(sampler.sample_once)
            samples.append((time.perf_counter() - started) * 1000)
        emit({"what": "sample_ms", "topics": args.topics, **spread(samples)})
        with chromium() as driver:
            for page, (api, selector) in PAGES.items():
                page_load = [page_ms(driver, live.url + page, selector) for _ in range(args.rounds)]
                api_call = [api_ms(live.url + api) for _ in range(args.rounds)]
                emit({"what": "page", "page": page, "topics": args.topics, "page_ms": spread(page_load),
                          "api_ms": spread(api_call)})  # fmt: skip


if __name__ == "__main__":
    main()
