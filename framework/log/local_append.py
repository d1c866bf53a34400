"""Driver-side rows written to a small local Delta table without a Spark job: appended,
or replacing the table's rows; and such a table's rows read back by Arrow.

A DataFrame write of a few rows is a Spark job: in a new process its planning, code
generation and Parquet writer are cold, and the write then runs Delta's auto compaction
hook, which on topiclake's own tables packed the history's files after nearly every run
(an OPTIMIZE, more Spark jobs). The history append of an idle ``maintain`` of 100
partitions in a new process took 7.8 s of its 15.9 s (2026-11-30, docs/performance-log.md,
stop 66). Here Arrow writes the rows as one Parquet file in the table's folder, and Delta's
transaction API commits that file as a blind append (``WRITE``, mode Append), as a
DataFrame write commits its files. A replace (:func:`replaced_locally`, the consumer
offsets' upsert) reads the version's rows by Arrow from the files its checksum lists and
commits the new rows' file with every old file removed (``WRITE``, mode Overwrite): a
committed offset took 0.35 s warm with the one Spark job of a ``writeFiles``, and a
Spark job is seconds in a new process (docs/performance-log.md, stop 72).

This applies when the table is on the local file system, the session has a JVM, the
table has no feature a rewrite may not meet (``version_checksum.REWRITE_BLOCKING_FEATURES``)
and no column mapping, and its columns are the rows' (names, types and nullability; no
partition columns), all read from the transaction's snapshot. Otherwise
nothing is written and the caller makes its DataFrame write. The file carries Delta's
``numRecords`` statistic but no value bounds, so no read skips it; these are small tables.
A crash between the file and the commit leaves a file that no version lists, which VACUUM
removes, as after a killed Spark write. An append does not run Delta's auto compaction:
the caller bins its own small files (:func:`pack_small_files`).
"""

from __future__ import annotations

import json
import os
import uuid
from typing import Iterable

from framework.local_rows import arrow_rows, struct_of
from framework.log import version_checksum
from framework.log.commit_log import local_folder, read_commits
from framework.log.delta_transactions import DeltaJvm, through_the_jvm
from framework.log.warehouse import delta_table_sql


def appended_locally(spark, path: str, rows: Iterable[tuple], schema) -> int | None:
    """Append ``rows`` (tuples in ``schema``'s column order) to the local Delta table at
    ``path`` as one Parquet file and one commit; the version committed, or None when this
    way does not apply (nothing is written). Raises Delta's errors as a write does."""
    folder = local_folder(path)
    if folder is None:
        return None
    table, struct = arrow_rows(rows, schema), struct_of(schema)
    return through_the_jvm(spark, lambda delta: _append_in(delta, path, folder, table, struct), lambda: None)


def _append_in(delta: DeltaJvm, path: str, folder: str, table, struct) -> int | None:
    txn = delta.delta_log(path).startTransaction()
    operation = delta.write_operation("Append")  # before the file: its shape may differ
    if not _takes(txn, struct):
        return None
    return int(txn.commit(delta.seq([_written(delta, folder, table)]), operation))


def replaced_locally(spark, path: str, replace, schema) -> bool | None:
    """Replace the rows of the small local Delta table at ``path`` by ``replace(rows)`` (an
    Arrow table of its rows in ``schema`` in, the new rows out) in one overwrite commit:
    every live file removed, the new rows written as one file. The transaction reads the
    whole table, so a commit to it in between makes this one conflict, as a DataFrame
    overwrite would (the caller retries). True once committed; None when this way does not
    apply (also: the version's files are not listed by its checksum), with nothing written."""
    folder = local_folder(path)
    if folder is None:
        return None
    struct = struct_of(schema)
    return through_the_jvm(spark, lambda delta: _replaced_in(delta, path, folder, replace, struct), lambda: None)


def _replaced_in(delta: DeltaJvm, path: str, folder: str, replace, struct) -> bool | None:
    txn = delta.delta_log(path).startTransaction()
    operation = delta.write_operation("Overwrite")  # before the file: its shape may differ
    files = version_checksum.plain_files(path, int(txn.snapshot().version()))
    if not version_checksum.rewritable(files) or not _takes(txn, struct):
        return None
    txn.readWholeTable()
    rows = _rows_of(files, struct)
    add = _written(delta, folder, replace(rows).select(rows.schema.names).cast(rows.schema))
    txn.commit(delta.seq([add, *delta.removes(files.adds)]), operation)
    return True


def read_locally(spark, path: str, schema, columns: list[str] | None = None, where=None):
    """The rows of the newest version of the local Delta table at ``path`` (``columns``;
    those ``where`` keeps, an Arrow expression), read by Arrow from the files its checksum
    lists in ``schema`` (a column a file lacks reads as nulls); None when the version is not
    such files. For topiclake's own small tables, where a Spark query costs seconds in a new
    process."""
    commits = read_commits(spark, path, 1)
    files = version_checksum.plain_files(path, commits[0].version) if commits else None
    return None if files is None else _rows_of(files, struct_of(schema), columns, where)


def _rows_of(files, struct, columns: list[str] | None = None, where=None):
    """The rows of ``files`` (``version_checksum.PlainFiles``) as an Arrow table in ``struct``."""
    import pyarrow.dataset as ds
    from pyspark.sql.pandas.types import to_arrow_schema

    return ds.dataset(list(files.paths), schema=to_arrow_schema(struct), format="parquet").to_table(
        columns=columns, filter=where)


def _takes(txn, struct) -> bool:
    """Whether the table of ``txn`` takes Arrow's file of rows in ``struct`` as it is: no
    feature a rewrite may not meet, no partition columns, no column mapping, the same
    columns. Read from the transaction's own snapshot, not a checksum: a concurrent
    writer's may not be written yet."""
    metadata = txn.metadata()
    features = set(str(txn.protocol().readerAndWriterFeatureNames().mkString("\n")).split("\n"))
    return not (features & version_checksum.REWRITE_BLOCKING_FEATURES or not metadata.partitionColumns().isEmpty()
                or str(metadata.columnMappingMode().name()) != "none"
                or _columns(json.loads(metadata.schemaString())) != _columns(struct.jsonValue()))


def _written(delta: DeltaJvm, folder: str, table):
    """``table`` written as one Parquet file in the table's folder, as an ``add`` action."""
    import pyarrow.parquet as pq

    name = f"part-00000-{uuid.uuid4()}-c000.snappy.parquet"
    written = os.path.join(folder, name)
    pq.write_table(table, written, compression="snappy")
    return delta.cls("org.apache.spark.sql.delta.actions.Action").fromJson(json.dumps({"add": {
        "path": name, "partitionValues": {}, "size": os.path.getsize(written),
        "modificationTime": int(os.path.getmtime(written) * 1000), "dataChange": True,
        "stats": json.dumps({"numRecords": table.num_rows})}}))


def _columns(schema_json: dict) -> list[tuple]:
    return [(f["name"], json.dumps(f["type"], sort_keys=True), f.get("nullable", True))
            for f in schema_json.get("fields", [])]


def pack_small_files(spark, path: str, version: int, at_files: int) -> bool:
    """Bin-pack the table's files (Delta's OPTIMIZE) when ``version`` holds ``at_files`` or
    more, by its checksum; whether it ran. What Delta's auto compaction does after a write,
    at a threshold of the caller's."""
    count = version_checksum.file_count(path, version)
    if count is None or count < at_files:
        return False
    spark.sql(f"OPTIMIZE {delta_table_sql(path)}").collect()
    return True
