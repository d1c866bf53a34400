"""The maintenance history: one row per partition and stage of every run (CONTRACT section 8).

A Delta table at ``<warehouse>/_topiclake/maintenance_history``. Appends are blind, so
runs on different topics never conflict over it. The report plots it.

It stays bounded: every ``PRUNE_EVERY`` commits, a run deletes each partition's runs older
than its newest ``RUNS_KEPT`` (the report reads no more), keeping a partition's latest
committed run whatever its age (``validate`` starts from it, and a killed run is found by
the newest version recorded). A local history's rows are appended without a Spark job
(``framework/log/local_append.py``), and its files bin-packed once ``PACK_AT`` are live;
elsewhere a DataFrame write appends them and Delta's auto compaction packs them. Each prune
is also when topiclake's own tables are vacuumed (``vacuum_own_tables``): the files the
prune, the consumer offsets' upserts and the packing replaced leave the disk once they are
past the tables' window (a week).
"""

from __future__ import annotations

import functools
import time
from dataclasses import asdict, dataclass, field, fields
from typing import Callable

from framework.local_rows import local_frame
from framework.log import version_checksum
from framework.log.commit_log import read_commits
from framework.log.delta_commits import unless_conflicted
from framework.log.local_append import appended_locally, pack_small_files, read_locally
from framework.log.warehouse import Warehouse, create_own_table, vacuum_own_tables

#: The newest runs of each partition the history keeps (the report reads as many).
RUNS_KEPT = 500
#: How many history commits go by between two prunes (``history_prune``: by Arrow on a local
#: history, else a small shuffle and a MERGE).
PRUNE_EVERY = 50
#: How many live files make an append bin-pack the history: fewer than the 50 a version
#: checksum lists (``spark.databricks.delta.allFilesInCrc.thresholdNumFiles``), so that the
#: history's reads stay reads of the files it lists.
PACK_AT = 32

#: An array of strings, in Spark's JSON form.
_STRINGS = {"type": "array", "elementType": "string", "containsNull": True}

#: Column -> its type in Spark's JSON form (as Delta's schemaString writes it), in table
#: order: parsed in Python, where a DDL string needs a Spark session (and `status` reads
#: a local history without one).
HISTORY_COLUMNS: dict[str, str | dict] = {
    "run_id": "string",
    "run_started_ms": "long",
    "now_ms": "long",
    "topic": "string",
    "partition": "integer",
    "stage": "string",
    "trigger": "string",
    "reasons": _STRINGS,
    "due": "boolean",
    "committed": "boolean",
    "version_before": "long",
    "version_after": "long",
    "records_before": "long",
    "records_after": "long",
    "bytes_before": "long",
    "bytes_after": "long",
    "log_start_before": "long",
    "log_start_after": "long",
    "log_end_offset": "long",
    "checkpoint_before": "long",
    "checkpoint_after": "long",
    "first_uncleanable_offset": "long",
    "dirty_ratio": "double",
    "oldest_dirty_age_ms": "long",
    "max_compaction_delay_ms": "long",
    "max_lag_caused": "boolean",
    "removed_records": "long",
    "removed_bytes": "long",
    "stamped_tombstones": "long",
    "files_before": "long",
    "files_after": "long",
    "file_bytes_before": "long",
    "file_bytes_after": "long",
    "validation": "string",
    "failed_guarantees": _STRINGS,
    "message": "string",
    "duration_ms": "long",
    "attempts": "integer",
}


@functools.cache
def history_schema():
    """The history's ``StructType`` (every column nullable), built without a Spark session."""
    from pyspark.sql.types import StructType

    return StructType.fromJson({"type": "struct", "fields": [
        {"name": name, "type": kind, "nullable": True, "metadata": {}} for name, kind in HISTORY_COLUMNS.items()]})


@dataclass
class HistoryRow:
    """One stage of one partition in one run."""

    run_id: str
    run_started_ms: int
    now_ms: int
    topic: str
    partition: int
    stage: str
    trigger: str | None = None
    reasons: list[str] = field(default_factory=list)
    due: bool | None = None
    committed: bool = False
    version_before: int | None = None
    version_after: int | None = None
    records_before: int | None = None
    records_after: int | None = None
    bytes_before: int | None = None
    bytes_after: int | None = None
    log_start_before: int | None = None
    log_start_after: int | None = None
    log_end_offset: int | None = None
    checkpoint_before: int | None = None
    checkpoint_after: int | None = None
    first_uncleanable_offset: int | None = None
    dirty_ratio: float | None = None
    oldest_dirty_age_ms: int | None = None
    max_compaction_delay_ms: int | None = None
    max_lag_caused: bool | None = None
    removed_records: int | None = None
    removed_bytes: int | None = None
    stamped_tombstones: int | None = None
    #: live data files and their bytes on disk (bin-packing's before and after)
    files_before: int | None = None
    files_after: int | None = None
    file_bytes_before: int | None = None
    file_bytes_after: int | None = None
    validation: str = "skipped"
    failed_guarantees: list[str] = field(default_factory=list)
    message: str | None = None
    duration_ms: int | None = None
    attempts: int = 1

    def as_tuple(self) -> tuple:
        return tuple(getattr(self, f.name) for f in fields(self))

    def as_dict(self) -> dict:
        return asdict(self)


class MaintenanceHistory:
    """Append and read the history table."""

    def __init__(self, spark, warehouse: Warehouse):
        self.spark = spark
        self.warehouse = warehouse
        self.path = warehouse.maintenance_history_path
        #: appends this object made since its last prune_if_due, for the prune's cadence
        self._appends = 0

    def exists(self) -> bool:
        return self.warehouse.table_exists(self.spark, self.path)

    def append(self, rows: list[HistoryRow]) -> None:
        if not rows:
            return
        if not self.exists():
            create_own_table(self.spark, self.path, history_schema())
        tuples = [r.as_tuple() for r in rows]
        version = appended_locally(self.spark, self.path, tuples, history_schema())
        if version is None:
            frame = local_frame(self.spark, tuples, history_schema())
            # mergeSchema: a warehouse written by an older topiclake gains the newer columns
            frame.write.format("delta").mode("append").option("mergeSchema", "true").save(self.path)
        else:
            self._pack(version)
        self._appends += 1

    def _pack(self, version: int) -> None:
        """Bin-pack the history's files once ``PACK_AT`` are live (an append without a Spark
        job does not run Delta's auto compaction). A pack that loses a race to a prune is
        left to the next append."""
        unless_conflicted(lambda: pack_small_files(self.spark, self.path, version, PACK_AT))

    def prune_if_due(self, runs_kept: int = RUNS_KEPT, every: int | None = None) -> int | None:
        """Prune when this object's appends reached a history version that is a multiple of
        ``every``, then vacuum topiclake's own tables; the rows deleted, or None when not due.
        A prune that loses a commit race to an append is simply not done: the next multiple
        will come."""
        appends, self._appends = self._appends, 0
        if not appends:
            return None
        # The newest version, read once a run: its appends made the last ``appends`` of them
        # (near enough when another run appended in between; it only shifts the cadence).
        latest = read_commits(self.spark, self.path, 1)[0].version
        if not prune_due(latest - appends + 1, latest, every or PRUNE_EVERY):
            return None
        pruned = unless_conflicted(lambda: self.prune(runs_kept))
        if pruned is None:
            return None
        vacuum_own_tables(self.spark, self.warehouse)
        return pruned

    def prune(self, runs_kept: int) -> int:
        """Delete each partition's runs older than its newest ``runs_kept``, except its latest
        committed run, in one Delta commit (none when nothing is doomed); the number of rows
        deleted. A local history is pruned by Arrow (``history_prune.pruned_locally``), any
        other by Spark's expression of the rule and a MERGE."""
        from delta.tables import DeltaTable

        from framework.log import history_prune

        pruned = history_prune.pruned_locally(self.spark, self.path, runs_kept, history_schema())
        if pruned is not None:
            return pruned
        doomed = history_prune.doomed_frame(self.read(), runs_kept)
        merged = (DeltaTable.forPath(self.spark, self.path).alias("h")
                  .merge(doomed.alias("d"),
                         "h.topic <=> d.topic AND h.`partition` <=> d.`partition` AND h.run_id <=> d.run_id")
                  .whenMatchedDelete()
                  .execute()
                  .collect())
        return int(merged[0]["num_deleted_rows"]) if merged else 0

    def read(self):
        """The whole history (an empty frame before the first run)."""
        if not self.exists():
            return self.spark.createDataFrame([], history_schema())
        return self.spark.read.format("delta").load(self.path)

    def current(self):
        """The history at its newest version, read from the files its version checksum lists
        when they are that version, else through Delta (:meth:`read`). No snapshot state to
        rebuild: the read every run with history makes to find killed runs took 1.2 s and
        five or six Spark jobs so, against 0.3 s and two (2 cores, 2026-11-27)."""
        commits = read_commits(self.spark, self.path, 1)
        if not commits:
            return self.read()
        return version_checksum.read_plain(self.spark, self.path, commits[0].version, self.read)

    def recorded_versions(self) -> dict[tuple[str, int], int]:
        """Per partition, the highest table version a history row records: read by Arrow
        from the files the newest version's checksum lists, else one Spark job. Every run
        asks (to find killed runs); in a new process the Spark job took 2.2 s, cold."""
        if not self.exists():
            return {}
        local = self.recorded_versions_by_arrow()
        return local if local is not None else self.recorded_versions_by_spark()

    def recorded_versions_by_spark(self) -> dict[tuple[str, int], int]:
        from pyspark.sql import functions as F

        rows = (self.current().groupBy("topic", "partition")
                .agg(F.max(F.coalesce("version_after", "version_before")).alias("v")).collect())
        return {(r["topic"], r["partition"]): r["v"] for r in rows if r["v"] is not None}

    def recorded_versions_by_arrow(self) -> dict[tuple[str, int], int] | None:
        """:meth:`recorded_versions_by_spark` read by Arrow (``tests/test_metadata_bounds.py``
        pins the two together), or None when the newest version is not files its checksum
        lists."""
        import pyarrow as pa
        import pyarrow.compute as pc

        rows = self._read_by_arrow(columns=["topic", "partition", "version_after", "version_before"])
        if rows is None:
            return None
        versions = pa.table({"topic": rows["topic"], "partition": rows["partition"],
                             "v": pc.coalesce(rows["version_after"], rows["version_before"])})
        highest = versions.group_by(["topic", "partition"]).aggregate([("v", "max")]).to_pydict()
        return {(topic, partition): v for topic, partition, v in
                zip(highest["topic"], highest["partition"], highest["v_max"]) if v is not None}

    def _read_by_arrow(self, columns: list[str], where=None):
        """The newest version's rows (``columns``, those ``where`` keeps: an Arrow
        expression), read by Arrow from the files its checksum lists; None when it is not
        such files. The history is small and pruned (a few MB at most), and a Spark query
        of it in a new process costs seconds, cold."""
        # an older topiclake's files may lack a column: the schema reads it as nulls
        return read_locally(self.path, history_schema(), columns, where)

    def last_run(self, topic: str, partition: int) -> dict | None:
        """The latest committed stage row of a partition's maintenance, or None."""
        return self.last_runs(topic, partition).get(partition)

    def last_runs(self, topic: str, partition: int | None = None) -> dict[int, dict]:
        """Partition -> the latest committed stage row of its maintenance (column -> value),
        for every partition of ``topic`` (or only ``partition``): read by Arrow, else in one
        Spark query. ``status`` and ``validate`` ask it of a topic; a query a partition took
        0.32 s (a new process, 100 partitions), the one query 6.5 s cold."""
        if not self.exists():
            return {}
        local = self.last_runs_by_arrow(topic, partition)
        return local if local is not None else self.last_runs_by_spark(topic, partition)

    def last_runs_by_spark(self, topic: str, partition: int | None = None) -> dict[int, dict]:
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        wanted = (F.col("topic") == topic) & F.col("committed")
        if partition is not None:
            wanted &= F.col("partition") == partition
        newest = Window.partitionBy("partition").orderBy(F.col("run_started_ms").desc(), F.col("version_after").desc())
        rows = (self.read().where(wanted).withColumn("_newest", F.row_number().over(newest))
                .where("_newest = 1").drop("_newest").collect())
        return {row["partition"]: row.asDict(recursive=True) for row in rows}

    def last_runs_by_arrow(self, topic: str, partition: int | None = None) -> dict[int, dict] | None:
        """:meth:`last_runs_by_spark` read by Arrow (``tests/test_metadata_bounds.py`` pins the
        two together), or None when the newest version is not files its checksum lists."""
        import pyarrow.dataset as ds

        wanted = (ds.field("topic") == topic) & (ds.field("committed") == True)  # noqa: E712 - an Arrow expression
        if partition is not None:
            wanted &= ds.field("partition") == partition
        rows = self._read_by_arrow(list(HISTORY_COLUMNS), wanted)
        if rows is None:
            return None
        # Spark's order: newest start first, then the highest version (NULLs last)
        ordered = rows.sort_by([("partition", "ascending"), ("run_started_ms", "descending"),
                                ("version_after", "descending")])
        newest: dict[int, dict] = {}
        for row in ordered.to_pylist():
            newest.setdefault(row["partition"], row)
        return newest


def local_rows(warehouse: Warehouse) -> list[dict] | None:
    """Every row of a local history's newest version, as dicts of every history column (one
    the table or a file lacks is None), read by Arrow with no Spark session: [] before the
    first run; None when the history is elsewhere or its newest version is not files its
    checksum lists. ``topiclake report`` reads the history so, and starts no JVM."""
    path = warehouse.maintenance_history_path
    present = warehouse.has_table(path)
    if not present:
        return None if present is None else []
    rows = read_locally(path)
    return None if rows is None else [{name: row.get(name) for name in HISTORY_COLUMNS} for row in rows.to_pylist()]


def prune_due(first_version: int, last_version: int, every: int) -> bool:
    """Did appends that made history versions ``first_version..last_version`` reach a multiple
    of ``every``? Each multiple is made by one commit, so the history is pruned about every
    ``every`` commits, with no state kept anywhere but its version numbers."""
    return last_version // every > (first_version - 1) // every


#: The longest a committed change waits for its history row.
FLUSH_AFTER_S = 30.0


class HistoryBatch:
    """A run's history rows on their way to the history, appended in one commit when a
    partition failed, when the oldest change they record committed ``flush_after_s`` ago,
    or at the run's end (:meth:`flush`).

    One append costs about what a small partition's compaction does, so rows are not
    appended partition by partition. A crash loses at most the rows of that span; the next
    run finds their commits by run id and says the run did not finish
    (``framework/stages/interrupted_runs.py``).
    """

    def __init__(self, history: MaintenanceHistory | None, rows=(), flush_after_s: float | None = None,
                 before_flush: Callable[[], None] = lambda: None):
        self.history = history
        #: what completes the rows before they are written (the run's checks are judged)
        self.before_flush = before_flush
        self.rows: list[HistoryRow] = list(rows)
        self.flush_after_s = FLUSH_AFTER_S if flush_after_s is None else flush_after_s
        self._oldest_change: float | None = None

    def add(self, rows, failed: bool = False) -> None:
        self.rows.extend(rows)
        if self._oldest_change is None and any(row.committed for row in rows):
            self._oldest_change = time.monotonic()
        overdue = self._oldest_change is not None and time.monotonic() - self._oldest_change >= self.flush_after_s
        if failed or overdue:
            self.flush()

    def flush(self) -> None:
        self.before_flush()
        if self.history is not None and self.rows:
            self.history.append(self.rows)
        self.rows.clear()
        self._oldest_change = None
