"""Delta's JVM transaction API, for the commits a DataFrame write makes too slowly.

A Delta write that carries a SetTransaction (``txnAppId``/``txnVersion``, how topiclake
claims an append's base offset and a maintenance epoch) first asks the snapshot which
version the app id holds, and Delta 4.4 answers that from the snapshot's whole state:
a state reconstruction, three Spark jobs, about 0.3 s on a table of a few files, before
every append and every bookkeeping commit. The version checksum Delta wrote with the
snapshot (``_delta_log/<version>.crc``) lists the same SetTransactions while there are few
of them, so :func:`claimed_commit` reads them there and writes the commit itself: the
data files through the transaction's own ``writeFiles`` (the one Spark job a write
needs), then one commit of those files and the SetTransaction. A 50-record append into a
small table took 0.19 to 0.27 s so, against 0.52 to 1.08 s as a DataFrame write (2 cores,
2026-11-26; docs/performance-log.md has the produce figures). Delta leaves the
SetTransactions out of the checksum when a table sets
``delta.setTransactionRetentionDuration``, so topiclake's tables no longer do.

The claim keeps Delta's semantics: the app id is registered as read, so a concurrent
commit of the same app id makes this one conflict, and a version at or below the one the
table holds is not written (Delta's writers skip it silently). Without a checksum, or
with more SetTransactions than it lists, the snapshot's state answers, as in a
DataFrame write. A Spark Connect session has no JVM to reach; callers then write through
the DataFrame API (:func:`jvm_of` returns None).
"""

from __future__ import annotations

import contextlib
import json
import time
from typing import Callable, TypeVar

from framework.deferred_session import not_started
from framework.local_rows import local_frame
from framework.log import arrow_files, commit_files, own_commits
from framework.log.commit_log import local_folder

T = TypeVar("T")


def jvm_of(spark):
    """The session's py4j JVM view, or None (Spark Connect has none)."""
    try:
        return spark._jvm
    except Exception:  # noqa: BLE001 - a Spark Connect session has no JVM to reach
        return None


def java_list_items(java_list) -> list:
    """A ``java.util.List``'s items, read by index. Iterating it through py4j ends in a
    Java ``NoSuchElementException`` that pyspark's error conversion looks up a dozen
    exception classes for, about 50 ms a list on a busy JVM: 3.6 % of the property
    test's thread time went there, twice per append (py-spy, 2026-11-26)."""
    return [java_list.get(i) for i in range(java_list.size())]


class DeltaJvm:
    """The few pieces of Delta's JVM transaction API topiclake drives."""

    def __init__(self, spark):
        self.spark = spark
        self.jvm = spark._jvm
        self.scala = getattr(self.jvm, "scala.jdk.javaapi.CollectionConverters")

    def cls(self, name: str):
        return getattr(self.jvm, name)

    def seq(self, items):
        java = getattr(self.jvm, "java.util.ArrayList")()
        for item in items:
            java.add(item)
        return self.scala.asScala(java).toList()

    def items(self, scala_seq) -> list:
        return java_list_items(self.scala.asJava(scala_seq))

    def some(self, value):
        return self.cls("scala.Option").apply(value)

    def none(self):
        return self.cls("scala.Option").apply(None)

    @contextlib.contextmanager
    def active(self):
        """This session as the JVM thread's active one while a transaction runs. Delta's
        transaction reads its settings (the commit's user metadata among them) from
        ``SparkSession.active``, which a DataFrame action or SQL command sets for its run and
        the transaction API does not: through another session it would commit without them."""
        sessions = self.cls("org.apache.spark.sql.SparkSession")
        previous = sessions.getActiveSession()
        sessions.setActiveSession(self.spark._jsparkSession)
        try:
            yield
        finally:
            if previous.isDefined():
                sessions.setActiveSession(previous.get())
            else:
                sessions.clearActiveSession()

    def operation(self, name: str, *args):
        """``DeltaOperations.<name>(*args)`` (what a commit records as its operation), or None
        when this Delta shapes it otherwise (another version or platform)."""
        from py4j.protocol import Py4JError, Py4JJavaError

        try:
            return self.cls(f"org.apache.spark.sql.delta.DeltaOperations${name}")(*args)
        except Py4JError as error:
            if isinstance(error, Py4JJavaError):
                raise
            return None

    def removes(self, adds, data_change: bool = True) -> list:
        """``RemoveFile`` actions (stamped now) for ``add`` actions as dicts from the Delta log;
        ``data_change`` False: a rearrangement (bin-packing), which streaming readers skip."""
        action = self.cls("org.apache.spark.sql.delta.actions.Action")
        removed_at = int(time.time() * 1000)
        return [action.fromJson(json.dumps({"add": add})).removeWithTimestamp(removed_at, data_change) for add in adds]

    def optimize_operation(self):
        """``DeltaOperations.Optimize`` as Delta 4.x shapes it (no predicate, no Z-order, not
        auto compaction): what a bin-packing commit records."""
        return self.cls("org.apache.spark.sql.delta.DeltaOperations$Optimize")(
            self.seq([]), self.seq([]), False, self.none(), False)

    def delta_log(self, path: str):
        return self.cls("org.apache.spark.sql.delta.DeltaLog").forTable(self.spark._jsparkSession, path)

    def claimed_version(self, txn, app_id: str) -> int:
        """The SetTransaction version ``app_id`` holds in the transaction's snapshot (-1 if none),
        registered as read so that a concurrent commit of ``app_id`` conflicts with this one."""
        getattr(txn.readTxn(), "$plus$eq")(app_id)
        checksum = txn.snapshot().checksumOpt()
        listed = checksum.get().setTransactions() if checksum.isDefined() else self.none()
        if not listed.isDefined():  # no checksum, or too many for it: the state answers
            return int(txn.txnVersion(app_id))
        return max((int(t.version()) for t in self.items(listed.get()) if t.appId() == app_id), default=-1)

    def register_metrics(self, txn, values: dict) -> None:
        """Register ``values`` as the commit's operation metrics, as Delta's own command or
        ``writeFiles`` would (``DESCRIBE HISTORY`` shows them; Delta refuses a MERGE commit
        without them)."""
        spark_context = self.spark.sparkContext._jsc.sc()
        create = self.cls("org.apache.spark.sql.execution.metric.SQLMetrics").createMetric
        java_map = self.cls("java.util.HashMap")()
        for name, value in values.items():
            metric = create(spark_context, name)
            metric.set(int(value))
            java_map.put(name, metric)
        to_scala = self.cls("org.apache.spark.api.python.PythonUtils").toScalaMap
        txn.registerSQLMetrics(self.spark._jsparkSession, to_scala(java_map))

    def append_operation(self, metadata: str):
        """``DeltaOperations.Write`` in append mode, carrying the commit's user metadata."""
        return self.write_operation("Append", self.some(metadata))

    def write_operation(self, mode: str, metadata=None):
        """``DeltaOperations.Write`` in ``mode`` (a ``SaveMode`` name), with user metadata
        ``metadata`` (a Scala Option; None: the session's)."""
        none = self.none()
        save_mode = getattr(self.cls("org.apache.spark.sql.SaveMode"), mode)
        return self.cls("org.apache.spark.sql.delta.DeltaOperations$Write")(
            save_mode, none, none, metadata if metadata is not None else none, none, none, none, none, none)


def through_the_jvm(spark, work: Callable[[DeltaJvm], T], otherwise: Callable[[], T]) -> T:
    """``work(delta)`` with this session active in the JVM (:meth:`DeltaJvm.active`), or
    ``otherwise()`` when that way is not there: the session has no JVM (Spark Connect), or
    this Delta's JVM API has another shape (another version or platform: py4j finds no
    such class or method). Delta's own answers (``Py4JJavaError``: a conflict, a concurrent
    create) are raised, as a DataFrame write raises them. Every commit topiclake makes
    through the transaction API goes through here, so each has the same way back."""
    from py4j.protocol import Py4JError, Py4JJavaError

    if jvm_of(spark) is not None:
        try:
            delta = DeltaJvm(spark)
            with delta.active():
                return work(delta)
        except Py4JJavaError:
            raise
        except Py4JError:  # a missing method or constructor: this Delta is shaped otherwise
            pass
        except TypeError as error:  # py4j's stand-in for a class that is not there is not callable
            if "JavaPackage" not in str(error):
                raise
    return otherwise()


def forget_table(spark, path: str) -> None:
    """Drop Delta's cached log of the table at ``path``, with the snapshot it holds.

    Delta keeps every table it touched in a process-wide cache, each with its newest
    snapshot and whatever that snapshot built: a table read through Delta (a large
    partition, a vacuum, the change feed) keeps about 3 MB of query plans, a small one
    about 0.1 MB. A maintain of a thousand such partitions filled a 2 GB driver, so each
    partition's table is forgotten once its run is done; the next command that touches it
    reads its log again (about 7 ms for a small table)."""
    from py4j.protocol import Py4JError

    if not_started(spark) or jvm_of(spark) is None:  # no cache yet; Spark Connect: the server keeps its own
        return
    try:
        delta = DeltaJvm(spark)
        delta.cls("org.apache.spark.sql.delta.DeltaLog").invalidateCache(
            spark._jsparkSession, delta.cls("org.apache.hadoop.fs.Path")(path))
    except Py4JError:  # only a cache: a Delta without this method keeps its entries
        pass


#: What :func:`claimed_commit` returns after a DataFrame write: it committed, or Delta
#: skipped it, and only the table's commits tell which.
WRITTEN_OR_SKIPPED = "written or skipped"


def claimed_commit(spark, path: str, schema, app_id: str, txn_version: int, metadata: str, frame=None,
                   new_table=None, max_records_per_file: int | None = None,
                   files_written: Callable[[], None] = lambda: None):
    """Append ``frame``'s rows (None: no rows) and SetTransaction(``app_id``, ``txn_version``)
    as one Delta commit carrying ``metadata``; its version, or None when the table already
    holds ``app_id`` at ``txn_version`` or later (nothing is written). With ``new_table``
    (a ``delta_create.NewTable``) and no table at ``path`` yet, the commit creates it too,
    as version 0; a concurrent creator makes it conflict, as any concurrent write does.

    ``schema`` is the table's; ``frame`` has its columns: a DataFrame, or driver-side rows
    as an Arrow table (as ``pyspark`` maps ``schema`` to Arrow), which Arrow writes
    (:mod:`framework.log.arrow_files`) when the table is local and takes them, and Spark
    otherwise; either way in files of up to ``max_records_per_file`` records (None: as
    Spark splits a DataFrame, one file for an Arrow table). Raises Delta's conflicts as a
    DataFrame write does. Without a JVM (Spark Connect), or when this Delta's JVM API has
    another shape (another version or platform), the commit is a DataFrame write (after a
    create of ``new_table``), and the answer :data:`WRITTEN_OR_SKIPPED`. While no session
    has started, an Arrow table's rows into a local table that allows it (or a new table
    whose protocol ``own_commits`` knows) are committed without a JVM
    (``own_commits.claimed``), which raises ``LostCommitRace`` when another writer took
    the version. ``files_written`` is called between the data files and the commit (a
    fault point's place; a DataFrame write makes both in one call).
    """

    def by_dataframe():
        if new_table is not None:
            new_table.create(spark, path)
        rows = frame if frame is not None else local_frame(spark, [], schema)
        if is_arrow(rows):
            rows = _frame_of(spark, rows, schema, max_records_per_file)
        (rows.write.format("delta").mode("append").option("txnAppId", app_id).option("txnVersion", int(txn_version))
         .option("userMetadata", metadata).save(path))
        return WRITTEN_OR_SKIPPED

    def by_transaction(delta: DeltaJvm):
        return _claimed_commit_in(delta, path, schema, app_id, txn_version, metadata, frame, new_table,
                                  max_records_per_file, files_written)

    if is_arrow(frame) and not_started(spark):  # no JVM yet: commit here if the table lets us
        landed = own_commits.claimed(path, frame, app_id, txn_version, metadata, max_records_per_file, new_table,
                                     files_written, spark)
        if landed is not None:
            return None if landed == own_commits.CLAIM_TAKEN else landed
    return through_the_jvm(spark, by_transaction, by_dataframe)


def _claimed_commit_in(delta: DeltaJvm, path: str, schema, app_id: str, txn_version: int, metadata: str, frame,
                       new_table=None, max_records_per_file: int | None = None,
                       files_written: Callable[[], None] = lambda: None):
    txn = delta.delta_log(path).startTransaction()
    # every JVM call whose shape may differ comes before the write
    operation = delta.append_operation(metadata)
    claim = delta.cls("org.apache.spark.sql.delta.actions.SetTransaction")(
        app_id, int(txn_version), delta.some(int(time.time() * 1000)))
    if new_table is not None and int(txn.readVersion()) < 0:
        new_table.declare(delta, txn)  # before the write: its files follow the new table's partitioning
    elif delta.claimed_version(txn, app_id) >= txn_version:
        return None
    actions = []
    if is_arrow(frame):  # driver-side rows: Arrow writes their files when the table takes them
        folder = local_folder(path)
        actions = None if folder is None else arrow_files.data_files(delta, txn, folder, frame, max_records_per_file,
                                                                     append=True)
        if actions is None:
            frame = _frame_of(delta.spark, frame, schema, max_records_per_file)
        else:
            delta.register_metrics(txn, arrow_files.write_metrics(actions))
            frame = None
    if frame is not None:
        rows = frame.select(*schema.fieldNames())
        actions = delta.items(txn.writeFiles(rows._jdf, delta.none(), False, delta.seq([])))
    files_written()
    return int(txn.commit(delta.seq([*actions, claim]), operation))


def is_arrow(rows) -> bool:
    """Whether ``rows`` are driver-side rows (an Arrow table), not a DataFrame."""
    return rows is not None and type(rows).__module__.startswith("pyarrow")


def files_for(records: int, max_records_per_file: int) -> int:
    """How many files ``records`` records take at up to ``max_records_per_file`` a file (at least one)."""
    return max(1, -(-records // max_records_per_file))


def _frame_of(spark, table, schema, max_records_per_file: int | None):
    """Driver-side rows (an Arrow table in ``schema``) as a DataFrame, in files of up to
    ``max_records_per_file`` records."""
    frame = spark.createDataFrame(table, schema)
    return frame if not max_records_per_file else frame.coalesce(files_for(table.num_rows, max_records_per_file))


def replaced_commit(spark, path: str, replace) -> bool:
    """Replace the rows of a small table by ``replace(rows)`` (a DataFrame of its rows in,
    the new rows out) in one overwrite commit: every live file removed, the new rows
    written as one file. The transaction reads the whole table, so any commit to it in
    between makes this one conflict (the caller retries). False, with nothing written,
    when the version is not plain files its checksum lists
    (:func:`framework.log.version_checksum.rewritable`) or there is no JVM to reach: the
    caller then writes its own way. A MERGE of one row into the consumer offsets table took
    2.4 to 3.0 s, this 0.6 to 0.8 s (docs/performance-log.md)."""
    return through_the_jvm(spark, lambda delta: _replaced_in(delta, path, replace), lambda: False)


def _replaced_in(delta: DeltaJvm, path: str, replace) -> bool:
    from framework.log import version_checksum

    txn = delta.delta_log(path).startTransaction()
    operation = delta.write_operation("Overwrite")  # before any write: its shape may differ
    files = version_checksum.plain_files(path, int(txn.snapshot().version()))
    if not version_checksum.rewritable(files):
        return False
    txn.readWholeTable()
    rows = version_checksum.frame_of(delta.spark, files)
    new_rows = replace(rows).select(*rows.columns).coalesce(1)
    written = delta.items(txn.writeFiles(new_rows._jdf, delta.none(), False, delta.seq([])))
    delta.register_metrics(txn, commit_files.removed_metrics(files.adds))
    txn.commit(delta.seq([*written, *delta.removes(files.adds)]), operation)
    return True
