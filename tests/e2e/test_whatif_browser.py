"""The What-if page in a real browser: ``fleetgate up``, two policies, the forecast and the
simulated timeline side by side.

Runs the real ``fleetgate up`` (as the dashboard's browser test does, reusing its harness),
signs in through the printed link, opens ``/whatif``, changes the fleet, runs it, and checks what
the page shows: both policies' A/G/C and findings, a timeline with rotations for the policy that
keeps up and breaches for the one that cannot. Never skipped: without Chromium the test fails.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_dashboard_browser import Up, browser, get, up, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.slow]
__all__ = ["browser", "up"]  # the fixtures, imported so that pytest finds them here


def run(browser: Any, nodes: str, outcome: str) -> None:
    """Set the node count, press the button, and wait for the page to say ``outcome``."""
    from selenium.webdriver.common.by import By

    count = browser.find_element(By.ID, "count")
    count.clear()
    count.send_keys(nodes)
    browser.find_element(By.ID, "run").click()
    wait_for(
        browser,
        f"the page to say {outcome}",
        lambda d: d.find_element(By.ID, "status").get_attribute("data-state") == outcome,
        read=lambda d: d,
    )


def test_two_policies_are_compared_in_the_browser(up: Up, browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    link = up.link()
    base = link.split("/?token=")[0]
    assert get(f"{base}/whatif")[0] == 401  # the page is the dashboard's: admin token only
    browser.get(link)  # sets the dashboard cookie
    browser.get(f"{base}/whatif")
    run(browser, "20", "done")
    a = browser.find_element(By.CSS_SELECTOR, "article.whatif[data-side='A']")
    b = browser.find_element(By.CSS_SELECTOR, "article.whatif[data-side='B']")
    assert "daily" in a.text and "weekly" in b.text
    assert a.find_element(By.CSS_SELECTOR, "dd[data-term='G']").text == "2"
    assert a.find_elements(By.CSS_SELECTOR, ".timeline svg .tl-rotation")
    assert a.get_attribute("data-breaches") == "0"
    assert b.find_elements(By.CSS_SELECTOR, ".finding[data-code='ANonPositive']")
    assert int(b.get_attribute("data-breaches") or 0) > 0
    assert b.find_elements(By.CSS_SELECTOR, ".timeline svg .tl-breach")
    browser.save_screenshot(str(tmp_path / "whatif.png"))
    # A bad input is answered on the page, naming the field.
    run(browser, "0", "error")
    assert browser.find_element(By.ID, "status").text.startswith("count:")
    assert up.interrupt() == 0
