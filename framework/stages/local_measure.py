"""A small partition's compaction measure read by Arrow, with no Spark job.

``compaction.measure`` scans the records of a version when its commit metadata cannot rule
out a record too young to compact: the first uncleanable offset U is then the smallest
offset of such a record, and the dirty section and the head are counted around it. Right
after a produce of fresh records (the quick start's sample data, a topic whose producers
never pause) that is every later ``maintain``, nothing due or not. Through Spark that scan
cost 0.10 to 0.19 s a partition with the session up (a Spark job each), and in a new
process it was what started the JVM of a run that otherwise reads only Delta's log files:
8.5 s for the 7 quick-start partitions, where a run that scans nothing takes under a second.

For a small partition (``small_partitions.is_small`` by its files' statistics) whose
version's files are its records (``version_checksum.plain_files``: local, no deletion
vectors), the three columns the measure needs are read here from those files (at most
``SMALL_PARTITION_RECORDS`` rows of three numbers: about 1 ms for 50 records), and the
numbers come from the same rules: a record is too young by ``rules.newer_than`` (applied to
the whole column at once), and the dirty section ``[C, U)`` and the head ``[max(C, U), end)``
are counted as the Spark query counts them. ``tests/test_compaction_plan.py`` pins the two
ways to each other on the same versions; a larger partition, a table elsewhere than the
local file system, or one with deletion vectors is scanned by Spark.
"""

from __future__ import annotations

from framework.cleaner import rules as cleaner
from framework.log import local_records

__all__ = ["scanned"]


def scanned(log, version: int, checkpoint: int, after_ms: int, log_end_offset: int,
            max_timestamp_ms: int | None) -> tuple[int, dict] | None:
    """U and the dirty section's and head's sizes of ``version`` (the numbers
    ``compaction.measure`` reads by Spark), or None where Spark reads them: the version is
    not small plain local files."""
    files = local_records.small_plain_files(log.path, version)
    columns = None if files is None else _columns(files)
    if columns is None:
        return None
    offsets, timestamps, sizes = columns
    return _measured(offsets, timestamps, sizes, checkpoint, after_ms, log_end_offset, max_timestamp_ms)


def _columns(files):
    """The offset, timestamp (epoch ms, masked where null) and size columns of the files, as
    numpy arrays; None when a file's columns are not what a partition table writes."""
    import numpy as np

    tables = local_records.visible_columns(files, ["offset", "timestamp", "_size"])
    if tables is None:
        return None
    empty = np.ma.masked_array([], dtype=np.int64)  # (a version may have no file)
    return (np.concatenate([empty.data, *(t.column("offset").to_numpy() for t in tables)]),
            np.ma.concatenate([empty, *(_masked(t.column("timestamp")) for t in tables)]),
            np.ma.concatenate([empty, *(_masked(t.column("_size")) for t in tables)]))


def _masked(column):
    """An integer column as a numpy masked array, masked where null."""
    import numpy as np

    return np.ma.masked_array(column.fill_null(0).to_numpy(), mask=column.is_null().to_numpy())


def _measured(offsets, timestamps, sizes, checkpoint: int, after_ms: int, log_end_offset: int,
              max_timestamp_ms: int | None) -> tuple[int, dict]:
    """What ``compaction.measure``'s Spark query gives for these columns."""
    import numpy as np

    u = log_end_offset
    if not cleaner.none_newer_than(max_timestamp_ms, after_ms):
        young = (np.ones(len(offsets), dtype=bool) if cleaner.all_newer_than(after_ms)
                 else cleaner.newer_than(timestamps, after_ms).filled(False))
        if young.any():
            u = min(int(offsets[young].min()), log_end_offset)
    in_dirty = (offsets >= checkpoint) & (offsets < u)
    in_head = offsets >= max(checkpoint, u)
    return u, {
        "dirty_records": int(in_dirty.sum()),
        "dirty_bytes": _total(sizes[in_dirty]),
        "oldest_dirty": _lowest(timestamps[in_dirty]),
        "head_records": int(in_head.sum()),
        "head_bytes": _total(sizes[in_head]),
    }


def _total(values) -> int | None:
    """SQL's ``sum`` of the values (nulls skipped): None when none is there."""
    return int(values.sum()) if values.count() else None


def _lowest(values) -> int | None:
    """SQL's ``min`` of the values (nulls skipped): None when none is there."""
    return int(values.min()) if values.count() else None
