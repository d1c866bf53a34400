"""A retention commit written through Delta's transaction API instead of a DELETE
(:mod:`framework.stages.file_rewrite` writes it; this module says what it touches).

Retention removes a prefix of the log: every record below the new log start. The files
that may hold one are known without reading a record: a segment holds offsets from its
base (its ``_segment`` partition value) up, so only files of segments below the new log
start can, and of those, a file whose statistics put its first offset at or past it
cannot. Each record of those files is kept or dropped (a ``delete`` change feed row); the
commit is a ``DELETE`` operation with a DELETE's metrics, whose predicate is the one
Delta's DELETE is given. On a table with deletion vectors turned on the records are
marked in vectors instead, as Delta's DELETE marks them (:func:`vector_cut`).
"""

from __future__ import annotations

import json
from typing import Callable

from framework.log import file_stats, version_checksum
from framework.log.delta_transactions import DeltaJvm, jvm_of
from framework.stages import file_rewrite
from framework.stages.compaction import DELETE


def predicate(new_start: int) -> str:
    """The records a retention cut at ``new_start`` deletes, as Delta's DELETE is given them
    (the segment bound lets Delta prune whole segments)."""
    return f"_segment < {int(new_start)} AND offset < {int(new_start)}"


def _delete_operation(delta: DeltaJvm, condition: str):
    """``DeltaOperations.Delete`` of ``condition`` as Delta 4.x shapes it; None when this Delta shapes it otherwise."""
    expression = delta.spark._jsparkSession.sessionState().sqlParser().parseExpression(condition)
    return delta.operation("Delete", delta.seq([expression]))


def delete_recorded(new_start: int) -> tuple[str, dict]:
    """:func:`_delete_operation` of :func:`predicate` as its commit records it (Spark's
    text of the parsed, unresolved condition), for a commit made without the JVM."""
    condition = f"(('_segment < {int(new_start)}) AND ('offset < {int(new_start)}))"
    return "DELETE", {"predicate": json.dumps([condition])}


def may_hold_below(add: dict, new_start: int) -> bool:
    """Whether the file of ``add`` (an add action, as in the Delta log) may hold a record
    below ``new_start``: its segment starts below it, and its statistics (when collected)
    do not put its first offset at or past it."""
    segment = (add.get("partitionValues") or {}).get("_segment")
    if segment is None or int(segment) >= new_start:
        return segment is None  # a file outside the segment layout: read it
    return file_stats.may_hold_offsets(file_stats.of(add), None, new_start)


def delete_recorded_with_vectors(new_start: int):
    """The operation Delta's DELETE of :func:`predicate` with deletion vectors records, for
    ``compaction_vectors.commit_locally`` (``recorded``): its vectors counted as a MERGE's
    (``compaction_vectors.vectors_counted``), the files every row of which is gone removed,
    and, as Delta 4.1 records it, no bytes removed (``tests/test_deletion_vectors.py`` pins
    it to Delta's DELETE)."""
    from framework.log.commit_files import Operation
    from framework.stages.compaction_vectors import vectors_counted

    name, parameters = delete_recorded(new_start)

    def recorded(deleted: int, stamped: int, touched: list, emptied: list, copies: list) -> Operation:
        added, vectors_removed, updated = vectors_counted(touched, emptied)
        metrics = {"numRemovedFiles": len(emptied), "numRemovedBytes": 0, "numAddedFiles": 0, "numAddedBytes": 0,
                   "numDeletedRows": deleted, "numCopiedRows": 0, "numAddedChangeFiles": 0,
                   "numDeletionVectorsAdded": added, "numDeletionVectorsRemoved": vectors_removed,
                   "numDeletionVectorsUpdated": updated}
        return Operation(name, parameters, file_rewrite.recorded_metrics(name, metrics))

    return recorded


def vector_cut(log, listed, read_version: int, new_start: int, app_id: str, epoch: int,
               delete: Callable[[], object]) -> int | None:
    """Remove every record below ``new_start`` from a table with deletion vectors turned on,
    as deletion vectors, in one commit claiming maintenance epoch ``epoch`` and made
    without the JVM (``compaction_vectors.commit_locally``): its version, or None when the
    table already holds the epoch. ``listed``: version ``read_version``'s files, with their
    vectors (``version_checksum.plain_files``); only those that may hold such a record are
    read. Where that way does not apply, ``delete`` (Delta's DELETE, which marks the same
    rows) commits instead, and its answer is returned."""
    from framework.stages import arrow_actions, compaction_vectors

    holding = listed.only((path, add) for path, add in zip(listed.paths, listed.adds, strict=True)
                          if may_hold_below(add, new_start))
    changes = arrow_actions.below(holding, new_start)
    version = compaction_vectors.commit_locally(log.spark, log.path, app_id, epoch, read_version, changes,
                                                recorded=delete_recorded_with_vectors(new_start))
    return delete() if version == compaction_vectors.NOT_LOCAL else version


def cut(log, new_start: int, app_id: str, epoch: int, removed: int, delete: Callable[[], object]) -> int | None:
    """Remove every record below ``new_start`` (``removed`` of them) in one commit claiming
    maintenance epoch ``epoch``: its version, or None when the table already holds the epoch
    (nothing is written). When this Delta has no such operation, or the version the
    transaction reads is not plain files, ``delete`` (Delta's DELETE) commits instead, and
    its answer is returned. The commit's user metadata comes from the session. Committed
    without the JVM where ``file_rewrite.commit_locally`` can."""

    def touched_locally(files) -> set:
        return {version_checksum.file_name(add["path"]) for add in files.adds if may_hold_below(add, new_start)}

    def touched(read, files) -> set:
        return touched_locally(files)

    def annotate(rows):
        return rows.selectExpr("*", f"CASE WHEN `offset` < {int(new_start)} THEN '{DELETE}' END AS _action",
                               "CAST(NULL AS TIMESTAMP) AS _horizon")

    def marks():
        import pyarrow as pa
        import pyarrow.compute as pc

        def mark(offsets):
            below = pc.less(offsets, int(new_start))
            return (pc.if_else(below, pa.scalar(DELETE), pa.scalar(None, pa.string())),
                    pa.nulls(len(offsets), pa.timestamp("us", tz="UTC")))

        return mark

    def metrics(written: list, removes: list) -> dict:
        done = file_rewrite.written_summary(written, removes)
        return {
            "numRemovedFiles": done["files_removed"], "numRemovedBytes": done["bytes_removed"],
            "numAddedFiles": done["files_added"], "numAddedBytes": done["bytes_added"],
            "numDeletedRows": removed, "numCopiedRows": done["rows_written"],
            "numAddedChangeFiles": done["change_files"], "changeFileBytes": done["change_bytes"],
            "numDeletionVectorsAdded": 0, "numDeletionVectorsRemoved": 0, "numDeletionVectorsUpdated": 0,
        }

    change = file_rewrite.Rewrite(operation=lambda delta: _delete_operation(delta, predicate(new_start)),
                                   touched=touched, annotate=annotate, metrics=metrics, marks=marks,
                                   local_operation=delete_recorded(new_start), touched_locally=touched_locally)
    version = file_rewrite.commit_locally(log.spark, log.path, app_id, epoch, change)
    if version != file_rewrite.NOT_LOCAL:
        return version
    if jvm_of(log.spark) is None:  # no JVM (Spark Connect): Delta's own DELETE
        return delete()
    delta = DeltaJvm(log.spark)
    with delta.active():
        return file_rewrite.commit(delta, log.path, app_id, epoch, change, delete)
