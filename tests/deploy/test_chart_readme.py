"""The chart's README is generated from values.schema.json: every key is described there, and
the committed README is what the generator writes today."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

from tests.deploy.helm import CHART, ROOT


def generator() -> ModuleType:
    """deploy/helm/chart_readme.py, loaded from its path (deploy/ is not a package)."""
    spec = importlib.util.spec_from_file_location(
        "chart_readme", ROOT / "deploy/helm/chart_readme.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_readme_is_the_generated_one() -> None:
    committed = (CHART / "README.md").read_text()
    assert committed == generator().render(), "run: python deploy/helm/chart_readme.py"


def test_every_key_of_the_schema_is_described() -> None:
    module = generator()
    schema = json.loads((CHART / "values.schema.json").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    undescribed = [key for key, _, _, text in module.rows(schema, values) if not text.strip()]
    assert undescribed == []


def _keys(values: Any, prefix: str = "") -> list[str]:
    if not isinstance(values, dict) or not values:
        return [prefix] if prefix else []
    out = [prefix] if prefix else []
    for name, value in values.items():
        out += _keys(value, f"{prefix}.{name}" if prefix else name)
    return out


def test_every_key_of_values_yaml_has_a_row() -> None:
    readme = generator().render()
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    resource_keys = ("resources.requests.", "resources.limits.")  # free-form maps, not keys
    missing = [
        key
        for key in _keys(values)
        if f"`{key}`" not in readme and not any(part in key for part in resource_keys)
    ]
    assert missing == []


def test_the_check_mode_reports_a_stale_readme(tmp_path: Path, monkeypatch: Any) -> None:
    module = generator()
    stale = tmp_path / "README.md"
    stale.write_text("old\n")
    monkeypatch.setattr(module, "README", stale)
    assert module.main(["--check"]) == 1
    assert module.main([]) == 0 and module.main(["--check"]) == 0
