"""The import rules of design.md are enforced: the tree passes, and a violating import fails."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
LINT = Path(sys.executable).with_name("lint-imports")


def _lint() -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT), "--no-cache"], cwd=ROOT, capture_output=True, text=True, check=False
    )


def test_the_tree_keeps_the_import_contracts() -> None:
    result = _lint()
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("package", "imported", "contract"),
    [
        (
            "packages/domain/src/fleetgate/domain",
            "fleetgate.adapters.plugins",
            "The domain is pure",
        ),
        ("packages/domain/src/fleetgate/domain", "sqlalchemy", "The domain is pure"),
        ("packages/adapters/src/fleetgate/adapters", "fleetgate.apps.settings", "Adapters never"),
        ("packages/apps/src/fleetgate/apps", "fleetgate.adapters.sql.ledger", "Apps reach"),
        (
            "packages/adapters/src/fleetgate/adapters/sql",
            "fleetgate.adapters.sql.postgres.admit_function",
            "Dialect plugins depend on the generic SQL store",
        ),
        (
            "packages/adapters/src/fleetgate/adapters/sql/sqlite",
            "fleetgate.adapters.sql.postgres.plugin",
            "Each dialect room stands alone",
        ),
        (
            "packages/apps/src/fleetgate/apps/services",
            "fleetgate.apps.container",
            "The container is imported by entry points",
        ),
        ("packages/apps/src/fleetgate/apps/client", "pydantic", "The client is light"),
        (
            "packages/apps/src/fleetgate/apps/client",
            "fleetgate.apps.api.app",
            "The client is light",
        ),
    ],
)
def test_a_violating_import_breaks_its_contract(package: str, imported: str, contract: str) -> None:
    # A real module with a real forbidden import, placed in the real tree for the length of
    # the check: the linter must name the broken contract.
    probe = ROOT / package / f"_contract_probe_{uuid.uuid4().hex[:8]}.py"
    probe.write_text(f"import {imported}  # deliberate violation\n")
    try:
        result = _lint()
    finally:
        probe.unlink()
    assert result.returncode != 0
    assert contract in result.stdout
    assert "BROKEN" in result.stdout
