"""Time travel and vacuum: removed records leave the disk, but never too early.

Every table version committed within ``time.travel.retention.ms`` stays readable. Since
Delta 4.1, VACUUM takes its window from ``delta.deletedFileRetentionDuration`` (a
``RETAIN n HOURS`` other than 0 is ignored), so the window is set through the table
properties, from the spec, before every vacuum. With deletion vectors, a DELETE or MERGE
only marks rows deleted; ``REORG TABLE ... APPLY (PURGE)`` rewrites those files without
the rows (once the marks are half a window old), and the VACUUM that runs once the window
has passed removes the old files. So a key deleted by a tombstone is gone from every file
of the table within 1.5 time-travel windows. On a local table the purge and the VACUUM are
made by topiclake itself, by Delta's rules and with Delta's commits
(``framework.stages.purge``, ``framework.log.own_vacuum``); a shorter window is always Delta's.
"""

from __future__ import annotations

from dataclasses import dataclass

from framework import faults
from framework.cleaner.rules import purge_due, vacuum_due
from framework.errors import ArgumentError
from framework.log import key_index, own_vacuum
from framework.log.abandoned_temporaries import delete_abandoned
from framework.log.commit_log import HISTORY_PAGE, Commit, first_version_since, read_commits
from framework.log.delta_commits import commit_metadata, session_confs
from framework.log.log_state import to_metadata
from framework.log.partition_log import PartitionLog
from framework.log.warehouse import delta_table_sql
from framework.stages.purge import purged_locally

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
    vacuumed_because: str | None = None
    #: commits' temporary files that killed writers left in ``_delta_log`` (abandoned_temporaries)
    temporary_files_deleted: int = 0
    #: key indexes of data files gone (``key_index.sweep``)
    key_indexes_deleted: int = 0


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


def _commit_summaries(log: PartitionLog, limit: int | None) -> list[Commit]:
    return read_commits(log.spark, log.path, limit)


def oldest_readable_version(log: PartitionLog, window_ms: int, now_wall_ms: int) -> int | None:
    """The oldest version committed inside the window (Delta's commit times are wall-clock),
    found without reading every commit (``commit_log.first_version_since``)."""
    return first_version_since(log.spark, log.path, now_wall_ms - window_ms)


def vacuum(log: PartitionLog, requested_ms: int | None = None, unsafe: bool = False,
           wall_now_ms: int | None = None) -> VacuumResult:
    """Sync the window, purge deletion vectors, and vacuum files outside the window.

    Each of the two runs only when it can change something (see purge_due, vacuum_due);
    an explicit short window always vacuums.
    """
    import time

    window = check_window(log.spec.config.time_travel_retention_ms, requested_ms, unsafe)
    wall_now = wall_now_ms if wall_now_ms is not None else int(time.time() * 1000)
    commits = _commit_summaries(log, HISTORY_PAGE)
    changed = tuple(sorted(log.sync_properties(newest_version=commits[0].version)))
    if changed:  # the properties' ALTER TABLE committed a version of its own
        commits = _commit_summaries(log, HISTORY_PAGE)
    version_before = commits[0].version
    purge = purge_due(commits, window, wall_now)
    sweep = vacuum_due(commits, window, wall_now, complete=len(commits) < HISTORY_PAGE)
    shorter = window != log.spec.config.time_travel_retention_ms
    deleted = 0
    if purge or sweep or shorter:
        snap = log.snapshot()
        with commit_metadata(log.spark, to_metadata(snap.state, "vacuum", snap.version)):
            if purge and purged_locally(log) is None:
                faults.reached("vacuum.before_purge", log=log)
                log.spark.sql(f"REORG TABLE {delta_table_sql(log.path)} APPLY (PURGE)").collect()
                faults.reached("vacuum.after_purge", log=log)
            if shorter or sweep or purge_leaves_old_files(window):
                faults.reached("vacuum.before_sweep", log=log)
                if shorter:
                    with session_confs(log.spark, {RETENTION_CHECK_CONF: "false"}):
                        log.spark.sql(f"VACUUM {delta_table_sql(log.path)} RETAIN 0 HOURS").collect()
                elif own_vacuum.vacuumed(log.path, log.spark) is None:
                    log.spark.sql(f"VACUUM {delta_table_sql(log.path)}").collect()
                faults.reached("vacuum.after_sweep", log=log)
        for summary in _commit_summaries(log, 3):
            if summary.operation == "VACUUM END":
                deleted = int(summary.metrics.get("numDeletedFiles", 0) or 0)
                break
    version_after = _commit_summaries(log, 1)[0].version
    oldest = oldest_readable_version(log, window, wall_now)
    return VacuumResult(log.partition, window, changed, purge, version_before, version_after, deleted, oldest,
                        sweep, delete_abandoned(log.path, wall_now, log.spark),
                        key_index.sweep(log.path, wall_now, version_after))


def purge_leaves_old_files(window_ms: int) -> bool:
    """With no window, the files a purge just replaced can go at once."""
    return window_ms == 0
