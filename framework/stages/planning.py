"""``plan`` and ``status``: what a maintenance run would do to one partition now, and where
the partition stands, without writing anything.

The same plans the stages execute (compaction, retention, bin-packing) and the same
KIP-68 rule (``ConsumerOffsets.for_retention``), plus what each would remove, as one
result object that the command line renders as text or JSON.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from framework.log.consumer_offsets import ConsumerOffsets
from framework.log.partition_log import PartitionLog
from framework.stages import compaction, optimize, retention
from framework.stages.vacuum import oldest_readable_version

__all__ = ["PartitionPlan", "partition_status", "plan_partition"]


@dataclass(frozen=True)
class PartitionPlan:
    """The plans of each stage for one partition at one version, and what they would remove."""

    log: PartitionLog
    version: int
    compaction: compaction.CompactionPlan
    #: per reason (superseded, tombstone_expired, ...): records and bytes; only when due
    compaction_would_remove: dict[str, dict[str, int]] | None
    retention: retention.RetentionPlan | None
    retention_would_remove: dict[str, int] | None
    #: why consumed retention is off or blocked, or None
    consumed_retention_note: str | None
    packing: optimize.PackPlan
    oldest_readable_version: int | None

    def to_dict(self) -> dict[str, Any]:
        """The plan as ``plan --json`` prints it."""
        d, m = self.compaction.decision, self.compaction.measure
        config = self.log.spec.config
        entry: dict[str, Any] = {"partition": self.log.name, "exists": True, "version": self.version}
        entry["compaction"] = {
            "due": d.due, "reasons": list(d.reasons), "skipped_because": d.skipped_because,
            "checkpoint": m.checkpoint, "first_uncleanable_offset": m.first_uncleanable_offset,
            "dirty_ratio": round(d.dirty_ratio, 6), "dirty_records": m.dirty_records, "dirty_bytes": m.dirty_bytes,
            "clean_records": m.clean_records, "clean_bytes": m.clean_bytes,
            "oldest_dirty_age_ms": d.oldest_dirty_age_ms, "max_compaction_delay_ms": d.max_compaction_delay_ms,
            "min_cleanable_dirty_ratio": config.min_cleanable_dirty_ratio,
        }
        if self.compaction_would_remove is not None:
            entry["compaction"]["would_remove"] = self.compaction_would_remove
        if self.retention is not None:
            r = self.retention
            entry["retention"] = {
                "due": r.due, "log_start_offset": r.snapshot.state.log_start_offset,
                "new_log_start_offset": r.new_log_start, "boundaries": r.boundaries,
                "consumed_retention": r.rules.consumed_blocked_by or self.consumed_retention_note or (
                    "on" if r.rules.smallest_committed_offset is not None else "off")}
            if self.retention_would_remove is not None:
                entry["retention"]["would_remove"] = self.retention_would_remove
        p = self.packing
        entry["optimize"] = {
            "due": p.due, "files": p.files_before, "bytes": p.bytes_before, "segment_bytes": p.target_bytes,
            "files_after": p.files_after,
            "groups": [{"files": len(g), "bytes": sum(f.size_bytes for f in g),
                        "offsets": [min(f.min_offset for f in g), max(f.max_offset for f in g)]} for g in p.groups],
            "why": p.describe()}
        entry["time_travel"] = {"time_travel_retention_ms": config.time_travel_retention_ms,
                                "oldest_readable_version": self.oldest_readable_version}
        return entry


def plan_partition(log: PartitionLog, now_ms: int, offsets: ConsumerOffsets, force: bool = False) -> PartitionPlan:
    """Every stage's plan for ``log`` (which must exist) as of its latest version."""
    snap = log.snapshot()
    planned = compaction.plan(log, now_ms, force, snapshot=snap)
    would_compact = _compaction_would_remove(log, planned) if planned.decision.due else None
    retained, would_retain, note = None, None, None
    if log.spec.config.delete:
        committed, note = offsets.for_retention(log.spec, log.partition)
        retained = retention.plan(log, now_ms, committed, snapshot=snap)
        if retained.due:
            records, size = log.size(snap.version, end=retained.new_log_start)
            would_retain = {"records": records, "bytes": size}
    window = log.spec.config.time_travel_retention_ms
    return PartitionPlan(
        log=log, version=snap.version, compaction=planned, compaction_would_remove=would_compact,
        retention=retained, retention_would_remove=would_retain, consumed_retention_note=note,
        packing=optimize.plan(log, snap),
        oldest_readable_version=oldest_readable_version(log, window, int(time.time() * 1000)))


def _compaction_would_remove(log: PartitionLog, planned: compaction.CompactionPlan) -> dict[str, dict[str, int]]:
    from framework.stages import arrow_actions

    # decided as the run decides it: by Arrow from a local version's files (no JVM in a new
    # process), else read from the files that may hold each section, without a snapshot state
    m = planned.measure
    local = arrow_actions.decided(log, planned, m.first_uncleanable_offset)
    if local is not None:
        return arrow_actions.by_reason(local)
    from pyspark.sql import functions as F

    actions = compaction.version_actions(log, planned.snapshot, m.first_uncleanable_offset, planned.now_ms,
                                         m.checkpoint, m.log_start_offset)
    rows = actions.groupBy("_reason").agg(F.count("*").alias("n"), F.sum("_size").alias("b")).collect()
    return {r["_reason"]: {"records": r["n"], "bytes": r["b"] or 0} for r in rows}


def partition_status(log: PartitionLog, now_ms: int, last) -> dict[str, Any]:
    """Where ``log`` (which must exist) stands: offsets, size, dirtiness, files and its last
    run (``last``: its row of ``MaintenanceHistory.last_runs``, or None), as ``status --json``
    prints it."""
    planned = compaction.plan(log, now_ms)
    m, d, state = planned.measure, planned.decision, planned.snapshot.state
    packing = optimize.plan(log, planned.snapshot)
    return {
        "partition": log.name, "exists": True, "version": planned.snapshot.version,
        "log_start_offset": state.log_start_offset, "log_end_offset": state.log_end_offset,
        "checkpoint": state.checkpoint, "records": m.records, "bytes": m.bytes,
        "dirty_ratio": round(d.dirty_ratio, 6), "oldest_dirty_age_ms": d.oldest_dirty_age_ms,
        "pending_tombstones": state.clean.tombstones, "next_tombstone_horizon_ms": state.clean.min_delete_horizon_ms,
        "compaction_due": d.due, "active_segment": state.active_segment,
        "data_files": packing.files_before, "data_file_bytes": packing.bytes_before, "bin_packing_due": packing.due,
        "last_run": None if last is None else {"run_id": last["run_id"], "stage": last["stage"], "now_ms": last["now_ms"],
                                                "version_after": last["version_after"], "validation": last["validation"]},
    }
