"""``docs/configuration.md`` is generated from the settings model, and is current."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetgate.apps.configdoc import DESCRIPTIONS, env_var, render, settings_rows
from fleetgate.apps.settings import load_settings

PAGE = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def test_the_configuration_reference_is_current() -> None:
    assert PAGE.read_text() == render(), (
        "docs/configuration.md is stale: python -m fleetgate.apps.configdoc > docs/configuration.md"
    )


def test_every_setting_is_described_and_nothing_else_is() -> None:
    paths = [path for path, _ in settings_rows()]
    assert set(paths) == set(DESCRIPTIONS)
    # The settings the issue found in no page are in this one.
    for name in ("log_format", "placeholder_image", "priority_class", "probes_port"):
        assert any(p.endswith(name) for p in paths)


@pytest.mark.parametrize(
    ("path", "raw", "expected"),
    [("capacity.target_load", "0.5", 0.5), ("controller.probes_port", "9091", 9091),
     ("log_format", "json", "json")],
)  # fmt: skip
def test_the_documented_environment_variable_sets_the_setting(
    monkeypatch: pytest.MonkeyPatch, path: str, raw: str, expected: object
) -> None:
    monkeypatch.setenv(env_var(path), raw)
    value: object = load_settings()
    for part in path.split("."):
        value = getattr(value, part)
    assert value == expected


def test_the_documented_range_is_the_enforced_one(monkeypatch: pytest.MonkeyPatch) -> None:
    assert "| 0 to 60 |" in render().split("capacity.snapshot_seconds")[1].splitlines()[0]
    monkeypatch.setenv(env_var("capacity.snapshot_seconds"), "61")
    with pytest.raises(ValueError, match=r"capacity\.snapshot_seconds"):
        load_settings()
