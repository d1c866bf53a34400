"""framework.local_rows: driver-side rows become a JVM local relation, equal to Spark's own
list path, with no Python RDD (whose tasks each need a Python worker)."""

from __future__ import annotations

import pytest

from framework.local_rows import local_frame
from framework.log.history import HistoryRow, history_schema

ROWS = [
    (0, "k", "v", 1_700_000_000_000, [("h", b"\x00\xff"), ("h", None)]),
    (1, None, None, 1_700_000_000_001, []),  # a tombstone of a null key, no headers
    (2, "ünï", "", -1, [("", b"")]),
]


@pytest.mark.parametrize("key_type", ["string", "binary"])
def test_rows_of_records_equal_sparks_list_path_and_are_a_local_relation(spark, key_type):
    from pyspark.sql import types as T

    kind = T.BinaryType() if key_type == "binary" else T.StringType()
    header = T.StructType([T.StructField("key", T.StringType(), False), T.StructField("value", T.BinaryType(), True)])
    schema = T.StructType([T.StructField("_seq", T.LongType(), False), T.StructField("key", kind, True),
                           T.StructField("value", kind, True), T.StructField("timestamp_ms", T.LongType(), False),
                           T.StructField("headers", T.ArrayType(header, False), False)])
    rows = ROWS if key_type == "string" else [
        (s, None if k is None else k.encode(), None if v is None else v.encode(), t, h) for s, k, v, t, h in ROWS]
    ours = local_frame(spark, rows, schema)
    theirs = spark.createDataFrame(rows, schema)
    assert ours.schema == theirs.schema == schema
    assert ours.collect() == theirs.collect()
    assert ours._jdf.queryExecution().optimizedPlan().nodeName() == "LocalRelation"
    assert theirs._jdf.queryExecution().optimizedPlan().nodeName() != "LocalRelation"


def test_a_history_row_from_a_ddl_schema_and_the_history_schema_built_without_spark(spark):
    """The history's schema is built in Python (``status`` reads a local history with no
    session); Spark parses its DDL to the same schema, the one histories were created with."""
    schema = history_schema()
    ddl = ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in schema.fields)
    assert spark.createDataFrame([], ddl).schema == schema
    row = HistoryRow(run_id="r", run_started_ms=1, now_ms=2, topic="t", partition=0, stage="compact",
                     reasons=["dirty ratio"], due=True, dirty_ratio=0.5, failed_guarantees=["G1"])
    ours = local_frame(spark, [row.as_tuple()], ddl)
    assert ours.collect() == spark.createDataFrame([row.as_tuple()], schema).collect()


def test_timestamp_values_are_refused_and_an_empty_frame_of_any_schema_is_not(spark):
    with pytest.raises(TypeError, match="column t is a timestamp"):
        local_frame(spark, [(None, 1)], "t timestamp, n long")
    with pytest.raises(TypeError, match=r"column s\.d is a date"):
        local_frame(spark, [((None,),)], "s struct<d: date>")
    empty = local_frame(spark, [], "t timestamp, n long")
    assert empty.count() == 0 and [f.name for f in empty.schema.fields] == ["t", "n"]


def test_the_committed_offsets_schema_built_without_spark_is_the_ddl_tables_were_made_with(spark):
    """Built in Python (``commit-offset`` and an idle run read and write a local table with no
    session), it is the schema Spark parsed from the DDL committed-offset tables had before."""
    from framework.log.consumer_offsets import offsets_schema

    ddl = ("group STRING NOT NULL, topic STRING NOT NULL, partition INT NOT NULL, offset BIGINT NOT NULL, "
           "commit_timestamp TIMESTAMP NOT NULL")
    assert spark.createDataFrame([], ddl).schema == offsets_schema()
