"""The What-if page in a real browser: ``fleetgate up``, two policies, the forecast and the
simulated timeline side by side.

Runs the real ``fleetgate up`` (as the dashboard's browser test does, reusing its harness),
signs in through the printed link, reaches ``/whatif`` from the dashboard's own link, runs the
default pair, and checks what the page shows: a healthy policy A (no finding, no breach) against
a breaching B, each with the dashboard's timeline (hour/day axis, dates, legend); then a fleet
with a full capacity ledger, whose held node meets its forced expiry (CapacityHoldMeetsExpiry,
as a warning). The What-if
link the banner prints signs a fresh browser in on that page. Never skipped: without Chromium
the test fails.
"""

from __future__ import annotations

import queue
import re
import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_dashboard_browser import Up, browser, get, up, wait_for
from tests.servers import UP_STARTUP as STARTUP

pytestmark = [pytest.mark.browser, pytest.mark.slow]
__all__ = ["browser", "up"]  # the fixtures, imported so that pytest finds them here
WHATIF_LINK = re.compile(r"what if\s+(http://\S+/whatif\?token=\S+)")
SIMULATE = 180.0  # seconds: two 30-day simulations of 40 nodes on a loaded machine


def whatif_link(up: Up) -> str:
    """The What-if link of the banner (printed after the dashboard link)."""
    deadline = time.monotonic() + STARTUP
    while time.monotonic() < deadline:
        try:
            line = up.lines.get(timeout=1.0)
        except queue.Empty:
            continue
        match = WHATIF_LINK.search(line)
        if match:
            return match.group(1)
    pytest.fail("fleetgate up printed no What-if link")


def run(browser: Any, outcome: str, nodes: str | None = None) -> None:
    """Optionally set the node count, press the button, and wait for the page to say
    ``outcome``."""
    from selenium.webdriver.common.by import By

    if nodes is not None:
        count = browser.find_element(By.ID, "count")
        count.clear()
        count.send_keys(nodes)
    browser.find_element(By.ID, "run").click()
    wait_for(
        browser,
        f"the page to say {outcome}",
        lambda d: d.find_element(By.ID, "status").get_attribute("data-state") == outcome,
        timeout=SIMULATE,
        read=lambda d: d,
    )


def ledger(browser: Any, values: dict[str, str]) -> None:
    """Tick the form's capacity ledger and type ``values`` into the fields they name."""
    from selenium.webdriver.common.by import By

    box = browser.find_element(By.ID, "ledger")
    if not box.is_selected():
        box.click()
    for field, value in values.items():
        element = browser.find_element(By.ID, field)
        element.clear()
        element.send_keys(value)


def test_the_what_if_page_is_reached_from_the_dashboard_and_compares_two_policies(
    up: Up, browser: Any, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    link = up.link()
    direct = whatif_link(up)
    base = link.split("/?token=")[0]
    assert get(f"{base}/whatif")[0] == 401  # the page is the dashboard's: admin token only
    browser.get(link)  # signs in: a session cookie
    browser.find_element(By.ID, "whatif-link").click()
    wait_for(
        browser, "the What-if page", lambda d: d.current_url == f"{base}/whatif", read=lambda d: d
    )
    run(browser, "done")  # the default pair over the default fleet
    a = browser.find_element(By.CSS_SELECTOR, "article.whatif[data-side='A']")
    b = browser.find_element(By.CSS_SELECTOR, "article.whatif[data-side='B']")
    assert "daily" in a.text and "weekly" in b.text
    assert a.get_attribute("data-breaches") == "0" and not a.find_elements(
        By.CSS_SELECTOR, ".finding"
    )
    assert a.find_elements(By.CSS_SELECTOR, ".timeline svg .tl-rotation")
    assert b.find_elements(By.CSS_SELECTOR, ".finding[data-code='ANonPositive']")
    assert int(b.get_attribute("data-breaches") or 0) > 0
    assert b.find_elements(By.CSS_SELECTOR, ".timeline svg .tl-breach")
    for side in (a, b):  # the dashboard's axis, dates and legend
        assert side.find_elements(By.CSS_SELECTOR, "svg.tl-axis text.tl-mark")
        assert "simulated times in Asia/Tokyo" in side.text and "2024" in side.text
        assert "maintenance window" in side.find_element(By.TAG_NAME, "figcaption").text
    browser.save_screenshot(str(tmp_path / "whatif.png"))
    # With a ledger: three full 8-CPU nodes, a pool that launches 4-CPU ones, node-1 due within
    # the week: the gate holds node-1 until its forced expiry, and the page says so.
    ledger(browser, {"count": "3", "spread": "13d", "span": "7d", "fill": "100"})
    run(browser, "done")
    a = browser.find_element(By.CSS_SELECTOR, "article.whatif[data-side='A']")
    (held,) = a.find_elements(By.CSS_SELECTOR, ".finding.warn[data-code='CapacityHoldMeetsExpiry']")
    assert "node node-1, held for capacity" in held.text and "forced expiry" in held.text
    assert held.value_of_css_property("color") == "rgba(138, 91, 0, 1)"  # the warning's colour
    browser.set_window_size(1280, 1000)
    height = int(browser.execute_script("return document.documentElement.scrollHeight"))
    browser.set_window_size(1280, max(1000, min(height + 40, 4000)))
    browser.save_screenshot(str(tmp_path / "whatif-ledger-1280.png"))
    # A bad ledger input is refused on the page, naming the field.
    ledger(browser, {"fill": "lots"})
    run(browser, "error")
    assert browser.find_element(By.ID, "status").text.startswith("ledger.fill:")
    # A bad input is answered on the page, naming the field.
    run(browser, "error", nodes="0")
    assert browser.find_element(By.ID, "status").text.startswith("count:")
    browser.find_element(By.ID, "dashboard-link").click()  # and back
    wait_for(browser, "the dashboard", lambda d: d.current_url == f"{base}/", read=lambda d: d)
    # The banner's What-if link signs a browser without a session in, straight onto the page,
    # and the token leaves the address bar.
    browser.delete_all_cookies()
    browser.get(direct)
    wait_for(
        browser, "the What-if form", lambda d: d.find_elements(By.ID, "whatif"), read=lambda d: d
    )
    assert browser.current_url == f"{base}/whatif"
    assert up.interrupt() == 0


def test_a_long_what_if_shows_its_progress_and_can_be_cancelled(
    up: Up, browser: Any, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    browser.get(whatif_link(up))  # signs in straight onto the page
    wait_for(
        browser, "the What-if form", lambda d: d.find_elements(By.ID, "whatif"), read=lambda d: d
    )
    bar = browser.find_element(By.ID, "progress")
    cancel = browser.find_element(By.ID, "cancel")
    assert not bar.is_displayed() and not cancel.is_displayed()
    # The largest run the page takes: 2,000 nodes over 90 days, minutes of work here.
    for field, value in (("count", "2000"), ("span", "90d")):
        box = browser.find_element(By.ID, field)
        box.clear()
        box.send_keys(value)
    browser.find_element(By.ID, "run").click()
    # Past a second the bar shows how far the simulation got, in simulated days (side A's day
    # 0 is reported as it starts; its first day is hundreds of controller passes), and the run
    # is cancelled while it runs.
    wait_for(
        browser,
        "the run's progress",
        lambda d: bar.is_displayed() and bar.get_attribute("data-side") == "A",
        timeout=SIMULATE,
        read=lambda d: d,
    )
    status = browser.find_element(By.ID, "status")
    assert status.get_attribute("data-state") == "running"
    assert re.fullmatch(r"simulating A: day \d+ of 90", status.text), status.text
    assert cancel.is_displayed()
    browser.save_screenshot(str(tmp_path / "whatif-progress.png"))
    cancel.click()
    wait_for(
        browser,
        "the run cancelled",
        lambda d: status.get_attribute("data-state") == "cancelled",
        read=lambda d: d,
    )
    assert not bar.is_displayed() and not cancel.is_displayed()
    assert not browser.find_elements(By.CSS_SELECTOR, "article.whatif")  # no answer shown
    # The server serves the next run (that the cancelled one's thread stops at its next check
    # is test_whatif.py's test_a_stream_closed_early_stops_the_simulation_at_its_next_check).
    for field, value in (("count", "40"), ("span", "30d")):
        box = browser.find_element(By.ID, field)
        box.clear()
        box.send_keys(value)
    run(browser, "done")
    assert len(browser.find_elements(By.CSS_SELECTOR, "article.whatif")) == 2
    assert up.interrupt() == 0
