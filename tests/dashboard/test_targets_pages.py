"""The create-or-update forms' cluster and broker picks in a real headless Chromium, against a live dashboard and an
embedded cluster of two masters (broker-a, and broker-b started beside it), as rocketmq-dashboard's dialogs."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import Select

from client.admin import Admin
from client.errors import MQBrokerError, TopicRouteNotFoundError
from remoting.codec.bodies.broker_metadata import SubscriptionGroupConfig
from tests.dashboard.browser import HANG_GUARD, banner, click, table_rows, wait_for
from tests.dashboard.live import ThreadedDashboard
from tests.dashboard.test_pages import open_page


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ThreadedDashboard, str]]:
    """The live dashboard and broker-b's address."""
    with ThreadedDashboard(tmp_path_factory.mktemp("dash") / "cluster", enable_collect=False) as live:
        addr, stop = live.start_extra_broker("broker-b")
        wait_until(live, lambda: _has_broker(live, "broker-b"))
        try:
            yield live, addr
        finally:
            stop()


def _admin(live: ThreadedDashboard) -> Admin:
    assert live.app is not None
    admin: Admin = live.app.state.admin
    return admin


async def _has_broker(live: ThreadedDashboard, name: str) -> bool:
    return name in (await _admin(live).cluster_info()).broker_addr_table


def wait_until(live: ThreadedDashboard, check: Callable[[], Any]) -> None:
    """Poll the coroutine function ``check`` on the dashboard's loop until it is true (a hang guard, no threshold)."""
    deadline = time.monotonic() + HANG_GUARD
    while not live.call(check):
        assert time.monotonic() < deadline, "never true"
        time.sleep(0.05)


def create_routed(live: ThreadedDashboard, topic: str, addr: str, **config: Any) -> None:
    """Create ``topic`` with 2 read and 2 write queues (and ``config``) on the broker at ``addr``, then wait until
    the name server lists it."""

    async def create() -> None:
        await _admin(live).create_topic(topic, read_queue_nums=2, write_queue_nums=2, broker_addr=addr, **config)

    async def routed() -> bool:
        return topic in await _admin(live).topic_list()

    live.call(create)
    wait_until(live, routed)


def read_queues(live: ThreadedDashboard, addr: str, topic: str) -> int | None:
    """The topic's read queue count on the broker at ``addr``, None when that broker does not have the topic."""

    async def ask() -> int | None:
        try:
            return (await _admin(live).topic_config(addr, topic)).read_queue_nums
        except MQBrokerError:
            return None

    return live.call(ask)


def picks(driver: WebDriver, box: str) -> list[str]:
    return [i.get_attribute("value") or "" for i in driver.find_elements(By.CSS_SELECTOR, f"#{box} input:checked")]


def submit_read_queues(form: WebElement, count: str) -> None:
    """Type ``count`` into the update form's read queue count and submit it."""
    queues = form.find_element(By.NAME, "readQueueNums")
    queues.clear()
    queues.send_keys(count)
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()


def test_a_topic_update_from_its_page_stays_on_its_broker_until_another_is_picked(
    browser: WebDriver, two: tuple[ThreadedDashboard, str]
) -> None:
    live, b = two
    a = live.broker_addr

    create_routed(live, "HeldTopic", a)
    open_page(browser, live, "/topic?topic=HeldTopic")
    [row] = table_rows(browser, "configs", lambda r: len(r) == 1)
    assert row[:5] == ["broker-a", "DefaultCluster", a, "2", "2"]
    wait_for(browser, lambda d: picks(d, "update-targets") == ["broker-a"])  # the broker holding it, not broker-b
    form = browser.find_element(By.ID, "update-topic")
    queues = form.find_element(By.NAME, "readQueueNums")
    assert queues.get_attribute("value") == "2"
    submit_read_queues(form, "6")
    wait_for(browser, lambda d: "HeldTopic updated on broker-a" in banner(d).text)
    assert (read_queues(live, a, "HeldTopic"), read_queues(live, b, "HeldTopic")) == (6, None)

    form.find_element(By.CSS_SELECTOR, "#update-targets input[value=broker-b]").click()
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait_for(browser, lambda d: "HeldTopic updated on broker-a, broker-b" in banner(d).text)
    assert (read_queues(live, a, "HeldTopic"), read_queues(live, b, "HeldTopic")) == (6, 6)
    assert [r[0] for r in table_rows(browser, "configs", lambda r: len(r) == 2)] == ["broker-a", "broker-b"]


def test_a_new_topic_goes_to_the_broker_picked_in_the_topics_form(
    browser: WebDriver, two: tuple[ThreadedDashboard, str]
) -> None:
    live, b = two
    open_page(browser, live, "/topics")
    form = browser.find_element(By.ID, "create-topic")
    click(browser, "#create-targets input[value=broker-b]")
    form.find_element(By.NAME, "topic").send_keys("PickedPageTopic")
    Select(form.find_element(By.NAME, "messageType")).select_by_visible_text("FIFO")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait_for(browser, lambda d: "PickedPageTopic created or updated on broker-b" in banner(d).text)
    assert read_queues(live, live.broker_addr, "PickedPageTopic") is None
    assert read_queues(live, b, "PickedPageTopic") == 8
    assert message_type(live, b, "PickedPageTopic") == "FIFO"  # the type picked, as rocketmq-dashboard's dialog
    open_page(browser, live, "/topic?topic=PickedPageTopic")  # the update form offers the topic's own type
    wait_for(browser, lambda d: table_rows(d, "configs", lambda r: len(r) == 1)[0][7] == "FIFO")
    update = browser.find_element(By.ID, "update-topic")
    assert Select(update.find_element(By.NAME, "messageType")).first_selected_option.text == "FIFO"
    update.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait_for(browser, lambda d: "PickedPageTopic updated on broker-b" in banner(d).text)
    assert message_type(live, b, "PickedPageTopic") == "FIFO"  # an update keeps it


def test_a_new_topic_with_nothing_picked_in_the_topics_form_goes_to_every_broker(
    browser: WebDriver, two: tuple[ThreadedDashboard, str]
) -> None:
    """rocketmq-dashboard's create dialog (``TopicSingleModifyForm.handleFormSubmit``) sends every cluster and every
    broker when none is picked, so its ``createOrUpdate.do`` never meets a create naming neither; only the API
    refuses one."""
    live, b = two
    open_page(browser, live, "/topics")
    wait_for(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#create-targets input")) == 3)
    wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#kinds button"))  # the topics are listed
    form = browser.find_element(By.ID, "create-topic")
    form.find_element(By.NAME, "topic").send_keys("UnpickedPageTopic")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait_for(browser, lambda d: "UnpickedPageTopic created or updated on broker-a, broker-b" in banner(d).text)
    assert (read_queues(live, live.broker_addr, "UnpickedPageTopic"), read_queues(live, b, "UnpickedPageTopic")) == (
        8,
        8,
    )
    assert message_type(live, b, "UnpickedPageTopic") == "NORMAL"


def test_an_update_from_its_page_keeps_an_untyped_topic_untyped(
    browser: WebDriver, two: tuple[ThreadedDashboard, str]
) -> None:
    """The update form shows an untyped topic as UNSPECIFIED (rocketmq-dashboard's ``examineTopicConfig``) and its
    update leaves the type alone rather than writing NORMAL."""
    live, b = two

    create_routed(live, "UntypedPageTopic", b)
    open_page(browser, live, "/topic?topic=UntypedPageTopic")
    wait_for(browser, lambda d: table_rows(d, "configs", lambda r: len(r) == 1)[0][7] == "UNSPECIFIED")
    wait_for(browser, lambda d: picks(d, "update-targets") == ["broker-b"])
    update = browser.find_element(By.ID, "update-topic")
    assert Select(update.find_element(By.NAME, "messageType")).first_selected_option.text == "UNSPECIFIED"
    submit_read_queues(update, "3")
    wait_for(browser, lambda d: "UntypedPageTopic updated on broker-b" in banner(d).text)
    assert (read_queues(live, b, "UntypedPageTopic"), message_type(live, b, "UntypedPageTopic")) == (3, None)


def test_the_topic_forms_offer_the_settable_types_and_keep_the_type_on_update(
    browser: WebDriver, two: tuple[ThreadedDashboard, str]
) -> None:
    """rocketmq-dashboard's add/update dialog (``TopicSingleModifyForm``) offers TRANSACTION, FIFO, DELAY and NORMAL,
    not MIXED, which the broker refuses unless ``enableMixedMessageType`` (``AdminBrokerProcessor.
    updateAndCreateTopic``), and disables the type when updating."""
    live, b = two
    settable = ["DELAY", "FIFO", "NORMAL", "TRANSACTION"]
    open_page(browser, live, "/topics")
    create = browser.find_element(By.ID, "create-topic")
    assert sorted(o.text for o in Select(create.find_element(By.NAME, "messageType")).options) == settable

    create_routed(live, "DelayPageTopic", b, attributes="+message.type=DELAY")
    open_page(browser, live, "/topic?topic=DelayPageTopic")
    wait_for(browser, lambda d: table_rows(d, "configs", lambda r: len(r) == 1)[0][7] == "DELAY")
    wait_for(browser, lambda d: picks(d, "update-targets") == ["broker-b"])
    update = browser.find_element(By.ID, "update-topic")
    select = update.find_element(By.NAME, "messageType")
    assert Select(select).first_selected_option.text == "DELAY"
    assert "MIXED" not in [o.text for o in Select(select).options]
    assert not select.is_enabled()
    submit_read_queues(update, "3")
    wait_for(browser, lambda d: "DelayPageTopic updated on broker-b" in banner(d).text)
    assert (read_queues(live, b, "DelayPageTopic"), message_type(live, b, "DelayPageTopic")) == (3, "DELAY")


def test_an_update_from_its_page_keeps_a_perm_the_form_does_not_list(
    browser: WebDriver, two: tuple[ThreadedDashboard, str]
) -> None:
    """A topic of perm 7 (inherit, read and write: rocketmq-dashboard's default for a new topic, ``topic.jsx``)
    keeps it through an update of its queues, rather than losing every permission."""
    live, b = two

    async def perm() -> int:
        return (await _admin(live).topic_config(b, "InheritPageTopic")).perm

    create_routed(live, "InheritPageTopic", b, perm=7)
    open_page(browser, live, "/topic?topic=InheritPageTopic")
    table_rows(browser, "configs", lambda r: len(r) == 1)
    wait_for(browser, lambda d: picks(d, "update-targets") == ["broker-b"])
    update = browser.find_element(By.ID, "update-topic")
    queues = update.find_element(By.NAME, "readQueueNums")
    wait_for(browser, lambda d: queues.get_attribute("value") == "2")
    submit_read_queues(update, "3")
    wait_for(browser, lambda d: "InheritPageTopic updated on broker-b" in banner(d).text)
    assert (read_queues(live, b, "InheritPageTopic"), live.call(perm)) == (3, 7)


def test_an_update_from_its_page_keeps_each_brokers_own_type(
    browser: WebDriver, two: tuple[ThreadedDashboard, str]
) -> None:
    """The page's one form goes to every broker holding the topic, filled from the first; its type is read-only, so
    no broker takes another's: rocketmq-dashboard's update dialog has a form per broker, each sending that broker's
    own type (``TopicSingleModifyForm.jsx``), and the broker keeps an attribute an update does not name
    (``AttributeUtil.alterCurrentAttributes``). A DELAY broker-a does not make an untyped broker-b DELAY."""
    live, b = two
    a = live.broker_addr

    async def create() -> None:
        admin = _admin(live)
        await admin.create_topic(
            "SplitTypeTopic", read_queue_nums=2, write_queue_nums=2, broker_addr=a, attributes="+message.type=DELAY"
        )
        await admin.create_topic("SplitTypeTopic", read_queue_nums=2, write_queue_nums=2, broker_addr=b)

    async def routed() -> bool:
        try:
            return len((await _admin(live).topic_route("SplitTypeTopic")).broker_datas) == 2
        except TopicRouteNotFoundError:
            return False

    live.call(create)
    wait_until(live, routed)
    open_page(browser, live, "/topic?topic=SplitTypeTopic")
    rows = table_rows(browser, "configs", lambda r: len(r) == 2)
    assert [(r[0], r[7]) for r in rows] == [("broker-a", "DELAY"), ("broker-b", "UNSPECIFIED")]
    wait_for(browser, lambda d: picks(d, "update-targets") == ["broker-a", "broker-b"])
    update = browser.find_element(By.ID, "update-topic")
    queues = update.find_element(By.NAME, "readQueueNums")
    wait_for(browser, lambda d: queues.get_attribute("value") == "2")
    submit_read_queues(update, "3")
    wait_for(browser, lambda d: "SplitTypeTopic updated on broker-a, broker-b" in banner(d).text)
    assert (read_queues(live, a, "SplitTypeTopic"), read_queues(live, b, "SplitTypeTopic")) == (3, 3)
    assert (message_type(live, a, "SplitTypeTopic"), message_type(live, b, "SplitTypeTopic")) == ("DELAY", None)


def message_type(live: ThreadedDashboard, addr: str, topic: str) -> str | None:
    async def ask() -> str | None:
        return (await _admin(live).topic_config(addr, topic)).attribute("message.type")

    return live.call(ask)


def group_config(live: ThreadedDashboard, addr: str, group: str) -> SubscriptionGroupConfig | None:
    async def ask() -> SubscriptionGroupConfig | None:
        return (await _admin(live).subscription_groups(addr)).get(group)

    return live.call(ask)


def test_a_groups_config_is_edited_on_its_broker_then_deleted_there_from_its_page(
    browser: WebDriver, two: tuple[ThreadedDashboard, str]
) -> None:
    live, b = two
    a = live.broker_addr

    async def create() -> None:
        await _admin(live).create_subscription_group(SubscriptionGroupConfig("page-cfg-cg"), broker_addr=a)

    live.call(create)
    open_page(browser, live, "/group?group=page-cfg-cg")
    [row] = table_rows(browser, "configs", lambda r: len(r) == 1)
    assert row[:8] == ["broker-a", "DefaultCluster", a, "yes", "yes", "yes", "1", "16"]
    wait_for(browser, lambda d: picks(d, "update-targets") == ["broker-a"])
    form = browser.find_element(By.ID, "update-group")
    retries = form.find_element(By.NAME, "retryMaxTimes")
    retries.clear()
    retries.send_keys("5")
    Select(form.find_element(By.NAME, "consumeBroadcastEnable")).select_by_visible_text("no")
    Select(form.find_element(By.NAME, "consumeMessageOrderly")).select_by_visible_text("yes")  # a FIFO group
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait_for(browser, lambda d: "page-cfg-cg created or updated on broker-a" in banner(d).text)
    edited = group_config(live, a, "page-cfg-cg")
    assert edited is not None and (edited.retry_max_times, edited.consume_broadcast_enable) == (5, False)
    assert edited.consume_message_orderly
    assert group_config(live, b, "page-cfg-cg") is None
    shown = table_rows(browser, "configs", lambda r: len(r) == 1 and r[0][4] == "no")[0]
    assert (shown[7], shown[10]) == ("5", "yes")  # retry max times, orderly

    wait_for(browser, lambda d: picks(d, "delete-targets") == ["broker-a"])
    browser.find_element(By.CSS_SELECTOR, "#delete-on button[type=submit]").click()
    browser.switch_to.alert.accept()
    wait_for(browser, lambda d: "deleted on broker-a and its retry" in banner(d).text)
    assert group_config(live, a, "page-cfg-cg") is None
    table_rows(browser, "configs", lambda r: r == [])


def test_a_new_group_is_created_on_the_broker_picked(browser: WebDriver, two: tuple[ThreadedDashboard, str]) -> None:
    live, b = two
    open_page(browser, live, "/groups")
    form = browser.find_element(By.ID, "open-group")
    form.find_element(By.NAME, "group").send_keys("page-new-cg")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    click(browser, "#update-targets input[value=broker-b]")
    browser.find_element(By.CSS_SELECTOR, "#update-group button[type=submit]").click()
    wait_for(browser, lambda d: "page-new-cg created or updated on broker-b" in banner(d).text)
    assert group_config(live, b, "page-new-cg") is not None
    assert group_config(live, live.broker_addr, "page-new-cg") is None
