"""What ``topiclake validate`` compares in a partition (a ``ValidateCheck``): the version the
last maintenance run left, or the one asked for, and the current one (or the one asked for),
with their states; and whether Delta still reads the older one by time travel.

Delta answers that by reading it (a version that left the time-travel window is refused,
and validate then judges the current version's invariants alone, with a note). A small
local partition's version that Delta certainly reads is told here without Spark
(:func:`travels_here`), so that its validation, counted by Arrow, starts no JVM; so is a
local version Delta certainly refuses (:func:`refused_here`), with Delta's words.
"""

from __future__ import annotations

from framework.checks.readability import readable_here
from framework.errors import ArgumentError, TimeTravelError
from framework.log import version_checksum
from framework.log.partition_log import HISTORY_PAGES, PartitionLog
from framework.stages.stage_check import ValidateCheck, version_readable_later, version_refused_now

__all__ = ["planned", "refused_here", "travels_here"]


def planned(log: PartitionLog, now_ms: int, from_version: int | None, to_version: int | None,
            last_run_version: int | None) -> ValidateCheck:
    """The versions ``validate`` compares, and their states; a version number outside the
    table, or a ``--from-version`` Delta no longer reads, is refused (``ArgumentError``,
    ``TimeTravelError``)."""
    recent = log.commits(HISTORY_PAGES[0])
    latest = recent[0].version
    to = latest if to_version is None else to_version
    if not 0 <= to <= latest:
        raise ArgumentError(f"--to-version: {to} is not a version of {log.name} (0..{latest})")
    notes: list[str] = []
    if from_version is None:
        start = 0 if last_run_version is None or last_run_version > to else last_run_version
    else:
        start = from_version
        if not 0 <= start <= to:
            raise ArgumentError(f"--from-version: {start} must be between 0 and the version checked ({to})")
    try:
        if not travels_here(log, start, latest):
            _delta_reads(log, start, latest)
    except TimeTravelError as error:
        if from_version is not None:
            raise
        # The last run's version left the time-travel window: only the invariants remain.
        notes.append(f"note: compared with nothing: {error}")
        start = to
    if not travels_here(log, to, latest):
        _delta_reads(log, to, latest)
    states = log.states_at([start, to], first_page=recent)
    return ValidateCheck(log=log, now_ms=now_ms, version_before=start, version_after=to,
                         state_before=states[start], state_after=states[to],
                         appends_only=from_version is None, notes=tuple(notes))


def travels_here(log: PartitionLog, version: int, latest: int, wall_now_ms: int | None = None) -> bool:
    """Whether Delta's time travel to ``version`` reads it, told without Spark. The latest
    version always reads (Delta never refuses it; a problem in its files is the check's to
    find). An older one of a small local partition reads when it reads here in full
    (``readability.readable_here``: its log, files and vectors) and Delta would not refuse
    it within the next hour (``stage_check.version_readable_later``, by the latest version's window,
    as Delta judges it). False when anything is not known here."""
    if version == latest:
        return True
    if not readable_here(log, [version]):
        return False
    newest = version_checksum.plain_files(log.path, latest, deletion_vectors=True)
    return newest is not None and version_readable_later(log.path, version, newest.configuration, wall_now_ms)


#: Delta's words when it refuses time travel past the window
#: (``DeltaErrors.timeTravelBeyondDeletedFileRetentionDurationException``: whole hours).
REFUSAL = ("[DELTA_UNSUPPORTED_TIME_TRAVEL_BEYOND_DELETED_FILE_RETENTION_DURATION] Cannot time travel beyond "
           "delta.deletedFileRetentionDuration ({hours} HOURS) set on the table.")


def _delta_reads(log: PartitionLog, version: int, latest: int) -> None:
    """Raise Delta's ``TimeTravelError`` when it refuses ``version``: told here when that is
    certain (:func:`refused_here`), else asked of Delta by reading it."""
    refusal = refused_here(log, version, latest)
    if refusal is not None:
        raise TimeTravelError(f"{log.name}: cannot read that version: {refusal}")
    log.read(version)


def refused_here(log: PartitionLog, version: int, latest: int, wall_now_ms: int | None = None) -> str | None:
    """Delta's refusal of time travel to ``version``, in its words, when certain without a
    session (``stage_check.version_refused_now``: an older version's commit, by its own time, older
    than the latest version's window; a refusal now stands later); else None, and Delta is
    asked. Only where no session runs and its launch settings name no Delta setting: a
    started session, or one whose settings may turn Delta's refusal off
    (``spark.databricks.delta.*`` in ``spark-defaults.conf``, PySpark's submit arguments or
    spark-submit's), answers for itself."""
    from framework.deferred_session import not_started
    from framework.log.warehouse import deleted_file_window_of
    from framework.session import may_launch_with

    if version == latest or not not_started(log.spark) or may_launch_with("spark.databricks.delta"):
        return None
    configuration = version_checksum.configuration(log.path, latest)
    if configuration is None or not version_refused_now(log.path, version, configuration, wall_now_ms):
        return None
    return REFUSAL.format(hours=deleted_file_window_of(configuration) // 3_600_000)
