"""Runs killed before they recorded their history (CONTRACT section 8: the history says
honestly when a run did not finish).

A maintenance commit newer than anything the history records, made by a run that records
history, was left by a run killed before it wrote its rows. The commit itself is whole
(Delta's atomicity); what was lost is only its history row.
"""

from __future__ import annotations

import time
from typing import Callable, Iterable

from framework.log.history import HistoryRow, MaintenanceHistory
from framework.log.log_state import metadata_field
from framework.log.partition_log import HISTORY_PAGES, PartitionLog

#: The commits a run records history rows for (vacuum changes no record).
INTERRUPTIBLE = ("compact", "retain", "optimize")


def interrupted_rows(history: MaintenanceHistory, logs: Iterable[PartitionLog], run_id: str, now_ms: int,
                     progress: Callable[[str], None]) -> list[HistoryRow]:
    """One ``interrupted`` row per partition and killed run, under that run's id, for the run
    ``run_id`` to write with its first history append."""
    recorded = history.recorded_versions()
    rows = []
    for log in logs:
        known = recorded.get((log.spec.topic, log.partition), -1)
        lost: dict[str, list[tuple[int, str]]] = {}
        for commit in log.commits(HISTORY_PAGES[0]):
            if commit.version <= known:
                break
            killed = metadata_field(commit.user_metadata, "run_id")
            operation = metadata_field(commit.user_metadata, "operation")
            if killed and killed != run_id and operation in INTERRUPTIBLE:
                lost.setdefault(killed, []).append((commit.version, operation))
        for killed, commits in lost.items():
            versions = sorted(v for v, _ in commits)
            said = ", ".join(f"{op} at version {v}" for v, op in sorted(commits))
            rows.append(HistoryRow(
                run_id=killed, run_started_ms=int(time.time() * 1000), now_ms=now_ms, topic=log.spec.topic,
                partition=log.partition, stage="interrupted", committed=True, version_after=versions[-1],
                validation="skipped",
                message=f"run {killed} did not finish: it committed {said} and was stopped before recording "
                        f"them (found by run {run_id}); each commit is whole, the table is consistent"))
            progress(f"      history: run {killed} did not finish on {log.name} ({said})")
    return rows
