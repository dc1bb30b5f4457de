"""Policy files: YAML read as Kubernetes reads it, several documents, errors naming the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetgate.apps.policyfile import (
    PolicyFileError,
    load_policies,
    load_policy,
    policies_from_text,
)

POLICY = """\
apiVersion: fleetgate.io/v1alpha1
kind: RotationPolicy
metadata:
  name: {name}
spec:
  nodePoolSelector: {{}}
  maintenanceWindows:
    - timezone: UTC
      days: [Mon]
      start: {start}
      end: {end}
"""


def test_unquoted_times_and_instants_stay_strings() -> None:
    text = POLICY.format(name="a", start="12:00", end="14:30") + (
        "  exclusions:\n    - start: 2024-12-24T00:00:00Z\n      end: 2024-12-27T00:00:00Z\n"
    )
    (policy,) = policies_from_text(text)
    window = policy.maintenance_windows[0]
    assert (window.start, window.end) == ("12:00", "14:30")  # not base-60 integers
    assert policy.exclusions[0].end.isoformat() == "2024-12-27T00:00:00+00:00"


def test_numbers_are_still_numbers() -> None:
    text = POLICY.format(name="a", start="'02:00'", end="'04:00'") + "  minRotationChances: 3\n"
    assert policies_from_text(text)[0].min_rotation_chances == 3


def test_several_documents(tmp_path: Path) -> None:
    path = tmp_path / "two.yaml"
    path.write_text(
        POLICY.format(name="a", start="'01:00'", end="'02:00'")
        + "---\n---\n"
        + POLICY.format(name="b", start="'03:00'", end="'04:00'")
    )
    assert [p.name for p in load_policies(path)] == ["a", "b"]
    with pytest.raises(PolicyFileError, match="expected one RotationPolicy, found 2"):
        load_policy(path)


def test_errors_name_the_file_and_document(tmp_path: Path) -> None:
    path = tmp_path / "two.yaml"
    path.write_text(
        POLICY.format(name="a", start="'01:00'", end="'01:00'")
        + "---\n"
        + POLICY.format(name="b", start="'25:00'", end="'04:00'")
    )
    with pytest.raises(PolicyFileError) as caught:
        load_policies(path)
    assert caught.value.errors == (
        f"{path} (document 1): spec.maintenanceWindows[0].end: must differ from start (01:00); "
        "use 00:00-24:00 for a whole day",
        f"{path} (document 2): spec.maintenanceWindows[0].start: must be a time HH:MM between "
        "00:00 and 23:59, got '25:00'",
    )


def test_single_document_errors_name_just_the_file(tmp_path: Path) -> None:
    path = tmp_path / "one.yaml"
    path.write_text(POLICY.format(name="a", start="'01:00'", end="'02:00'").replace("UTC", "Mars"))
    with pytest.raises(PolicyFileError) as caught:
        load_policy(path)
    assert caught.value.errors == (
        f"{path}: spec.maintenanceWindows[0].timezone: unknown time zone 'Mars'",
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "contains no RotationPolicy"),
        ("---\n", "contains no RotationPolicy"),
        ("- a\n- b\n", "line 1, column 1: not a RotationPolicy manifest: the YAML reads as a list"),
        # Text that is YAML but no manifest at all is said in one line, with where it starts
        # (issue 42: "::: not yaml" read as the unknown field "::" and three missing ones).
        (
            "::: not yaml\n",
            "line 1, column 1: not a RotationPolicy manifest: the YAML reads as a mapping of "
            "'::', not a mapping of apiVersion, kind, metadata, spec",
        ),
        (
            "\n\n  hello\n",
            "line 3, column 3: not a RotationPolicy manifest: the YAML reads as the text 'hello'",
        ),
        ("a: [1,\n", "invalid YAML at line 2, column 1"),
        ("[" * 5000, "invalid YAML: nested too deeply"),  # the parser recurses per level
    ],
)
def test_unusable_text(text: str, message: str) -> None:
    with pytest.raises(PolicyFileError, match=message.replace("[", r"\[")) as caught:
        policies_from_text(text, "inline.yaml")
    assert all(error.startswith("inline.yaml: ") for error in caught.value.errors)


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(PolicyFileError, match="cannot read"):
        load_policies(tmp_path / "missing.yaml")
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(PolicyFileError, match="not UTF-8"):
        load_policies(binary)
