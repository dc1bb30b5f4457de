"""Reading an input file as YAML: an unreadable file or a syntax error is one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetgate.apps.yamlfile import YamlFileError, read_yaml


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("nodes:\n  - {name: a, cpus: 4\n  - {name: b}\n", "invalid YAML at line 3, column 5: "),
        ("a: b: c\n", "invalid YAML at line 1, column 5: mapping values are not allowed here"),
        ("[" * 5000, "invalid YAML: nested too deeply"),
        ("at: 2024-02-30T00:00:00Z\n", "invalid YAML: "),
    ],
)
def test_a_syntax_error_is_one_line_with_line_and_column(
    tmp_path: Path, text: str, message: str
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    with pytest.raises(YamlFileError) as caught:
        read_yaml(bad)
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)


def test_a_missing_or_binary_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(YamlFileError, match=r"^cannot read: No such file"):
        read_yaml(tmp_path / "absent.yaml")
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(YamlFileError, match=r"^not UTF-8 text"):
        read_yaml(binary)


def test_a_document_is_read(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text("nodes: [{name: a, cpus: 4}]\n")
    assert read_yaml(good) == {"nodes": [{"name": "a", "cpus": 4}]}
