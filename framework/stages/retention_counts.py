"""What a retention cut removes and keeps, counted before it commits: the records and bytes
below the new log start (and of them, what lies in the clean section), and of what stays,
the oldest timestamp, the records and the bytes (the log's size for the commit), and the
earliest delete horizon the clean section keeps.

Only the files that may hold a record below the cut are read, when the rest is known
without a read (every other file's oldest timestamp from its statistics, the log's size
from the commits). Local plain files are counted by Arrow in the driver
(:func:`counted_locally`, about a millisecond for a small partition's few files), any
other by one Spark aggregate (:func:`counted`, a job: about 30 ms of a long run's 0.44 s
a run, stop 102); ``tests/test_retention.py`` pins the two together.
"""

from __future__ import annotations

import os

from framework.log import local_records, version_checksum
from framework.log.partition_log import PartitionLog, Snapshot
from framework.log.version_checksum import PlainFiles

__all__ = ["counted", "counted_locally", "cut_counts", "kept_clean_horizon", "local_rows"]

_COLUMNS = ["offset", "timestamp", "_size", "_delete_horizon"]


def counted(records, new_start: int, checkpoint: int) -> dict:
    """One aggregate pass over ``records`` (a DataFrame): what a cut at ``new_start`` removes
    (of it, what lies below ``checkpoint``: the clean section), and what it keeps."""
    below, kept = f"`offset` < {int(new_start)}", f"`offset` >= {int(new_start)}"
    in_clean = f"{below} AND `offset` < {int(checkpoint)}"
    row = records.selectExpr(
        f"count(CASE WHEN {below} THEN 1 END) AS n",
        f"coalesce(sum(CASE WHEN {below} THEN _size END), 0) AS b",
        f"count(CASE WHEN {in_clean} THEN 1 END) AS clean_n",
        f"coalesce(sum(CASE WHEN {in_clean} THEN _size END), 0) AS clean_b",
        f"count(CASE WHEN {in_clean} AND _delete_horizon IS NOT NULL THEN 1 END) AS clean_t",
        f"min(CASE WHEN {kept} THEN unix_millis(`timestamp`) END) AS oldest_kept",
        f"count(CASE WHEN {kept} THEN 1 END) AS kept_n",
        f"coalesce(sum(CASE WHEN {kept} THEN _size END), 0) AS kept_b",
    ).collect()[0]
    return row.asDict()


def local_rows(files: PlainFiles):
    """The offset, millisecond, size and delete horizon columns of ``files``' records (less
    the rows a file's deletion vector hides) as one Arrow table (int64), read in the driver
    (also retention's boundary search, ``retention``); None when a file is not local or not
    a partition table's, or its vector is not read here."""
    import pyarrow as pa

    if not all(os.path.isfile(path) for path in files.paths):
        return None
    tables = local_records.each_file(list(zip(files.paths, files.adds, strict=True)), lambda file: (
        local_records.visible_file_columns(files.folder, *file, _COLUMNS)))
    if tables is None:
        return None
    schema = pa.schema([(name, pa.int64()) for name in _COLUMNS])
    return pa.concat_tables([schema.empty_table(), *(table.select(_COLUMNS).cast(schema) for table in tables)])


def counted_locally(files: PlainFiles, new_start: int, checkpoint: int) -> dict | None:
    """:func:`counted` of ``files`` read by Arrow in the driver, with no Spark job; None when
    a file is not local or its columns are not a partition table's."""
    rows = local_rows(files)
    if rows is None:
        return None

    def values(name):  # (nulls as a mask beside them)
        column = rows[name].combine_chunks()
        return column.fill_null(0).to_numpy(), column.is_valid().to_numpy(zero_copy_only=False)

    (offset, _), (size, sized) = values("offset"), values("_size")
    (timestamp, stamped), (_, horizon) = values("timestamp"), values("_delete_horizon")
    below, kept = offset < new_start, offset >= new_start
    in_clean = below & (offset < checkpoint)
    oldest = timestamp[kept & stamped]
    return {"n": int(below.sum()), "b": int(size[below & sized].sum()), "clean_n": int(in_clean.sum()),
            "clean_b": int(size[in_clean & sized].sum()), "clean_t": int((in_clean & horizon).sum()),
            "oldest_kept": int(oldest.min()) if len(oldest) else None, "kept_n": int(kept.sum()),
            "kept_b": int(size[kept & sized].sum())}


def cut_counts(log: PartitionLog, snap: Snapshot, new_start: int, checkpoint: int, listing) -> dict:
    """:func:`counted` for a cut of ``snap`` at ``new_start``, reading only the files that
    may hold a record below it when the rest is known without a read (the module's text).
    Otherwise one pass over the whole log. ``listing()``: ``retention._listed_with_stats``."""
    size = snap.size_from_metadata()
    listed, stats = listing() if size is not None else (None, None)
    if listed is not None:
        touched = set(version_checksum.holding_offsets(listed, None, new_start).paths)
        # the rest give their oldest timestamp unread, unless their statistics lack it or only
        # bound it (a deletion vector's file): those are read too (they hold no record below the cut)
        read = listed.only((path, add) for path, add, stat in zip(listed.paths, listed.adds, stats, strict=True)
                           if path in touched or not stat.tight or stat.min_timestamp_ms is None)
        read_paths = set(read.paths)
        oldest = [stat.min_timestamp_ms for path, stat in zip(listed.paths, stats, strict=True)
                  if path not in read_paths]
        row = counted_locally(read, new_start, checkpoint)
        if row is None:
            row = counted(version_checksum.frame_of(log.spark, read), new_start, checkpoint)
        known = [t for t in (row["oldest_kept"], *oldest) if t is not None]
        return {**row, "oldest_kept": min(known) if known else None,
                "kept_n": size[0] - row["n"], "kept_b": size[1] - row["b"]}
    return counted(log.read_snapshot(snap), new_start, checkpoint)


def kept_clean_horizon(log: PartitionLog, snap: Snapshot, new_start: int, checkpoint: int, listing) -> int | None:
    """The earliest delete horizon (epoch ms) among the records a cut at ``new_start`` keeps
    in the clean section (below ``checkpoint``): the clean section's new bound. Read by Arrow
    from a local table's files that may hold them, else one Spark aggregate."""
    import pyarrow.compute as pc

    listed, _ = listing()
    rows = None if listed is None else local_rows(version_checksum.holding_offsets(listed, new_start, checkpoint))
    if rows is not None:
        inside = pc.and_(pc.greater_equal(rows["offset"], new_start), pc.less(rows["offset"], checkpoint))
        return pc.min(rows["_delete_horizon"].filter(inside)).as_py()
    remaining = log.read_snapshot(snap).where(
        f"`offset` >= {int(new_start)} AND `offset` < {int(checkpoint)} AND _delete_horizon IS NOT NULL")
    return remaining.selectExpr("min(unix_millis(_delete_horizon)) AS m").collect()[0]["m"]
