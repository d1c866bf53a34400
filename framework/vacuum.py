"""Time travel and vacuum: removed records leave the disk, but never too early.

Every table version committed within ``time.travel.retention.ms`` stays readable. Since
Delta 4.1, VACUUM takes its window from ``delta.deletedFileRetentionDuration`` (a
``RETAIN n HOURS`` other than 0 is ignored), so the window is set through the table
properties, from the spec, before every vacuum. With deletion vectors, a DELETE or MERGE
only marks rows deleted; ``REORG TABLE ... APPLY (PURGE)`` rewrites those files without
the rows, and the VACUUM that runs once the window has passed removes the old files. So a
key deleted by a tombstone is, in the end, gone from every file of the table.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import ArgumentError
from .log import PartitionLog, commit_metadata, session_confs
from .log_state import to_metadata

RETENTION_CHECK_CONF = "spark.databricks.delta.retentionDurationCheck.enabled"
#: The flag a user must pass to vacuum with a window shorter than the spec's.
UNSAFE_FLAG = "--unsafe-shorter-time-travel"


@dataclass(frozen=True)
class VacuumResult:
    partition: int
    window_ms: int
    properties_changed: tuple[str, ...]
    purged: bool
    version_before: int
    version_after: int
    files_deleted: int
    oldest_readable_version: int | None


def check_window(spec_window_ms: int, requested_ms: int | None, unsafe: bool) -> int:
    """The window a vacuum will keep; refuse a shorter one unless the user insisted.

    Delta 4.1 can only vacuum with the table's window, or with none at all (0), so a
    request for anything else is refused with the reason.
    """
    if requested_ms is None or requested_ms == spec_window_ms:
        return spec_window_ms
    if requested_ms > spec_window_ms:
        raise ArgumentError(
            f"--retention-ms: {requested_ms} is longer than time.travel.retention.ms ({spec_window_ms}); "
            "Delta 4.1 vacuums with the table's window only, so raise time.travel.retention.ms in the spec"
        )
    if not unsafe:
        raise ArgumentError(
            f"--retention-ms: {requested_ms} is shorter than time.travel.retention.ms ({spec_window_ms}): "
            f"table versions inside the spec's window would stop being readable; pass {UNSAFE_FLAG} "
            "if that is really what you want"
        )
    if requested_ms != 0:
        raise ArgumentError(
            f"--retention-ms: Delta 4.1 ignores a vacuum window other than the table's unless it is 0; "
            f"use 0 with {UNSAFE_FLAG}, or lower time.travel.retention.ms in the spec"
        )
    return 0


def _files_with_deletion_vectors(log: PartitionLog, since_version: int | None) -> bool:
    """Did any commit since the last purge leave deletion vectors behind?"""
    for row in log.history_rows(64):
        if since_version is not None and row["version"] <= since_version:
            break
        operation = row["operation"] or ""
        if operation.startswith("REORG") or operation == "OPTIMIZE":
            return False
        metrics = row["operationMetrics"] or {}
        for name in ("numDeletionVectorsAdded", "numTargetDeletionVectorsAdded", "numDeletionVectorsUpdated",
                     "numTargetDeletionVectorsUpdated"):
            if int(metrics.get(name, 0) or 0) > 0:
                return True
    return False


def oldest_readable_version(log: PartitionLog, window_ms: int, now_wall_ms: int) -> int | None:
    """The oldest version committed inside the window (Delta's commit times are wall-clock)."""
    from pyspark.sql import functions as F

    rows = (
        log.delta_table().history()
        .where(F.unix_millis("timestamp") >= now_wall_ms - window_ms)
        .agg(F.min("version").alias("v"))
        .collect()
    )
    return rows[0]["v"] if rows else None


def vacuum(log: PartitionLog, requested_ms: int | None = None, unsafe: bool = False) -> VacuumResult:
    """Sync the window, purge deletion vectors, and vacuum files outside the window."""
    import time

    window = check_window(log.spec.config.time_travel_retention_ms, requested_ms, unsafe)
    changed = tuple(sorted(log.sync_properties()))
    snap = log.snapshot()
    metadata = to_metadata(snap.state, "vacuum")
    purged = False
    with commit_metadata(log.spark, metadata):
        if _files_with_deletion_vectors(log, None):
            log.spark.sql(f"REORG TABLE delta.`{log.path}` APPLY (PURGE)").collect()
            purged = True
        if window == 0 and window != log.spec.config.time_travel_retention_ms:
            with session_confs(log.spark, {RETENTION_CHECK_CONF: "false"}):
                log.spark.sql(f"VACUUM delta.`{log.path}` RETAIN 0 HOURS").collect()
        else:
            log.delta_table().vacuum()
    after_rows = log.history_rows(2)
    deleted = 0
    for row in after_rows:
        if row["operation"] == "VACUUM END":
            deleted = int((row["operationMetrics"] or {}).get("numDeletedFiles", 0) or 0)
            break
    version_after = after_rows[0]["version"]
    oldest = oldest_readable_version(log, window, int(time.time() * 1000))
    return VacuumResult(log.partition, window, changed, purged, snap.version, version_after, deleted, oldest)
