"""Reading spec files and folders: ``load_spec``, ``load_specs`` and ``lint`` (every problem
of every file, plus what lint only warns about), for the command line and git hooks.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from framework.errors import Problem, ProblemsError, SpecError
from framework.spec.model import TopicSpec, colliding_name
from framework.spec.names import CLEANUP_POLICIES
from framework.spec.parse import parse_spec
from framework.spec.yaml_source import Marks, load_yaml_file


def load_spec(path: str | os.PathLike[str]) -> TopicSpec:
    """Read one YAML spec file; raise SpecError with every problem, each at its line."""
    return _load(path)[0]


def _load(path: str | os.PathLike[str]) -> tuple[TopicSpec, Marks]:
    try:
        data, marks = load_yaml_file(path)
    except ProblemsError as error:  # unreadable or malformed YAML is a bad spec too
        raise SpecError(error.problems) from None
    return parse_spec(data, os.fspath(path), marks), marks


def load_specs(paths: Iterable[str | os.PathLike[str]]) -> list[TopicSpec]:
    """Every spec under `paths` (files, or folders of *.yaml / *.yml); one SpecError for all problems."""
    specs, problems = _collect(paths)
    if problems:
        raise SpecError(problems)
    return specs


@dataclass(frozen=True)
class LintReport:
    """What `lint` found: the good specs, and every problem of the others."""

    specs: tuple[TopicSpec, ...]
    problems: tuple[Problem, ...]

    def ok(self) -> bool:
        return not self.problems

    def lines(self) -> list[str]:
        out = []
        for spec in self.specs:
            policy = ",".join(p for p in CLEANUP_POLICIES if p in spec.config.cleanup_policy)
            plural = "" if spec.partitions == 1 else "s"
            out.append(f"ok   {spec.source}: topic {spec.topic}, {spec.partitions} partition{plural},"
                       f" cleanup.policy={policy}")
            if spec.ignored_configs:
                ignored = ", ".join(spec.ignored_configs)
                out.append(f"     ignored: {ignored} (they mean nothing for a Delta table)")
            out.extend(f"     warning: {warning}" for warning in spec.warnings)
        out.extend(str(problem) for problem in self.problems)
        return out


def lint(paths: Iterable[str | os.PathLike[str]]) -> LintReport:
    """Check every spec under `paths` without starting Spark; never raises SpecError."""
    specs, problems = _collect(paths)
    return LintReport(tuple(specs), tuple(problems))


def _collect(paths: Iterable[str | os.PathLike[str]]) -> tuple[list[TopicSpec], list[Problem]]:
    """The specs and problems of every file under `paths`, in the order given."""
    if isinstance(paths, (str, os.PathLike)):  # one path, not an iterable of characters
        paths = [paths]
    specs: list[TopicSpec] = []
    problems: list[Problem] = []
    first_of_topic: dict[str, TopicSpec] = {}  # by colliding_name
    seen: set[str] = set()
    for given in paths:
        try:
            files = _spec_files(os.fspath(given))
        except ProblemsError as error:
            problems.extend(error.problems)
            continue
        for path in files:
            if os.path.realpath(path) in seen:  # a file named and also inside a named folder
                continue
            seen.add(os.path.realpath(path))
            try:
                spec, marks = _load(path)
            except ProblemsError as error:
                problems.extend(error.problems)
                continue
            earlier = first_of_topic.setdefault(colliding_name(spec.topic), spec)
            if earlier is not spec:
                line, column = marks.at(("topic",))
                if earlier.topic == spec.topic:
                    rule = f"{spec.topic!r} is already the topic of {earlier.source}; one spec per topic"
                else:
                    rule = (f"{spec.topic!r} collides with topic {earlier.topic!r} of {earlier.source}: topics "
                            "that differ only by case or by '.' against '_' cannot share a warehouse")
                problems.append(Problem(spec.source, line, column, "topic", rule))
                continue
            specs.append(spec)
    return specs, problems


def _spec_files(path: str) -> list[str]:
    """A file as given, or a folder's *.yaml / *.yml files (sorted, not recursive)."""
    if os.path.isdir(path):
        try:
            names = sorted(os.listdir(path))
        except OSError as error:
            rule = f"cannot list the folder: {error.strerror or error}"
            raise SpecError([Problem(path, None, None, None, rule)]) from None
        found = [os.path.join(path, name) for name in names if name.endswith((".yaml", ".yml"))]
        return [file for file in found if os.path.isfile(file)]
    if os.path.exists(path):
        return [path]
    raise SpecError([Problem(path, None, None, None, "no such file or folder")])
