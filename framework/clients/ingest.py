"""Ingest: a Kafka topic's new records into its partition tables, exactly once.

Each partition table remembers, in its own commits, the Kafka offsets it has appended
(its log end offset is Kafka's last ingested offset + 1). An ingest reads each Kafka
partition from there up to Kafka's log end offset with Spark's Kafka source in batch
mode, and appends what it read in one Delta commit that claims that start offset
(:meth:`~framework.log.partition_log.PartitionLog.append_ingested`). So a crash before the commit
leaves nothing, a crash after it leaves the records and the offsets together, and the
re-run starts where the table ends: no record lost, none twice. A partition with nothing
new commits nothing. Offsets are Kafka's, gaps included (a compacted Kafka topic,
transaction markers).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from framework.clients.kafka_reader import (
    KafkaDataLossError,
    PartitionOffsets,
    client_settings,
    partition_offsets,
    read_partition,
)
from framework.errors import ArgumentError, Problem, RecordError
from framework.log.log_state import AppendedRecords
from framework.log.partition_log import NEW_LOG
from framework.log.table_layout import record_size_column
from framework.log.topic import Topic
from framework.log.warehouse import Warehouse
from framework.side_by_side import each
from framework.spec import TopicSpec

#: Partitions ingested side by side (each is its own Delta table and commit).
INGEST_THREADS = 4


@dataclass(frozen=True)
class IngestResult:
    """What one ingest did to one partition."""

    topic: str
    partition: int
    kafka_topic: str
    #: the first Kafka offset asked for, and Kafka's log end offset when the read was planned
    start: int
    end: int
    records: int
    first_offset: int | None
    last_offset: int | None
    #: the table version of the append, None when nothing was appended
    version: int | None

    def describe(self) -> str:
        table = f"{self.topic}-{self.partition}"
        if self.version is None:
            return f"{table}: nothing new (Kafka {self.kafka_topic}-{self.partition} ends at offset {self.end})"
        return (f"{table}: {self.records} record(s), Kafka offsets {self.first_offset}..{self.last_offset} "
                f"(table version {self.version})")


def ingest_specs(specs: Sequence[TopicSpec], explicit: bool) -> list[TopicSpec]:
    """The specs an ingest covers: those with ``source.kafka``; naming one without is an error."""
    fed = [spec for spec in specs if spec.kafka_source is not None]
    if explicit:
        for spec in specs:
            if spec.kafka_source is None:
                raise ArgumentError(f"--topic: topic {spec.topic} has no source.kafka in {spec.source}; "
                                    "its records come from produce")
    if not fed:
        raise ArgumentError("no spec has a source.kafka; ingest reads only topics fed from Kafka")
    return fed


def ingest(spark, warehouse: Warehouse, specs: Sequence[TopicSpec],
           progress: Callable[[IngestResult], None] | None = None,
           environ: Mapping[str, str] | None = None) -> list[IngestResult]:
    """Ingest every spec's Kafka topic; every spec and topic is checked before the first write."""
    planned = []
    for spec in specs:  # settings, Kafka's metadata and the tables, all before any write
        options = client_settings(spec, environ)
        offsets = partition_offsets(spark, spec, options)
        topic = Topic(spark, warehouse, spec)
        topic.check_fits()
        planned.append((topic, options, offsets))
    results: list[IngestResult] = []
    for topic, options, offsets in planned:
        # A partition Kafka holds records for gets its table from its first append's commit
        # (as produce's do); the others are created first, and those whose range held only
        # gaps or transaction markers after the appends.
        fed = frozenset(kafka.partition for kafka in offsets if kafka.latest > kafka.earliest)
        topic.ensure(fed)
        jobs = [(topic, options, kafka) for kafka in offsets]
        results.extend(_run_all(jobs, progress))
        if fed:
            topic.create_missing()
    return results


def _run_all(jobs, progress) -> list[IngestResult]:
    def one(job) -> IngestResult:
        result = _ingest_partition(*job)
        if progress is not None:
            progress(result)
        return result

    return each(None, jobs, lambda _session, job: one(job), INGEST_THREADS, name="ingest", own_sessions=False)


def next_offset(log_start: int, log_end: int, kafka: PartitionOffsets, table: str) -> int:
    """Where a partition's ingest starts: its log end offset, or Kafka's log start offset for
    a table that never held a record. Kafka having removed offsets never ingested is data loss."""
    if log_end == 0 and log_start == 0:
        return kafka.earliest
    if kafka.earliest > log_end:
        raise KafkaDataLossError(
            f"{table}: Kafka's log now starts at offset {kafka.earliest}, but offsets {log_end}.."
            f"{kafka.earliest - 1} were never ingested (Kafka's retention or deleteRecords removed them); "
            "ingest more often than Kafka's retention.ms")
    return log_end


def _ingest_partition(topic: Topic, options: Mapping[str, str], kafka: PartitionOffsets) -> IngestResult:
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    spec = topic.spec
    log = topic.partition(kafka.partition)
    state = log.snapshot().state if log.exists() else NEW_LOG
    start = next_offset(state.log_start_offset, state.log_end_offset, kafka, log.name)

    def result(records=0, first=None, last=None, version=None) -> IngestResult:
        return IngestResult(spec.topic, kafka.partition, spec.kafka_topic, start, kafka.latest,
                            records, first, last, version)

    if kafka.latest <= start:
        return result()
    records = read_partition(topic.spark, spec, options, kafka.partition, start, kafka.latest)
    # Read Kafka once: the checks and the append see the same records.
    records = records.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        try:
            row = records.agg(F.count("*").alias("n"), F.min("offset").alias("first"),
                              F.max("offset").alias("last"), F.max(F.unix_millis("timestamp")).alias("newest"),
                              F.min(F.unix_millis("timestamp")).alias("oldest"),
                              F.sum(record_size_column()).alias("bytes"),
                              F.count(F.when(F.col("key").isNull(), 1)).alias("null_keys")).collect()[0]
        except Exception as error:  # noqa: BLE001 - Kafka removed records while they were read
            if not _is_data_loss(error):
                raise
            raise KafkaDataLossError(
                f"{log.name}: Kafka removed records of offsets {start}..{kafka.latest - 1} while ingest read them "
                "(its retention or deleteRecords); nothing was appended: run ingest again") from None
        if row["n"] == 0:  # only gaps or transaction markers in the range
            return result()
        if spec.config.compact and row["null_keys"]:
            raise RecordError([Problem(
                f"kafka:{spec.kafka_topic}-{kafka.partition}", None, None, "key",
                f"{row['null_keys']} record(s) in offsets {start}..{kafka.latest - 1} without a key; "
                f"topic {spec.topic} is compacted and needs a key on every record; nothing was appended")])
        batch = AppendedRecords(row["n"], row["bytes"], row["oldest"])
        appended = log.append_ingested(records, batch, start, row["last"], kafka.latest, row["newest"])
        if appended.version is None:  # another ingest appended from this start first
            return result()
        return result(row["n"], row["first"], row["last"], appended.version)
    finally:
        records.unpersist()


def _is_data_loss(error: Exception) -> bool:
    """Spark's Kafka source failing a read because offsets it was asked for are gone."""
    text = str(error)
    return any(marker in text for marker in ("OffsetOutOfRange", "data loss", "KAFKA_DATA_LOSS", "Cannot fetch"))
