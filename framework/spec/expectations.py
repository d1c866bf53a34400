"""``expectations:``: the spec's own Great Expectations checks, by type name, checked without
importing Great Expectations (its expectation modules are listed from the installed package).
"""

from __future__ import annotations

import functools
import importlib.util
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from framework.spec.configs import is_list
from framework.spec.model import EXPECTATION_FIELDS, ExpectationSpec
from framework.spec.problems import Checker, Refused, shown, suggestion
from framework.spec.yaml_source import YamlPath


_SNAKE_CASE = re.compile(r"[a-z][a-z0-9_]*")
_UNEXPECTED_ROWS = "unexpected_rows_expectation"


@functools.lru_cache(maxsize=1)
def known_expectation_types() -> frozenset[str] | None:
    """The expectation types the installed great_expectations registers, or None if it is
    not installed. Read from its files: importing it would take seconds."""
    try:
        found = importlib.util.find_spec("great_expectations")
    except (ImportError, ValueError):
        return None
    for folder in (found.submodule_search_locations or []) if found else []:
        names = _expectation_modules(Path(folder) / "expectations" / "core")
        if names:
            return names
    return None


def _expectation_modules(core: Path) -> frozenset[str]:
    # core/__init__.py imports exactly the expectations great_expectations registers (1.x);
    # a few older modules sit in the folder unregistered, and their names are refused.
    try:
        init = (core / "__init__.py").read_text(encoding="utf-8")
    except OSError:
        init = ""
    imported = re.findall(r"^\s*from \.(\w+) import", init, re.MULTILINE)
    names = {name for name in imported if _is_expectation_name(name)}
    if not names:  # another layout: fall back to every module in the folder
        names = {p.stem for p in core.glob("*.py") if _is_expectation_name(p.stem)}
    return frozenset(names)


def _is_expectation_name(name: str) -> bool:
    return name.startswith("expect_") or name == _UNEXPECTED_ROWS


def _snake_case(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def _expectation_type(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise Refused(f"must name an expectation, e.g. expect_column_values_to_not_be_null, got {shown(value)}")
    if not _SNAKE_CASE.fullmatch(value):
        raise Refused(f"must be the snake_case name, e.g. {_snake_case(value)}, got {shown(value)}")
    if not _is_expectation_name(value):
        raise Refused(f"must start with expect_ (or be {_UNEXPECTED_ROWS}), got {shown(value)}")
    known = known_expectation_types()
    if known is not None and value not in known:
        raise Refused(
            f"is not an expectation the installed great_expectations has, got {shown(value)};"
            f" {suggestion(value, known, 'one')}"
        )
    return value


def parse_expectations(checker: Checker, raw: Any) -> tuple[ExpectationSpec, ...]:
    if raw is None:
        return ()
    if not is_list(raw):
        checker.add(("expectations",), f"must be a list of {{type, kwargs, meta}} mappings, got {shown(raw)}")
        return ()
    parsed = (_parse_expectation(checker, ("expectations", index), item) for index, item in enumerate(raw))
    return tuple(e for e in parsed if e is not None)


def _parse_expectation(checker: Checker, path: YamlPath, item: Any) -> ExpectationSpec | None:
    if not isinstance(item, Mapping):
        checker.add(path, f"must be a mapping with type, kwargs and meta, got {shown(item)}")
        return None
    before = len(checker.problems)
    for name in item:
        if name not in EXPECTATION_FIELDS:
            rule = "unknown field; an expectation has only type, kwargs and meta; "
            rule += suggestion(str(name), EXPECTATION_FIELDS, "field")
            if name == "expectation_type":
                rule += " (Great Expectations 0.x's expectation_type is type in 1.x)"
            checker.add(path + (name,), rule, at_key=True)
    type_ = None
    if "type" not in item:
        checker.add(path + ("type",), "is required, e.g. type: expect_column_values_to_not_be_null")
    else:
        try:
            type_ = _expectation_type(item["type"])
        except Refused as refusal:
            checker.add(path + ("type",), str(refusal))
    kwargs = _string_keyed(checker, path + ("kwargs",), item.get("kwargs"))
    meta = _string_keyed(checker, path + ("meta",), item.get("meta"))
    if len(checker.problems) > before or type_ is None:
        return None
    return ExpectationSpec(type=type_, kwargs=kwargs, meta=meta, line=checker.marks.at(path)[0])


def _string_keyed(checker: Checker, path: YamlPath, raw: Any) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        checker.add(path, f"must be a mapping, got {shown(raw)}")
        return {}
    for name in raw:
        if not isinstance(name, str):
            checker.add(path + (name,), f"names must be strings, got {shown(name)}", at_key=True)
    return dict(raw)
