"""Delta commits of local tables made by topiclake itself, without a JVM: a blind append, a
produce's claimed append, a new table's first commit, a replace (or packing) of every row
of a small table, and a maintenance stage's rewrite's checks (:func:`committable`; what each
commit writes: ``commit_files``). An append and a replace take this way only while no
session has started; a create and a stage's rewrite either way (:func:`session_codec`).

An idle ``maintain`` in a new process decides everything from the Delta logs' files; its
only writes are its history rows (one file and one commit) and, now and then, their packing.
A ``commit-offset`` reads the committed offsets by Arrow and writes them back as one file
and one commit. A ``produce`` of JSON lines has its records on the driver, numbered from the
log end the commits give, and written by Arrow. Through Delta's transaction API each commit
cost the JVM and a session, 4 to 7 s of a command with nothing else to do (stops 88, 89).
Here the commit is made as the Delta protocol defines it: the new Parquet files (written by
Arrow, as the JVM route writes them, ``arrow_files.add_actions``), then the next version's
commit file (an ``add`` for each new file, a ``remove`` for each file a replace drops, a
produce's ``txn`` claim and its bookkeeping in ``commitInfo.userMetadata``), created only if
absent, so that of two writers racing for a version one wins; then that version's checksum,
Delta's previous one carried forward (sizes, counts, file-size histogram, claims, and the
file list while Delta keeps one), so local reads keep listing a version from it.

A blind append reads nothing: losing a version to another writer, it tries the next one,
unless the winner changed the table itself. A produce planned its offsets from the version
it read: losing, it raises ``LostCommitRace`` and plans again, as after Delta's conflict;
a claim the table already holds writes nothing (:data:`CLAIM_TAKEN`), as Delta skips it. A
replace (a packing too) reads every row: losing, it reads the winner's rows and writes its
file again, as Delta's conflict check would make it.

Only a table this writer can commit to exactly as Delta would takes this way: on the local
file system; its newest version's checksum readable and complete (no field this writer
does not know how to carry forward; every live file listed, except for an append past
Delta's listing threshold); protocol (1, 2) with no table feature, or for an append or a
maintenance stage's rewrite (``framework.stages.file_rewrite.commit_locally``, the
bin-packing's) writer 7 with only :data:`APPEND_WRITER_FEATURES` (a partition table's; for
a rewrite, not append-only), and for an append also that with deletion vectors (reader 3:
a partition table whose owner turned them on; the new files carry none, and their
statistics say their bounds are tight, as Delta's writer says); no partition columns (an
append or a rewrite may have them), column mapping or column invariants; at a version at
which Delta writes a checkpoint, delta-rs here to write it (``own_checkpoints``); and a
file system that makes hard links (the put-if-absent). Anything else returns None with nothing
committed, and the caller commits through Delta.

A new table (a ``create``, or a produce's first append into a partition) is declared by
its version 0 (``metaData``, ``protocol``, as Delta's create writes them) where the
protocol Delta would derive from its properties is known here (a partition table's; no
other Delta property), the table is local and its warehouse's folder there, and the
session this process would start gives new tables no defaults of its own (no Delta
setting in ``spark-defaults.conf``, PySpark's submit arguments, or ``spark-submit``).
``tests/test_own_commits.py`` pins each commit and its checksum to Delta's for the same
rows, and reads the table through Delta and delta-rs after it.

A crash after the Parquet files leaves files no version lists (VACUUM removes them); after
the commit file, a version without a checksum (readers then ask Delta, as for any table
whose checksum was not written, and Delta's next commit writes it whole). Delta's own log
store on a local disk checks that a version is absent and then renames its commit into
place, and Hadoop's local rename replaces a file that is there: a commit made here between
the two was overwritten (and its checksum, written after it, then described another
commit). The embedded session's local file system (``framework.local_file_system``) makes
that rename a hard link too, which fails on a taken name, so Delta's commit meets the
conflict it expects and retries; only where the session keeps Hadoop's (no JDK to build the
classes, ``TOPICLAKE_LOCAL_FS=hadoop``) is a JVM writer no safer beside this one than two
JVM processes on one local disk are.
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from typing import Callable

from framework.deferred_session import not_started
from framework.log import arrow_files, commit_files, own_checkpoints, version_checksum
from framework.log import deletion_vectors as deletion_vector_files
from framework.log.commit_log import DELTA_LOG, STAGED_COMMITS, local_commits, local_folder
from framework.log.delta_commits import MAX_COMMIT_ATTEMPTS, LostCommitRace

__all__ = ["CLAIM_TAKEN", "appended", "claimed", "committable", "created", "newest", "replaced", "rewritable",
           "rewrite_base", "vectors_protocol"]

#: The only protocol taken: Delta's plain reader 1 and writer 2, no table features.
PLAIN_PROTOCOL = {"minReaderVersion": 1, "minWriterVersion": 2}
#: The writer version of table features, and the features a blind append meets exactly as
#: Delta's writer does: an append-only table takes appends; the change data feed records
#: none for them (its readers take added files as inserts); invariants ask nothing of a
#: schema that declares none (checked too). A partition table has these three.
TABLE_FEATURES_WRITER = 7
APPEND_WRITER_FEATURES = frozenset({"appendOnly", "changeDataFeed", "invariants"})
#: Delta lists a version's files in its checksum while it has at most this many
#: (``spark.databricks.delta.allFilesInCrc.thresholdNumFiles``'s default).
ALL_FILES_THRESHOLD = 50
#: The checksum's fields, each carried forward by :func:`commit_files.next_checksum`.
CHECKSUM_FIELDS = frozenset({"txnId", "tableSizeBytes", "numFiles", "numMetadata", "numProtocol",
                             "setTransactions", "domainMetadata", "metadata", "protocol", "fileSizeHistogram",
                             "allFiles"})
#: The checksum's deletion-vector counts (``deletion_vectors.checksum_counts`` carries them
#: forward), which a table with deletion vectors has besides.
DELETION_VECTOR_FIELDS = frozenset({"numDeletedRecordsOpt", "numDeletionVectorsOpt", "deletedRecordCountsHistogramOpt"})
#: The protocol of a partition table with deletion vectors on, which a compaction's
#: deletion vectors are committed to (``framework.stages.compaction_vectors``).
DELETION_VECTOR_READER = 3


def committable(checksum: dict | None, version: int, new_files: int = 1, append: bool = False,
                rewrite: bool = False, deletion_vectors: bool = False) -> bool:
    """Whether a commit that leaves ``new_files`` more files than ``version`` (whose checksum
    is ``checksum``) can be made here (see the module's text); ``append``: a blind append,
    which also takes a partition table (:data:`APPEND_WRITER_FEATURES`, partition columns,
    more files than the checksum lists); ``rewrite``: a maintenance stage's rewrite of
    files the checksum lists (``framework.stages.file_rewrite.commit_locally``), which takes
    a partition table too, unless it is append-only (Delta refuses its removes);
    ``deletion_vectors``: such a rewrite that only adds deletion vectors, on a table whose
    protocol has them (reader 3, ``deletionVectors`` its only reader feature) and whose
    properties turn them on, as Delta's DELETE would write them."""
    fields = CHECKSUM_FIELDS | DELETION_VECTOR_FIELDS if deletion_vectors or append else CHECKSUM_FIELDS
    if not isinstance(checksum, dict) or not set(checksum) <= fields:
        return False
    metadata = checksum.get("metadata")
    protocol = checksum.get("protocol")
    if deletion_vectors:
        taken = _vectors_protocol_taken(protocol, metadata)
    else:
        taken = _protocol_taken(protocol, append or rewrite) or (append and vectors_protocol(protocol))
    if not taken or not isinstance(metadata, dict):
        return False
    rewrite = rewrite or deletion_vectors
    if rewrite and str((metadata.get("configuration") or {}).get("delta.appendOnly", "false")).lower() == "true":
        return False
    files, count = checksum.get("allFiles"), checksum.get("numFiles")
    if files is None:  # Delta stops listing past the threshold, and an append stays past it
        listed = append and isinstance(count, int) and count > ALL_FILES_THRESHOLD
    else:
        listed = isinstance(files, list) and len(files) == count and count + new_files <= ALL_FILES_THRESHOLD
    configuration = metadata.get("configuration") or {}
    schema = metadata.get("schemaString")
    checkpoint = own_checkpoints.due(configuration, version + 1)
    return (listed and isinstance(schema, str) and "delta.invariants" not in schema
            and (append or rewrite or not metadata.get("partitionColumns"))
            and configuration.get("delta.columnMapping.mode", "none") == "none"
            and checkpoint is not None and (not checkpoint or own_checkpoints.available()))


def _protocol_taken(protocol, features_taken: bool) -> bool:
    if protocol == PLAIN_PROTOCOL:
        return True
    return (features_taken and isinstance(protocol, dict) and set(protocol) == {*PLAIN_PROTOCOL, "writerFeatures"}
            and protocol["minReaderVersion"] == 1 and protocol["minWriterVersion"] == TABLE_FEATURES_WRITER
            and isinstance(protocol["writerFeatures"], list)
            and set(protocol["writerFeatures"]) <= APPEND_WRITER_FEATURES)


def appended(path: str, table) -> int | None:
    """``table`` (an Arrow table of the table's columns, as Spark maps its schema to Arrow's)
    appended to the local Delta table at ``path`` as one Parquet file and one commit: the
    version committed, or None when this way does not apply (nothing is committed)."""
    found = newest(path)
    if found is None:
        return None
    folder, version = found
    checksum = version_checksum.checksum(path, version)
    if not committable(checksum, version, append=True):
        return None
    metadata = checksum["metadata"]
    adds = commit_files.data_files(folder, metadata, table, single=True,
                                   tight_bounds=vectors_protocol(checksum["protocol"]))
    if adds is None:
        return None
    for _ in range(MAX_COMMIT_ATTEMPTS):
        made = commit_files.commit(folder, version + 1, checksum, adds)
        if made:
            return version + 1
        if made is None:
            break
        # Another writer took the version. A blind append conflicts with nothing but a
        # change of the table itself, which the winner's checksum would show.
        version += 1
        winner = version_checksum.checksum(path, version)
        if (not committable(winner, version, append=True) or winner["metadata"] != metadata
                or winner["protocol"] != checksum["protocol"]):
            break
        checksum = winner
    commit_files.remove_files(folder, adds)
    return None


#: What :func:`claimed` answers when the table already holds its claim (nothing is written).
CLAIM_TAKEN = "claim taken"


def claimed(path: str, table, app_id: str, txn_version: int, user_metadata: str,
            max_records_per_file: int | None = None, new_table=None,
            files_written: Callable[[], None] = lambda: None, spark=None) -> int | str | None:
    """``table`` (an Arrow table of every column, partition columns included) appended to
    the local Delta table at ``path`` with SetTransaction(``app_id``, ``txn_version``) and
    ``user_metadata``, as one commit at the version after the newest, in files of up to
    ``max_records_per_file`` rows: what ``delta_transactions.claimed_commit`` commits
    through Delta. The version committed; :data:`CLAIM_TAKEN` when the table holds
    ``app_id`` at ``txn_version`` or later; None when this way does not apply. Raises
    :class:`LostCommitRace` when another writer took the version (nothing is committed):
    the caller planned from the version before, so it plans again, as after Delta's
    conflict. With ``new_table`` (a ``delta_create.NewTable``) and no table yet, the
    commit creates it (:func:`created`), and another creator first is such a race.
    ``files_written`` is called between the data files and the commit. ``spark``: the
    caller's session, which sets the codec (:func:`session_codec`; None: one not started)."""
    codec = session_codec(spark)
    found = newest(path)
    if codec is None:
        return None
    if found is None:
        made = None if new_table is None else created(path, new_table, user_metadata, table, (app_id, txn_version),
                                                      max_records_per_file, files_written, spark)
        if made is False:
            raise LostCommitRace(f"{path}: another writer created the table first")
        return made
    folder, version = found
    checksum = version_checksum.checksum(path, version)
    if not committable(checksum, version, append=True) or not isinstance(checksum.get("setTransactions"), list):
        return None
    metadata = checksum["metadata"]
    if "delta.setTransactionRetentionDuration" in (metadata.get("configuration") or {}):
        return None  # Delta drops expired claims as it reads them
    if max((t["version"] for t in checksum["setTransactions"] if t.get("appId") == app_id), default=-1) >= txn_version:
        return CLAIM_TAKEN
    adds = commit_files.data_files(folder, metadata, table, max_records_per_file, codec=codec,
                                   tight_bounds=vectors_protocol(checksum["protocol"]))
    if adds is None:
        return None
    if not committable(checksum, version, new_files=len(adds), append=True):
        commit_files.remove_files(folder, adds)
        return None
    files_written()
    made = commit_files.commit(folder, version + 1, checksum, adds, user_metadata=user_metadata,
                               claim=(app_id, txn_version))
    if made:
        return version + 1
    commit_files.remove_files(folder, adds)
    if made is False:
        raise LostCommitRace(f"{path}: version {version + 1} was committed by another writer")
    return None


#: The table properties of Delta's own a new table may set for :func:`created`, which
#: declares its protocol as Delta's create derives it from them (a partition table's, and
#: topiclake's own tables', whose auto compaction is a setting, not a table feature).
NEW_TABLE_DELTA_PROPERTIES = frozenset({"delta.enableChangeDataFeed", "delta.deletedFileRetentionDuration",
                                        "delta.logRetentionDuration", "delta.dataSkippingStatsColumns",
                                        "delta.checkpointInterval", "delta.autoOptimize.autoCompact"})
#: The protocol Delta's create gives a table with the change data feed on: the feature,
#: and the two that Delta's plain protocol (writer 2) implies.
CHANGE_DATA_FEED_PROTOCOL = {"minReaderVersion": 1, "minWriterVersion": TABLE_FEATURES_WRITER,
                             "writerFeatures": ["invariants", "changeDataFeed", "appendOnly"]}


def new_table_protocol(properties: dict[str, str]) -> dict | None:
    """The protocol Delta's create derives from ``properties``, or None when this module
    does not know it."""
    own = {key: value for key, value in properties.items() if key.startswith("delta.")}
    if not set(own) <= NEW_TABLE_DELTA_PROPERTIES:
        return None
    change_data_feed = own.get("delta.enableChangeDataFeed", "false").lower()
    return {"true": CHANGE_DATA_FEED_PROTOCOL, "false": PLAIN_PROTOCOL}.get(change_data_feed)


def spark_may_default_new_tables() -> bool:
    """Whether the session this process would start could give a new table settings of
    its own (``spark.databricks.delta.properties.defaults.*``, a protocol version, a table
    feature), which only Delta's create applies: under ``spark-submit``, or when Spark's
    ``spark-defaults.conf`` or PySpark's submit arguments name a Delta setting."""
    from framework.session import may_launch_with

    return may_launch_with("spark.databricks.delta")


#: The prefix of Delta's session settings that give new tables properties of their own (a
#: protocol version, a table feature, a property such as deletion vectors).
NEW_TABLE_DEFAULTS = "spark.databricks.delta.properties.defaults."


def session_may_default_new_tables(spark=None) -> bool:
    """:func:`spark_may_default_new_tables`, and for a started session (``spark``) whether it
    sets such a default now (one question to the JVM: its settings)."""
    if spark_may_default_new_tables():
        return True
    if spark is None or not_started(spark):
        return False
    try:  # the names set, joined in the JVM: one Py4J call (``conf.getAll`` makes one a setting)
        return NEW_TABLE_DEFAULTS in spark._jsparkSession.sessionState().conf().getAllConfs().keys().mkString("\n")
    except Exception:  # noqa: BLE001 - another platform's session: ask as PySpark does
        return any(key.startswith(NEW_TABLE_DEFAULTS) for key in spark.conf.getAll)


def session_codec(spark=None) -> str | None:
    """The Parquet codec a commit made here writes its files in: the started session's
    (``spark``; None when Arrow does not write it), else Spark's default, as the session
    this process would start writes (``arrow_files.session_codec``). None too for a Spark
    Connect session: its server, not this process, may be the one whose files are local."""
    from framework.log.delta_transactions import jvm_of  # (it imports this module)

    if spark is None or not_started(spark):
        return arrow_files.SPARK_DEFAULT_CODEC
    return arrow_files.session_codec(spark) if jvm_of(spark) is not None else None


def created(path: str, new_table, user_metadata: str | None, table=None, claim: tuple[str, int] | None = None,
            max_records_per_file: int | None = None,
            files_written: Callable[[], None] = lambda: None, spark=None) -> int | bool | None:
    """The local table at ``path`` created by a version 0 that declares ``new_table`` (a
    ``delta_create.NewTable``): with ``table``'s rows (in files of up to
    ``max_records_per_file``) and ``claim`` (app id, version), a produce's first append;
    without, Delta's ``CREATE TABLE``. 0 once committed; False when the table has a commit
    already (nothing written); None when this way does not apply: a protocol this module
    does not know for the properties, a session that may give new tables defaults, a
    schema with invariants, no hard links. ``spark``: as :func:`claimed`'s."""
    folder = local_folder(path)
    protocol = new_table_protocol(new_table.properties)
    schema = commit_files.schema_string(new_table.schema)
    codec = session_codec(spark)
    if (folder is None or protocol is None or codec is None or "delta.invariants" in schema
            or session_may_default_new_tables(spark)):
        return None
    if local_commits(path, 1):
        return False
    described = {} if new_table.description is None else {"description": new_table.description}
    metadata = {"id": str(uuid.uuid4()), **described, "format": {"provider": "parquet", "options": {}},
                "schemaString": schema, "partitionColumns": list(new_table.partition_columns),
                "configuration": dict(new_table.properties), "createdTime": int(time.time() * 1000)}
    adds = [] if table is None else commit_files.data_files(folder, metadata, table, max_records_per_file,
                                                            codec=codec)
    if adds is None:
        return None
    files_written()
    log = os.path.join(folder, DELTA_LOG)
    os.makedirs(log, exist_ok=True)
    made = commit_files.commit(folder, 0, commit_files.new_checksum(metadata, protocol), adds,
                               user_metadata=user_metadata, claim=claim, declares=True)
    if made:
        os.makedirs(os.path.join(log, STAGED_COMMITS), exist_ok=True)  # as Delta's create leaves it
        return 0
    commit_files.remove_files(folder, adds)
    if made is None:
        with contextlib.suppress(OSError):  # an empty log folder is a killed create's to Delta: none left
            os.rmdir(log)
    return False if made is False else None


def _vectors_protocol_taken(protocol, metadata) -> bool:
    """A protocol with deletion vectors (:func:`vectors_protocol`), and properties that turn them on."""
    return (vectors_protocol(protocol) and isinstance(metadata, dict)
            and deletion_vector_files.turned_on(metadata.get("configuration") or {}))


def vectors_protocol(protocol) -> bool:
    """A partition table's protocol with deletion vectors: reader 3 with only that feature,
    writer 7 with it and :data:`APPEND_WRITER_FEATURES`. A blind append meets it as Delta's
    writer does: its new files carry no vector, and their statistics say their bounds are
    tight (``arrow_files.statistics``)."""
    return (isinstance(protocol, dict) and set(protocol) == {*PLAIN_PROTOCOL, "readerFeatures", "writerFeatures"}
            and protocol["minReaderVersion"] == DELETION_VECTOR_READER
            and protocol["minWriterVersion"] == TABLE_FEATURES_WRITER
            and protocol["readerFeatures"] == ["deletionVectors"] and isinstance(protocol["writerFeatures"], list)
            and set(protocol["writerFeatures"]) <= APPEND_WRITER_FEATURES | {"deletionVectors"})


def replaced(path: str, replace: Callable, packing: commit_files.Operation | None = None) -> int | None:
    """Every row of the local table at ``path`` replaced by ``replace(files)`` (an Arrow table
    in its columns, made from the rows of the version's ``files``) in one overwrite commit
    (``packing``: a bin-packing's operation, every action dataChange false): every live file
    removed, the new rows one file. The version committed, or None (nothing committed)."""
    found = newest(path)
    if found is None:
        return None
    folder, version = found
    for _ in range(MAX_COMMIT_ATTEMPTS):
        checksum = version_checksum.checksum(path, version)
        files = version_checksum.plain_files(path, version)
        if (not committable(checksum, version) or not version_checksum.rewritable(files)
                or files.configuration.get("delta.appendOnly", "false").lower() == "true"):
            return None  # (an append-only table: Delta refuses the removes, with its own error)
        adds = commit_files.data_files(folder, checksum["metadata"], replace(files), single=True)
        if adds is None:
            return None
        adds = adds if packing is None else [{**add, "dataChange": False} for add in adds]
        made = commit_files.commit(folder, version + 1, checksum, adds, commit_files.removes(files.adds, not packing),
                                   "Overwrite", operation=packing)
        if made:
            return version + 1
        commit_files.remove_files(folder, adds)
        if made is None:
            return None
        # Another writer took the version: its rows are what this replace must start from.
        version += 1
    return None


def rewrite_base(path: str, new_files: int = 0, deletion_vectors: bool = False) -> tuple[str, int, dict] | None:
    """The local table's folder, newest version and its checksum, when a maintenance
    stage's rewrite (or a vacuum) leaving ``new_files`` more files can be committed after it
    here (:func:`rewritable`); else None."""
    found = newest(path)
    checksum = None if found is None else version_checksum.checksum(path, found[1])
    return (*found, checksum) if found and rewritable(checksum, found[1], new_files, deletion_vectors) else None


def rewritable(checksum: dict | None, version: int, new_files: int, deletion_vectors: bool) -> bool:
    """:func:`committable` with ``rewrite``; ``deletion_vectors``: the caller reads files less
    the rows their vectors hide (a purge, a bin-packing, a vacuum), so takes them on too."""
    return committable(checksum, version, new_files, rewrite=True) or (
        deletion_vectors and committable(checksum, version, new_files, deletion_vectors=True))


def newest(path: str) -> tuple[str, int] | None:
    """The local table's folder and newest version, or None (not local, or no commit yet)."""
    folder = local_folder(path)
    commits = None if folder is None else local_commits(path, 1)
    return (folder, commits[0].version) if commits else None
