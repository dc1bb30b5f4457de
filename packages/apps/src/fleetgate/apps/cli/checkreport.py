"""``fleetgate check``: can these windows rotate the pool before Karpenter's forced expiry?

The check is a use case (:mod:`fleetgate.apps.services.check`); this module only presents its
results: a table for people, or one JSON object (:meth:`CheckResult.report`, also served by the
HTTP API's ``POST /v1/rotation/check``). Exit status: 0 without a fatal finding, 1 with one
(and, with ``strict``, with a warning too: CI fails on what a person would be warned of), 2 for
invalid input (the message names the file and field, or the option). The verdict line under the
findings says the same as the exit status: OK only when there is no finding at all.

A run imports what it uses: the ledger forecast (asyncio, the capacity domain) only with
``--ledger``/``--ledger-snapshot``, rich only to print a table or an error (``-o json`` of a
clean run never loads it), so the command starts at once (docs/performance.md, CLI start-up).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from fleetgate.apps.client.output import dump_yaml
from fleetgate.apps.policyfile import PolicyFileError, load_policies
from fleetgate.apps.redaction import error_markup
from fleetgate.apps.services.check import (
    NEVER,
    CheckInputs,
    CheckResult,
    check_all,
    parse_expire_after,
    parse_grace_period,
)
from fleetgate.apps.variables import settings_given
from fleetgate.domain.durations import DurationError
from fleetgate.domain.durations import format_duration as fmt
from fleetgate.domain.rotation.budget_forecast import BudgetForecast
from fleetgate.domain.rotation.budgets import Budget, BudgetError, budgets_from_spec
from fleetgate.domain.rotation.constants import BUFFER, DRAIN_FALLBACK
from fleetgate.domain.rotation.derive import Derivation
from fleetgate.domain.rotation.formulas import (
    T_ROT_RULE,
    drain_estimate_rule,
    failure_pause_rule,
    provisioning_estimate_rule,
)
from fleetgate.domain.rotation.policy import PolicyError, ResolvedPolicy, RotationPolicy
from fleetgate.domain.rotation.windows import Interval

if TYPE_CHECKING:
    from rich.console import Console

    from fleetgate.domain.capacity.headroom import PoolHeadroom

__all__ = [
    "EXIT_FATAL",
    "EXIT_INVALID",
    "EXIT_OK",
    "read_nodepool_budgets",
    "run_check",
]

EXIT_OK, EXIT_FATAL, EXIT_INVALID = 0, 1, 2
#: Reads the ledger forecast (``--ledger`` / ``--ledger-snapshot``); raises on bad input.
LedgerSource = Callable[[], "list[PoolHeadroom]"]


def run_check(
    policy: Path,
    expire_after: str,
    termination_grace_period: str | None,
    nodes: int,
    fmt: str,
    strict: bool = False,
    nodepool: Path | None = None,
    now: datetime | None = None,
    ledger: LedgerSource | None = None,
) -> int:
    """Run ``fleetgate check`` and return its exit status (``strict``: warnings fail too;
    ``nodepool``: lay its disruption budgets over the windows from ``now`` on; ``ledger``: each
    pool's headroom against its largest node's placements, finding ``LedgerHeadroom``)."""
    if settings_given(os.environ):
        # The capacity settings are read only with a ledger; a bad value given in the
        # environment is refused either way, as by every server command.
        from fleetgate.apps.settings import ConfigError, load_settings

        try:
            load_settings()
        except ConfigError as exc:
            _errors(error_markup(str(exc)))
            return EXIT_INVALID
    headroom = None
    if ledger is not None:
        from fleetgate.domain.capacity.errors import LedgerError

        try:
            headroom = ledger()
        except (ValueError, LedgerError, OSError) as exc:
            _errors(error_markup(str(exc)))
            return EXIT_INVALID
    budgets = None
    if nodepool is not None:
        try:
            budgets = read_nodepool_budgets(nodepool)
        except (OSError, yaml.YAMLError, BudgetError) as exc:
            _errors(error_markup(f"--nodepool {nodepool}: {exc}"))
            return EXIT_INVALID
    try:
        expiry = parse_expire_after(expire_after)
    except DurationError as exc:
        _errors(error_markup(f"--expire-after: {exc}"))
        return EXIT_INVALID
    try:
        grace = parse_grace_period(termination_grace_period)
    except DurationError as exc:
        _errors(error_markup(f"--termination-grace-period: {exc}"))
        return EXIT_INVALID
    if nodes < 0:
        _errors("[red]error:[/red] --nodes: must not be negative")
        return EXIT_INVALID
    inputs = CheckInputs(expiry, grace, nodes, budgets, now or datetime.now(UTC))
    try:
        results = check_all(load_policies(policy), inputs)
    except (PolicyFileError, PolicyError) as exc:
        _errors(*(error_markup(line) for line in getattr(exc, "errors", (str(exc),))))
        return EXIT_INVALID
    never = expiry is None  # expireAfter: Never: a hold meets no forced expiry
    expires = None if never else expire_after.strip()
    _present(results, policy, fmt, headroom, expires)
    warned = any(r.findings for r in results) or bool(_ledger_findings(headroom, expires))
    failed = any(r.fatal for r in results) or (strict and warned)
    return EXIT_FATAL if failed else EXIT_OK


def _errors(*lines: str) -> None:
    """Print rich-markup error lines on stderr (rich loads here: a clean run may not need it)."""
    from rich.console import Console

    err = Console(stderr=True, highlight=False)
    for line in lines:
        err.print(line, soft_wrap=True)


def _ledger_findings(
    headroom: list[PoolHeadroom] | None, expires: str | None
) -> list[dict[str, str]]:
    """The ledger's findings (``LedgerHeadroom``, ``CapacityHoldMeetsExpiry``); none (and no
    import of the forecast) without a ledger."""
    if headroom is None:
        return []
    from fleetgate.apps import ledgerforecast

    return ledgerforecast.findings(headroom, expires)


def _present(
    results: list[CheckResult],
    policy: Path,
    fmt: str,
    headroom: list[PoolHeadroom] | None,
    expires: str | None,
) -> None:
    """Print the results (and the ledger's headroom, when asked for) as ``--format`` asks."""
    if fmt in ("json", "yaml"):
        ledger = {}
        if headroom is not None:
            from fleetgate.apps import ledgerforecast

            ledger = {"ledger": ledgerforecast.report(headroom, expires)}
        reports = [r.report() | ledger for r in results]
        doc = reports[0] if len(reports) == 1 else reports
        print(json.dumps(doc, indent=2) if fmt == "json" else dump_yaml(doc))
    elif fmt == "name":  # the finding codes, one a line: what a script greps for
        codes = [f.code.value for r in results for f in r.derivation.findings]
        codes += [x.code.value for r in results if r.budgets for x in r.budgets.findings]
        codes += [x["code"] for x in _ledger_findings(headroom, expires)]
        for code in dict.fromkeys(codes):
            print(code)
    else:  # table and wide: the table already shows every symbol and rule
        from rich.console import Console

        out = Console(highlight=False)
        for r in results:
            _print_table(out, policy, r.policy, r.resolved, r.derivation)
            if r.budgets is not None:
                _print_budgets(out, r.budgets)
        if headroom is not None:
            from fleetgate.apps import ledgerforecast
            from fleetgate.domain.capacity.headroom import LEDGER_HEADROOM

            for line in ledgerforecast.lines(headroom):
                out.print(f"ledger: {line}", soft_wrap=True, markup=False)
            for x in ledgerforecast.findings(headroom, expires):
                if x["code"] != LEDGER_HEADROOM:  # the lines above say those
                    out.print(f"ledger: {x['code']}: {x['message']}", soft_wrap=True, markup=False)


def read_nodepool_budgets(path: Path) -> tuple[Budget, ...]:
    """``spec.disruption.budgets`` of the NodePool manifest at ``path`` (absent: the default)."""
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(document, dict) or document.get("kind") != "NodePool":
        raise BudgetError("must hold one karpenter.sh/v1 NodePool (kind: NodePool)")
    spec = document.get("spec") or {}
    disruption = spec.get("disruption") or {} if isinstance(spec, dict) else {}
    return budgets_from_spec(disruption.get("budgets") if isinstance(disruption, dict) else None)


def _print_budgets(out: Console, f: BudgetForecast) -> None:
    """The windows of the next four weeks as the NodePool's budgets leave them."""
    from rich.table import Table

    table = Table(title="windows under the NodePool's disruption budgets", title_justify="left")
    for column in ("window (UTC)", "usable to start rotations (UTC)"):
        table.add_column(column)
    for window in f.windows:
        usable = [e for e in f.effective if window.start <= e.start and e.end <= window.end]
        table.add_row(_span(window), ", ".join(_span(u) for u in usable) or "[red]none[/red]")
    out.print(table)
    for x in f.findings:
        out.print(f"[yellow]{x.severity}[/yellow] {x.code}: {x.message}", soft_wrap=True)
    if not f.findings:
        out.print("[green]The budgets leave the windows as they are.[/green]")
    out.print()


def _span(i: Interval) -> str:
    return f"{i.start:%Y-%m-%d %H:%M}-{i.end:%H:%M}"


def _print_table(
    out: Console, path: Path, policy: RotationPolicy, r: ResolvedPolicy, d: Derivation
) -> None:
    """The human report: each symbol with its value and formula, then the findings."""
    from rich.table import Table

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
    surge = r.written.surge
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
