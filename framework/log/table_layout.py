"""How a partition table is laid out: its Delta schema, the contract's record size, and
the table properties that carry the spec (time-travel window, data skipping, the configs).
"""

from __future__ import annotations

from framework.log import warehouse
from framework.spec import TopicSpec

#: Commit metadata carries the offset bookkeeping; keep the log at least this long.
MIN_LOG_RETENTION_MS = 24 * 3600 * 1000
RECORD_COLUMNS = ("offset", "timestamp", "key", "value", "headers")
FORMAT_VERSION = "1"

#: The ``headers`` column's type as SQL, for casting incoming records to it.
HEADERS_TYPE = "array<struct<key:string,value:binary>>"


def table_schema(spec: TopicSpec):
    """The Delta schema of every partition table of ``spec``'s topic."""
    from pyspark.sql import types as T

    def kind(name: str):
        return T.BinaryType() if name == "binary" else T.StringType()

    # Delta has no NOT NULL inside arrays; produce checks header names instead.
    header = T.StructType(
        [T.StructField("key", T.StringType(), True), T.StructField("value", T.BinaryType(), True)]
    )
    return T.StructType(
        [
            T.StructField("offset", T.LongType(), False),
            T.StructField("timestamp", T.TimestampType(), False),
            T.StructField("key", kind(spec.key_type), True),
            T.StructField("value", kind(spec.value_type), True),
            T.StructField("headers", T.ArrayType(header, True), False),
            T.StructField("_size", T.LongType(), False),
            T.StructField("_delete_horizon", T.TimestampType(), True),
            T.StructField("_segment", T.LongType(), False),
        ]
    )


#: The contract's size of a record, as Spark SQL over its key, value and headers columns.
#: Most records have no headers: the CASE skips the per-row lambda for them (it is
#: interpreted, not compiled).
RECORD_SIZE_SQL = (
    "CAST(coalesce(octet_length(key), 0) + coalesce(octet_length(value), 0) + coalesce("
    "CASE WHEN coalesce(size(headers), 0) <= 0 THEN CAST(0 AS BIGINT) ELSE aggregate(headers, CAST(0 AS BIGINT), "
    "(acc, h) -> acc + octet_length(h.key) + coalesce(octet_length(h.value), 0)) END, 0) AS BIGINT)"
)


def record_size_column():
    """The contract's size: UTF-8 bytes of key and value, and of every header's name and
    value. One parsed expression: built from column functions it was some 130 Py4J calls,
    for every append of every partition."""
    from pyspark.sql import functions as F

    return F.expr(RECORD_SIZE_SQL)


def desired_properties(spec: TopicSpec, partition: int) -> dict[str, str]:
    """Table properties: Delta's time-travel window from the spec, and the spec's settings."""
    window = spec.config.time_travel_retention_ms
    # No delta.setTransactionRetentionDuration: topiclake claims with three app ids only, and
    # with a retention set Delta leaves the SetTransactions out of the version checksum, so
    # every claimed commit would rebuild the table state to find them
    # (framework/log/delta_transactions.py).
    # Deletion vectors are left as the table (or the platform's default) has them: with
    # them a compaction marks rows instead of rewriting files (stages/compaction_vectors.py;
    # 5M clean records + 50k updates: 0.36 s against 2.8 s), but delta-rs 1.6.6's
    # to_pyarrow_table cannot read a table with them, and CONTRACT section 11 says every
    # Delta reader must. Opt in per table when your readers can (README, "How the cost
    # grows"); vacuum purges them.
    props = {
        "delta.deletedFileRetentionDuration": f"interval {window} milliseconds",
        "delta.logRetentionDuration": f"interval {max(window, MIN_LOG_RETENTION_MS)} milliseconds",
        # Data skipping on what the cleaner filters by; key and value stats are waste.
        "delta.dataSkippingStatsColumns": "offset,timestamp,_size,_delete_horizon",
        # What each commit removed, inserted or updated: the guarantee checks pair only that
        # (framework.checks.changes), not the whole table.
        "delta.enableChangeDataFeed": "true",
        # Checkpoints cost more than the small commits they follow (framework/log/warehouse.py).
        "delta.checkpointInterval": str(warehouse.CHECKPOINT_INTERVAL),
        "topiclake.format.version": FORMAT_VERSION,
        "topiclake.topic": spec.topic,
        "topiclake.partition": str(partition),
        "topiclake.key.type": spec.key_type,
        "topiclake.value.type": spec.value_type,
    }
    for name, value in spec.config.to_kafka().items():
        if isinstance(value, (list, tuple)):
            value = ",".join(str(v) for v in value)
        props[f"topiclake.config.{name}"] = "" if value is None else str(value)
    return props

