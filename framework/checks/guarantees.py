"""The nine guarantees of CONTRACT section 5, checked after every maintenance stage.

A check compares two versions of a partition table, read through Delta time travel: the
version a stage started from and the one it committed (``check_stage``), or the version
the last maintenance run left and the current one (``validate``). Spark pairs the two and
lists the violations (``framework.checks.rules``; a compaction's, and a small partition's
retention's and validation's, are first counted by Arrow in the driver,
``framework.checks.arrow_scope`` and ``arrow_whole``, and Spark runs only where that cannot
count or finds one), the pure scope rules say what the numbers mean
(``framework.checks.scope``), and Great Expectations judges the counts, one named
expectation per guarantee (``framework.checks.gx_suites``).

A check is two steps (``framework.stages.stage_check.Validator``): ``measure`` does the
Spark work and counts the violations; ``judge`` has Great Expectations judge the counts of
every check measured since the last judgment, one metrics row a check, in one validation a
topic. A maintenance run judges its checks when it records their history rows: a validation
costs about 0.1 s however many rows it judges, as much as the Spark work of a small
partition's check.

A failed guarantee is named in :class:`ValidationOutcome.failed_guarantees` (e.g.
``"G3 unique keys below the checkpoint"``) and explained in ``details`` with up to five
offending rows.

Where the numbers come from: log start, log end offset and checkpoint are read from the
commit metadata of the version itself (what the table says, not what the engine thinks
it wrote); the first uncleanable offset is recomputed from the before version's data, so
a stage that misjudged it is caught (G2, G6).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from typing import Sequence

from framework.checks import (
    arrow_scope,
    arrow_whole,
    batched,
    bounds,
    gx_project,
    gx_suites,
    pandas_expectations,
    rules,
    validation_plan,
)
from framework.checks.catalogue import STAGE_GUARANTEES
from framework.checks.changes import ChangeScope, change_scope, dirty_from, planned_up_front, worth_scoping
from framework.checks.readability import VIOLATIONS_SCHEMA, unreadable
from framework.checks.scope import Scope, expected_bounds, stage_scope, validate_scope, versions_to_read
from framework.cleaner.rules import uncleanable_after_ms
from framework.errors import ArgumentError
from framework.local_rows import local_frame
from framework.log.log_state import LogState
from framework.log.partition_log import PartitionLog
from framework.log.small_partitions import is_small, small_partition_settings
from framework.log.warehouse import Warehouse
from framework.stages.stage_check import MeasuredCheck, StageCheck, ValidateCheck, ValidationOutcome

__all__ = ["Guarantees"]


def _small(*states: LogState) -> bool:
    """Whether the versions compared are small enough to pair in one Spark task (each holds
    at most its offset span of records; a small partition's stages run that way too)."""
    return is_small(max(state.offset_span for state in states))


class Guarantees:
    """Checks the guarantees of a partition after a maintenance stage, or between versions."""

    def __init__(self, spark, warehouse: Warehouse):
        self.spark = spark
        self.warehouse = warehouse
        self._project: gx_suites.Project | None = None

    @property
    def project(self) -> gx_suites.Project:
        if self._project is None:
            self._project = gx_suites.Project(self.warehouse)
        return self._project

    # ------------------------------------------------------------ entry points
    def check_stage(self, check: StageCheck) -> ValidationOutcome:
        """Measure and judge one committed stage."""
        return self.judge([self.measure(check)])[0]

    def measure(self, check: StageCheck) -> MeasuredCheck:
        """The Spark side of one committed stage's check (Maintenance calls this after each
        commit, and :meth:`judge` when it records the stage)."""
        if check.stage not in STAGE_GUARANTEES or check.stage == "validate":
            raise ArgumentError(f"StageCheck.stage: {check.stage!r} is not a maintenance stage; "
                                "stages: compact, retain, delete_records, vacuum")
        if check.stage == "vacuum":
            return self._check_vacuum(check)
        log = check.log
        state_before = check.state_before
        state_after = log.states_at([check.version_after])[check.version_after]
        start = dirty_from(check.stage, state_before)
        counted = self._counted_by_arrow(check, state_after)
        if counted is not None:
            return counted
        scoped = worth_scoping(start, state_before)
        # Both versions are read from the files their checksums list when they can be (a
        # time-travel read through Delta rebuilds the version's state at every query);
        # Parquet's own statistics skip what the scoped check's bounds filter out.
        before = check.before() if check.before is not None else log.read_files(check.version_before)
        after = log.read_files(check.version_after)

        def scope_of(bounds: dict) -> Scope:
            return stage_scope(check, state_before, state_after, bounds)

        if scoped:
            with planned_up_front(log.spark):
                changes = change_scope(log, before, check.version_before, check.version_after, start,
                                       state_after.log_start_offset)
                if changes is not None:  # else Delta did not record the change: pair whole versions
                    try:
                        return self._compare(log, check.stage, before, after, state_after, scope_of, check.now_ms,
                                             run_spec_expectations=True, changes=changes,
                                             expected=expected_bounds(check), after_version=check.version_after)
                    finally:
                        changes.release()
        return self._compare(log, check.stage, before, after, state_after, scope_of, check.now_ms,
                             run_spec_expectations=True, one_task=_small(state_before, state_after),
                             expected=expected_bounds(check), after_version=check.version_after)

    def _counted_by_arrow(self, check: StageCheck, state_after: LogState) -> MeasuredCheck | None:
        """A compaction or small retention check counted by Arrow in the driver (``arrow_scope``),
        when it can be and is clean; else None, and Spark counts (and shows the offending rows).
        A small partition's check costs about 15 ms here against 0.6 s for Spark's queries
        (stop 101)."""
        log, stage = check.log, check.stage
        found = arrow_scope.counted(check, state_after)
        if found is None or found[0]:
            return None
        _, data_bounds, scope = found
        measured = _measured(log, stage, scope, {}, {}, _context(stage, scope, data_bounds, check.now_ms))
        return (replace(measured, spec_outcome=self._spec_suite(log, stage, lambda: log.read_files(check.version_after),
                                                                check.version_after))
                if log.spec.expectations else measured)

    def batchable(self, check: StageCheck, peers: int) -> bool:
        """Whether ``check`` may wait to be measured with others (:meth:`measure_many`): it
        can be counted in a batch, and enough others may be (fewer cost more together, and
        a check that waits is measured by the caller's thread, not beside other partitions)."""
        return peers >= batched.MIN_BATCH and batched.batchable(check)

    def measure_many(self, checks: Sequence[StageCheck]) -> list[MeasuredCheck]:
        """:meth:`measure` of each of ``checks``: the checks Arrow counts clean in the
        driver, then the small compactions and retentions left counted in one Spark job a
        topic and stage (``framework.checks.batched``), the rest, and any the batch did not
        find clean (or all, if the batch could not run), one by one; raises the first error
        of those."""
        # in this session (the caller's thread), not the cleaner thread's that committed the stage
        checks = [replace(check, log=PartitionLog(self.spark, check.log.warehouse, check.log.spec, check.log.partition))
                  for check in checks]
        # every check's after state, read once: Arrow's count and the batch both judge by it
        after = {id(check): check.log.states_at([check.version_after])[check.version_after] for check in checks}
        # the checks Arrow counts clean need no Spark job; the rest are counted together
        measured: list[MeasuredCheck | None] = [self._counted_by_arrow(check, after[id(check)]) for check in checks]
        rest = [index for index, done in enumerate(measured) if done is None]
        try:
            with small_partition_settings(self.spark, 0):
                found = batched.count(self.spark, [checks[index] for index in rest],
                                      lambda check: after[id(check)]) if rest else []
        except Exception:  # noqa: BLE001 - a batch that cannot run: each check alone says why
            found = [None] * len(rest)
        for index, clean in zip(rest, found, strict=True):
            check = checks[index]
            if clean is not None:
                measured[index] = _measured(check.log, check.stage, clean.scope, {}, {},
                                            _context(check.stage, clean.scope, clean.bounds, check.now_ms))
        for index, check in enumerate(checks):
            if measured[index] is None:
                span = max(check.state_before.offset_span, check.state_after.offset_span)
                with small_partition_settings(self.spark, span):
                    measured[index] = self.measure(check)
        return measured

    def validate(self, log: PartitionLog, now_ms: int, from_version: int | None = None,
                 to_version: int | None = None) -> ValidationOutcome:
        """``topiclake validate``: the invariants of ``to_version`` (default: the latest) and,
        against ``from_version`` (default: the version the last maintenance run left, else
        0), that nothing but appends happened in between."""
        return self.validate_many([log], now_ms, from_version, to_version)[0]

    def validate_many(self, logs: Sequence[PartitionLog], now_ms: int, from_version: int | None = None,
                      to_version: int | None = None) -> list[ValidationOutcome]:
        """:meth:`validate` of each of ``logs``, with the last runs' versions read once a topic,
        a small local partition counted by Arrow (:meth:`_validated_by_arrow`), the rest of a
        topic's small partitions counted together (``batched.count_validations``: two
        Spark jobs, where each partition alone cost about 1.3 s), the rest one by one, and
        the verdicts judged together (one Great Expectations validation a topic). Every
        partition's versions are resolved first, so a bad ``--from-version`` or
        ``--to-version`` is refused before any Spark job; each partition is dropped from
        Delta's cache once done with (a few MB of heap for a large one)."""
        from framework.log.delta_transactions import forget_table
        from framework.log.history import MaintenanceHistory

        if not logs:
            return []
        history = MaintenanceHistory(self.spark, self.warehouse)
        last_runs: dict[str, dict] = {}
        planned = []
        for log in logs:
            if from_version is None and log.spec.topic not in last_runs:
                last_runs[log.spec.topic] = history.last_runs(log.spec.topic)
            last = last_runs.get(log.spec.topic, {}).get(log.partition)
            try:
                planned.append(validation_plan.planned(log, now_ms, from_version, to_version,
                                                       None if last is None else last["version_after"]))
            finally:
                forget_table(self.spark, log.path)
        # the partitions Arrow counts clean need no Spark job; the rest are counted together
        measured: list[MeasuredCheck | None] = [self._validated_by_arrow(check) for check in planned]
        rest = [check for check, done in zip(planned, measured, strict=True) if done is None]
        try:
            with small_partition_settings(self.spark, 0):
                found = iter(batched.count_validations(self.spark, rest) if rest else [])
        except Exception:  # noqa: BLE001 - a batch that cannot run: each partition alone says why
            found = iter([None] * len(rest))
        for index, check in enumerate(planned):
            if measured[index] is not None:
                continue
            clean = next(found)
            try:
                measured[index] = (self._measured_validation(check) if clean is None
                                   else self._clean_validation(check, clean.scope, clean.bounds))
            finally:
                forget_table(self.spark, check.log.path)
        return self.judge(measured)

    def _validated_by_arrow(self, check: ValidateCheck) -> MeasuredCheck | None:
        """A small local partition's validation counted by Arrow in the driver
        (``arrow_whole.validated``), when it can be and is clean; else None, and Spark counts
        (and shows the offending rows)."""
        found = arrow_whole.validated(check)
        return None if found is None or found[0] else self._clean_validation(check, found[2], found[1])

    def _clean_validation(self, check: ValidateCheck, scope: Scope, data_bounds: dict) -> MeasuredCheck:
        """A partition counted clean (by Arrow, or in the batch); the spec's own expectations,
        which judge its records, run over them here, as alone."""
        log = check.log
        measured = replace(_measured(log, "validate", scope, {}, {},
                                     _context("validate", scope, data_bounds, check.now_ms)), notes=check.notes)
        if not log.spec.expectations:
            return measured
        return replace(measured, spec_outcome=self._spec_suite(log, "validate", lambda: log.read(check.version_after),
                                                               check.version_after))

    def _measured_validation(self, check: ValidateCheck) -> MeasuredCheck:
        """One partition's validation measured on its own, both versions read through Delta."""
        log = check.log
        after = log.read(check.version_after)
        before = after if check.version_before == check.version_after else log.read(check.version_before)

        def scope_of(bounds: dict) -> Scope:
            return validate_scope(check.now_ms, check.version_before, check.version_after, check.state_before,
                                  check.state_after, bounds, appends_only=check.appends_only)

        measured = self._compare(log, "validate", before, after, check.state_after, scope_of, check.now_ms,
                                 run_spec_expectations=True, one_task=_small(check.state_before, check.state_after),
                                 after_version=check.version_after)
        return replace(measured, notes=check.notes)

    def judge(self, measured: Sequence[MeasuredCheck]) -> list[ValidationOutcome]:
        """Great Expectations' verdicts on checks measured, in their order: one validation
        per topic, over one metrics row per check."""
        outcomes: list[ValidationOutcome] = [ValidationOutcome(True)] * len(measured)
        by_topic: dict[str, list[int]] = defaultdict(list)
        for index, item in enumerate(measured):
            by_topic[item.topic].append(index)
        for topic, indexes in by_topic.items():
            items = [measured[i] for i in indexes]
            result = self.project.run(
                definition=f"topiclake.{topic}.guarantees",
                suite_name=f"topiclake.{topic}.guarantees",
                expectations=gx_suites.guarantee_expectations(),
                asset=f"{topic}.guarantees",
                frame=gx_suites.metrics_frame([(item.counts, item.checked, item.context) for item in items]),
                # which rows failed: COMPLETE lists them; one row is the row (BASIC computes
                # fewer metrics: 0.10 s a validation against 0.15 s, stop 99)
                result_format="COMPLETE" if len(items) > 1 else "BASIC",
                datasource=gx_suites.METRICS_DATASOURCE,
                keep=gx_project.RESULTS_KEPT,
            )
            for index, item, failed in zip(indexes, items, gx_suites.failed_rows(result, len(items))):
                outcomes[index] = _outcome(item, failed)
        return outcomes

    # --------------------------------------------------------------- the work
    def _compare(self, log: PartitionLog, stage: str, before, after, state_after: LogState, scope_of,
                 now_ms: int, run_spec_expectations: bool, changes: ChangeScope | None = None,
                 one_task: bool = False, expected: dict | None = None,
                 after_version: int | None = None) -> MeasuredCheck:
        """Pair the two versions (only what ``changes`` leaves in scope, when given) and count
        the violations; ``one_task``: both versions are small, pair them in one Spark partition.

        ``expected``: the bounds a correct stage leaves (``scope.expected_bounds``). The
        violations under the scope they give and the data's own bounds are then counted in
        one Spark job; only if the data's bounds give another scope are the violations
        counted again, under that one."""
        config = log.spec.config
        checked = STAGE_GUARANTEES[stage]
        start = state_after.log_start_offset
        if changes is None:
            pairs = rules.pairing(before, after, config, one_task=one_task).persist()
        else:
            pairs = rules.paired(changes.sides(after, lambda records, side: rules.narrow(records, side, config)),
                                 counted=True).persist()
        key_type = log.spec.key_type
        try:
            if changes is None:
                aggregates = bounds.bounds_aggregates(config, now_ms, start)
            else:
                young = uncleanable_after_ms(now_ms, config)
                young_from = changes.dirty_from if changes.holds_every_record_newer_than(young) else None
                outside = bounds.scoped_numbers(before, after, config, now_ms, start, retention=stage != "compact",
                                               records=changes.records, young_from=young_from)
                aggregates = bounds.scoped_aggregates(config, now_ms, start, young_from)
            guessed = None  # the scope the violations were counted under with the bounds, if they were
            if expected is not None:
                guessed = scope_of(expected)
                counts, samples, numbers = bounds.summary_and_bounds(
                    rules.violations(pairs, guessed, config, key_type, checked), pairs, aggregates)
            else:
                numbers = bounds.bounds(pairs, aggregates)
            data_bounds = (bounds.finished_bounds(numbers) if changes is None
                           else bounds.scoped_finished(outside, numbers))
            scope = scope_of(data_bounds)
            if scope != guessed:  # not counted yet, or under a scope the data's bounds contradict
                counts, samples = rules.summary(rules.violations(pairs, scope, config, key_type, checked))
            measured = _measured(log, stage, scope, counts, samples, _context(stage, scope, data_bounds, now_ms))
        finally:
            pairs.unpersist()
        if run_spec_expectations and log.spec.expectations:
            return replace(measured, spec_outcome=self._spec_suite(log, stage, after, after_version))
        return measured

    def _check_vacuum(self, check: StageCheck) -> MeasuredCheck:
        import time

        from framework.stages.vacuum import oldest_readable_version

        log = check.log
        window = check.window_ms if check.window_ms is not None else log.spec.config.time_travel_retention_ms
        due = versions_to_read(check, oldest_readable_version(log, window, int(time.time() * 1000)))
        rows = [("G9", None, None, f"version {version} ({why}) cannot be read: {problem}")
                for version, why, problem in unreadable(log, due)]
        # driver-side rows, through Arrow; none: nothing to count, no Spark job
        counted = rules.summary(local_frame(self.spark, rows, VIOLATIONS_SCHEMA)) if rows else ({}, {})
        context = {"stage": "vacuum", "version_before": check.version_before, "version_after": check.version_after,
                   "now_ms": check.now_ms, "oldest_window_version": check.oldest_window_version}
        scope = Scope("vacuum", check.now_ms, check.version_before, check.version_after, 0, 0, 0, 0)
        return _measured(log, "vacuum", scope, *counted, context)

    def _spec_suite(self, log: PartitionLog, stage: str, after, version: int | None = None) -> ValidationOutcome:
        """The spec's own expectations over the after version's user columns: in pandas where
        they can be (``pandas_expectations.frame_for``), else over ``after`` (a DataFrame, or
        a callable that gives one)."""
        frame, datasource = pandas_expectations.frame_for(log.spec, log.path, version, after)
        result = self.project.run(
            definition=f"topiclake.{log.name}.{stage}.expectations",
            suite_name=f"topiclake.{log.spec.topic}.expectations",
            expectations=gx_suites.spec_expectations(log.spec),
            asset=f"{log.spec.topic}.records",
            frame=frame,
            result_format="SUMMARY",
            datasource=datasource,
            keep=gx_project.results_kept(log.spec.partitions),
        )
        failed: list[str] = []
        details: list[str] = []
        for item in result.results:
            if item.success:
                continue
            config = item.expectation_config
            name = f"spec expectation {config.type}"
            if name not in failed:
                failed.append(name)
            kwargs = {k: v for k, v in config.kwargs.items() if k != "batch_id"}  # GE's own, not the spec's
            details.append(f"{name} {kwargs}: {gx_suites.observed(item)}")
        return ValidationOutcome(passed=not failed, failed_guarantees=tuple(failed), details=tuple(details))

def _context(stage: str, scope: Scope, bounds: dict, now_ms: int) -> dict:
    """What a check's metrics row carries beside its counts."""
    return {"stage": stage, "version_before": scope.version_before, "version_after": scope.version_after,
            "now_ms": now_ms, "records_before": bounds["records_before"], "records_after": bounds["records_after"],
            "removed_records": bounds["removed"], "checkpoint_after": scope.checkpoint_after,
            "log_start_after": scope.log_start_after, "first_uncleanable_offset": bounds["u_before"]}


def _measured(log: PartitionLog, stage: str, scope: Scope, counts: dict[str, int], samples: dict[str, list],
              context: dict) -> MeasuredCheck:
    """A check's violations counted, with what its verdict will say."""
    return MeasuredCheck(topic=log.spec.topic, table=log.name, stage=stage,
                         version_before=scope.version_before, version_after=scope.version_after,
                         checked=tuple(STAGE_GUARANTEES[stage]), counts=counts, samples=samples,
                         context={"partition": log.partition, **context})


def _outcome(item: MeasuredCheck, failed: Sequence[str]) -> ValidationOutcome:
    """A check's verdict: the guarantees Great Expectations failed it on, and the violations
    that explain them."""
    details: list[str] = list(item.notes)
    for name in failed:
        code = name.split()[0]
        details.append(f"{name}: {item.counts.get(code, 'some')} violation(s) in {item.table}, "
                       f"versions {item.version_before} -> {item.version_after}")
        for row in item.samples.get(code, []):
            where = [] if row["offset"] is None else [f"offset {row['offset']}"]
            if row["key"] is not None:
                where.append(f"key {row['key']!r}")
            details.append(f"  {', '.join(where) + ': ' if where else ''}{row['detail']}")
    outcome = ValidationOutcome(passed=not failed, failed_guarantees=tuple(failed), details=tuple(details))
    return outcome if item.spec_outcome is None else outcome.merged(item.spec_outcome)
