"""Whether a Delta table is at a path, and creating one there after clearing what a create
killed before its first commit left.

The create is commit 0 written through Delta's transaction API: the table's Metadata
handed to ``OptimisticTransaction.updateMetadataForNewTable`` (which derives the protocol
from the table properties, as a create does) and committed as Delta's ``CREATE TABLE``
operation. ``DeltaTable.createIfNotExists(...).execute()`` commits the same actions after
planning a catalog command: 0.35 to 0.47 s a partition table against 0.27 to 0.32 s
(2 cores, 2026-11-27), and a new topic creates one table per partition.
``tests/test_tables.py`` pins the two commits together; the builder remains for
a Spark Connect session (no JVM here) and for a Delta whose JVM API has another shape.

Delta's create makes ``_delta_log/`` (with ``_delta_log/_staged_commits/``) before it writes
commit 0. A process killed in between leaves that folder with no commit in it, and Delta then
disagrees with itself: ``DeltaTable.isDeltaTable`` says there is no table, but a create by
path finds the folder and takes the table as there (``CREATE TABLE IF NOT EXISTS`` does
nothing, ``DeltaTable.createIfNotExists`` fails with ``DELTA_TABLE_NOT_FOUND``), so every
later run failed on that partition. Nothing was ever committed in such a folder, so clearing
it loses nothing, and the create runs again.

Only what a killed create leaves is cleared: an empty ``_staged_commits/`` and hidden
``.tmp`` files (a log store writes a commit to one, then renames it). A folder holding
anything else may hold a commit, and is never touched; each removal is non-recursive, so a
create in flight elsewhere that has just written its commit makes the clearing stop there.
One that is still writing its temporary file (a window of milliseconds) may lose that file
and fail with nothing committed, as a create racing another always could.

A local table whose protocol ``own_commits`` knows is created by topiclake itself
(``own_commits.created``), the session up or not, unless the session gives new tables
defaults of its own; while no session has started (a verb's deferred session), a killed
create's folder is cleared through the OS by the same rule.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import dataclass

from framework.deferred_session import not_started
from framework.log import own_commits
from framework.log.commit_log import DELTA_LOG, STAGED_COMMITS, local_folder
from framework.log.delta_commits import USER_METADATA_CONF, block_conf
from framework.log.delta_transactions import DeltaJvm, jvm_of, through_the_jvm


def is_delta_table(spark, path: str) -> bool:
    """``DeltaTable.isDeltaTable``: on the local file system, from the log folder's names
    (:func:`has_a_commit`); elsewhere in one Py4J call. delta-spark's Python walks
    ``jvm.io.delta.tables`` a package at a time, and each step is a failed class load across
    every jar: 2.0 ms a call against 0.4 ms, asked several times per partition and run. And
    Delta answers by loading the table's state: in a new process, cold, about 9 ms a call,
    two a partition. (The saving is smaller than that: what the calls warmed up, the next
    Delta work pays for; an idle ``maintain`` of 100 partitions in a new process took
    0.95 x the time, 2026-11-30, docs/performance-log.md, stop 65.)"""
    local = has_a_commit(path)
    if local is not None:
        return local
    jvm = jvm_of(spark)
    if jvm is None:  # Spark Connect: no JVM here, delta-spark's own call
        from delta.tables import DeltaTable

        return DeltaTable.isDeltaTable(spark, path)
    return bool(getattr(jvm, "io.delta.tables.DeltaTable").isDeltaTable(spark._jsparkSession, path))


def has_a_commit(path: str) -> bool | None:
    """Whether the table at ``path`` has a commit, read from its ``_delta_log`` folder on the
    local file system: Delta's own answer (its strict check: a log folder with no commit in
    it is no table; ``tests/test_tables.py`` pins the two together). None when ``path`` is
    not local, or has no log folder here (a path with no scheme may name other storage)."""
    folder = local_folder(path)
    if folder is None:
        return None
    try:
        # entries read lazily, stopping at the first commit: a long log holds many thousands
        with os.scandir(os.path.join(folder, DELTA_LOG)) as entries:
            return any(_a_commit_or_checkpoint(entry.name) for entry in entries)
    except OSError:
        return None


def _a_commit_or_checkpoint(name: str) -> bool:
    """A commit (<version>.json) or a checkpoint (<version>.checkpoint[.<part>.<parts> | .<uuid>].<format>)."""
    return len(name) > 20 and name[:20].isdigit() and (name[20:] == ".json" or name[20:].startswith(".checkpoint."))


def create_table(spark, path: str, schema, properties: dict[str, str], partition_columns: tuple[str, ...] = (),
                 description: str | None = None, user_metadata: str | None = None) -> bool:
    """Create the Delta table at ``path`` unless one is there (``CREATE TABLE IF NOT
    EXISTS``), clearing a killed create's folder first; True when this call committed it.
    The commit's user metadata is the session's, as for any Delta write. A local table
    whose protocol ``own_commits`` knows is created without the JVM, the session up or not
    (``own_commits.created``; not where the session gives new tables defaults), with
    ``user_metadata`` (the session's to be, or the open ``session_confs`` block's)."""
    clear_uncommitted_log(spark, path)
    made = own_commits.created(path, NewTable(schema, properties, tuple(partition_columns), description),
                               user_metadata if user_metadata is not None else block_conf(USER_METADATA_CONF),
                               spark=spark)
    if made is not None:
        return made is not False  # 0: this call created it; False: a table was there (False == 0 in Python)
    return through_the_jvm(
        spark, lambda delta: _create_in(delta, path, schema, properties, partition_columns, description),
        lambda: _create_by_builder(spark, path, schema, properties, partition_columns, description))


def _create_in(delta: DeltaJvm, path, schema, properties, partition_columns=(), description=None) -> bool:
    txn = delta.delta_log(path).startTransaction()
    if int(txn.readVersion()) >= 0:
        return False
    action = NewTable(schema, properties, tuple(partition_columns), description).declare(delta, txn)
    operation = delta.cls("org.apache.spark.sql.delta.DeltaOperations$CreateTable")(
        action, False, False, delta.some(delta.seq([])))
    txn.commit(delta.seq([]), operation)
    return True


@dataclass(frozen=True)
class NewTable:
    """A Delta table as its first commit declares it. A producer's first append into a
    partition declares its table in the append's own commit, as a DataFrame write to a new
    path does: one commit, not a create and then an append (a first produce into 100
    partitions spent 10.9 s of its 30.6 s on the creates; docs/performance-log.md, stop 68)."""

    schema: object  # a pyspark StructType
    properties: dict
    partition_columns: tuple[str, ...] = ()
    description: str | None = None

    def declare(self, delta: DeltaJvm, txn):
        """Make ``txn``, which reads no table yet (read version -1), the table's creation:
        its Metadata, from whose properties Delta derives the protocol, as a create does.
        The Metadata action."""
        metadata = {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}},
                    "schemaString": self.schema.json(), "partitionColumns": list(self.partition_columns),
                    "configuration": dict(self.properties), "createdTime": int(time.time() * 1000)}
        if self.description is not None:
            metadata["description"] = self.description
        action = delta.cls("org.apache.spark.sql.delta.actions.Action").fromJson(json.dumps({"metaData": metadata}))
        txn.updateMetadataForNewTable(action)
        return action

    def create(self, spark, path: str, user_metadata: str | None = None) -> bool:
        """:func:`create_table` of this table at ``path``."""
        return create_table(spark, path, self.schema, self.properties, self.partition_columns, self.description,
                            user_metadata)


def _create_by_builder(spark, path, schema, properties, partition_columns=(), description=None) -> bool:
    from delta.tables import DeltaTable

    builder = DeltaTable.createIfNotExists(spark).location(path).addColumns(schema)
    if partition_columns:
        builder = builder.partitionedBy(*partition_columns)
    for key, value in properties.items():
        builder = builder.property(key, value)
    if description is not None:
        builder = builder.comment(description)
    builder.execute()
    return True


def clear_uncommitted_log(spark, path: str) -> bool:
    """Remove the ``_delta_log`` folder of ``path`` if it holds no commit; True when removed.

    Goes through Hadoop's file system (any storage Spark reads); a Spark Connect session has
    none here, and leaves the folder to Delta's own error.
    """
    folder = local_folder(path)
    if folder is not None and not_started(spark):  # no JVM to ask: the local folder, by the same rule
        return _clear_local(os.path.join(folder, DELTA_LOG))
    from py4j.protocol import Py4JJavaError

    jvm = jvm_of(spark)
    if jvm is None:
        return False
    log = getattr(jvm, "org.apache.hadoop.fs.Path")(path.rstrip("/") + "/" + DELTA_LOG)
    try:
        files = log.getFileSystem(spark._jsparkSession.sessionState().newHadoopConf())
        if not files.exists(log):
            return False
        leftovers = []
        for status in files.listStatus(log):
            empty = status.isDirectory() and len(files.listStatus(status.getPath())) == 0
            if not _left_by_a_killed_create(status.getPath().getName(), empty):
                return False  # a commit, a checkpoint or anything else Delta may read: never touched
            leftovers.append(status.getPath())
        for leftover in leftovers:
            files.delete(leftover, False)
        return bool(files.delete(log, False))
    except Py4JJavaError:  # a create elsewhere wrote into the folder meanwhile: it is theirs now
        return False


def _left_by_a_killed_create(name: str, empty_folder: bool) -> bool:
    """Whether a ``_delta_log`` entry is what a killed create leaves: an empty
    ``_staged_commits`` folder, or a hidden temporary file (a commit not yet renamed)."""
    return (name == STAGED_COMMITS and empty_folder) or (name.startswith(".") and name.endswith((".tmp", ".tmp.crc")))


def _clear_local(log: str) -> bool:
    """:func:`clear_uncommitted_log` of a local ``_delta_log`` folder, through the OS."""
    try:
        names = os.listdir(log)
        if not all(_left_by_a_killed_create(name, os.path.isdir(entry := os.path.join(log, name))
                                            and not os.listdir(entry)) for name in names):
            return False  # a commit, a checkpoint or anything else Delta may read: never touched
        for name in names:
            (os.rmdir if name == STAGED_COMMITS else os.remove)(os.path.join(log, name))
        os.rmdir(log)
        return True
    except OSError:  # none there; or a create elsewhere wrote into the folder meanwhile: it is theirs now
        return False
