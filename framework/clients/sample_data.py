"""Sample records for a topic spec: keyed updates, tombstones, headers, realistic clocks.

Built as a Spark DataFrame from ``spark.range`` (nothing passes through the driver), for
the quick start, the notebooks and the benchmark. Deterministic for a given seed, on any
cluster: the random draws hash the row number (``F.rand`` would depend on how Spark split
the range, so a cluster and a laptop would make different data).
"""

from __future__ import annotations

from framework.spec import TopicSpec

DAY_MS = 86_400_000


def sample_frame(spark, spec: TopicSpec, records: int, now_ms: int, keys: int | None = None,
                 span_ms: int = 10 * DAY_MS, tombstone_rate: float = 0.05, seed: int = 7):
    """``records`` records over ``keys`` keys with timestamps spread over ``span_ms`` before now.

    Timestamps grow with the row number (a producer's clock), with a little jitter, and
    out of order when the topic compacts by timestamp (an out-of-order feed is what that
    strategy is for). Values are small JSON documents; about ``tombstone_rate`` of them
    are tombstones on compacted topics. A ``version`` header counts each key's updates.
    """
    from pyspark.sql import functions as F

    def uniform(salt: int):
        """A draw in [0, 1) that depends only on the row number and the salt."""
        return (F.abs(F.xxhash64(F.col("n"), F.lit(seed), F.lit(salt))) % F.lit(1_000_000)) / F.lit(1_000_000.0)

    keys = keys or max(1, records // 5)
    frame = spark.range(records).withColumnRenamed("id", "n")
    key_id = (F.abs(F.xxhash64(F.col("n"), F.lit(seed))) % keys).cast("long")
    jitter = 60_000 if spec.config.compaction_strategy != "timestamp" else 6 * 3_600_000
    base = F.lit(now_ms - span_ms) + (F.col("n") * F.lit(span_ms) / F.lit(max(records, 1))).cast("long")
    noise = ((uniform(0) - F.lit(0.5)) * F.lit(2 * jitter)).cast("long")
    timestamp = F.least(F.greatest(base + noise, F.lit(0)), F.lit(now_ms))
    key = F.concat(F.lit(f"{spec.topic}-"), F.lpad(key_id.cast("string"), 6, "0"))
    document = F.to_json(F.struct(key_id.alias("id"), F.col("n").alias("seq"),
                                  F.round(uniform(1) * 1000, 2).alias("amount")))
    tombstone = uniform(2) < F.lit(tombstone_rate if spec.config.compact else 0.0)
    value = F.when(tombstone, F.lit(None).cast("string")).otherwise(document)
    version = F.col("n").cast("string").cast("binary")
    headers = F.array(
        F.struct(F.lit("source").alias("key"), F.lit("sample").cast("binary").alias("value")),
        F.struct(F.lit("version").alias("key"), version.alias("value")),
    )
    if spec.key_type == "binary":
        key = key.cast("binary")
    if spec.value_type == "binary":
        value = value.cast("binary")
    return frame.select(key.alias("key"), value.alias("value"), timestamp.alias("timestamp"), headers.alias("headers"))
