"""Many small partitions' compactions decided, and their rewrites written, together.

A small partition's compaction is a few Spark queries over a few hundred records, so
what it costs is Spark planning them: its actions (:func:`compaction.compaction_actions`)
and their totals were a query, a cache and a job a partition, and in a new process each
partition's plan compiles Spark's planner further. The rule is the same for every
partition of a topic; only the bounds it judges by differ (U, the checkpoint, the log
start). So a batch reads every member's version in one scan (the files its checksum
lists, each row told apart by ``_member``: its place in the batch, with its own bounds
joined in as columns), decides every record's fate in one frame, held in Spark's cache,
and counts every member's totals in one query (two Spark jobs: the dirty keys' broadcast,
then the totals), and writes every member's rewrite in one more
(:mod:`framework.stages.staged_rewrite`). Each partition then commits its own share as
before (:func:`compaction.execute` with ``decided``): its touched files replaced by the
files written for it, through Delta's transaction API, one commit a partition.

A batch is planned when the run starts, from each partition's commit metadata alone
(:func:`compaction.plan` without a scan), and decided when its first member's turn
comes; a member whose turn finds another plan (a retry after a conflict) decides alone,
and so does every member when the batch fails (one member's broken table must fail only
its own partition). Its cache is let go once its last member is done.
"""

from __future__ import annotations

import functools
import json
import os
import threading
from dataclasses import dataclass, field
from typing import Callable, Sequence

from framework.deferred_session import jvm_running
from framework.local_rows import local_frame
from framework.log import version_checksum
from framework.log.delta_transactions import jvm_of
from framework.log.partition_log import PartitionLog
from framework.log.small_partitions import SMALL_PARTITION_RECORDS, is_small, small_partition_settings
from framework.spec import TopicConfig
from framework.stages import compaction, staged_rewrite
from framework.stages.compaction import CompactionPlan
from framework.stages.file_rewrite import Staged

__all__ = ["MIN_BATCH", "MEMBER", "CompactionBatches", "DecidedActions"]

#: The fewest due small partitions of a topic worth a batch.
MIN_BATCH = 3
#: The column that tells a batch's members apart: each one's place in the batch.
MEMBER = "_member"
#: Each member's bounds, as columns of its rows.
_BOUNDS = ("_u", "_c", "_ls")


@dataclass(frozen=True)
class DecidedActions:
    """A plan's actions decided before ``compaction.execute`` commits them (in a batch, or by
    Arrow: ``arrow_actions.decide``): :func:`compaction.compaction_actions` of its version
    with each record's ``_file`` (a callable giving the DataFrame, which Arrow's decision
    makes only when Spark needs it), their :data:`compaction.TOTALS` (None: ``execute``
    counts them), its rewrite written already, when the batch could write it
    (``staged_rewrite``), and, when Arrow decided, the records it deletes or stamps as the
    rewrite marks them (``arrow_actions.changes``: no Spark job between the two)."""

    plan: CompactionPlan
    actions: Callable[[], object]
    totals: dict | None
    staged: Staged | None = None
    changes: object | None = None


@dataclass
class _Batch:
    """Due small partitions of one topic and schema, decided together."""

    config: TopicConfig
    internal_root: str  # the warehouse's own folder (a staged rewrite's)
    paths: list[str]
    plans: list[CompactionPlan]
    files: list[version_checksum.PlainFiles]
    schema_json: str
    left: set[int] = field(default_factory=set)  # the members whose partitions are not done
    decided: list[DecidedActions | None] | None = None
    frame: object = None


class CompactionBatches:
    """The run's plans (from commit metadata, as the run starts) and its batches.

    ``plan(log)`` is a partition's plan for its first attempt, or None (plan it then:
    a scan was needed); ``decided(log, plan)`` that plan's actions when a batch holds it;
    ``done(log)`` once the partition's stages are over; ``close()`` at the end of the run."""

    def __init__(self, spark, logs: Sequence[PartitionLog], now_ms: int, force: bool):
        self.spark = spark
        self._lock = threading.Lock()
        self._plans: dict[tuple[str, int], CompactionPlan] = {}
        self._member_of: dict[tuple[str, int], tuple[_Batch, int]] = {}
        groups: dict[tuple[str, str], list] = {}
        for log in logs:
            if not log.spec.config.compact:
                continue
            try:
                planned = compaction.plan(log, now_ms, force, scan=False)
                files = None if planned is None else _batchable(log, planned)
            except Exception:  # noqa: BLE001 - a broken table fails at its own turn, reported there
                continue
            if planned is None:
                continue
            self._plans[_key(log)] = planned
            if files is not None:
                groups.setdefault((log.spec.topic, files.schema_json), []).append((log, planned, files))
        for (topic, schema_json), members in groups.items():
            for chunk in _chunks(members):
                if len(chunk) < MIN_BATCH:
                    continue
                first = chunk[0][0]
                batch = _Batch(first.spec.config, first.warehouse.internal_root, [log.path for log, _, _ in chunk],
                               [p for _, p, _ in chunk], [f for _, _, f in chunk], schema_json, set(range(len(chunk))))
                for place, planned in enumerate(batch.plans):
                    self._member_of[(topic, planned.partition)] = (batch, place)

    def plan(self, log: PartitionLog) -> CompactionPlan | None:
        return self._plans.pop(_key(log), None)

    def decided(self, log: PartitionLog, planned: CompactionPlan) -> DecidedActions | None:
        found = self._member_of.get(_key(log))
        if found is None or found[0].plans[found[1]] is not planned:
            return None
        batch, place = found
        with self._lock:
            if batch.decided is None:
                try:
                    self._decide(batch)
                except Exception:  # noqa: BLE001 - one member's table broken: each decides alone, so only its own fails
                    if batch.frame is not None:
                        batch.frame.unpersist()
                    batch.frame, batch.decided = None, [None] * len(batch.plans)
        return batch.decided[place]

    def done(self, log: PartitionLog) -> None:
        """The partition's stages are over: its staged files, unless its commit took them, go."""
        found = self._member_of.pop(_key(log), None)
        if found is None:
            return
        batch, place = found
        with self._lock:
            _discard(batch, place)
            batch.left.discard(place)
            if not batch.left and batch.frame is not None:
                batch.frame.unpersist()
                batch.frame = None

    def close(self) -> None:
        """The run is over (or stopped): every batch's cache and untaken staged files go."""
        for batch, place in list(self._member_of.values()):
            _discard(batch, place)
            if batch.frame is not None:
                batch.frame.unpersist()
                batch.frame = None
        self._member_of.clear()

    def _decide(self, batch: _Batch) -> None:
        """Every member's actions in one frame, cached, and their totals in one query."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import StructType

        # which member each file's rows belong to, with its bounds; by file name, which
        # Delta makes unique (a UUID in each data file's name)
        placed = [(os.path.basename(path), place, *_bounds(planned))
                  for place, (planned, files) in enumerate(zip(batch.plans, batch.files)) for path in files.paths]
        members = local_frame(self.spark, placed, f"_file STRING, {MEMBER} INT, "
                                                  + ", ".join(f"{c} BIGINT" for c in _BOUNDS))
        schema = StructType.fromJson(json.loads(batch.schema_json))
        paths = [path for files in batch.files for path in files.paths]
        span = sum(planned.snapshot.state.offset_span for planned in batch.plans)
        with small_partition_settings(self.spark, span):
            records = (self.spark.read.schema(schema).parquet(*paths).selectExpr("*", "_metadata.file_name AS _file")
                       .join(F.broadcast(members), "_file"))
            frame = compaction.compaction_actions(
                records, batch.config, "_u", batch.plans[0].now_ms, "_c", "_ls", carried=("_file",),
                one_task=True, by=(MEMBER,)).persist()
            batch.frame = frame
            rows = {row[MEMBER]: {name: row[name] for name in row.__fields__ if name != MEMBER} for row in
                    frame.groupBy(MEMBER).agg(*(F.expr(total) for total in compaction.TOTALS)).collect()}
            nothing = {name: 0 for name in ("removed", "superseded", "keyless", "expired", "stamped", "tombstones")}
            nothing.update(removed_bytes=None, min_horizon=None, touched_files=[])
            totals = [rows.get(place, nothing) for place in range(len(batch.plans))]
            staged = self._staged(batch, totals)
        batch.decided = [DecidedActions(planned, functools.partial(frame.where, f"{MEMBER} = {place}"),
                                        totals[place], staged[place] if staged else None)
                         for place, planned in enumerate(batch.plans)]

    def _staged(self, batch: _Batch, totals: list[dict]) -> list:
        """Every member's rewrite written in one Spark job (``staged_rewrite``), for the members
        whose commit is a rewrite; empty when the batch cannot stage, or staging failed (each
        member then writes its own)."""
        from framework.stages import compaction_rewrite

        members = []
        for path, planned, files, counted in zip(batch.paths, batch.plans, batch.files, totals):
            changes = counted["removed"] + counted["stamped"]
            rewrites = changes and compaction_rewrite.available(self.spark, path, planned.snapshot.version, changes)
            members.append((path, files, frozenset(counted["touched_files"]) if rewrites else frozenset()))
        try:
            return staged_rewrite.stage(self.spark, batch.internal_root, members,
                                        batch.frame.where(compaction.CHANGED))
        except Exception:  # noqa: BLE001 - one member's table broken: each writes its own
            return []


def _discard(batch: _Batch, place: int) -> None:
    decided = batch.decided[place] if batch.decided else None
    if decided is not None and decided.staged is not None:
        decided.staged.discard()  # (nothing, once a commit took them)


def _key(log: PartitionLog) -> tuple[str, int]:
    return log.spec.topic, log.partition


def _bounds(planned: CompactionPlan) -> tuple[int, int, int]:
    """U, the checkpoint and the log start a member's actions are decided by (as
    :func:`compaction.execute` gives them, uncapped)."""
    measured = planned.measure
    return measured.first_uncleanable_offset, measured.checkpoint, measured.log_start_offset


def _batchable(log: PartitionLog, planned: CompactionPlan) -> version_checksum.PlainFiles | None:
    """The files of a due small partition's planned version, when a batch can decide it:
    plain files its rewrite can commit, and U not below the checkpoint (a clock gone back
    decides alone)."""
    measured = planned.measure
    if not planned.decision.due or not is_small(planned.snapshot.state.offset_span):
        return None
    if measured.first_uncleanable_offset < measured.checkpoint:
        return None
    files = version_checksum.plain_files(log.path, planned.snapshot.version)
    # without a JVM running, none is started for this: each partition decides by Arrow and
    # commits alone (file_rewrite.commit_locally)
    if (not jvm_running(log.spark) or jvm_of(log.spark) is None or not version_checksum.rewritable(files)
            or not files.paths):
        return None
    return files


def _chunks(members: list) -> list[list]:
    """``members`` in batches of fewer than :data:`SMALL_PARTITION_RECORDS` records together
    (each batch's queries then run with the small partitions' settings)."""
    chunks: list[list] = [[]]
    records = 0
    for member in members:
        span = member[1].snapshot.state.offset_span
        if chunks[-1] and records + span >= SMALL_PARTITION_RECORDS:
            chunks.append([])
            records = 0
        chunks[-1].append(member)
        records += span
    return chunks
