"""Does an object implement a port? ``isinstance`` against a runtime-checkable Protocol only
looks for the members' names; :func:`assert_implements` also holds each method's signature to
the Protocol's, so a renamed parameter, a dropped default or a sync method where the port says
``async`` is caught where it is made, not at the first call."""

from __future__ import annotations

import inspect
from typing import Any, Generic, Protocol

__all__ = ["assert_implements", "signature_problems"]


def signature_problems(obj: Any, protocol: type) -> list[str]:
    """Every way ``obj``'s members differ from ``protocol``'s (empty when it implements it)."""
    problems: list[str] = []
    for name in _members(protocol):
        wanted = inspect.getattr_static(protocol, name, None)
        if not hasattr(obj, name):
            problems.append(f"{name}: missing")
            continue
        if not callable(wanted) or isinstance(wanted, property):
            continue  # a data member: its presence is all a Protocol states
        got = inspect.getattr_static(type(obj), name, None) or getattr(obj, name)
        problems += [f"{name}: {p}" for p in _method_problems(got, wanted)]
    return problems


def _members(protocol: type) -> list[str]:
    """The names a Protocol declares, its bases' included (what ``isinstance`` looks for)."""
    names: set[str] = set()
    for base in protocol.__mro__:
        if base in (object, Protocol, Generic) or not getattr(base, "_is_protocol", False):
            continue
        names |= {n for n in (*vars(base), *getattr(base, "__annotations__", {})) if n[0] != "_"}
    return sorted(names)


def _method_problems(got: Any, wanted: Any) -> list[str]:
    """How method ``got`` differs from the Protocol's ``wanted``."""
    got = got.__func__ if isinstance(got, staticmethod | classmethod) else got
    problems = []
    if inspect.iscoroutinefunction(wanted) != inspect.iscoroutinefunction(got):
        problems.append("async" if inspect.iscoroutinefunction(wanted) else "must not be async")
    ours = inspect.signature(wanted).parameters
    theirs = inspect.signature(got).parameters
    keyword = inspect.Parameter.KEYWORD_ONLY
    positional = [p for p in theirs.values() if p.kind != keyword]
    for index, param in enumerate(p for p in ours.values() if p.kind != keyword):
        other = positional[index] if index < len(positional) else None
        if other is None or not _same(other, param):
            problems.append(f"parameter {index} is {other} where the port has {param}")
    for param in (p for p in ours.values() if p.kind == keyword):
        other = theirs.get(param.name)
        if other is None or not _same(other, param):
            problems.append(f"keyword {param.name!r} is {other} where the port has {param}")
    matched = sum(1 for p in ours.values() if p.kind != keyword)
    for extra in [*positional[matched:], *(p for p in theirs.values() if p.kind == keyword)]:
        # An implementation may take more, as long as a caller of the port need not pass it.
        required = extra.default is inspect.Parameter.empty and extra.kind not in (
            inspect.Parameter.VAR_POSITIONAL,
            inspect.Parameter.VAR_KEYWORD,
        )
        if extra.name not in ours and required:
            problems.append(f"needs parameter {extra.name!r} the port does not pass")
    return problems


def _same(got: inspect.Parameter, wanted: inspect.Parameter) -> bool:
    """The same name, kind and default (a port's ``...`` default stands for any default)."""
    if (got.name, got.kind) != (wanted.name, wanted.kind):
        return False
    if wanted.default is Ellipsis:
        return got.default is not inspect.Parameter.empty
    return bool(got.default is wanted.default or got.default == wanted.default)


def assert_implements(obj: Any, protocol: type) -> None:
    """``obj`` is a ``protocol`` by name (isinstance) and by every method's signature."""
    assert isinstance(obj, protocol), f"{type(obj).__name__} is no {protocol.__name__}"
    problems = signature_problems(obj, protocol)
    assert not problems, f"{type(obj).__name__} as a {protocol.__name__}: {problems}"
