"""The maintenance history: one row per partition and stage of every run (CONTRACT section 8).

An append-only Delta table at ``<warehouse>/_topiclake/maintenance_history``. Appends are
blind, so runs on different topics never conflict over it. The report plots it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

from framework.log.warehouse import Warehouse, create_own_table

#: Column -> Spark SQL type, in table order.
HISTORY_COLUMNS: dict[str, str] = {
    "run_id": "STRING",
    "run_started_ms": "BIGINT",
    "now_ms": "BIGINT",
    "topic": "STRING",
    "partition": "INT",
    "stage": "STRING",
    "trigger": "STRING",
    "reasons": "ARRAY<STRING>",
    "due": "BOOLEAN",
    "committed": "BOOLEAN",
    "version_before": "BIGINT",
    "version_after": "BIGINT",
    "records_before": "BIGINT",
    "records_after": "BIGINT",
    "bytes_before": "BIGINT",
    "bytes_after": "BIGINT",
    "log_start_before": "BIGINT",
    "log_start_after": "BIGINT",
    "log_end_offset": "BIGINT",
    "checkpoint_before": "BIGINT",
    "checkpoint_after": "BIGINT",
    "first_uncleanable_offset": "BIGINT",
    "dirty_ratio": "DOUBLE",
    "oldest_dirty_age_ms": "BIGINT",
    "max_compaction_delay_ms": "BIGINT",
    "max_lag_caused": "BOOLEAN",
    "removed_records": "BIGINT",
    "removed_bytes": "BIGINT",
    "stamped_tombstones": "BIGINT",
    "files_before": "BIGINT",
    "files_after": "BIGINT",
    "file_bytes_before": "BIGINT",
    "file_bytes_after": "BIGINT",
    "validation": "STRING",
    "failed_guarantees": "ARRAY<STRING>",
    "message": "STRING",
    "duration_ms": "BIGINT",
    "attempts": "INT",
}

HISTORY_SCHEMA = ", ".join(f"`{name}` {kind}" for name, kind in HISTORY_COLUMNS.items())


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
        self.path = warehouse.maintenance_history_path

    def exists(self) -> bool:
        from delta.tables import DeltaTable

        return DeltaTable.isDeltaTable(self.spark, self.path)

    def append(self, rows: list[HistoryRow]) -> None:
        if not rows:
            return
        if not self.exists():
            create_own_table(self.spark, self.path, self.spark.createDataFrame([], HISTORY_SCHEMA).schema)
        frame = self.spark.createDataFrame([r.as_tuple() for r in rows], HISTORY_SCHEMA)
        # mergeSchema: a warehouse written by an older topiclake gains the newer columns
        frame.write.format("delta").mode("append").option("mergeSchema", "true").save(self.path)

    def read(self):
        """The whole history (an empty frame before the first run)."""
        if not self.exists():
            return self.spark.createDataFrame([], HISTORY_SCHEMA)
        return self.spark.read.format("delta").load(self.path)

    def recorded_versions(self) -> dict[tuple[str, int], int]:
        """Per partition, the highest table version a history row records (one Spark job)."""
        from pyspark.sql import functions as F

        if not self.exists():
            return {}
        rows = (self.read().groupBy("topic", "partition")
                .agg(F.max(F.coalesce("version_after", "version_before")).alias("v")).collect())
        return {(r["topic"], r["partition"]): r["v"] for r in rows if r["v"] is not None}

    def last_run(self, topic: str, partition: int):
        """The latest committed stage row of a partition's maintenance, or None."""
        from pyspark.sql import functions as F

        if not self.exists():
            return None
        rows = (
            self.read()
            .where((F.col("topic") == topic) & (F.col("partition") == partition) & F.col("committed"))
            .orderBy(F.col("run_started_ms").desc(), F.col("version_after").desc())
            .limit(1)
            .collect()
        )
        return rows[0] if rows else None
