"""Many small partitions' compaction and retention checks counted in one Spark job.

A small partition's check is a few Spark queries over a few hundred records, so what it
costs is Spark planning and running them: about 0.25 s a partition on two cores, as much
as its stage. The rules of a stage are the same for every partition of a topic; only the
numbers they judge by differ (the log end, the checkpoint, where the head starts). So a
batch reads the before and after versions of all its partitions in one scan (the files
their checksums list, each row told apart by ``_check``: its place in the batch, and its
side), pairs them per partition, and judges each row by its own partition's numbers,
joined in as columns (:func:`framework.checks.rules.violations` with ``scopes``). One
Spark job then counts every partition's violations and bounds.

What the batch decides is only that a check is clean: no violation under the scope the
stage's own numbers give (``scope.expected_bounds``), and the data's bounds give that
same scope. Any other check is measured again on its own (``Guarantees.measure``), which
gives its samples, its details and its verdict exactly as before; so the batch can only
save work, never change a verdict (``tests/test_guarantees.py`` pins the two together on
every corruption the suite makes).

``topiclake validate`` batches the same way (:func:`count_validations`): each partition's
current version against the one its last maintenance run left. Its scope takes U from the
after version's data (G6 judges the records below it), so a batch runs two jobs: the
bounds of every partition, then the violations under the scopes they give.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Callable, Sequence

from framework.checks import rules
from framework.checks.bounds import BOUNDS_ROW, bounds_as_json, bounds_from_json
from framework.checks.catalogue import STAGE_GUARANTEES
from framework.checks.scope import Scope, expected_bounds, stage_scope, validate_scope
from framework.local_rows import local_frame
from framework.log import version_checksum
from framework.log.log_state import LogState
from framework.log.small_partitions import is_small
from framework.stages.stage_check import StageCheck, ValidateCheck

__all__ = ["CHECK", "MIN_BATCH", "BatchedCheck", "batchable", "count", "count_validations"]

#: The fewest checks worth a batch: one costs about 0.55 s against 0.3 s alone, two about
#: what they cost alone, four about 0.55 x (2026-11-30, docs/performance-log.md).
MIN_BATCH = 3
#: The column that tells a batch's partitions apart: each check's place in the batch.
CHECK = "_check"
#: The numbers a stage's scope gives each partition, as columns of the batch's rows (a
#: retention's scope has no head and no max-lag end; whether its removals at or above the
#: smallest committed offset are explained is not a column: the batch judges them
#: explained, as a correct stage leaves them, and a check whose data say otherwise is
#: measured alone; validate's max-lag end is last, the one its data's bounds give).
_SCOPE_FIELDS = {
    "compact": ("version_before", "version_after", "log_end_before", "log_end_after", "log_start_after",
                "checkpoint_after", "head_start", "max_lag_end"),
    "retain": ("version_before", "version_after", "log_end_before", "log_end_after", "log_start_after",
               "checkpoint_after"),
    "validate": ("version_before", "version_after", "log_end_before", "log_end_after", "log_start_after",
                 "checkpoint_after", "max_lag_end"),
}


def _column(field: str) -> str:
    return f"_s_{field}"


def batchable(check: StageCheck) -> bool:
    """Whether ``check`` can be counted in a batch: a compaction or retention of a small
    partition whose before and after versions are the files their checksums list (no
    deletion vectors), with no spec expectations of its own to run over its records."""
    return _eligible(check) and _files(check) is not None


def _eligible(check: StageCheck) -> bool:
    """:func:`batchable`'s part that reads nothing."""
    return (check.stage in _SCOPE_FIELDS and check.before is None and not check.log.spec.expectations
            and is_small(max(check.state_before.offset_span, check.state_after.offset_span)))


def _files(check: StageCheck | ValidateCheck) -> tuple | None:
    """The before and after versions' files, when both are plain files of one schema."""
    before = version_checksum.plain_files(check.log.path, check.version_before)
    after = version_checksum.plain_files(check.log.path, check.version_after)
    if before is None or after is None or before.schema_json != after.schema_json:
        return None
    return before, after


@dataclass(frozen=True)
class BatchedCheck:
    """A check the batch found clean: the scope it was judged by and the data's bounds."""

    scope: Scope
    bounds: dict


def count(spark, checks: Sequence[StageCheck],
          state_after: Callable[[StageCheck], LogState]) -> list[BatchedCheck | None]:
    """For each of ``checks``, a :class:`BatchedCheck` when a batch found it clean, else None
    (measure it on its own). Checks of one topic, stage, schema and ``now`` that are
    :func:`batchable` share a job, when they are at least :data:`MIN_BATCH`;
    ``state_after`` gives a check's after version's state, read only for those."""
    found: list[BatchedCheck | None] = [None] * len(checks)
    if len(checks) < MIN_BATCH:
        return found
    files, groups = _grouped(checks, lambda check: _files(check) if _eligible(check) else None,
                             lambda check, listed: (check.log.spec.topic, check.stage, check.now_ms,
                                                    listed[1].schema_json))
    for (_, stage, now_ms, schema_json), indexes in groups.items():
        if len(indexes) < MIN_BATCH:
            continue  # measured alone
        states = {i: state_after(checks[i]) for i in indexes}
        guessed = {i: stage_scope(checks[i], checks[i].state_before, states[i], expected_bounds(checks[i]))
                   for i in indexes}
        counted = _count_group(spark, [checks[i] for i in indexes], [files[i] for i in indexes],
                               [guessed[i] for i in indexes], stage, now_ms, schema_json)
        for position, index in enumerate(indexes):
            if position not in counted:
                continue
            counts, bounds = counted[position]
            check = checks[index]
            scope = stage_scope(check, check.state_before, states[index], bounds)
            if not counts and scope == guessed[index]:
                found[index] = BatchedCheck(scope, bounds)
    return found


def _grouped(items: Sequence, files_of: Callable, key_of: Callable) -> tuple[dict[int, tuple], dict[tuple, list[int]]]:
    """Each item's two versions' files where a batch can read them (``files_of``), by place,
    and those items grouped by ``key_of(item, files)``: a group's items share a job."""
    files: dict[int, tuple] = {}
    groups: dict[tuple, list[int]] = {}
    for index, item in enumerate(items):
        listed = files_of(item)
        if listed is not None:
            files[index] = listed
            groups.setdefault(key_of(item, listed), []).append(index)
    return files, groups


def _count_group(spark, checks: Sequence[StageCheck], files: Sequence[tuple], scopes: Sequence[Scope], stage: str,
                 now_ms: int, schema_json: str) -> dict:
    """:func:`_counts_and_bounds` of one group, by each check's place in it."""
    log = checks[0].log
    pairs = _paired(spark, files, log.spec.config, schema_json)
    if pairs is None:
        return {}
    return _counted(spark, pairs, list(enumerate(scopes)), stage, now_ms, log.spec.config, log.spec.key_type)


def _paired(spark, files: Sequence[tuple], config, schema_json: str):
    """Every member's before and after versions read in one scan and paired per member
    (:data:`CHECK`: its place in the group); None when no version holds a file."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    # which member and side each file's rows belong to (a file both versions list: both); by
    # file name, which Delta makes unique (a UUID in each data file's name)
    placed = [(os.path.basename(path), position, side)
              for position, (before, after) in enumerate(files)
              for side, listed in (("b", before), ("a", after)) for path in listed.paths]
    paths = sorted({path for before, after in files for listed in (before, after) for path in listed.paths})
    if not paths:
        return None
    schema = StructType.fromJson(json.loads(schema_json))
    # driver-side rows through Arrow (no Python worker to start: framework/local_rows.py)
    sides = local_frame(spark, placed, f"_file STRING, {CHECK} INT, _side STRING")
    records = (spark.read.schema(schema).parquet(*paths).selectExpr("*", "_metadata.file_name AS _file")
               .join(F.broadcast(sides), "_file"))
    by = (CHECK,)
    both = rules.narrow(records.where("_side = 'b'"), "b", config, by).unionByName(
        rules.narrow(records.where("_side = 'a'"), "a", config, by))
    return rules.paired(both, one_task=True, by=by)


def _numbers(spark, scopes: Sequence[tuple[int, Scope]], fields: Sequence[str]):
    """Each member's scope (by its place in the group) as one row of columns (:func:`_column`)."""
    from pyspark.sql import functions as F

    return F.broadcast(local_frame(
        spark, [(place, *(int(getattr(scope, field)) for field in fields)) for place, scope in scopes],
        ", ".join([f"{CHECK} INT", *(f"{_column(field)} BIGINT" for field in fields)])))


def _counted(spark, pairs, scopes: Sequence[tuple[int, Scope]], mode: str, now_ms: int, config,
             key_type: str) -> dict:
    """The violations of each member under its own scope (by its place), and its bounds, in
    one Spark job; a member with no scope here is left out."""
    fields = _SCOPE_FIELDS[mode]
    numbers = _numbers(spark, scopes, fields)
    by_row = Scope(mode=mode, now_ms=now_ms, appends_only=scopes[0][1].appends_only,
                   **{field: _column(field) for field in fields})
    found = rules.violations(pairs, by_row, config, key_type, STAGE_GUARANTEES[mode], by=(CHECK,), scopes=numbers)
    return _counts_and_bounds(found, pairs, config, now_ms, numbers, CHECK, _column("log_start_after"))


def count_validations(spark, validations: Sequence[ValidateCheck]) -> list[BatchedCheck | None]:
    """For each of ``validations``, a :class:`BatchedCheck` when a batch found it clean, else
    None (measure it on its own): as :func:`count`, for ``topiclake validate``. Its
    scope's U comes from the data, so each group is two Spark jobs: the bounds, then the
    violations under the scopes they give."""
    found: list[BatchedCheck | None] = [None] * len(validations)
    if len(validations) < MIN_BATCH:
        return found
    files, groups = _grouped(validations, _validated_files,
                             lambda validation, listed: (validation.log.spec.topic, validation.now_ms,
                                                         validation.appends_only, listed[1].schema_json))
    for (_, now_ms, _, schema_json), indexes in groups.items():
        if len(indexes) < MIN_BATCH:
            continue
        members = [validations[i] for i in indexes]
        log = members[0].log
        pairs = _paired(spark, [files[i] for i in indexes], log.spec.config, schema_json)
        if pairs is None:
            continue
        fields = _SCOPE_FIELDS["validate"][:-1]  # all but U's, which the bounds give
        unbounded = [(place, _validate_scope(member, {"u_after": None})) for place, member in enumerate(members)]
        bounds = _bounds(pairs, log.spec.config, now_ms, _numbers(spark, unbounded, fields), CHECK,
                         _column("log_start_after"))
        scopes = [(place, _validate_scope(members[place], numbers)) for place, numbers in sorted(bounds.items())]
        if len(scopes) < MIN_BATCH:
            continue
        counted = _counted(spark, pairs, scopes, "validate", now_ms, log.spec.config, log.spec.key_type)
        for place, scope in scopes:
            counts, numbers = counted.get(place, (None, None))
            if counts == {} and numbers == bounds[place]:
                found[indexes[place]] = BatchedCheck(scope, numbers)
    return found


def _validate_scope(validation: ValidateCheck, bounds: dict) -> Scope:
    return validate_scope(validation.now_ms, validation.version_before, validation.version_after,
                          validation.state_before, validation.state_after, bounds, validation.appends_only)


def _validated_files(validation: ValidateCheck) -> tuple | None:
    """The two versions' files, when a batch can read them: a small partition, both versions
    plain files of one schema, every file there. (Its spec's own expectations, if any, judge
    its records afterwards, partition by partition: ``Guarantees.validate_many``.)"""
    if not is_small(max(validation.state_before.offset_span, validation.state_after.offset_span)):
        return None
    listed = _files(validation)
    if listed is None or not all(os.path.isfile(path) for files in listed for path in files.paths):
        return None  # (a vacuum took a file the older version lists: Delta's read says so, alone)
    return listed


def _bounds(pairs, config, now_ms: int, scopes, by: str, log_start_after: str) -> dict:
    """The bounds of each value of ``by``, in one Spark job."""
    frame, names = _bounds_frame(pairs, config, now_ms, scopes, by, log_start_after)
    return {row[by]: bounds_from_json(row["detail"], names) for row in frame.collect()}


def _bounds_frame(pairs, config, now_ms: int, scopes, by: str, log_start_after: str) -> tuple:
    """The bounds of each value of ``by`` as a JSON ``detail`` (``log_start_after``: the
    column of ``scopes`` that holds each one's own), and their names."""
    from pyspark.sql import functions as F

    as_json, names = bounds_as_json(config, now_ms, log_start_after)
    return pairs.join(scopes, by).groupBy(by).agg(F.expr(as_json).alias("detail")), names


def _counts_and_bounds(violations, pairs, config, now_ms: int, scopes, by: str, log_start_after: str) -> dict:
    """:func:`bounds.summary_and_bounds` of a batch of partitions, in one Spark job: for each
    value of ``by``, the violations counted per guarantee and the bounds. No samples: a
    partition with a violation is measured again on its own, for them."""
    from pyspark.sql import functions as F

    bounds, names = _bounds_frame(pairs, config, now_ms, scopes, by, log_start_after)
    counted = violations.groupBy(by, "guarantee").agg(F.expr("count(*)").alias("n"))
    rows = counted.selectExpr(by, "guarantee", "n", "CAST(NULL AS STRING) AS detail").unionByName(
        bounds.selectExpr(by, f"'{BOUNDS_ROW}' AS guarantee", "CAST(NULL AS BIGINT) AS n", "detail")).collect()
    found: dict = {}
    for row in rows:
        counts, numbers = found.setdefault(row[by], ({}, {}))
        if row["guarantee"] == BOUNDS_ROW:
            numbers.update(bounds_from_json(row["detail"], names))
        else:
            counts[row["guarantee"]] = row["n"]
    return {key: (counts, numbers) for key, (counts, numbers) in found.items() if numbers}
