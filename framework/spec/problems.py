"""How a spec's problems are collected and said: each with its file, line, column and
field, the rule it breaks and, for a misspelt name, the closest known one.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any

from framework.errors import Problem, SpecError
from framework.spec.yaml_source import Marks, YamlPath


class Checker:
    """Collects the problems of one spec, each placed where the marks say it was written."""

    def __init__(self, source: str, marks: Marks):
        self.source = source
        self.marks = marks
        self.problems: list[Problem] = []

    def add(self, path: YamlPath, rule: str, *, at_key: bool = False, place: YamlPath | None = None) -> None:
        """A problem with the field at `path`, placed at `place` if given (another setting)."""
        where = path if place is None else place
        line, column = self.marks.key(where) if at_key else self.marks.at(where)
        self.problems.append(Problem(self.source, line, column, _dotted(path), rule))

    def raise_if_any(self) -> None:
        if self.problems:
            # In file order, so a reader can walk down the file.
            ordered = sorted(self.problems, key=lambda p: (p.line is None, p.line or 0, p.column or 0))
            raise SpecError(ordered)


class Refused(Exception):
    """A value breaks a rule; the message is the rule, said to the user."""


def _dotted(path: YamlPath) -> str | None:
    """("expectations", 2, "type") -> "expectations[2].type"."""
    text = ""
    for part in path:
        if isinstance(part, int) and not isinstance(part, bool):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text or None


def shown(value: Any) -> str:
    """A value as the user wrote it in YAML, short."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return repr(value if len(value) <= 60 else value[:57] + "...")
    if isinstance(value, bytes):
        return "binary data"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    return f"a {type(value).__name__}"


def _closest(name: str, candidates: Iterable[str]) -> tuple[str, bool]:
    """The candidate closest to `name`, and whether it is close enough to be a likely typo."""
    ordered = sorted(candidates)
    likely = difflib.get_close_matches(name.lower(), ordered, n=1, cutoff=0.6)
    if likely:
        return likely[0], True
    return difflib.get_close_matches(name.lower(), ordered, n=1, cutoff=0.0)[0], False


def suggestion(name: str, candidates: Iterable[str], kind: str) -> str:
    best, likely = _closest(name, candidates)
    return f"did you mean {best!r}?" if likely else f"the closest {kind} is {best!r}"
