"""The report's data: the maintenance history read and folded into one point per partition and run.

Only the history table is read (one row per partition, stage and run: small), plus each
partition table's dirty-ratio threshold from its properties. Everything here is plain
data (dataclasses of numbers and strings) that the charts and the page templates take as
it is; the formats at the end are the templates' filters.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timezone

from framework.log import history, version_checksum
from framework.log.commit_log import local_commits
from framework.log.delta_create import is_delta_table
from framework.log.history import MaintenanceHistory
from framework.log.warehouse import Warehouse, delta_table_sql

#: The newest runs per partition the report reads; older ones are left out.
MAX_RUNS_PER_PARTITION = 500
THRESHOLD_PROPERTY = "topiclake.config.min.cleanable.dirty.ratio"
STAGE_ORDER = ("compact", "retain", "optimize", "vacuum", "error")


# ----------------------------------------------------------------------- data shaping
@dataclass
class RunPoint:
    """One run of one partition: its stage rows and the numbers the charts plot."""

    run_id: str
    now_ms: int
    started_ms: int
    rows: list[dict]
    stages: tuple[str, ...] = ()
    trigger: str | None = None
    reasons: tuple[str, ...] = ()
    compact_due: bool | None = None
    records_before: int | None = None
    records_after: int | None = None
    bytes_before: int | None = None
    bytes_after: int | None = None
    log_start: int | None = None
    log_end: int | None = None
    checkpoint: int | None = None
    #: live data files after the run's bin-packing stage (None when it did not run)
    files: int | None = None
    dirty_ratio: float | None = None
    max_compaction_delay_ms: int | None = None
    #: failed, error, passed or skipped (nothing was validated)
    validation: str = "skipped"
    failed_guarantees: tuple[str, ...] = ()


@dataclass
class PartitionHistory:
    """The runs of one partition, oldest first."""

    topic: str
    partition: int
    runs: list[RunPoint]
    threshold: float | None = None

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def page(self) -> str:
        """The page's path relative to the report folder."""
        return "partitions/" + re.sub(r"[^A-Za-z0-9._-]", "_", self.name) + ".html"

    def latest(self, attribute: str):
        """The newest value of ``attribute`` that some run recorded, or None."""
        for run in reversed(self.runs):
            value = getattr(run, attribute)
            if value is not None:
                return value
        return None

    @property
    def last_validated(self) -> RunPoint | None:
        """The newest run that validated something (or failed with an error)."""
        return next((r for r in reversed(self.runs) if r.validation != "skipped"), None)


@dataclass
class RunSummary:
    """One maintenance run over all the partitions it touched."""

    run_id: str
    now_ms: int
    started_ms: int
    stages: set[str] = field(default_factory=set)
    partitions: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    outcomes: set[str] = field(default_factory=set)

    @property
    def outcome(self) -> str:
        return _worst(self.outcomes)

    @property
    def ordered_stages(self) -> list[str]:
        return sorted(self.stages, key=_stage_rank)


def _worst(outcomes) -> str:
    for outcome in ("failed", "error", "passed"):
        if outcome in outcomes:
            return outcome
    return "skipped"


def read_history(spark, warehouse: Warehouse, max_runs: int = MAX_RUNS_PER_PARTITION) -> list[dict]:
    """The history rows of the newest ``max_runs`` runs of every partition, as dicts. A local
    history is read by Arrow with no Spark session (``spark``, a session or a function that
    returns one, is then not called: in a new process ``topiclake report`` starts no JVM);
    elsewhere by one Spark query."""
    local = history.local_rows(warehouse)
    if local is not None:
        return newest_runs(local, max_runs)
    return history_by_spark(session_of(spark), warehouse, max_runs)


def session_of(spark):
    """``spark``, a Spark session or a function that returns one (started only when a
    table must be read through Spark), as a session."""
    return spark() if callable(spark) else spark


def newest_runs(rows: list[dict], max_runs: int) -> list[dict]:
    """The rows of each partition's newest ``max_runs`` runs: newest by the run's earliest
    ``run_started_ms`` (a run with none last), then by ``run_id``, both descending, as
    :func:`history_by_spark` ranks them (``tests/test_report.py`` pins the two together)."""
    started: dict[tuple, int | None] = {}
    for row in rows:
        run = (row["topic"], row["partition"], row["run_id"])
        ms = row["run_started_ms"]
        if run not in started or (ms is not None and (started[run] is None or ms < started[run])):
            started[run] = ms
    by_partition: dict[tuple, list] = {}
    for (topic, partition, run_id), ms in started.items():
        by_partition.setdefault((topic, partition), []).append((ms is not None, ms or 0, run_id))
    kept = {(topic, partition, run_id) for (topic, partition), runs in by_partition.items()
            for _, _, run_id in sorted(runs, reverse=True)[:max_runs]}
    return [row for row in rows if (row["topic"], row["partition"], row["run_id"]) in kept]


def history_by_spark(spark, warehouse: Warehouse, max_runs: int = MAX_RUNS_PER_PARTITION) -> list[dict]:
    """:func:`read_history` by one Spark query (a history not read locally: elsewhere, or a
    newest version whose files its checksum does not list)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    maintenance_history = MaintenanceHistory(spark, warehouse)
    if not maintenance_history.exists():
        return []
    run = Window.partitionBy("topic", "partition", "run_id")
    newest_first = Window.partitionBy("topic", "partition").orderBy(
        F.col("_run_started").desc(), F.col("run_id").desc())
    frame = (maintenance_history.read()
             .withColumn("_run_started", F.min("run_started_ms").over(run))
             .withColumn("_rank", F.dense_rank().over(newest_first))
             .where(F.col("_rank") <= max_runs)
             .drop("_run_started", "_rank"))
    return [row.asDict(recursive=True) for row in frame.collect()]


def fold_run(rows: list[dict]) -> RunPoint:
    """The stage rows of one partition in one run, folded into one point per chart."""
    rows = sorted(rows, key=lambda r: (_stage_rank(r["stage"]), r["run_started_ms"] or 0))
    first = rows[0]
    point = RunPoint(run_id=first["run_id"], now_ms=first["now_ms"],
                     started_ms=min(r["run_started_ms"] or 0 for r in rows), rows=rows,
                     stages=tuple(dict.fromkeys(r["stage"] for r in rows)))
    compact = next((r for r in rows if r["stage"] == "compact"), None)
    if compact is not None:
        point.trigger = compact["trigger"] if compact["due"] else None
        point.reasons = tuple(compact["reasons"] or ())
        point.compact_due = compact["due"]
        point.dirty_ratio = compact["dirty_ratio"]
        point.max_compaction_delay_ms = compact["max_compaction_delay_ms"]
    removed_records = sum(r["removed_records"] or 0 for r in rows)
    removed_bytes = sum(r["removed_bytes"] or 0 for r in rows)
    point.records_before = _first(rows, "records_before")
    point.bytes_before = _first(rows, "bytes_before")
    if point.records_before is not None:
        point.records_after = point.records_before - removed_records
    if point.bytes_before is not None:
        point.bytes_after = point.bytes_before - removed_bytes
    point.log_start = _last(rows, "log_start_after", "log_start_before")
    point.checkpoint = _last(rows, "checkpoint_after", "checkpoint_before")
    point.log_end = _last(rows, "log_end_offset")
    point.files = _last(rows, "files_after", "files_before")
    outcomes = {r["validation"] for r in rows} | ({"error"} if "error" in point.stages else set())
    point.validation = _worst(outcomes)
    guarantees = [g for r in rows for g in (r["failed_guarantees"] or ())]
    point.failed_guarantees = tuple(dict.fromkeys(guarantees))
    return point


def _stage_rank(stage: str) -> int:
    return STAGE_ORDER.index(stage) if stage in STAGE_ORDER else len(STAGE_ORDER)


def _first(rows: list[dict], column: str):
    return next((r[column] for r in rows if r[column] is not None), None)


def _last(rows: list[dict], *columns: str):
    for row in reversed(rows):
        for column in columns:
            if row[column] is not None:
                return row[column]
    return None


def shape(rows: list[dict]) -> tuple[list[PartitionHistory], list[RunSummary]]:
    """Partitions sorted by topic and partition, each with its runs oldest first; runs newest first."""
    grouped: dict[tuple[str, int], dict[str, list[dict]]] = {}
    for row in rows:
        grouped.setdefault((row["topic"], row["partition"]), {}).setdefault(row["run_id"], []).append(row)
    partitions, runs = [], {}
    for (topic, partition), by_run in sorted(grouped.items()):
        points = sorted((fold_run(r) for r in by_run.values()), key=lambda p: (p.started_ms, p.run_id))
        history = PartitionHistory(topic, partition, points)
        partitions.append(history)
        for point in points:
            summary = runs.setdefault(point.run_id, RunSummary(point.run_id, point.now_ms, point.started_ms))
            summary.started_ms = min(summary.started_ms, point.started_ms)
            summary.stages.update(point.stages)
            summary.partitions.append(history.name)
            summary.outcomes.add(point.validation)
            if point.validation in ("failed", "error"):
                summary.failed.append(history.name)
    newest_first = sorted(runs.values(), key=lambda s: (s.started_ms, s.run_id), reverse=True)
    return partitions, newest_first


def dirty_ratio_threshold(spark, warehouse: Warehouse, topic: str, partition: int) -> float | None:
    """The partition table's ``min.cleanable.dirty.ratio``, or None if the table or property
    is gone: from the newest version's checksum when the table is local, else by Spark
    (``spark`` as for :func:`read_history`)."""
    path = warehouse.partition_path(topic, partition)
    try:
        properties = _local_properties(warehouse, path)
        if properties is None:
            spark = session_of(spark)
            if not is_delta_table(spark, path):
                return None
            rows = spark.sql(f"SHOW TBLPROPERTIES {delta_table_sql(path)}").collect()
            properties = {r["key"]: r["value"] for r in rows}
        value = properties.get(THRESHOLD_PROPERTY)
        return float(value) if value not in (None, "") else None
    except Exception:  # noqa: BLE001 - the threshold is a nicety: a chart without it is still right
        return None


def _local_properties(warehouse: Warehouse, path: str) -> dict[str, str] | None:
    """The local table's properties at its newest version ({} with no table), or None when
    they are not read here (not local, no checksum)."""
    present = warehouse.has_table(path)
    if not present:
        return None if present is None else {}
    commits = local_commits(path, 1)
    return version_checksum.configuration(path, commits[0].version) if commits else None


# --------------------------------------------------------------------------- formats
# The page templates' filters (FILTERS): each takes None, for a value no run recorded, as "-".
def when(ms: int | None) -> str:
    if ms is None:
        return "-"
    try:
        return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    except (OverflowError, OSError, ValueError):
        return str(ms)


def number(value) -> str:
    return "-" if value is None else f"{value:,}"


def size(value) -> str:
    if value is None:
        return "-"
    amount = float(value)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(amount) < 1024 or unit == "TB":
            return f"{int(amount)} B" if unit == "B" else f"{amount:.1f} {unit}"
        amount /= 1024
    return str(value)


def duration(ms) -> str:
    if ms is None:
        return "-"
    seconds = ms / 1000
    for limit, divisor, unit in ((120, 1, "s"), (7200, 60, "min"), (172800, 3600, "h")):
        if abs(seconds) < limit:
            return f"{seconds / divisor:.3g}{unit}"
    return f"{seconds / 86400:.3g}d"


def ratio(value) -> str:
    return "-" if value is None else f"{value:.3f}"


def plain(value) -> str:
    return "-" if value is None else str(value)


def span(old, new, fmt: str = "number") -> str:
    """``old → new`` in the format named ``fmt``, or one value when nothing changed."""
    show = FILTERS[fmt]
    if old is None and new is None:
        return "-"
    if new is None or old == new:
        return show(old)
    return f"{show(old)} → {show(new)}"


FILTERS = {f.__name__: f for f in (when, number, size, duration, ratio, plain, span)}
