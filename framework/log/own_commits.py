"""Delta commits of local tables made by topiclake itself, without a JVM: a blind append,
a produce's claimed append, and a replace of every row of a small table.

An idle ``maintain`` in a new process decides everything from the Delta logs' files, and
its only write is its history rows: one Parquet file and one commit. A ``commit-offset``
reads the committed offsets by Arrow and writes them back as one file and one commit. A
``produce`` of JSON lines has its records on the driver, numbered from the log end it read
from the commits, and written by Arrow. Through Delta's transaction API each commit cost
the JVM and a session, 4 to 7 s of a command that had nothing else to do
(docs/performance-log.md, stops 88 and 89). Here the commit is made as the Delta protocol
defines it: the new Parquet files (written by Arrow, as the JVM route writes them,
``arrow_files.add_actions``), then the next version's commit file (an ``add`` for each new
file, a ``remove`` for each file a replace drops, a produce's ``txn`` claim and its
bookkeeping in ``commitInfo.userMetadata``), created only if absent, so that of two writers
racing for a version exactly one wins; then that version's checksum, Delta's previous one
carried forward (sizes, counts, file-size histogram, claims, and the file list while Delta
keeps one), so the local reads that list a version from its checksum keep doing so.

A blind append reads nothing: losing a version to another writer, it tries the next one,
unless the winner changed the table itself. A produce planned its offsets from the version
it read: losing, it raises ``LostCommitRace`` and plans again, as after Delta's conflict;
a claim the table already holds writes nothing (:data:`CLAIM_TAKEN`), as Delta skips it. A
replace reads every row: losing, it reads the winner's rows and writes its file again, as
Delta's conflict check would make it.

Only a table this writer can commit to exactly as Delta would takes this way: on the local
file system; its newest version's checksum readable and complete (no field this writer
does not know how to carry forward; every live file listed, except for an append past
Delta's listing threshold); protocol (1, 2) with no table feature, or for an append
writer 7 with only :data:`APPEND_WRITER_FEATURES` (a partition table's); no partition
columns (an append may have them), column mapping or column invariants; the new version
not one at which Delta writes a checkpoint (``delta.checkpointInterval``); and a file
system that makes hard links (the put-if-absent). Anything else returns None with nothing
committed, and the caller commits through Delta. A produce's first append, which creates
its table, goes through Delta. ``tests/test_own_commits.py`` pins each commit and its
checksum to those Delta writes for the same rows, and reads the table through Delta and
delta-rs after it.

A crash after the Parquet files leaves files no version lists (VACUUM removes them); after
the commit file, a version without a checksum (readers then ask Delta, as for any table
whose checksum was not written, and Delta's next commit writes it whole). Delta's own log
store on a local disk checks that a version is absent and then renames its commit into
place, so a JVM writer and this one are as safe against each other as two JVM processes
on one local disk are.
"""

from __future__ import annotations

import bisect
import json
import os
import time
import uuid
from typing import Callable

from framework import __version__
from framework.log import arrow_files, version_checksum
from framework.log.commit_log import DELTA_LOG, local_commits, local_folder
from framework.log.delta_commits import MAX_COMMIT_ATTEMPTS, LostCommitRace

__all__ = ["CLAIM_TAKEN", "appended", "claimed", "committable", "removed_metrics", "replaced"]

#: The only protocol taken: Delta's plain reader 1 and writer 2, no table features.
PLAIN_PROTOCOL = {"minReaderVersion": 1, "minWriterVersion": 2}
#: The writer version of table features, and the features a blind append meets exactly as
#: Delta's writer does: an append-only table takes appends; the change data feed records
#: none for them (its readers take added files as inserts); invariants ask nothing of a
#: schema that declares none (checked too). A partition table has these three.
TABLE_FEATURES_WRITER = 7
APPEND_WRITER_FEATURES = frozenset({"appendOnly", "changeDataFeed", "invariants"})
#: Delta's default ``delta.checkpointInterval``.
DEFAULT_CHECKPOINT_INTERVAL = 10
#: Delta lists a version's files in its checksum while it has at most this many
#: (``spark.databricks.delta.allFilesInCrc.thresholdNumFiles``'s default).
ALL_FILES_THRESHOLD = 50
#: The checksum's fields, each carried forward by :func:`_next_checksum`.
CHECKSUM_FIELDS = frozenset({"txnId", "tableSizeBytes", "numFiles", "numMetadata", "numProtocol",
                             "setTransactions", "domainMetadata", "metadata", "protocol", "fileSizeHistogram",
                             "allFiles"})


def committable(checksum: dict | None, version: int, new_files: int = 1, append: bool = False) -> bool:
    """Whether a commit that leaves ``new_files`` more files than ``version`` (whose checksum
    is ``checksum``) can be made here (see the module's text); ``append``: a blind append,
    which also takes a partition table (:data:`APPEND_WRITER_FEATURES`, partition columns,
    more files than the checksum lists)."""
    if not isinstance(checksum, dict) or not set(checksum) <= CHECKSUM_FIELDS:
        return False
    metadata = checksum.get("metadata")
    if not _protocol_taken(checksum.get("protocol"), append) or not isinstance(metadata, dict):
        return False
    files, count = checksum.get("allFiles"), checksum.get("numFiles")
    if files is None:  # Delta stops listing past the threshold, and an append stays past it
        listed = append and isinstance(count, int) and count > ALL_FILES_THRESHOLD
    else:
        listed = isinstance(files, list) and len(files) == count and count + new_files <= ALL_FILES_THRESHOLD
    configuration = metadata.get("configuration") or {}
    schema = metadata.get("schemaString")
    try:
        interval = int(configuration.get("delta.checkpointInterval", DEFAULT_CHECKPOINT_INTERVAL))
    except ValueError:
        return False
    return (listed and isinstance(schema, str) and "delta.invariants" not in schema
            and (append or not metadata.get("partitionColumns"))
            and configuration.get("delta.columnMapping.mode", "none") == "none"
            and interval > 0 and (version + 1) % interval != 0)


def _protocol_taken(protocol, append: bool) -> bool:
    if protocol == PLAIN_PROTOCOL:
        return True
    return (append and isinstance(protocol, dict) and set(protocol) == {*PLAIN_PROTOCOL, "writerFeatures"}
            and protocol["minReaderVersion"] == 1 and protocol["minWriterVersion"] == TABLE_FEATURES_WRITER
            and isinstance(protocol["writerFeatures"], list)
            and set(protocol["writerFeatures"]) <= APPEND_WRITER_FEATURES)


def appended(path: str, table) -> int | None:
    """``table`` (an Arrow table of the table's columns, as Spark maps its schema to Arrow's)
    appended to the local Delta table at ``path`` as one Parquet file and one commit: the
    version committed, or None when this way does not apply (nothing is committed)."""
    found = _newest(path)
    if found is None:
        return None
    folder, version = found
    checksum = version_checksum.checksum(path, version)
    if not committable(checksum, version, append=True):
        return None
    metadata = checksum["metadata"]
    adds = _written(folder, metadata, table, single=True)
    if adds is None:
        return None
    for _ in range(MAX_COMMIT_ATTEMPTS):
        txn_id = str(uuid.uuid4())
        created = _put_if_absent(folder, version + 1, _commit_lines(version, "Append", adds, [], txn_id))
        if created:
            _write_checksum(folder, version + 1, _next_checksum(checksum, adds, [], txn_id))
            return version + 1
        if created is None:
            break
        # Another writer took the version. A blind append conflicts with nothing but a
        # change of the table itself, which the winner's checksum would show.
        version += 1
        winner = version_checksum.checksum(path, version)
        if not committable(winner, version, append=True) or winner["metadata"] != metadata:
            break
        checksum = winner
    _remove(folder, adds)
    return None


#: What :func:`claimed` answers when the table already holds its claim (nothing is written).
CLAIM_TAKEN = "claim taken"


def claimed(path: str, table, app_id: str, txn_version: int, user_metadata: str,
            max_records_per_file: int | None = None) -> int | str | None:
    """``table`` (an Arrow table of every column, partition columns included) appended to
    the local Delta table at ``path`` with SetTransaction(``app_id``, ``txn_version``) and
    ``user_metadata``, as one commit at the version after the newest, in files of up to
    ``max_records_per_file`` rows: what ``delta_transactions.claimed_commit`` commits
    through Delta. The version committed; :data:`CLAIM_TAKEN` when the table holds
    ``app_id`` at ``txn_version`` or later; None when this way does not apply. Raises
    :class:`LostCommitRace` when another writer took the version (nothing is committed):
    the caller planned from the version before, so it plans again, as after Delta's
    conflict."""
    found = _newest(path)
    if found is None:
        return None
    folder, version = found
    checksum = version_checksum.checksum(path, version)
    if not committable(checksum, version, append=True) or not isinstance(checksum.get("setTransactions"), list):
        return None
    metadata = checksum["metadata"]
    if "delta.setTransactionRetentionDuration" in (metadata.get("configuration") or {}):
        return None  # Delta drops expired claims as it reads them
    if max((t["version"] for t in checksum["setTransactions"] if t.get("appId") == app_id), default=-1) >= txn_version:
        return CLAIM_TAKEN
    adds = _written(folder, metadata, table, max_records_per_file)
    if adds is None:
        return None
    if not committable(checksum, version, new_files=len(adds), append=True):
        _remove(folder, adds)
        return None
    claim = {"appId": app_id, "version": txn_version, "lastUpdated": int(time.time() * 1000)}
    txn_id = str(uuid.uuid4())
    created = _put_if_absent(folder, version + 1,
                             _commit_lines(version, "Append", adds, [], txn_id, user_metadata, claim))
    if created:
        _write_checksum(folder, version + 1, _next_checksum(checksum, adds, [], txn_id, claim))
        return version + 1
    _remove(folder, adds)
    if created is False:
        raise LostCommitRace(f"{path}: version {version + 1} was committed by another writer")
    return None


def replaced(path: str, replace: Callable[[version_checksum.PlainFiles], object]) -> int | None:
    """Every row of the local Delta table at ``path`` replaced by ``replace(files)`` (an
    Arrow table in the table's columns, made from the rows of the version's ``files``) in
    one overwrite commit: every live file removed, the new rows written as one file. The
    version committed, or None when this way does not apply (nothing is committed)."""
    found = _newest(path)
    if found is None:
        return None
    folder, version = found
    for _ in range(MAX_COMMIT_ATTEMPTS):
        checksum = version_checksum.checksum(path, version)
        files = version_checksum.plain_files(path, version)
        if (not committable(checksum, version) or not version_checksum.rewritable(files)
                or files.configuration.get("delta.appendOnly", "false").lower() == "true"):
            return None  # (an append-only table: Delta refuses the removes, with its own error)
        adds = _written(folder, checksum["metadata"], replace(files), single=True)
        if adds is None:
            return None
        txn_id = str(uuid.uuid4())
        removes = _removes(files.adds)
        created = _put_if_absent(folder, version + 1, _commit_lines(version, "Overwrite", adds, removes, txn_id))
        if created:
            _write_checksum(folder, version + 1, _next_checksum(checksum, adds, removes, txn_id))
            return version + 1
        _remove(folder, adds)
        if created is None:
            return None
        # Another writer took the version: its rows are what this replace must start from.
        version += 1
    return None


def _newest(path: str) -> tuple[str, int] | None:
    """The local table's folder and newest version, or None (not local, or no commit yet)."""
    folder = local_folder(path)
    newest = None if folder is None else local_commits(path, 1)
    return (folder, newest[0].version) if newest else None


def _written(folder: str, metadata: dict, table, max_records_per_file: int | None = None,
             single: bool = False) -> list[dict] | None:
    """``table`` written as Parquet files for a table of ``metadata`` (``single``: as one
    file), as ``arrow_files`` writes them for Delta's commit: their ``add`` actions, or None
    (nothing written)."""
    from pyspark.sql.types import StructType

    struct = StructType.fromJson(json.loads(metadata["schemaString"]))
    partition_columns = list(metadata.get("partitionColumns") or [])
    named = (metadata.get("configuration") or {}).get("delta.dataSkippingStatsColumns")
    adds = arrow_files.add_actions(folder, table, struct, partition_columns,
                                   arrow_files.stats_columns(named, partition_columns), max_records_per_file)
    if adds is not None and single and len(adds) != 1:
        _remove(folder, adds)
        return None
    return adds


def _removes(adds) -> list[dict]:
    """``remove`` actions for live files' ``add`` actions, as Delta's overwrite writes them."""
    removed_at = int(time.time() * 1000)
    kept = ("path", "partitionValues", "size", "stats", "tags")
    return [{**{k: add[k] for k in kept if k in add}, "deletionTimestamp": removed_at, "dataChange": True,
             "extendedFileMetadata": True} for add in adds]


def _commit_lines(read_version: int, mode: str, adds: list[dict], removes: list[dict], txn_id: str,
                  user_metadata: str | None = None, claim: dict | None = None) -> str:
    # as Delta's writes record them (vacuum's rules read what a WRITE removed); as strings in the log
    counted = {**arrow_files.written_metrics(adds), **(removed_metrics(removes) if removes else {})}
    metrics = {name: str(value) for name, value in counted.items()}
    info = {"timestamp": int(time.time() * 1000), "operation": "WRITE", "operationParameters": {"mode": mode},
            "readVersion": read_version, "isolationLevel": "Serializable", "isBlindAppend": not removes,
            "operationMetrics": metrics, **({"userMetadata": user_metadata} if user_metadata is not None else {}),
            "engineInfo": f"topiclake/{__version__} (no JVM)", "txnId": txn_id}
    actions = [{"commitInfo": info}, *({"add": add} for add in adds), *({"remove": r} for r in removes),
               *([{"txn": claim}] if claim else [])]
    return "".join(json.dumps(action, separators=(",", ":")) + "\n" for action in actions)


def removed_metrics(adds) -> dict:
    """The operation metrics Delta's own overwrite registers for the files it removes
    (``add`` or ``remove`` actions as dicts): vacuum's rules read them to know a WRITE
    removed files (``framework.cleaner.rules.removes_files``)."""
    adds = list(adds)
    return {"numRemovedFiles": len(adds), "numRemovedBytes": sum(int(add.get("size", 0)) for add in adds)}


def _put_if_absent(folder: str, version: int, text: str) -> bool | None:
    """Create the version's commit file with ``text`` unless it exists: a hard link of a
    written temporary file, which the file system refuses when the name is taken. Whether
    it was created; None on a file system without hard links (this way does not apply)."""
    log = os.path.join(folder, DELTA_LOG)
    temporary = os.path.join(log, f".{version:020d}.json.{uuid.uuid4()}.tmp")
    with open(temporary, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    try:
        os.link(temporary, os.path.join(log, f"{version:020d}.json"))
        return True
    except FileExistsError:
        return False
    except OSError:  # no hard links here (EPERM, ENOTSUP): no put-if-absent to rely on
        return None
    finally:
        os.unlink(temporary)


def _next_checksum(checksum: dict, adds: list[dict], removes: list[dict], txn_id: str,
                   claim: dict | None = None) -> dict:
    """The previous version's checksum with ``adds`` added, ``removes`` gone and ``claim``
    (a SetTransaction) taking its app id's place, as Delta carries it forward."""
    added, removed = sum(a["size"] for a in adds), sum(r["size"] for r in removes)
    following = dict(checksum, txnId=txn_id, numFiles=checksum["numFiles"] + len(adds) - len(removes),
                     tableSizeBytes=checksum["tableSizeBytes"] + added - removed)
    if "allFiles" in checksum:
        gone = {r["path"] for r in removes}
        following["allFiles"] = [f for f in checksum["allFiles"] if f["path"] not in gone] + [
            dict(add, dataChange=False) for add in adds]
    histogram = checksum.get("fileSizeHistogram")
    if isinstance(histogram, dict):
        bins, counts, sizes = histogram["sortedBinBoundaries"], [*histogram["fileCounts"]], [*histogram["totalBytes"]]
        for sign, f in [*((1, a) for a in adds), *((-1, r) for r in removes)]:
            bin_ = bisect.bisect_right(bins, f["size"]) - 1
            counts[bin_] += sign
            sizes[bin_] += sign * f["size"]
        following["fileSizeHistogram"] = dict(histogram, fileCounts=counts, totalBytes=sizes)
    if claim is not None:
        following["setTransactions"] = [t for t in checksum["setTransactions"] if t["appId"] != claim["appId"]] + [
            claim]
    return following


def _write_checksum(folder: str, version: int, checksum: dict) -> None:
    log = os.path.join(folder, DELTA_LOG)
    temporary = os.path.join(log, f".{version:020d}.crc.{uuid.uuid4()}.tmp")
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(checksum, handle, separators=(",", ":"))
    os.replace(temporary, os.path.join(log, f"{version:020d}.crc"))


def _remove(folder: str, adds: list[dict]) -> None:
    """Delete the data files of a commit that was not made (no version lists them)."""
    for add in adds:
        os.unlink(os.path.join(folder, *add["path"].split("/")))
