"""A compaction commit written through Delta's transaction API instead of a MERGE
(:mod:`framework.stages.file_rewrite` writes it; this module says what it touches).

The files that hold a record the run deletes or stamps are named by the run's totals (the
same pass that counts what it removes); when the version the commit reads no longer holds
them all, one pass over the offsets, joined with the broadcast changes, finds them. Each
record of them is kept, stamped with its new delete horizon or dropped; the commit is a
``MERGE`` operation with a MERGE's metrics. More changes than :data:`MAX_CHANGES` to
broadcast, or a version that is not plain files, keep Delta's MERGE (:func:`merge`).
"""

from __future__ import annotations

import functools
from typing import Callable

from framework.log import version_checksum
from framework.log.delta_transactions import DeltaJvm, jvm_of
from framework.stages import arrow_rewrite, file_rewrite
from framework.stages.compaction import CHANGED, DELETE, STAMP

#: The most records a run may delete or stamp and still be written: each task of the
#: rewrite holds them all (offset, action, horizon: about 40 bytes each, 80 MB at this
#: bound), so that the touched files stream through in their own order.
MAX_CHANGES = 2_000_000


def available(spark, path: str, version: int, changes: int = 0) -> bool:
    """Whether this version's compaction, deleting or stamping ``changes`` records, can be
    written as a rewrite of its files."""
    return changes <= MAX_CHANGES and file_rewrite.available(spark, path, version)


def merge(log, source: Callable[[], object], end: int, stamps: bool):
    """The compaction as Delta's MERGE of ``source()`` (offset, _action, _horizon) into the
    table's segments below ``end``: a callable that builds and runs it."""

    def run():
        command = (
            log.delta_table().alias("t")
            .merge(source().alias("s"), f"t._segment < {int(end)} AND t.offset = s.offset")
            .whenMatchedDelete(condition=f"s._action = '{DELETE}'")
        )
        if stamps:
            # An update makes Delta read every column of every file the MERGE touches;
            # a MERGE that only deletes reads the offsets (5M + 50k: 3 s against 5 s).
            command = command.whenMatchedUpdate(condition=f"s._action = '{STAMP}'",
                                                set={"_delete_horizon": "s._horizon"})
        return command.execute()

    return run


def _merge_operation(delta: DeltaJvm):
    """``DeltaOperations.Merge`` as Delta 4.x shapes it; None when this Delta shapes it otherwise."""
    none = delta.none()
    return delta.operation("Merge", none, none, none, none, delta.seq([]), delta.seq([]), delta.seq([]))


#: :func:`_merge_operation` as its commit records it, for a commit made without the JVM.
MERGE_RECORDED = ("MERGE", {"predicate": "[]", "matchedPredicates": "[]", "notMatchedPredicates": "[]",
                            "notMatchedBySourcePredicates": "[]"})


def rewrite(log, source: Callable[[], object], app_id: str, epoch: int, removed: int, stamped: int,
            merge: Callable[[], object], planned_files: frozenset[str] | None = None,
            staged: file_rewrite.Staged | None = None, changes=None) -> int | None:
    """Write ``source()`` (offset, _action, _horizon of the records the run deletes or
    stamps; it removes ``removed`` records and stamps ``stamped``) as one commit: its version, or
    None when the table already holds maintenance epoch ``epoch`` (another run committed
    it; nothing is written). When the version the transaction reads is not plain files,
    ``merge`` (Delta's MERGE of the same actions) commits instead, and its answer is returned.
    ``planned_files`` names the planned version's files that hold those records: when the
    version the transaction reads still has them all, they are the files it touches (file
    names are never reused, and records appended since lie past every changed offset);
    otherwise, or without them, one pass over the offsets finds them. ``staged``: the
    rewrite written already, with other partitions' (``file_rewrite.commit`` says when it is taken).
    ``changes``: the same records as an Arrow table (``arrow_actions.changes``), which
    Arrow's rewrite marks by without a Spark job; otherwise it collects ``source()``.

    The commit's user metadata comes from the session (``commit_metadata``). With
    ``changes`` and ``planned_files`` that the version still holds, or ``staged``, it is
    committed without the JVM where ``file_rewrite.commit_locally`` can."""
    from pyspark.sql import functions as F

    # (made when Spark needs it: Arrow's rewrite of the planned files does not)
    changed = functools.cache(lambda: source().where(CHANGED).select("offset", "_action", "_horizon"))

    def touched(read, files) -> set:
        if planned_files and planned_files <= {version_checksum.file_name(a["path"]) for a in files.adds}:
            return set(planned_files)
        located = read.parquet(*files.paths).selectExpr("`offset`", "_metadata.file_name AS _file")
        # inside the transaction from here (the compact.during_commit fault point is in ``source``)
        return {row["_file"] for row in
                located.join(F.broadcast(changed()), "offset").select("_file").distinct().collect()}

    def metrics(written: list, removes: list) -> dict:
        done = file_rewrite.written_summary(written, removes)
        return {
            "operationNumSourceRows": removed + stamped, "numSourceRows": removed + stamped,
            "numTargetRowsDeleted": removed, "numTargetRowsMatchedDeleted": removed,
            "numTargetRowsUpdated": stamped, "numTargetRowsMatchedUpdated": stamped,
            "numTargetRowsCopied": max(done["rows_written"] - stamped, 0), "numTargetRowsInserted": 0,
            "numTargetFilesAdded": done["files_added"], "numTargetFilesRemoved": done["files_removed"],
            "numTargetChangeFilesAdded": done["change_files"], "numTargetChangeFileBytes": done["change_bytes"],
            "numTargetBytesAdded": done["bytes_added"], "numTargetBytesRemoved": done["bytes_removed"],
        }

    def marks():
        return arrow_rewrite.marks_of(changes if changes is not None else changed().toArrow())

    def touched_locally(files) -> set | None:
        named = {version_checksum.file_name(a["path"]) for a in files.adds}
        return set(planned_files) if planned_files and planned_files <= named else None

    change = file_rewrite.Rewrite(
        operation=_merge_operation, touched=touched,
        annotate=lambda rows: rows.join(F.broadcast(changed()), "offset", "left"), metrics=metrics, marks=marks,
        local_operation=MERGE_RECORDED, touched_locally=touched_locally if changes is not None else None)
    version = file_rewrite.commit_locally(log.spark, log.path, app_id, epoch, change, staged)
    if version != file_rewrite.NOT_LOCAL:
        return version
    if jvm_of(log.spark) is None:  # no JVM (Spark Connect): Delta's own MERGE
        return merge()
    delta = DeltaJvm(log.spark)
    with delta.active():
        return file_rewrite.commit(delta, log.path, app_id, epoch, change, merge, staged)
