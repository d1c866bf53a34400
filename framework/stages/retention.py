"""Retention: time, size and consumed retention (KIP-68), and deleteRecords (KIP-107).

All of them only ever remove a prefix of the log and move the log start forward, in one
DELETE commit that also carries the new log start. Each rule yields a boundary B (the
offset of the first record it keeps, or the log end offset); rules apply in the
contract's order, each to what the previous one left; a rule with no record below its
boundary changes nothing.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace

from framework.cleaner import rules as cleaner
from framework.cleaner import spark_sql
from framework.cleaner.rules import RetentionRules
from framework.errors import OffsetOutOfRangeError, PolicyViolationError
from framework.log import deletion_vectors, file_stats, version_checksum
from framework.log.file_stats import FileStats
from framework.log.log_state import NO_RECORD_YET, CleanSection, LogState
from framework.log.partition_log import MAINTENANCE_APP_ID, PartitionLog, Snapshot
from framework.log.small_partitions import small_partition_settings
from framework.log.version_checksum import PlainFiles
from framework.stages import file_rewrite, retention_counts, retention_rewrite, retention_size


def _first_offsets(records, keep: str, start: int) -> tuple[int | None, int | None]:
    """One aggregate pass over ``records``: the first offset of a record at or after
    ``start`` that ``keep`` (SQL) keeps, and the first offset at or after ``start``. (SQL
    text, not Column trees, here and below: one call into the JVM each.)"""
    row = records.selectExpr(f"min(CASE WHEN `offset` >= {int(start)} AND ({keep}) THEN `offset` END) AS kept",
                             f"min(CASE WHEN `offset` >= {int(start)} THEN `offset` END) AS first").collect()[0]
    return row["kept"], row["first"]


def _kept(offsets, timestamps_ms, keep_since_ms: int, keep_from_offset: int | None):
    """``cleaner.retention_keeps`` over numpy arrays of records' offsets and milliseconds
    (``tests/test_retention.py`` pins the two together)."""
    kept = cleaner.kept_by_time(timestamps_ms, keep_since_ms)  # the rule's comparison, elementwise
    return kept if keep_from_offset is None else kept | (offsets >= keep_from_offset)


def _first_offsets_locally(files: PlainFiles, start: int, keep_since_ms: int,
                           keep_from_offset: int | None) -> tuple[int | None, int | None] | None:
    """:func:`_first_offsets` of local ``files``, their offsets and milliseconds read by Arrow
    in the driver (no Spark job: one a partition was 24 % of the cleaner threads' time in a
    checked first maintain of 100 compact,delete partitions, stop 102); None where a file is
    not local or not a partition table's."""
    rows = retention_counts.local_rows(files)
    if rows is None:
        return None
    offsets, stamps = (rows[column].to_numpy() for column in ("offset", "timestamp"))
    after = offsets >= start
    kept = offsets[after & _kept(offsets, stamps, keep_since_ms, keep_from_offset)]
    return (int(kept.min()) if len(kept) else None), (int(offsets[after].min()) if after.any() else None)


def _boundary(records, keep: str, start: int, end: int, log_end_offset: int) -> tuple[int, bool]:
    """Where a rule cuts: the first offset of a record at or after ``start`` it keeps
    (``keep``, SQL), bounded by ``end`` (the log end offset when it keeps none), and whether
    any record lies in [start, that boundary): a rule with no record below its boundary
    changes nothing. One aggregate pass."""
    kept, first = _first_offsets(records, keep, start)
    boundary = min(end, log_end_offset if kept is None else kept)
    return boundary, first is not None and first < boundary


def _listed_with_stats(log: PartitionLog, snap: Snapshot) -> tuple[PlainFiles | None, list[FileStats] | None]:
    """The version's files (``version_checksum.plain_files``, with their deletion vectors)
    and each one's statistics, or (None, None) when there is no such list (no checksum). A
    plan asks at most once (``plan``'s ``listing``), for whichever rules read files, and its
    cut reuses it. A file whose vector hides rows has statistics that only bound its records
    (not ``tight``): a rule reads it where it needs a record's value."""
    listed = version_checksum.plain_files(log.path, snap.version, deletion_vectors=True)
    return (None, None) if listed is None else (listed, [file_stats.of(add) for add in listed.adds])


def _bounded(stats: FileStats) -> bool:
    """Whether ``stats`` bound a file's offsets and timestamps (as values of its records, or,
    where a deletion vector hides rows, only as bounds of the records it still shows)."""
    return None not in (stats.min_offset, stats.max_offset, stats.min_timestamp_ms, stats.max_timestamp_ms)


def _shows_records(add: dict, stats: FileStats) -> bool | None:
    """Whether a file holds a record its deletion vector does not hide; None where the
    statistics do not count its rows."""
    shown = file_stats.shown_records(add, stats)
    return None if shown is None else shown > 0


def _first_kept(log: PartitionLog, snap: Snapshot, start: int, end: int, records, listing, keep_since_ms: int,
                keep_from_offset: int | None = None) -> tuple[int, bool]:
    """Time or consumed retention's :func:`_boundary` (``cleaner.retention_keeps``), reading
    only the files that may hold it. The rule only grows with the offset and the timestamp,
    so a file's bounds decide most files unread, even where a deletion vector hides rows and
    the bounds only bound the records left (not ``tight``):

    * a file the rule keeps whole (by its lowest offset and oldest timestamp) gives its
      lowest offset unread when the bounds are exact; with bounds that only bound, its
      lowest record lies at or above that offset, so it is read only when that offset lies
      below every kept record found elsewhere (the lowest such file, in an idle partition
      whose files all carry vectors);
    * a file the rule keeps none of is skipped; where its bounds only bound, the rows its
      vector does not hide say whether it holds a record below the boundary, and it is read
      only when it lies across the boundary;
    * the rest are read: a file with both kept and unkept records below the lowest kept
      offset found unread, any file that also holds offsets below ``start``, and any
      without bounds.

    One pass over ``records()`` when there is no file list (``listing()``,
    :func:`_listed_with_stats`)."""
    log_end_offset = snap.state.log_end_offset
    keep = spark_sql.retention_keeps_sql(keep_since_ms, keep_from_offset)
    listed, stats = listing()
    if listed is None:
        return _boundary(records(), keep, start, end, log_end_offset)

    def keeps(offset, timestamp_ms):
        return cleaner.retention_keeps(offset, timestamp_ms, keep_since_ms, keep_from_offset)

    # (a bound that only bounds still rules a file out: its records lie inside it)
    files = [(path, add, s) for path, add, s in zip(listed.paths, listed.adds, stats)
             if s.max_offset is None or s.max_offset >= start]
    above = [(path, add, s) for path, add, s in files if _bounded(s) and s.min_offset >= start]
    kept_whole = [(path, add, s) for path, add, s in above if keeps(s.min_offset, s.min_timestamp_ms)]
    kept_none = [(path, add, s) for path, add, s in above if not keeps(s.max_offset, s.max_timestamp_ms)]
    decided = {path for path, _, _ in (*kept_whole, *kept_none)}
    first_kept = min((s.min_offset for _, _, s in kept_whole if s.tight), default=log_end_offset)
    # kept whole, with bounds that only bound: the lowest first, then whatever lies below what it gave
    loose = sorted(((path, add, s) for path, add, s in kept_whole
                    if not s.tight and _shows_records(add, s) is not False), key=lambda f: f[2].min_offset)
    mixed = [(path, add, s) for path, add, s in files if path not in decided]
    found: list[int] = []  # the first offset at or after the start of each read

    def read(chosen) -> None:
        nonlocal first_kept
        if not chosen:
            return
        done = _first_offsets_locally(listed.only(chosen), start, keep_since_ms, keep_from_offset)
        kept, first = done or _first_offsets(version_checksum.frame_of(log.spark, listed.only(chosen)), keep, start)
        first_kept = first_kept if kept is None else min(first_kept, kept)
        found.extend(o for o in (first,) if o is not None)

    read([(path, add) for path, add, s in [*mixed, *loose[:1]] if s.min_offset is None or s.min_offset < first_kept])
    read([(path, add) for path, add, s in loose[1:] if s.min_offset < first_kept])
    boundary = min(end, first_kept)
    # whether a record lies in [start, boundary): a file's lowest offset is a record's where
    # its bounds are exact; a file of none kept whose vector leaves rows shows a record
    # inside its bounds, and is read for it only across the boundary or uncounted
    unsure = [(path, add, s) for path, add, s in kept_none if not s.tight and s.min_offset < boundary
              and _shows_records(add, s) is not False]
    below = (any(s.min_offset < boundary for _, _, s in above if s.tight) or any(o < boundary for o in found)
             or any(s.max_offset < boundary and _shows_records(add, s) for _, add, s in unsure))
    if not below:  # only what the read finds can show one now
        read([(path, add) for path, add, _ in unsure])
        below = any(o < boundary for o in found)
    return boundary, below


@dataclass(frozen=True)
class RetentionPlan:
    partition: int
    snapshot: Snapshot
    rules: RetentionRules
    now_ms: int
    #: per rule that moved the boundary: "time" | "size" | "consumed" -> its boundary
    boundaries: dict
    new_log_start: int
    #: the version's files and statistics, listed at most once (:func:`_listed_with_stats`);
    #: the cut reuses what the plan listed
    listing: object = field(default=None, compare=False, repr=False)

    @property
    def due(self) -> bool:
        return self.new_log_start > self.snapshot.state.log_start_offset


def plan(log: PartitionLog, now_ms: int, committed: dict[str, int] | None,
         snapshot: Snapshot | None = None, cap: int | None = None) -> RetentionPlan:
    """Where retention would cut at ``now_ms``; writes nothing.

    ``committed``: the listed groups' committed offsets for this partition, or None when
    they could not be read. ``cap`` bounds the boundary (after a segment roll). Time and
    consumed retention read no record when the state's oldest-timestamp bound shows every
    record young enough to keep (consumed retention none either when no group has committed
    past the start), and otherwise only the files their boundary may fall in (:func:`_first_kept`);
    size retention none when the log's size is known from the commit metadata
    (``Snapshot.size_from_metadata``) and fits, and over its limit only the oldest files,
    those that hold what it cuts (``retention_size.boundary_from_oldest``).
    """
    snap = snapshot or log.snapshot()
    state = snap.state
    config = log.spec.config
    rules = cleaner.retention_rules(config, now_ms, committed)
    end = state.log_end_offset if cap is None else min(cap, state.log_end_offset)
    # the records as a DataFrame only when a rule reads them: building it resolves the
    # Delta table, 40 to 110 ms, most of an idle partition's plan
    records = functools.cache(lambda: log.read_snapshot(snap).select("offset", "timestamp", "_size"))
    listing = functools.cache(lambda: _listed_with_stats(log, snap))  # likewise, read and parsed once
    start = state.log_start_offset
    boundaries: dict[str, int] = {}
    if not config.delete:
        return RetentionPlan(log.partition, snap, rules, now_ms, boundaries, start, listing)

    if rules.keep_since_ms is not None and not cleaner.all_kept_by_time(state.min_timestamp_ms, rules.keep_since_ms):
        boundary, moved = _first_kept(log, snap, start, end, records, listing, rules.keep_since_ms)
        if moved:
            start = boundaries["time"] = boundary

    if rules.max_bytes is not None:
        found = retention_size.boundary_from_oldest(log, snap, start, end, listing, rules.max_bytes)
        if found is None and retention_size.bytes_from(snap, records, start) > rules.max_bytes:
            found = retention_size.boundary(records().where(f"`offset` >= {int(start)}"), rules.max_bytes, end,
                                   state.log_end_offset)
        boundary, moved = found or (start, False)
        if moved:
            start = boundaries["size"] = boundary

    # every record at or after the smallest committed offset is kept: none below ``start``
    # (the first record from there is kept), or every record young enough: nothing to read
    if (rules.smallest_committed_offset is not None and rules.smallest_committed_offset > start
            and not cleaner.all_kept_by_time(state.min_timestamp_ms, rules.consumed_keep_since_ms)):
        boundary, moved = _first_kept(log, snap, start, end, records, listing, rules.consumed_keep_since_ms,
                                      rules.smallest_committed_offset)
        if moved:
            start = boundaries["consumed"] = boundary
    return RetentionPlan(log.partition, snap, rules, now_ms, boundaries, start, listing)


@dataclass(frozen=True)
class RetentionResult:
    plan: RetentionPlan | None
    operation: str
    version_before: int
    version_after: int | None
    state_before: LogState
    state_after: LogState
    removed_records: int = 0
    removed_bytes: int = 0

    @property
    def committed(self) -> bool:
        return self.version_after is not None


def _cut(log: PartitionLog, snap: Snapshot, new_start: int, operation: str, run_id: str,
         move_start_without_records: bool = False, listing=None) -> tuple[int | None, LogState, int, int]:
    """Remove every record below ``new_start`` and move the log start there, in one commit.
    ``listing``: a plan's (:class:`RetentionPlan`), so the cut does not list the files again."""
    state = snap.state
    checkpoint = max(state.checkpoint, state.log_start_offset)
    listing = listing or functools.cache(lambda: _listed_with_stats(log, snap))
    row = retention_counts.cut_counts(log, snap, new_start, checkpoint, listing)
    if row["n"] == 0 and not move_start_without_records:
        return None, state, 0, 0
    new_checkpoint = max(checkpoint, new_start)
    if new_start >= checkpoint:
        clean = CleanSection(epoch=state.clean.epoch + 1)
    else:
        horizon = retention_counts.kept_clean_horizon(log, snap, new_start, checkpoint, listing)
        clean = CleanSection(
            epoch=state.clean.epoch + 1,
            records=state.clean.records - row["clean_n"],
            bytes=state.clean.bytes - row["clean_b"],
            tombstones=state.clean.tombstones - row["clean_t"],
            min_delete_horizon_ms=horizon,
        )
    oldest_kept = NO_RECORD_YET if row["oldest_kept"] is None else row["oldest_kept"]
    after = replace(state, log_start_offset=new_start, checkpoint=new_checkpoint, clean=clean,
                    min_timestamp_ms=oldest_kept)
    extra = dict(run_id=run_id, removed=row["n"], new_log_start=new_start,
                 kept={"start": new_start, "end": state.log_end_offset, "records": row["kept_n"],
                       "bytes": row["kept_b"]})
    if row["n"]:
        def delete():
            log.delta_table().delete(retention_rewrite.predicate(new_start))

        action = delete
        listed = listing()[0]
        if file_rewrite.available(log.spark, log.path, snap.version, listed):
            def action():
                return retention_rewrite.cut(log, new_start, MAINTENANCE_APP_ID, after.clean.epoch, row["n"], delete)
        elif listed is not None and deletion_vectors.turned_on(listed.configuration):
            def action():
                return retention_rewrite.vector_cut(log, listed, snap.version, new_start, MAINTENANCE_APP_ID,
                                                    after.clean.epoch, delete)
        version = log.commit_maintenance(after, operation, action, snap.version, **extra)
    else:
        version = log.commit_maintenance(after, operation, None, snap.version, **extra)
    return version, after, row["n"], row["b"]


def execute(log: PartitionLog, retention: RetentionPlan, run_id: str = "") -> RetentionResult:
    """Apply a retention plan: one DELETE commit, or nothing when nothing is below the boundary."""
    snap = retention.snapshot
    if not retention.due:
        return RetentionResult(retention, "retain", snap.version, None, snap.state, snap.state)
    version, after, removed, removed_bytes = _cut(log, snap, retention.new_log_start, "retain", run_id,
                                                  listing=retention.listing)
    return RetentionResult(retention, "retain", snap.version, version, snap.state, after, removed, removed_bytes)


def check_delete_records_allowed(spec) -> None:
    """Kafka refuses deleteRecords on a compact-only topic (POLICY_VIOLATION); so do we."""
    if not spec.config.delete:
        raise PolicyViolationError(
            f"{spec.source}: delete-records: topic {spec.topic} has cleanup.policy=compact; "
            "Kafka refuses deleteRecords on a compact-only topic (POLICY_VIOLATION)"
        )


def delete_records(log: PartitionLog, before_offset: int, run_id: str = "", snapshot: Snapshot | None = None) -> RetentionResult:
    """Kafka's deleteRecords (KIP-107): move the log start to ``before_offset``."""
    check_delete_records_allowed(log.spec)
    snap = snapshot or log.snapshot()
    state = snap.state
    if before_offset < 0 or before_offset > state.log_end_offset:
        raise OffsetOutOfRangeError(
            f"--before-offset: {before_offset} is outside {log.name}'s log "
            f"[{state.log_start_offset}, {state.log_end_offset}] (OFFSET_OUT_OF_RANGE)"
        )
    if before_offset <= state.log_start_offset:
        return RetentionResult(None, "delete_records", snap.version, None, state, state)
    with small_partition_settings(log.spark, state.offset_span):
        version, after, removed, removed_bytes = _cut(log, snap, before_offset, "delete_records", run_id,
                                                      move_start_without_records=True)
    return RetentionResult(None, "delete_records", snap.version, version, state, after, removed, removed_bytes)
