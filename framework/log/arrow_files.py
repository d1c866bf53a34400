"""Driver-side rows written as Delta data files by Arrow, with no Spark job: each
partition's Parquet file in its folder (``_segment=3/part-...``) and the ``add`` action
Delta's own writer makes of it (partition values, statistics).

Rows that are on the driver already (a produce from JSON lines, a history row, a committed
offset) cost a Spark job to write through Delta's ``writeFiles``, and in a new process
that job's planning, code generation and Parquet writer are cold: a produce of 5,000 lines
into 100 new partitions spent 25 s of its 35 s in those appends (docs/performance-log.md,
stop 74). Here Arrow writes the files and the caller commits them through Delta's
transaction API, as ``writeFiles`` hands its files to the commit.

The files are Delta's in every respect a reader sees: the table's columns (nullability
too) without its partition columns, those in the folder names and ``partitionValues``, and
Delta's statistics: ``numRecords`` and, for the columns the table names in
``delta.dataSkippingStatsColumns``, ``minValues``/``maxValues`` (none for a column that is
all nulls; a timestamp in UTC, truncated to the millisecond, as Delta writes it) and
``nullCount``. A table that names no such columns gets ``numRecords`` alone (topiclake's
own small tables; no read skips their files). ``tests/test_arrow_files.py`` pins the actions
to those Delta writes for the same rows.

Rows are not taken (None, nothing written; the caller writes through Spark) when the table
has a feature a rewrite may not meet (``version_checksum.REWRITE_BLOCKING_FEATURES``),
column mapping or column invariants; when its columns are not the rows' (names, types,
nullability); when a partition column is not an integer, or a statistics column neither
an integer nor a timestamp; when a NOT NULL column holds a null, so that Delta's writer
refuses it with its own error; and when a partition column holds a null. A crash between
a file and its commit leaves a file that no version lists, which VACUUM removes, as after
a killed Spark write.
"""

from __future__ import annotations

import json
import os
import uuid

from framework.log import file_stats, version_checksum

__all__ = ["CODECS", "CODEC_SETTING", "add_actions", "data_files", "dictionary_columns", "new_file", "session_codec",
           "statistics", "stats_columns", "table_struct", "takes", "write_metrics", "written_metrics"]

#: Parquet's codecs as Spark names them (``spark.sql.parquet.compression.codec``): Arrow's
#: name for each, and what Spark's writer puts before ``.parquet`` in a file's name. Arrow
#: writes neither Hadoop's framing of LZ4 (Spark's ``lz4``) nor LZO.
CODECS = {"snappy": ("snappy", ".snappy"), "none": ("none", ""), "uncompressed": ("none", ""),
          "gzip": ("gzip", ".gz"), "brotli": ("brotli", ".br"), "zstd": ("zstd", ".zstd"),
          "lz4_raw": ("lz4", ".lz4raw")}
#: What Spark's writer uses unless told otherwise, and so files written with no session.
SPARK_DEFAULT_CODEC = "snappy"
#: The session setting that names the codec.
CODEC_SETTING = "spark.sql.parquet.compression.codec"


def session_codec(spark) -> str | None:
    """The codec Spark's Parquet writer uses in ``spark``'s session (a key of :data:`CODECS`),
    so that Arrow writes what Spark would; None when Arrow does not write it."""
    name = spark.conf.get(CODEC_SETTING, SPARK_DEFAULT_CODEC).lower()
    return name if name in CODECS else None


def data_files(delta, txn, folder: str, table, max_records_per_file: int | None = None,
               append: bool = False) -> list | None:
    """``table`` (an Arrow table of every column of the table of ``txn``, partition columns
    included, as Spark maps the table's schema to Arrow's) written as Parquet files in the
    table's ``folder``, one per partition value and up to ``max_records_per_file`` rows
    each: their ``add`` actions, or None when the table does not take such files (nothing
    is written). ``append``: the files are a blind append's, which a table with deletion
    vectors takes too (the new files carry none; their bounds are tight)."""
    metadata, features = txn.metadata(), _features(txn)
    struct = table_struct(txn, metadata, append, features)
    codec = session_codec(delta.spark)
    if struct is None or codec is None:
        return None
    partition_columns = list(delta.items(metadata.partitionColumns()))
    named = metadata.configuration().get("delta.dataSkippingStatsColumns")
    adds = add_actions(folder, table, struct, partition_columns,
                       stats_columns(str(named.get()) if named.isDefined() else None, partition_columns),
                       max_records_per_file, codec, tight_bounds="deletionVectors" in features)
    if adds is None:
        return None
    action = delta.cls("org.apache.spark.sql.delta.actions.Action")
    return [action.fromJson(json.dumps({"add": add})) for add in adds]


def add_actions(folder: str, table, struct, partition_columns: list[str], stats_columns: list[str],
                max_records_per_file: int | None = None, codec: str = SPARK_DEFAULT_CODEC,
                tight_bounds: bool = False) -> list[dict] | None:
    """:func:`data_files` for a table whose schema (``struct``, a ``StructType`` a rewrite may
    meet: see ``table_struct``), partition columns and statistics columns the caller read,
    compressed by ``codec`` (of :data:`CODECS`): the ``add`` actions as dicts (as in the
    Delta log), or None (nothing is written); ``tight_bounds``: as :func:`statistics`."""
    import pyarrow.compute as pc
    from pyspark.sql.pandas.types import to_arrow_schema

    if not takes(struct, partition_columns, stats_columns):
        return None
    if not table.schema.equals(to_arrow_schema(struct), check_metadata=False):
        return None
    # a null where Delta's writer refuses it, or a null partition value (Delta names its folder
    # by a rule of its own)
    if any(table.column(f.name).null_count for f in struct.fields if not f.nullable or f.name in partition_columns):
        return None
    if partition_columns:
        keys = table.select(partition_columns).group_by(partition_columns).aggregate([]).to_pylist()
    else:
        keys = [{}]
    pieces = []  # (partition values, rows, statistics), all made before any file is written
    for values in keys:
        rows = table
        for name, value in values.items():
            rows = rows.filter(pc.equal(rows.column(name), value))
        rows = rows.drop_columns(partition_columns)
        step = max_records_per_file or max(rows.num_rows, 1)
        for start in range(0, max(rows.num_rows, 1), step):
            piece = rows.slice(start, step)
            stats = statistics(piece, stats_columns, tight_bounds)
            if stats is None:
                return None
            pieces.append(({name: str(value) for name, value in values.items()}, piece, stats))
    return [_written(folder, values, rows, stats, codec) for values, rows, stats in pieces]


def write_metrics(adds: list) -> dict:
    """The operation metrics Delta's ``writeFiles`` registers for a write of these files
    (``AddFile`` actions)."""
    return written_metrics([json.loads(add.json())["add"] for add in adds])


def written_metrics(actions: list[dict]) -> dict:
    """:func:`write_metrics` of ``add`` actions as dicts (as in the Delta log)."""
    return {"numFiles": len(actions), "numOutputBytes": sum(a["size"] for a in actions),
            "numOutputRows": sum(json.loads(a["stats"])["numRecords"] for a in actions)}


def table_struct(txn, metadata, append: bool = False, features: set[str] | None = None):
    """The table's schema (a ``StructType``) from the transaction's ``metadata``, or None when the
    table's columns carry what a Spark write enforces or maps (invariants, column mapping)
    or it has a feature a rewrite may not meet (``append``: an append, which meets deletion
    vectors). Read from the transaction's own snapshot, not a checksum: a concurrent
    writer's may not be written yet. ``features``: its protocol's, when the caller read
    them."""
    from pyspark.sql.types import StructType

    blocking = version_checksum.REWRITE_BLOCKING_FEATURES - ({"deletionVectors"} if append else set())
    features = _features(txn) if features is None else features
    schema_string = str(metadata.schemaString())
    if (features & blocking or str(metadata.columnMappingMode().name()) != "none"
            or "delta.invariants" in schema_string):
        return None
    return StructType.fromJson(json.loads(schema_string))


def _features(txn) -> set[str]:
    """The table features of the transaction's protocol, those a legacy protocol version
    implies included (a writer 3's check constraints, which a table whose protocol an
    ``ADD CONSTRAINT`` raised from writer 2 lists nowhere)."""
    found, features = set(), txn.protocol().implicitlyAndExplicitlySupportedFeatures().iterator()
    while features.hasNext():
        found.add(str(features.next().name()))
    return found


def stats_columns(named: str | None, partition_columns: list[str]) -> list[str]:
    """The columns whose bounds the table's files carry, from ``delta.dataSkippingStatsColumns``
    (``named``; None when the table does not set it)."""
    if named is None:
        return []
    return [c.strip() for c in named.split(",") if c.strip() and c.strip() not in partition_columns]


def takes(struct, partition_columns: list, stats_columns: list) -> bool:
    from pyspark.sql import types as T

    kinds = {f.name: f.dataType for f in struct.fields}
    integers = (T.LongType, T.IntegerType, T.ShortType, T.ByteType)
    return (all(isinstance(kinds.get(c), integers) for c in partition_columns)
            and all(isinstance(kinds.get(c), (*integers, T.TimestampType)) for c in stats_columns))


def statistics(rows, stats_columns: list, tight_bounds: bool = False) -> str | None:
    """Delta's ``stats`` of ``rows``, or None when a bound cannot be written as Delta writes it;
    ``tight_bounds``: with ``tightBounds`` true, as Delta writes a new file's in a table whose
    protocol has deletion vectors (its bounds are of every row: no vector hides one yet)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    stats: dict = {"numRecords": rows.num_rows}
    tight = {"tightBounds": True} if tight_bounds else {}
    if not stats_columns:
        return json.dumps({**stats, **tight}, separators=(",", ":"))
    lows, highs, nulls = {}, {}, {}
    for name in stats_columns:
        column = rows.column(name)
        nulls[name] = column.null_count
        if column.null_count == len(column):
            continue
        bounds = pc.min_max(column)
        low, high = bounds["min"], bounds["max"]
        if pa.types.is_timestamp(column.type):
            low, high = _delta_timestamp(low), _delta_timestamp(high)
            if low is None or high is None:
                return None
        else:
            low, high = low.as_py(), high.as_py()
        lows[name], highs[name] = low, high
    stats.update({"minValues": lows, "maxValues": highs, "nullCount": nulls, **tight})
    return json.dumps(stats, separators=(",", ":"))


def _delta_timestamp(scalar) -> str | None:
    """A timestamp scalar as Delta's statistics write it, truncated to the millisecond."""
    import pyarrow as pa

    micros = scalar.cast(pa.timestamp("us", tz="UTC")).cast(pa.int64()).as_py()
    return file_stats.timestamp_statistic(micros // 1000)


def dictionary_columns(rows) -> list[str]:
    """The columns (Parquet's leaf paths) a file's writer dictionary-encodes, given the first
    ``rows`` it writes: all but a top-level column whose values there do not repeat, half or
    more of them distinct (an offset, a compacted topic's keys and values, timestamps). Arrow
    builds a dictionary for every column by default and gives it up once it outgrows its
    page: for those columns that hashing bought nothing and cost a quarter of a rewrite's
    encoding (2.5M records of 200 bytes: 1.44 s of CPU without, 1.93 s with; the file 3%
    smaller). Nested columns keep theirs (a header's keys repeat)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    def distinct(column) -> bool:
        return pc.count_distinct(column).as_py() * 2 > len(column) - column.null_count

    unique = {field.name for field in rows.schema
              if field.type.num_fields == 0 and len(rows) and distinct(rows.column(field.name))}
    # the leaf paths as Parquet names them (a list's "<name>.list.element", a map's "key_value")
    footer = pa.BufferOutputStream()
    pq.write_metadata(rows.schema, footer)
    return [column.path for column in pq.read_metadata(pa.BufferReader(footer.getvalue())).schema
            if column.path not in unique]


def new_file(partition_values: dict, change: bool = False, codec: str = SPARK_DEFAULT_CODEC) -> str:
    """A new data file's path relative to the table, named as Delta's writer names it: in its
    partition's folder, under ``_change_data`` for a change data file, with its ``codec``."""
    kind = "cdc" if change else "part"
    return "/".join([*(["_change_data"] if change else []),
                     *(f"{name}={value}" for name, value in partition_values.items()),
                     f"{kind}-00000-{uuid.uuid4()}.c000{CODECS[codec][1]}.parquet"])


def _written(folder: str, partition_values: dict, rows, stats: str, codec: str) -> dict:
    """``rows`` written as one Parquet file in its partition's folder, as an ``add`` action."""
    import pyarrow.parquet as pq

    relative = new_file(partition_values, codec=codec)
    written = os.path.join(folder, *relative.split("/"))
    os.makedirs(os.path.dirname(written), exist_ok=True)
    pq.write_table(rows, written, compression=CODECS[codec][0], use_dictionary=dictionary_columns(rows))
    return {"path": relative, "partitionValues": partition_values, "size": os.path.getsize(written),
            "modificationTime": int(os.path.getmtime(written) * 1000), "dataChange": True, "stats": stats}
