"""The rows an append commits, in the partition table's layout
(``table_layout.table_schema``): offsets numbered from the append's base, the contract's
record size, no delete horizon, the active segment.

Records come as a DataFrame (a produce of a DataFrame, an ingest from Kafka), shaped by
Spark SQL, or as driver-side rows (a produce of JSON lines or of a scenario file's steps),
an Arrow table shaped by Arrow, which ``delta_transactions.claimed_commit`` writes without
a Spark job. Driver-side rows bring their ``_size`` from ``ProducerRecord.size()``, the
size rule's Python form beside ``table_layout.RECORD_SIZE_SQL`` (``tests/test_tables.py``
pins both to the reference model's size).
"""

from __future__ import annotations

from framework.log.delta_transactions import files_for, is_arrow
from framework.log.table_layout import RECORD_SIZE_SQL, table_schema
from framework.spec import TopicSpec

__all__ = ["RECORDS_PER_APPEND_FILE", "driver_side_schema", "in_layout", "numbered"]

#: The most records one data file of an append holds (a 1M-record produce still writes in parallel).
RECORDS_PER_APPEND_FILE = 500_000


def driver_side_schema(spec: TopicSpec):
    """The Arrow schema of a produce's driver-side rows: ``_seq`` (the order offsets
    follow, from 0), the table's timestamp, key, value and headers, and ``_size``."""
    import pyarrow as pa

    table = _arrow_table_schema(spec)
    return pa.schema([pa.field("_seq", pa.int64(), nullable=False),
                      *(table.field(name) for name in ("timestamp", "key", "value", "headers", "_size"))])


def numbered(records, base: int):
    """``records`` (``_seq``, timestamp, key, value, headers; driver-side rows ``_size``
    too) with the offsets ``base + _seq``, and without ``_seq``."""
    if not is_arrow(records):
        return records.selectExpr(f"CAST({int(base)} + _seq AS BIGINT) AS `offset`", "`timestamp`", "key", "value",
                                  "headers")
    import pyarrow as pa
    import pyarrow.compute as pc

    offsets = pc.add(records.column("_seq"), pa.scalar(int(base), pa.int64()))
    return records.drop_columns(["_seq"]).append_column(pa.field("offset", pa.int64(), nullable=False), offsets)


def in_layout(records, spec: TopicSpec, segment: int, count: int):
    """``records`` (offset, timestamp, key, value, headers; driver-side rows ``_size`` too;
    ``count`` of them) as rows of the table of ``spec`` in segment ``segment``: a DataFrame
    in as many Spark partitions as it has files of up to :data:`RECORDS_PER_APPEND_FILE`
    records (Spark would otherwise write a file per input partition, however few records
    each holds), or an Arrow table in the table's columns."""
    if not is_arrow(records):
        return records.selectExpr("*", f"{RECORD_SIZE_SQL} AS _size", "CAST(NULL AS TIMESTAMP) AS _delete_horizon",
                                  f"CAST({int(segment)} AS BIGINT) AS _segment"
                                  ).coalesce(files_for(count, RECORDS_PER_APPEND_FILE))
    import pyarrow as pa

    schema = _arrow_table_schema(spec)
    added = {"_delete_horizon": pa.nulls(records.num_rows, schema.field("_delete_horizon").type),
             "_segment": pa.repeat(pa.scalar(int(segment), pa.int64()), records.num_rows)}
    return pa.table([added[f.name] if f.name in added else records.column(f.name) for f in schema], schema=schema)


def _arrow_table_schema(spec: TopicSpec):
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(table_schema(spec))
