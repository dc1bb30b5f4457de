"""The dashboard's HTML, rendered on the server from a snapshot (a plain JSON-ready mapping).

One renderer for both the first page and every refresh: the JSON endpoint returns the snapshot
and these same sections as HTML, and the page's script only swaps them in. Every value from the
snapshot is escaped; capacity bars and timelines are inline SVG (sized by attributes, so the
page's Content-Security-Policy can forbid inline styles).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from html import escape
from string import Template
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

DIMENSIONS = (("cpus", "vCPU", ""), ("memory_mb", "memory", " MB"), ("disk_gb", "disk", " GB"))
PAGES = ("/", "/whatif")
"""The pages a sign-in may return to (anything else returns to ``/``)."""
SECTIONS = ("summary", "pools", "nodes", "claims", "namespaces", "events")
TICK_HOURS = (1, 2, 3, 6, 12, 24, 48, 168)
"""Hour steps a timeline's axis may use: the smallest that keeps it to ``MAX_TICKS`` ticks
(whole days past 24: every other midnight, then Mondays, for the What-if page's weeks)."""
MAX_TICKS = 16
_PAGE = Template("""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>fleetgate</title>
<link rel="stylesheet" href="/dashboard/static/dashboard.css">
<script src="/dashboard/static/axis.js" defer></script>
<script src="/dashboard/static/dashboard.js" defer></script>
</head>
<body>
<header>
  <h1>fleetgate</h1>
  <p class="tagline">guarded capacity admission · maintenance-window rotation</p>
  <nav><a id="whatif-link" href="/whatif">What if: compare two policies</a></nav>
  <p id="live" class="live" data-state="loading">live</p>
</header>
<section id="summary" class="summary">$summary</section>
<main>
  <section class="panel wide"><h2>Node pools</h2><div id="pools">$pools</div></section>
  <section class="panel wide"><h2>Nodes</h2><div id="nodes">$nodes</div></section>
  <section class="panel"><h2>Claims</h2><div id="claims">$claims</div></section>
  <section class="panel"><h2>Usage by namespace</h2><div id="namespaces">$namespaces</div>
  </section>
  <section class="panel"><h2>Recent events</h2><div id="events">$events</div></section>
</main>
<footer>Refreshes every 1.5&nbsp;s from <code>/dashboard/data</code>.
The same numbers are in the API: <code>/v1/admin/resources</code>, <code>/v1/events</code>,
<code>/metrics</code>.</footer>
</body>
</html>
""")
_LOGIN = Template("""<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>fleetgate: sign in</title>
<link rel="stylesheet" href="/dashboard/static/dashboard.css"></head>
<body class="login">
<h1>fleetgate</h1>
<p>$message</p>
<form method="get" action="$action">
<label>Admin token <input type="password" name="token" autocomplete="off" required></label>
<button type="submit">Open the dashboard</button>
</form>
<p class="hint"><code>fleetgate up</code> prints a link with the token when it starts.</p>
</body>
</html>
""")


def e(value: object) -> str:
    """Escape anything for HTML text and attribute values."""
    return escape("" if value is None else str(value), quote=True)


def _pct(used: float, limit: float) -> float:
    return 0.0 if limit <= 0 else 100.0 * used / limit


def bar(used: float, limit: float, label: str, unit: str = "") -> str:
    """A capacity bar: ``used`` against ``limit`` (over 100% is drawn full and marked ``over``)."""
    pct = _pct(used, limit)
    level = "over" if pct > 100 else "high" if pct >= 75 else "ok"
    width = f"{min(pct, 100.0):.1f}"
    text = f"{_num(used)} / {_num(limit)}{unit}"
    return (
        f'<div class="bar" data-dimension="{e(label)}" data-used="{e(used)}" '
        f'data-limit="{e(limit)}" data-level="{level}">'
        f'<span class="bar-label">{e(label)}</span>'
        f'<svg viewBox="0 0 100 8" preserveAspectRatio="none" role="img" '
        f'aria-label="{e(label)} {e(text)}">'
        f'<rect class="bar-bg" width="100" height="8"/>'
        f'<rect class="bar-fill {level}" width="{width}" height="8"/></svg>'
        f'<span class="bar-text">{e(text)}</span></div>'
    )


def _num(value: float | int | None) -> str:
    if value is None:
        return "?"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:.1f}"
    return f"{int(value):,}"


def _short(instant: str | None) -> str:
    if not instant:
        return "—"
    return datetime.fromisoformat(instant).strftime("%a %H:%M")


# --- sections --------------------------------------------------------------------------------


def summary(s: Mapping[str, Any]) -> str:
    """Virtual time, speed and the cluster row."""
    c = s["cluster"]
    total, claimed, unclaimed = c["total"], c["claimed"], c["unclaimed_used"]
    recon = s.get("reconciler") or {}
    parts = [
        f'<div class="stat"><span>{e(_clock(s))} time</span><b id="now">{e(_when(s["now"]))}'
        "</b></div>",
        f'<div class="stat"><span>speed ({e(_clock(s))} over real time)</span>'
        f"<b>{e(_num(s['speed']))}×</b></div>",
        f'<div class="stat"><span>running for ({e(_clock(s))} time)</span>'
        f"<b>{e(s['elapsed'])}</b></div>",
        f'<div class="stat"><span>placements</span><b id="placements">{e(s["placements"])}'
        "</b></div>",
        '<div class="stat wide"><span>cluster vCPU: claimed · unclaimed used · total</span>'
        f"<b>{_num(claimed['cpus'])} · {_num(unclaimed['cpus'])} · {_num(total['cpus'])}</b></div>",
    ]
    if recon:
        drift = "no drift" if recon.get("clean") else f"{recon.get('drifted_nodes')} drifted"
        parts.append(
            f'<div class="stat"><span>last reconcile ({e(_clock(s))} time)</span>'
            f"<b>{e(_short(recon.get('at')))} · "
            f"{e(drift)}</b></div>"
        )
    return "".join(parts)


def _clock(s: Mapping[str, Any]) -> str:
    """Whose time the snapshot's instants are in: ``virtual`` under ``fleetgate up`` (its
    accelerated clock), else ``real``."""
    return str(s.get("clock") or "real")


def nodes(s: Mapping[str, Any]) -> str:
    """One row per node: role, placements, a bar per dimension and demand against budget."""
    rows = []
    for n in s["nodes"]:
        bars = "".join(
            bar(n["used"][d], n["limits"][d], label, unit) for d, label, unit in DIMENSIONS
        )
        if n["budget"] is None:
            demand = '<div class="bar none">demand: no metrics yet</div>'
        else:
            demand = bar(n["demand"], n["budget"], "demand")
        state = "schedulable" if n["schedulable"] else f"cordoned ({n['cordoned_by']})"
        rows.append(
            f'<tr data-node="{e(n["name"])}" data-role="{e(n["role"])}" '
            f'data-schedulable="{str(n["schedulable"]).lower()}">'
            f"<td><b>{e(n['name'])}</b><br><small>{e(n['pool'])}</small></td>"
            f'<td><span class="role {e(n["role"])}">{e(n["role"])}</span><br>'
            f"<small>{e(state)}</small></td>"
            f'<td class="num">{e(n["placements"])}</td>'
            f'<td class="bars">{bars}</td><td class="bars">{demand}'
            f"<small>load {e(_num(n['load']))} + expected {e(_num(n['expected_demand']))}"
            f"{e(_budget(s, n))}</small></td>{_lifetime(n.get('lifetime'))}</tr>"
        )
    if not rows:
        return '<p class="empty">No nodes in the ledger yet.</p>'
    return (
        '<table class="nodes"><thead><tr><th>node</th><th>state</th><th>placed</th>'
        "<th>allocation (used / limit)</th><th>demand / budget</th>"
        "<th>age / A · forced expiry</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>{BAR_LEGEND}"
    )


BAR_LEGEND = (
    '<ul class="legend" data-legend="bars">'
    '<li><svg viewBox="0 0 10 10" class="swatch"><rect class="bar-fill ok" width="10" '
    'height="10"/></svg>under 75% of the limit (or budget)</li>'
    '<li><svg viewBox="0 0 10 10" class="swatch"><rect class="bar-fill high" width="10" '
    'height="10"/></svg>75% to 100%: close to it</li>'
    '<li><svg viewBox="0 0 10 10" class="swatch"><rect class="bar-fill over" width="10" '
    'height="10"/></svg>over it (demand over budget: the guard refuses new placements)</li>'
    "<li>an age bar uses the same colours against A: red is a node past A, due for rotation"
    "</li></ul>"
)
"""What every bar colour means (allocation, demand and age bars share the three levels)."""


def _lifetime(life: Mapping[str, Any] | None) -> str:
    """The node's age against A (a bar once A is known) and Karpenter's forced expiry."""
    if not life:
        return '<td class="bars"><small>no NodeClaim</small></td>'
    if life.get("A_seconds"):
        age = bar(life["age_seconds"] / 3600, life["A_seconds"] / 3600, "age", " h")
        due = "past A" if life["age_seconds"] >= life["A_seconds"] else "under A"
        text = f"{life['age']} of A {life['A']} ({due})"
    else:
        age, text = "", f"{life['age']} old (A not derived yet)"
    expiry = _when(life["expires_at"]) if life.get("expires_at") else "never (no expireAfter)"
    return (
        f'<td class="bars" data-age-seconds="{e(life["age_seconds"])}" '
        f'data-a-seconds="{e(life.get("A_seconds"))}" '
        f'data-expires-at="{e(life.get("expires_at"))}">'
        f"{age}<small>{e(text)}</small><br><small>forced expiry {e(expiry)}</small></td>"
    )


def _budget(s: Mapping[str, Any], n: Mapping[str, Any]) -> str:
    if n["cpu_schedulable"] is None or s.get("target_load") is None:
        return ""
    return f" vs {s['target_load']:g} × {n['cpu_schedulable']} threads"


def claims(s: Mapping[str, Any]) -> str:
    """One block per claim: its namespace, state, expiry and used against limit."""
    out = []
    for c in s["claims"]:
        bars = "".join(
            bar(c["used"][d], c["limit"][d], label, unit) for d, label, unit in DIMENSIONS
        )
        out.append(
            f'<div class="claim" data-claim="{e(c["id"])}" data-namespace="{e(c["namespace"])}">'
            f'<p><b>{e(c["namespace"])}</b> <span class="state {e(c["state"])}">'
            f"{e(c['state'])}</span> <small>expires in {e(c['expires_in'])} "
            f"({e(_clock(s))} time)</small></p>"
            f"{bars}</div>"
        )
    return "".join(out) or '<p class="empty">No claims.</p>'


def namespaces(s: Mapping[str, Any]) -> str:
    """What every namespace uses, claimed or not (a claim's own block shows its limit)."""
    rows = []
    for ns in s.get("namespaces") or ():
        used = ns["used"]
        cells = "".join(
            f'<td class="num">{e(_num(used[d]))}{e(unit)}</td>' for d, _, unit in DIMENSIONS
        )
        claimed = "claimed" if ns["claimed"] else "unclaimed"
        rows.append(
            f'<tr data-namespace="{e(ns["namespace"])}" '
            f'data-claimed="{str(ns["claimed"]).lower()}">'
            f"<td><b>{e(ns['namespace'])}</b> <small>{claimed}</small></td>"
            f'<td class="num">{e(ns["placements"])}</td>{cells}</tr>'
        )
    if not rows:
        return '<p class="empty">No placements.</p>'
    heads = "".join(f"<th>{e(label)}</th>" for _, label, _ in DIMENSIONS)
    return (
        '<table class="namespaces"><thead><tr><th>namespace</th><th>placements</th>'
        f"{heads}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


EVENTS_SHOWN = 20
"""The newest events the page lists, each line whole (all of them: ``/v1/events``)."""


def events(s: Mapping[str, Any]) -> str:
    """The most recent audit and rotation events, newest first."""
    items = []
    for ev in s["events"][:EVENTS_SHOWN]:
        items.append(
            f'<li data-event-id="{e(ev["id"])}" class="{e(ev["level"])}">'
            f"<time>{e(_short(ev['at']))}</time> <b>{e(ev['kind'])}</b> "
            f"<span>{e(_detail(ev))}</span></li>"
        )
    if not items:
        return '<p class="empty">None yet.</p>'
    note = f'<p class="clock-note" data-clock="{e(_clock(s))}">times are {e(_clock(s))} time</p>'
    return f'{note}<ol class="events">{"".join(items)}</ol>'


def _detail(ev: Mapping[str, Any]) -> str:
    data = ev.get("data") or {}
    if "message" in data:
        return str(data["message"])
    keys = ("node", "target_node", "namespace", "claim", "failing_stage", "error")
    parts = [f"{k}={data[k]}" for k in keys if data.get(k) is not None]
    if ev.get("namespace") and "namespace" not in data:
        parts.insert(0, f"ns={ev['namespace']}")
    return " ".join(parts) or str(ev.get("subject") or "")


def pools(s: Mapping[str, Any]) -> str:
    """One card per pool: policy, A/G/C, findings, gate or census, the rotation, a timeline."""
    return (
        "".join(_pool(p, s["now"], _clock(s)) for p in s["pools"])
        or '<p class="empty">No pools.</p>'
    )


def _pool(p: Mapping[str, Any], now: str, clock: str) -> str:
    gov = p.get("governance") or {}
    status = gov.get("status", "waiting for the first pass")
    head = (
        f"<h3>{e(p['name'])} <small>{e(p['nodes'])} nodes · policy "
        f"{e(p.get('policy') or '—')} · {e(status)}</small></h3>"
    )
    d = p.get("derivation")
    if d:
        agc = (
            f'<dl class="agc"><div><dt>A</dt><dd>{e(d["A"])}</dd></div>'
            f"<div><dt>G</dt><dd>{e(d['G'])}</dd></div><div><dt>C</dt><dd>{e(d['C'])}</dd></div>"
            f"<div><dt>P</dt><dd>{e(d['P'])}</dd></div>"
            f"<div><dt>t_rot</dt><dd>{e(d['t_rot'])}</dd></div></dl>"
        )
        found = "".join(
            f'<li class="{e(f["severity"])}"><b>{e(f["code"])}</b> {e(f["message"])}</li>'
            for f in d["findings"]
        )
        findings = f'<ul class="findings">{found}</ul>' if found else "<p>No findings.</p>"
    else:
        agc, findings = "", f"<p>{e(gov.get('detail') or '')}</p>"
    window = {True: "open", False: "closed", None: "—"}[p.get("window_open")]
    return (
        f'<article class="pool" data-pool="{e(p["name"])}">{head}'
        f'<div class="pool-grid"><div>{agc}{findings}</div>'
        f'<div><p>window <b class="window {e(window)}">{e(window)}</b></p>'
        f"{_why(p)}{_active(p.get('active'))}{_recent(p.get('recent'))}</div></div>"
        f"{_clocked_timeline(p.get('timeline'), now, clock)}</article>"
    )


def _clocked_timeline(t: Mapping[str, Any] | None, now: str, clock: str) -> str:
    return timeline({**t, "clock": t.get("clock") or clock} if t else None, now)


def _ledger_hold(held: Mapping[str, Any] | None) -> str:
    """Gate 9 on the pool card: which node is held and what its placements lack."""
    if not held:
        return ""
    missing = ", ".join(f"{k} {v}" for k, v in (held.get("missing") or {}).items() if v)
    return (
        f'<span data-why="ledger">: node {e(held["node"])}, {e(held["stranded"])} of '
        f"{e(held['placements'])} placement(s) would have nowhere to go"
        f"{e(' (missing ' + missing + ')' if missing else ' (room split across nodes)')}"
        " — raise the pool's limits, shrink a claim or add a node</span>"
    )


def _why(p: Mapping[str, Any]) -> str:
    """The answer to "why is nothing rotating?": the closed gate, or the census."""
    if p.get("active"):
        return ""
    gate = p.get("gate")
    if gate:
        until = f" until {_short(gate['until'])}" if gate.get("until") else ""
        return (
            f'<p class="why" data-why="gate">gate <b>{e(gate["reason"])}</b>{e(until)}'
            f"{_ledger_hold(gate.get('ledger'))}</p>"
        )
    census = p.get("census")
    if census:
        counts = ", ".join(f"{k} {v}" for k, v in census.items() if v and k != "Total")
        reason = p.get("reason") or "—"
        return (
            f'<p class="why" data-why="census">{e(reason)}: census of {e(census["Total"])} '
            f"— {e(counts or 'empty')}</p>"
        )
    return ""


def _active(active: Mapping[str, Any] | None) -> str:
    if not active:
        return '<p class="rotation idle">no rotation in flight</p>'
    surge = f" → surge {active['surge']}" if active.get("surge") else ""
    return (
        f'<p class="rotation" data-claim="{e(active["claim"])}">rotating <b>'
        f"{e(active['claim'])}</b> ({e(active['state'])}, {e(active['mode'])}){e(surge)}</p>"
    )


def _recent(recent: Mapping[str, Any] | None) -> str:
    """The rotation that just finished, so one that took less than a refresh is still seen."""
    if not recent:
        return ""
    outcome = recent.get("outcome") or "done"
    forceful = ", forceful fallback" if recent.get("forceful") else ""
    return (
        f'<p class="rotation recent {e(outcome)}" data-recent="{e(recent["claim"])}">'
        f"last rotation <b>{e(recent['claim'])}</b>: {e(outcome)}{e(forceful)}, "
        f"{e(_short(recent['start']))}–{e(_short(recent['end']))} "
        f"({e(recent['ago'])} ago)</p>"
    )


def timeline(t: Mapping[str, Any] | None, now: str | None, max_labels: int = MAX_TICKS) -> str:
    """An SVG strip: maintenance windows above, rotations below, an hour axis with dates, a
    legend; a line at ``now`` when given, and one per ``breaches`` instant when ``t`` has them
    (the What-if page's simulated forced expiries). ``t["clock"]`` (``virtual``, ``simulated``)
    says whose time the axis is in; ``max_labels`` how many of its ticks are labelled at most
    (a narrow timeline labels every other one)."""
    if not t:
        return ""
    start, end = datetime.fromisoformat(t["start"]), datetime.fromisoformat(t["end"])
    span = (end - start).total_seconds() or 1.0

    def x(instant: str | None) -> float:
        at = datetime.fromisoformat(instant or now or t["end"])
        return round(1000 * min(max((at - start).total_seconds() / span, 0.0), 1.0), 1)

    shapes = []
    for w in t["windows"]:
        shapes.append(
            f'<rect class="tl-window" x="{x(w["start"])}" y="2" '
            f'width="{max(x(w["end"]) - x(w["start"]), 1)}" height="16"/>'
        )
    for r in t["rotations"]:
        outcome = r.get("outcome") or "running"
        shapes.append(
            f'<rect class="tl-rotation {e(outcome)}" x="{x(r["start"])}" y="24" '
            f'width="{max(x(r["end"]) - x(r["start"]), 3)}" height="14" '
            f'data-outcome="{e(outcome)}">'
            f"<title>{e(r['claim'])}: {e(outcome)}</title></rect>"
        )
    zone = _zone(t.get("zone"))
    ticks = axis_ticks(start, end, zone)
    for at, _, major in ticks:
        cls = "tl-tick major" if major else "tl-tick"
        shapes.append(f'<line class="{cls}" x1="{x(at.isoformat())}" x2="{x(at.isoformat())}" '
                      'y1="0" y2="40"/>')  # fmt: skip
    breaches = t.get("breaches")
    for at in breaches or ():
        shapes.append(f'<line class="tl-breach" x1="{x(at)}" x2="{x(at)}" y1="0" y2="40"/>')
    if now is not None:
        shapes.append(f'<line class="tl-now" x1="{x(now)}" x2="{x(now)}" y1="0" y2="40"/>')
    marks = "".join(
        _mark(x(at.isoformat()) / 10, label, major)
        for at, label, major in ticks[:: _label_every(len(ticks), max_labels)]
    )
    name = getattr(zone, "key", None) or "UTC"
    clock = f"{t['clock']} " if t.get("clock") else ""
    labels = (
        f'<div class="tl-labels"><span>{e(_dated(t["start"], zone))}</span>'
        f'<span class="tl-zone">{e(clock)}times in {e(name)}</span>'
        f"<span>{e(_dated(t['end'], zone))}</span></div>"
    )
    legend = timeline_legend(now=now is not None, breaches=breaches is not None, clock=clock)
    return (
        '<figure class="timeline"><svg viewBox="0 0 1000 40" preserveAspectRatio="none" '
        f'role="img" aria-label="windows and rotations">{"".join(shapes)}</svg>'
        f'<svg class="tl-axis" width="100%" height="{AXIS_HEIGHT}" role="img" '
        f'aria-label="hours in {e(name)}">{marks}</svg>{labels}'
        f"<figcaption>{legend}</figcaption></figure>"
    )


AXIS_HEIGHT = 16
"""Pixels of the axis under a timeline. It has no viewBox: its labels keep the stylesheet's
font size whatever the timeline's width (a scaled axis drew them 7 px tall on a narrow one)."""
EDGE_PERCENT = 6.0
"""A label this close to either end is anchored at that end, so it is never cut off."""


def _label_every(ticks: int, max_labels: int) -> int:
    """Label every n-th tick, so that at most ``max_labels`` labels share the axis."""
    return max(1, -(-ticks // max(1, max_labels)))


def _mark(percent: float, label: str, major: bool) -> str:
    """One axis label at ``percent`` of the width, anchored so it stays inside the axis."""
    anchor = (
        "start" if percent < EDGE_PERCENT else "end" if percent > 100 - EDGE_PERCENT else "middle"
    )
    return (
        f'<text class="tl-mark{" major" if major else ""}" x="{percent:.2f}%" y="12" '
        f'text-anchor="{anchor}">{e(label)}</text>'
    )


def _swatch(shape: str, text: str) -> str:
    return (
        f'<span class="legend-item"><svg viewBox="0 0 10 10" class="swatch">{shape}</svg>'
        f"{e(text)}</span>"
    )


def timeline_legend(*, now: bool = True, breaches: bool = False, clock: str = "") -> str:
    """One swatch per colour the timeline draws (``now`` and breach lines when it draws them)."""
    items = [
        ('<rect class="tl-window" width="10" height="10"/>', "maintenance window (top row)"),
        ('<rect class="tl-rotation" width="10" height="10"/>', "rotation running"),
        ('<rect class="tl-rotation success" width="10" height="10"/>', "rotation done"),
        (
            '<rect class="tl-rotation failure" width="10" height="10"/>',
            "rotation failed or expired",
        ),
    ]
    if breaches:
        items.append(
            (
                '<line class="tl-breach" x1="5" x2="5" y1="0" y2="10"/>',
                "a node outlived expireAfter (forced expiry)",
            )
        )
    if now:
        items.append(('<line class="tl-now" x1="5" x2="5" y1="0" y2="10"/>', f"now ({clock}time)"
                      if clock else "now"))  # fmt: skip
    items.append(('<line class="tl-tick major" x1="5" x2="5" y1="0" y2="10"/>', "midnight"))
    return "".join(_swatch(shape, text) for shape, text in items)


TIMELINE_LEGEND = timeline_legend()
"""The dashboard's legend: one swatch per colour the timeline draws."""


def _zone(name: str | None) -> ZoneInfo:
    """The named time zone; UTC when it is missing or does not load."""
    try:
        return ZoneInfo(name or "UTC")
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC")


def axis_ticks(start: datetime, end: datetime, zone: ZoneInfo) -> list[tuple[datetime, str, bool]]:
    """Hour ticks in ``zone`` between two instants: (instant, label, is local midnight).

    The step is the smallest of ``TICK_HOURS`` that keeps the axis to ``MAX_TICKS`` ticks, so
    a day reads in hours and eight days in half-days; a midnight is labelled with its date.
    Ticks are found in UTC quarter hours, which lands on whole local hours in every zone
    (including half- and quarter-hour offsets) and across DST changes.
    """
    hours = (end - start).total_seconds() / 3600
    step = next((h for h in TICK_HOURS if hours / h <= MAX_TICKS), TICK_HOURS[-1])
    quarter = timedelta(minutes=15)
    at = start.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    ticks = []
    while at <= end:
        local = at.astimezone(zone)
        if at >= start and local.minute == 0 and _on_step(local, step):
            major = local.hour == 0
            ticks.append(
                (at, local.strftime("%a %d %b") if major else local.strftime("%H:%M"), major)
            )
        at += quarter
    return ticks


def _on_step(local: datetime, step: int) -> bool:
    """Whether a whole local hour is a tick of an axis of ``step`` hours."""
    if step <= 24:
        return local.hour % step == 0
    # Whole days: midnights, every (step / 24)th day counted from a Monday (ordinal 1 is one).
    return local.hour == 0 and (local.toordinal() - 1) % (step // 24) == 0


def _dated(instant: str, zone: ZoneInfo) -> str:
    """An instant with its date, in ``zone``, with the zone's abbreviation."""
    return datetime.fromisoformat(instant).astimezone(zone).strftime("%a %d %b %Y %H:%M %Z")


def _when(instant: str) -> str:
    return datetime.fromisoformat(instant).strftime("%Y-%m-%d %H:%M UTC")


# --- pages -----------------------------------------------------------------------------------


def sections(s: Mapping[str, Any]) -> dict[str, str]:
    """Every section of the page, rendered."""
    return {
        "summary": summary(s),
        "pools": pools(s),
        "nodes": nodes(s),
        "claims": claims(s),
        "namespaces": namespaces(s),
        "events": events(s),
    }


def page(s: Mapping[str, Any]) -> str:
    """The whole dashboard, rendered from a snapshot."""
    return _PAGE.substitute(sections(s))


def login(message: str, action: str = "/") -> str:
    """The page that asks for the admin token; the form signs in to ``action`` (the page asked
    for), so a direct link to ``/whatif`` lands there."""
    return _LOGIN.substitute(message=e(message), action=e(action if action in PAGES else "/"))


__all__: Sequence[str] = [
    "SECTIONS",
    "axis_ticks",
    "bar",
    "login",
    "page",
    "sections",
    "timeline",
]
