"""A data file's statistics, as an add action in the Delta log carries them.

Delta writes each file's ``stats`` as a JSON string: ``numRecords`` and, per column,
``minValues`` and ``maxValues``. A file may carry none, or only some (a session with
``spark.databricks.delta.stats.collect`` false, a writer that collects fewer columns, a
malformed string); every field it lacks is None here, and each reader says what that means
for it: a version's record count is unknown, bin-packing leaves the file alone, a retention
cut reads the file, a rewrite's metrics count it as 0 records.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from typing import Iterable

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


@dataclass(frozen=True)
class FileStats:
    """What a file's statistics say of its records; None where they say nothing."""

    records: int | None = None
    min_offset: int | None = None
    max_offset: int | None = None
    #: the newest timestamp, in epoch milliseconds (Delta truncates the statistic to them)
    max_timestamp_ms: int | None = None
    #: the oldest timestamp, likewise (truncated, it is ``unix_millis`` of the oldest)
    min_timestamp_ms: int | None = None
    #: whether the bounds are values of the file's records (Delta's ``tightBounds``); once a
    #: deletion vector hides rows they only bound them, and ``records`` counts hidden rows too
    tight: bool = True


def parse(stats_json: str | None) -> FileStats:
    """The statistics of a file from its ``stats`` string (None or malformed: none)."""
    try:
        stats = json.loads(stats_json) if stats_json else {}
    except ValueError:
        return FileStats()
    if not isinstance(stats, dict):
        return FileStats()
    oldest, newest = stats.get("minValues"), stats.get("maxValues")
    return FileStats(records=_whole(stats.get("numRecords")), min_offset=_offset(oldest),
                     max_offset=_offset(newest), max_timestamp_ms=_timestamp_ms(newest),
                     min_timestamp_ms=_timestamp_ms(oldest), tight=stats.get("tightBounds") is not False)


def of(add: dict) -> FileStats:
    """The statistics of the file an add action (as the Delta log writes it) adds; not
    tight when a deletion vector hides some of its rows, whatever the string says."""
    stats = parse(add.get("stats"))
    return replace(stats, tight=False) if add.get("deletionVector") and stats.tight else stats


def shown_records(add: dict, stats: FileStats) -> int | None:
    """The records the file an add action adds still shows: its rows (``stats.records``)
    less those its deletion vector hides (the vector's ``cardinality``); None where the
    statistics do not count its rows."""
    if stats.records is None:
        return None
    return stats.records - ((add.get("deletionVector") or {}).get("cardinality") or 0)


def may_hold_offsets(stats: FileStats, start: int | None, end: int | None) -> bool:
    """Whether a file with ``stats`` may hold an offset in ``[start, end)`` (None: unbounded):
    unless its highest offset lies below ``start`` or its lowest at or past ``end`` (a bound
    the statistics do not give rules nothing out). No file holds an offset of an empty range."""
    if start is not None and end is not None and start >= end:
        return False
    below = start is not None and stats.max_offset is not None and stats.max_offset < start
    past = end is not None and stats.min_offset is not None and stats.min_offset >= end
    return not (below or past)


def may_hold_newer(files: Iterable[FileStats], below_offset: int, ms: int) -> bool:
    """Whether a record below ``below_offset`` newer than ``ms`` may lie in ``files``: some
    file starts below that offset and its newest timestamp is not older than ``ms`` (or it
    does not say). The test is on whole milliseconds, as the rules' ``unix_millis`` is."""
    return any(f.min_offset is None or f.max_timestamp_ms is None
               or (f.min_offset < below_offset and f.max_timestamp_ms >= ms) for f in files)


def timestamp_statistic(ms: int) -> str | None:
    """Epoch milliseconds as Delta writes a timestamp statistic (in UTC, to the millisecond:
    ``2026-11-28T21:49:36.123Z``), the form :func:`_timestamp_ms` reads; None when the
    moment is out of Python's years."""
    try:
        moment = _EPOCH + timedelta(milliseconds=ms)
    except OverflowError:
        return None
    return (f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}T{moment.hour:02d}:{moment.minute:02d}:"
            f"{moment.second:02d}.{moment.microsecond // 1000:03d}Z")


def _timestamp_ms(bounds) -> int | None:
    """A timestamp statistic (``2026-11-28T21:49:36.123Z``) in epoch milliseconds."""
    text = bounds.get("timestamp") if isinstance(bounds, dict) else None
    if not isinstance(text, str):
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:  # Delta writes an offset; without one the instant is unknown
        return None
    return (moment - _EPOCH) // timedelta(milliseconds=1)


def _offset(bounds) -> int | None:
    return _whole(bounds.get("offset")) if isinstance(bounds, dict) else None


def _whole(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
