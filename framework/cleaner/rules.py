"""The log cleaner's decisions, in pure Python: what is due, what the cleanable range is,
who wins, where retention cuts.

No Spark here. ``compaction.py`` and ``retention.py`` measure a partition, hand the
measurements to these functions, and carry the decision out. Each rule is CONTRACT
section 4 almost word for word, so each can be read, and tested, on its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Sequence

from framework.spec import TopicConfig

#: Triggers, in the order the history names the one that caused a run.
DIRTY_RATIO = "dirty_ratio"
MAX_LAG = "max_lag"
TOMBSTONE_HORIZON = "tombstone_horizon"
FORCED = "forced"
TRIGGERS = (DIRTY_RATIO, MAX_LAG, TOMBSTONE_HORIZON, FORCED)

LONG_MIN = -(2**63)
LONG_MAX = 2**63 - 1


# --------------------------------------------------------------------- ranges
def uncleanable_after_ms(now_ms: int, config: TopicConfig) -> int:
    """Records with a timestamp above this are too young to compact (KIP-58)."""
    return now_ms - config.min_compaction_lag_ms


def newer_than(timestamp_ms: int, threshold_ms: int) -> bool:
    """A record is newer than a threshold: U's too-young records, time retention's kept ones.
    ``spark_sql.newer_than_sql`` is this rule in Spark (a parity test pins the two)."""
    return timestamp_ms > threshold_ms


def all_newer_than(threshold_ms: int) -> bool:
    """Every record is newer than a threshold below 0, whatever its timestamp, one left
    null included (U is then the lowest offset, read without comparing timestamps)."""
    return threshold_ms < 0


def none_newer_than(max_timestamp_ms: int | None, threshold_ms: int) -> bool:
    """No record can be newer than the threshold: the newest timestamp ever appended (an
    upper bound of every record's, None when unknown) is not. Then U is the log end offset
    without reading a record."""
    return max_timestamp_ms is not None and not newer_than(max_timestamp_ms, threshold_ms)


def kept_by_time(timestamp_ms: int, keep_since_ms: int) -> bool:
    """Time retention keeps a record whose timestamp is at or after ``keep_since_ms``: newer
    than the millisecond before it (the one place the "at or after" becomes "newer than")."""
    return newer_than(timestamp_ms, keep_since_ms - 1)


def all_kept_by_time(min_timestamp_ms: int | None, keep_since_ms: int) -> bool:
    """Time retention keeps every record: the oldest-timestamp bound (a lower bound of every
    record's, None when unknown) is kept. Then retention keeps the whole log by time without
    reading a record."""
    return min_timestamp_ms is not None and kept_by_time(min_timestamp_ms, keep_since_ms)


def max_lag_deadline_ms(now_ms: int, config: TopicConfig) -> int:
    """A dirty record older than this must be compacted now (KIP-354)."""
    return now_ms - config.max_compaction_lag_ms


def dirty_ratio(clean_bytes: int, dirty_bytes: int) -> float:
    """Dirty bytes over all cleanable bytes; 0.0 for an empty log, as Kafka computes it."""
    total = clean_bytes + dirty_bytes
    return dirty_bytes / total if total > 0 else 0.0


def max_compaction_delay_ms(now_ms: int, oldest_dirty_ms: int | None, config: TopicConfig) -> int:
    """KIP-354's metric: how far past max.compaction.lag.ms the oldest dirty record is."""
    if oldest_dirty_ms is None:
        return 0
    return max(0, now_ms - oldest_dirty_ms - config.max_compaction_lag_ms)


def delete_horizon_ms(now_ms: int, config: TopicConfig) -> int:
    """The delete horizon a run gives a winning tombstone it keeps for the first time
    (KIP-534): ``now + delete.retention.ms``; a run at or after it removes the tombstone."""
    return now_ms + config.delete_retention_ms


# ------------------------------------------------------------------ the plan
@dataclass(frozen=True)
class PartitionMeasure:
    """What planning measured of a partition at one table version."""

    log_start_offset: int
    log_end_offset: int
    checkpoint: int
    first_uncleanable_offset: int
    clean_records: int
    clean_bytes: int
    dirty_records: int
    dirty_bytes: int
    oldest_dirty_timestamp_ms: int | None
    head_records: int
    head_bytes: int
    #: tombstones below the checkpoint that carry a delete horizon, and the earliest one
    clean_tombstones: int
    min_delete_horizon_ms: int | None

    @property
    def records(self) -> int:
        return self.clean_records + self.dirty_records + self.head_records

    @property
    def bytes(self) -> int:
        return self.clean_bytes + self.dirty_bytes + self.head_bytes


@dataclass(frozen=True)
class CompactionDecision:
    """Whether a compaction run is due, and why; the numbers behind it."""

    due: bool
    reasons: tuple[str, ...]
    checkpoint: int
    first_uncleanable_offset: int
    dirty_ratio: float
    oldest_dirty_age_ms: int | None
    max_compaction_delay_ms: int
    skipped_because: str | None = None

    @property
    def trigger(self) -> str | None:
        """The reason that caused the run: the first that holds, in :data:`TRIGGERS` order."""
        return self.reasons[0] if self.reasons else None

    @property
    def max_lag_caused(self) -> bool:
        """KIP-354's question: did max lag make this run happen (the ratio alone would not)?"""
        return MAX_LAG in self.reasons and DIRTY_RATIO not in self.reasons

    @property
    def new_checkpoint(self) -> int:
        """C becomes U; it never moves back (a clock set back, a longer min lag)."""
        return max(self.checkpoint, self.first_uncleanable_offset)


def decide_compaction(config: TopicConfig, measure: PartitionMeasure, now_ms: int, force: bool = False) -> CompactionDecision:
    """CONTRACT section 4's due rule for one partition."""
    ratio = dirty_ratio(measure.clean_bytes, measure.dirty_bytes)
    oldest = measure.oldest_dirty_timestamp_ms
    age = None if oldest is None else now_ms - oldest
    delay = max_compaction_delay_ms(now_ms, oldest, config)
    common = dict(
        checkpoint=measure.checkpoint,
        first_uncleanable_offset=measure.first_uncleanable_offset,
        dirty_ratio=ratio,
        oldest_dirty_age_ms=age,
        max_compaction_delay_ms=delay,
    )
    if not config.compact:
        return CompactionDecision(due=False, reasons=(), skipped_because="cleanup.policy has no compact", **common)
    dirty = measure.dirty_records > 0
    reasons = []
    if dirty and ratio > config.min_cleanable_dirty_ratio:
        reasons.append(DIRTY_RATIO)
    if dirty and oldest is not None and oldest < max_lag_deadline_ms(now_ms, config):
        reasons.append(MAX_LAG)
    if measure.min_delete_horizon_ms is not None and measure.min_delete_horizon_ms <= now_ms:
        reasons.append(TOMBSTONE_HORIZON)
    if force:
        reasons.append(FORCED)
    return CompactionDecision(due=bool(reasons), reasons=tuple(reasons), **common)


# -------------------------------------------------------------- who wins
_DECIMAL = re.compile(rb"-?[0-9]+")


def header_version(value: bytes | None) -> int | None:
    """KIP-280's header value as a signed 64-bit integer, or None when it does not parse.

    Decimal text (an optional minus sign and digits) first; else exactly 8 bytes as a
    big-endian two's-complement integer; anything else, or a number outside 64 bits,
    counts as missing.
    """
    if value is None:
        return None
    if _DECIMAL.fullmatch(value):
        number = int(value)
        return number if LONG_MIN <= number <= LONG_MAX else None
    if len(value) == 8:
        return int.from_bytes(value, "big", signed=True)
    return None


def last_header(headers: Iterable[tuple[str, bytes | None]], name: str) -> bytes | None:
    """The value of the last header called ``name`` (Kafka's ``Headers.lastHeader``)."""
    found = None
    for key, value in headers:
        if key == name:
            found = value
    return found


def winner_rank(strategy: str, offset: int, timestamp_ms: int, version: int | None) -> tuple:
    """A sort key: the record with the largest rank is its key's winner (KIP-280)."""
    if strategy == "offset":
        return (offset,)
    if strategy == "timestamp":
        return (timestamp_ms, offset)
    if strategy == "header":
        return (version is not None, version if version is not None else 0, offset)
    raise ValueError(f"unknown compaction.strategy {strategy!r}")


# --------------------------------------------------------------- retention
@dataclass(frozen=True)
class RetentionRules:
    """Which retention rules apply at ``now``, as thresholds the Spark side filters by."""

    #: records with a timestamp at or after this are young enough to keep (None: no time limit)
    keep_since_ms: int | None
    #: the partition may keep at most this many bytes (None: no size limit)
    max_bytes: int | None
    #: consumed retention: keep records at or after the smallest committed offset, or
    #: with a timestamp at or after this (None: consumed retention is off for this run)
    consumed_keep_since_ms: int | None
    smallest_committed_offset: int | None
    consumed_blocked_by: str | None = None


def retention_rules(config: TopicConfig, now_ms: int, committed: dict[str, int] | None) -> RetentionRules:
    """Thresholds for time, size and consumed (KIP-68) retention.

    ``committed`` maps group to committed offset for this partition, or None when the
    commits could not be read: any failure, or a listed group without a commit, means
    no consumed retention (KIP-68's -1).
    """
    keep_since = None if config.retention_ms == -1 else now_ms - config.retention_ms
    max_bytes = None if config.retention_bytes == -1 else config.retention_bytes
    consumed_since = None
    smallest = None
    blocked = None
    if config.consumed_retention_ms >= 0:
        groups = config.consumed_retention_groups
        if not groups:
            blocked = "consumed.retention.groups is empty"
        elif committed is None:
            blocked = "the committed offsets could not be read"
        else:
            missing = [g for g in groups if g not in committed]
            if missing:
                blocked = f"group {missing[0]} has not committed an offset"
            else:
                smallest = min(committed[g] for g in groups)
                consumed_since = now_ms - config.consumed_retention_ms
    return RetentionRules(keep_since, max_bytes, consumed_since, smallest, blocked)


def retention_keeps(offset: int, timestamp_ms: int, keep_since_ms: int, keep_from_offset: int | None = None) -> bool:
    """Whether time or consumed retention keeps a record: one with a timestamp at or after
    ``keep_since_ms`` and, for consumed retention (KIP-68), every one at or after
    ``keep_from_offset`` (the smallest committed offset). The rule only grows with the
    offset and the timestamp, so a file whose lowest offset and oldest timestamp it keeps is
    kept whole, and a file whose highest and newest it does not keep holds no kept record.
    ``spark_sql.retention_keeps_sql`` is this rule in Spark (a parity test pins the two)."""
    return (keep_from_offset is not None and offset >= keep_from_offset) or kept_by_time(timestamp_ms, keep_since_ms)


def size_boundary(sizes: Sequence[tuple[int, int]], max_bytes: int, log_end_offset: int) -> int:
    """Where size retention cuts, given (offset, size) in offset order: remove the oldest
    records while the partition holds more than ``max_bytes``. (Reference version; the
    Spark side computes the same with a running sum.)"""
    total = sum(size for _, size in sizes)
    for offset, size in sizes:
        if total <= max_bytes:
            return offset
        total -= size
    return log_end_offset


# ------------------------------------------------------------------ vacuum
# Over a table's commits as ``framework.log.commit_log.Commit`` gives them (version,
# timestamp_ms, operation, metrics), in any order; for the partition tables and
# topiclake's own tables alike.

#: Operations that never remove a file: appends, table creation, property changes, vacuum itself.
KEEPS_FILES = ("WRITE", "STREAMING UPDATE", "CREATE TABLE", "CREATE OR REPLACE TABLE", "SET TBLPROPERTIES",
               "VACUUM START", "VACUUM END", "CHANGE COLUMN", "ADD COLUMNS")
DV_METRICS = ("numDeletionVectorsAdded", "numTargetDeletionVectorsAdded", "numDeletionVectorsUpdated",
              "numTargetDeletionVectorsUpdated")


def removes_files(commit) -> bool:
    """Whether a commit removed files (which a VACUUM may delete once they leave the window)."""
    if commit.operation == "WRITE":
        return (commit.metrics or {}).get("numRemovedFiles", "0") not in ("0", None)
    return commit.operation not in KEEPS_FILES


def purge_due(commits: Sequence, window_ms: int, wall_now_ms: int) -> bool:
    """Is a deletion vector left since the last purge (REORG) half a window old?

    A purge rewrites every file that carries one, which after a compaction of random keys
    is nearly the whole table; doing it at every run would make each run cost a rewrite.
    Waiting half the time-travel window bounds that to two rewrites per window, and a
    deleted value still leaves the disk within 1.5 windows of its deletion (the purge,
    then the vacuum one window later). An OPTIMIZE (bin-packing) is no purge: it rewrites
    only the small files it packs, and a deletion vector on any other file stays.
    """
    due_before = wall_now_ms - window_ms // 2
    for commit in sorted(commits, key=lambda c: c.version, reverse=True):
        if commit.operation.startswith("REORG"):
            return False
        if commit.timestamp_ms <= due_before and any(
                int((commit.metrics or {}).get(name, 0) or 0) > 0 for name in DV_METRICS):
            return True
    return False


def vacuum_due(commits: Sequence, window_ms: int, wall_now_ms: int, complete: bool) -> str | None:
    """Why a VACUUM now could delete something, or None when it could not.

    A file removed at time r becomes deletable at r + window; the last VACUUM, at T,
    deleted everything removed before T - window. So a vacuum is useful when some commit
    removed files in (T - window, now - window], or, to sweep files no commit tracks
    (a crashed write), when the last vacuum (or the table's creation) is a window old.
    ``complete`` says whether ``commits`` reach back to the table's creation.
    """
    deletable_before = wall_now_ms - window_ms
    ordered = sorted(commits, key=lambda c: c.version, reverse=True)
    last_vacuum = next((c for c in ordered if c.operation == "VACUUM END"), None)
    if last_vacuum is None and not complete:
        return "no vacuum in the recent history"
    since = last_vacuum.timestamp_ms - window_ms if last_vacuum else None
    oldest = last_vacuum if last_vacuum else ordered[-1]
    if oldest.timestamp_ms <= deletable_before:
        return "the last sweep is older than the time-travel window"
    for commit in ordered:
        if since is not None and commit.timestamp_ms <= since:
            break
        if removes_files(commit) and commit.timestamp_ms <= deletable_before:
            return f"version {commit.version} ({commit.operation}) removed files now outside the window"
    return None
