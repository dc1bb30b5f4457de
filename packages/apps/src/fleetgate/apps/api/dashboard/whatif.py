"""The dashboard's What-if page: two policies over one fleet shape, checked and simulated.

``/whatif`` is a form (two RotationPolicy YAML texts, a generated fleet: node count, age spread,
expireAfter, terminationGracePeriod, and a span); ``POST /dashboard/whatif`` answers, for each
policy, ``fleetgate check``'s forecast and the simulation of the real controller over that fleet
(the document ``POST /v1/rotation/simulate`` gives), rendered here as HTML for the page to swap
in. Same guard as the dashboard (the admin token, in its cookie or as a bearer token), and the
same bounds as the API: a What-if is interactive, so it must finish within seconds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from string import Template
from typing import Any, Protocol

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from fleetgate.apps.api.dashboard import render
from fleetgate.apps.api.dashboard.render import e
from fleetgate.apps.api.deps import container_of
from fleetgate.apps.api.schemas.fleet import MAX_SIMULATE_NODES
from fleetgate.apps.api.schemas.rotation import SIMULATE_SECONDS
from fleetgate.apps.policyfile import PolicyFileError, policies_from_text
from fleetgate.apps.services.bounded import RanTooLong, run_bounded
from fleetgate.apps.services.check import CheckInputs, CheckResult, check
from fleetgate.apps.services.simulation import (
    SimulationError,
    SimulationInputs,
    SimulationResult,
    Simulator,
)
from fleetgate.apps.simulate.fleet import Fleet, FleetError, labels_for, load_fleet
from fleetgate.domain.durations import format_duration, parse_duration
from fleetgate.domain.rotation.policy import PolicyError, RotationPolicy


class SignIn(Protocol):
    """What the page needs of the dashboard's sign-in (``Dashboard`` is one): the package
    installs this page, so the page names only what it calls, never the package."""

    def sign_in(self, request: Request) -> Response | None:
        """A session and a redirect for ``?token=``; None when the address has none."""

    def authorized(self, request: Request) -> bool:
        """The request carries the admin's session or token."""

    def refused(self, request: Request) -> Response:
        """The sign-in form, for a page asked for without a session."""


START = datetime(2024, 1, 1, tzinfo=UTC)
MAX_DAYS = 90
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

_PAGE = Template("""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>fleetgate · what if</title>
<link rel="stylesheet" href="/dashboard/static/dashboard.css">
<link rel="stylesheet" href="/dashboard/static/whatif.css">
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
  <button id="run" type="submit">Check and simulate</button>
  <p id="status" class="live" data-state="idle"></p>
</form>
<main id="results"></main>
</body>
</html>
""")


class WhatIfError(ValueError):
    """A bad input; the message names the field."""


Check = Callable[[datetime], None]


def _unbounded(_: datetime) -> None:
    """No bound on the run's wall-clock time."""


def page() -> str:
    """The form, filled with two example policies and the default fleet."""
    fleet = {key: e(value) for key, value in DEFAULT_FLEET.items()}
    return _PAGE.substitute(a=e(POLICY_A), b=e(POLICY_B), **fleet)


def span_of(body: Any) -> timedelta:
    """The span to simulate, more than 0 and at most ``MAX_DAYS`` days."""
    value = body.get("span") if isinstance(body, dict) else None
    try:
        span = parse_duration(value) if isinstance(value, str) else None
    except ValueError as exc:
        raise WhatIfError(f"span: {exc}") from exc
    if span is None or not timedelta(0) < span <= timedelta(days=MAX_DAYS):
        raise WhatIfError(f"span: a duration of more than 0 and at most {MAX_DAYS}d")
    return span


def _fleet(body: dict[str, Any], count: int, labels: dict[str, str]) -> Fleet:
    """The generated fleet; the fleet file's own checks name the field (``fleet.expireAfter``)."""
    document = {
        "fleet": {
            "labels": labels,
            "expireAfter": body.get("expireAfter"),
            "terminationGracePeriod": body.get("terminationGracePeriod"),
            "generate": {"count": count, "spread": body.get("spread")},
        }
    }
    try:
        return load_fleet(document, START)
    except FleetError as exc:
        raise WhatIfError(str(exc)) from exc


def _policy(text: Any, field: str) -> RotationPolicy:
    if not isinstance(text, str):
        raise WhatIfError(f"{field}: must be RotationPolicy YAML")
    try:
        policies = policies_from_text(text, field)
    except PolicyFileError as exc:
        raise WhatIfError("; ".join(exc.errors)) from exc
    if len(policies) != 1:
        raise WhatIfError(f"{field}: expected one RotationPolicy, found {len(policies)}")
    return policies[0]


@dataclass(frozen=True)
class Side:
    """One policy of the comparison: its check and its simulation."""

    policy: RotationPolicy
    check: CheckResult
    simulation: SimulationResult

    def body(self) -> dict[str, Any]:
        """The side in the JSON answer."""
        return {
            "name": self.policy.name,
            "zone": _zone(self.policy),
            "check": self.check.report(),
            "simulation": self.simulation.document(),
        }


def compare(body: Any, simulator: Simulator, check_time: Check = _unbounded) -> list[Side]:
    """Check and simulate each policy of ``body`` over its fleet, calling ``check_time`` as the
    simulations go (a bounded run's check); raises WhatIfError."""
    if not isinstance(body, dict):
        raise WhatIfError("body: must be a JSON object")
    texts = body.get("policies")
    if not isinstance(texts, list) or not 1 <= len(texts) <= 2:
        raise WhatIfError("policies: one or two RotationPolicy YAML texts")
    count = body.get("count")
    if (
        not isinstance(count, int)
        or isinstance(count, bool)
        or not 1 <= count <= MAX_SIMULATE_NODES
    ):
        raise WhatIfError(f"count: a whole number of nodes from 1 to {MAX_SIMULATE_NODES}")
    span = span_of(body)
    _fleet(body, count, {})  # every fleet input checked before any policy is simulated
    out = []
    for index, text in enumerate(texts):
        field = f"policy {'AB'[index]}"
        policy = _policy(text, field)
        # The labels the policy's selector needs, so that any policy can govern the fleet.
        fleet = _fleet(body, count, labels_for(policy.node_pool_selector))
        try:
            forecast = check(policy, CheckInputs(fleet.expire_after, fleet.tgp, count))
            inputs = SimulationInputs(policy, fleet, START, START + span)
            result = simulator.run(inputs, check_time)
        except (SimulationError, PolicyError, ValueError) as exc:
            raise WhatIfError(f"{field}: {exc}") from exc
        out.append(Side(policy, forecast, result))
    return out


async def compare_within(body: Any, simulator: Simulator, seconds: float) -> list[Side]:
    """:func:`compare` in a thread of its own, within ``seconds`` of wall time (the bound
    ``POST /v1/rotation/simulate`` has); raises WhatIfError."""
    try:
        return await run_bounded(lambda check_time: compare(body, simulator, check_time), seconds)
    except RanTooLong:
        raise WhatIfError(
            f"span: the simulations did not finish within {seconds:.0f} s; "
            "simulate a shorter span or fewer nodes"
        ) from None


def _zone(policy: RotationPolicy) -> str:
    """The time zone the policy's first window is written in (UTC without windows)."""
    windows = policy.maintenance_windows
    return str(windows[0].timezone) if windows else "UTC"


def _seconds_text(value: timedelta | None) -> str:
    return (
        "-" if value is None else format_duration(timedelta(seconds=round(value.total_seconds())))
    )


def _side(side: Side, letter: str, span: timedelta) -> str:
    d, s = side.check.derivation, side.simulation.summary
    findings = "".join(
        f"<li class='finding' data-code='{e(f.code)}'>{e(f.severity)}: {e(f.message)}</li>"
        for f in d.findings
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
    timeline = _timeline(side.simulation, span, _zone(side.policy))
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
            # CPU-bound: in a worker thread, so the dashboard keeps refreshing meanwhile.
            # The app's bound, as for POST /v1/rotation/simulate (a test may lift it).
            seconds = getattr(request.app.state, "simulate_seconds", SIMULATE_SECONDS)
            simulator = container_of(request).simulator()
            sides = await compare_within(body, simulator, seconds)
        except WhatIfError as exc:
            field = str(exc).partition(":")[0]
            return JSONResponse(
                {"error": "invalid_request", "message": str(exc), "field": field},
                status_code=422,
                headers=headers,
            )
        html = results_html(sides, span_of(body))
        answer = {"sides": [side.body() for side in sides], "html": html}
        return JSONResponse(answer, headers=headers)

    app.add_api_route("/whatif", whatif_page, methods=["GET"], include_in_schema=False)
    app.add_api_route("/dashboard/whatif", whatif_run, methods=["POST"], include_in_schema=False)
