"""A partition's offset bookkeeping, kept in the Delta commits that change it.

Kafka keeps the log start offset, the log end offset and the cleaner checkpoint in
files beside the log. Here they ride in the ``userMetadata`` of the very Delta commit
that changes the data, so a crash can never leave data and bookkeeping disagreeing:
the commit either happened, with both, or it did not.

Every topiclake commit records the state as its writer knows it after the commit.
Writers race (a producer may commit while a compaction runs), so a commit's values
are lower bounds as of the snapshot it read. The monotone fields (log start, log end,
checkpoint, active segment) are therefore folded with ``max`` over the newest
topiclake commit and every topiclake commit after the version it read; that set sees
every change. The clean section's summary is not monotone; maintenance commits
conflict with each other in Delta, so they are linearised, and each bumps ``epoch``:
the summary with the highest epoch is the current one.

``max_timestamp_ms``, the newest timestamp ever appended, is monotone too, and an upper
bound of every record's timestamp (removing records only lowers the true maximum). It
lets a run see from the metadata alone that no record is too young to compact. It is
None (unknown) in the commits of a topiclake that did not record it, and stays unknown
through any fold that meets such a commit; then the records are scanned, as before.
``min_timestamp_ms`` is its mirror, a lower bound of every record's timestamp (removing
records only raises the true minimum; a retention cut, which reads what it keeps, sets it
exactly). It lets retention see from the metadata alone that no record is old enough to cut.

This module is pure: it parses and folds; reading the Delta history is ``log.py``'s job.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from typing import Iterable, Mapping

#: The key under which topiclake's state sits in a commit's userMetadata JSON.
METADATA_KEY = "topiclake"
FORMAT_VERSION = 1
#: An empty log's newest timestamp (Kafka's RecordBatch.NO_TIMESTAMP); any value is a valid
#: bound for no records, and every append folds its own newest timestamp in.
NO_TIMESTAMP = -1
#: An empty log's oldest-timestamp bound: Spark's largest TIMESTAMP (9999-12-31), which no
#: record's timestamp exceeds; every append folds its own oldest timestamp in.
NO_RECORD_YET = 253402300799999


@dataclass(frozen=True)
class CleanSection:
    """Summary of the records below the checkpoint, as the last maintenance left it."""

    epoch: int = 0
    records: int = 0
    bytes: int = 0
    #: tombstones below the checkpoint that carry a delete horizon
    tombstones: int = 0
    min_delete_horizon_ms: int | None = None


@dataclass(frozen=True)
class LogState:
    """Where a partition's log starts, ends and has been cleaned up to."""

    log_start_offset: int = 0
    log_end_offset: int = 0
    #: the cleaner checkpoint C: every offset below it has been compacted
    checkpoint: int = 0
    #: base offset of the segment appends go to (the table's ``_segment`` partition value)
    active_segment: int = 0
    clean: CleanSection = field(default_factory=CleanSection)
    #: the newest record timestamp ever appended (ms), an upper bound of every record's;
    #: None when unknown (a table written before topiclake recorded it)
    max_timestamp_ms: int | None = None
    #: a lower bound of every record's timestamp (ms); None when unknown
    min_timestamp_ms: int | None = None

    @property
    def offset_span(self) -> int:
        """Offsets from the log start to the log end: an upper bound of the records the
        partition holds (compaction leaves gaps)."""
        return self.log_end_offset - self.log_start_offset

    def with_appended(self, count: int, max_timestamp_ms: int | None,
                      min_timestamp_ms: int | None = None) -> "LogState":
        """The state after appending ``count`` records whose newest and oldest timestamps are
        ``max_timestamp_ms`` and ``min_timestamp_ms`` (None: not known, which makes that bound
        unknown)."""
        return replace(self, log_end_offset=self.log_end_offset + count,
                       max_timestamp_ms=newest_timestamp([self.max_timestamp_ms, max_timestamp_ms]),
                       min_timestamp_ms=oldest_timestamp([self.min_timestamp_ms, min_timestamp_ms]))


def newest_timestamp(bounds: Iterable[int | None]) -> int | None:
    """The fold of upper timestamp bounds: their maximum, or None when any is unknown."""
    bounds = list(bounds)
    return None if any(b is None for b in bounds) else max(bounds)


def oldest_timestamp(bounds: Iterable[int | None]) -> int | None:
    """The fold of lower timestamp bounds: their minimum, or None when any is unknown."""
    bounds = list(bounds)
    return None if any(b is None for b in bounds) else min(bounds)


@dataclass(frozen=True)
class AppendedRecords:
    """What appends added to a log: how many records, their bytes (the contract's size) and
    the oldest timestamp among them (None when there are none, or it is not known)."""

    records: int = 0
    bytes: int = 0
    min_timestamp_ms: int | None = None


#: The operations whose commits append records, each over the offsets [base_offset, its log end offset).
APPEND_OPERATIONS = ("produce", "ingest")


def appended_between(commits: Iterable["CommitEntry"], start: int, end: int) -> AppendedRecords | None:
    """The records at offsets ``[start, end)`` as the append commits among ``commits`` describe
    them, or None when they cannot say exactly.

    Only retention and deleteRecords remove records at or past the cleaner checkpoint, and
    both cut a prefix, so from ``max(checkpoint, log start)`` to the log end a log holds
    exactly what its appends wrote there. That is known when the append commits given
    (each records its base offset, count, bytes and oldest timestamp; its own log end
    offset ends its range) cover the range end to end, none of them straddling ``start``.
    A commit without those fields (an older topiclake), a straddling append (a cut in its
    middle) or a gap (the commits given do not reach back far enough) gives None, and the
    caller scans the records instead.
    """
    if start >= end:
        return AppendedRecords()
    ranges: dict[int, tuple[int, AppendedRecords]] = {}
    for commit in commits:
        body = metadata_body(commit.user_metadata)
        if body is None or body.get("operation") not in APPEND_OPERATIONS:
            continue
        try:
            base, stop = int(body["base_offset"]), int(body["log_end_offset"])
            if stop <= start:
                continue
            if base < start or body.get("bytes") is None:
                return None
            oldest = body.get("batch_min_timestamp_ms")
            ranges[base] = (stop, AppendedRecords(int(body["count"]), int(body["bytes"]),
                                                  None if oldest is None else int(oldest)))
        except (KeyError, TypeError, ValueError):
            return None
    records = size = 0
    oldest_seen: list[int] = []
    offset = start
    while offset < end:
        if offset not in ranges:
            return None
        offset, batch = ranges[offset]
        records, size = records + batch.records, size + batch.bytes
        if batch.records:
            if batch.min_timestamp_ms is None:
                return None
            oldest_seen.append(batch.min_timestamp_ms)
    if offset != end:
        return None
    return AppendedRecords(records, size, min(oldest_seen) if oldest_seen else None)


def appends_reach(commits: Iterable["CommitEntry"], offset: int) -> bool:
    """Whether an append commit among ``commits`` starts at or below ``offset``: when none
    does, older commits than those given may hold the appends :func:`appended_between`
    needs (more appends came since than one page of the history holds)."""
    for commit in commits:
        body = metadata_body(commit.user_metadata)
        if body is not None and body.get("operation") in APPEND_OPERATIONS:
            try:
                if int(body["base_offset"]) <= offset:
                    return True
            except (KeyError, TypeError, ValueError):
                return True  # an older topiclake's append: more pages would not say either
    return False


#: The operations whose commits remove records: a cut of the log's prefix, or compaction.
REMOVING_OPERATIONS = ("compact", "retain", "delete_records")
#: topiclake's operations that leave every record as it was (appends add past the log end).
KEEPING_OPERATIONS = ("create", "roll-segment", "optimize", "vacuum")


def size_after_cut(commits: Iterable["CommitEntry"], log_start: int, end: int) -> AppendedRecords | None:
    """The whole log's records and bytes from the newest cut of its prefix: a retention or
    deleteRecords commit records what it kept, ``[its log start, the log end it read)`` (its
    ``kept`` field: counted with what it removes, or the log's size less that); the appends
    since then add theirs (:func:`appended_between`). That is exact while no commit after the cut has
    removed records, which is what a delete-only topic's log is between its cuts: a cut
    lands inside an append more often than not, and then the append commits alone cannot
    say. None when the commits given cannot say; the caller scans the records instead.
    The result's oldest timestamp is not known (None)."""
    commits = sorted(commits, key=lambda c: c.version, reverse=True)
    for commit in commits:
        body = metadata_body(commit.user_metadata)
        if body is None or body.get("operation") in APPEND_OPERATIONS + KEEPING_OPERATIONS:
            continue
        kept = body.get("kept")
        if body.get("operation") not in REMOVING_OPERATIONS or not isinstance(kept, dict):
            return None  # a compaction, an older topiclake's cut, or an operation not known here
        try:
            start, kept_end = int(kept["start"]), int(kept["end"])
            records, size = int(kept["records"]), int(kept["bytes"])
        except (KeyError, TypeError, ValueError):
            return None
        if start != log_start:
            return None
        since = appended_between(commits, kept_end, end)
        return None if since is None else AppendedRecords(records + since.records, size + since.bytes)
    return None


def sizes_from_commits(commits: list["CommitEntry"], state: LogState
                       ) -> tuple[AppendedRecords | None, AppendedRecords | None]:
    """What ``commits`` say of the records past the checkpoint (:func:`appended_between`),
    else of the whole log since the newest cut (:func:`size_after_cut`): a ``Snapshot``'s
    ``past_checkpoint`` and ``after_cut``."""
    past_checkpoint = appended_between(commits, max(state.checkpoint, state.log_start_offset), state.log_end_offset)
    if past_checkpoint is not None:
        return past_checkpoint, None
    return None, size_after_cut(commits, state.log_start_offset, state.log_end_offset)


@dataclass(frozen=True)
class Snapshot:
    """A partition pinned at one table version, with the bookkeeping of that version."""

    version: int
    state: LogState
    #: the records from the checkpoint (or the log start, if later) to the log end, as the
    #: append commits of the newest page of history describe them; None when they cannot
    #: say exactly (``log_state.appended_between``), and then the records are scanned
    past_checkpoint: AppendedRecords | None = None
    #: the whole log, as the newest cut of its prefix counted it plus the appends since
    #: (``log_state.size_after_cut``); looked for only when ``past_checkpoint`` is None
    after_cut: AppendedRecords | None = None

    def __post_init__(self):
        if self.version < 0:
            raise ValueError("version must be >= 0")

    def size_from_metadata(self) -> tuple[int, int] | None:
        """Records and bytes of the whole log, from the clean section's summary and the append
        commits past the checkpoint, else from the newest cut's count and the appends since;
        None when neither can say (then ``PartitionLog.size``)."""
        if self.past_checkpoint is None:
            return None if self.after_cut is None else (self.after_cut.records, self.after_cut.bytes)
        clean = self.state.clean
        return clean.records + self.past_checkpoint.records, clean.bytes + self.past_checkpoint.bytes


@dataclass(frozen=True)
class CommitEntry:
    """One Delta commit, as ``DeltaTable.history()`` reports it."""

    version: int
    read_version: int | None
    user_metadata: str | None

    @property
    def state(self) -> LogState | None:
        return parse_metadata(self.user_metadata)


def to_metadata(state: LogState, operation: str, based_on: int | None, **extra) -> str:
    """The userMetadata JSON for a commit that leaves the log in ``state``.

    ``based_on`` is the table version whose state the writer extended. Delta's own
    ``readVersion`` can be later (a MERGE or an append takes its snapshot when it starts,
    after the writer planned), and a commit landing in between would otherwise fall out
    of the fold below.
    """
    fields = asdict(state)
    clash = sorted(set(fields).intersection(extra))
    if clash:  # an extra of that name would stand in for the state's own field when parsed
        raise ValueError(f"commit metadata extras {clash} would overwrite the log state's fields")
    body = {"format": FORMAT_VERSION, "operation": operation, **fields, **extra}
    if based_on is not None:
        body["based_on"] = int(based_on)
    return json.dumps({METADATA_KEY: body}, sort_keys=True, separators=(",", ":"))


def parse_metadata(user_metadata: str | None) -> LogState | None:
    """The state a commit recorded, or None for a commit topiclake did not write."""
    if not user_metadata:
        return None
    try:
        body = json.loads(user_metadata)[METADATA_KEY]
        clean = CleanSection(**body["clean"])
        return LogState(
            log_start_offset=int(body["log_start_offset"]),
            log_end_offset=int(body["log_end_offset"]),
            checkpoint=int(body["checkpoint"]),
            active_segment=int(body["active_segment"]),
            clean=clean,
            max_timestamp_ms=None if body.get("max_timestamp_ms") is None else int(body["max_timestamp_ms"]),
            min_timestamp_ms=None if body.get("min_timestamp_ms") is None else int(body["min_timestamp_ms"]),
        )
    except (ValueError, KeyError, TypeError):
        return None


def metadata_body(user_metadata: str | None) -> dict | None:
    """A topiclake commit's metadata as a dict, or None for a commit topiclake did not write."""
    if not user_metadata:
        return None
    try:
        body = json.loads(user_metadata)[METADATA_KEY]
    except (ValueError, KeyError, TypeError):
        return None
    return body if isinstance(body, dict) else None


def metadata_field(user_metadata: str | None, name: str):
    """One extra field of a topiclake commit's metadata (e.g. ``operation``, ``producer_id``)."""
    body = metadata_body(user_metadata)
    return None if body is None else body.get(name)


@dataclass(frozen=True)
class Fold:
    """The result of folding commits: the state, and whether the history given was enough."""

    state: LogState | None
    #: False when the commits given do not reach back far enough to be sure
    complete: bool


def fold(commits: Iterable[CommitEntry]) -> Fold:
    """Fold commits (any order, newest ones at least) into the partition's current state."""
    ordered = sorted(commits, key=lambda c: c.version, reverse=True)
    stateful = [(c, c.state) for c in ordered]
    stateful = [(c, s) for c, s in stateful if s is not None]
    if not stateful:
        return Fold(state=None, complete=False)
    newest, _ = stateful[0]
    # Every commit after the version the newest one's state was based on may carry changes
    # it did not see: the earlier of its writer's snapshot and Delta's read version.
    bases = [v for v in (newest.read_version, metadata_field(newest.user_metadata, "based_on")) if v is not None]
    horizon = min(int(v) for v in bases) if bases else newest.version - 1
    window = [s for c, s in stateful if c.version > horizon]
    oldest_given = ordered[-1].version
    complete = oldest_given <= horizon + 1 or oldest_given == 0
    return Fold(state=merge_states(window), complete=complete)


def merge_states(states: Iterable[LogState]) -> LogState:
    """Max of the monotone fields (the newest-timestamp bound unknown if any is), min of the
    oldest-timestamp bounds; the clean summary of the highest epoch."""
    states = list(states)
    if not states:
        raise ValueError("merge_states needs at least one state")
    clean = max((s.clean for s in states), key=lambda c: c.epoch)
    return LogState(
        log_start_offset=max(s.log_start_offset for s in states),
        log_end_offset=max(s.log_end_offset for s in states),
        checkpoint=max(s.checkpoint for s in states),
        active_segment=max(s.active_segment for s in states),
        clean=clean,
        max_timestamp_ms=newest_timestamp(s.max_timestamp_ms for s in states),
        min_timestamp_ms=oldest_timestamp(s.min_timestamp_ms for s in states),
    )


def state_from_mapping(values: Mapping) -> LogState:
    """A state from a plain mapping (as ``dataclasses.asdict`` gives)."""
    body = dict(values)
    clean = CleanSection(**body.pop("clean", {}))
    return LogState(clean=clean, **body)
