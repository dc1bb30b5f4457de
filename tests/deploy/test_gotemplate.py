"""The chart's template renderer: Go text/template semantics for the subset, refusal outside it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.deploy.gotemplate import Chart, TemplateError, truthy


def chart(tmp_path: Path, template: str, values: str = "", helpers: str = "") -> Chart:
    (tmp_path / "templates").mkdir()
    (tmp_path / "Chart.yaml").write_text("name: c\nversion: 1.2.3\nappVersion: '9'\n")
    (tmp_path / "values.yaml").write_text(values)
    (tmp_path / "templates" / "t.yaml").write_text(template)
    (tmp_path / "templates" / "_h.tpl").write_text(helpers)
    return Chart(tmp_path)


def out(tmp_path: Path, template: str, values: str = "", helpers: str = "", **over: object) -> str:
    return chart(tmp_path, template, values, helpers).render(over)["t.yaml"]


def test_trim_markers_eat_whitespace_and_newlines_on_their_side(tmp_path: Path) -> None:
    assert out(tmp_path, "a:\n  {{- 1 }}\nb: {{ 2 -}}\n\n  c") == "a:1\nb: 2c"


def test_if_else_if_else_and_go_truthiness(tmp_path: Path) -> None:
    template = "{{ if .Values.a }}A{{ else if .Values.b }}B{{ else }}C{{ end }}"
    first, second = tmp_path / "1", tmp_path / "2"
    first.mkdir()
    second.mkdir()
    assert out(first, template, "a: 0\nb: ''") == "C"
    assert out(second, template, "a: []\nb: x") == "B"
    falsy = (0, "", [], {}, None, False)
    assert not any(truthy(v) for v in falsy)
    assert all(truthy(v) for v in (1, "x", [0], {"k": 0}, True))


def test_with_and_range_rebind_dot_and_dollar_is_the_root(tmp_path: Path) -> None:
    template = (
        "{{ with .Values.m }}{{ .k }}{{ end }}|"
        "{{ range .Values.xs }}{{ .n }}{{ $.Release.Name }};{{ end }}"
    )
    assert out(tmp_path, template, "m: {k: v}\nxs: [{n: 1}, {n: 2}]") == "v|1fleetgate;2fleetgate;"


def test_include_pipelines_and_sprig_functions(tmp_path: Path) -> None:
    helpers = '{{- define "x" -}}\nname: {{ .Chart.Name }}\nv: {{ .Chart.Version }}\n{{- end }}'
    template = (
        'l:\n  {{- include "x" . | nindent 2 }}\n'
        'q: {{ .Values.s | quote }} d: {{ .Values.none | default "dflt" }} '
        'p: {{ printf "%s-%d" "a" 3 | trunc 3 | trimSuffix "-" }} '
        'y: {{ toYaml .Values.m | indent 1 }} e: {{ eq .Values.s "x\\"y" }}'
    )
    assert out(tmp_path, template, 's: x"y\nm: {b: 1, a: [2]}', helpers) == (
        'l:\n  name: c\n  v: 1.2.3\nq: "x\\"y" d: dflt p: a-3 y:  a:\n - 2\n b: 1 e: true'
    )


def test_values_passed_at_render_time_merge_over_the_defaults(tmp_path: Path) -> None:
    c = chart(tmp_path, "{{ .Values.a.b }}{{ .Values.a.c }}", "a: {b: 1, c: 2}")
    assert c.render({"a": {"c": 3}})["t.yaml"] == "13"


def test_printing_a_missing_value_fails_instead_of_printing_nothing(tmp_path: Path) -> None:
    with pytest.raises(TemplateError, match="missing value"):
        out(tmp_path, "{{ .Values.typo }}")


def test_required_fails_with_its_message(tmp_path: Path) -> None:
    with pytest.raises(TemplateError, match="set x"):
        out(tmp_path, '{{ required "set x" .Values.x }}')


@pytest.mark.parametrize(
    "template",
    [
        "{{ $x := 1 }}",
        '{{ template "x" . }}',
        '{{ lookup "v1" "Secret" "ns" "n" }}',
        "{{ tpl .Values.a . }}",
        "{{ if .Values.a }}unclosed",
        "{{ end }}",
        "{{ .Values.m }}",
    ],
)
def test_anything_outside_the_subset_is_refused(tmp_path: Path, template: str) -> None:
    with pytest.raises(TemplateError):
        out(tmp_path, template, "a: 1\nm: {k: v}")
