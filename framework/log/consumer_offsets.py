"""Consumer groups' committed offsets, Kafka's ``__consumer_offsets`` as a Delta table.

One row per (group, topic, partition), upserted: the latest commit wins, as in Kafka,
where a group may also move its offset backwards. Consumed retention (KIP-68) reads
these rows. The table is small (a row per group and partition), so an upsert rewrites it
as one overwrite commit through Delta's transaction API. On the local file system the rows
are read and written by Arrow, without a Spark job
(:func:`framework.log.local_append.replaced_locally`), and read back by Arrow too; elsewhere
the new rows are written by Spark (:func:`framework.log.delta_transactions.replaced_commit`),
and where neither applies (no version checksum listing the files, a Spark Connect session)
the row is MERGEd.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass

from framework import faults
from framework.errors import ArgumentError, ConcurrentWriteError
from framework.local_rows import local_frame
from framework.log.delta_commits import MAX_COMMIT_ATTEMPTS, backoff, is_retryable_conflict
from framework.log.delta_transactions import replaced_commit
from framework.log.local_append import read_locally, replaced_locally
from framework.log.warehouse import Warehouse, create_own_table
from framework.spec import TopicSpec

#: The table's columns, in Spark's JSON type names: its ``StructType`` is built in Python
#: (:func:`offsets_schema`), where a DDL string needs a Spark session to parse (and a
#: ``commit-offset`` or an idle run reads and writes a local table without one).
COLUMNS = {"group": "string", "topic": "string", "partition": "integer", "offset": "long",
           "commit_timestamp": "timestamp"}


@functools.cache
def offsets_schema():
    """The committed offsets' ``StructType`` (no column nullable)."""
    from pyspark.sql.types import StructType

    return StructType.fromJson({"type": "struct", "fields": [
        {"name": name, "type": kind, "nullable": False, "metadata": {}} for name, kind in COLUMNS.items()]})


@dataclass(frozen=True)
class CommittedOffset:
    group: str
    topic: str
    partition: int
    offset: int


class ConsumerOffsets:
    """Read and write committed offsets in ``<warehouse>/_topiclake/consumer_offsets``."""

    def __init__(self, spark, warehouse: Warehouse):
        self.spark = spark
        self.warehouse = warehouse
        self.path = warehouse.consumer_offsets_path

    def _ensure(self) -> None:
        if not self.warehouse.table_exists(self.spark, self.path):
            create_own_table(self.spark, self.path, offsets_schema())

    def commit(self, group: str, topic: str, partition: int, offset: int) -> None:
        """Record ``group``'s committed offset for a topic partition (one atomic upsert)."""
        from delta.tables import DeltaTable
        from pyspark.sql import functions as F

        if not group:
            raise ArgumentError("--group: a consumer group id must not be empty")
        if offset < 0:
            raise ArgumentError(f"--offset: a committed offset must be >= 0, got {offset}")
        self._ensure()
        committed_ms = int(time.time() * 1000)
        faults.reached("commit_offset.before_commit", group=group, topic=topic, partition=partition)

        def row():
            new = local_frame(self.spark, [(group, topic, partition, offset, committed_ms)],
                              "group string, topic string, partition int, offset long, ms long")
            return new.withColumn("commit_timestamp", F.timestamp_millis("ms")).drop("ms")

        def upserted_by_spark(rows):  # a DataFrame in and out
            same = (F.col("group") == group) & (F.col("topic") == topic) & (F.col("partition") == partition)
            return rows.where(~same).unionByName(row())

        def upserted(rows):  # an Arrow table in and out
            import pyarrow as pa
            import pyarrow.compute as pc

            others = rows.filter(~((pc.field("group") == group) & (pc.field("topic") == topic)
                                   & (pc.field("partition") == partition)))
            new = pa.table({"group": [group], "topic": [topic], "partition": [partition], "offset": [offset],
                            "commit_timestamp": pa.array([committed_ms], pa.timestamp("ms", tz="UTC"))})
            return pa.concat_tables([others, new.cast(rows.schema)])

        for attempt in range(MAX_COMMIT_ATTEMPTS):
            try:
                if (not replaced_locally(self.spark, self.path, upserted, offsets_schema())
                        and not replaced_commit(self.spark, self.path, upserted_by_spark)):
                    (
                        DeltaTable.forPath(self.spark, self.path).alias("t")
                        .merge(row().alias("s"),
                               "t.group = s.group AND t.topic = s.topic AND t.partition = s.partition")
                        .whenMatchedUpdateAll()
                        .whenNotMatchedInsertAll()
                        .execute()
                    )
                faults.reached("commit_offset.after_commit", group=group, topic=topic, partition=partition)
                return
            except Exception as error:  # noqa: BLE001
                if not is_retryable_conflict(error):
                    raise
                backoff(attempt)
        raise ConcurrentWriteError(f"committing {group}'s offset lost {MAX_COMMIT_ATTEMPTS} commit races")

    def committed(self, topic: str, partition: int, groups: tuple[str, ...] | None = None) -> dict[str, int]:
        """The committed offsets of ``groups`` (all groups when None) for a topic partition:
        read by Arrow from the files the newest version's checksum lists, else by Spark."""
        import pyarrow.compute as pc
        from pyspark.sql import functions as F

        if not self.warehouse.table_exists(self.spark, self.path):
            return {}
        local = read_locally(self.path, offsets_schema(), ["group", "offset"],
                             (pc.field("topic") == topic) & (pc.field("partition") == partition))
        if local is not None:
            found = dict(zip(local["group"].to_pylist(), local["offset"].to_pylist()))
        else:
            found = {r["group"]: r["offset"] for r in (
                self.spark.read.format("delta").load(self.path)
                .where((F.col("topic") == topic) & (F.col("partition") == partition))
                .select("group", "offset")
                .collect()
            )}
        return found if groups is None else {g: found[g] for g in groups if g in found}

    def for_retention(self, spec: TopicSpec, partition: int) -> tuple[dict[str, int] | None, str | None]:
        """What KIP-68's consumed retention may go by: the groups' committed offsets ({} when it
        is off), or None with the reason when they cannot be read; then nothing is removed for
        consumption (a failure to read must never count as "everyone has read everything")."""
        config = spec.config
        if config.consumed_retention_ms < 0:
            return {}, None
        try:
            return self.committed(spec.topic, partition, config.consumed_retention_groups), None
        except Exception as error:  # noqa: BLE001 - any failure to read means no consumed retention
            return None, f"could not read committed offsets ({type(error).__name__}); consumed retention skipped"

    def all(self):
        """Every committed offset as a DataFrame (empty if nothing was ever committed)."""
        if not self.warehouse.table_exists(self.spark, self.path):
            return self.spark.createDataFrame([], offsets_schema())
        return self.spark.read.format("delta").load(self.path)
