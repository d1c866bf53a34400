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
from dataclasses import dataclass


@dataclass(frozen=True)
class FileStats:
    """What a file's statistics say of its records; None where they say nothing."""

    records: int | None = None
    min_offset: int | None = None
    max_offset: int | None = None


def parse(stats_json: str | None) -> FileStats:
    """The statistics of a file from its ``stats`` string (None or malformed: none)."""
    try:
        stats = json.loads(stats_json) if stats_json else {}
    except ValueError:
        return FileStats()
    if not isinstance(stats, dict):
        return FileStats()
    return FileStats(records=_whole(stats.get("numRecords")), min_offset=_offset(stats.get("minValues")),
                     max_offset=_offset(stats.get("maxValues")))


def of(add: dict) -> FileStats:
    """The statistics of the file an add action (as the Delta log writes it) adds."""
    return parse(add.get("stats"))


def _offset(bounds) -> int | None:
    return _whole(bounds.get("offset")) if isinstance(bounds, dict) else None


def _whole(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
