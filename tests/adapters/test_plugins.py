"""The plugin manager: built-ins load through entry points, a third-party plugin is chosen by
configuration alone, and an unknown choice fails naming what is available."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import run

from fleetgate.adapters import plugins

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "fleetgate-example-plugin"


def uv_executable() -> str:
    """The uv that ``run.py`` resolves ($UV, PATH, or its own ./.tools copy): never a bare name."""
    return str(run.uv())


def test_builtin_adapters_register_through_entry_points() -> None:
    pm = plugins.plugin_manager()
    names = {pm.get_name(p) for p in pm.get_plugins()}
    assert {"sqlite", "mariadb", "postgres", "fake", "karpenter"} <= names
    schemes = {s for group in pm.hook.fleetgate_ledger_schemes() for s in group}
    assert {"sqlite+aiosqlite", "mysql+aiomysql", "postgresql+asyncpg"} <= schemes


def test_the_allow_list_loads_only_the_named_plugins() -> None:
    pm = plugins.plugin_manager(allow={"fake"})
    assert [pm.get_name(p) for p in pm.get_plugins()] == ["fake"]


def test_an_unknown_scheme_names_the_known_ones() -> None:
    pm = plugins.plugin_manager()
    with pytest.raises(
        plugins.PluginNotFound, match=r"database_url: .*'oracle\+x'.*sqlite\+aiosqlite"
    ):
        plugins.make_ledger(pm, "oracle+x://db", {})


def test_a_url_without_a_scheme_is_refused() -> None:
    with pytest.raises(plugins.PluginNotFound, match="database_url: 'nonsense' is not a URL"):
        plugins.scheme_of("nonsense")


def test_an_unknown_cluster_names_the_known_ones() -> None:
    pm = plugins.plugin_manager()
    with pytest.raises(plugins.PluginNotFound, match=r"cluster: .*'nomad'.*fake, karpenter"):
        plugins.make_cluster(pm, "nomad", {}, clock=None)


@pytest.fixture(scope="module")
def installed_plugin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Install the fixture distribution into a private target directory, as pip would."""
    target = tmp_path_factory.mktemp("site")
    subprocess.run(
        [
            uv_executable(),
            "pip",
            "install",
            "--quiet",
            "--target",
            str(target),
            "--python",
            sys.executable,
            str(FIXTURE),
        ],
        check=True,
    )
    return target


def test_a_third_party_plugin_is_chosen_by_configuration_alone(installed_plugin: Path) -> None:
    # A fresh interpreter sees the installed distribution's entry points; nothing is imported
    # or registered by hand: the environment variables alone pick its ledger and cluster.
    probe = (
        "import json; from fleetgate.apps.container import build_container;"
        "c = build_container(); l = c.ledger(); k = c.cluster();"
        "print(json.dumps([type(l).__module__, type(l).__name__, l.url,"
        " type(k).__name__, sorted(k.options)]))"
    )
    env = {
        **os.environ,
        "PYTHONPATH": str(installed_plugin),
        "FLEETGATE_DATABASE_URL": "example://inventory",
        "FLEETGATE_CLUSTER": "example",
        "FLEETGATE_CLUSTER_OPTIONS": '{"region": "lab"}',
    }
    env.pop("FLEETGATE_PLUGINS", None)
    out = subprocess.run(
        [sys.executable, "-c", probe], env=env, check=True, capture_output=True, text=True
    ).stdout
    assert json.loads(out) == [
        "fleetgate_example_plugin",
        "ExampleLedger",
        "example://inventory",
        "ExampleCluster",
        ["region"],
    ]
