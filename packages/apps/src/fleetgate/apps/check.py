"""``fleetgate check``: can these windows rotate the pool before Karpenter's forced expiry?

The numbers come from the domain (:func:`ResolvedPolicy.derive`); this module only turns them
into a report: a table for people, or one JSON object (:func:`check_report`, also served by the
HTTP API's ``POST /v1/rotation/check``). Exit status: 0 without a fatal finding, 1 with one
(and, with ``strict``, with a warning too: CI fails on what a person would be warned of), 2 for
invalid input (the message names the file and field, or the option). The verdict line under the
findings says the same as the exit status: OK only when there is no finding at all.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from fleetgate.apps.clientoutput import dump_yaml
from fleetgate.apps.policyfile import PolicyFileError, load_policies
from fleetgate.apps.redaction import error_markup
from fleetgate.domain.durations import DurationError, parse_duration
from fleetgate.domain.durations import format_duration as fmt
from fleetgate.domain.rotation.constants import BUFFER, DRAIN_FALLBACK
from fleetgate.domain.rotation.derive import Derivation
from fleetgate.domain.rotation.formulas import (
    T_ROT_RULE,
    drain_estimate_rule,
    failure_pause_rule,
    input_record,
    provisioning_estimate_rule,
)
from fleetgate.domain.rotation.policy import PolicyError, ResolvedPolicy, RotationPolicy

__all__ = [
    "EXIT_FATAL",
    "EXIT_INVALID",
    "EXIT_OK",
    "check_report",
    "parse_expire_after",
    "parse_grace_period",
    "run_check",
]

EXIT_OK, EXIT_FATAL, EXIT_INVALID = 0, 1, 2
NEVER = "Never"


def parse_expire_after(text: str) -> timedelta | None:
    """``--expire-after``: a positive duration, or ``Never`` (None)."""
    if text.strip() == NEVER:
        return None
    value = parse_duration(text)
    if value <= timedelta(0):
        raise DurationError(f"must be greater than 0 (or {NEVER}), got {text!r}")
    return value


def parse_grace_period(text: str | None) -> timedelta | None:
    """``--termination-grace-period``: a duration >= 0, or None when omitted (unset)."""
    if text is None:
        return None
    value = parse_duration(text)
    if value < timedelta(0):
        raise DurationError(f"must not be negative, got {text!r}")
    return value


def check_report(
    policy: RotationPolicy,
    expire_after: timedelta | None,
    termination_grace_period: timedelta | None,
    nodes: int,
) -> dict[str, Any]:
    """The JSON object of ``fleetgate check --format json``; raises PolicyError if invalid."""
    resolved = policy.resolve(termination_grace_period)
    return _report(resolved, resolved.derive(expire_after, nodes))


def _report(resolved: ResolvedPolicy, d: Derivation) -> dict[str, Any]:
    """Build the JSON object from a resolved policy and its derivation."""
    return {
        "inputs": input_record(d.inputs, resolved.failure_pause, _seconds),
        "tRot": _seconds(d.t_rot),
        "tRotEst": _seconds(d.t_rot_est),
        "drainEstimate": _seconds(d.drain_estimate),
        "provisioningEstimate": _seconds(d.provisioning_estimate),
        "leadTime": _seconds(d.lead_time),
        "A": _seconds(d.age_threshold),
        "G": d.guaranteed_chances,
        "C": d.capacity,
        "findings": [f.as_dict() for f in d.findings],
    }


def _seconds(value: timedelta | None) -> int | float | None:
    """A duration in seconds: an integer when whole, None when undefined."""
    if value is None:
        return None
    whole, rest = divmod(value, timedelta(seconds=1))
    return int(whole) if not rest else value.total_seconds()


def run_check(
    policy: Path,
    expire_after: str,
    termination_grace_period: str | None,
    nodes: int,
    fmt: str,
    strict: bool = False,
) -> int:
    """Run ``fleetgate check`` and return its exit status (``strict``: warnings fail too)."""
    err = Console(stderr=True, highlight=False)
    try:
        expiry = parse_expire_after(expire_after)
    except DurationError as exc:
        err.print(error_markup(f"--expire-after: {exc}"), soft_wrap=True)
        return EXIT_INVALID
    try:
        grace = parse_grace_period(termination_grace_period)
    except DurationError as exc:
        err.print(error_markup(f"--termination-grace-period: {exc}"), soft_wrap=True)
        return EXIT_INVALID
    if nodes < 0:
        err.print("[red]error:[/red] --nodes: must not be negative", soft_wrap=True)
        return EXIT_INVALID
    try:
        results = [(p, p.resolve(grace)) for p in load_policies(policy)]
    except (PolicyFileError, PolicyError) as exc:
        for line in getattr(exc, "errors", (str(exc),)):
            err.print(error_markup(line), soft_wrap=True)
        return EXIT_INVALID
    derived = [(p, r, r.derive(expiry, nodes)) for p, r in results]
    if fmt in ("json", "yaml"):
        reports = [_report(r, d) for _, r, d in derived]
        doc = reports[0] if len(reports) == 1 else reports
        print(json.dumps(doc, indent=2) if fmt == "json" else dump_yaml(doc))
    elif fmt == "name":  # the finding codes, one a line: what a script greps for
        for code in dict.fromkeys(f.code.value for _, _, d in derived for f in d.findings):
            print(code)
    else:  # table and wide: the table already shows every symbol and rule
        out = Console(highlight=False)
        for p, r, d in derived:
            _print_table(out, policy, p, r, d)
    failed = any(d.fatal or (strict and d.findings) for _, _, d in derived)
    return EXIT_FATAL if failed else EXIT_OK


def _print_table(
    out: Console, path: Path, policy: RotationPolicy, r: ResolvedPolicy, d: Derivation
) -> None:
    """The human report: each symbol with its value and formula, then the findings."""
    title = f"{policy.name or path.name} — {path}"
    table = Table(title=title, title_justify="left")
    table.add_column("symbol", style="bold")
    table.add_column("value", justify="right")
    table.add_column("formula / source")
    for symbol, value, formula in _rows(r, d):
        table.add_row(symbol, value, formula)
    out.print(table)
    if not d.findings:
        out.print("[green]No findings.[/green]")
    else:
        findings = Table(title="findings", title_justify="left", show_lines=True)
        for column in ("severity", "code", "side", "message"):
            findings.add_column(column)
        for f in d.findings:
            colour = "red" if f.fatal else "yellow"
            findings.add_row(f"[{colour}]{f.severity}[/{colour}]", f.code, f.side, f.message)
        out.print(findings)
    out.print(_verdict(d))
    out.print()


def _verdict(d: Derivation) -> str:
    """The line under the findings: it never says OK over a finding that says otherwise."""
    if d.fatal:
        return (
            "[red]FATAL: no rotation will start in this pool until the fatal finding is "
            "fixed.[/red]"
        )
    if d.findings:
        count = len(d.findings)
        return (
            f"[yellow]WARNING: rotations will start, but see the {count} "
            f"warning{'s' if count > 1 else ''} above before relying on this policy "
            "(--strict makes warnings fail).[/yellow]"
        )
    return "[green]OK: the windows can rotate the pool before its forced expiry.[/green]"


def _rows(r: ResolvedPolicy, d: Derivation) -> list[tuple[str, str, str]]:
    """(symbol, value, formula) for every input and derived quantity."""
    i = d.inputs
    surge = r.policy.surge
    e = NEVER if i.expire_after is None else fmt(i.expire_after)
    tgp_source = (
        f"unset: fallback {fmt(DRAIN_FALLBACK)}"
        if i.tgp_was_unset
        else "--termination-grace-period"
    )
    gap = "undefined" if i.idle_gap is None else fmt(i.idle_gap)
    pause_source = (
        "surge.failurePause" if surge.failure_pause is not None else failure_pause_rule(i.cooldown)
    )
    rows = [
        ("E", e, "NodePool expireAfter (--expire-after)"),
        ("tGP", fmt(i.tgp), tgp_source),
        ("P", fmt(i.period), "worst-case time between window starts"),
        ("D", fmt(i.window_len), "shortest window occurrence"),
        ("gap", gap, "shortest closed gap between occurrences"),
        ("K", str(i.k), "minRotationChances"),
        ("m", str(i.max_unavailable), "surge.maxUnavailable"),
        ("N", str(i.node_count), "NodeClaims in the pool (--nodes)"),
        ("readyTimeout", fmt(i.ready_timeout), "surge.readyTimeout"),
        ("cooldownAfter", fmt(i.cooldown), "surge.cooldownAfter"),
        ("failurePause", fmt(r.failure_pause), pause_source),
        ("retryBackoff", fmt(i.retry_backoff), "surge.retryBackoff (base; doubles to 8x)"),
        ("ageThreshold", "auto" if i.override is None else fmt(i.override), "spec.ageThreshold"),
    ]
    if i.expire_after is None:
        return [*rows, ("", "", "expireAfter: Never — nothing to derive")]
    return rows + _derived_rows(d)


def _derived_rows(d: Derivation) -> list[tuple[str, str, str]]:
    """The derived quantities with their formulas filled in."""
    i = d.inputs
    assert i.expire_after is not None
    drain_rule = (
        drain_estimate_rule(i.tgp)
        if i.drain_estimate is None
        else f"surge.drainEstimate {fmt(i.drain_estimate)}"
        + (" clamped to tGP" if d.drain_estimate != i.drain_estimate else "")
    )
    prov_rule = (
        provisioning_estimate_rule(i.ready_timeout)
        if i.provisioning_estimate is None
        else f"surge.provisioningEstimate {fmt(i.provisioning_estimate)}"
        + (" clamped to readyTimeout" if d.provisioning_estimate != i.provisioning_estimate else "")
    )
    if i.override is None:
        a_rule = f"E − leadTime = {fmt(i.expire_after)} − {fmt(d.lead_time)}"
        g_rule = "K (auto)"
    else:
        a_rule = "ageThreshold override"
        g_rule = (
            f"⌊(E − t_rot − A) / P⌋ = ⌊({fmt(i.expire_after)} − {fmt(d.t_rot)} − "
            f"{fmt(d.age_threshold)}) / {fmt(i.period)}⌋"
        )
    return [
        (
            "t_rot",
            fmt(d.t_rot),
            f"{T_ROT_RULE} = {fmt(i.ready_timeout)} + {fmt(i.tgp)} + {fmt(BUFFER)}",
        ),
        ("provisioningEstimate", fmt(d.provisioning_estimate), prov_rule),
        ("drainEstimate", fmt(d.drain_estimate), drain_rule),
        (
            "t_rot_est",
            fmt(d.t_rot_est),
            f"provisioningEstimate + drainEstimate = {fmt(d.provisioning_estimate)} + "
            f"{fmt(d.drain_estimate)}",
        ),
        ("leadTime", fmt(d.lead_time), f"K·P + t_rot = {i.k}·{fmt(i.period)} + {fmt(d.t_rot)}"),
        ("A", fmt(d.age_threshold), a_rule),
        ("G", str(d.guaranteed_chances), g_rule),
        (
            "C",
            str(d.capacity),
            f"m·⌈D / (t_rot_est + cooldownAfter)⌉ = {max(i.max_unavailable, 1)}·"
            f"⌈{fmt(i.window_len)} / ({fmt(d.t_rot_est)} + {fmt(i.cooldown)})⌉",
        ),
    ]
