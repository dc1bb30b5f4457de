"""The simulator's HTML report: one self-contained page with an inline SVG timeline.

The timeline has one row per slot: each generation is a bar from its creation to its removal,
its eligibility boundary and deadline are ticks, rotations are arrows, breaches are red marks,
and the maintenance windows are the shaded bands behind everything. No scripts, no external
assets: the page renders the same anywhere and byte-for-byte the same for the same result.
"""

from __future__ import annotations

import html
import json
from datetime import datetime
from typing import Any

from fleetgate.domain.rotation.annotations import parse_timestamp

WIDTH = 1100
LEFT = 90
ROW = 22
TOP = 40
COLORS = {
    "initial": "#8da0cb",
    "surge": "#66c2a5",
    "surgeless": "#fc8d62",
    "replacement": "#e78ac3",
}


def headline(summary: dict[str, Any]) -> str:
    """The verdict line: fleet nodes that breached and the breaches, counted apart."""
    breaches, nodes = summary["breaches"], summary["nodes"]
    if breaches == 0:
        return "no node outlived its expireAfter"
    # A fleet node is a slot: the initial node and its replacements; each may breach once.
    return (
        f"{summary['breachedNodes']} of {nodes} fleet node(s) outlived their expireAfter: "
        f"{breaches} breach(es) counting their replacements"
    )


def _t(value: str | None) -> datetime | None:
    return parse_timestamp(value) if value else None


def timeline_svg(doc: dict[str, Any]) -> str:
    """The SVG timeline of a simulation document."""
    start = _t(doc["simulatedFrom"])
    end = _t(doc["simulatedThrough"])
    assert start is not None and end is not None
    span = max((end - start).total_seconds(), 1.0)
    slots = 1 + max((g["slot"] for g in doc["generations"]), default=0)
    height = TOP + slots * ROW + 40

    def x(value: str | datetime | None) -> float:
        when = _t(value) if isinstance(value, str) or value is None else value
        when = when or end
        frac = min(max((when - start).total_seconds() / span, 0.0), 1.0)
        return round(LEFT + frac * (WIDTH - LEFT - 10), 2)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="11">',
        f'<rect width="{WIDTH}" height="{height}" fill="white"/>',
    ]
    out += _windows(doc, x, slots)
    out += _day_ticks(start, span, x, slots)
    out += _generations(doc, x, start, end)
    out += _rotations(doc, x)
    for e in doc["events"]:
        if e["type"] == "expire-after-breach":
            y, xb = TOP + e["slot"] * ROW, x(e["at"])
            out.append(
                f'<text x="{xb}" y="{y + 15}" text-anchor="middle" fill="#c92a2a" '
                f'font-weight="bold" font-size="14">✕<title>breach: {html.escape(e["node"])} '
                f"at {e['at']}</title></text>"
            )
    out += _legend(TOP + slots * ROW + 24)
    out.append("</svg>")
    return "\n".join(out)


def _windows(doc: dict[str, Any], x: Any, slots: int) -> list[str]:
    out = []
    for w in doc["windows"]:
        x0, x1 = x(w["start"]), x(w["end"])
        out.append(
            f'<rect x="{x0}" y="{TOP - 6}" width="{max(x1 - x0, 1.5)}" '
            f'height="{slots * ROW + 6}" fill="#ffe066" fill-opacity="0.5"><title>window '
            f"{w['start']} – {w['end']}</title></rect>"
        )
    return out


def _day_ticks(start: datetime, span: float, x: Any, slots: int) -> list[str]:
    out = []
    days = int(span // 86400)
    step = max(1, days // 12) if days else 1
    last = -100.0
    for d in range(0, days + 1, step):
        when = datetime.fromtimestamp(start.timestamp() + d * 86400, tz=start.tzinfo)
        xi = x(when)
        if xi - last < 40:  # the run ends just after a tick: do not print two labels on top
            continue
        last = xi
        anchor = "end" if xi > WIDTH - 40 else "middle"  # keep the last label on the canvas
        out.append(
            f'<line x1="{xi}" y1="{TOP - 10}" x2="{xi}" y2="{TOP + slots * ROW}" '
            f'stroke="#ddd"/><text x="{xi}" y="{TOP - 14}" text-anchor="{anchor}">'
            f"{when.strftime('%m-%d')}</text>"
        )
    return out


def _generations(doc: dict[str, Any], x: Any, start: datetime, end: datetime) -> list[str]:
    out = []
    for g in doc["generations"]:
        y = TOP + g["slot"] * ROW
        if g["gen"] == 0:
            out.append(
                f'<text x="{LEFT - 6}" y="{y + 13}" text-anchor="end">'
                f"{html.escape(g['name'])}</text>"
            )
        x0, x1 = x(g["createdAt"]), x(g["removedAt"])
        color = COLORS.get(g["birthMode"], "#999")
        shade = "1" if g["gen"] % 2 == 0 else "0.55"  # successive generations stay apart
        out.append(
            f'<rect x="{x0}" y="{y + 3}" width="{max(x1 - x0, 1)}" height="{ROW - 8}" '
            f'fill="{color}" fill-opacity="{shade}" stroke="#555" stroke-width="0.5"><title>'
            f"{html.escape(g['name'])} ({g['birthMode']}) created {g['createdAt']}, "
            f"deadline {g['deadline']}</title></rect>"
        )
        boundary = _t(g["eligibilityBoundary"])
        if boundary is not None and start <= boundary <= end:
            xb = x(boundary)
            out.append(
                f'<line x1="{xb}" y1="{y + 2}" x2="{xb}" y2="{y + ROW - 3}" '
                'stroke="#1c7ed6" stroke-dasharray="2,2"/>'
            )
        deadline = _t(g["deadline"])
        if deadline is not None and deadline <= end:
            xd = x(deadline)
            out.append(
                f'<line x1="{xd}" y1="{y + 1}" x2="{xd}" y2="{y + ROW - 2}" '
                'stroke="#c92a2a" stroke-width="1.5"/>'
            )
    return out


def _rotations(doc: dict[str, Any], x: Any) -> list[str]:
    out = []
    for r in doc["rotations"]:
        if r["slot"] is None:
            continue
        top = TOP + r["slot"] * ROW + 1
        xs, xe = x(r["start"]), x(r["done"])
        color = "#2b8a3e" if r["outcome"] == "success" else "#e67700"
        out.append(
            f'<polygon points="{xs - 4},{top} {xs + 4},{top} {xs},{top + 7}" fill="{color}">'
            f"<title>{r['mode']} rotation of {html.escape(r['node'])}: {r['start']} → "
            f"{r['done']} ({r['outcome']})</title></polygon>"
            f'<line x1="{xs}" y1="{top + ROW / 2}" x2="{max(xe, xs + 2)}" y2="{top + ROW / 2}" '
            f'stroke="{color}" stroke-width="3"/>'
        )
    return out


def _legend(y: float) -> list[str]:
    out = []
    lx = float(LEFT)
    swatches = [
        ("#ffe066", "maintenance window"),
        (COLORS["initial"], "initial node"),
        (COLORS["surge"], "surge replacement"),
        (COLORS["surgeless"], "surge-less"),
        (COLORS["replacement"], "forced replacement"),
    ]
    for color, label in swatches:
        out.append(
            f'<rect x="{lx}" y="{y - 9}" width="12" height="10" fill="{color}" stroke="#555" '
            f'stroke-width="0.5"/><text x="{lx + 16}" y="{y}">{label}</text>'
        )
        lx += 34 + 6.5 * len(label)
    out.append(
        f'<line x1="{lx}" y1="{y - 9}" x2="{lx}" y2="{y + 1}" stroke="#c92a2a" '
        f'stroke-width="1.5"/><text x="{lx + 5}" y="{y}">deadline</text>'
        f'<line x1="{lx + 65}" y1="{y - 9}" x2="{lx + 65}" y2="{y + 1}" stroke="#1c7ed6" '
        f'stroke-dasharray="2,2"/><text x="{lx + 70}" y="{y}">eligible</text>'
        f'<polygon points="{lx + 126},{y - 9} {lx + 134},{y - 9} {lx + 130},{y - 2}" '
        f'fill="#2b8a3e"/><text x="{lx + 138}" y="{y}">rotation</text>'
        f'<text x="{lx + 195}" y="{y + 1}" fill="#c92a2a" font-weight="bold" font-size="14">'
        f'✕</text><text x="{lx + 209}" y="{y}">breach</text>'
    )
    return out


def render_html(doc: dict[str, Any]) -> str:
    """A self-contained HTML page: summary, findings, the timeline and the raw document."""
    r, s = doc["result"], doc["summary"]
    rows = "".join(
        f"<tr><th>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>"
        for k, v in [
            ("age threshold A", r["ageThreshold"]),
            ("t_rot (deadline bound)", r["tRot"]),
            ("t_rot_est (forecast)", r["tRotEst"]),
            ("guaranteed chances G", r["guaranteedChances"]),
            ("capacity per window C", r["throughputCapacity"]),
            ("window period P", r["inputs"]["p"]),
            ("nodes", s["nodes"]),
            (
                "rotations",
                f"{s['rotations']} ({s['succeeded']} succeeded, "
                f"{s['failed']} failed, {s['surgeless']} surge-less)",
            ),
            ("breaches", s["breaches"]),
        ]
    )
    diags = (
        "".join(
            f'<li class="{html.escape(d["severity"])}"><b>{html.escape(d["code"])}</b>: '
            f"{html.escape(d['message'])}</li>"
            for d in [*r["findings"], *doc["diagnostics"]]
        )
        or "<li>none</li>"
    )
    verdict = headline(s)
    raw = html.escape(json.dumps(doc, indent=2))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>fleetgate simulation</title>
<style>
body {{ font-family: sans-serif; margin: 2em; color: #222; }}
table {{ border-collapse: collapse; }} th, td {{ text-align: left; padding: 2px 12px 2px 0; }}
li.fatal {{ color: #c92a2a; }} li.warn {{ color: #e67700; }}
.verdict {{ font-size: 1.2em; font-weight: bold; }}
pre {{ background: #f8f9fa; padding: 1em; max-height: 30em; overflow: auto; }}
</style></head><body>
<h1>fleetgate simulation</h1>
<p>{html.escape(doc["simulatedFrom"])} → {html.escape(doc["simulatedThrough"])}
{" (partial)" if doc["partial"] else ""} · provisioning {html.escape(doc["env"]["provisioning"])},
drain {html.escape(doc["env"]["drain"])}</p>
<p class="verdict">{verdict}</p>
<table>{rows}</table>
<h2>Findings and diagnostics</h2><ul>{diags}</ul>
<h2>Timeline</h2>
{timeline_svg(doc)}
<h2>Result document</h2><details><summary>JSON</summary><pre>{raw}</pre></details>
</body></html>
"""
