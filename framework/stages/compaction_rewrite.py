"""A compaction commit written through Delta's transaction API instead of a MERGE.

Delta's MERGE costs more than the rewrite it makes. On a table of a few small files it
rebuilds the table's snapshot state, scans the target for matches, materializes its source
and rewrites the touched files, about ten Spark jobs and their planning (2.2 s of a 4.5 s
maintained partition, 2 cores, 2026-11-27); on a large one it does the same over every file
a loser sits in. For a version whose records are exactly the rows of the files its
checksum lists (:func:`framework.log.version_checksum.plain_files`: Delta lists them up
to 50 files), the same commit is written directly, as Delta's own commands write theirs:

- the files that hold a record the run deletes or stamps are found (one pass over the
  offsets, joined with the broadcast changes) and read (and only they);
- each record of them is kept, kept with its new delete horizon, or dropped, and the
  change data feed rows a MERGE would write go with them (``delete`` for a dropped
  record, ``update_preimage``/``update_postimage`` for a stamped one): one
  ``writeFiles``, which puts the feed rows in ``_change_data`` and collects the new
  files' statistics. Up to :data:`ONE_TASK_BYTES` of touched files are written by one
  task (a file per segment, in offset order); more keep the splits they were read in,
  each in the offset order of its file, so file statistics keep skipping by offset;
- one commit removes the touched files and adds the new ones, with the maintenance
  epoch's SetTransaction, as a ``MERGE`` operation.

Conflicts: the commit claims the maintenance epoch, so another maintenance run on the
partition conflicts as it would with a MERGE, and it removes the files it rewrites, so a
writer that removed one of them first makes Delta refuse it (the caller re-plans). A
producer's append is no conflict: it commits files of its own, the run's decisions apply
to the table the transaction reads (as a MERGE's do), and appended records lie past the
cleanable end. Every other case (deletion vectors, column mapping, row tracking, no file
list in the checksum, more changes than :data:`MAX_CHANGES` to broadcast, a remote store,
a Spark Connect session) keeps the MERGE.
"""

from __future__ import annotations

import json
import time
from typing import Callable
from urllib.parse import unquote

from framework.log import version_checksum
from framework.log.delta_transactions import DeltaJvm, jvm_of
from framework.stages.compaction import DELETE, STAMP

#: A variant of a touched record in the rewrite: the record as kept, or a change feed row.
_KEPT, _DELETED, _PREIMAGE, _POSTIMAGE = 0, 1, 2, 3
#: The most records a run may delete or stamp and still be written: each task of the
#: rewrite holds them all (offset, action, horizon: about 40 bytes each, 80 MB at this
#: bound), so that the touched files stream through in their own order.
MAX_CHANGES = 2_000_000
#: Touched files up to this size are written by one task, one file per segment; larger
#: rewrites keep the splits they were read in.
ONE_TASK_BYTES = 128 * 1024 * 1024


def available(spark, path: str, version: int, changes: int = 0) -> bool:
    """Whether this version's compaction, deleting or stamping ``changes`` records, can be
    written as a rewrite of its files."""
    if jvm_of(spark) is None or changes > MAX_CHANGES:
        return False
    return (version_checksum.rewritable(version_checksum.plain_files(path, version))
            and _merge_operation(DeltaJvm(spark)) is not None)


def _merge_operation(delta: DeltaJvm):
    """``DeltaOperations.Merge`` as Delta 4.x shapes it; None when this Delta shapes it otherwise."""
    from py4j.protocol import Py4JError, Py4JJavaError

    none = delta.none()
    try:
        return delta.cls("org.apache.spark.sql.delta.DeltaOperations$Merge")(
            none, none, none, none, delta.seq([]), delta.seq([]), delta.seq([]))
    except Py4JError as error:
        if isinstance(error, Py4JJavaError):
            raise
        return None


def _file_name(path: str) -> str:
    return unquote(path).rsplit("/", 1)[-1]


def rewrite(log, actions, app_id: str, epoch: int, removed: int, stamped: int, merge: Callable[[], object]
            ) -> int | None:
    """Write ``actions`` (offset, _action, _horizon: what the run does to each record; the
    run removes ``removed`` records and stamps ``stamped``) as one commit: its version, or
    None when the table already holds maintenance epoch ``epoch`` (another run committed
    it; nothing is written). When the version the transaction reads is not plain files,
    ``merge`` (Delta's MERGE of the same actions) commits instead, and its answer is returned.

    The commit's user metadata comes from the session (``commit_metadata``)."""
    delta = DeltaJvm(log.spark)
    with delta.active():
        return _rewrite_in(delta, log, actions, app_id, epoch, removed, stamped, merge)


def _rewrite_in(delta: DeltaJvm, log, actions, app_id: str, epoch: int, removed: int, stamped: int, merge):
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    spark = log.spark
    txn = delta.delta_log(log.path).startTransaction()
    operation = _merge_operation(delta)
    claim = delta.cls("org.apache.spark.sql.delta.actions.SetTransaction")(
        app_id, int(epoch), delta.some(int(time.time() * 1000)))
    if delta.claimed_version(txn, app_id) >= epoch:
        return None
    # As in a MERGE, the run's decisions apply to the table the transaction reads: the
    # planned version, or a later one when another writer (a producer) committed since.
    read_version = int(txn.snapshot().version())
    files = version_checksum.plain_files(log.path, read_version)
    if not version_checksum.rewritable(files):  # a writer since the plan left a version not its files: MERGE
        return merge()
    adds = files.adds
    # Inside the transaction from here (the compact.during_commit fault point is in ``actions``).
    schema = StructType.fromJson(json.loads(files.schema_json))
    columns = schema.fieldNames()
    # with the change data feed on, ``writeFiles`` puts the rows with a ``_change_type`` in
    # ``_change_data``; without it they would be written as records
    feed = str(files.configuration.get("delta.enableChangeDataFeed", "false")).lower() == "true"
    changed = actions.where(F.col("_action").isin(DELETE, STAMP)).select("offset", "_action", "_horizon")
    read = spark.read.schema(schema).option("basePath", files.folder)
    located = read.parquet(*files.paths).select("offset", F.col("_metadata.file_name").alias("_file"))
    touched = {row["_file"] for row in located.join(F.broadcast(changed), "offset").select("_file").distinct().collect()}
    by_name = {_file_name(add["path"]): add for add in adds}
    if len(by_name) != len(adds) or not touched <= set(by_name):
        raise RuntimeError(f"{log.name}: the files of version {read_version} are not what its checksum lists")
    removes = delta.removes(by_name[name] for name in sorted(touched))
    written = []
    if touched:
        paths = [p for p in files.paths if _file_name(p) in touched]
        rows = read.parquet(*paths).select(*columns).join(F.broadcast(changed), "offset", "left")
        action = F.col("_action")
        variants = (F.when(action.isNull(), F.array(F.lit(_KEPT)))
                    .when(action == DELETE, F.array(F.lit(_DELETED)))
                    .otherwise(F.array(F.lit(_KEPT), F.lit(_PREIMAGE), F.lit(_POSTIMAGE))))
        if not feed:  # no change data feed on this table: only the records as kept
            variants = F.when(action.isNull() | (action == STAMP), F.array(F.lit(_KEPT))).otherwise(F.array())
        rows = rows.withColumn("_variant", F.explode(variants))
        new_horizon = (action == STAMP) & F.col("_variant").isin(_KEPT, _POSTIMAGE)
        change_type = (F.when(F.col("_variant") == _DELETED, F.lit("delete"))
                       .when(F.col("_variant") == _PREIMAGE, F.lit("update_preimage"))
                       .when(F.col("_variant") == _POSTIMAGE, F.lit("update_postimage")))
        out = rows.select(
            *[F.when(new_horizon, F.col("_horizon")).otherwise(F.col(c)).alias(c) if c == "_delete_horizon" else F.col(c)
              for c in columns],
            *([change_type.cast("string").alias("_change_type")] if feed else []))
        if sum(int(by_name[name]["size"]) for name in touched) <= ONE_TASK_BYTES:
            # one file per segment, in offset order, so file statistics keep skipping by offset
            out = out.repartition(1).sortWithinPartitions("_segment", "offset")
        written = delta.items(txn.writeFiles(out._jdf, delta.none(), False, delta.seq([])))
    _register_merge_metrics(delta, txn, written, removes, removed, stamped)
    return int(txn.commit(delta.seq([*written, *removes, claim]), operation))


def _register_merge_metrics(delta: DeltaJvm, txn, written: list, removes: list, removed: int, stamped: int) -> None:
    """The operation metrics a MERGE commit carries (``DESCRIBE HISTORY`` shows them; a MERGE
    commit without them is refused), from what this one wrote. The copied rows come from
    the new files' statistics: 0 in a session that collects none."""
    adds = [json.loads(action.json()) for action in written]
    data = [a["add"] for a in adds if "add" in a]
    changes = [a["cdc"] for a in adds if "cdc" in a]
    rows_written = sum(json.loads(a.get("stats") or "{}").get("numRecords", 0) for a in data)
    values = {
        "operationNumSourceRows": removed + stamped, "numSourceRows": removed + stamped,
        "numTargetRowsDeleted": removed, "numTargetRowsMatchedDeleted": removed,
        "numTargetRowsUpdated": stamped, "numTargetRowsMatchedUpdated": stamped,
        "numTargetRowsCopied": max(rows_written - stamped, 0), "numTargetRowsInserted": 0,
        "numTargetFilesAdded": len(data), "numTargetFilesRemoved": len(removes),
        "numTargetChangeFilesAdded": len(changes), "numTargetChangeFileBytes": sum(c["size"] for c in changes),
        "numTargetBytesAdded": sum(a["size"] for a in data),
        "numTargetBytesRemoved": sum(int(r.getFileSize()) for r in removes),
    }
    spark_context = delta.spark.sparkContext._jsc.sc()
    create = delta.cls("org.apache.spark.sql.execution.metric.SQLMetrics").createMetric
    metrics = {}
    for name, value in values.items():
        metric = create(spark_context, name)
        metric.set(int(value))
        metrics[name] = metric
    java_map = delta.cls("java.util.HashMap")()
    for name, metric in metrics.items():
        java_map.put(name, metric)
    to_scala = delta.cls("org.apache.spark.api.python.PythonUtils").toScalaMap
    txn.registerSQLMetrics(delta.spark._jsparkSession, to_scala(java_map))
