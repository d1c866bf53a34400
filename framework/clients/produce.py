"""Produce: records to partition tables, one atomic append per partition and call.

Two entry points share the append path of :class:`~framework.log.partition_log.PartitionLog`:
checked Python records (JSON lines, scenario files), which are on the driver already and
are written by Arrow with no Spark job (``framework.log.arrow_files``), and a Spark
DataFrame (bulk loads), whose checks and partitioning run in Spark so no record passes
through the driver.
"""

from __future__ import annotations

from typing import Sequence

from framework.clients.partitioner import default_partitions
from framework.clients.records import ProducerRecord, assign_partitions
from framework.errors import ArgumentError, PolicyViolationError, Problem, RecordError
from framework.log.appended_rows import driver_side_schema
from framework.log.delta_commits import session_confs
from framework.log.log_state import AppendedRecords
from framework.log.partition_log import AppendResult
from framework.log.small_partitions import small_partition_settings
from framework.log.table_layout import HEADERS_TYPE, record_size_column
from framework.log.topic import Topic
from framework.side_by_side import each


def refuse_kafka_fed(topic: Topic) -> None:
    """A topic fed from Kafka keeps Kafka's offsets: only ``ingest`` appends to it."""
    if topic.spec.kafka_source is not None:
        raise PolicyViolationError(
            f"{topic.spec.source}: source: topic {topic.name} is fed from Kafka topic {topic.spec.kafka_topic}, "
            "so its offsets are Kafka's; produce is refused (produce to Kafka, then run topiclake ingest)")


def produce(topic: Topic, records: Sequence[ProducerRecord], now_ms: int, source: str = "input") -> list[AppendResult]:
    """Append checked records; LogAppendTime stamps them with ``now_ms``."""
    refuse_kafka_fed(topic)
    if not records:
        return []
    with small_partition_settings(topic.spark, len(records)):
        batches = _batches(topic, records, now_ms, source)
        return _append_all(topic, batches)


def _batches(topic: Topic, records: Sequence[ProducerRecord], now_ms: int, source: str) -> dict[int, tuple]:
    """Each partition's records as driver-side rows (an Arrow table, which the append writes
    without a Spark job where the table takes it), what it appends, and its newest timestamp."""
    import pyarrow as pa

    log_append_time = topic.spec.config.message_timestamp_type == "LogAppendTime"
    schema = driver_side_schema(topic.spec)
    batches = {}
    for partition, batch in sorted(assign_partitions(records, topic.spec, source).items()):
        stamps = [now_ms if log_append_time or record.timestamp_ms is None else record.timestamp_ms
                  for record in batch]
        sizes = [record.size() for record in batch]
        columns = {
            "_seq": range(len(batch)),
            "timestamp": [ms * 1000 for ms in stamps],  # microseconds, as Spark's timestamps
            "key": [record.key for record in batch],
            "value": [record.value for record in batch],
            "headers": [list(record.headers) for record in batch],
            "_size": sizes,
        }
        rows = pa.table([pa.array(columns[f.name], f.type) for f in schema], schema=schema)
        appended = AppendedRecords(len(batch), sum(sizes), min(stamps))
        batches[partition] = (rows, appended, max(stamps))
    return batches


#: Appends into different partitions run side by side: each is its own Delta table and
#: commit, and a small append's cost is mostly driver-side waiting (5,000 lines into 10
#: partitions: 1.7x faster with four threads on two cores).
APPEND_THREADS = 4


def _append_all(topic: Topic, batches: dict[int, tuple]) -> list[AppendResult]:
    """Append each partition's batch (frame, what it appends, newest timestamp), one atomic commit per
    partition, in partition order of the results. A partition with no table yet gets it from
    its append's commit; the topic's other missing partitions are created first, as Kafka
    creates every partition of a topic. Appends only set writer options, never session
    confs, so they can share the session."""
    appending_to = frozenset(batches)
    topic.ensure(appending_to)
    results = each(topic.spark, sorted(batches.items()),
                   lambda _session, batch: topic.partition(batch[0]).append(*batch[1]),
                   APPEND_THREADS, name="append", own_sessions=False)
    topic.register()
    return results


#: Spark's columnar cache compresses what it holds. A produced frame is held only from its
#: checks to its append, and compressing it costs more than it saves: 1M records of
#: 200-byte values produced in 0.76 x the time (4.75 s against 6.23 s, ``jobs/benchmark.py
#: --only produce``), 5M in 0.98 x (2 cores, 2026-11-29). Spark takes the setting as the
#: frame is persisted, so it is set only for that call.
HELD_FRAME_SETTINGS = {"spark.sql.inMemoryColumnarStorage.compressed": "false"}

#: Bits of ``monotonically_increasing_id`` that hold a row's index in its Spark partition.
_INDEX_BITS = 33


def _kafka_partitions(partitions: int, given_column: str | None):
    """The function ``mapInArrow`` runs on each Spark partition's Arrow batches: Kafka's
    partitioner on a whole batch (:func:`default_partitions`, numpy; a Python call per
    record bounded a produce at its rate), and each record's index among the records of
    its Kafka partition in this Spark partition so far (``_index``), in the frame's order.
    Adds ``_spark_partition``, ``_partition`` (null: neither a key nor a partition) and
    ``_index``; drops ``given_column``."""

    def run(batches):
        import numpy as np
        import pyarrow as pa
        from pyspark import TaskContext

        spark_partition = TaskContext.get().partitionId()
        seen: dict[int, int] = {}  # Kafka partition -> its records in earlier batches
        for batch in batches:
            keys = batch.column("key")  # a string key hashes as its UTF-8 bytes
            chosen = default_partitions(keys, partitions)
            unplaced = chosen == -1  # a null key
            if given_column is not None:
                given = batch.column(given_column)
                named = given.is_valid().to_numpy(zero_copy_only=False)
                chosen = np.where(named, given.fill_null(0).to_numpy(zero_copy_only=False), chosen).astype(np.int32)
                unplaced &= ~named
            order = np.argsort(chosen, kind="stable")
            groups, starts, counts = np.unique(chosen[order], return_index=True, return_counts=True)
            earlier = np.array([seen.get(int(g), 0) for g in groups], dtype=np.int64)
            index = np.empty(len(chosen), dtype=np.int64)
            index[order] = np.arange(len(chosen), dtype=np.int64) - np.repeat(starts - earlier, counts)
            for group, count in zip(groups.tolist(), counts.tolist()):
                seen[group] = seen.get(group, 0) + count
            kept = [name for name in batch.schema.names if name != given_column]
            yield pa.RecordBatch.from_arrays(
                [batch.column(name) for name in kept]
                + [pa.array(np.full(len(chosen), spark_partition, dtype=np.int32)),
                   pa.array(chosen, mask=unplaced), pa.array(index)],
                names=kept + ["_spark_partition", "_partition", "_index"])

    return run


def _partitioned(shaped, partitions: int, given: bool):
    """``shaped`` with ``_spark_partition``, ``_partition`` and ``_index`` (above), persisted,
    so that the numbers the counts see are the numbers written. A one-partition topic needs
    no partitioner and no Python: its index is the row's index in its Spark partition,
    from ``monotonically_increasing_id``."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if partitions == 1 and not given:
        marked = shaped.select(
            *[c for c in shaped.columns if c != "_order"],
            F.spark_partition_id().alias("_spark_partition"),
            F.when(F.col("key").isNotNull(), F.lit(0)).alias("_partition"),  # a null key is refused
            F.col("_order").bitwiseAND(F.lit((1 << _INDEX_BITS) - 1)).alias("_index"))
    else:
        keyed = shaped.drop("_order")
        schema = T.StructType([f for f in keyed.schema.fields if f.name != "_given"] + [
            T.StructField("_spark_partition", T.IntegerType(), False),
            T.StructField("_partition", T.IntegerType(), True),
            T.StructField("_index", T.LongType(), False)])
        marked = keyed.mapInArrow(_kafka_partitions(partitions, "_given" if given else None), schema)
    return marked.persist()


def produce_frame(topic: Topic, frame, now_ms: int, source: str = "DataFrame") -> list[AppendResult]:
    """Append a DataFrame of records (columns key, value, timestamp, and optionally headers
    and partition), in its row order, one atomic append per partition.

    ``timestamp`` may be a TIMESTAMP or epoch milliseconds (BIGINT). Checks run as one
    Spark aggregation before anything is written.
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    refuse_kafka_fed(topic)
    spec = topic.spec
    columns = set(frame.columns)
    missing = [c for c in ("key", "value") if c not in columns]
    if spec.config.message_timestamp_type == "CreateTime" and "timestamp" not in columns:
        missing.append("timestamp")
    if missing:
        raise ArgumentError(f"{source}: missing column(s) {', '.join(missing)}; expected key, value, "
                            "timestamp, and optionally headers and partition")
    unknown = columns - {"key", "value", "timestamp", "headers", "partition"}
    if unknown:
        raise ArgumentError(f"{source}: unknown column(s) {', '.join(sorted(unknown))}")

    if spec.config.message_timestamp_type == "LogAppendTime" or "timestamp" not in columns:
        ts = F.timestamp_millis(F.lit(now_ms))
    elif isinstance(frame.schema["timestamp"].dataType, T.TimestampType):
        ts = F.col("timestamp")
    else:
        ts = F.timestamp_millis(F.col("timestamp").cast("long"))
    headers = F.col("headers") if "headers" in columns else F.array().cast(HEADERS_TYPE)
    given = "partition" in columns
    shaped = frame.select(
        F.monotonically_increasing_id().alias("_order"),
        F.col("key").cast(spec.key_type).alias("key"),
        F.col("value").cast(spec.value_type).alias("value"),
        ts.alias("timestamp"),
        headers.cast(HEADERS_TYPE).alias("headers"),
        *([F.col("partition").cast("int").alias("_given")] if given else []),
    )
    with session_confs(topic.spark, HELD_FRAME_SETTINGS):
        partitioned = _partitioned(shaped, spec.partitions, given)
    try:
        # One job over the persisted frame: the checks and, per Spark partition and Kafka
        # partition, what the appends need (record counts number the offsets).
        groups = partitioned.groupBy("_spark_partition", "_partition").agg(
            F.count("*").alias("n"),
            F.count(F.when(F.col("key").isNull(), 1)).alias("null_keys"),
            F.count(F.when(F.col("timestamp").isNull(), 1)).alias("null_timestamps"),
            F.sum(record_size_column()).alias("bytes"),
            F.min(F.unix_millis("timestamp")).alias("oldest"),
            F.max(F.unix_millis("timestamp")).alias("newest"),
        ).collect()
        null_keys = sum(g["null_keys"] for g in groups)
        null_timestamps = sum(g["null_timestamps"] for g in groups)
        no_partition = sum(g["n"] for g in groups if g["_partition"] is None)
        out_of_range = sum(g["n"] for g in groups if g["_partition"] is not None
                           and not 0 <= g["_partition"] < spec.partitions)
        problems = []
        if spec.config.compact and null_keys:
            problems.append(Problem(source, None, None, "key", f"{null_keys} record(s) without a key; "
                                    "a compacted topic needs a key on every record"))
        if null_timestamps:
            problems.append(Problem(source, None, None, "timestamp", f"{null_timestamps} record(s) without a timestamp"))
        if out_of_range:
            problems.append(Problem(source, None, None, "partition", f"{out_of_range} record(s) with a "
                                    f"partition outside 0..{spec.partitions - 1}"))
        if no_partition and not spec.config.compact:
            problems.append(Problem(source, None, None, "partition", f"{no_partition} record(s) with "
                                    "neither a key nor a partition"))
        if problems:
            raise RecordError(problems)
        by_partition: dict[int, list] = {}
        for g in sorted(groups, key=lambda g: g["_spark_partition"]):
            by_partition.setdefault(g["_partition"], []).append(g)
        batches = {}
        for partition, mine in sorted(by_partition.items()):
            # a record's offset in the append: the records of its Kafka partition in the
            # Spark partitions before its own, plus its index in its own
            bases, before = {}, 0
            for g in mine:
                bases[g["_spark_partition"]] = before
                before += g["n"]
            # SQL text, not Column trees: one call into the JVM, not one per literal
            base = f"element_at(map({', '.join(f'{int(k)}, {int(v)}' for k, v in bases.items())}), _spark_partition)"
            records = partitioned.where(f"_partition = {int(partition)}").selectExpr(
                "key", "value", "`timestamp`", "headers", f"CAST({base} + _index AS BIGINT) AS _seq")
            appended = AppendedRecords(before, sum(g["bytes"] for g in mine), min(g["oldest"] for g in mine))
            batches[partition] = (records, appended, max(g["newest"] for g in mine))
        return _append_all(topic, batches)
    finally:
        partitioned.unpersist()
