"""Maintenance commits written through Delta's transaction API: the touched files rewritten.

Delta's MERGE and DELETE cost more than the rewrite they make. On a table of a few small
files each rebuilds the table's snapshot state, scans the target for what it touches and
rewrites those files, several Spark jobs and their planning (a MERGE took 2.2 s of a 4.5 s
maintained partition, a retention's DELETE 2.2 s of 3.5 s; 2 cores, 2026-11-27). For a
version whose records are exactly the rows of the files its checksum lists
(:func:`framework.log.version_checksum.plain_files`: Delta lists them up to 50 files), the
same commit is written directly, as Delta's own commands write theirs:

- the stage names the files that hold a record it deletes or stamps, and how each record
  of them fares (:class:`Rewrite`); only those files are read;
- each record of them is kept, kept with its new delete horizon, or dropped, and the
  change data feed rows Delta's command would write go with them (``delete`` for a
  dropped record, ``update_preimage``/``update_postimage`` for a stamped one): written by
  Arrow when the stage gives :attr:`Rewrite.marks` and Arrow writes the table's files
  (:mod:`framework.stages.arrow_rewrite`, a touched file per core), else by one
  ``writeFiles``, which puts the feed rows in ``_change_data`` and collects the new
  files' statistics. Up to :data:`ONE_TASK_BYTES` of touched files are written by one
  task (a file per segment, in offset order); more keep the splits they were read in,
  each in the offset order of its file, so file statistics keep skipping by offset;
- one commit removes the touched files and adds the new ones, with the maintenance
  epoch's SetTransaction, as the stage's operation (``MERGE``, ``DELETE``) with the
  operation metrics Delta's command would register.

On a local table whose newest version topiclake can commit to itself
(``own_commits.committable``), the rewrite is committed without the JVM
(:func:`commit_locally`): the same files, written by Arrow, and the same commit, made as
the Delta protocol defines it and created only if its version is still free. A lost race
goes back to Delta's transaction, which reads the new version and judges the conflict.
Through the JVM each commit is a dozen Py4J calls and Delta's snapshot, conflict check and
checksum; in a new process it is the JVM itself, 4 to 6 s.

Conflicts: the commit claims the maintenance epoch, so another maintenance run on the
partition conflicts as it would with Delta's command, and it removes the files it
rewrites, so a writer that removed one of them first makes Delta refuse it (the caller
re-plans). A producer's append is no conflict: it commits files of its own, the run's
decisions apply to the table the transaction reads (as Delta's command's do), and
appended records lie past every offset a maintenance stage deletes or stamps. Every other
case (deletion vectors, column mapping, row tracking, no file list in the checksum, a
remote store, a Spark Connect session) keeps Delta's command.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from dataclasses import dataclass
from typing import Callable

from framework.deferred_session import not_started
from framework.log import commit_files, file_stats, own_commits, version_checksum
from framework.log.delta_commits import USER_METADATA_CONF, block_conf
from framework.log.delta_transactions import DeltaJvm, jvm_of
from framework.stages import arrow_rewrite
from framework.stages.compaction import DELETE, STAMP  # what a stage does to a record (``_action``)

#: A touched record in the rewrite: the record as kept, or a change feed row.
_KEPT, _DELETED, _PREIMAGE, _POSTIMAGE = 0, 1, 2, 3
#: Touched files up to this size are written by one task, one file per segment; larger
#: rewrites keep the splits they were read in.
ONE_TASK_BYTES = 128 * 1024 * 1024


def available(spark, path: str, version: int, listed: version_checksum.PlainFiles | None = None) -> bool:
    """Whether a version's maintenance can be written as a rewrite of its files (``listed``:
    the version's ``plain_files``, when the caller has them). A session not started yet is
    not asked for its JVM: the rewrite may commit without one."""
    files = listed if listed is not None else version_checksum.plain_files(path, version)
    return (not_started(spark) or jvm_of(spark) is not None) and version_checksum.rewritable(files)


#: The operation metrics Delta records of those its commands register, by operation
#: (``DeltaOperations``' own lists; ``tests/test_compaction_rewrite.py`` and
#: ``test_retention_rewrite.py`` pin a commit made here to one made through Delta).
RECORDED_METRICS = {
    "MERGE": frozenset({"numSourceRows", "numTargetRowsInserted", "numTargetRowsUpdated",
                        "numTargetRowsMatchedUpdated", "numTargetRowsNotMatchedBySourceUpdated",
                        "numTargetRowsDeleted", "numTargetRowsMatchedDeleted", "numTargetRowsNotMatchedBySourceDeleted",
                        "numTargetRowsCopied", "numTargetFilesAdded", "numTargetFilesRemoved",
                        "numTargetChangeFilesAdded", "numTargetBytesAdded", "numTargetBytesRemoved",
                        "numTargetDeletionVectorsAdded", "numTargetDeletionVectorsRemoved",
                        "numTargetDeletionVectorsUpdated"}),
    "DELETE": frozenset({"numAddedFiles", "numRemovedFiles", "numAddedBytes", "numRemovedBytes", "numDeletedRows",
                         "numCopiedRows", "numAddedChangeFiles", "numDeletionVectorsAdded",
                         "numDeletionVectorsRemoved", "numDeletionVectorsUpdated"}),
}


def recorded_metrics(operation: str, registered: dict) -> dict:
    """The operation metrics a commit of ``operation`` records of those ``registered``, as
    Delta's command records them: its own list, and a MERGE's rows written."""
    recorded = {name: value for name, value in registered.items() if name in RECORDED_METRICS[operation]}
    if operation == "MERGE":
        recorded["numOutputRows"] = sum(int(registered.get(name, 0)) for name in
                                        ("numTargetRowsInserted", "numTargetRowsUpdated", "numTargetRowsCopied"))
    return recorded


@dataclass(frozen=True)
class Rewrite:
    """A stage's rewrite of a version's files."""

    #: Delta's operation for the commit (``DeltaOperations.Merge``, ``...Delete``), made in
    #: the JVM; None when this Delta shapes it otherwise
    operation: Callable[[DeltaJvm], object]
    #: given the version's files, the names of those holding a record the stage deletes or stamps
    touched: Callable[[object, version_checksum.PlainFiles], set]
    #: given the touched files' rows, the same rows with ``_action`` (DELETE, STAMP or null)
    #: and ``_horizon`` (a stamped record's delete horizon)
    annotate: Callable[[object], object]
    #: the operation metrics to register, from the actions written and the files removed
    #: (dicts as in the Delta log: ``{"add": ...}`` and ``{"cdc": ...}``; ``remove`` actions)
    metrics: Callable[[list, list], dict]
    #: :attr:`annotate` for Arrow (``arrow_rewrite``), called inside the transaction; None:
    #: the rewrite is written by Spark
    marks: Callable[[], arrow_rewrite.Marks] | None = None
    #: the operation's name and parameters as the commit records them (``MERGE``,
    #: ``DELETE``), and :attr:`touched` without Spark (None: it needs Spark's read), for a
    #: commit without the JVM (:func:`commit_locally`); None: only Delta's transaction commits it
    local_operation: tuple[str, dict] | None = None
    touched_locally: Callable[[version_checksum.PlainFiles], set | None] | None = None


@dataclass
class Staged:
    """A rewrite written already, with other partitions' (``staged_rewrite``): the files it
    replaces, and the add and cdc actions of the files written for them (paths relative to
    the table, the files in place: ``files``). Until a commit takes them, :meth:`discard`
    deletes them (a commit that then fails leaves them to VACUUM, as a failed write does)."""

    touched: frozenset[str]
    actions: tuple[dict, ...]
    files: tuple[str, ...]
    taken: bool = False

    def discard(self) -> None:
        for path in () if self.taken else self.files:
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)
        self.files = ()


def commit(delta: DeltaJvm, path: str, app_id: str, epoch: int, rewrite: Rewrite, otherwise: Callable[[], object],
           staged: Staged | None = None) -> int | None:
    """Write ``rewrite`` as one commit claiming maintenance epoch ``epoch``: its version, or
    None when the table already holds the epoch (another run committed it; nothing is
    written). When the version the transaction reads is not plain files, ``otherwise``
    (Delta's own command) commits instead, and its answer is returned. Run it inside
    ``delta.active()``: the commit's user metadata comes from the session. ``staged``: the
    rewrite's files written already, taken when the version the transaction reads still
    holds every file they replace (else discarded, and the rewrite written here)."""
    from pyspark.sql.types import StructType

    spark = delta.spark
    operation = rewrite.operation(delta)
    if operation is None:  # this Delta shapes the operation otherwise: its own command
        if staged is not None:
            staged.discard()
        return otherwise()
    txn = delta.delta_log(path).startTransaction()
    claim = delta.cls("org.apache.spark.sql.delta.actions.SetTransaction")(
        app_id, int(epoch), delta.some(int(time.time() * 1000)))
    if delta.claimed_version(txn, app_id) >= epoch:
        if staged is not None:
            staged.discard()
        return None
    # As in Delta's command, the run's decisions apply to the table the transaction reads:
    # the planned version, or a later one when another writer (a producer) committed since.
    read_version = int(txn.snapshot().version())
    files = version_checksum.plain_files(path, read_version)
    if not version_checksum.rewritable(files):  # a writer since the plan left a version not its files
        if staged is not None:
            staged.discard()
        return otherwise()
    schema = StructType.fromJson(json.loads(files.schema_json))
    columns = schema.fieldNames()
    by_name = {version_checksum.file_name(add["path"]): add for add in files.adds}
    if staged is not None and not staged.touched <= set(by_name):  # another writer removed one since
        staged.discard()
        staged = None
    read = spark.read.schema(schema).option("basePath", files.folder)
    touched = set(staged.touched) if staged is not None else rewrite.touched(read, files)
    if len(by_name) != len(files.adds) or not touched <= set(by_name):
        raise RuntimeError(f"{path}: the files of version {read_version} are not what its checksum lists")
    removed = [by_name[name] for name in sorted(touched)]
    removes = delta.removes(removed)
    written, as_logged = [], []  # the actions, and the same as in the Delta log
    if staged is not None:
        as_logged = list(staged.actions)
    elif touched and rewrite.marks is not None and (by_arrow := arrow_rewrite.write(
            delta, txn, files, touched, rewrite.marks, change_feed(files.configuration), ONE_TASK_BYTES)) is not None:
        as_logged = by_arrow
    elif touched:
        touched_paths = [p for p in files.paths if version_checksum.file_name(p) in touched]
        rows = rewrite.annotate(read.parquet(*touched_paths).select(*columns))
        out = rewritten_rows(rows, columns, change_feed(files.configuration))
        if sum(int(by_name[name]["size"]) for name in touched) <= ONE_TASK_BYTES:
            # one file per segment, in offset order, so file statistics keep skipping by offset
            # coalesced, not shuffled: the read, the join and the write are one stage (a first
            # maintain of small partitions 0.30 against 0.33 s each, 500k 2.8 against 3.2 s)
            out = out.coalesce(1).sortWithinPartitions("_segment", "offset")
        written = delta.items(txn.writeFiles(out._jdf, delta.none(), False, delta.seq([])))
        as_logged = [json.loads(one.json()) for one in written]
    if as_logged and not written:
        action = delta.cls("org.apache.spark.sql.delta.actions.Action")
        written = [action.fromJson(json.dumps(one)) for one in as_logged]
    delta.register_metrics(txn, rewrite.metrics(as_logged, removed))
    if staged is not None:
        staged.taken = True
    return int(txn.commit(delta.seq([*written, *removes, claim]), operation))


#: What :func:`commit_locally` answers when its way does not apply (nothing is written).
NOT_LOCAL = "not local"


def commit_locally(spark, path: str, app_id: str, epoch: int, rewrite: Rewrite,
                   staged: Staged | None = None) -> int | None | str:
    """:func:`commit` without the JVM, on a local table whose newest version topiclake can
    commit to itself (``own_commits.committable``) and whose touched files are known
    without Spark (:attr:`Rewrite.touched_locally`, or ``staged``'s): the version
    committed; None when the table already holds maintenance epoch ``epoch`` (nothing is
    written); :data:`NOT_LOCAL` when this way does not apply, or another writer took the
    version first (nothing is written, ``staged`` left as it was: Delta's transaction then
    reads that version and judges the conflict). Run it inside the maintenance commit's
    ``session_confs`` block: its user metadata is the block's."""
    user_metadata = block_conf(USER_METADATA_CONF)
    base = own_commits.rewrite_base(path)
    if (rewrite.local_operation is None or (rewrite.touched_locally is None and staged is None)
            or user_metadata is None or base is None):
        return NOT_LOCAL
    folder, version, checksum = base
    files = version_checksum.plain_files(path, version)
    if (not version_checksum.rewritable(files) or not isinstance(checksum.get("setTransactions"), list)
            or "delta.setTransactionRetentionDuration" in files.configuration):
        return NOT_LOCAL  # (Delta drops expired claims as it reads them)
    if max((t["version"] for t in checksum["setTransactions"] if t.get("appId") == app_id), default=-1) >= epoch:
        if staged is not None:
            staged.discard()
        return None
    by_name = {version_checksum.file_name(add["path"]): add for add in files.adds}
    if staged is not None:  # written already, with other partitions'
        touched, written = set(staged.touched), list(staged.actions)
        if not touched or not touched <= set(by_name):
            return NOT_LOCAL
    else:
        touched = rewrite.touched_locally(files)
        codec = own_commits.session_codec(spark)
        if touched is None or not touched or not touched <= set(by_name):
            return NOT_LOCAL
        written = arrow_rewrite.write_local(checksum["metadata"], codec, files, touched, rewrite.marks,
                                            change_feed(files.configuration), ONE_TASK_BYTES)
        if written is None:
            return NOT_LOCAL
    adds = [one["add"] for one in written if "add" in one]
    changes = [one["cdc"] for one in written if "cdc" in one]
    removed = [by_name[name] for name in sorted(touched)]
    name, parameters = rewrite.local_operation
    made = None
    if own_commits.committable(checksum, version, new_files=len(adds) - len(removed), rewrite=True):
        made = commit_files.commit(folder, version + 1, checksum, adds, commit_files.removes(removed),
                                   user_metadata=user_metadata, claim=(app_id, epoch), changes=changes,
                                   operation=commit_files.Operation(
                                       name, parameters, recorded_metrics(name, rewrite.metrics(written, removed))))
    if made:
        if staged is not None:
            staged.taken = True
        return version + 1
    if staged is None:  # (a staged rewrite's files are the JVM route's to take or discard)
        commit_files.remove_files(folder, [*adds, *changes])
    return NOT_LOCAL


def change_feed(configuration: dict) -> bool:
    """Whether a table's properties turn its change data feed on."""
    return str(configuration.get("delta.enableChangeDataFeed", "false")).lower() == "true"


def rewritten_rows(rows, columns: list[str], feed: bool, carried: tuple[str, ...] = ()):
    """The touched files' ``rows`` (``_action``, ``_horizon``: :attr:`Rewrite.annotate`'s) as
    the rewrite writes them: ``columns`` (and ``carried``) of each record as kept, and, with
    the change data feed on (``feed``), the feed rows with their ``_change_type``, which
    ``writeFiles`` puts in ``_change_data`` (without the feed they would be written as records)."""
    # SQL text, not Column trees: a call into the JVM each, not one per node
    if feed:
        variants = (f"CASE WHEN _action IS NULL THEN array({_KEPT}) WHEN _action = '{DELETE}' "
                    f"THEN array({_DELETED}) ELSE array({_KEPT}, {_PREIMAGE}, {_POSTIMAGE}) END")
    else:  # no change data feed on this table: only the records as kept
        variants = f"CASE WHEN _action IS NULL OR _action = '{STAMP}' THEN array({_KEPT}) ELSE array() END"
    rows = rows.selectExpr("*", f"explode({variants}) AS _variant")
    new_horizon = f"_action = '{STAMP}' AND _variant IN ({_KEPT}, {_POSTIMAGE})"
    change_type = (f"CAST(CASE WHEN _variant = {_DELETED} THEN 'delete' WHEN _variant = {_PREIMAGE} THEN "
                   f"'update_preimage' WHEN _variant = {_POSTIMAGE} THEN 'update_postimage' END AS STRING)")
    stamped = f"CASE WHEN {new_horizon} THEN _horizon ELSE _delete_horizon END AS _delete_horizon"
    return rows.selectExpr(*(f"`{c}`" for c in carried),
                           *[stamped if c == "_delete_horizon" else f"`{c}`" for c in columns],
                           *([f"{change_type} AS _change_type"] if feed else []))


def written_summary(written: list[dict], removed: list[dict]) -> dict:
    """What a rewrite wrote (``{"add": ...}`` and ``{"cdc": ...}`` actions) and removed (the
    files' actions), for its operation metrics: data files and bytes added, records in them
    (from their statistics: 0 in a session that collects none), change files and bytes,
    files and bytes removed."""
    data = [a["add"] for a in written if "add" in a]
    changes = [a["cdc"] for a in written if "cdc" in a]
    return {
        "files_added": len(data), "bytes_added": sum(a["size"] for a in data),
        "rows_written": sum(file_stats.of(a).records or 0 for a in data),
        "change_files": len(changes), "change_bytes": sum(c["size"] for c in changes),
        "files_removed": len(removed), "bytes_removed": sum(int(r["size"]) for r in removed),
    }
