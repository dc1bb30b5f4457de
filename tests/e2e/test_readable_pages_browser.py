"""Every page readable at 1280 and 1920 px wide, in a real browser (issue 42 item 7).

Runs the real ``fleetgate up`` and headless Chromium through the dashboard browser test's
harness. At each width, on the dashboard (live data) and on the What-if page (the default pair
simulated), one script reads the rendered page and lists what fails:

- contrast: every piece of text (HTML and SVG) against the background it is drawn on, composed
  from the computed colours of its ancestors, at least WCAG AA (4.5:1; 3:1 for large text);
- axis labels at least 11 px tall, and none drawn overlapping the next (the page hides those
  its axis has no room for; an axis must still draw one);
- nothing clipped: every SVG label inside its SVG, every piece of text inside its panel (the
  header, a summary card, a section), and no horizontal scrolling.

It also checks what the What-if page says: Policy B is labelled an example of a bad policy, and
a bad entry clears the previous run's results. Screenshots of each page and width are saved (in
the test's directory, and in ``FLEETGATE_SCREENSHOT_DIR`` when set) to be looked at. Never
skipped: without Chromium the test fails.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from fleetgate.apps.api.dashboard.render import timeline
from tests.e2e.test_dashboard_browser import Up, browser, up, wait_for
from tests.e2e.test_whatif_browser import run

pytestmark = [pytest.mark.browser, pytest.mark.slow]
__all__ = ["browser", "up"]  # the fixtures, imported so that pytest finds them here
WIDTHS = (1280, 1920)

#: Reads the page once and returns every failure found (an empty list: all is well).
PROBLEMS = """
const rgba = (text) => {
  const m = /rgba?\\(([^)]+)\\)/.exec(text || "");
  if (!m) return null;
  const p = m[1].split(/[ ,\\/]+/).filter(Boolean).map(Number);
  return {r: p[0], g: p[1], b: p[2], a: p.length > 3 ? p[3] : 1};
};
const over = (top, under) => ({
  r: top.r * top.a + under.r * (1 - top.a), g: top.g * top.a + under.g * (1 - top.a),
  b: top.b * top.a + under.b * (1 - top.a), a: 1});
const luminance = (c) => {
  const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
  return 0.2126 * f(c.r) + 0.7152 * f(c.g) + 0.0722 * f(c.b);
};
const ratio = (a, b) => {
  const [hi, lo] = [luminance(a), luminance(b)].sort((x, y) => y - x);
  return (hi + 0.05) / (lo + 0.05);
};
const backdrop = (el) => {
  const layers = [];
  for (let e = el; e; e = e.parentElement) {
    const c = rgba(getComputedStyle(e).backgroundColor);
    if (c && c.a > 0) { layers.push(c); if (c.a >= 1) break; }
  }
  let colour = {r: 255, g: 255, b: 255, a: 1};
  for (let i = layers.length - 1; i >= 0; i--) colour = over(layers[i], colour);
  return colour;
};
const shown = (el) =>
  el.getClientRects().length > 0 && getComputedStyle(el).visibility !== "hidden";
const name = (el) => el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") +
  (el.getAttribute("class") ? "." + el.getAttribute("class").trim().split(/\\s+/).join(".") : "");
const inside = (inner, outer) =>
  inner.left >= outer.left - 0.5 && inner.right <= outer.right + 0.5 &&
  inner.top >= outer.top - 0.5 && inner.bottom <= outer.bottom + 0.5;
const problems = [];
const texts = [...document.querySelectorAll("body *")].filter((el) =>
  shown(el) && [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim()));
for (const el of texts) {
  const style = getComputedStyle(el);
  const svg = el instanceof SVGElement;
  const ink = rgba(svg ? style.fill : style.color);
  if (!ink) continue;
  const ground = backdrop(svg ? el.ownerSVGElement : el);
  const size = parseFloat(style.fontSize);
  const large = size >= 24 || (size >= 18.66 && Number(style.fontWeight) >= 700);
  const r = ratio(over(ink, ground), ground);
  if (r < (large ? 3 : 4.5)) {
    const text = el.textContent.trim().slice(0, 40);
    problems.push(`contrast ${r.toFixed(2)}:1 of ${name(el)} "${text}"`);
  }
  const box = el.getBoundingClientRect();
  const frame = svg ? el.ownerSVGElement : el.closest("header, .stat, .panel, form, fieldset");
  if (frame && !inside(box, frame.getBoundingClientRect())) {
    const text = el.textContent.trim().slice(0, 40);
    problems.push(`clipped: ${name(el)} "${text}" outside ${name(frame)}`);
  }
}
for (const axis of document.querySelectorAll("svg.tl-axis")) {
  const labels = [...axis.querySelectorAll("text")].map((t) => [t, t.getBoundingClientRect()]);
  for (const [t, box] of labels) {
    if (box.height < 11 || parseFloat(getComputedStyle(t).fontSize) < 11) {
      problems.push(`axis label "${t.textContent}" ${box.height.toFixed(1)} px tall`);
    }
  }
  // The page hides the labels its axis has no room for (static/axis.js): what is drawn counts.
  const drawn = labels.filter(([t]) => getComputedStyle(t).visibility !== "hidden");
  if (labels.length && !drawn.length) problems.push("an axis with no label drawn");
  for (let i = 1; i < drawn.length; i++) {
    if (drawn[i][1].left < drawn[i - 1][1].right) {
      const [a, b] = [drawn[i - 1][0].textContent, drawn[i][0].textContent];
      problems.push(`axis labels "${a}" and "${b}" overlap`);
    }
  }
}
if (document.documentElement.scrollWidth > window.innerWidth) {
  problems.push(`the page scrolls sideways: ${document.documentElement.scrollWidth} px`);
}
return {problems: problems, axes: document.querySelectorAll("svg.tl-axis text").length};
"""


#: A timeline whose first midnight sits at the axis's left edge (its date label pinned there,
#: reaching right) with a label every two hours: on a 300 px strip the labels would meet.
EDGE_TIMELINE = {
    "start": "2026-12-03T23:50:00+00:00",
    "end": "2026-12-05T00:10:00+00:00",
    "windows": [],
    "rotations": [],
    "zone": "UTC",
}

#: Adds a narrow strip with that timeline to the page (its script thins the strip's labels).
ADD_STRIP = """
const strip = document.createElement("div");
strip.id = "edge-strip";
strip.style.width = "300px";
strip.innerHTML = arguments[0];
document.body.appendChild(strip);
"""

#: The strip's labels as drawn: the texts shown, and how many were hidden.
STRIP_LABELS = """
const labels = [...document.querySelectorAll("#edge-strip svg.tl-axis text")];
const hidden = (t) => getComputedStyle(t).visibility === "hidden";
return {drawn: labels.filter((t) => !hidden(t)).map((t) => t.textContent),
        hidden: labels.filter(hidden).length};
"""


def problems(driver: Any) -> dict[str, Any]:
    """Every failure on the page as rendered now (see PROBLEMS)."""
    found: dict[str, Any] = driver.execute_script(PROBLEMS)
    return found


def full_page(driver: Any, width: int) -> None:
    """The window as tall as the page, so nothing is judged (or photographed) off screen."""
    height = int(driver.execute_script("return document.documentElement.scrollHeight"))
    driver.set_window_size(width, max(900, min(height + 40, 5000)))


def photograph(driver: Any, tmp_path: Path, name: str) -> None:
    """Save a screenshot of the page in the test's directory (and the one asked for)."""
    targets = [tmp_path / name]
    if os.environ.get("FLEETGATE_SCREENSHOT_DIR"):
        targets.append(Path(os.environ["FLEETGATE_SCREENSHOT_DIR"]) / name)
    for target in targets:
        target.parent.mkdir(parents=True, exist_ok=True)
        assert driver.save_screenshot(str(target)), f"could not save {target}"


def test_every_page_is_readable_at_1280_and_1920_px(up: Up, browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    link = up.link()
    base = link.split("/?token=")[0]
    browser.get(link)  # signs in: a session cookie for both pages
    for width in WIDTHS:
        browser.set_window_size(width, 1000)
        browser.get(f"{base}/")
        wait_for(
            browser,
            "live data with both pools' timelines",
            lambda p: p["axes"] > 0 and not p.get("loading"),
            read=lambda d: {
                **problems(d),
                "loading": d.find_element(By.ID, "live").get_attribute("data-state") != "live",
            },
        )
        full_page(browser, width)
        time.sleep(1.6)  # one refresh at the new size (the events may make it longer)
        full_page(browser, width)
        found = problems(browser)
        photograph(browser, tmp_path, f"dashboard-{width}.png")
        assert found["problems"] == [], (width, found["problems"])
        # Whatever the time of day: a midnight at the edge of a narrow strip still reads.
        browser.execute_script(ADD_STRIP, timeline(EDGE_TIMELINE, None))
        found, strip = problems(browser), browser.execute_script(STRIP_LABELS)
        assert found["problems"] == [], (width, found["problems"])
        drawn = strip["drawn"]
        assert strip["hidden"] > 0 and drawn[0] == "Fri 04 Dec" and drawn[-1] == "Sat 05 Dec", strip
        browser.execute_script('document.getElementById("edge-strip").remove()')

        browser.set_window_size(width, 1000)
        browser.get(f"{base}/whatif")
        note = browser.find_element(By.ID, "policy-b-note").text
        assert "an example of a bad policy" in note and "FATAL" in note
        run(browser, "done")
        full_page(browser, width)
        found = problems(browser)
        photograph(browser, tmp_path, f"whatif-{width}.png")
        assert found["axes"] > 0 and found["problems"] == [], (width, found["problems"])
        # A bad entry is answered on the page, and the last run's results go with it.
        assert browser.find_elements(By.CSS_SELECTOR, "article.whatif")
        run(browser, "error", nodes="0")
        assert browser.find_element(By.ID, "status").text.startswith("count:")
        assert browser.find_elements(By.CSS_SELECTOR, "article.whatif") == []
        assert problems(browser)["problems"] == []
    assert up.interrupt() == 0
