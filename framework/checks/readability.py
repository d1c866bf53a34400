"""G9: can a version inside the time-travel window still be read? (Which versions must be
is the pure ``scope.versions_to_read``.) And the violations frame of what it found
(:data:`VIOLATIONS_SCHEMA`), which the vacuum's check counts as the others count theirs.

A small local partition's versions are read here first, without Spark
(:func:`readable_here`): that a vacuum which deleted files itself
(``framework.log.own_vacuum``) still starts no JVM for its check. Only a clean answer is
taken from there; anything it cannot read, Spark reads, and says why."""

from __future__ import annotations

import json
import os
import re
from functools import reduce

from framework.errors import first_line
from framework.log import deletion_vectors, local_records
from framework.log.commit_log import DELTA_LOG, local_folder
from framework.log.partition_log import PartitionLog

__all__ = ["VIOLATIONS_SCHEMA", "read_problem", "read_problems", "readable_here", "unreadable"]

_COMMIT = re.compile(r"(\d{20})\.json")
_CHECKPOINT = re.compile(r"(\d{20})\.checkpoint\.parquet")


def readable_here(log: PartitionLog, versions: list[int]) -> bool:
    """Whether each of ``versions`` of the small local partition is readable in full, told
    without Spark: Delta can rebuild it from the log files there (its commit, and every
    commit back to a checkpoint or to version 0), its checksum lists its files
    (``local_records.small_plain_files``), and Arrow reads each file's offsets whole, and
    each file's deletion vector, as Spark's read of the version opens every file and
    vector. False when any of that is not so, or not known here."""
    folder = local_folder(log.path)
    if folder is None:
        return False
    try:
        names = os.listdir(os.path.join(folder, DELTA_LOG))
    except OSError:
        return False
    commits = {int(m.group(1)) for m in map(_COMMIT.fullmatch, names) if m}
    checkpoints = {int(m.group(1)) for m in map(_CHECKPOINT.fullmatch, names) if m}
    paths, vectors = set(), {}  # the versions share most of their files: each is read once
    for version in versions:
        base = max((c for c in checkpoints if c <= version), default=-1)
        files = local_records.small_plain_files(log.path, version)
        if files is None or not commits.issuperset(range(base + 1, version + 1)):
            return False
        paths.update(files.paths)
        vectors.update((json.dumps(add["deletionVector"], sort_keys=True), (files.folder, add["deletionVector"]))
                       for add in files.adds if add.get("deletionVector"))
    try:
        return (all(local_records.file_columns(path, ["offset"]) is not None for path in sorted(paths))
                and all(deletion_vectors.hidden_rows(*vector) is not None for vector in vectors.values()))
    except (OSError, ValueError):  # a file gone, or not Parquet: Spark says which
        return False


def read_problem(log: PartitionLog, version: int) -> str | None:
    """Why ``version`` cannot be read in full, or None when it can.

    Every data file must be opened: the largest hash of one column cannot be answered
    from Delta's statistics, which a count (or a min or max of the column) could be.
    """
    from pyspark.sql import functions as F

    try:
        log.read(version).agg(F.max(F.xxhash64("offset"))).collect()
    except Exception as error:  # noqa: BLE001 - any failure to read is the finding
        return first_line(error)[:400]
    return None


def read_problems(log: PartitionLog, versions: list[int]) -> dict[int, str | None]:
    """:func:`read_problem` of each version. They are read in one Spark query (one job
    instead of one a version); only when that fails is each read alone, to say which."""
    from pyspark.sql import functions as F

    if len(versions) > 1:
        try:
            hashes = [log.read(v).select(F.xxhash64("offset").alias("h")) for v in versions]
            reduce(lambda left, right: left.unionAll(right), hashes).agg(F.max("h")).collect()
            return {v: None for v in versions}
        except Exception:  # noqa: BLE001 - some version cannot be read: find which, one by one
            pass
    return {v: read_problem(log, v) for v in versions}


def unreadable(log: PartitionLog, due: list[tuple[int, str]]) -> list[tuple[int, str, str]]:
    """Of the versions ``due`` (``scope.versions_to_read``'s (version, why) pairs), each one
    that cannot be read, with why it is due and what reading it found: told without Spark
    when every one reads here (:func:`readable_here`), else read by Spark."""
    versions = [version for version, _ in due]
    if readable_here(log, versions):
        return []
    problems = read_problems(log, versions)
    return [(version, why, problems[version]) for version, why in due if problems[version] is not None]


#: The violations frame's schema (``rules.violations``'), for the rows G9's check finds.
VIOLATIONS_SCHEMA = "guarantee STRING, `offset` BIGINT, key STRING, detail STRING"
