"""The windows as a NodePool's disruption budgets leave them, and the derivation over those."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fleetgate.domain.rotation.budget_forecast import forecast_budgets
from fleetgate.domain.rotation.budgets import DEFAULT_BUDGETS, budgets_from_spec
from fleetgate.domain.rotation.findings import FindingCode
from fleetgate.domain.rotation.labelselector import LabelSelector
from fleetgate.domain.rotation.policy import RotationPolicy
from fleetgate.domain.rotation.windows import MaintenanceWindow

# Wed and Sat 02:00-06:00 in Tokyo: Tuesday and Friday 17:00-21:00 UTC (spec vector V1).
TOKYO = RotationPolicy(
    name="tokyo",
    node_pool_selector=LabelSelector(),
    maintenance_windows=(MaintenanceWindow("Asia/Tokyo", ("Wed", "Sat"), "02:00", "06:00"),),
).resolve(timedelta(hours=1))
START = datetime(2024, 1, 1, tzinfo=UTC)  # a Monday
END = START + timedelta(days=28)
E = timedelta(hours=336)


def forecast(*budgets: dict[str, object]):  # type: ignore[no-untyped-def]
    return forecast_budgets(TOKYO, budgets_from_spec(list(budgets)), E, 20, START, END)


def test_budgets_that_never_block_change_nothing() -> None:
    for budgets in (DEFAULT_BUDGETS, budgets_from_spec([{"nodes": "0", "reasons": ["Drifted"]}])):
        f = forecast_budgets(TOKYO, budgets, E, 20, START, END)
        assert f.effective == f.windows and len(f.windows) == 8
        assert f.findings == () and f.derivation is None


def test_a_budget_over_part_of_each_window_shrinks_d_and_so_c() -> None:
    f = forecast({"nodes": "0", "schedule": "0 17 * * *", "duration": "2h"})
    assert len(f.effective) == 8
    assert all(e.start.hour == 19 and e.end.hour == 21 for e in f.effective)
    assert f.unusable == ()
    base = TOKYO.derive(E, 20)
    assert f.derivation is not None and f.derivation.capacity < base.capacity
    assert f.derivation.guaranteed_chances == base.guaranteed_chances
    codes = [x.code for x in f.findings]
    assert codes[0] is FindingCode.BUDGET_SHRINKS_WINDOWS
    assert f"C {base.capacity} -> {f.derivation.capacity}" in f.findings[0].message


def test_a_budget_over_a_whole_window_makes_it_unusable_and_the_period_longer() -> None:
    f = forecast({"nodes": "0", "schedule": "0 17 * * tue", "duration": "4h"})
    assert len(f.unusable) == 4 and all(w.start.weekday() == 1 for w in f.unusable)
    assert all(e.start.weekday() == 4 for e in f.effective)  # only Fridays are left
    codes = [x.code for x in f.findings]
    assert codes.count(FindingCode.BUDGET_BLOCKS_WINDOW) == 4
    assert FindingCode.BUDGET_SHRINKS_WINDOWS in codes
    assert f.derivation is not None and f.derivation.inputs.period == timedelta(days=7)
    # P doubles from 96h to a week: A falls below zero, which the derivation reports.
    assert FindingCode.A_NON_POSITIVE in codes
    added = next(x for x in f.findings if x.code is FindingCode.A_NON_POSITIVE)
    assert added.message.startswith("under the disruption budgets: ")


def test_a_budget_over_every_window_leaves_none() -> None:
    f = forecast({"nodes": "0%"})
    assert f.effective == () and len(f.unusable) == 8
    assert FindingCode.BUDGET_SHRINKS_WINDOWS in [x.code for x in f.findings]
