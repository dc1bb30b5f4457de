"""Render the fleetgate Helm chart without helm: the Go-template subset the chart is written in.

No ``helm`` binary is installable on this machine (not in Debian, not on PyPI for Linux), so the
chart's tests render it with this small renderer. It implements exactly the constructs the chart
uses, with Go's ``text/template`` semantics, and *refuses* anything else, so the chart cannot
drift into constructs this renderer would silently get wrong:

* actions ``{{ pipeline }}`` and comments ``{{/* */}}``, with ``{{-`` / ``-}}`` trimming;
* ``if`` / ``else if`` / ``else`` / ``end``, ``with`` (rebinds ``.``), ``range`` over a list
  (rebinds ``.``), ``define`` and the ``include`` function;
* operands: ``.Values.a.b``, ``.``, ``$``, ``$.Values.a``, strings, integers, ``true``/``false``,
  parenthesised pipelines; pipelines pass the value as the last argument;
* functions (Helm/Sprig meanings): include, toYaml, nindent, indent, quote, default, trunc,
  trimSuffix, printf (%s, %d), not, and, or, eq, ne, required, toString.

A missing value is an error when printed (Helm would print nothing: a typo must fail a test)
and false in a condition. Truthiness is Go's: false, 0, "", empty list/map and nil are false.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml


class TemplateError(ValueError):
    """The template uses something outside the subset, or fails to render."""


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


MISSING: Any = _Missing()


# --- parsing ------------------------------------------------------------------------------------

_ACTION = re.compile(r"{{(-\s)?(.*?)(\s-)?}}", re.DOTALL)
_TOKEN = re.compile(
    r'\s*(?:(?P<str>"(?:[^"\\]|\\.)*")|(?P<raw>`[^`]*`)|(?P<num>-?\d+)|(?P<field>(?:\$|\.)[\w.]*)'
    r"|(?P<ident>[A-Za-z_]\w*)|(?P<punct>[()|]))"
)


@dataclass
class _Node:
    kind: str  # text, action, if, with, range
    text: str = ""
    expr: list[Any] = field(default_factory=list)
    body: list[_Node] = field(default_factory=list)
    branches: list[tuple[list[Any], list[_Node]]] = field(default_factory=list)
    orelse: list[_Node] = field(default_factory=list)


def _tokens(source: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    source = source.strip()
    while pos < len(source):
        m = _TOKEN.match(source, pos)
        if m is None or m.end() == pos:
            raise TemplateError(f"cannot parse {source[pos:]!r}")
        kind = m.lastgroup
        assert kind is not None
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


def _pipeline(tokens: list[tuple[str, str]], pos: int = 0) -> tuple[list[Any], int]:
    """A pipeline as a list of commands, each a list of operands (nested pipelines allowed)."""
    commands: list[list[Any]] = [[]]
    while pos < len(tokens):
        kind, value = tokens[pos]
        if (kind, value) == ("punct", ")"):
            break
        if (kind, value) == ("punct", "|"):
            commands.append([])
        elif (kind, value) == ("punct", "("):
            inner, pos = _pipeline(tokens, pos + 1)
            if pos >= len(tokens) or tokens[pos][1] != ")":
                raise TemplateError("unclosed parenthesis")
            commands[-1].append(("pipe", inner))
        else:
            commands[-1].append((kind, value))
        pos += 1
    if any(not c for c in commands):
        raise TemplateError("empty command in pipeline")
    return commands, pos


def _parse_expr(source: str) -> list[Any]:
    tokens = _tokens(source)
    expr, pos = _pipeline(tokens)
    if pos != len(tokens):
        raise TemplateError(f"unexpected ) in {source!r}")
    return expr


def parse(source: str, defines: dict[str, list[_Node]]) -> list[_Node]:
    """Parse a template; ``define`` blocks go into ``defines``."""
    pieces: list[tuple[str, str]] = []
    pos = 0
    for m in _ACTION.finditer(source):
        text = source[pos : m.start()]
        if m.group(1):
            text = text.rstrip()
        pieces.append(("text", text))
        pieces.append(("action", m.group(2)))
        pos = m.end()
        if m.group(3):
            rest = source[pos:]
            pos += len(rest) - len(rest.lstrip())
    pieces.append(("text", source[pos:]))

    root: list[_Node] = []
    stack: list[tuple[_Node | None, list[_Node], str]] = [(None, root, "root")]
    for kind, value in pieces:
        body = stack[-1][1]
        if kind == "text":
            if value:
                body.append(_Node("text", text=value))
            continue
        word = value.strip()
        if word.startswith("/*"):
            if not word.endswith("*/"):
                raise TemplateError(f"unclosed comment {word!r}")
            continue
        head, _, rest = word.partition(" ")
        if head in ("if", "with", "range"):
            node = _Node(head)
            node.branches.append((_parse_expr(rest), []))
            body.append(node)
            stack.append((node, node.branches[-1][1], head))
        elif head == "define":
            name = _parse_expr(rest)
            if len(name) != 1 or name[0][0][0] != "str":
                raise TemplateError(f"define needs a string name: {word!r}")
            target: list[_Node] = []
            defines[_unquote(name[0][0][1])] = target
            stack.append((None, target, "define"))
        elif head == "else":
            node_, _, opened = stack.pop()
            if node_ is None or opened == "else":
                raise TemplateError("else outside if/with/range")
            if rest.startswith("if ") and node_.kind == "if":
                node_.branches.append((_parse_expr(rest[3:]), []))
                stack.append((node_, node_.branches[-1][1], "if"))
            elif rest:
                raise TemplateError(f"unsupported else form {word!r}")
            else:
                stack.append((node_, node_.orelse, "else"))
        elif head == "end":
            if len(stack) == 1:
                raise TemplateError("end without a block")
            stack.pop()
        elif (
            head in ("template", "block", "break", "continue")
            or ":=" in word
            or "=" in _strip_strings(word)
        ):
            raise TemplateError(f"{head!r} is outside the chart's template subset")
        else:
            body.append(_Node("action", expr=_parse_expr(word)))
    if len(stack) != 1:
        raise TemplateError(f"unclosed {stack[-1][2]} block")
    return root


def _strip_strings(text: str) -> str:
    return re.sub(r'"(?:[^"\\]|\\.)*"|`[^`]*`', "", text)


def _unquote(token: str) -> str:
    if token.startswith("`"):
        return token[1:-1]
    return str(yaml.safe_load(token))  # Go and YAML double-quoted escapes agree here


# --- evaluation ---------------------------------------------------------------------------------


def truthy(value: Any) -> bool:
    """Go's template truth: false, 0, nil, empty string/list/map are false; missing is false."""
    if value is MISSING or value is None:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return value != 0
    if isinstance(value, str | list | tuple | dict):
        return len(value) > 0
    return True


def to_yaml(value: Any) -> str:
    """Helm's toYaml: YAML without the trailing newline."""
    if value is MISSING or value is None:
        return "null"
    return yaml.safe_dump(value, default_flow_style=False, sort_keys=True).rstrip("\n")


def _indent(n: int, text: Any) -> str:
    pad = " " * n
    return pad + str(text).replace("\n", "\n" + pad)


def _printf(fmt: str, *args: Any) -> str:
    parts = iter(args)
    return re.sub(r"%[sd]", lambda m: str(next(parts)), fmt)


def _required(message: str, value: Any) -> Any:
    if not truthy(value) and value != 0:
        raise TemplateError(message)
    return value


def _trunc(n: int, text: str) -> str:
    return text[:n]


def _default(fallback: Any, value: Any = MISSING) -> Any:
    return value if truthy(value) else fallback


class Chart:
    """One chart directory: ``Chart.yaml``, ``values.yaml``, ``templates/``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.meta = yaml.safe_load((root / "Chart.yaml").read_text())
        self.values = yaml.safe_load((root / "values.yaml").read_text()) or {}
        self.defines: dict[str, list[_Node]] = {}
        self.templates: dict[str, list[_Node]] = {}
        for path in sorted((root / "templates").iterdir()):
            if path.suffix in (".yaml", ".tpl"):
                self.templates[path.name] = parse(path.read_text(), self.defines)
        self._funcs: dict[str, Callable[..., Any]] = {
            "toYaml": to_yaml,
            "nindent": lambda n, t: "\n" + _indent(n, t),
            "indent": _indent,
            "quote": lambda v: '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"',
            "default": _default,
            "trunc": _trunc,
            "trimSuffix": lambda suffix, s: (
                s[: -len(suffix)] if suffix and s.endswith(suffix) else s
            ),
            "printf": _printf,
            "not": lambda v: not truthy(v),
            "and": lambda *vs: next((v for v in vs if not truthy(v)), vs[-1]),
            "or": lambda *vs: next((v for v in vs if truthy(v)), vs[-1]),
            "eq": lambda a, b: a == b,
            "ne": lambda a, b: a != b,
            "required": _required,
            "toString": lambda v: str(v).lower() if isinstance(v, bool) else str(v),
        }

    def render(
        self,
        values: Mapping[str, Any] | None = None,
        *,
        release: str = "fleetgate",
        namespace: str = "fleetgate-system",
    ) -> dict[str, str]:
        """Render every template (not ``_*.tpl``) with ``values`` merged over the defaults."""
        merged = _merge(self.values, dict(values or {}))
        top = {
            "Values": merged,
            "Release": {"Name": release, "Namespace": namespace, "Service": "Helm"},
            "Chart": {
                "Name": self.meta["name"],
                "Version": self.meta["version"],
                "AppVersion": self.meta.get("appVersion", ""),
            },
        }
        out = {}
        for name, nodes in self.templates.items():
            if name.startswith("_"):
                continue
            out[name] = self._run(nodes, top, top)
        return out

    def _run(self, nodes: list[_Node], dot: Any, top: Any) -> str:
        out: list[str] = []
        for node in nodes:
            if node.kind == "text":
                out.append(node.text)
            elif node.kind == "action":
                value = self._eval(node.expr, dot, top)
                if value is MISSING or value is None:
                    raise TemplateError(f"printing a missing value: {node.expr}")
                out.append(_print(value))
            elif node.kind == "if":
                for cond, body in node.branches:
                    if truthy(self._eval(cond, dot, top)):
                        out.append(self._run(body, dot, top))
                        break
                else:
                    out.append(self._run(node.orelse, dot, top))
            elif node.kind == "with":
                value = self._eval(node.branches[0][0], dot, top)
                chosen = node.branches[0][1] if truthy(value) else node.orelse
                out.append(self._run(chosen, value if truthy(value) else dot, top))
            elif node.kind == "range":
                items = self._eval(node.branches[0][0], dot, top)
                if items is MISSING or items is None:
                    items = []
                if not isinstance(items, list):
                    raise TemplateError("range over something that is not a list")
                for item in items:
                    out.append(self._run(node.branches[0][1], item, top))
                if not items:
                    out.append(self._run(node.orelse, dot, top))
        return "".join(out)

    def _eval(self, pipeline: list[Any], dot: Any, top: Any) -> Any:
        value: Any = MISSING
        for i, command in enumerate(pipeline):
            piped = () if i == 0 else (value,)
            value = self._command(command, dot, top, piped)
        return value

    def _command(self, command: list[Any], dot: Any, top: Any, piped: tuple[Any, ...]) -> Any:
        kind, token = command[0]
        if kind == "ident" and token not in ("true", "false", "nil"):
            args = [self._operand(op, dot, top) for op in command[1:]] + list(piped)
            if token == "include":
                name, context = args
                if name not in self.defines:
                    raise TemplateError(f"include of undefined template {name!r}")
                return self._run(self.defines[name], context, top)
            if token not in self._funcs:
                raise TemplateError(f"function {token!r} is outside the chart's template subset")
            return self._funcs[token](*args)
        if len(command) > 1 or piped:
            raise TemplateError(f"{token!r} is not a function")
        return self._operand(command[0], dot, top)

    def _operand(self, operand: tuple[str, Any], dot: Any, top: Any) -> Any:
        kind, token = operand
        if kind == "pipe":
            return self._eval(token, dot, top)
        if kind in ("str", "raw"):
            return _unquote(token)
        if kind == "num":
            return int(token)
        if kind == "ident":
            return {"true": True, "false": False, "nil": None}[token]
        if kind == "field":
            base, path = (top, token[1:]) if token.startswith("$") else (dot, token)
            for part in [p for p in path.split(".") if p]:
                base = base.get(part, MISSING) if isinstance(base, dict) else MISSING
            return base
        raise TemplateError(f"unexpected {token!r}")


def _print(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        raise TemplateError("printing a map or list directly: use toYaml")
    return str(value)


def _merge(base: Any, override: Any) -> Any:
    """Helm's values merge: maps merge recursively, anything else replaces."""
    if isinstance(base, dict) and isinstance(override, dict):
        out = dict(base)
        for key, value in override.items():
            out[key] = _merge(base.get(key), value) if key in base else value
        return out
    return override


def documents(rendered: Mapping[str, str]) -> list[dict[str, Any]]:
    """Every non-empty YAML document of the rendered templates, in file order."""
    docs = []
    for name in sorted(rendered):
        for doc in yaml.safe_load_all(rendered[name]):
            if doc:
                docs.append(doc)
    return docs
