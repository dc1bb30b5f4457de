"""Configuration: defaults, environment, YAML file, and errors that name the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetgate.apps import settings as settings_module
from fleetgate.apps.settings import DEFAULT_DATABASE_URL, ConfigError, load_settings


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for key in list(os.environ):
        if key.startswith("FLEETGATE_"):
            monkeypatch.delenv(key)


def test_defaults_run_the_embedded_system() -> None:
    s = load_settings()
    assert s.database_url == DEFAULT_DATABASE_URL
    assert s.cluster == "fake"
    assert (s.capacity.target_load, s.capacity.demand_per_vcpu) == (0.75, 0.6)
    assert (s.capacity.cpu_overcommit, s.capacity.memory_overcommit) == (3.0, 1.0)
    assert s.claims.enforcement == "advisory"
    assert s.reconciler.interval_seconds == 300.0


def test_environment_overrides_nested_fields(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLEETGATE_CAPACITY__TARGET_LOAD", "0.5")
    monkeypatch.setenv("FLEETGATE_CLAIMS__ENFORCEMENT", "hard")
    s = load_settings()
    assert s.capacity.target_load == 0.5
    assert s.claims.enforcement == "hard"


def test_yaml_file_is_read_and_environment_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = tmp_path / "fleetgate.yaml"
    cfg.write_text("cluster: karpenter\ncapacity:\n  demand_per_vcpu: 0.3\n  target_load: 0.9\n")
    monkeypatch.setenv("FLEETGATE_CONFIG", str(cfg))
    monkeypatch.setenv("FLEETGATE_CAPACITY__TARGET_LOAD", "0.6")
    s = load_settings()
    assert s.cluster == "karpenter"
    assert s.capacity.demand_per_vcpu == 0.3
    assert s.capacity.target_load == 0.6


def test_an_invalid_value_names_the_field(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLEETGATE_CLAIMS__ENFORCEMENT", "strict")
    with pytest.raises(
        ConfigError,
        match=r"^FLEETGATE_CLAIMS__ENFORCEMENT \(claims\.enforcement\): "
        r"Input should be 'advisory' or 'hard'",
    ):
        load_settings()


def test_a_vanishing_demand_charge_is_refused_naming_the_setting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FLEETGATE_CAPACITY__DEMAND_PER_VCPU", "1e-300")
    with pytest.raises(ConfigError, match=r"\(capacity\.demand_per_vcpu\): .*at least 1e-06"):
        load_settings()


def test_an_unknown_yaml_field_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("capacity:\n  targetload: 0.9\n")
    monkeypatch.setenv("FLEETGATE_CONFIG", str(cfg))
    with pytest.raises(ConfigError) as refused:
        load_settings()
    # Not from a variable: named by its path in the file, with the closest setting (issue 42).
    assert str(refused.value) == (
        "capacity.targetload: not a setting; did you mean capacity.target_load?"
    )


def test_a_yaml_file_that_is_not_a_mapping_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("- a\n- b\n")
    monkeypatch.setenv("FLEETGATE_CONFIG", str(cfg))
    with pytest.raises(ConfigError, match="must hold a mapping"):
        load_settings()


@pytest.mark.parametrize(
    ("pasted", "used"),
    [
        ("postgresql://u@db/x", "postgresql+asyncpg://u@db/x"),
        ("postgres://u@db/x", "postgresql+asyncpg://u@db/x"),
        ("mysql://root@db/x", "mysql+aiomysql://root@db/x"),
        ("mariadb://root@db/x", "mysql+aiomysql://root@db/x"),
        ("sqlite:///./x.db", "sqlite+aiosqlite:///./x.db"),
        ("postgresql+asyncpg://u@db/x", "postgresql+asyncpg://u@db/x"),
    ],
)
def test_a_pasted_database_url_gets_the_async_driver_said_once(
    pasted: str, used: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(settings_module, "_announced", set())
    monkeypatch.setenv("FLEETGATE_DATABASE_URL", pasted)
    assert load_settings().database_url == used
    assert load_settings().database_url == used
    said = capsys.readouterr().err.splitlines()
    if pasted == used:
        assert said == []
    else:
        scheme = pasted.partition("://")[0]
        assert said == [
            f"fleetgate: database_url: reading {scheme}:// as {used.partition('://')[0]}://"
        ]


def test_group_commit_is_on_by_default_and_reaches_the_ledger_options(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert load_settings().ledger_options()["group_commit"] == {"max_batch": 32, "max_wait_ms": 0}
    monkeypatch.setenv("FLEETGATE_ADMISSION__GROUP_COMMIT_MAX_BATCH", "1")
    monkeypatch.setenv("FLEETGATE_ADMISSION__GROUP_COMMIT_MAX_WAIT_MS", "2.5")
    options = load_settings().ledger_options()["group_commit"]
    assert options == {"max_batch": 1, "max_wait_ms": 2.5}


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        (
            "GROUP_COMMIT_MAX_BATCH",
            "0",
            r"\(admission\.group_commit_max_batch\): must be a whole number of at least 1, got '0'",
        ),
        (
            "GROUP_COMMIT_MAX_BATCH",
            "many",
            r"\(admission\.group_commit_max_batch\): must be a whole number",
        ),
        (
            "GROUP_COMMIT_MAX_WAIT_MS",
            "-1",
            r"\(admission\.group_commit_max_wait_ms\): must be a number of at least 0, got '-1'",
        ),
        (
            "GROUP_COMMIT_MAX_WAIT_MS",
            "nan",
            r"\(admission\.group_commit_max_wait_ms\): must be a finite number of at least 0",
        ),
    ],
)
def test_a_bad_group_commit_setting_names_the_field(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, message: str
) -> None:
    monkeypatch.setenv(f"FLEETGATE_ADMISSION__{variable}", value)
    with pytest.raises(ConfigError, match=message):
        load_settings()


@pytest.mark.parametrize("value", ["-1", "-0.01", "nan", "inf"])
def test_a_negative_or_non_finite_target_load_is_refused_naming_it(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLEETGATE_CAPACITY__TARGET_LOAD", value)
    with pytest.raises(
        ConfigError,
        match=r"^FLEETGATE_CAPACITY__TARGET_LOAD \(capacity\.target_load\): "
        r"must be a (finite )?number of at least 0, got",
    ):
        load_settings()
    monkeypatch.setenv("FLEETGATE_CAPACITY__TARGET_LOAD", "0")  # 0 stays: the spreader off
    assert load_settings().capacity.target_load == 0


def test_an_unknown_variable_is_named_with_the_closest_setting(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FLEETGATE_DATABSE_URL", "postgresql://u:pw-typo-1@db/x")
    monkeypatch.setenv("FLEETGATE_LOGFORMAT", "json")
    monkeypatch.setenv("FLEETGATE_SERVER", "http://x")  # the client's, not a setting: no warning
    s = load_settings()
    assert s.database_url == DEFAULT_DATABASE_URL  # the typo changed nothing...
    err = capsys.readouterr().err.splitlines()
    assert err == [  # ...and says so, once each
        "fleetgate: warning: FLEETGATE_DATABSE_URL is not a setting and is ignored; "
        "did you mean FLEETGATE_DATABASE_URL?",
        "fleetgate: warning: FLEETGATE_LOGFORMAT is not a setting and is ignored; "
        "did you mean FLEETGATE_LOG_FORMAT?",
    ]
    load_settings()
    assert capsys.readouterr().err == ""


def test_every_setting_variable_is_known(monkeypatch: pytest.MonkeyPatch) -> None:
    # Each documented variable is read, so none of them is ever warned about.
    names = settings_module.setting_variables()
    assert "FLEETGATE_CAPACITY__TARGET_LOAD" in names and "FLEETGATE_API" in names
    assert settings_module.warn_unknown_variables(dict.fromkeys(names, "1")) == []


def test_database_timeouts_default_to_seconds_and_reach_the_ledger_options(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    timeouts = load_settings().ledger_options()["timeouts"]
    assert timeouts == {
        "connect_seconds": 3.0,
        "pool_seconds": 3.0,
        "statement_seconds": 10.0,
        "answer_seconds": 4.0,
    }
    monkeypatch.setenv("FLEETGATE_DATABASE_TIMEOUTS__STATEMENT_SECONDS", "2.5")
    assert load_settings().ledger_options()["timeouts"]["statement_seconds"] == 2.5
    monkeypatch.setenv("FLEETGATE_DATABASE_TIMEOUTS__POOL_SECONDS", "0")
    with pytest.raises(ConfigError, match=r"database_timeouts\.pool_seconds"):
        load_settings()


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        # A mistyped nested setting names the variable and the closest setting (issue 42).
        (
            "FLEETGATE_CAPACITY__TARGT_LOAD",
            "0.5",
            "FLEETGATE_CAPACITY__TARGT_LOAD (capacity.targt_load): not a setting; "
            "did you mean FLEETGATE_CAPACITY__TARGET_LOAD?",
        ),
        # Numbers say their type and their bounds, read from the setting's declaration.
        (
            "FLEETGATE_DATABASE_POOL__SIZE",
            "1e26",
            "FLEETGATE_DATABASE_POOL__SIZE (database_pool.size): "
            "must be a whole number from 1 to 1000, got '1e26'",
        ),
        (
            "FLEETGATE_DATABASE_POOL__OVERFLOW",
            "100000000000000000000000000",
            "FLEETGATE_DATABASE_POOL__OVERFLOW (database_pool.overflow): "
            "must be a whole number from 0 to 1000, got '100000000000000000000000000'",
        ),
        (
            "FLEETGATE_CAPACITY__TARGET_LOAD",
            "abc",
            "FLEETGATE_CAPACITY__TARGET_LOAD (capacity.target_load): "
            "must be a number of at least 0, got 'abc'",
        ),
        (
            "FLEETGATE_DATABASE_TIMEOUTS__CONNECT_SECONDS",
            "1e26",
            "FLEETGATE_DATABASE_TIMEOUTS__CONNECT_SECONDS (database_timeouts.connect_seconds): "
            "must be a number of more than 0 and at most 3600, got '1e26'",
        ),
        (
            "FLEETGATE_RECONCILER__METRICS_PORT",
            "x",
            "FLEETGATE_RECONCILER__METRICS_PORT (reconciler.metrics_port): "
            "must be a whole number from 0 to 65535 (or null), got 'x'",
        ),
        # A section given whole, as JSON, is named by its variable.
        (
            "FLEETGATE_CAPACITY",
            '{"targetload": 1}',
            "FLEETGATE_CAPACITY (capacity.targetload): not a setting; "
            "did you mean FLEETGATE_CAPACITY__TARGET_LOAD?",
        ),
    ],
)
def test_a_bad_variable_is_named_as_written_with_the_reason(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, message: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError) as refused:
        load_settings()
    assert str(refused.value) == message
