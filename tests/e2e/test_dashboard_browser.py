"""The README's first command, watched in a real browser: ``fleetgate up`` and its dashboard.

Starts the real ``fleetgate up`` in a subprocess (its own working directory, a free port), opens
the link it prints in headless Chromium (Debian's ``chromium`` and ``chromium-driver``, driven by
selenium), waits for live data, checks what the page shows — node rows with capacity bars, the
``ci`` claim, each pool's A/G/C, events arriving, a rotation on the timeline — saves a
screenshot, and stops ``fleetgate up`` with SIGINT, which must exit 0.

Never skipped: without Chromium the test fails and says how to install it.
"""

from __future__ import annotations

import os
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.servers import UpProcess as Up

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
ROOT = Path(__file__).resolve().parents[2]
#: The documentation's picture, refreshed only on request (FLEETGATE_UPDATE_SCREENSHOTS=1), so
#: that running the tests never leaves the work tree modified.
SCREENSHOT = ROOT / "docs" / "img" / "dashboard.png"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",  # containers give /dev/shm 64 MB: too little for a renderer
)


def require_chromium() -> None:
    """Fail (never skip) with the fix when the browser is missing."""
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    if missing:
        pytest.fail(
            f"headless Chromium is needed for the dashboard test but {', '.join(missing)} "
            "is missing: install it with `apt-get install -y chromium chromium-driver` "
            "(.ci/run does this on CI)",
            pytrace=False,
        )


@pytest.fixture
def up(tmp_path: Path) -> Iterator[Up]:
    running = Up(tmp_path)
    try:
        yield running
    finally:
        running.close()


def start_chromium(profile: Path, *extra_flags: str) -> Any:
    """A headless Chromium WebDriver on the profile directory ``profile``, with ``extra_flags``."""
    require_chromium()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (*FLAGS, f"--user-data-dir={profile}", *extra_flags):
        options.add_argument(flag)
    options.add_argument("--window-size=1400,1000")
    return webdriver.Chrome(options=options, service=Service(executable_path=str(CHROMEDRIVER)))


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    driver = start_chromium(tmp_path / "chromium-profile")
    try:
        yield driver
    finally:
        driver.quit()


def get(url: str, token: str | None = None) -> tuple[int, str]:
    """Status and body of a GET (errors included)."""
    request = urllib.request.Request(url)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def check_api(link: str) -> None:
    """Beside the dashboard, the API keeps its own rules: bearer tokens on every /v1 route."""
    base, token = link.split("/?token=")
    assert get(f"{base}/v1/nodes")[0] == 401
    assert get(f"{base}/v1/nodes", "not-the-token")[0] == 401
    status, body = get(f"{base}/v1/nodes", token)
    assert status == 200 and "general" in body
    assert get(f"{base}/dashboard/data")[0] == 401
    # One /metrics for both halves (the first controller pass and reconcile come with the
    # first tick, just after the link is printed).
    wanted = ("fleetgate_rotation_window_active", "fleetgate_capacity_node_used")
    deadline = time.monotonic() + 60
    while True:
        status, body = get(f"{base}/metrics")
        assert status == 200
        if all(name in body for name in wanted) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert all(name in body for name in wanted), body[-2000:]


#: One consistent reading of the page: the live refresh replaces whole sections, so the test
#: never holds element references across a render; it reads everything in one script call.
SNAPSHOT = """
const attr = (el, name) => el.getAttribute(name);
const bars = (root, sel) => Array.from(root.querySelectorAll(sel)).map(b => ({
  dimension: attr(b, 'data-dimension'),
  limit: parseFloat(attr(b, 'data-limit')),
  used: parseFloat(attr(b, 'data-used')),
}));
const claim = document.querySelector(".claim[data-namespace='ci']");
const pools = {};
for (const card of document.querySelectorAll('article.pool[data-pool]')) {
  pools[attr(card, 'data-pool')] = {
    terms: Array.from(card.querySelectorAll('.agc dt')).map(dt => dt.textContent.trim()),
    now: card.querySelectorAll('.timeline svg .tl-now').length,
    rotations: card.querySelectorAll('.timeline .tl-rotation').length,
  };
}
const live = document.getElementById('live');
const now = document.getElementById('now');
return {
  state: live ? attr(live, 'data-state') : null,
  now: now ? now.textContent : null,
  rows: Array.from(document.querySelectorAll('tr[data-node]')).map(
    r => bars(r, '.bar[data-dimension]')),
  claim: claim ? {bars: claim.querySelectorAll('.bar').length, text: claim.innerText} : null,
  pools: pools,
  events: Array.from(document.querySelectorAll('#events li[data-event-id]')).map(
    li => attr(li, 'data-event-id')),
};
"""


def snapshot(driver: Any) -> dict[str, Any]:
    """The dashboard's state as one atomic read of the DOM (see SNAPSHOT)."""
    state: dict[str, Any] = driver.execute_script(SNAPSHOT)
    return state


def wait_for(
    driver: Any,
    what: str,
    check: Callable[[Any], Any],
    timeout: float = 90.0,
    read: Callable[[Any], Any] = snapshot,
) -> Any:
    """Poll ``check(read(driver))`` until it is truthy; fail naming ``what`` otherwise.

    ``read`` is the dashboard's one-read ``snapshot`` by default; a page of another shape passes
    its own reading (or ``lambda d: d`` to check the driver itself).
    """
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.25).until(lambda d: check(read(d)))
    except TimeoutException:
        pytest.fail(f"the dashboard never showed {what}", pytrace=False)


def shows_the_fleet(page: dict[str, Any]) -> bool:
    """Whether one reading of the page carries the whole sample system (nodes, claim, pools)."""
    pools = page["pools"]
    return (
        page["state"] == "live"
        and len(page["rows"]) >= 6
        and page["claim"] is not None
        and all(pool in pools for pool in ("general", "batch"))
    )


def test_the_dashboard_shows_the_system_working_live(up: Up, browser: Any, tmp_path: Path) -> None:
    link = up.link()
    check_api(link)
    browser.get(link)
    # The token went into a cookie; the address bar no longer carries it.
    assert "token=" not in browser.current_url
    page = wait_for(
        browser, "live data with the sample fleet", lambda p: p if shows_the_fleet(p) else None
    )

    rows = page["rows"]
    assert len(rows) >= 6, "the sample fleet has six nodes"
    assert [b["dimension"] for b in rows[0]][:3] == ["vCPU", "memory", "disk"]
    assert all(b["limit"] > 0 for b in rows[0][:3])
    assert any(b["used"] > 0 for row in rows for b in row if b["dimension"] == "vCPU"), (
        "the seeded placements use capacity"
    )

    assert page["claim"]["bars"] == 3
    assert "active" in page["claim"]["text"]

    for pool in ("general", "batch"):
        card = page["pools"][pool]
        assert card["terms"][:3] == ["A", "G", "C"], f"{pool} shows its derivation"
        assert card["now"], f"{pool}'s timeline marks now"

    seen = set(wait_for(browser, "any event", lambda p: p["events"]))
    clock = page["now"]
    wait_for(browser, "new events arriving", lambda p: set(p["events"]) - seen)
    wait_for(browser, "virtual time moving", lambda p: p["now"] != clock)
    wait_for(
        browser,
        "a rotation on a pool's timeline",
        lambda p: any(card["rotations"] for card in p["pools"].values()),
        timeout=150,
    )
    assert snapshot(browser)["state"] == "live"

    height = browser.execute_script("return document.documentElement.scrollHeight")
    browser.set_window_size(1400, max(1000, min(int(height) + 40, 4000)))
    time.sleep(1.6)  # one more refresh at the new size
    targets = [tmp_path / "dashboard.png"]
    if os.environ.get("FLEETGATE_UPDATE_SCREENSHOTS") == "1":
        targets.append(SCREENSHOT)
    for target in targets:
        target.parent.mkdir(parents=True, exist_ok=True)
        assert browser.save_screenshot(str(target)), f"could not save {target}"
        assert target.stat().st_size > 10_000

    assert up.interrupt() == 0, "".join(up.stderr)[-2000:]
    assert "stopped" in "".join(up.stderr)
