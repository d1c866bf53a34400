"""A Delta table's commits (its ``commitInfo`` actions), newest first, without a Spark job.

Everything topiclake decides per partition starts from the newest commits: the offset
bookkeeping rides in their ``userMetadata`` (``log_state.py``), and vacuum's rules read
their operations, metrics and times. ``DeltaTable.history()`` answers that through a
DataFrame, about 100 ms a call on a two-row table; a maintenance run asks a few times per
partition, which made an idle partition cost most of a second.

On a local file system the commit files are read here, as the Delta protocol lays them
out: ``_delta_log/<version, 20 digits>.json``, one action per line, one ``commitInfo``
among them. A commit's time is what Delta's own history reports: the in-commit timestamp
when the table has one, else the commit file's modification time, made strictly
increasing over the commits read. The newest commits are found from the checkpoint
Delta's ``_last_checkpoint`` names, and the first version of a time-travel window by a
binary search, so that neither reads or lists every commit the window keeps. Other
storage (``s3a://``, ``abfss://``, ``dbfs:/``) and Spark Connect sessions go through
``DeltaTable.history()``, the same answer the slower way; ``tests/test_commit_log.py``
pins the two together.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Sequence

DELTA_LOG = "_delta_log"
#: The folder Delta's create makes in ``_delta_log`` before its first commit.
STAGED_COMMITS = "_staged_commits"
#: How many of a table's newest commits vacuum's rules read (fewer than this: all it has).
HISTORY_PAGE = 500
_COMMIT_NAME_LENGTH = 20 + len(".json")
#: Delta's pointer to the table's newest checkpoint.
_LAST_CHECKPOINT = "_last_checkpoint"
#: How many commits before the one a time search finds are read to make their times
#: increasing (Delta's time travel likewise starts from the checkpoint before the time
#: asked; topiclake checkpoints every 100 commits).
_TIME_STRETCH = 100


@dataclass(frozen=True)
class Commit:
    """One entry of the table's history (``DESCRIBE HISTORY``'s columns that topiclake reads)."""

    version: int
    timestamp_ms: int
    operation: str
    #: operationMetrics, as Delta writes them (string values)
    metrics: dict = field(default_factory=dict)
    read_version: int | None = None
    user_metadata: str | None = None


def local_folder(path: str) -> str | None:
    """The table's folder when it is on the local file system, else None."""
    if path.startswith("file:"):
        rest = path[len("file:"):]
        return "/" + rest.lstrip("/") if rest.startswith("/") else None
    scheme, sep, _ = path.partition(":")
    if sep and len(scheme) > 1:
        return None
    return path


def read_commits(spark, path: str, limit: int | None = None) -> list[Commit]:
    """The table's newest ``limit`` commits (all that the log keeps when None), newest first."""
    local = local_commits(path, limit)
    return local if local is not None else _from_delta_history(spark, path, limit)


def local_commits(path: str, limit: int | None = None) -> list[Commit] | None:
    """:func:`read_commits` of a table on the local file system, which needs no Spark
    session; None when the table is elsewhere or has no log folder."""
    folder = local_folder(path)
    if folder is None or not os.path.isdir(os.path.join(folder, DELTA_LOG)):
        return None
    return _from_files(os.path.join(folder, DELTA_LOG), limit)


def _commit_versions(log_folder: str) -> list[int]:
    versions = []
    for name in os.listdir(log_folder):
        if len(name) == _COMMIT_NAME_LENGTH and name.endswith(".json") and name[:20].isdigit():
            versions.append(int(name[:20]))
    versions.sort()
    return versions


def _commit_info(file_name: str) -> tuple[dict, int] | None:
    """The commitInfo action of one commit file and the file's mtime (ms); None if it is gone."""
    try:
        with open(file_name, encoding="utf-8") as handle:
            mtime_ms = os.fstat(handle.fileno()).st_mtime_ns // 1_000_000
            for line in handle:
                # Delta writes commitInfo first; parse only the line that holds it
                if line.lstrip().startswith('{"commitInfo"'):
                    return json.loads(line)["commitInfo"], mtime_ms
    except FileNotFoundError:  # expired by log cleanup between the listing and the read
        return None
    return {}, mtime_ms


def commit_txn_id(log_folder: str, version: int) -> str | None:
    """The ``txnId`` a commit's commitInfo carries (Delta 4 writes the same id into the
    version's checksum), or None when the commit file is gone, unreadable or has none."""
    try:
        found = _commit_info(_commit_file(log_folder, version))
    except (OSError, ValueError):  # unreadable, or its commitInfo line is not JSON
        return None
    txn_id = None if found is None else found[0].get("txnId")
    return txn_id if isinstance(txn_id, str) else None


def _newest_version(log_folder: str) -> int | None:
    """The newest commit's version. From the checkpoint Delta's ``_last_checkpoint`` names,
    the commits go on without a gap, so the first version above it with no commit file ends
    the log: at most a checkpoint interval of ``stat`` calls, where a listing of the folder
    grows with every commit and checksum the log keeps (0.1 s at 60,000 commits, and a run
    asks several times a partition). A listing when there is no such checkpoint."""
    try:
        with open(os.path.join(log_folder, _LAST_CHECKPOINT), encoding="utf-8") as handle:
            version = int(json.load(handle)["version"])
    except (OSError, ValueError, KeyError, TypeError):  # none yet, or not what Delta writes
        version = None
    if version is None or not os.path.exists(_commit_file(log_folder, version)):
        versions = _commit_versions(log_folder)
        return versions[-1] if versions else None
    while os.path.exists(_commit_file(log_folder, version + 1)):
        version += 1
    return version


def _commit_file(log_folder: str, version: int) -> str:
    return os.path.join(log_folder, f"{version:020d}.json")


def commit_actions(path: str, version: int) -> list[dict] | None:
    """Every action of the commit of ``version`` of the local table at ``path`` (dicts, as
    its lines hold them), or None: not local, or the commit file is gone or not JSON."""
    folder = local_folder(path)
    if folder is None:
        return None
    try:
        with open(_commit_file(os.path.join(folder, DELTA_LOG), version), encoding="utf-8") as handle:
            actions = [json.loads(line) for line in handle if line.strip()]
    except (OSError, ValueError):
        return None
    return actions if all(isinstance(action, dict) for action in actions) else None


def _from_files(log_folder: str, limit: int | None) -> list[Commit]:
    if limit is None:
        versions: Sequence[int] = _commit_versions(log_folder)
    else:  # log cleanup removes the oldest commits only: the newest ``limit`` versions that remain
        newest = _newest_version(log_folder)
        versions = range(0) if newest is None else range(max(0, newest - limit + 1), newest + 1)
    return _commits_of(log_folder, versions)[::-1]


def _commits_of(log_folder: str, versions: Sequence[int]) -> list[Commit]:
    """These versions' commits, oldest first, their times made strictly increasing over them."""
    commits: list[Commit] = []
    previous_ms = None
    for version in versions:  # oldest first, to make the times strictly increasing as Delta does
        found = _commit_info(_commit_file(log_folder, version))
        if found is None:  # expired by log cleanup
            continue
        info, mtime_ms = found
        timestamp_ms = _commit_time(info, mtime_ms)
        if previous_ms is not None and timestamp_ms <= previous_ms:
            timestamp_ms = previous_ms + 1
        previous_ms = timestamp_ms
        read_version = info.get("readVersion")
        commits.append(Commit(
            version=version, timestamp_ms=timestamp_ms, operation=info.get("operation") or "",
            metrics=dict(info.get("operationMetrics") or {}),
            read_version=None if read_version is None else int(read_version), user_metadata=info.get("userMetadata"),
        ))
    return commits


def first_version_since(spark, path: str, since_ms: int) -> int | None:
    """The oldest version committed at or after ``since_ms`` (a time-travel window's first
    version), or None when every commit is older.

    On a local table a commit's time grows with its version, so a binary search over the
    versions up to the newest (one log cleanup expired counting as older) finds the first
    whose own time is at or after ``since_ms``; the
    :data:`_TIME_STRETCH` commits before it are then read and made increasing, as
    :func:`read_commits` makes what it reads, since that can bring the boundary a few
    commits earlier. About log2(n) + 100 files read where reading every commit reads n (a
    week of produces every 10 s is 60,000 commits: 1.6 s a call). Elsewhere, Delta's time
    travel answers (:func:`_first_version_since_by_delta`).
    """
    folder = local_folder(path)
    log_folder = None if folder is None else os.path.join(folder, DELTA_LOG)
    if log_folder is None or not os.path.isdir(log_folder):
        return _first_version_since_by_delta(spark, path, since_ms)
    newest = _newest_version(log_folder)
    versions = range(0 if newest is None else newest + 1)
    low, high = 0, len(versions)
    while low < high:
        middle = (low + high) // 2
        found = _commit_info(_commit_file(log_folder, versions[middle]))
        # a commit not there was expired by log cleanup: older than any kept
        if found is not None and _commit_time(*found) >= since_ms:
            high = middle
        else:
            low = middle + 1
    stretch = _commits_of(log_folder, versions[max(0, low - _TIME_STRETCH):low + 1])
    return next((c.version for c in stretch if c.timestamp_ms >= since_ms), None)


def _first_version_since_by_delta(spark, path: str, since_ms: int) -> int | None:
    """:func:`first_version_since` on other storage: the commit Delta's time travel finds
    active at ``since_ms`` (``getActiveCommitAtTime``, which searches from the checkpoint
    before it instead of reading the whole history), or the one after it when it is older.
    A Spark Connect session has no JVM to ask: every commit from Delta's history."""
    from framework.log.delta_transactions import DeltaJvm, jvm_of

    if jvm_of(spark) is None:
        inside = [c.version for c in read_commits(spark, path) if c.timestamp_ms >= since_ms]
        return min(inside) if inside else None
    delta = DeltaJvm(spark)
    # the last commit when since_ms is after every commit; the first when it is before
    active = delta.delta_log(path).history().getActiveCommitAtTime(
        delta.cls("java.sql.Timestamp")(since_ms), delta.none(), True, False, True)
    if active.timestamp() >= since_ms:
        return int(active.version())
    return int(active.version()) + 1 if active.version() < read_commits(spark, path, 1)[0].version else None


def commit_time(path: str, version: int) -> int | None:
    """A local table's commit's own time (:func:`_commit_time`, as Delta's time travel
    reads it), or None: not a local table, or the commit gone."""
    folder = local_folder(path)
    found = None if folder is None else _commit_info(_commit_file(os.path.join(folder, DELTA_LOG), version))
    return None if found is None else _commit_time(*found)


def _commit_time(info: dict, mtime_ms: int) -> int:
    """A commit's own time: its in-commit timestamp, else its file's modification time."""
    return int(info.get("inCommitTimestamp", mtime_ms))


def _from_delta_history(spark, path: str, limit: int | None) -> list[Commit]:
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    table = DeltaTable.forPath(spark, path)
    history = table.history(limit) if limit else table.history()
    rows = history.select("version", F.unix_millis("timestamp").alias("ms"), "operation", "readVersion",
                          "userMetadata", "operationMetrics").collect()
    return [Commit(r["version"], r["ms"], r["operation"] or "", dict(r["operationMetrics"] or {}),
                   r["readVersion"], r["userMetadata"]) for r in rows]
