"""The few numbers a check's scope is made of (``framework.checks.scope``), from the pairing
of two versions (``framework.checks.rules``): the first uncleanable offset recomputed from
the data, the time-retention boundary, the highest removed offset and its size, the bytes
kept, the records before and after.

When whole versions are paired, one aggregate over the pairing gives them all
(:func:`bounds_aggregates`). When the pairing holds only the change
(``framework.checks.changes``), it gives what was removed or added, and U when every young
record is in it (:func:`scoped_aggregates`); what needs every record is read where file
statistics point (:func:`scoped_numbers`). Either way, when the stage says what the bounds
should be, the aggregate rides along with the violations counted under the scope those
give (:func:`summary_and_bounds`): one Spark job, not two, unless the data's bounds give
another scope.
"""

from __future__ import annotations

import json
from typing import Sequence

from framework.checks import rules
from framework.cleaner.rules import uncleanable_after_ms
from framework.cleaner.spark_sql import newer_than_sql
from framework.spec import TopicConfig

__all__ = ["BOUNDS_ROW", "bounds", "bounds_aggregates", "bounds_as_json", "bounds_from_json", "finished_bounds",
           "scoped_aggregates", "scoped_finished", "scoped_numbers", "summary_and_bounds"]


def _first_young(present: str, ts: str, config: TopicConfig, now_ms: int) -> str:
    """U recomputed from the data: the smallest offset newer than now - min lag."""
    return f"min(CASE WHEN {present} AND {ts} > {uncleanable_after_ms(now_ms, config)} THEN `offset` END)"


def _time_boundary(present: str, ts: str, config: TopicConfig, now_ms: int) -> str:
    """Time retention removes every record below the first one young enough to stay."""
    if config.delete and config.retention_ms >= 0:
        return f"min(CASE WHEN {present} AND {ts} >= {now_ms - config.retention_ms} THEN `offset` END)"
    return "CAST(NULL AS BIGINT)"


_CHANGE_AGGREGATES = (  # (name, aggregate)
    ("highest_removed", "max(CASE WHEN nb > 0 AND na = 0 THEN named_struct('offset', `offset`, 'size', size_b) END)"),
    ("removed", "count(CASE WHEN nb > 0 AND na = 0 THEN 1 END)"),
    ("added", "count(CASE WHEN na > 0 AND nb = 0 THEN 1 END)"),
)


def finished_bounds(bounds: dict) -> dict:
    """The bounds as the scope reads them: the highest removed record's offset and size apart."""
    highest = bounds.pop("highest_removed")
    bounds["highest_removed"] = None if highest is None else highest["offset"]
    bounds["highest_removed_size"] = 0 if highest is None else (highest["size"] or 0)
    return bounds


def bounds_aggregates(config: TopicConfig, now_ms: int, log_start_after: int | str) -> list[tuple[str, str]]:
    """(name, aggregate) of the bounds over the pairing of whole versions (``log_start_after``:
    a number, or the column that holds each partition's in a batch)."""
    return [
        ("u_before", _first_young('nb > 0', 'ts_b', config, now_ms)),
        ("u_after", _first_young('na > 0', 'ts_a', config, now_ms)),
        ("time_boundary", _time_boundary('nb > 0', 'ts_b', config, now_ms)),
        ("kept_bytes",
         f"coalesce(sum(CASE WHEN nb > 0 AND na > 0 AND `offset` >= {log_start_after} THEN size_b END), 0)"),
        ("records_before", "count(CASE WHEN nb > 0 THEN 1 END)"),
        ("records_after", "count(CASE WHEN na > 0 THEN 1 END)"),
        *_CHANGE_AGGREGATES,
    ]


def bounds(pairs, aggregates: Sequence[tuple[str, str]]) -> dict:
    """The ``aggregates`` (name, SQL) over the pairing, in one Spark job of their own (the
    numbers as written; :func:`finished_bounds` or :func:`scoped_finished` shape them)."""
    as_json, names = _as_json(aggregates)
    return _from_json(pairs.selectExpr(f"{as_json} AS numbers").collect()[0]["numbers"], names)


#: The guarantee column of the row that carries the bounds in :func:`summary_and_bounds`
#: (and in a batch's counts, ``framework.checks.batched``).
BOUNDS_ROW = "bounds"


def summary_and_bounds(violations, pairs, aggregates: Sequence[tuple[str, str]]) -> tuple:
    """:func:`summary` of ``violations`` and :func:`bounds` of ``pairs`` in one Spark job: the
    bounds ride along as one more row of the violations, a JSON object."""
    as_json, names = _as_json(aggregates)
    row = pairs.selectExpr(f"'{BOUNDS_ROW}' AS guarantee", "CAST(NULL AS BIGINT) AS `offset`",
                           "CAST(NULL AS STRING) AS key", f"{as_json} AS detail")
    counts, samples = rules.summary(violations.unionByName(row))
    del counts[BOUNDS_ROW]
    return counts, samples, _from_json(samples.pop(BOUNDS_ROW)[0]["detail"], names)


def _as_json(aggregates: Sequence[tuple[str, str]]) -> tuple[str, list[str]]:
    return ("to_json(named_struct(" + ", ".join(f"'{name}', {sql}" for name, sql in aggregates) + "))",
            [name for name, _ in aggregates])


def _from_json(detail: str, names: list[str]) -> dict:
    numbers = json.loads(detail)  # (to_json leaves out the NULLs)
    return {name: numbers.get(name) for name in names}


def bounds_as_json(config: TopicConfig, now_ms: int, log_start_after: int | str) -> tuple[str, list[str]]:
    """The bounds of whole versions as one aggregate, a JSON object (to ride along as a row
    of another), and their names."""
    return _as_json(bounds_aggregates(config, now_ms, log_start_after))


def bounds_from_json(detail: str, names: list[str]) -> dict:
    return finished_bounds(_from_json(detail, names))


def _first_offset_from(frame, ms: int):
    """The smallest offset whose timestamp is newer than ``ms`` (Delta skips older files)."""
    from pyspark.sql import functions as F

    return frame.where(newer_than_sql(ms)).agg(F.min("offset").alias("u")).collect()[0]["u"]


def scoped_aggregates(config: TopicConfig, now_ms: int, log_start_after: int,
                      young_from: int | None = None) -> list[tuple[str, str]]:
    """(name, aggregate) of the bounds a stage check takes from the pairing when it holds
    only the change (``framework.checks.changes``): what was removed or added, the bytes
    removed from the log start on and, when ``young_from`` says the pairing holds every
    before record at or above that offset and none below it is young
    (``ChangeScope.holds_every_record_newer_than``), U. :func:`scoped_numbers` reads the rest."""
    young = [] if young_from is None else [
        ("u_before", _first_young(f"nb > 0 AND `offset` >= {int(young_from)}", "ts_b", config, now_ms))]
    return [*_CHANGE_AGGREGATES, *young,
            ("removed_from_start",
             f"coalesce(sum(CASE WHEN nb > 0 AND na = 0 AND `offset` >= {log_start_after} THEN size_b END), 0)")]


def scoped_numbers(before, after, config: TopicConfig, now_ms: int, log_start_after: int, retention: bool,
                   records: tuple[int | None, int | None] = (None, None), young_from: int | None = None) -> dict:
    """The numbers a stage check needs from outside the pairing when it holds only the
    change, read where file statistics point (Parquet's row groups, or Delta's files when
    the version is read through Delta): the counts from the statistics themselves
    (``records``, before and after, when the caller has them from Delta's file statistics);
    U from the before version's files young enough, unless the pairing gives it
    (``young_from``); what only retention is judged by (the time boundary, the bytes from
    the log start on) only for a retention stage."""
    from pyspark.sql import functions as F

    numbers = {
        "records_before": before.count() if records[0] is None else records[0],
        "records_after": after.count() if records[1] is None else records[1],
        "time_boundary": None, "from_start": None,
    }
    if young_from is None:
        numbers["u_before"] = _first_offset_from(before, uncleanable_after_ms(now_ms, config))
    if retention:
        if config.delete and config.retention_ms >= 0:
            # Time retention keeps every record from the first one at most retention.ms old.
            numbers["time_boundary"] = _first_offset_from(before, now_ms - config.retention_ms - 1)
        from_start = before.where(F.col("offset") >= log_start_after).agg(F.sum("_size"))
        numbers["from_start"] = from_start.collect()[0][0] or 0
    return numbers


def scoped_finished(numbers: dict, changed: dict) -> dict:
    """The bounds of a scoped check from :func:`scoped_numbers` and the pairing's
    :func:`scoped_aggregates`: the bytes kept are those from the log start on, less what
    the stage removed there."""
    outside, paired = dict(numbers), dict(changed)
    from_start, removed = outside.pop("from_start"), paired.pop("removed_from_start") or 0
    outside["kept_bytes"] = 0 if from_start is None else from_start - removed
    return finished_bounds({**outside, **paired})
