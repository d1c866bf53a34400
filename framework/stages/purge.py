"""A purge of deletion vectors (Delta's ``REORG TABLE ... APPLY (PURGE)``) made by topiclake
itself on a local table, without the JVM.

The vacuum stage purges a partition's deletion vectors once they are half a window old
(``cleaner.rules.purge_due``): each file one hides rows of is rewritten without them, so
that the VACUUM one window later takes the deleted values off the disk. Through Delta that
started the JVM and a session in a new process, then ran Spark jobs over a few small files.
Here the same commit is made as Delta 4.4's REORG makes it (``OptimizeTableCommand`` with
``DeltaPurgeOperation``), from the files the version's checksum lists:

* the files: each live file whose vector hides a row (Delta's also takes a file holding a
  column the table dropped; a partition table's columns never change);
* the bins (:func:`purge_bins`): per partition, smallest file first, a new bin when the
  next file would take it past Delta's ``optimize.maxFileSize`` (1 GiB); every bin is
  rewritten, even of one file, into one new file. Delta's holds its files' rows in the
  order it read them, this one in offset order (the same rows): a bin is read whole, up
  to :data:`MAX_BIN_READ_BYTES` of files;
* one commit: ``REORG`` with Delta's parameters and metrics, at snapshot isolation, each
  new file added and each old one removed (with its vector, its statistics cut to
  ``numRecords``, as Delta's) with ``dataChange`` false: streaming readers skip it, and a
  producer's append does not conflict with it.

Only where ``own_commits.rewritable`` takes the table with its vectors, Arrow writes its
files (``arrow_rewrite.rows_written``) and reads each vector, every file has statistics
to check the new file's count by, and no other writer commits the version first.
Anything else returns None with nothing committed (what was written deleted), and the
caller runs Delta's REORG. ``tests/test_purge.py`` pins it to Delta's REORG of a copy of
the same table.
"""

from __future__ import annotations

import json
import os
from urllib.parse import unquote

from framework import faults
from framework.deferred_session import not_started
from framework.log import commit_files, deletion_vectors, file_stats, local_records, own_commits
from framework.log.delta_commits import USER_METADATA_CONF, block_conf
from framework.stages import arrow_rewrite
from framework.stages.file_rewrite import ONE_TASK_BYTES

__all__ = ["purge_bins", "purged_locally"]

#: Delta's ``spark.databricks.delta.optimize.maxFileSize`` default: the most old bytes a bin takes.
MAX_FILE_SIZE_CONF = "spark.databricks.delta.optimize.maxFileSize"
DEFAULT_MAX_BIN_BYTES = 1 << 30
#: The most old bytes a bin read whole here may have (a larger one is Delta's REORG's).
MAX_BIN_READ_BYTES = ONE_TASK_BYTES


def purge_bins(adds: list[dict], max_bin_bytes: int) -> list[list[dict]]:
    """The bins Delta's purge rewrites (``groupFilesIntoBins`` for a reorg), from the live
    files' ``add`` actions (pure): the files whose vector hides a row, per partition,
    smallest first, a new bin when the next file would take the bin past ``max_bin_bytes``."""
    by_partition: dict[str, list[dict]] = {}
    for add in adds:
        if deletion_vectors.cardinality(add) > 0:
            by_partition.setdefault(json.dumps(add.get("partitionValues") or {}, sort_keys=True), []).append(add)
    bins = []
    for files in by_partition.values():
        current, size = [], 0
        for add in sorted(files, key=lambda a: a["size"]):
            if current and size + add["size"] > max_bin_bytes:
                bins.append(current)
                current, size = [], 0
            current.append(add)
            size += add["size"]
        bins.append(current)
    return bins


def purged_locally(log) -> int | None:
    """The partition ``log``'s deletion vectors purged (see the module's text): the version
    committed (the newest, with nothing written, when no vector hides a row: Delta's REORG
    then commits nothing either), or None when this way does not apply (nothing is
    committed)."""
    base = own_commits.rewrite_base(log.path, deletion_vectors=True)
    max_bin_bytes = _max_bin_bytes(log.spark)
    if base is None or max_bin_bytes is None:
        return None
    folder, version, checksum = base
    bins = purge_bins(checksum["allFiles"], max_bin_bytes)  # (``rewritable``: every live file listed)
    if not bins:
        return version
    codec = own_commits.session_codec(log.spark)
    tight = own_commits.vectors_protocol(checksum["protocol"])
    written: list[dict] = []
    for members in bins:
        one = _bin_written(folder, checksum["metadata"], codec, tight, members)
        live = [file_stats.of(add).records for add in members]
        if one is None or None in live or file_stats.of(one).records != sum(live) - sum(
                map(deletion_vectors.cardinality, members)):
            commit_files.remove_files(folder, [*written, *([one] if one is not None else [])])
            return None  # (a bin too large, a vector not read here, or a record lost: Delta's REORG)
        written.append(one)
    purged = [add for members in bins for add in members]
    removes = [{**remove, "stats": json.dumps({"numRecords": file_stats.of(add).records}, separators=(",", ":"))}
               for remove, add in zip(commit_files.removes(purged, data_change=False), purged, strict=True)]
    faults.reached("vacuum.before_purge", log=log)
    made = commit_files.commit(folder, version + 1, checksum, written, removes,
                               user_metadata=block_conf(USER_METADATA_CONF), operation=_recorded(written, removes))
    if not made:  # another writer took the version: Delta's REORG reads it
        commit_files.remove_files(folder, written)
        return None
    faults.reached("vacuum.after_purge", log=log)
    return version + 1


class _NotRead(Exception):
    """A file or vector of a bin not read here."""


def _bin_written(folder: str, metadata: dict, codec: str | None, tight: bool, members: list[dict]) -> dict | None:
    """A bin's files, less the rows their vectors hide, written as one new file in offset
    order (read whole: a stamped tombstone's copy lies inside another file's offsets): its
    ``add``; None, nothing written, for a bin of more than :data:`MAX_BIN_READ_BYTES`, or
    a file or vector not read here."""
    if sum(add["size"] for add in members) > MAX_BIN_READ_BYTES:
        return None

    def read(schema):
        import pyarrow as pa

        tables = []
        for add in members:
            try:
                rows = local_records.visible_file(os.path.join(folder, *unquote(add["path"]).split("/")), folder,
                                                  add.get("deletionVector"), schema.names)
            except OSError as error:
                raise _NotRead(add["path"]) from error
            if rows is None:
                raise _NotRead(add["path"])
            tables.append(rows.cast(schema, safe=False))
        return pa.concat_tables(tables).sort_by("offset")

    try:
        one = arrow_rewrite.rows_written(metadata, codec, folder, members[0].get("partitionValues") or {}, read,
                                         tight)
    except _NotRead:  # (raised before the new file is opened: nothing written)
        return None
    return None if one is None else {**one, "dataChange": False}  # rearranged, not changed: streams skip it


def _max_bin_bytes(spark) -> int | None:
    """Delta's most bytes a bin takes: its default, unless a started session sets the conf
    (then None: Delta's REORG reads it as Spark parses a size)."""
    if spark is None or not_started(spark):
        return DEFAULT_MAX_BIN_BYTES
    return DEFAULT_MAX_BIN_BYTES if spark.conf.get(MAX_FILE_SIZE_CONF, None) is None else None


def _recorded(added: list[dict], removed: list[dict]) -> commit_files.Operation:
    """Delta's REORG as its commit records it: its parameters, the metrics it keeps
    (``OptimizeTableCommand.createMetrics``: the added files' sizes at Delta's percentiles)."""
    sizes = sorted(add["size"] for add in added)
    count = len(sizes)
    metrics = {"numRemovedFiles": len(removed), "numRemovedBytes": sum(r["size"] for r in removed),
               "p25FileSize": sizes[count // 4], "numDeletionVectorsRemoved": len(removed),
               "minFileSize": sizes[0], "p75FileSize": sizes[count * 3 // 4], "p50FileSize": sizes[count // 2],
               "numAddedBytes": sum(sizes), "numAddedFiles": count, "maxFileSize": sizes[-1]}
    return commit_files.Operation("REORG", {"predicate": "[]", "applyPurge": True}, metrics, "SnapshotIsolation")
