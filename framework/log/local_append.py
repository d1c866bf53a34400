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

While no session has started (a verb's deferred session, ``framework.deferred_session``),
an append or a replace whose table allows it is committed without a JVM
(``framework.log.own_commits``): an idle ``maintain``'s history rows, its only write, their
packing once ``history.PACK_AT`` files are live (an OPTIMIZE commit, :func:`packed_locally`),
and a ``commit-offset``. Otherwise this applies when the table
is on the local file system, the session has a JVM and the table takes Arrow's files
(:mod:`framework.log.arrow_files`: no feature a rewrite may not meet, its columns the
rows'; a replace also needs a table without partition columns), all read from the
transaction's snapshot. Otherwise nothing is written and the caller makes
its DataFrame write. An append does not run Delta's auto compaction: the caller bins its
own small files (:func:`pack_small_files`), on a local table by Arrow too.
"""

from __future__ import annotations

from typing import Iterable

from framework.deferred_session import not_started
from framework.local_rows import arrow_rows, struct_of
from framework.log import arrow_files, commit_files, own_commits, version_checksum
from framework.log.commit_log import local_commits, local_folder
from framework.log.delta_transactions import DeltaJvm, through_the_jvm
from framework.log.warehouse import delta_table_sql


def appended_locally(spark, path: str, rows: Iterable[tuple], schema) -> int | None:
    """Append ``rows`` (tuples in ``schema``'s column order) to the local Delta table at
    ``path`` as one Parquet file and one commit; the version committed, or None when this
    way does not apply (nothing is written). Raises Delta's errors as a write does."""
    folder = local_folder(path)
    if folder is None:
        return None
    table = arrow_rows(rows, schema)
    if not_started(spark):  # no JVM yet: commit it here if this table lets us, rather than start one
        version = own_commits.appended(path, table)
        if version is not None:
            return version
    return through_the_jvm(spark, lambda delta: _append_in(delta, path, folder, table), lambda: None)


def _append_in(delta: DeltaJvm, path: str, folder: str, table) -> int | None:
    txn = delta.delta_log(path).startTransaction()
    operation = delta.write_operation("Append")  # before the file: its shape may differ
    adds = arrow_files.data_files(delta, txn, folder, table, append=True)
    return None if adds is None else int(txn.commit(delta.seq(adds), operation))


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
    if not_started(spark) and own_commits.replaced(path, lambda files: _replacement(files, struct, replace)):
        return True  # committed without a JVM (else: as below, through Delta)
    return through_the_jvm(spark, lambda delta: _replaced_in(delta, path, folder, replace, struct), lambda: None)


def _replacement(files, struct, replace):
    """``replace`` of the rows of ``files``, in their columns and types."""
    rows = _rows_of(files, struct)
    return replace(rows).select(rows.schema.names).cast(rows.schema)


def _replaced_in(delta: DeltaJvm, path: str, folder: str, replace, struct) -> bool | None:
    txn = delta.delta_log(path).startTransaction()
    operation = delta.write_operation("Overwrite")  # before the file: its shape may differ
    files = version_checksum.plain_files(path, int(txn.snapshot().version()))
    # a partitioned table's rows lack their partition values when read file by file
    if not version_checksum.rewritable(files) or not txn.metadata().partitionColumns().isEmpty():
        return None
    txn.readWholeTable()
    adds = arrow_files.data_files(delta, txn, folder, _replacement(files, struct, replace))
    if adds is None:
        return None
    # as Delta's own overwrite records them (vacuum's rules read what a WRITE removed)
    delta.register_metrics(txn, {**arrow_files.write_metrics(adds), **commit_files.removed_metrics(files.adds)})
    txn.commit(delta.seq([*adds, *delta.removes(files.adds)]), operation)
    return True


def read_locally(path: str, schema=None, columns: list[str] | None = None, where=None):
    """The rows of the newest version of the local Delta table at ``path`` (``columns``;
    those ``where`` keeps, an Arrow expression), read by Arrow from the files its checksum
    lists in ``schema`` (a column a file lacks reads as nulls; None: the version's own
    schema, from its checksum; a DDL string needs a Spark session to parse); None when the
    version is not such files. For topiclake's own small tables, where a Spark query costs
    seconds in a new process."""
    commits = local_commits(path, 1)
    files = version_checksum.plain_files(path, commits[0].version) if commits else None
    if files is None:
        return None
    return _rows_of(files, files.schema if schema is None else struct_of(schema), columns, where)


def _rows_of(files, struct, columns: list[str] | None = None, where=None):
    """The rows of ``files`` (``version_checksum.PlainFiles``) as an Arrow table in ``struct``."""
    import pyarrow.dataset as ds
    from pyspark.sql.pandas.types import to_arrow_schema

    return ds.dataset(list(files.paths), schema=to_arrow_schema(struct), format="parquet").to_table(
        columns=columns, filter=where)


def pack_small_files(spark, path: str, version: int, at_files: int) -> bool:
    """Bin-pack the table's files (Delta's OPTIMIZE) when ``version`` holds ``at_files`` or
    more, by its checksum; whether it ran. What Delta's auto compaction does after a write,
    at a threshold of the caller's: on a local table, Arrow writes the rows of every live
    file as one file (:func:`packed_locally`), else Delta's OPTIMIZE runs (Spark jobs: 1.6 s
    of a long run's every 32nd run, stop 102)."""
    count = version_checksum.file_count(path, version)
    if count is None or count < at_files:
        return False
    if not packed_locally(spark, path):
        spark.sql(f"OPTIMIZE {delta_table_sql(path)}").collect()
    return True


def packed_locally(spark, path: str) -> bool | None:
    """Every live file of the small local Delta table at ``path`` rewritten as one by Arrow,
    committed as Delta's OPTIMIZE commits a bin-packing: an ``OPTIMIZE`` operation whose
    actions all say ``dataChange=false`` (streaming readers skip it). Only its files are
    read, so an append meanwhile does not conflict; a prune that removed one does. True once
    committed; None when this way does not apply (nothing is written)."""
    folder = local_folder(path)
    if folder is None:
        return None
    if not_started(spark) and _packed_without_jvm(path):
        return True  # committed without a JVM (else: as below, through Delta)
    return through_the_jvm(spark, lambda delta: _packed_in(delta, path, folder), lambda: None)


def _packed_without_jvm(path: str) -> bool:
    """:func:`_packed_in`'s commit made by topiclake itself (``own_commits.replaced``, as a
    bin-packing), where the table lets it: whether it was committed (if not, nothing is
    left written)."""
    packed = own_commits.replaced(path, lambda files: _rows_of(files, files.schema), commit_files.OPTIMIZE_RECORDED)
    return packed is not None


def _packed_in(delta: DeltaJvm, path: str, folder: str) -> bool | None:
    import json

    txn = delta.delta_log(path).startTransaction()
    files = version_checksum.plain_files(path, int(txn.snapshot().version()))
    if not version_checksum.rewritable(files) or not txn.metadata().partitionColumns().isEmpty():
        return None
    adds = arrow_files.data_files(delta, txn, folder, _rows_of(files, files.schema))
    if adds is None:
        return None
    action = delta.cls("org.apache.spark.sql.delta.actions.Action")
    packed = [action.fromJson(json.dumps({"add": {**json.loads(add.json())["add"], "dataChange": False}}))
              for add in adds]
    txn.commit(delta.seq([*packed, *delta.removes(files.adds, data_change=False)]), delta.optimize_operation())
    return True
