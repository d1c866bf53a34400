"""Produce: records to partition tables, one atomic append per partition and call.

Two entry points share the append path of :class:`~framework.log.partition_log.PartitionLog`:
checked Python records (JSON lines, scenario files) and a Spark DataFrame (bulk loads),
whose checks and partitioning run in Spark so no record passes through the driver.
"""

from __future__ import annotations

from typing import Sequence

from framework.clients.partitioner import murmur2
from framework.clients.records import ProducerRecord, assign_partitions
from framework.errors import ArgumentError, PolicyViolationError, Problem, RecordError
from framework.local_rows import local_frame
from framework.log.log_state import AppendedRecords
from framework.log.partition_log import AppendResult
from framework.log.table_layout import HEADERS_TYPE, record_size_column
from framework.log.topic import Topic
from framework.side_by_side import each


def _input_schema(topic: Topic):
    from pyspark.sql import types as T

    def kind(name: str):
        return T.BinaryType() if name == "binary" else T.StringType()

    header = T.StructType(
        [T.StructField("key", T.StringType(), False), T.StructField("value", T.BinaryType(), True)]
    )
    return T.StructType(
        [
            T.StructField("_seq", T.LongType(), False),
            T.StructField("key", kind(topic.spec.key_type), True),
            T.StructField("value", kind(topic.spec.value_type), True),
            T.StructField("timestamp_ms", T.LongType(), False),
            T.StructField("headers", T.ArrayType(header, False), False),
        ]
    )


def refuse_kafka_fed(topic: Topic) -> None:
    """A topic fed from Kafka keeps Kafka's offsets: only ``ingest`` appends to it."""
    if topic.spec.kafka_source is not None:
        raise PolicyViolationError(
            f"{topic.spec.source}: source: topic {topic.name} is fed from Kafka topic {topic.spec.kafka_topic}, "
            "so its offsets are Kafka's; produce is refused (produce to Kafka, then run topiclake ingest)")


def produce(topic: Topic, records: Sequence[ProducerRecord], now_ms: int, source: str = "input") -> list[AppendResult]:
    """Append checked records; LogAppendTime stamps them with ``now_ms``."""
    from pyspark.sql import functions as F

    refuse_kafka_fed(topic)
    if not records:
        return []
    topic.ensure()
    log_append_time = topic.spec.config.message_timestamp_type == "LogAppendTime"
    schema = _input_schema(topic)
    batches = {}
    for partition, batch in sorted(assign_partitions(records, topic.spec, source).items()):
        rows = [
            (
                seq,
                record.key,
                record.value,
                now_ms if log_append_time or record.timestamp_ms is None else record.timestamp_ms,
                [(name, value) for name, value in record.headers],
            )
            for seq, record in enumerate(batch)
        ]
        frame = local_frame(topic.spark, rows, schema)
        frame = frame.withColumn("timestamp", F.timestamp_millis("timestamp_ms")).drop("timestamp_ms")
        appended = AppendedRecords(len(rows), sum(record.size() for record in batch), min(row[3] for row in rows))
        batches[partition] = (frame, appended, max(row[3] for row in rows))
    return _append_all(topic, batches)


#: Appends into different partitions run side by side: each is its own Delta table and
#: commit, and a small append's cost is mostly driver-side waiting (5,000 lines into 10
#: partitions: 1.7x faster with four threads on two cores).
APPEND_THREADS = 4


def _append_all(topic: Topic, batches: dict[int, tuple]) -> list[AppendResult]:
    """Append each partition's batch (frame, what it appends, newest timestamp), one atomic commit per
    partition, in partition order of the results. Appends only set writer options, never
    session confs, so they can share the session."""
    return each(topic.spark, sorted(batches.items()),
                lambda _session, batch: topic.partition(batch[0]).append(*batch[1]),
                APPEND_THREADS, name="append", own_sessions=False)


def _numbered_in_frame_order(shaped) -> tuple:
    """Number every row 0..n-1 in the frame's order without a sort or a shuffle.

    ``monotonically_increasing_id`` is the Spark partition id in the upper 31 bits and the
    row's index inside its Spark partition in the lower 33: one small job counts the rows
    of each Spark partition, and each row's number is the rows before its partition plus
    its index (what ``RDD.zipWithIndex`` does). The frame is persisted first, so the ids
    the count saw are the ids numbered. Returns the numbered frame and the persisted one.
    """
    from pyspark.sql import functions as F

    shaped = shaped.withColumn("_spark_partition", F.spark_partition_id()).persist()
    counts = sorted((r["_spark_partition"], r["n"]) for r in
                    shaped.groupBy("_spark_partition").agg(F.count("*").alias("n")).collect())
    before, base = 0, {}
    for spark_partition, n in counts:
        base[spark_partition] = before
        before += n
    bases = F.create_map(*[F.lit(x) for pair in base.items() for x in pair]) if base else F.create_map()
    index = F.col("_order").bitwiseAND(F.lit((1 << 33) - 1))
    numbered = shaped.withColumn("_seq", (F.element_at(bases, F.col("_spark_partition")) + index).cast("long"))
    return numbered.drop("_order", "_spark_partition"), shaped


def produce_frame(topic: Topic, frame, now_ms: int, source: str = "DataFrame") -> list[AppendResult]:
    """Append a DataFrame of records (columns key, value, timestamp, and optionally headers
    and partition), in its row order, one atomic append per partition.

    ``timestamp`` may be a TIMESTAMP or epoch milliseconds (BIGINT). Checks run as one
    Spark aggregation before anything is written.
    """
    from pyspark.sql import Window
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
    kafka_partition = F.udf(lambda key: None if key is None else (murmur2(key) & 0x7FFFFFFF) % spec.partitions,
                            T.IntegerType())
    key_bytes = F.col("key").cast("binary")
    # Kafka's partitioner on a one-partition topic answers 0 for every key: skip the hashing.
    one_partition = spec.partitions == 1 and "partition" not in columns
    if one_partition:
        partition = F.when(F.col("key").isNotNull(), F.lit(0))  # a null key is refused as before
    elif "partition" in columns:
        partition = F.coalesce(F.col("partition").cast("int"), kafka_partition(key_bytes))
    else:
        partition = kafka_partition(key_bytes)
    shaped = frame.select(
        F.monotonically_increasing_id().alias("_order"),
        F.col("key").cast(spec.key_type).alias("key"),
        F.col("value").cast(spec.value_type).alias("value"),
        ts.alias("timestamp"),
        headers.cast(HEADERS_TYPE).alias("headers"),
        partition.alias("_partition"),
    )
    # Order inside each partition follows the frame's order; number it 0..n-1.
    if one_partition:
        numbered, cached = _numbered_in_frame_order(shaped)
    else:
        numbered = shaped.withColumn(
            "_seq", F.row_number().over(Window.partitionBy("_partition").orderBy("_order")) - 1
        ).drop("_order")
        numbered = cached = numbered.persist()
    try:
        checks = numbered.agg(
            F.count(F.when(F.col("key").isNull(), 1)).alias("null_keys"),
            F.count(F.when(F.col("timestamp").isNull(), 1)).alias("null_timestamps"),
            F.count(F.when(F.col("_partition").isNull(), 1)).alias("no_partition"),
            F.count(F.when((F.col("_partition") < 0) | (F.col("_partition") >= spec.partitions), 1)).alias(
                "out_of_range"
            ),
        ).collect()[0]
        problems = []
        if spec.config.compact and checks["null_keys"]:
            problems.append(Problem(source, None, None, "key", f"{checks['null_keys']} record(s) without a key; "
                                    "a compacted topic needs a key on every record"))
        if checks["null_timestamps"]:
            problems.append(Problem(source, None, None, "timestamp",
                                    f"{checks['null_timestamps']} record(s) without a timestamp"))
        if checks["out_of_range"]:
            problems.append(Problem(source, None, None, "partition", f"{checks['out_of_range']} record(s) with a "
                                    f"partition outside 0..{spec.partitions - 1}"))
        if checks["no_partition"] and not spec.config.compact:
            problems.append(Problem(source, None, None, "partition", f"{checks['no_partition']} record(s) with "
                                    "neither a key nor a partition"))
        if problems:
            raise RecordError(problems)
        counts = {r["_partition"]: (AppendedRecords(r["n"], r["bytes"], r["oldest"]), r["newest"])
                  for r in numbered.groupBy("_partition").agg(
                      F.count("*").alias("n"), F.sum(record_size_column()).alias("bytes"),
                      F.min(F.unix_millis("timestamp")).alias("oldest"),
                      F.max(F.unix_millis("timestamp")).alias("newest")).collect()}
        topic.ensure()
        return _append_all(topic, {p: (numbered.where(F.col("_partition") == p).drop("_partition"), appended, newest)
                                   for p, (appended, newest) in counts.items()})
    finally:
        cached.unpersist()
