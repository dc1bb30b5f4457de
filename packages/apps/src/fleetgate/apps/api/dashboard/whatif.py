"""The dashboard's What-if page: two policies over one fleet shape, checked and simulated.

``/whatif`` is a form (two RotationPolicy YAML texts, a generated fleet: node count, age spread,
expireAfter, terminationGracePeriod, optionally a capacity ledger on it, and a span);
``POST /dashboard/whatif`` answers, for each policy, ``fleetgate check``'s forecast and the
simulation of the real controller over that fleet, its findings included
(the document ``POST /v1/rotation/simulate`` gives), rendered here as HTML for the page to swap
in. Same guard as the dashboard (the admin token, in its cookie or as a bearer token), and the
same bounds as the API: a What-if is interactive, so it must finish within seconds.

Every input is checked before anything runs (a bad one is a 422 naming the field); the answer
then streams as JSON lines, progress first (``whatif_run``), and a client that goes away (the
page's Cancel) stops the simulations.
"""

from __future__ import annotations

from datetime import timedelta
from string import Template
from typing import Any, Protocol

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response, StreamingResponse

from fleetgate.apps.api.dashboard import render
from fleetgate.apps.api.dashboard.render import e
from fleetgate.apps.api.dashboard.whatif_run import (
    START,
    Side,
    WhatIfError,
    answer_lines,
    plan,
    refusal,
    span_of,
    zone_of,
)
from fleetgate.apps.api.deps import container_of
from fleetgate.apps.api.schemas.rotation import SIMULATE_SECONDS
from fleetgate.apps.services.simulation import SimulationResult
from fleetgate.domain.durations import format_duration


class SignIn(Protocol):
    """What the page needs of the dashboard's sign-in (``Dashboard`` is one): the package
    installs this page, so the page names only what it calls, never the package."""

    def sign_in(self, request: Request) -> Response | None:
        """A session and a redirect for ``?token=``; None when the address has none."""

    def authorized(self, request: Request) -> bool:
        """The request carries the admin's session or token."""

    def refused(self, request: Request) -> Response:
        """The sign-in form, for a page asked for without a session."""


WHATIF_AXIS_LABELS = 6
"""Each side's timeline is half the page wide: about every third tick is labelled, so its
dates ("Tue 02 Jan", bold at midnight) never touch at 1280 px."""

POLICY_A = """apiVersion: fleetgate.io/v1alpha1
kind: RotationPolicy
metadata:
  name: daily
spec:
  nodePoolSelector:
    matchLabels: {fleetgate.io/rotate: "true"}
  minRotationChances: 2
  maintenanceWindows:
    - timezone: Asia/Tokyo
      days: [Mon, Tue, Wed, Thu, Fri, Sat, Sun]
      start: "02:00"
      end: "10:00"
  surge:
    readyTimeout: 15m
    cooldownAfter: 10m
"""
"""Healthy over the default fleet: 8 hours a day give C = 20 starts a window, K·C = 40 covers
all 40 nodes falling due together, and the simulation shows no forced expiry."""
POLICY_B = """# An example of a BAD policy, to compare against: one 4-hour window a week cannot give
# each node its 2 chances within the fleet's 14-day expireAfter, so the check says FATAL
# (ANonPositive) and nodes outlive expireAfter in the simulation. Edit it, or paste yours.
apiVersion: fleetgate.io/v1alpha1
kind: RotationPolicy
metadata:
  name: weekly
spec:
  nodePoolSelector:
    matchLabels: {fleetgate.io/rotate: "true"}
  minRotationChances: 2
  maintenanceWindows:
    - timezone: Asia/Tokyo
      days: [Sun]
      start: "02:00"
      end: "06:00"
  surge:
    readyTimeout: 15m
    cooldownAfter: 10m
"""
"""Breaching over the default fleet: one window a week cannot give K = 2 chances within a
14-day expireAfter (``ANonPositive``), so nodes outlive expireAfter."""
DEFAULT_FLEET: dict[str, Any] = {
    "count": 40,
    "spread": "5d",
    "expireAfter": "14d",
    "terminationGracePeriod": "1h",
    "span": "30d",
}
"""What the form starts with: the fleet the two default policies are compared over."""
DEFAULT_LEDGER: dict[str, Any] = {"fill": 90, "nodeCpu": 8, "launchCpu": 4}
"""What the ledger's fields start with (the ledger itself starts off): nodes nearly full, and a
pool that now launches nodes half their size, so a drained node's placements may find no room."""

_PAGE = Template("""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>fleetgate · what if</title>
<link rel="stylesheet" href="/dashboard/static/dashboard.css">
<link rel="stylesheet" href="/dashboard/static/whatif.css">
<script src="/dashboard/static/axis.js" defer></script>
<script src="/dashboard/static/whatif.js" defer></script>
</head>
<body>
<header>
  <h1>fleetgate · what if</h1>
  <p class="tagline">two policies, one fleet: the forecast and the real controller, simulated</p>
  <nav><a id="dashboard-link" href="/">dashboard</a></nav>
</header>
<form id="whatif" class="panel wide">
  <label>Policy A<textarea id="policy-a" name="policy-a" rows="16" cols="50">$a</textarea></label>
  <label>Policy B <span class="hint" id="policy-b-note">(an example of a bad policy: FATAL over
    this fleet, on purpose)</span><textarea id="policy-b" name="policy-b" rows="16"
    cols="50">$b</textarea></label>
  <fieldset>
    <legend>Fleet (generated)</legend>
    <label>nodes <input id="count" name="count" value="$count" size="6"></label>
    <label>ages spread over <input id="spread" name="spread" value="$spread" size="6"></label>
    <label>expireAfter <input id="expire" name="expire" value="$expireAfter" size="6"></label>
    <label>terminationGracePeriod <input id="tgp" name="tgp" value="$terminationGracePeriod"
      size="6"></label>
    <label>simulate <input id="span" name="span" value="$span" size="6"></label>
  </fieldset>
  <fieldset id="ledger-fields">
    <legend>Capacity ledger (optional)</legend>
    <label><input id="ledger" name="ledger" type="checkbox"> placements on the nodes</label>
    <label>fill each node to <input id="fill" name="fill" value="$fill" size="4"> % of its CPU
      </label>
    <label>nodes have <input id="node-cpu" name="node-cpu" value="$nodeCpu" size="4"> CPUs</label>
    <label>the pool launches <input id="launch-cpu" name="launch-cpu" value="$launchCpu"
      size="4"> CPUs</label>
    <label><input id="gate" name="gate" type="checkbox" checked> ledger gate</label>
  </fieldset>
  <button id="run" type="submit">Check and simulate</button>
  <button id="cancel" type="button" hidden>Cancel</button>
  <p id="status" class="live" data-state="idle"></p>
  <progress id="progress" max="1" value="0" hidden></progress>
</form>
<main id="results"></main>
</body>
</html>
""")


def page() -> str:
    """The form, filled with two example policies and the default fleet."""
    fleet = {key: e(value) for key, value in DEFAULT_FLEET.items()}
    ledger = {key: e(value) for key, value in DEFAULT_LEDGER.items()}
    return _PAGE.substitute(a=e(POLICY_A), b=e(POLICY_B), **fleet, **ledger)


def _seconds_text(value: timedelta | None) -> str:
    return (
        "-" if value is None else format_duration(timedelta(seconds=round(value.total_seconds())))
    )


_SEVERITY = {"warning": "warn"}
"""The simulator's severity word as the dashboard's class (``.findings .warn``)."""


def _side(side: Side, letter: str, span: timedelta) -> str:
    d, s = side.check.derivation, side.simulation.summary
    # The forecast's findings, then the simulator's (``CapacityHoldMeetsExpiry`` names the held
    # node and its forced expiry), each styled by its severity as the dashboard's are.
    found = [(str(f.code), str(f.severity), f.message, "check") for f in d.findings]
    found += [(x.code, x.severity, x.message, "simulation") for x in side.simulation.diagnostics]
    findings = "".join(
        f"<li class='finding {_SEVERITY.get(severity, severity)}' data-code='{e(code)}' "
        f"data-source='{source}'>{e(severity)}: {e(message)}</li>"
        for code, severity, message, source in found
    )
    facts = (
        ("A", _seconds_text(d.age_threshold)),
        ("G", d.guaranteed_chances),
        ("C", d.capacity),
        ("rotations", s.rotations),
        ("failed", s.failed),
        ("breaches", s.breaches),
    )
    terms = "".join(f"<dt>{e(k)}</dt><dd data-term='{e(k)}'>{e(v)}</dd>" for k, v in facts)
    timeline = _timeline(side.simulation, span, zone_of(side.policy))
    return (
        f"<article class='whatif panel' data-side='{letter}' data-breaches='{s.breaches}'>"
        f"<h2>{letter}: {e(side.policy.name)}</h2><dl class='agc'>{terms}</dl>"
        f"<ul class='findings'>{findings}</ul>{timeline}</article>"
    )


def _timeline(result: SimulationResult, span: timedelta, zone: str) -> str:
    """The dashboard's timeline over the simulated span: windows, rotations, forced expiries,
    with its hour axis, dates in the policy's time zone and its legend."""
    rotations = [
        {
            "claim": r["node"],
            "start": _instant(r["start"]),
            "end": _instant(r.get("done") or r["start"]),
            "outcome": r.get("outcome"),
        }
        for r in result.rotations
    ]
    t = {
        "start": START.isoformat(),
        "end": (START + span).isoformat(),
        "zone": zone,
        "clock": "simulated",
        "windows": [
            {"start": _instant(w["start"]), "end": _instant(w["end"])} for w in result.windows
        ],
        "rotations": rotations,
        "breaches": [
            _instant(ev["at"]) for ev in result.events if ev["type"] == "expire-after-breach"
        ],
    }
    return render.timeline(t, None, max_labels=WHATIF_AXIS_LABELS)


def _instant(at: str) -> str:
    """The simulator's ``…Z`` instants in the form ``datetime.fromisoformat`` reads everywhere."""
    return at.replace("Z", "+00:00")


def results_html(sides: list[Side], span: timedelta) -> str:
    """Both sides, side by side."""
    return "".join(_side(side, "AB"[i], span) for i, side in enumerate(sides))


def install(app: FastAPI, dashboard: SignIn, headers: dict[str, str]) -> None:
    """Mount ``/whatif`` and ``POST /dashboard/whatif`` behind the dashboard's sign-in."""
    authorized = dashboard.authorized

    async def whatif_page(request: Request) -> Response:
        signed_in = dashboard.sign_in(request)  # ``/whatif?token=…`` signs in as ``/`` does
        if signed_in is not None:
            return signed_in
        if not authorized(request):
            return dashboard.refused(request)
        return HTMLResponse(page(), headers=headers)

    async def whatif_run(request: Request) -> Response:
        if not authorized(request):
            return JSONResponse(
                {"error": "unauthorized", "message": "the dashboard needs the admin token"},
                status_code=401,
                headers={**headers, "WWW-Authenticate": "Bearer"},
            )
        try:
            body = await request.json()
        except ValueError:
            body = None
        try:
            plans = plan(body)
        except WhatIfError as exc:
            return JSONResponse(refusal(exc), status_code=422, headers=headers)
        span = span_of(body)

        def present(sides: list[Side]) -> dict[str, Any]:
            return {"sides": [side.body() for side in sides], "html": results_html(sides, span)}

        # CPU-bound: in a worker thread, so the dashboard keeps refreshing meanwhile. The
        # app's bound, as for POST /v1/rotation/simulate (a test may lift it).
        seconds = getattr(request.app.state, "simulate_seconds", SIMULATE_SECONDS)
        simulator = container_of(request).simulator()
        lines = answer_lines(plans, simulator, seconds, present)
        return StreamingResponse(lines, media_type="application/x-ndjson", headers=headers)

    app.add_api_route("/whatif", whatif_page, methods=["GET"], include_in_schema=False)
    app.add_api_route("/dashboard/whatif", whatif_run, methods=["POST"], include_in_schema=False)
