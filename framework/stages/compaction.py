"""Key compaction as one atomic commit per partition.

``plan`` measures a partition at one pinned table version (from its commit metadata when
that settles it) and asks :mod:`framework.cleaner.rules` whether a run is due. ``execute``
builds, from that same version, what the run does to each record it changes and commits
it with the new checkpoint: the touched files rewritten (:mod:`framework.stages.compaction_rewrite`),
or on a table with deletion vectors their deleted rows marked
(:mod:`framework.stages.compaction_vectors`), else Delta's MERGE.

A run pays for its dirty section, as Kafka's cleaner does: the winner search covers the
dirty section, the clean records of the keys it touches and the clean tombstones, each
read from the files whose offset statistics may hold it (:func:`compaction_actions`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from framework import faults
from framework.cleaner import rules as cleaner
from framework.cleaner import spark_sql
from framework.cleaner.rules import CompactionDecision, PartitionMeasure
from framework.log import version_checksum
from framework.log.log_state import AppendedRecords, CleanSection, LogState
from framework.log.partition_log import MAINTENANCE_APP_ID, PartitionLog, Snapshot
from framework.log.small_partitions import is_small
from framework.spec import TopicConfig
from framework.stages import local_measure

if TYPE_CHECKING:  # (compaction_batch imports this module)
    from framework.stages.compaction_batch import DecidedActions

DELETE = "delete"
STAMP = "stamp"
KEEP = "keep"
#: the records a run changes (SQL over its actions' ``_action``)
CHANGED = f"_action IN ('{DELETE}', '{STAMP}')"


def first_uncleanable_offset(records, config: TopicConfig, now_ms: int, log_end_offset: int,
                             max_timestamp_ms: int | None = None) -> int:
    """U: the smallest offset whose timestamp is newer than ``now - min.compaction.lag.ms``.

    When the newest timestamp ever appended (``max_timestamp_ms``, from the commit
    metadata) is not newer, no record is, and U is the log end offset without a scan.
    """
    after = cleaner.uncleanable_after_ms(now_ms, config)
    if cleaner.none_newer_than(max_timestamp_ms, after):
        return log_end_offset
    young = records if cleaner.all_newer_than(after) else records.where(spark_sql.newer_than_sql(after))
    row = young.selectExpr("min(`offset`) AS u").collect()[0]
    return log_end_offset if row["u"] is None else min(row["u"], log_end_offset)


def measure(log: PartitionLog, snapshot: Snapshot, now_ms: int, spark_scan: bool = True) -> PartitionMeasure | None:
    """Read what the due rule needs: U, the dirty section's and the head's sizes.

    The clean section's summary comes from the commit metadata. When the metadata also
    rules out a record too young to compact (U is the log end) and its append commits
    describe every record past the checkpoint (``Snapshot.past_checkpoint``), the whole
    measure is metadata: no Spark job. Otherwise the version is scanned: a small local one
    by Arrow (:mod:`framework.stages.local_measure`), else by Spark (None without ``spark_scan``).
    """
    state = snapshot.state
    config = log.spec.config
    checkpoint = max(state.checkpoint, state.log_start_offset)
    if measured_from_metadata(config, snapshot, now_ms):
        return _measure_from_appends(state, checkpoint, snapshot.past_checkpoint)
    scanned = local_measure.scanned(log, snapshot.version, checkpoint, cleaner.uncleanable_after_ms(now_ms, config),
                                    state.log_end_offset, state.max_timestamp_ms)
    if scanned is None and not spark_scan:
        return None
    u, row = scanned or _scanned(log, snapshot, now_ms, checkpoint)
    clean = state.clean
    return PartitionMeasure(
        log_start_offset=state.log_start_offset, log_end_offset=state.log_end_offset, checkpoint=checkpoint,
        first_uncleanable_offset=u, clean_records=clean.records, clean_bytes=clean.bytes,
        dirty_records=row["dirty_records"], dirty_bytes=row["dirty_bytes"] or 0,
        oldest_dirty_timestamp_ms=row["oldest_dirty"], head_records=row["head_records"],
        head_bytes=row["head_bytes"] or 0, clean_tombstones=clean.tombstones,
        min_delete_horizon_ms=clean.min_delete_horizon_ms,
    )


def _scanned(log: PartitionLog, snapshot: Snapshot, now_ms: int, checkpoint: int) -> tuple[int, dict]:
    """U and the dirty section's and head's sizes by one Spark query (Delta skips the files below C)."""
    records, state = log.read_snapshot(snapshot), snapshot.state
    u = first_uncleanable_offset(records, log.spec.config, now_ms, state.log_end_offset, state.max_timestamp_ms)
    in_dirty = f"`offset` >= {int(checkpoint)} AND `offset` < {int(u)}"
    in_head = f"`offset` >= {int(max(checkpoint, u))}"
    row = records.where(f"`offset` >= {int(checkpoint)}").selectExpr(
        f"count(CASE WHEN {in_dirty} THEN 1 END) AS dirty_records",
        f"sum(CASE WHEN {in_dirty} THEN _size END) AS dirty_bytes",
        f"min(CASE WHEN {in_dirty} THEN unix_millis(`timestamp`) END) AS oldest_dirty",
        f"count(CASE WHEN {in_head} THEN 1 END) AS head_records",
        f"sum(CASE WHEN {in_head} THEN _size END) AS head_bytes",
    ).collect()[0]
    return u, row.asDict()


def measured_from_metadata(config: TopicConfig, snapshot: Snapshot, now_ms: int) -> bool:
    """Whether :func:`measure` needs no scan: the append commits describe every record past
    the checkpoint, and none of them is too young to compact."""
    return snapshot.past_checkpoint is not None and cleaner.none_newer_than(
        snapshot.state.max_timestamp_ms, cleaner.uncleanable_after_ms(now_ms, config))


def _measure_from_appends(state: LogState, checkpoint: int, dirty: AppendedRecords) -> PartitionMeasure:
    """The measure of a log with no head (U is its end) whose records past the checkpoint
    are ``dirty``: what its append commits describe, or none at all."""
    clean = state.clean
    return PartitionMeasure(
        log_start_offset=state.log_start_offset, log_end_offset=state.log_end_offset, checkpoint=checkpoint,
        first_uncleanable_offset=state.log_end_offset, clean_records=clean.records, clean_bytes=clean.bytes,
        dirty_records=dirty.records, dirty_bytes=dirty.bytes, oldest_dirty_timestamp_ms=dirty.min_timestamp_ms,
        head_records=0, head_bytes=0, clean_tombstones=clean.tombstones,
        min_delete_horizon_ms=clean.min_delete_horizon_ms,
    )


@dataclass(frozen=True)
class CompactionPlan:
    partition: int
    snapshot: Snapshot
    measure: PartitionMeasure
    decision: CompactionDecision
    now_ms: int


def settled_measure(state: LogState) -> PartitionMeasure | None:
    """The measure of a log with nothing at or past its checkpoint, from its commit metadata
    alone (no scan), or None when the log has records there.

    Such a log has no dirty section and no head, and every offset below its end is already
    clean, so U is not looked for: it is reported as the log end offset.
    """
    checkpoint = max(state.checkpoint, state.log_start_offset)
    if checkpoint < state.log_end_offset:
        return None
    return _measure_from_appends(state, checkpoint, AppendedRecords())


def plan(log: PartitionLog, now_ms: int, force: bool = False, snapshot: Snapshot | None = None,
         scan: bool = True) -> CompactionPlan | None:
    """Measure ``log`` and decide whether compaction is due; writes nothing.

    A settled log (nothing at or past the checkpoint) that is not due costs no Spark job:
    an idle partition's plan is its commit metadata. A run that is due (forced, or a
    tombstone's horizon passed) measures the table, so its U is exact. Without ``scan``, a
    plan that neither the commit metadata nor Arrow (``local_measure``) settles is None.
    """
    snap = snapshot or log.snapshot()
    settled = settled_measure(snap.state)
    if settled is not None:
        decision = cleaner.decide_compaction(log.spec.config, settled, now_ms, force)
        if not decision.due:
            return CompactionPlan(log.partition, snap, settled, decision, now_ms)
    measured = measure(log, snap, now_ms, spark_scan=scan)
    if measured is None:
        return None
    decision = cleaner.decide_compaction(log.spec.config, measured, now_ms, force)
    return CompactionPlan(log.partition, snap, measured, decision, now_ms)


def compaction_actions(records, config: TopicConfig, cleanable_end: int | str, now_ms: int, checkpoint: int | str = 0,
                       log_start_offset: int | str = 0, carried: tuple[str, ...] = (), clean_records=None,
                       one_task: bool = False, by: tuple[str, ...] = ()):
    """What a run does to each affected record below ``cleanable_end`` (U).

    Kafka's cleaner builds its offset map from the dirty section alone; so does this. The
    clean section below the checkpoint C holds one record per key, and every tombstone in
    it carries a delete horizon (the first pass stamps it). So the only records below U a
    run can change are: the dirty section [C, U); the clean records whose key appears in
    it (they may lose); and the clean tombstones (their horizon may have passed). The
    frame holds just those, and of the clean section only the key, offset and the columns
    the rank needs are read (a clean record is a tombstone exactly when it has a horizon,
    so its value is never read). A window over the key then picks each key's winner
    (KIP-280's rank) and every record in the frame gets its fate.

    ``clean_records``, when given, is where the clean section is read from (a read of the
    files that may hold it), ``records`` then only where the dirty section is. ``one_task``
    (a small partition): one task, so the run's totals are one stage (36 against 52 ms).
    ``by`` decides many partitions in one frame (:mod:`framework.stages.compaction_batch`):
    its columns tell them apart, and each bound may then name the column of ``records``
    that holds each row's own.

    Columns: offset, _size, _action, _reason, _horizon, and ``records``' own ``carried``
    columns, as they are (the compaction carries each record's file). ``_action`` is
    "delete" (a superseded record, a keyless one, a tombstone past its horizon), "stamp"
    (a winning tombstone kept for the first time gets ``now + delete.retention.ms``) or
    "keep" (a tombstone keeping the horizon it has, listed so the run can count what is left).
    Records a run leaves alone are not listed.
    """
    rank_columns = ["`timestamp`"] if config.compaction_strategy == "timestamp" else []
    if config.compaction_strategy == "header":
        rank_columns = [f"{spark_sql.last_header_sql(config.compaction_strategy_header)} AS _hv"]
    common = ["`offset`", "key", "_delete_horizon", "_size", *(f"`{c}`" for c in (*by, *carried)), *rank_columns]
    known = all(isinstance(bound, int) for bound in (cleanable_end, checkpoint, log_start_offset))
    end, start = _bound_sql(cleanable_end), _bound_sql(log_start_offset)
    clean_end = str(min(checkpoint, cleanable_end)) if known else f"least({_bound_sql(checkpoint)}, {end})"

    dirty = records.where(f"`offset` >= {clean_end} AND `offset` < {end}")
    dirty = dirty.selectExpr(*common, "value IS NULL AS _tomb")
    if known and int(clean_end) <= log_start_offset:
        # No record lies below the log start, so there is no clean section to look up (a
        # first run, or one after retention cut past the checkpoint): a join and a shuffle fewer.
        below = dirty
    else:
        no_clean = "" if known else f" AND {clean_end} > {start}"  # (each row's own, as above)
        clean = (records if clean_records is None else clean_records).where(f"`offset` < {clean_end}{no_clean}")
        clean = clean.selectExpr(*common, "_delete_horizon IS NOT NULL AS _tomb")
        if not known or int(clean_end) < cleanable_end:
            dirty_keys = dirty.where("key IS NOT NULL").select(*by, "key").distinct().selectExpr("*", "true AS _dirty")
            clean = (clean.join(dirty_keys, [*by, "key"], "left").where("_dirty OR _delete_horizon IS NOT NULL")
                     .drop("_dirty"))
        else:
            clean = clean.where("_delete_horizon IS NOT NULL")
        below = dirty.unionByName(clean)
    if one_task:  # one task holds the frame, so the window over the key needs no shuffle
        below = below.coalesce(1)
    # SQL text, not Column trees: one call into the JVM each, where a tree is a call per node
    # (and a finalizer's call per node again), for every partition of every run
    over = ", ".join([*(f"`{c}`" for c in by), "key"])
    below = below.selectExpr("*", f"(max({_rank_sql(config)}) OVER (PARTITION BY {over})).`offset` AS _best")
    has_horizon = "_delete_horizon IS NOT NULL"
    keyless, loses = "key IS NULL", "`offset` != _best"
    expired = f"(_tomb AND {has_horizon} AND _delete_horizon <= timestamp_millis({int(now_ms)}))"
    first_kept = "(_tomb AND _delete_horizon IS NULL)"
    action = (f"CASE WHEN {keyless} OR {loses} OR {expired} THEN '{DELETE}' WHEN {first_kept} THEN '{STAMP}' "
              f"WHEN {has_horizon} THEN '{KEEP}' END")
    reason = (f"CASE WHEN {keyless} THEN 'keyless' WHEN {loses} THEN 'superseded' WHEN {expired} THEN "
              f"'tombstone_expired' WHEN {first_kept} THEN 'tombstone_kept' WHEN {has_horizon} THEN "
              "'tombstone_waiting' END")
    horizon = (f"CASE WHEN {first_kept} THEN timestamp_millis({int(cleaner.delete_horizon_ms(now_ms, config))}) "
               "ELSE _delete_horizon END")
    decided = below.selectExpr("`offset`", "_size", *(f"`{c}`" for c in (*by, *carried)), f"{action} AS _action",
                               f"{reason} AS _reason", f"{horizon} AS _horizon")
    return decided.where("_action IS NOT NULL")


def _bound_sql(bound: int | str) -> str:
    """An offset bound as SQL: a number, or the column that holds each row's own."""
    return str(int(bound)) if isinstance(bound, int) else f"`{bound}`"


def _rank_sql(config: TopicConfig) -> str:
    """The winner rank over the compaction frame's columns (``_hv`` is the raw header)."""
    return spark_sql.winner_rank_sql(config, header_value="_hv")


@dataclass(frozen=True)
class CompactionResult:
    """What one compaction run did to one partition."""

    plan: CompactionPlan
    cleaned_up_to: int
    version_before: int
    version_after: int | None
    state_after: LogState
    removed_records: int = 0
    removed_bytes: int = 0
    superseded: int = 0
    keyless: int = 0
    expired_tombstones: int = 0
    stamped_tombstones: int = 0

    @property
    def committed(self) -> bool:
        return self.version_after is not None


#: What a run's actions add up to (one row; a batch's, one per partition).
TOTALS = (
    f"count(CASE WHEN _action = '{DELETE}' THEN 1 END) AS removed",
    f"sum(CASE WHEN _action = '{DELETE}' THEN _size END) AS removed_bytes",
    "count(CASE WHEN _reason = 'superseded' THEN 1 END) AS superseded",
    "count(CASE WHEN _reason = 'keyless' THEN 1 END) AS keyless",
    "count(CASE WHEN _reason = 'tombstone_expired' THEN 1 END) AS expired",
    f"count(CASE WHEN _action = '{STAMP}' THEN 1 END) AS stamped",
    f"count(CASE WHEN _action IN ('{STAMP}', '{KEEP}') THEN 1 END) AS tombstones",  # left with a horizon
    f"min(CASE WHEN _action IN ('{STAMP}', '{KEEP}') THEN unix_millis(_horizon) END) AS min_horizon",
    f"collect_set(CASE WHEN {CHANGED} THEN _file END) AS touched_files",
)


def execute(log: PartitionLog, compaction: CompactionPlan, cleanable_end: int | None = None,
            run_id: str = "", decided: DecidedActions | None = None) -> CompactionResult:
    """Carry out a due compaction as one atomic commit (or none, when nothing changes).

    ``cleanable_end`` caps U (after a roll, a retry never cleans the new active segment).
    Raises a retryable Delta conflict when another writer won; the caller re-plans.
    ``decided``: this plan's actions and totals, decided with other partitions' (uncapped).
    """
    snap = compaction.snapshot
    state = snap.state
    measured = compaction.measure
    end = measured.first_uncleanable_offset if cleanable_end is None else min(cleanable_end, measured.first_uncleanable_offset)
    checkpoint = measured.checkpoint
    new_checkpoint = max(checkpoint, end)
    read = _offsets_reader(log, snap.version)
    if decided is not None and (decided.plan is not compaction or cleanable_end is not None):
        raise ValueError("decided actions are those of this plan, uncapped")
    own = decided is None  # decided here
    held = None  # Spark's actions decided here: held for the commit, let go after it
    if own:  # by Arrow from a local version's files, else by Spark (imported here: both import this module)
        from framework.stages import arrow_actions
        from framework.stages.compaction_batch import DecidedActions

        decided = arrow_actions.decide(log, compaction, end)
        if decided is None:
            held = version_actions(log, snap, end, compaction.now_ms, checkpoint, measured.log_start_offset,
                                   carried=("_file",), read=read).persist()
            decided = DecidedActions(compaction, lambda: held, None)
    actions = decided.actions
    try:
        totals = decided.totals or actions().selectExpr(*TOTALS).collect()[0].asDict()
        tombstones, min_horizon = totals["tombstones"], totals["min_horizon"]
        if end < checkpoint:
            # The clock went back: tombstones in [U, C) stay clean and keep their horizons.
            more, earliest = _horizons_between(read(end, checkpoint), end, checkpoint)
            tombstones += more
            min_horizon = earliest if min_horizon is None else min(x for x in (min_horizon, earliest) if x is not None)
        dirty_records = measured.dirty_records if end >= checkpoint else 0
        dirty_bytes = measured.dirty_bytes if end >= checkpoint else 0
        if checkpoint <= end < measured.first_uncleanable_offset:
            dirty_records, dirty_bytes = log.size(snap.version, checkpoint, end)
        clean = CleanSection(
            epoch=state.clean.epoch + 1,
            records=measured.clean_records + dirty_records - totals["removed"],
            bytes=measured.clean_bytes + dirty_bytes - (totals["removed_bytes"] or 0),
            tombstones=tombstones,
            min_delete_horizon_ms=min_horizon,
        )
        after = replace(state, checkpoint=new_checkpoint, clean=clean)
        changes = totals["removed"] + totals["stamped"]
        if changes == 0 and new_checkpoint == state.checkpoint:
            return CompactionResult(compaction, end, snap.version, None, state)
        extra = dict(run_id=run_id, cleaned_up_to=end, removed=totals["removed"], stamped=totals["stamped"])
        action = None
        if changes:
            # imported here, not at the top: compaction_rewrite imports this module's names
            from framework.stages import compaction_rewrite

            def source():
                return faults.inside("compact.during_commit", actions().where(CHANGED))

            merge = compaction_rewrite.merge(log, source, end, stamps=totals["stamped"] > 0)
            # Arrow's changes mark the rewrite unless a test waits inside Spark's evaluation
            marked = None if faults.hooked("compact.during_commit") else decided.changes
            if compaction_rewrite.available(log.spark, log.path, snap.version, changes):
                def action():
                    return compaction_rewrite.rewrite(
                        log, source, MAINTENANCE_APP_ID, after.clean.epoch, totals["removed"], totals["stamped"], merge,
                        planned_files=frozenset(totals["touched_files"]), staged=decided and decided.staged,
                        changes=marked)
            elif marked is not None:  # deletion vectors, or what only Delta's MERGE writes
                from framework.stages import compaction_vectors

                def action():
                    version = compaction_vectors.commit_locally(
                        log.spark, log.path, MAINTENANCE_APP_ID, after.clean.epoch, snap.version, marked)
                    return merge() if version == compaction_vectors.NOT_LOCAL else version
            else:
                action = merge
        version = log.commit_maintenance(after, "compact", action, snap.version, **extra)
        return CompactionResult(
            compaction, end, snap.version, version, after,
            removed_records=totals["removed"], removed_bytes=totals["removed_bytes"] or 0,
            superseded=totals["superseded"], keyless=totals["keyless"],
            expired_tombstones=totals["expired"], stamped_tombstones=totals["stamped"],
        )
    finally:
        if held is not None:
            held.unpersist()
        elif not own and decided.staged is not None:
            decided.staged.discard()  # the staged files no commit took (once taken, nothing)


def version_actions(log: PartitionLog, snapshot: Snapshot, cleanable_end: int, now_ms: int, checkpoint: int,
                    log_start_offset: int, carried: tuple[str, ...] = (), read=None):
    """:func:`compaction_actions` over ``version``, the dirty and the clean section each read
    from the files that may hold it (``read``, else :func:`_offsets_reader`'s): what a run
    does, and what ``plan`` says it would do."""
    read = read or _offsets_reader(log, snapshot.version)
    clean_end = min(checkpoint, cleanable_end)
    below = read(None, clean_end) if clean_end > log_start_offset else None  # else no clean section
    return compaction_actions(read(clean_end, cleanable_end), log.spec.config, cleanable_end, now_ms, checkpoint,
                              log_start_offset, carried=carried, clean_records=below,
                              one_task=is_small(snapshot.state.offset_span))


def _offsets_reader(log: PartitionLog, version: int):
    """:func:`version_checksum.offsets_reader` of ``version``, records with their file (:func:`_with_file`)."""
    read = version_checksum.offsets_reader(log.spark, log.path, version, lambda: log.read(version))
    return lambda start, end: _with_file(*read(start, end))


def _through_delta(log: PartitionLog, version: int):
    """:func:`_offsets_reader` through Delta's time travel (the benchmark's before)."""
    whole = _with_file(log.read(version), scanned=True)
    return lambda start, end: whole


def _with_file(records, scanned: bool):
    """``records`` with each record's file name (``_file``), so that the run's totals also name
    the files it touches. A read of no listed file is no file scan (``scanned`` false): Spark
    cannot resolve ``_metadata`` there (PySpark would log an ERROR); it has no record (null)."""
    return records.selectExpr("*", "_metadata.file_name AS _file" if scanned else "CAST(NULL AS STRING) AS _file")


def _horizons_between(records, start: int, end: int) -> tuple[int, int | None]:
    waiting = f"`offset` >= {int(start)} AND `offset` < {int(end)} AND _delete_horizon IS NOT NULL"
    row = records.where(waiting).selectExpr("count(*) AS n", "min(unix_millis(_delete_horizon)) AS m").collect()[0]
    return row["n"], row["m"]
