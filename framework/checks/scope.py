"""The numbers a check judges by, as pure functions (no Spark): where the head starts,
what max lag covers, what KIP-68 may remove, and which versions a vacuum must have left
readable. (A tombstone's first horizon is the cleaner's own rule, ``rules.delete_horizon_ms``.)

The Spark side (``framework.checks.rules``) computes a few aggregates over the records;
these functions say what they mean for each guarantee.
"""

from __future__ import annotations

from dataclasses import dataclass

from framework.log.log_state import LogState
from framework.stages.stage_check import StageCheck

__all__ = [
    "Scope",
    "consumed_removals_explained",
    "expected_bounds",
    "head_start",
    "max_lag_end",
    "stage_scope",
    "validate_scope",
    "versions_to_read",
]


def head_start(first_uncleanable: int | None, cleaned_up_to: int | None, recomputed_u: int) -> int:
    """Where the head a compaction must leave alone starts.

    The stage's own U, a retry's cap (``cleaned_up_to``) and U recomputed from the before
    version's data should agree (or the cap be lower); the smallest is the strictest, so a
    stage that compacted past the true U is caught.
    """
    return min(x for x in (first_uncleanable, cleaned_up_to, recomputed_u) if x is not None)


def max_lag_end(recomputed_u: int, first_uncleanable: int | None, cleaned_up_to: int | None) -> int:
    """G6 looks at records below this: U recomputed from the data, or a retry's cap.

    A run whose commit lost to producers is capped (``cleaned_up_to`` below the U it
    measured) at the segment it rolled to; records above the cap were appended while it
    ran and wait for the next run. An uncapped run reports its own U as ``cleaned_up_to``;
    that is exactly what G6 must not trust.
    """
    capped = cleaned_up_to is not None and first_uncleanable is not None and cleaned_up_to < first_uncleanable
    return min(recomputed_u, cleaned_up_to) if capped else recomputed_u


def consumed_removals_explained(highest_removed: int | None, smallest_committed: int | None,
                                time_boundary: int | None, max_bytes: int | None, suffix_bytes: int) -> bool:
    """May a retention run have removed records at or above the smallest committed offset?

    Only time or size retention can (KIP-68 comes after them). Time removes every record
    below ``time_boundary``; size removes a record while the records from it to the end
    hold more than ``max_bytes`` (``suffix_bytes``: the highest removed record's size plus
    the bytes the run kept).
    """
    if highest_removed is None or smallest_committed is None or highest_removed < smallest_committed:
        return True
    if time_boundary is not None and highest_removed < time_boundary:
        return True
    return max_bytes is not None and suffix_bytes > max_bytes


@dataclass(frozen=True)
class Scope:
    """The numbers one before/after comparison is judged by."""

    mode: str                        # compact | retain | delete_records | validate
    now_ms: int
    version_before: int
    version_after: int
    log_end_before: int
    log_end_after: int
    log_start_after: int
    #: below this every key must appear once (max of checkpoint and log start, after)
    checkpoint_after: int
    #: compaction: offsets at or above this must be untouched
    head_start: int | None = None
    #: G6: records in [checkpoint_after, max_lag_end) must not be older than max lag
    max_lag_end: int | None = None
    smallest_committed: int | None = None
    #: False when retention removed records at or above the smallest committed offset
    #: that neither time nor size retention explains
    consumed_explained: bool = True
    #: validate, since the last maintenance run: nothing but appends is legal
    appends_only: bool = False


def clean_end(state: LogState) -> int:
    """Below this every key appears once: the checkpoint, or the log start above it."""
    return max(state.checkpoint, state.log_start_offset)


def stage_scope(check: StageCheck, before: LogState, after: LogState, bounds: dict) -> Scope:
    """The numbers a compaction or retention stage is judged by."""
    config = check.log.spec.config
    u_before = bounds["u_before"] if bounds["u_before"] is not None else before.log_end_offset
    u_before = min(u_before, before.log_end_offset)
    common = dict(
        now_ms=check.now_ms, version_before=check.version_before, version_after=check.version_after,
        log_end_before=before.log_end_offset, log_end_after=after.log_end_offset,
        log_start_after=after.log_start_offset, checkpoint_after=clean_end(after),
    )
    if check.stage == "compact":
        return Scope(mode="compact", head_start=head_start(check.first_uncleanable_offset, check.cleaned_up_to, u_before),
                     max_lag_end=max_lag_end(u_before, check.first_uncleanable_offset, check.cleaned_up_to),
                     **common)
    smallest = check.smallest_committed_offset if check.stage == "retain" else None
    time_boundary = None  # time retention removes every record below it
    if config.delete and config.retention_ms >= 0:
        # no record young enough: time retention may remove them all
        time_boundary = bounds["time_boundary"] if bounds["time_boundary"] is not None else before.log_end_offset
    explained = consumed_removals_explained(
        bounds["highest_removed"], smallest, time_boundary,
        None if config.retention_bytes == -1 else config.retention_bytes,
        bounds["highest_removed_size"] + bounds["kept_bytes"],
    )
    return Scope(mode=check.stage, smallest_committed=smallest, consumed_explained=explained, **common)


def expected_bounds(check: StageCheck) -> dict:
    """The bounds a correct stage leaves, as far as :func:`stage_scope` reads them: U as the
    stage measured it (the rule the check recomputes it by), and no removal that retention
    must explain. A check built on them is right only if the data's bounds give the same
    scope; one Spark job then gives the violations and the bounds together."""
    return {"u_before": check.first_uncleanable_offset, "time_boundary": None, "highest_removed": None,
            "highest_removed_size": 0, "kept_bytes": 0}


def validate_scope(now_ms: int, version_before: int, version_after: int, before: LogState, after: LogState,
                   bounds: dict, appends_only: bool) -> Scope:
    """The numbers ``validate`` judges the current version (and the appends since) by."""
    u_after = bounds["u_after"] if bounds["u_after"] is not None else after.log_end_offset
    return Scope(
        mode="validate", now_ms=now_ms, version_before=version_before, version_after=version_after,
        log_end_before=before.log_end_offset, log_end_after=after.log_end_offset,
        log_start_after=after.log_start_offset, checkpoint_after=clean_end(after),
        max_lag_end=min(u_after, after.log_end_offset), appends_only=appends_only,
    )


def versions_to_read(check: StageCheck, oldest_still_inside: int | None) -> list[tuple[int, str]]:
    """The versions a vacuum must have left readable, and why each is on the list.

    The window slides while the check runs: a version that was inside it when the
    vacuum ran may have left it since (``oldest_still_inside`` is the oldest version
    inside it now), and Delta then rightly refuses it. The latest version is always due.
    """
    oldest = check.oldest_window_version
    if oldest is not None and oldest_still_inside is not None:
        oldest = max(oldest, oldest_still_inside)
    elif oldest_still_inside is None:
        oldest = None
    chosen: dict[int, str] = {}
    if oldest is not None and oldest <= check.version_after:
        chosen[oldest] = "the oldest version inside the time-travel window"
        if check.version_before >= oldest:
            chosen.setdefault(check.version_before, "the version before the vacuum")
    chosen.setdefault(check.version_after, "the version after the vacuum")
    return sorted(chosen.items())
