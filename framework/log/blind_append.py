"""A blind append to a small local Delta table, committed by topiclake itself: no JVM.

An idle ``maintain`` in a new process decides everything from the Delta logs' files, and
its only write is its history rows: one Parquet file and one commit. Through Delta's
transaction API that commit cost the JVM and a session, 5 to 7 s of a run that had
nothing else to do (docs/performance-log.md, stop 88). Here the commit is made as the
Delta protocol defines it for a blind append (an ``add`` action per new file, a
``commitInfo``, nothing read): the next version's commit file, created only if absent, so
that of two writers racing for a version exactly one wins and the other tries the one
after; then that version's checksum, Delta's previous one carried forward with the new
files (so the local reads that list a version from its checksum keep doing so).

Only a table this writer can append to exactly as Delta would takes this way: on the local
file system; its newest version's checksum readable and complete (every live file listed,
no field this writer does not know how to carry forward); protocol (1, 2) with no table
feature; no partition columns, column mapping or column invariants; and the new version
not one at which Delta writes a checkpoint (``delta.checkpointInterval``). Anything else
returns None with nothing committed, and the caller commits through Delta.
``tests/test_blind_append.py`` pins the commit and the checksum to those Delta writes for the
same rows, and reads the table through Delta after it.

A crash after the Parquet file leaves a file no version lists (VACUUM removes it); after
the commit file, a version without a checksum (readers then ask Delta, as for any table
whose checksum was not written). Delta's own log store on a local disk checks that a
version is absent and then renames its commit into place, so a JVM writer and this one
are as safe against each other as two JVM processes on one local disk are.
"""

from __future__ import annotations

import bisect
import json
import os
import time
import uuid

from framework import __version__
from framework.log import arrow_files, version_checksum
from framework.log.commit_log import DELTA_LOG, local_commits, local_folder
from framework.log.delta_commits import MAX_COMMIT_ATTEMPTS

__all__ = ["appended", "appendable"]

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


def appendable(checksum: dict | None, version: int, new_files: int = 1) -> bool:
    """Whether ``new_files`` appended after ``version`` (whose checksum is ``checksum``) can
    be committed here (see the module's text)."""
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
    from pyspark.sql.types import StructType

    folder = local_folder(path)
    newest = None if folder is None else local_commits(path, 1)
    if not newest:
        return None
    version = newest[0].version
    checksum = version_checksum.checksum(path, version)
    if not appendable(checksum, version):
        return None
    metadata = checksum["metadata"]
    struct = StructType.fromJson(json.loads(metadata["schemaString"]))
    named = (metadata.get("configuration") or {}).get("delta.dataSkippingStatsColumns")
    adds = arrow_files.add_actions(folder, table, struct, [], arrow_files.stats_columns(named, []))
    if adds is None or len(adds) != 1:
        _remove(folder, adds or [])
        return None
    for _ in range(MAX_COMMIT_ATTEMPTS):
        txn_id = str(uuid.uuid4())
        if _put_if_absent(folder, version + 1, _commit_lines(version, adds, txn_id)):
            _write_checksum(folder, version + 1, _next_checksum(checksum, adds, txn_id))
            return version + 1
        # Another writer took the version. A blind append conflicts with nothing but a
        # change of the table itself, which the winner's checksum would show.
        version += 1
        winner = version_checksum.checksum(path, version)
        if not appendable(winner, version) or winner["metadata"] != metadata:
            break
        checksum = winner
    _remove(folder, adds)
    return None


def _commit_lines(read_version: int, adds: list[dict], txn_id: str) -> str:
    rows = sum(json.loads(add["stats"])["numRecords"] for add in adds)
    info = {"timestamp": int(time.time() * 1000), "operation": "WRITE", "operationParameters": {"mode": "Append"},
            "readVersion": read_version, "isolationLevel": "Serializable", "isBlindAppend": True,
            "operationMetrics": {"numFiles": str(len(adds)), "numOutputRows": str(rows),
                                 "numOutputBytes": str(sum(add["size"] for add in adds))},
            "engineInfo": f"topiclake/{__version__} (blind append, no JVM)", "txnId": txn_id}
    actions = [{"commitInfo": info}, *({"add": add} for add in adds)]
    return "".join(json.dumps(action, separators=(",", ":")) + "\n" for action in actions)


def _put_if_absent(folder: str, version: int, text: str) -> bool:
    """Create the version's commit file with ``text`` unless it exists: a hard link of a
    written temporary file, which the file system refuses when the name is taken."""
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
    finally:
        os.unlink(temporary)


def _next_checksum(checksum: dict, adds: list[dict], txn_id: str) -> dict:
    """The previous version's checksum with ``adds`` added, as Delta carries it forward."""
    following = dict(checksum, txnId=txn_id)
    following["tableSizeBytes"] = checksum["tableSizeBytes"] + sum(add["size"] for add in adds)
    following["numFiles"] = checksum["numFiles"] + len(adds)
    following["allFiles"] = [*checksum["allFiles"], *(dict(add, dataChange=False) for add in adds)]
    histogram = checksum.get("fileSizeHistogram")
    if isinstance(histogram, dict):
        counts, sizes = list(histogram["fileCounts"]), list(histogram["totalBytes"])
        for add in adds:
            bin_ = bisect.bisect_right(histogram["sortedBinBoundaries"], add["size"]) - 1
            counts[bin_] += 1
            sizes[bin_] += add["size"]
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
