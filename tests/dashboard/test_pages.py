"""The pages in a real headless Chromium against a live dashboard and embedded cluster: what a person sees and does.
The last test writes a 1280x800 screenshot of every page into ``docs/screenshots/`` for the README."""

from __future__ import annotations

import io
import json
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import attrs
import httpx
import pytest
import trio
from openpyxl import load_workbook
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from client import ConsumeConcurrentlyStatus, ConsumeFromWhere, Message, MessageExt, SendResult, api
from client.config import ClientConfig
from client.consumer.consume import retry_copy_properties
from client.sync import Admin, Producer, PushConsumer
from dashboard.dlq import EXPORT_COLUMNS
from dashboard.history import DayFiles
from remoting.client import RemotingClient
from remoting.codec.bodies import MessageQueue
from remoting.codec.bodies.broker_metadata import SubscriptionGroupConfig
from tests.client.test_master_watch import register_as_master
from tests.dashboard.browser import HANG_GUARD, banner, click, rows, table_rows, wait_for
from tests.dashboard.live import ThreadedDashboard

CONSUME_SUCCESS = ConsumeConcurrentlyStatus.CONSUME_SUCCESS
SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedDashboard]:
    """One cluster and dashboard for the module, sampling the charts every second."""
    with ThreadedDashboard(tmp_path_factory.mktemp("dash") / "cluster", sample_interval=1.0) as dashboard:
        yield dashboard


def open_page(driver: WebDriver, live: ThreadedDashboard, path: str) -> None:
    driver.get(live.url + path)
    wait_for(driver, lambda d: d.execute_script("return document.readyState") == "complete")


def create_topic(live: ThreadedDashboard, topic: str, queues: int = 2) -> None:
    with Admin(live.namesrv_addr) as admin:
        admin.create_topic(topic, read_queue_nums=queues, write_queue_nums=queues)
        deadline = time.monotonic() + HANG_GUARD
        while topic not in admin.topic_list():
            assert time.monotonic() < deadline, f"{topic} never routed"
            time.sleep(0.05)


def test_cluster_page_lists_the_embedded_broker(browser: WebDriver, live: ThreadedDashboard) -> None:
    open_page(browser, live, "/cluster")
    [row] = table_rows(browser, "brokers", lambda r: len(r) == 1)
    assert row[:6] == ["DefaultCluster", "broker-a", "0", "ASYNC_MASTER", row[4], "V4_9_8"]
    assert row[4].startswith("127.0.0.1:")
    heads = [th.text for th in browser.find_elements(By.CSS_SELECTOR, 'table[data-table="brokers"] th')]
    assert heads[8:12] == ["Put today", "Got today", "Put yesterday", "Got yesterday"]  # rocketmq-dashboard's counts
    browser.find_element(By.LINK_TEXT, row[4]).click()
    assert table_rows(browser, "config", lambda r: ["brokerName", "broker-a"] in r)


def test_a_topic_created_in_the_page_is_in_mqadmin_topic_list(browser: WebDriver, live: ThreadedDashboard) -> None:
    open_page(browser, live, "/topics")
    wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#kinds button"))  # the list has loaded
    form = browser.find_element(By.ID, "create-topic")
    form.find_element(By.NAME, "topic").send_keys("PageTopic")
    click(browser, "#create-targets input[name=clusterNameList]")  # a new topic goes where it is told
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait_for(browser, lambda d: "PageTopic created" in banner(d).text)
    mqadmin = [sys.executable, "-m", "client.mqadmin", "--json", "topicList", "-n", live.namesrv_addr]
    listed = json.loads(subprocess.run(mqadmin, check=True, capture_output=True, text=True, timeout=60).stdout)
    assert "PageTopic" in json.dumps(listed)
    filter_box = browser.find_element(By.CSS_SELECTOR, "input[data-role=filter]")
    filter_box.send_keys("pagetop")
    assert table_rows(browser, "topics", lambda r: len(r) == 1)[0][0] == "PageTopic"


def test_a_broker_refusal_shows_its_remark_in_the_page(browser: WebDriver, live: ThreadedDashboard) -> None:
    open_page(browser, live, "/topics")
    form = browser.find_element(By.ID, "create-topic")
    form.find_element(By.NAME, "topic").send_keys("bad|topic?")
    click(browser, "#create-targets input[name=clusterNameList]")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait_for(browser, lambda d: "illegal characters" in banner(d).text)
    assert "The broker refused (code 1)" in banner(browser).text and "Traceback" not in browser.page_source


def test_every_list_sorts_on_a_header_click(browser: WebDriver, live: ThreadedDashboard) -> None:
    open_page(browser, live, "/topics")
    click(browser, 'button[data-kind="ALL"]')
    first = [r[0] for r in table_rows(browser, "topics", lambda r: len(r) > 3)]
    assert first == sorted(first, key=str.lower) or first == sorted(first)
    browser.find_element(By.CSS_SELECTOR, 'table[data-table="topics"] th[data-key="topic"]').click()
    assert [r[0] for r in rows(browser, "topics")] == list(reversed(first))
    open_page(browser, live, "/groups")  # the groups are tabbed by kind too, the broker's own groups apart
    wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#kinds button.active"))
    assert all(r[1] == "NORMAL" for r in rows(browser, "groups"))
    click(browser, 'button[data-kind="SYSTEM"]')
    system = table_rows(browser, "groups", lambda r: len(r) > 1)
    assert {r[1] for r in system} == {"SYSTEM"} and "TOOLS_CONSUMER" in [r[0] for r in system]
    browser.find_element(By.CSS_SELECTOR, 'table[data-table="groups"] th[data-key="group"]').click()
    assert [r[0] for r in rows(browser, "groups")] == [r[0] for r in reversed(system)]
    kinds = [b.get_attribute("data-kind") for b in browser.find_elements(By.CSS_SELECTOR, "#kinds button")]
    assert kinds == ["NORMAL", "FIFO", "SYSTEM", "ALL"]  # rocketmq-dashboard's group types, and all of them


def test_a_test_message_sent_from_the_topic_page_with_trace_on_is_traced(
    browser: WebDriver, live: ThreadedDashboard
) -> None:
    """The test message form's "Enable message trace" (rocketmq-dashboard's ``traceEnabled``): the send is traced."""
    create_topic(live, "TracedFormTopic", queues=1)
    open_page(browser, live, "/topic?topic=TracedFormTopic")
    form = browser.find_element(By.ID, "send")
    form.find_element(By.NAME, "body").send_keys("traced from the form")
    form.find_element(By.NAME, "traceEnabled").click()
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait_for(browser, lambda d: "SEND_OK" in d.find_element(By.ID, "sent").text)
    msg_id = browser.find_element(By.CSS_SELECTOR, "#sent a").text
    deadline = time.monotonic() + HANG_GUARD
    # an error (the trace topic not routed yet) has no records either
    while not any(
        r["type"] == "Pub" for r in httpx.get(f"{live.url}/api/message/trace?id={msg_id}").json().get("records", [])
    ):
        assert time.monotonic() < deadline, "the test message's send was not traced"
        time.sleep(0.2)


def test_deleting_a_topic_asks_first(browser: WebDriver, live: ThreadedDashboard) -> None:
    create_topic(live, "DoomedTopic")
    open_page(browser, live, "/topic?topic=DoomedTopic")
    table_rows(browser, "queues", lambda r: len(r) == 2)
    browser.find_element(By.ID, "delete").click()
    browser.switch_to.alert.dismiss()
    with Admin(live.namesrv_addr) as admin:
        assert "DoomedTopic" in admin.topic_list()
        browser.find_element(By.ID, "delete").click()
        browser.switch_to.alert.accept()
        wait_for(browser, lambda d: "deleted" in banner(d).text)
        assert "DoomedTopic" not in admin.topic_list()


def test_a_message_sent_by_the_python_client_is_found_by_key_with_its_body(
    browser: WebDriver, live: ThreadedDashboard
) -> None:
    create_topic(live, "KeyTopic")
    with Producer("page-pg", live.namesrv_addr) as producer:
        sent = producer.send(Message("KeyTopic", "payload for the page ✓".encode(), tags="TagK", keys="order-42"))
    open_page(browser, live, "/messages?mode=key&topic=KeyTopic&key=order-42")
    [row] = table_rows(browser, "messages", lambda r: len(r) == 1)
    assert row[:3] == [sent.msg_id, "TagK", "order-42"]
    browser.find_element(By.LINK_TEXT, sent.msg_id).click()
    wait_for(browser, lambda d: d.find_element(By.ID, "body").text == "payload for the page ✓")
    assert ["KEYS", "order-42"] in table_rows(browser, "properties", lambda r: len(r) > 3)
    wait_for(browser, lambda d: "trace" in d.find_element(By.ID, "trace").text.lower())
    browser.find_element(By.ID, "toggle-hex").click()
    assert browser.find_element(By.ID, "body").text.startswith("70 61 79")


def test_a_binary_body_shows_hex_first_and_its_text_on_a_click(browser: WebDriver, live: ThreadedDashboard) -> None:
    """A body with control characters opens as hex; its text view is still one click away."""
    create_topic(live, "BinaryPageTopic")
    with Producer("binary-pg", live.namesrv_addr) as producer:
        sent = producer.send(Message("BinaryPageTopic", b"\x1b[1mbold\x1b[0m"))
    open_page(browser, live, f"/message?topic=BinaryPageTopic&id={sent.msg_id}")
    wait_for(browser, lambda d: d.find_element(By.ID, "body").text.startswith("1b 5b 31 6d"))
    browser.find_element(By.ID, "toggle-hex").click()
    wait_for(browser, lambda d: "bold" in d.find_element(By.ID, "body").text)


def test_a_traced_message_shows_its_trace(browser: WebDriver, live: ThreadedDashboard) -> None:
    create_topic(live, "TracedPageTopic")
    with Producer("traced-page-pg", live.namesrv_addr, enable_msg_trace=True) as producer:
        sent = producer.send(Message("TracedPageTopic", b"traced", keys="order-77"))
    deadline = time.monotonic() + HANG_GUARD
    while True:  # trace records are written in batches: reload until the page has them
        open_page(browser, live, f"/message?topic=TracedPageTopic&id={sent.msg_id}")
        wait_for(browser, lambda d: d.find_element(By.ID, "trace").text)
        traced = rows(browser, "trace")
        if traced:
            break
        assert time.monotonic() < deadline, browser.find_element(By.ID, "trace").text
        time.sleep(0.2)
    [pub] = traced
    assert pub[0] == "Pub" and "traced-page-pg" in pub


def test_the_message_page_reads_the_trace_topic_typed(browser: WebDriver, live: ThreadedDashboard) -> None:
    """The trace section takes a trace topic, as rocketmq-dashboard's trace page picks one for
    ``viewMessageTraceGraph.query``: a trace in a producer's own trace topic shows once its topic is typed."""
    create_topic(live, "PickedTracePageTopic")
    producer = Producer(
        "picked-trace-page-pg", live.namesrv_addr, enable_msg_trace=True, customized_trace_topic="PageTraceTopic"
    )
    with producer:
        sent = producer.send(Message("PickedTracePageTopic", b"traced", keys="order-78"))
    deadline = time.monotonic() + HANG_GUARD
    while True:  # trace records are written in batches: look again until the page has them
        open_page(browser, live, f"/message?topic=PickedTracePageTopic&id={sent.msg_id}")
        box = wait_for(browser, lambda d: d.find_element(By.ID, "trace-topic"))
        box.send_keys("PageTraceTopic")
        click(browser, "#trace-lookup")
        time.sleep(0.3)
        traced = rows(browser, "trace")
        if traced:
            break
        assert time.monotonic() < deadline, browser.find_element(By.ID, "trace").text
    [pub] = traced
    assert pub[0] == "Pub" and "picked-trace-page-pg" in pub


def test_a_consumer_groups_lag_drops_to_zero_after_consuming(browser: WebDriver, live: ThreadedDashboard) -> None:
    create_topic(live, "LagPageTopic")
    consumed: list[MessageExt] = []
    config = ClientConfig(namesrv_addr=live.namesrv_addr, persist_consumer_offset_interval=0.2)

    def run_consumer(expected: int) -> None:
        consumer = PushConsumer("page-cg", config=config, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
        consumer.subscribe("LagPageTopic", "*")

        def listener(msgs: list[MessageExt]) -> ConsumeConcurrentlyStatus:
            consumed.extend(msgs)
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        consumer.register_message_listener(listener)
        with consumer:
            deadline = time.monotonic() + HANG_GUARD
            while len(consumed) < expected:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            time.sleep(0.6)  # lets the offsets be committed (every 0.2 s) before the consumer stops

    with Producer("lag-page-pg", live.namesrv_addr) as producer:
        producer.send(Message("LagPageTopic", b"first"))
        run_consumer(1)  # the group now has offsets
        for i in range(5):
            producer.send(Message("LagPageTopic", f"m{i}".encode()))
    open_page(browser, live, "/groups")
    before = table_rows(browser, "groups", lambda r: any(c[0] == "page-cg" for c in r))
    assert next(r for r in before if r[0] == "page-cg")[7] == "5"  # Diff total
    run_consumer(6)
    deadline = time.monotonic() + HANG_GUARD
    while True:
        open_page(browser, live, "/groups")
        after = table_rows(browser, "groups", lambda r: any(c[0] == "page-cg" for c in r))
        if next(r for r in after if r[0] == "page-cg")[7] == "0":
            break
        assert time.monotonic() < deadline
        time.sleep(0.2)
    # Resetting to the form's default time (an hour ago) asks first; once accepted, all six are to consume again.
    open_page(browser, live, "/group?group=page-cg")
    table_rows(browser, "progress", lambda r: len(r) >= 2)
    click(browser, "#reset select[name=topic] option[value=LagPageTopic]")
    reset_once_confirmed(browser, "#reset button[type=submit]", "0")
    wait_for(browser, lambda d: diff_total(d) == "6")


def test_the_group_page_names_the_client_holding_each_queue(browser: WebDriver, live: ThreadedDashboard) -> None:
    """The progress table's Client column: the online consumer each queue is assigned to, as rocketmq-dashboard's
    consumer detail shows ``clientInfo``."""
    create_topic(live, "HeldPageTopic", queues=1)
    config = ClientConfig(namesrv_addr=live.namesrv_addr, persist_consumer_offset_interval=0.2)
    consumer = PushConsumer(
        "held-page-cg", config=config, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )
    consumer.subscribe("HeldPageTopic", "*")
    consumer.register_message_listener(lambda msgs: CONSUME_SUCCESS)
    with Producer("held-page-pg", live.namesrv_addr) as producer, consumer:
        producer.send(Message("HeldPageTopic", b"held"))
        client = consumer.consumer.instance.client_id
        deadline = time.monotonic() + HANG_GUARD
        while True:  # until the consumer has the queue and an offset committed in it
            open_page(browser, live, "/group?group=held-page-cg")
            found = table_rows(browser, "progress", lambda r: True)
            if [r[:4] for r in found if r[0] == "HeldPageTopic"] == [["HeldPageTopic", "broker-a", "0", client]]:
                break
            assert time.monotonic() < deadline, found
            time.sleep(0.2)


def test_the_group_page_shows_a_clients_running_info_and_stacks(browser: WebDriver, live: ThreadedDashboard) -> None:
    """Each connection has a "running info" and a "stacks" action showing the client's ConsumerRunningInfo (as
    ``mqadmin consumerStatus`` prints it), the second with its thread stacks: rocketmq-dashboard's
    ``consumerRunningInfo.query`` with ``jstack`` false or true."""
    create_topic(live, "RunningPageTopic", queues=1)
    consumer = PushConsumer("running-page-cg", live.namesrv_addr)
    consumer.subscribe("RunningPageTopic", "*")
    consumer.register_message_listener(lambda msgs: CONSUME_SUCCESS)
    with consumer:
        client = consumer.consumer.instance.client_id
        deadline = time.monotonic() + HANG_GUARD
        while True:  # until the consumer is online
            open_page(browser, live, "/group?group=running-page-cg")
            time.sleep(0.2)
            if browser.find_elements(By.CSS_SELECTOR, f'button[data-running="{client}"]'):
                break
            assert time.monotonic() < deadline, "the client is not listed"
        shown = browser.find_element(By.ID, "running-info")
        click(browser, f'button[data-running="{client}"]')
        wait_for(browser, lambda d: "RunningPageTopic" in shown.text and "#Consumer Subscription#" in shown.text)
        assert "#Consumer jstack#" not in shown.text and client in shown.text
        click(browser, f'button[data-stacks="{client}"]')
        wait_for(browser, lambda d: "#Consumer jstack#" in shown.text and "TID: " in shown.text)


def test_skipping_the_accumulated_messages_from_the_group_page(browser: WebDriver, live: ThreadedDashboard) -> None:
    """rocketmq-dashboard's "Skip message accumulate": the group's offsets on the topic move to its end (a reset to
    -1, forced), after a confirmation; the backlog is gone from the diff total."""
    create_topic(live, "SkipPageTopic", queues=1)
    with Producer("skip-page-pg", live.namesrv_addr) as producer:
        for i in range(3):
            producer.send(Message("SkipPageTopic", f"m{i}".encode()))
    with Admin(live.namesrv_addr) as admin:
        admin.create_subscription_group(SubscriptionGroupConfig("skip-page-cg"))
        admin.update_consumer_offset(live.broker_addr, "skip-page-cg", MessageQueue("SkipPageTopic", "broker-a", 0), 0)
    open_page(browser, live, "/group?group=skip-page-cg")
    wait_for(browser, lambda d: diff_total(d) == "3")
    click(browser, "#reset select[name=topic] option[value=SkipPageTopic]")
    reset_once_confirmed(browser, "#skip", "3")
    wait_for(browser, lambda d: diff_total(d) == "0")


def reset_once_confirmed(driver: WebDriver, button: str, diff_before: str) -> None:
    """Click the group page's reset ``button``: declined, the question changes nothing (the diff total stays
    ``diff_before``); asked again and accepted, the offsets are reset."""
    driver.find_element(By.CSS_SELECTOR, button).click()
    driver.switch_to.alert.dismiss()
    assert diff_total(driver) == diff_before and not banner(driver).text
    driver.find_element(By.CSS_SELECTOR, button).click()
    driver.switch_to.alert.accept()
    wait_for(driver, lambda d: "Offsets reset" in banner(d).text)


def diff_total(driver: WebDriver) -> str:
    """The "Diff total" of the consumer group page's summary."""
    return str(driver.find_element(By.XPATH, "//dt[text()='Diff total']/following-sibling::dd[1]").text)


def test_a_chart_has_points_after_a_short_load(browser: WebDriver, live: ThreadedDashboard) -> None:
    create_topic(live, "ChartPageTopic")
    with Producer("chart-page-pg", live.namesrv_addr) as producer:
        deadline = time.monotonic() + 3.5  # a load across a few of the 1 s samples
        while time.monotonic() < deadline:
            producer.send(Message("ChartPageTopic", b"load"))
    open_page(browser, live, "/charts?topic=ChartPageTopic")

    def points(d: WebDriver) -> bool:
        charts = d.find_elements(By.CSS_SELECTOR, '[data-chart="Topic ChartPageTopic"]')
        return bool(charts) and int(charts[0].get_attribute("data-points") or 0) >= 2

    deadline = time.monotonic() + HANG_GUARD
    while not points(browser):
        assert time.monotonic() < deadline, "the topic's chart never had two points"
        time.sleep(0.5)
        open_page(browser, live, "/charts?topic=ChartPageTopic")
    assert browser.find_elements(By.CSS_SELECTOR, "#broker-charts canvas")
    assert browser.find_elements(By.CSS_SELECTOR, "#topic-charts canvas")


def test_the_date_picker_draws_a_past_days_files(browser: WebDriver, live: ThreadedDashboard) -> None:
    """rocketmq-dashboard's DatePicker: a day picked on the Charts page is read from that day's files."""
    files = DayFiles(Path(live.app.state.settings.data_path))
    at = int(time.mktime((2026, 3, 4, 12, 0, 0, 0, 0, -1)) * 1000)
    topic_lines = [f"{at},4.00000,240,1.00000,60", f"{at + 60_000},5.00000,540,2.00000,180"]
    files.write("2026-03-04", {"broker-z:0": [f"{at},3.00000,4.00000,1.00000"]}, {"PastPageTopic": topic_lines})
    open_page(browser, live, "/charts")
    picker = browser.find_element(By.ID, "chart-date")
    assert picker.get_attribute("value") == time.strftime("%Y-%m-%d")  # today, the dashboard's memory
    browser.execute_script("arguments[0].value = '2026-03-04'; arguments[0].dispatchEvent(new Event('change'))", picker)

    def drawn(d: WebDriver) -> bool:
        charts = d.find_elements(By.CSS_SELECTOR, '[data-chart="Topic PastPageTopic"]')
        return bool(charts) and charts[0].get_attribute("data-points") == "2"

    wait_for(browser, drawn)
    assert browser.find_elements(By.CSS_SELECTOR, '[data-chart="Broker broker-z:0"] canvas')
    assert "date=2026-03-04" in browser.current_url
    open_page(browser, live, "/charts?date=2026-03-04")  # a link keeps the day
    wait_for(browser, drawn)


@contextmanager
def dead_master_registered(namesrv: str) -> Iterator[None]:
    """A master of ``broker-dead`` at 127.0.0.1:1 registered with the name server while the block runs (on its own
    Trio loop in a thread: the registration lasts as long as its connection)."""
    registered, release = threading.Event(), threading.Event()

    async def hold() -> None:
        async with RemotingClient() as client:
            await register_as_master(client, namesrv, "127.0.0.1:1", "DeadPageTopic", "broker-dead")
            registered.set()
            await trio.to_thread.run_sync(release.wait)

    thread = threading.Thread(target=trio.run, args=(hold,), daemon=True)
    thread.start()
    try:
        assert registered.wait(HANG_GUARD), "the dead master was never registered"
        yield
    finally:
        release.set()
        thread.join(HANG_GUARD)


def test_the_groups_page_says_which_broker_it_could_not_read(browser: WebDriver, live: ThreadedDashboard) -> None:
    with dead_master_registered(live.namesrv_addr):
        open_page(browser, live, "/groups")
        wait_for(browser, lambda d: "broker-dead (127.0.0.1:1)" in banner(d).text)
        assert "not listed" in banner(browser).text
        click(browser, 'button[data-kind="SYSTEM"]')  # the live broker's own groups are still listed
        table_rows(browser, "groups", lambda r: any(row[0] == "TOOLS_CONSUMER" for row in r))


def kill_for(live: ThreadedDashboard, sent: SendResult, group: str) -> None:
    """Send ``sent`` back for ``group`` straight to its DLQ (delay level -1), as a consumer that gives up does."""

    async def send_back() -> None:
        admin = live.app.state.admin
        msg = await admin.query_msg_by_id(sent.offset_msg_id)
        await api.consumer_send_msg_back(
            admin.instance.remoting, live.broker_addr, msg, group, -1, 16, HANG_GUARD, sent.offset_msg_id
        )

    live.call(send_back)


def test_dead_letters_are_listed_and_resent_from_their_page(browser: WebDriver, live: ThreadedDashboard) -> None:
    create_topic(live, "DlqPageTopic", queues=1)
    with Producer("dlq-page-pg", live.namesrv_addr) as producer:
        sent = producer.send(Message("DlqPageTopic", b"dead on arrival", keys="dead-1"))
    kill_for(live, sent, "dlq-page-cg")
    received: list[bytes] = []
    consumer = PushConsumer("dlq-page-cg", live.namesrv_addr)
    consumer.subscribe("DlqPageTopic", "*")
    consumer.register_message_listener(lambda msgs: received.extend(m.body for m in msgs) or CONSUME_SUCCESS)
    with consumer:
        open_page(browser, live, "/dlq?group=dlq-page-cg")
        [row] = table_rows(browser, "dlq", lambda r: len(r) == 1)
        assert row[1:5] == [sent.msg_id, "DlqPageTopic", "", "dead-1"]
        browser.find_element(By.ID, "resend-selected").click()  # nothing selected yet: said so
        wait_for(browser, lambda d: "Select one or more" in banner(d).text)
        browser.find_element(By.CSS_SELECTOR, f'input[data-msg="{sent.msg_id}"]').click()
        browser.find_element(By.ID, "resend-selected").click()
        [resent] = table_rows(browser, "resent", lambda r: len(r) == 1)
        assert resent[:2] == [sent.offset_msg_id, "CR_SUCCESS"]
        wait_for(browser, lambda d: "1 of 1 consumed again" in banner(d).text)
        deadline = time.monotonic() + HANG_GUARD
        while received.count(b"dead on arrival") < 2:  # the original from offset 0, and the resent one
            assert time.monotonic() < deadline, received
            time.sleep(0.05)


def test_a_refused_search_leaves_the_listed_rows_with_their_own_group(
    browser: WebDriver, live: ThreadedDashboard
) -> None:
    """rocketmq-dashboard resends and exports the listed messages for the group they were listed for. A search for
    another group that is refused (its range ends before it begins) leaves the listed rows on the page; resending
    them must still go to their own group, never to the group typed in the form since."""
    create_topic(live, "DlqStaleTopic", queues=1)
    with Producer("dlq-stale-pg", live.namesrv_addr) as producer:
        sent = producer.send(Message("DlqStaleTopic", b"listed for its group"))
    kill_for(live, sent, "dlq-stale-cg")
    consumer = PushConsumer("dlq-stale-cg", live.namesrv_addr)
    consumer.subscribe("DlqStaleTopic", "*")
    consumer.register_message_listener(lambda msgs: CONSUME_SUCCESS)
    with consumer:
        open_page(browser, live, "/dlq?group=dlq-stale-cg")
        table_rows(browser, "dlq", lambda r: len(r) == 1)
        browser.find_element(By.CSS_SELECTOR, f'input[data-msg="{sent.msg_id}"]').click()
        form = browser.find_element(By.ID, "search")
        form.find_element(By.NAME, "group").clear()
        form.find_element(By.NAME, "group").send_keys("dlq-other-cg")
        browser.execute_script("document.querySelector('#search [name=end]').value = '2001-01-01T00:00:00'")
        form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        wait_for(browser, lambda d: "before its beginning" in banner(d).text)
        browser.find_element(By.ID, "resend-selected").click()
        [resent] = table_rows(browser, "resent", lambda r: len(r) == 1)
        assert resent[:3] == [sent.offset_msg_id, "CR_SUCCESS", consumer.consumer.instance.client_id], resent


def test_a_dead_letter_sent_back_by_the_client_is_resent_from_the_page(
    browser: WebDriver, live: ThreadedDashboard
) -> None:
    """A dead letter whose ORIGIN_MESSAGE_ID is the producer's msgId (a client's own retry copy, as
    DefaultMQPushConsumerImpl.sendMessageBack sends when the broker's send-back fails) is resent from the page as
    rocketmq-dashboard's dlqMessage.js does: its RETRY_TOPIC and ORIGIN_MESSAGE_ID name the original."""
    create_topic(live, "DlqUniqPageTopic", queues=1)
    with Producer("dlq-uniq-page-pg", live.namesrv_addr) as producer:
        sent = producer.send(Message("DlqUniqPageTopic", b"sent back by the client"))

        async def look_up() -> MessageExt:
            return await live.app.state.admin.query_msg_by_id(sent.offset_msg_id)  # type: ignore[no-any-return]

        original = live.call(look_up)
        properties = retry_copy_properties(original, sent.msg_id)
        del properties["DELAY"]
        copy = producer.send(Message("%RETRY%dlq-uniq-page-cg", original.body, properties=properties))
    kill_for(live, copy, "dlq-uniq-page-cg")
    consumer = PushConsumer("dlq-uniq-page-cg", live.namesrv_addr)
    consumer.subscribe("DlqUniqPageTopic", "*")
    consumer.register_message_listener(lambda msgs: CONSUME_SUCCESS)
    with consumer:
        open_page(browser, live, "/dlq?group=dlq-uniq-page-cg")
        table_rows(browser, "dlq", lambda r: len(r) == 1)
        browser.find_element(By.CSS_SELECTOR, f'input[data-msg="{sent.msg_id}"]').click()
        browser.find_element(By.ID, "resend-selected").click()
        [resent] = table_rows(browser, "resent", lambda r: len(r) == 1)
        assert resent[:2] == [sent.msg_id, "CR_SUCCESS"], resent


def test_exporting_two_dead_letters_of_one_message_exports_each(browser: WebDriver, live: ThreadedDashboard) -> None:
    """Every copy of a message keeps its producer's msgId (UNIQ_KEY), so a group's DLQ can hold two dead letters with
    one msgId (here the dead letter itself sent back again: reconsumeTimes 1 and 2). Selecting both and exporting
    must export both, not one of them twice: the page names each by its own offset msgId."""
    create_topic(live, "DlqTwiceTopic", queues=1)
    with Producer("dlq-twice-pg", live.namesrv_addr) as producer:
        sent = producer.send(Message("DlqTwiceTopic", b"dead twice"))
    kill_for(live, sent, "dlq-twice-cg")
    with Admin(live.namesrv_addr) as admin:
        first = admin.query_msg_by_unique_key("%DLQ%dlq-twice-cg", sent.msg_id)
    kill_for(live, attrs.evolve(sent, offset_msg_id=first[0].msg_id), "dlq-twice-cg")
    open_page(browser, live, "/dlq?group=dlq-twice-cg")
    table_rows(browser, "dlq", lambda r: len(r) == 2)
    for box in browser.find_elements(By.CSS_SELECTOR, f'input[data-msg="{sent.msg_id}"]'):
        box.click()
    browser.execute_script(
        """const original = window.fetch;
        window.exported = null;
        window.fetch = (url, init) => {
          if (url === "/api/dlq/export/batch") window.exported = init.body;
          return original(url, init);
        };"""
    )
    browser.find_element(By.ID, "export-selected").click()
    body = wait_for(browser, lambda d: d.execute_script("return window.exported"))
    headers = {"Content-Type": "application/json"}
    response = httpx.post(live.url + "/api/dlq/export/batch", content=body, headers=headers)
    sheet = load_workbook(io.BytesIO(response.content)).active
    assert sheet is not None
    exported = [dict(zip(EXPORT_COLUMNS, row, strict=True)) for row in list(sheet.iter_rows(values_only=True))[1:]]
    assert sorted(r["reconsumeTimes"] for r in exported) == [1, 2], exported


def test_a_dead_letters_export_is_named_as_rocketmq_dashboards(browser: WebDriver, live: ThreadedDashboard) -> None:
    """One dead letter exports as ``dlq.xlsx``, several as ``dlqs.xlsx``: the file names of rocketmq-dashboard's
    ``exportDlqMessage.do`` and ``batchExportDlqMessage.do`` (DlqMessageController)."""
    create_topic(live, "DlqNamedTopic", queues=1)
    with Producer("dlq-named-pg", live.namesrv_addr) as producer:
        sent = [producer.send(Message("DlqNamedTopic", f"dead {i}".encode())) for i in range(2)]
    for each in sent:
        kill_for(live, each, "dlq-named-cg")
    open_page(browser, live, "/dlq?group=dlq-named-cg")
    table_rows(browser, "dlq", lambda r: len(r) == 2)
    browser.execute_script(
        """window.downloads = [];
        HTMLAnchorElement.prototype.click = function () { window.downloads.push(this.download); };"""
    )
    boxes = [browser.find_element(By.CSS_SELECTOR, f'input[data-msg="{s.msg_id}"]') for s in sent]
    boxes[0].click()
    browser.find_element(By.ID, "export-selected").click()
    wait_for(browser, lambda d: d.execute_script("return window.downloads.length") == 1)
    boxes[1].click()
    browser.find_element(By.ID, "export-selected").click()
    wait_for(browser, lambda d: d.execute_script("return window.downloads.length") == 2)
    assert browser.execute_script("return window.downloads") == ["dlq.xlsx", "dlqs.xlsx"]


PAGES = {
    "cluster": "/cluster",
    "topics": "/topics",
    "topic": "/topic?topic=ShotTopic",
    "groups": "/groups",
    "group": "/group?group=shot-cg",
    "producers": "/producers?topic=ShotTopic&group=shot-pg",
    "messages": "/messages?mode=time&topic=ShotTopic",
    "message": "",
    "dlq": "/dlq?group=shot-cg",
    "charts": "/charts?topic=ShotTopic",
}


def test_screenshots_of_every_page_at_1280x800(browser: WebDriver, live: ThreadedDashboard) -> None:
    create_topic(live, "ShotTopic", queues=4)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    config = ClientConfig(namesrv_addr=live.namesrv_addr, persist_consumer_offset_interval=0.2)
    consumer = PushConsumer("shot-cg", config=config, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    consumer.subscribe("ShotTopic", "*")
    consumer.register_message_listener(lambda msgs: ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
    with Producer("shot-pg", live.namesrv_addr) as producer, consumer:
        deadline = time.monotonic() + 3.5
        sent = []
        while time.monotonic() < deadline:
            body = json.dumps({"order": len(sent), "amount": 12.5, "currency": "EUR"}).encode()
            sent.append(producer.send(Message("ShotTopic", body, tags="orders", keys=f"order-{len(sent)}")))
        for dead in sent[-3:]:
            kill_for(live, dead, "shot-cg")
        time.sleep(2.2)  # two more chart samples
        pages = {**PAGES, "message": f"/message?topic=ShotTopic&id={sent[-1].msg_id}"}
        for name, path in pages.items():
            open_page(browser, live, path)
            wait_for(browser, lambda d: d.execute_script("return document.querySelectorAll('table,canvas').length") > 0)
            if name == "producers":  # the group's producer, and the same among every producer online
                table_rows(browser, "producers", lambda r: len(r) == 1)
                table_rows(browser, "all-producers", lambda r: any(c[0] == "shot-pg" for c in r))
            time.sleep(0.3)  # the last fetches of the page
            tables = browser.execute_script("return document.querySelectorAll('table[data-table]').length")
            filters = browser.execute_script("return document.querySelectorAll('input[data-role=filter]').length")
            assert tables == filters, f"{name}: every list has its filter box"
            target = SCREENSHOTS / f"{name}.png"
            assert browser.save_screenshot(str(target)), name
            width, height = struct.unpack(">II", target.read_bytes()[16:24])
            assert (width, height) == (1280, 800), name


def test_the_dlq_pages_group_list_leaves_out_the_brokers_own_groups(
    browser: WebDriver, live: ThreadedDashboard
) -> None:
    """rocketmq-dashboard's DLQ page offers every consumer group but the ``CID_RMQ_SYS_`` ones (its
    ``dlqmessage.jsx`` filters on ``SYS_GROUP_TOPIC_PREFIX``); a filter on ``%SYS%``, a prefix no group has, let them
    through."""
    create_topic(live, "DlqListTopic", queues=1)
    with Producer("dlq-list-pg", live.namesrv_addr) as producer:
        producer.send(Message("DlqListTopic", b"read by both"))
    for group in ("dlq-list-cg", "CID_RMQ_SYS_DLQ_LIST"):
        consume_one(live, group, "DlqListTopic")

    def offered(d: WebDriver) -> list[str] | None:
        open_page(d, live, "/dlq")
        names = [o.get_attribute("value") for o in d.find_elements(By.CSS_SELECTOR, "#group-list option")]
        return names if "dlq-list-cg" in names else None

    names = wait_for(browser, offered)
    assert not [n for n in names if n.startswith("CID_RMQ_SYS_")], names
    assert "CID_RMQ_SYS_DLQ_LIST" in [g["group"] for g in httpx.get(live.url + "/api/groups").json()["groups"]]


def consume_one(live: ThreadedDashboard, group: str, topic: str) -> None:
    """Consume a message of ``topic`` as ``group``, whose offset is then committed as the consumer shuts down."""
    got: list[bytes] = []
    consumer = PushConsumer(group, live.namesrv_addr)
    consumer.subscribe(topic, "*")
    consumer.register_message_listener(lambda msgs: got.extend(m.body for m in msgs) or CONSUME_SUCCESS)
    with consumer:
        deadline = time.monotonic() + HANG_GUARD
        while not got:
            assert time.monotonic() < deadline, group
            time.sleep(0.05)
