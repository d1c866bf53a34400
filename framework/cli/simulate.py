"""Scenario files (CONTRACT section 7) through the real engine, in temporary warehouses.

A scenario is a spec and a list of steps; the clock starts at 0 and every step's ``now``
sets it. Steps:

``produce``
    a list of records, or ``{now, records, expect_error}``; with ``expect_error: true``
    the batch must be refused and nothing written.
``commit_offset``
    ``{group, partition, offset}``.
``maintain``
    ``{now, force}``: compaction, retention, vacuum and the guarantee checks.
``delete_records``
    ``{partition, before_offset, expect_error}`` (Kafka's deleteRecords).
``expect``
    ``{offsets: [...] | {partition: [...]}, end_offset: N | {partition: N}}``; a plain
    list or number is partition 0.

``expect_spec_error: true`` at the top says the spec must be refused. Every scenario
file is checked before any runs; a malformed one is bad input (exit 2).
"""

from __future__ import annotations

import difflib
import os
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Callable, TextIO

from framework.errors import BadInput, Problem, ScenarioError, TopiclakeError
from framework.spec.yaml_source import Marks, load_yaml_file

TOP_FIELDS = ("name", "description", "spec", "steps", "expect_spec_error")
STEP_KINDS = ("produce", "commit_offset", "maintain", "expect", "delete_records")
STEP_FIELDS = {
    "produce": ("now", "records", "expect_error"),
    "commit_offset": ("group", "partition", "offset"),
    "maintain": ("now", "force"),
    "expect": ("offsets", "end_offset"),
    "delete_records": ("partition", "before_offset", "expect_error"),
}


@dataclass(frozen=True)
class Step:
    index: int
    kind: str
    body: Any
    line: int | None
    #: where a produce step's records sit in the file (for line numbers)
    records_place: tuple = ()


@dataclass(frozen=True)
class Scenario:
    path: str
    name: str
    spec: Any
    marks: Marks
    expect_spec_error: bool
    steps: tuple[Step, ...]


class _Problems:
    def __init__(self, path: str, marks: Marks):
        self.path, self.marks, self.items = path, marks, []

    def add(self, place: tuple, field: str, rule: str) -> None:
        line, column = self.marks.at(place)
        self.items.append(Problem(self.path, line, column, field, rule))


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_step(problems: _Problems, index: int, raw: Any) -> Step | None:
    place = ("steps", index)
    where = f"steps[{index}]"
    if not isinstance(raw, dict) or len(raw) != 1:
        problems.add(place, where, f"a step is a mapping with exactly one of {', '.join(STEP_KINDS)}")
        return None
    kind, body = next(iter(raw.items()))
    if kind not in STEP_KINDS:
        close = difflib.get_close_matches(str(kind), STEP_KINDS, n=1)
        problems.add(place, f"{where}.{kind}", "unknown step" + (f"; did you mean {close[0]}?" if close else
                                                                  f"; steps: {', '.join(STEP_KINDS)}"))
        return None
    place = place + (kind,)
    where = f"{where}.{kind}"
    records_place = place + ("records",)
    if kind == "produce" and isinstance(body, list):
        body = {"records": body}
        records_place = place
    if kind == "maintain" and body is None:
        body = {}
    if not isinstance(body, dict):
        problems.add(place, where, "must be a mapping" + (" or a list of records" if kind == "produce" else ""))
        return None
    for name in body:
        if name not in STEP_FIELDS[kind]:
            problems.add(place + (name,), f"{where}.{name}", f"unknown field; allowed: {', '.join(STEP_FIELDS[kind])}")
    if "now" in body and body["now"] is not None and not _is_int(body["now"]):
        problems.add(place + ("now",), f"{where}.now", f"must be epoch milliseconds, got {body['now']!r}")
    for flag in ("force", "expect_error"):
        if flag in body and not isinstance(body[flag], bool):
            problems.add(place + (flag,), f"{where}.{flag}", f"must be true or false, got {body[flag]!r}")
    if kind == "produce" and not isinstance(body.get("records"), list):
        problems.add(place, f"{where}.records", "must be a list of records")
    if kind == "commit_offset":
        if not isinstance(body.get("group"), str) or not body.get("group"):
            problems.add(place, f"{where}.group", "must be a non-empty group name")
        for name in ("partition", "offset"):
            if not _is_int(body.get(name)):
                problems.add(place, f"{where}.{name}", f"must be an integer, got {body.get(name)!r}")
    if kind == "delete_records":
        for name in ("partition", "before_offset"):
            if not _is_int(body.get(name)):
                problems.add(place, f"{where}.{name}", f"must be an integer, got {body.get(name)!r}")
    if kind == "expect":
        if "offsets" not in body and "end_offset" not in body:
            problems.add(place, where, "needs offsets, end_offset or both")
        offsets = body.get("offsets")
        if offsets is not None:
            per_partition = offsets if isinstance(offsets, dict) else {0: offsets}
            for partition, values in per_partition.items():
                if not _is_int(partition) or not isinstance(values, list) or not all(_is_int(v) for v in values):
                    problems.add(place + ("offsets",), f"{where}.offsets",
                                 "must be a list of offsets, or a mapping of partition to such a list")
                    break
        end = body.get("end_offset")
        if end is not None:
            per_partition = end if isinstance(end, dict) else {0: end}
            if not all(_is_int(p) and _is_int(v) for p, v in per_partition.items()):
                problems.add(place + ("end_offset",), f"{where}.end_offset",
                             "must be an offset, or a mapping of partition to offset")
    line, _ = problems.marks.at(place)
    return Step(index, kind, body, line, records_place if kind == "produce" else ())


def load_scenario(path: str) -> Scenario:
    """Read and check one scenario file; ScenarioError lists every problem."""
    try:
        data, marks = load_yaml_file(path)
    except BadInput as error:
        raise ScenarioError(list(getattr(error, "problems", [Problem(path, None, None, None, str(error))]))) from None
    problems = _Problems(path, marks)
    if not isinstance(data, dict):
        problems.add((), "scenario", "must be a mapping with spec and steps")
        raise ScenarioError(problems.items)
    for name in data:
        if name not in TOP_FIELDS:
            close = difflib.get_close_matches(str(name), TOP_FIELDS, n=1)
            problems.add((name,), str(name), "unknown field" + (f"; did you mean {close[0]}?" if close else ""))
    if not isinstance(data.get("spec"), dict):
        problems.add(("spec",), "spec", "required: the topic spec under test (a mapping)")
    steps_raw = data.get("steps", [])
    if steps_raw is None:
        steps_raw = []
    if not isinstance(steps_raw, list):
        problems.add(("steps",), "steps", "must be a list of steps")
        steps_raw = []
    if "expect_spec_error" in data and not isinstance(data["expect_spec_error"], bool):
        problems.add(("expect_spec_error",), "expect_spec_error", "must be true or false")
    steps = [s for s in (_check_step(problems, i, raw) for i, raw in enumerate(steps_raw)) if s is not None]
    if problems.items:
        raise ScenarioError(problems.items)
    name = data.get("name") or os.path.basename(path)
    return Scenario(path, str(name), data["spec"], marks, bool(data.get("expect_spec_error", False)), tuple(steps))


class ScenarioFailed(Exception):
    """The engine's behaviour differs from what the scenario expects."""


@dataclass(frozen=True)
class ScenarioResult:
    path: str
    passed: bool
    message: str | None
    seconds: float


class ScenarioRunner:
    """Runs scenarios against one Spark session, each in a fresh temporary warehouse."""

    def __init__(self, spark, validator_factory: Callable | None = None, progress: Callable[[str], None] | None = None):
        self.spark = spark
        self.validator_factory = validator_factory
        self.progress = progress or (lambda message: None)

    def run(self, scenario: Scenario) -> ScenarioResult:
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="topiclake-simulate-") as folder:
            try:
                self._run(scenario, os.path.join(folder, "warehouse"))
                passed, message = True, None
            except ScenarioFailed as failure:
                passed, message = False, str(failure)
        return ScenarioResult(scenario.path, passed, message, time.monotonic() - started)

    def _run(self, scenario: Scenario, location: str) -> None:
        from framework.errors import SpecError
        from framework.log.topic import Topic
        from framework.log.warehouse import Warehouse
        from framework.spec import parse_spec

        warehouse = Warehouse.resolve(location)
        try:
            spec = parse_spec(scenario.spec, source=f"{scenario.path} spec", marks=scenario.marks.sub(("spec",)))
        except SpecError as error:
            if scenario.expect_spec_error:
                if os.path.exists(location):
                    raise ScenarioFailed("the spec was refused, but something was written to the warehouse")
                return
            raise ScenarioFailed(f"spec refused: {error.problems[0]}") from None
        if scenario.expect_spec_error:
            raise ScenarioFailed("the spec was accepted, but the scenario expects it to be refused")
        topic = Topic(self.spark, warehouse, spec)
        topic.create()
        state = _Clock()
        for step in scenario.steps:
            self.progress(f"  step {step.index + 1}: {step.kind}")
            handler = getattr(self, f"_{step.kind}")
            handler(scenario, step, topic, warehouse, state)

    # ------------------------------------------------------------------ steps
    def _produce(self, scenario, step, topic, warehouse, clock) -> None:
        from framework.clients.produce import produce
        from framework.clients.records import parse_records
        from framework.errors import RecordError

        body = step.body
        now = clock.set(body.get("now"))
        items = [(scenario.marks.at(step.records_place + (i,))[0], raw) for i, raw in enumerate(body["records"])]
        before = _end_offsets(topic)
        try:
            records = parse_records(items, topic.spec, scenario.path)
            produce(topic, records, now, source=scenario.path)
        except RecordError as error:
            if body.get("expect_error"):
                if _end_offsets(topic) != before:
                    raise ScenarioFailed(f"{_where(step)}: the batch was refused but some of it was written") from None
                return
            raise ScenarioFailed(f"{_where(step)}: produce refused: {error.problems[0]}") from None
        if body.get("expect_error"):
            raise ScenarioFailed(f"{_where(step)}: the batch was accepted, but the scenario expects it refused")

    def _commit_offset(self, scenario, step, topic, warehouse, clock) -> None:
        from framework.log.consumer_offsets import ConsumerOffsets

        body = step.body
        try:
            topic.spec.table_name(body["partition"])
        except BadInput as error:
            raise ScenarioFailed(f"{_where(step)}: {error}") from None
        ConsumerOffsets(self.spark, warehouse).commit(body["group"], topic.spec.topic, body["partition"], body["offset"])

    def _maintain(self, scenario, step, topic, warehouse, clock) -> None:
        from framework.stages.maintenance import Maintenance

        now = clock.set(step.body.get("now"))
        validator = self.validator_factory(self.spark, warehouse) if self.validator_factory else None
        runner = Maintenance(self.spark, warehouse, [topic.spec], validator=validator, progress=self.progress)
        run = runner.run(now, force=bool(step.body.get("force", False)))
        for part in run.partitions:
            if part.failed:
                what = part.error or "guarantee(s) failed: " + ", ".join(part.failed_guarantees)
                raise ScenarioFailed(f"{_where(step)}: partition {part.partition}: {what}")

    def _delete_records(self, scenario, step, topic, warehouse, clock) -> None:
        from framework.stages.retention import delete_records

        body = step.body
        try:
            delete_records(topic.partition(body["partition"]), body["before_offset"])
        except BadInput as error:
            if body.get("expect_error"):
                return
            raise ScenarioFailed(f"{_where(step)}: delete_records refused: {error}") from None
        if body.get("expect_error"):
            raise ScenarioFailed(f"{_where(step)}: delete_records was accepted, but the scenario expects it refused")

    def _expect(self, scenario, step, topic, warehouse, clock) -> None:
        body = step.body
        offsets = body.get("offsets")
        if offsets is not None:
            wanted = offsets if isinstance(offsets, dict) else {0: offsets}
            for partition, expected in sorted(wanted.items()):
                actual = _offsets(topic, partition)
                if actual != sorted(expected):
                    raise ScenarioFailed(f"{_where(step)}: partition {partition} offsets {actual} != expected "
                                         f"{sorted(expected)}")
        end = body.get("end_offset")
        if end is not None:
            wanted = end if isinstance(end, dict) else {0: end}
            for partition, expected in sorted(wanted.items()):
                actual = topic.partition(partition).snapshot().state.log_end_offset
                if actual != expected:
                    raise ScenarioFailed(f"{_where(step)}: partition {partition} end offset {actual} != "
                                         f"expected {expected}")


class _Clock:
    """The scenario clock: starts at 0; every step's ``now`` sets it."""

    def __init__(self):
        self.now = 0

    def set(self, now: int | None) -> int:
        if now is not None:
            self.now = int(now)
        return self.now


def _where(step: Step) -> str:
    return f"step {step.index + 1} ({step.kind}" + (f", line {step.line})" if step.line else ")")


def _offsets(topic, partition: int) -> list[int]:
    """The partition's offsets: read by Arrow from the files the newest version's checksum
    lists when they are its records (a scenario's tables are small, and a Spark query costs
    two jobs), else through Delta (deletion vectors, no checksum)."""
    from framework.log.local_append import read_locally
    from framework.log.table_layout import table_schema

    log = topic.partition(partition)
    local = read_locally(log.path, table_schema(log.spec), ["offset"])
    if local is not None:
        return sorted(local.column("offset").to_pylist())
    rows = log.read().select("offset").orderBy("offset").collect()
    return [r["offset"] for r in rows]


def _end_offsets(topic) -> list[int]:
    return [log.snapshot().state.log_end_offset for log in topic.partitions()]


def run_scenarios(paths: list[str], out: TextIO, progress: Callable[[str], None] | None = None,
                  spark=None, validator_factory: Callable | None = None, as_json: bool = False,
                  session: Callable[[], object] | None = None) -> int:
    """Check every file, then run each; prints PASS/FAIL lines and a count (or, ``as_json``, one
    JSON object with every result). Exit 1 if any failed. The scenarios run in ``spark``,
    else the session ``session()`` starts once every file is checked (the command line's,
    which begins importing Great Expectations as it starts), else the active one."""
    scenarios = []
    problems: list[Problem] = []
    for path in paths:
        try:
            scenarios.append(load_scenario(path))
        except ScenarioError as error:
            problems.extend(error.problems)
    if problems:
        raise ScenarioError(problems)
    if spark is None and session is not None:
        spark = session()
    if spark is None:
        from framework.session import get_session

        spark = get_session()
    if validator_factory is None:
        from framework.checks.guarantees import Guarantees as validator_factory

    runner = ScenarioRunner(spark, validator_factory, progress)
    failed = 0
    results = []
    for scenario in scenarios:
        if progress:
            progress(f"{scenario.path}: {scenario.name}")
        try:
            result = runner.run(scenario)
        except TopiclakeError as error:
            result = ScenarioResult(scenario.path, False, str(error).splitlines()[0], 0.0)
        results.append(result)
        if not result.passed:
            failed += 1
        if as_json:
            continue
        if result.passed:
            print(f"PASS {result.path}", file=out, flush=True)
        else:
            print(f"FAIL {result.path}: {result.message}", file=out, flush=True)
    if as_json:
        import dataclasses
        import json

        print(json.dumps({"passed": len(scenarios) - failed, "failed": failed,
                          "scenarios": [dataclasses.asdict(r) for r in results]}, sort_keys=True), file=out, flush=True)
    else:
        print(f"{len(scenarios) - failed} passed, {failed} failed", file=out, flush=True)
    return 1 if failed else 0
