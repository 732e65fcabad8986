"""Debian's headless Chromium driven by Selenium through Debian's chromium-driver (``make test`` installs both with
``scripts/setup-system``; nothing is downloaded). The window is 1280x800, the size of the README's screenshots."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
WIDTH, HEIGHT = 1280, 800
#: A hang guard for a page to show what a test waits for, not a performance threshold.
HANG_GUARD = 60


@contextlib.contextmanager
def chromium() -> Iterator[WebDriver]:
    """A headless Chromium with a fresh profile and a 1280x800 viewport, quit and removed on exit."""
    profile = tempfile.mkdtemp(prefix="rocketrio-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={profile}",
        f"--window-size={WIDTH},{HEIGHT}",
    ):
        options.add_argument(arg)
    os.environ.setdefault("SE_OFFLINE", "true")  # Selenium Manager must not try to fetch a driver or a browser
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    try:
        # The viewport, not the window, is what a screenshot shows: make it exactly 1280x800.
        metrics = {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False}
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    with chromium() as driver:
        yield driver


def wait_for(driver: WebDriver, condition: Callable[[WebDriver], Any], message: str = "") -> Any:
    # A page that re-renders a table while a condition reads it leaves stale elements: read again at the next poll.
    wait = WebDriverWait(driver, HANG_GUARD, poll_frequency=0.05, ignored_exceptions=(StaleElementReferenceException,))
    return wait.until(condition, message)


def rows(driver: WebDriver, table: str) -> list[list[str]]:
    """The visible rows of the page's table named ``table`` (``data-table``), as cell texts."""
    body = driver.find_elements(By.CSS_SELECTOR, f'table[data-table="{table}"] tbody tr')
    return [[td.text for td in tr.find_elements(By.TAG_NAME, "td")] for tr in body]


def table_rows(driver: WebDriver, table: str, predicate: Callable[[list[list[str]]], bool]) -> list[list[str]]:
    """Wait until the rows of ``table`` satisfy ``predicate``; returns them."""
    found: list[list[list[str]]] = []

    def check(d: WebDriver) -> bool:
        found[:] = [rows(d, table)]
        return predicate(found[0])

    wait_for(driver, check, f"table {table}")
    return found[0]


def click(driver: WebDriver, css: str) -> None:
    """Click the first element matching ``css`` once the page's script has drawn it."""
    [element, *_] = wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, css), css)
    element.click()


def banner(driver: WebDriver) -> WebElement:
    return driver.find_element(By.ID, "banner")
