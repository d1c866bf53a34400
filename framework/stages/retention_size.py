"""Size retention's boundary (``retention.bytes``, KIP-68's size rule): the first record
whose bytes to the log end fit, found by reading as little as the rule allows. A
:mod:`framework.stages.retention` plan asks it after time retention's cut.
"""

from __future__ import annotations

from framework.log import file_stats, version_checksum
from framework.log.partition_log import PartitionLog, Snapshot
from framework.stages import retention_counts

__all__ = ["SIZE_RANGE_OFFSETS", "boundary", "boundary_from_oldest", "bytes_from", "first_kept_by_size"]

#: Offsets per range of size retention's first pass (:func:`boundary`).
SIZE_RANGE_OFFSETS = 1 << 16


def _byte_ranges(rest, width: int = SIZE_RANGE_OFFSETS) -> list:
    """One parallel pass over ``rest``: each range of ``width`` offsets' bytes and first
    offset, in offset order (rows ``r``, ``bytes``, ``first``)."""
    from pyspark.sql import functions as F

    return sorted(rest.selectExpr(f"floor(`offset` / {int(width)}) AS r", "_size", "`offset`").groupBy("r")
                  .agg(F.expr("sum(_size) AS bytes"), F.expr("min(`offset`) AS first")).collect())


def boundary(rest, max_bytes: int, end: int, log_end_offset: int,
             width: int = SIZE_RANGE_OFFSETS, ranges: list | None = None) -> tuple[int, bool]:
    """Size retention's ``retention._boundary`` over ``rest`` (the records from where it starts):
    the first record whose bytes to the log end fit in ``max_bytes``. A window over every
    record would sort the whole log in one task; instead, one parallel pass sums the bytes
    of each range of ``width`` offsets, the ranges' suffixes show the one range the
    boundary falls in (a record of an earlier range has more than its range's suffix to
    the end, one of a later range no more than the next range's), and the window runs over
    that range alone, its suffix offset by the bytes of the ranges after it. ``ranges``:
    :func:`_byte_ranges` of ``rest`` when the caller has them."""
    ranges = _byte_ranges(rest, width) if ranges is None else ranges
    after, straddled = 0, None
    for index in range(len(ranges) - 1, -1, -1):
        if after + ranges[index]["bytes"] > max_bytes:
            straddled = index
            break
        after += ranges[index]["bytes"]
    if straddled is None:  # every record fits: the first is kept
        kept = ranges[0]["first"] if ranges else None
    else:
        suffix = (f"sum(_size) OVER (ORDER BY `offset` DESC ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) "
                  f"+ {int(after)}")
        first = int(ranges[straddled]["r"]) * int(width)  # a range of offsets, so file skipping applies
        inside = rest.where(f"`offset` >= {first} AND `offset` < {first + int(width)}")
        kept = inside.selectExpr("`offset`", f"{suffix} AS _suffix").selectExpr(
            f"min(CASE WHEN _suffix <= {int(max_bytes)} THEN `offset` END) AS kept").collect()[0]["kept"]
        if kept is None and straddled + 1 < len(ranges):
            kept = ranges[straddled + 1]["first"]
    boundary = min(end, log_end_offset if kept is None else kept)
    return boundary, bool(ranges) and ranges[0]["first"] < boundary


def boundary_from_oldest(log: PartitionLog, snap: Snapshot, start: int, end: int, listing,
                         max_bytes: int) -> tuple[int, bool] | None:
    """Size retention's boundary reading only the oldest files, those that hold what it cuts:
    the log's bytes are known from the commits (``Snapshot.size_from_metadata``), so the cut
    is the first record whose bytes from the log start reach the excess over ``max_bytes``
    (``cleaner.size_boundary``), and only the files below a candidate offset C are read, C
    a file's lowest offset past what the excess would take by the files' record counts. Every
    record below C lies in them; the bytes from C to the end are the log's less theirs, so
    :func:`boundary` over [start, C) finds the boundary, or shows it lies at or past C
    (then C moves further out); a local table's files are read by Arrow in the driver
    (:func:`_cut_locally`, no Spark job). Reads nothing when the log fits. A file whose
    deletion vector hides rows counts the rows it shows (its row count less the vector's
    cardinality), and its lowest offset only bounds them: with such a file's bound as C, a
    boundary at C is not known to be a record's, and C moves further out instead. Every
    local file is read when a file's statistics lack its offsets or record count. None when
    there is no file list, such files are not local, or the commits do not say the log's
    size (then the caller's pass over the log). Like :func:`boundary`'s, the boundary is a
    cut only when a record lies below it. ``listing()``: ``retention._listed_with_stats``."""
    size = snap.size_from_metadata()
    if size is None:
        return None
    records, total = size
    excess = total - max_bytes
    if excess <= 0:  # the whole log fits: so does every part of it
        return start, False
    listed, stats = listing()
    if not stats:
        return None
    log_start = snap.state.log_start_offset
    if any(None in (s.min_offset, s.records) for s in stats):
        rows = retention_counts.local_rows(listed)
        return None if rows is None else _cut_locally(rows, start, log_start, None, total, max_bytes, end,
                                                           snap.state.log_end_offset)
    # (a file whose vector hides every row holds no record: left out)
    files = sorted(((s, path, add) for s, path, add in zip(stats, listed.paths, listed.adds)
                    if file_stats.shown_records(add, s)),
                   key=lambda f: f[0].min_offset)
    wanted = -(-excess * records // total)  # the excess in records at the log's mean size, rounded up
    while True:
        # the files up to the one whose record counts pass what is wanted, and C the next one's lowest offset
        taken, counted = 0, 0
        while taken < len(files) and counted < wanted:
            counted += file_stats.shown_records(files[taken][2], files[taken][0])
            taken += 1
        below = files[:taken + 1]  # ... and one more, which may straddle the boundary
        cut_at = files[taken + 1][0].min_offset if taken + 1 < len(files) else None
        # C is a record's offset where the file's bounds are its records' values
        cut_is_record = cut_at is None or files[taken + 1][0].tight
        chosen = listed.only((path, add) for _, path, add in below)
        rows = retention_counts.local_rows(chosen)  # a local table's, by Arrow in the driver: no Spark job
        if rows is not None:
            found = _cut_locally(rows, start, log_start, cut_at, total, max_bytes, end, snap.state.log_end_offset)
        else:
            frame = version_checksum.frame_of(log.spark, chosen)
            if cut_at is None:
                return boundary(frame.where(f"`offset` >= {int(start)}"), max_bytes, end,
                                      snap.state.log_end_offset)
            rest = frame.where(f"`offset` >= {int(start)} AND `offset` < {int(cut_at)}")
            ranges = _byte_ranges(rest)
            # the bytes below C: [start, C)'s ranges, and from the log start what an earlier rule cuts
            below_start = 0 if start == log_start else frame.where(
                f"`offset` >= {int(log_start)} AND `offset` < {int(start)}").selectExpr(
                "coalesce(sum(_size), 0) AS b").collect()[0]["b"]
            fits = max_bytes - (total - below_start - sum(r["bytes"] for r in ranges))  # [start, C) may keep this
            found = boundary(rest, fits, end, cut_at, ranges=ranges) if fits >= 0 else None
        at_loose_cut = not cut_is_record and found is not None and found[0] == cut_at < end
        if found is not None and not at_loose_cut:
            return found
        wanted = 2 * counted + 1  # C was too near (or only bounds a record): the boundary lies past it


def _cut_locally(rows, start: int, log_start: int, cut_at: int | None, total: int, max_bytes: int,
                 end: int, log_end_offset: int) -> tuple[int, bool] | None:
    """:func:`boundary_from_oldest`'s Spark passes over the oldest files' ``rows``
    (``retention_counts.local_rows``): the boundary in [start, C), or None when it lies past C."""
    import numpy as np

    offsets = rows["offset"].to_numpy()
    order = np.argsort(offsets, kind="stable")
    offsets, sizes = offsets[order], rows["_size"].fill_null(0).to_numpy()[order]
    inside = offsets >= start if cut_at is None else (offsets >= start) & (offsets < cut_at)
    fits = max_bytes
    if cut_at is not None:  # the bytes below C: [start, C)'s, and what an earlier rule cuts from the log start
        below_start = 0 if start == log_start else int(sizes[(offsets >= log_start) & (offsets < start)].sum())
        fits = max_bytes - (total - below_start - int(sizes[inside].sum()))
        if fits < 0:
            return None
    kept = first_kept_by_size(offsets[inside], sizes[inside], fits, log_end_offset if cut_at is None else cut_at)
    boundary = min(end, kept)
    return boundary, bool(inside.any()) and int(offsets[inside][0]) < boundary


def first_kept_by_size(offsets, sizes, max_bytes: int, log_end_offset: int) -> int:
    """``cleaner.size_boundary`` over numpy arrays of records' offsets and sizes in offset
    order (``tests/test_retention.py`` pins the two together)."""
    import numpy as np

    fits = np.flatnonzero(np.cumsum(sizes[::-1])[::-1] <= max_bytes)  # each record's bytes to the end
    return int(offsets[fits[0]]) if len(fits) else log_end_offset


def bytes_from(snap: Snapshot, records, start: int) -> int:
    """The bytes of the records from ``start`` (of ``records()``): when that is the whole
    log, the commit metadata's count (``Snapshot.size_from_metadata``), else one aggregate pass."""
    known = snap.size_from_metadata() if start == snap.state.log_start_offset else None
    if known is not None:
        return known[1]
    return records().where(f"`offset` >= {int(start)}").selectExpr("sum(_size) AS b").collect()[0]["b"] or 0
