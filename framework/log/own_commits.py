"""Delta commits of small local tables made by topiclake itself, without a JVM: a blind
append and a replace of every row.

An idle ``maintain`` in a new process decides everything from the Delta logs' files, and
its only write is its history rows: one Parquet file and one commit. A ``commit-offset``
reads the committed offsets by Arrow and writes them back as one file and one commit.
Through Delta's transaction API either commit cost the JVM and a session, 4 to 7 s of a
command that had nothing else to do (docs/performance-log.md, stop 88). Here the commit is
made as the Delta protocol defines it: the new Parquet file (written by Arrow, as the JVM
route writes it, ``arrow_files.add_actions``), then the next version's commit file (an
``add`` for the new file, a ``remove`` for each file a replace drops, a ``commitInfo``),
created only if absent, so that of two writers racing for a version exactly one wins;
then that version's checksum, Delta's previous one carried forward with the files (so the
local reads that list a version from its checksum keep doing so).

A blind append reads nothing: losing a version to another writer, it tries the next one,
unless the winner changed the table itself. A replace reads every row: losing, it reads
the winner's rows and writes its file again, as Delta's conflict check would make it.

Only a table this writer can commit to exactly as Delta would takes this way: on the local
file system; its newest version's checksum readable and complete (every live file listed,
no field this writer does not know how to carry forward); protocol (1, 2) with no table
feature; no partition columns, column mapping or column invariants; the new version not
one at which Delta writes a checkpoint (``delta.checkpointInterval``); and a file system
that makes hard links (the put-if-absent). Anything else
returns None with nothing committed, and the caller commits through Delta.
``tests/test_own_commits.py`` pins each commit and its checksum to those Delta writes for the
same rows, and reads the table through Delta and delta-rs after it.

A crash after the Parquet file leaves a file no version lists (VACUUM removes it); after
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
from framework.log.delta_commits import MAX_COMMIT_ATTEMPTS
from framework.log.delta_transactions import removed_metrics

__all__ = ["appended", "committable", "replaced"]

#: The only protocol taken: Delta's plain reader 1 and writer 2, no table features.
PLAIN_PROTOCOL = {"minReaderVersion": 1, "minWriterVersion": 2}
#: Delta's default ``delta.checkpointInterval``.
DEFAULT_CHECKPOINT_INTERVAL = 10
#: Delta lists a version's files in its checksum while it has at most this many
#: (``spark.databricks.delta.allFilesInCrc.thresholdNumFiles``'s default).
ALL_FILES_THRESHOLD = 50
#: The checksum's fields, each carried forward by :func:`_next_checksum`.
CHECKSUM_FIELDS = frozenset({"txnId", "tableSizeBytes", "numFiles", "numMetadata", "numProtocol",
                             "setTransactions", "domainMetadata", "metadata", "protocol", "fileSizeHistogram",
                             "allFiles"})


def committable(checksum: dict | None, version: int, new_files: int = 1) -> bool:
    """Whether a commit that leaves ``new_files`` more files than ``version`` (whose checksum
    is ``checksum``) can be made here (see the module's text)."""
    if not isinstance(checksum, dict) or not set(checksum) <= CHECKSUM_FIELDS:
        return False
    metadata = checksum.get("metadata")
    files = checksum.get("allFiles")
    if (checksum.get("protocol") != PLAIN_PROTOCOL or not isinstance(metadata, dict)
            or not isinstance(files, list) or len(files) != checksum.get("numFiles")
            or len(files) + new_files > ALL_FILES_THRESHOLD):
        return False
    configuration = metadata.get("configuration") or {}
    schema = metadata.get("schemaString")
    try:
        interval = int(configuration.get("delta.checkpointInterval", DEFAULT_CHECKPOINT_INTERVAL))
    except ValueError:
        return False
    return (isinstance(schema, str) and "delta.invariants" not in schema and not metadata.get("partitionColumns")
            and configuration.get("delta.columnMapping.mode", "none") == "none"
            and interval > 0 and (version + 1) % interval != 0)


def appended(path: str, table) -> int | None:
    """``table`` (an Arrow table of the table's columns, as Spark maps its schema to Arrow's)
    appended to the local Delta table at ``path`` as one Parquet file and one commit: the
    version committed, or None when this way does not apply (nothing is committed)."""
    found = _newest(path)
    if found is None:
        return None
    folder, version = found
    checksum = version_checksum.checksum(path, version)
    if not committable(checksum, version):
        return None
    metadata = checksum["metadata"]
    adds = _written(folder, metadata, table)
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
        if not committable(winner, version) or winner["metadata"] != metadata:
            break
        checksum = winner
    _remove(folder, adds)
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
        adds = _written(folder, checksum["metadata"], replace(files))
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


def _written(folder: str, metadata: dict, table) -> list[dict] | None:
    """``table`` written as one Parquet file for a table of ``metadata``: its ``add`` action
    as a one-item list, or None (nothing written)."""
    from pyspark.sql.types import StructType

    struct = StructType.fromJson(json.loads(metadata["schemaString"]))
    named = (metadata.get("configuration") or {}).get("delta.dataSkippingStatsColumns")
    adds = arrow_files.add_actions(folder, table, struct, [], arrow_files.stats_columns(named, []))
    if adds is not None and len(adds) != 1:
        _remove(folder, adds)
        return None
    return adds


def _removes(adds) -> list[dict]:
    """``remove`` actions for live files' ``add`` actions, as Delta's overwrite writes them."""
    removed_at = int(time.time() * 1000)
    kept = ("path", "partitionValues", "size", "stats", "tags")
    return [{**{k: add[k] for k in kept if k in add}, "deletionTimestamp": removed_at, "dataChange": True,
             "extendedFileMetadata": True} for add in adds]


def _commit_lines(read_version: int, mode: str, adds: list[dict], removes: list[dict], txn_id: str) -> str:
    # as Delta's writes record them (vacuum's rules read what a WRITE removed); as strings in the log
    counted = {**arrow_files.written_metrics(adds), **(removed_metrics(removes) if removes else {})}
    metrics = {name: str(value) for name, value in counted.items()}
    info = {"timestamp": int(time.time() * 1000), "operation": "WRITE", "operationParameters": {"mode": mode},
            "readVersion": read_version, "isolationLevel": "Serializable", "isBlindAppend": not removes,
            "operationMetrics": metrics, "engineInfo": f"topiclake/{__version__} (no JVM)", "txnId": txn_id}
    actions = [{"commitInfo": info}, *({"add": add} for add in adds), *({"remove": r} for r in removes)]
    return "".join(json.dumps(action, separators=(",", ":")) + "\n" for action in actions)


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


def _next_checksum(checksum: dict, adds: list[dict], removes: list[dict], txn_id: str) -> dict:
    """The previous version's checksum with ``adds`` added and ``removes`` gone, as Delta
    carries it forward (the file-size histogram counted again from the files)."""
    gone = {r["path"] for r in removes}
    files = [f for f in checksum["allFiles"] if f["path"] not in gone]
    files += [dict(add, dataChange=False) for add in adds]
    following = dict(checksum, txnId=txn_id, allFiles=files, numFiles=len(files),
                     tableSizeBytes=sum(f["size"] for f in files))
    histogram = checksum.get("fileSizeHistogram")
    if isinstance(histogram, dict):
        bins = histogram["sortedBinBoundaries"]
        counts, sizes = [0] * len(bins), [0] * len(bins)
        for f in files:
            bin_ = bisect.bisect_right(bins, f["size"]) - 1
            counts[bin_] += 1
            sizes[bin_] += f["size"]
        following["fileSizeHistogram"] = dict(histogram, fileCounts=counts, totalBytes=sizes)
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
