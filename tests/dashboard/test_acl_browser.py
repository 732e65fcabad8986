"""The ACL page in a real headless Chromium against a live dashboard and an embedded cluster with ``aclEnable``: an
account and a topic permission added through the page change what the broker lets that account do; a refusal shows
the broker's code and remark; deleting asks first. Writes ``docs/screenshots/acl.png`` (1280x800) for the README."""

from __future__ import annotations

import struct
from collections.abc import Iterator

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select

from tests.dashboard.browser import banner, click, rows, table_rows, wait_for
from tests.dashboard.live import ThreadedDashboard
from tests.dashboard.test_acl_page import DASHBOARD, PLAIN_ACL, TOPIC, send_refusal
from tests.dashboard.test_pages import SCREENSHOTS, open_page


@pytest.fixture(scope="module")
def live_acl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedDashboard]:
    root = tmp_path_factory.mktemp("acl-page")
    (root / "home" / "conf").mkdir(parents=True)
    (root / "home" / "conf" / "plain_acl.yml").write_text(PLAIN_ACL)
    cluster = {"acl_enable": True, "rocketmq_home": str(root / "home")}
    with ThreadedDashboard(root / "cluster", cluster=cluster, enable_collect=False, **DASHBOARD) as dashboard:
        yield dashboard


def refusal(live: ThreadedDashboard, access_key: str, secret_key: str) -> str | None:
    """What the broker answers a producer of ``access_key`` sending to the test topic (``None``: stored)."""
    assert live.cluster is not None
    return live.call(send_refusal, live.cluster, access_key, secret_key)


def fill(form_id: str, driver: WebDriver, **values: str) -> None:
    form = driver.find_element(By.ID, form_id)
    for name, value in values.items():
        field = form.find_element(By.NAME, name)
        if field.tag_name == "select":
            Select(field).select_by_value(value)
        else:
            field.clear()
            field.send_keys(value)


def test_an_account_and_a_topic_permission_added_in_the_page_are_enforced(
    browser: WebDriver, live_acl: ThreadedDashboard
) -> None:
    create_topic_signed(live_acl)
    open_page(browser, live_acl, "/acl")
    accounts = table_rows(browser, "accounts", lambda r: len(r) == 2)
    assert [r[0] for r in accounts] == ["dashboard", "RocketMQ"]
    assert "12345678" not in browser.find_element(By.ID, "accounts").text  # masked until asked
    click(browser, 'button[data-reveal="RocketMQ"]')
    wait_for(browser, lambda d: d.find_element(By.CSS_SELECTOR, 'code[data-secret="RocketMQ"]').text == "12345678")
    assert "on (aclEnable) on 1 of 1 brokers" in browser.find_element(By.ID, "status").text

    assert "No acl config for pageuser" in (refusal(live_acl, "pageuser", "page-secret") or "")
    fill("account-form", browser, accessKey="pageuser", secretKey="page-secret")
    browser.find_element(By.ID, "account-submit").click()
    wait_for(browser, lambda d: "Account pageuser added" in banner(d).text)
    row = next(r for r in table_rows(browser, "accounts", lambda r: len(r) == 3) if r[0] == "pageuser")
    assert row[3:6] == ["no", "DENY", "SUB"]
    assert "No default permission for topic" in (refusal(live_acl, "pageuser", "page-secret") or "")

    fill("perm-form", browser, accessKey="pageuser", kind="topic", resource=TOPIC, perm="PUB")
    browser.find_element(By.CSS_SELECTOR, "#perm-form button[type=submit]").click()
    wait_for(browser, lambda d: f"topic {TOPIC}=PUB set for pageuser" in banner(d).text)
    assert ["pageuser", "topic", TOPIC, "PUB"] in [r[:4] for r in table_rows(browser, "perms", lambda r: len(r) == 4)]
    assert refusal(live_acl, "pageuser", "page-secret") is None
    screenshot(browser)

    # The broker's refusal of a key of 6 characters, with its code and remark.
    fill("account-form", browser, accessKey="short6", secretKey="page-secret")
    browser.find_element(By.ID, "account-submit").click()
    wait_for(browser, lambda d: "The broker refused (code 209)" in banner(d).text)
    assert "length should longer than 6" in banner(browser).text and "Traceback" not in browser.page_source

    # Updating: the form takes the row, the access key fixed; the new secret signs from now on, the permission stays.
    click(browser, 'button[data-edit-account="pageuser"]')
    wait_for(browser, lambda d: d.find_element(By.ID, "account-submit").text == "Update account")
    assert browser.find_element(By.CSS_SELECTOR, "#account-form input[name=accessKey]").get_attribute("readonly")
    fill("account-form", browser, secretKey="rotated-secret")
    browser.find_element(By.ID, "account-submit").click()
    wait_for(browser, lambda d: "Account pageuser updated" in banner(d).text)
    assert "Check signature failed" in (refusal(live_acl, "pageuser", "page-secret") or "")
    assert refusal(live_acl, "pageuser", "rotated-secret") is None

    # Deleting asks first.
    click(browser, 'button[data-delete-account="pageuser"]')
    browser.switch_to.alert.dismiss()
    assert refusal(live_acl, "pageuser", "rotated-secret") is None
    click(browser, 'button[data-delete-account="pageuser"]')
    browser.switch_to.alert.accept()
    wait_for(browser, lambda d: "Account pageuser deleted" in banner(d).text)
    assert "pageuser" not in [r[0] for r in rows(browser, "accounts")]
    assert "No acl config for pageuser" in (refusal(live_acl, "pageuser", "rotated-secret") or "")


def create_topic_signed(live: ThreadedDashboard) -> None:
    """The test topic, created by the dashboard's admin client (the cluster wants a signed admin)."""

    async def create() -> None:
        assert live.app is not None
        await live.app.state.admin.create_topic(TOPIC, read_queue_nums=1, write_queue_nums=1)

    live.call(create)


def screenshot(driver: WebDriver) -> None:
    tables = driver.execute_script("return document.querySelectorAll('table[data-table]').length")
    filters = driver.execute_script("return document.querySelectorAll('input[data-role=filter]').length")
    assert tables == filters == 4, "every list has its filter box"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    target = SCREENSHOTS / "acl.png"
    driver.execute_script("window.scrollTo(0, 0)")
    assert driver.save_screenshot(str(target))
    assert struct.unpack(">II", target.read_bytes()[16:24]) == (1280, 800)
