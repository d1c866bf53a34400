"""Driver-side rows appended to a local Delta table without a Spark job.

A DataFrame write of a few rows is a Spark job: in a new process its planning, code
generation and Parquet writer are cold, and the write then runs Delta's auto compaction
hook, which on topiclake's own tables packed the history's files after nearly every run
(an OPTIMIZE, more Spark jobs). The history append of an idle ``maintain`` of 100
partitions in a new process took 7.8 s of its 15.9 s (2026-11-30, docs/performance-log.md,
stop 66). Here Arrow writes the rows as one Parquet file in the table's folder, and Delta's
transaction API commits that file as a blind append (``WRITE``, mode Append), as a
DataFrame write commits its files.

This applies when the table is on the local file system, the session has a JVM, the
table has no feature a rewrite may not meet (``version_checksum.REWRITE_BLOCKING_FEATURES``)
and no column mapping, and its columns are the rows' (names, types and nullability; no
partition columns), all read from the transaction's snapshot. Otherwise
nothing is written and the caller makes its DataFrame write. The file carries Delta's
``numRecords`` statistic but no value bounds, so no read skips it; these are small tables.
A crash between the file and the commit leaves a file that no version lists, which VACUUM
removes, as after a killed Spark write. The commit does not run Delta's auto compaction:
the caller bins its own small files (:func:`pack_small_files`).
"""

from __future__ import annotations

import json
import os
import uuid
from typing import Iterable

from framework.local_rows import arrow_rows, struct_of
from framework.log import version_checksum
from framework.log.commit_log import local_folder
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
    import pyarrow.parquet as pq

    txn = delta.delta_log(path).startTransaction()
    operation = delta.write_operation("Append")  # before the file: its shape may differ
    # the transaction's own snapshot, not a checksum: a concurrent writer's may not be written yet
    metadata = txn.metadata()
    features = set(str(txn.protocol().readerAndWriterFeatureNames().mkString("\n")).split("\n"))
    if (features & version_checksum.REWRITE_BLOCKING_FEATURES or not metadata.partitionColumns().isEmpty()
            or str(metadata.columnMappingMode().name()) != "none"
            or _columns(json.loads(metadata.schemaString())) != _columns(struct.jsonValue())):
        return None
    name = f"part-00000-{uuid.uuid4()}-c000.snappy.parquet"
    written = os.path.join(folder, name)
    pq.write_table(table, written, compression="snappy")
    add = delta.cls("org.apache.spark.sql.delta.actions.Action").fromJson(json.dumps({"add": {
        "path": name, "partitionValues": {}, "size": os.path.getsize(written),
        "modificationTime": int(os.path.getmtime(written) * 1000), "dataChange": True,
        "stats": json.dumps({"numRecords": table.num_rows})}}))
    return int(txn.commit(delta.seq([add]), operation))


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
