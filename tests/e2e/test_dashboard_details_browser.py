"""The dashboard's details in a real browser: dated, zoned hour axes, legends, every namespace's
usage, and each node's age against A with its forced expiry.

Runs the real ``fleetgate up`` and headless Chromium through the dashboard browser test's
harness. The page swaps its sections in every 1.5 s, so each check reads one DOM snapshot in a
single script call (elements found in one refresh and read in the next would be stale).
Never skipped: without Chromium the test fails and says how to install it.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.e2e.test_dashboard_browser import Up, browser, up, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.slow]
__all__ = ["browser", "up"]  # the fixtures, imported so that pytest finds them here

#: One consistent reading of what the checks need, with the drawn size of each part (a part
#: that is present but collapsed to nothing would not be seen by anyone).
SNAPSHOT = """
const size = (el) => { if (!el) return null; const r = el.getBoundingClientRect();
                       return [r.width, r.height]; };
const timeline = document.querySelector("article.pool .timeline");
return {
  live: document.getElementById("live").dataset.state,
  marks: timeline ? [...timeline.querySelectorAll(".tl-axis text")].map(
    (t) => ({label: t.textContent, major: t.classList.contains("major")})) : [],
  axis: size(timeline && timeline.querySelector(".tl-axis")),
  labels: timeline ? timeline.querySelector(".tl-labels").textContent : "",
  timelineLegend: timeline ? [...timeline.querySelectorAll("figcaption .swatch > *")].map(
    (s) => s.getAttribute("class")) : [],
  barLegend: [...document.querySelectorAll("[data-legend=bars] .swatch rect")].map(
    (r) => [r.getAttribute("class"), getComputedStyle(r).fill]),
  barColours: [...document.querySelectorAll("#nodes .bar-fill")].map(
    (r) => [r.getAttribute("class"), getComputedStyle(r).fill]),
  namespaces: [...document.querySelectorAll("#namespaces tr[data-namespace]")].map(
    (tr) => ({name: tr.dataset.namespace, claimed: tr.dataset.claimed,
              cells: [...tr.querySelectorAll("td.num")].map((td) => td.textContent)})),
  ages: [...document.querySelectorAll("#nodes tr[data-node] td[data-age-seconds]")].map(
    (td) => ({age: Number(td.dataset.ageSeconds), a: td.dataset.aSeconds,
              expires: td.dataset.expiresAt, text: td.textContent,
              bar: td.querySelector(".bar[data-dimension=age]") !== null})),
  headers: [...document.querySelectorAll("#nodes th")].map((th) => th.textContent),
};
"""


def read(browser: Any) -> dict[str, Any]:
    """The page as one snapshot."""
    found: dict[str, Any] = browser.execute_script(SNAPSHOT)
    return found


def test_the_dashboard_dates_its_timelines_and_explains_every_colour(up: Up, browser: Any) -> None:
    browser.get(up.link())
    # Wait until the controller has derived A (every node row then has its age bar) and the
    # workload has placed in more than one namespace.
    snap = wait_for(
        browser,
        "node ages against A and several namespaces",
        lambda s: (
            s["live"] == "live"
            and s["marks"]
            and s["ages"]
            and all(a["bar"] for a in s["ages"])
            and len(s["namespaces"]) > 1
            and s
        ),
        read=read,
    )
    # The timeline's axis: hour ticks, every local midnight dated, drawn at a readable size.
    labels = [m["label"] for m in snap["marks"]]
    assert any(":00" in label for label in labels), labels
    dates = [m["label"] for m in snap["marks"] if m["major"]]
    assert dates and all(len(label.split()) == 3 for label in dates), dates  # "Tue 02 Jan"
    assert snap["axis"][0] > 500 and snap["axis"][1] >= 8, snap["axis"]
    assert "times in UTC" in snap["labels"]
    assert re.search(r"\w{3} \d{2} \w{3} \d{4} \d{2}:\d{2} UTC", snap["labels"])  # dated ends
    # A legend entry for every colour: the timeline's shapes and the bars' three levels, drawn
    # in the same colours as the bars themselves (the amber and red ones included).
    assert {"tl-window", "tl-rotation", "tl-rotation success", "tl-rotation failure"} <= set(
        snap["timelineLegend"]
    )
    legend = dict(snap["barLegend"])
    assert set(legend) == {"bar-fill ok", "bar-fill high", "bar-fill over"}
    assert len(set(legend.values())) == 3
    for cls, fill in snap["barColours"]:
        assert legend[cls] == fill, f"{cls} is drawn in {fill}, which the legend does not show"
    # Every namespace's usage, the unclaimed ones too.
    names = {ns["name"]: ns for ns in snap["namespaces"]}
    assert names["ci"]["claimed"] == "true"
    assert any(ns["claimed"] == "false" for ns in names.values()), names
    assert all(len(ns["cells"]) == 4 for ns in names.values())  # placements, 3 dimensions
    # Each node row: its age against A, and when Karpenter would expire it by force.
    assert "age / A · forced expiry" in snap["headers"]
    for age in snap["ages"]:
        assert age["age"] >= 0 and float(age["a"]) > 0
        assert " of A " in age["text"] and "forced expiry" in age["text"]
        assert age["expires"] and age["expires"][:4] in age["text"]
    assert up.interrupt() == 0, "".join(up.stderr)[-2000:]
