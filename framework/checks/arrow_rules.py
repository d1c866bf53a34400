"""A stage check's rules in Arrow's compute functions: the rules of
``framework.checks.rules`` for a compaction or retention stage or for ``validate``, and
the bounds of ``framework.checks.bounds`` (a scoped compaction check's, from its pairing; a
retention's or a validation's, over whole versions), written once more for the records
``framework.checks.arrow_scope`` reads in the driver.
``tests/test_guarantees.py::test_arrow_counts_a_scoped_compaction_check_as_spark_does``,
``::test_arrow_counts_a_retention_check_as_spark_does`` and
``::test_arrow_counts_a_validation_as_spark_does`` pin the two expressions together:
on every version the guarantee tests make, healthy and corrupted, both count the same
violations per guarantee and give the same bounds.

The steps are Spark's: both versions' records netted to whole records with their
multiplicity (a compaction's: the after version's, and the before version's as the after
version's less what the change inserted or updated to, plus what it deleted or updated
from; a retention's: each whole version's), paired
by offset (a full outer join), the per-offset rules over the pairing, then the pairing
unfolded to a row per offset and side and the per-key rules over each key's rows
(keyless rows one group, as SQL's window groups NULLs). A record's winner rank is
``cleaner.arrow_ranks.dense_ranks``, a number that orders as the pure
``cleaner.rules.winner_rank`` does (a parity test pins the two:
``tests/test_guarantees.py::test_the_arrow_rank_orders_as_the_winner_rule``).

Only counts: a check whose counts are not all zero is measured again by Spark, for the
offending rows it shows. So where Spark's answer would hang on the order of its 64-bit
fingerprints (an offset holding two different records on one side) or on how SQL orders a
null timestamp, this says nothing (None), and Spark counts.
"""

from __future__ import annotations

from typing import Callable

from framework.checks import bounds as scoped_bounds
from framework.checks.catalogue import STAGE_GUARANTEES
from framework.checks.scope import Scope
from framework.cleaner import arrow_ranks
from framework.cleaner import rules as cleaner
from framework.spec import TopicConfig

__all__ = ["RECORD_COLUMNS", "counted", "counted_whole"]

#: What a check compares of a record, as the files name its columns (timestamps as epoch ms).
RECORD_COLUMNS = ["offset", "key", "timestamp", "value", "headers", "_delete_horizon", "_size"]
#: A record as it is netted and paired: its columns, the headers as one fingerprint (a list
#: column cannot be grouped by), and its winner rank.
_WHOLE = ["offset", "key", "timestamp", "value", "_headers", "_delete_horizon", "_size", "_rank"]


def _prepared(tables: list, config: TopicConfig) -> list | None:
    """``tables`` (of :data:`RECORD_COLUMNS`) with ``_headers`` and ``_rank`` in place of the
    headers; None when the timestamp strategy meets a null timestamp (SQL orders it first)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    every = pa.concat_tables(tables, promote_options="permissive").combine_chunks()
    headers = every["headers"]
    pairs = arrow_ranks.header_pairs(headers)  # (Python only when a record has headers)
    if pairs is not None:
        fingerprints = pa.array([None if h is None else repr(h).encode() for h in pairs], pa.binary())
    else:  # (Spark's fingerprint tells null headers from none)
        fingerprints = pc.if_else(pc.is_null(headers), pa.scalar(None, pa.binary()), pa.scalar(repr(()).encode()))
    ranks = arrow_ranks.dense_ranks(every, config, pairs)
    if ranks is None:
        return None
    every = every.drop_columns(["headers"]).append_column("_headers", fingerprints)
    every = every.append_column("_rank", ranks).select(_WHOLE)
    found, start = [], 0
    for table in tables:
        found.append(every.slice(start, table.num_rows))
        start += table.num_rows
    return found


def _netted(parts: list[tuple[object, int]]):
    """Whole records with their multiplicity ``_n``: the sum of each part's ``sign`` over its
    copies, only those above zero. A record at an offset no other row holds is its own
    sum; only the rest are grouped by their whole content."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    signed = pa.concat_tables([table.append_column("_n", pa.array(np.full(table.num_rows, sign, np.int64)))
                               for table, sign in parts]).combine_chunks()
    offsets = signed["offset"].to_numpy()
    _, inverse, counts = np.unique(offsets, return_inverse=True, return_counts=True)
    if counts.max(initial=0) <= 1:  # (the usual case: no copy to group, nor one to filter)
        return signed if all(sign > 0 for table, sign in parts if table.num_rows) else signed.filter(
            pc.greater(signed["_n"], 0))
    many = pa.array(counts[inverse] > 1)
    grouped = signed.filter(many).group_by(_WHOLE, use_threads=False).aggregate([("_n", "sum")])
    grouped = grouped.rename_columns(["_n" if name == "_n_sum" else name for name in grouped.column_names])
    netted = pa.concat_tables([signed.filter(pc.invert(many)), grouped.select(signed.column_names)])
    return netted.filter(pc.greater(netted["_n"], 0))


def _paired(before_side, after_side):
    """The two sides (each holding an offset at most once) joined in full on the offset:
    ``offset``, then each side's other columns, ``_b`` and ``_a`` after their names (nulls
    where a side lacks the offset); None when a side holds an offset twice. Placed by
    sorting and taking, which copies each column once (Acero's hash join carried the
    values through its row format: 70 ms of a 500k check's 0.6 s)."""
    import numpy as np
    import pyarrow as pa

    orders, held = [], []
    for side in (before_side, after_side):
        offsets = side["offset"].to_numpy()
        orders.append(np.argsort(offsets))
        held.append(offsets[orders[-1]])
        if np.any(held[-1][1:] == held[-1][:-1]):
            return None
    every = np.union1d(*held)
    columns = {"offset": pa.array(every, pa.int64())}
    for side, order, sorted_offsets, suffix in ((before_side, orders[0], held[0], "_b"),
                                                (after_side, orders[1], held[1], "_a")):
        if len(order):
            at = np.minimum(np.searchsorted(sorted_offsets, every), len(order) - 1)
            places = pa.array(order[at], mask=sorted_offsets[at] != every)
        else:
            places = pa.nulls(len(every), pa.int64())
        taken = side.drop_columns(["offset"]).take(places)
        columns.update((name + suffix, taken[name]) for name in taken.column_names)
    return pa.table(columns)


def _same(left, right):
    """SQL's ``<=>``: equal, or both null."""
    import pyarrow.compute as pc

    return pc.or_(pc.fill_null(pc.equal(left, right), False), pc.and_(pc.is_null(left), pc.is_null(right)))


def _count(mask) -> int:
    """How many rows ``mask`` (Arrow's, or numpy's) holds for."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(mask, np.ndarray):
        return int(np.count_nonzero(mask))
    return pc.sum(pc.cast(pc.fill_null(mask, False), pa.int64())).as_py() or 0


def counted(after, made, undone, config: TopicConfig, now_ms: int, dirty_from: int, log_start_after: int,
            outside: dict, scope_of: Callable[[dict], Scope]):
    """The violations of a compaction per guarantee, the data's bounds and the scope they
    give, from the after version's records in scope and the change's (Arrow tables of
    :data:`RECORD_COLUMNS`; ``outside``: what ``bounds.scoped_numbers`` reads outside them,
    U being the pairing's: every young record of the before version lies at or above
    ``dirty_from``); None where Spark must count."""
    import pyarrow.compute as pc

    prepared = _prepared([after, made, undone], config)
    if prepared is None:
        return None
    after, made, undone = prepared
    before_side = _netted([(after, 1), (undone, 1), (made, -1)])
    after_side = _netted([(after, 1)])
    pairs = _paired(before_side, after_side)
    if pairs is None:
        return None
    nb, na = pc.fill_null(pairs["_n_b"], 0), pc.fill_null(pairs["_n_a"], 0)
    offset = pairs["offset"]
    in_b, in_a = pc.greater(nb, 0), pc.greater(na, 0)
    removed, added = pc.and_(in_b, pc.invert(in_a)), pc.and_(in_a, pc.invert(in_b))
    young = cleaner.uncleanable_after_ms(now_ms, config)
    young_before = pc.and_(pc.and_(in_b, pc.greater_equal(offset, dirty_from)),
                           pc.fill_null(pc.greater(pairs["timestamp_b"], young), False))
    gone = pairs.select(["offset", "_size_b"]).filter(removed)
    highest = pc.max(gone["offset"]).as_py()
    changed = {
        "highest_removed": None if highest is None else {
            "offset": highest, "size": gone.filter(pc.equal(gone["offset"], highest))["_size_b"][0].as_py()},
        "removed": _count(removed), "added": _count(added),
        "u_before": pc.min(offset.filter(young_before)).as_py(),
        "removed_from_start": pc.sum(gone.filter(pc.greater_equal(gone["offset"], log_start_after))["_size_b"]).as_py()
        or 0,
    }
    data_bounds = scoped_bounds.scoped_finished(outside, changed)
    scope = scope_of(data_bounds)
    return _judged(pairs, in_b, in_a, scope, config), data_bounds, scope


def counted_whole(before, after, config: TopicConfig, now_ms: int, log_start_after: int,
                  scope_of: Callable[[dict], Scope]):
    """The violations of a retention (or of ``validate``: ``scope_of`` says which) per
    guarantee, the bounds and the scope they give, from
    both whole versions' records (Arrow tables of :data:`RECORD_COLUMNS`), as Spark pairs a
    small partition's versions (``bounds.bounds_aggregates``); None where Spark must count."""
    import pyarrow.compute as pc

    prepared = _prepared([before, after], config)
    if prepared is None:
        return None
    pairs = _paired(_netted([(prepared[0], 1)]), _netted([(prepared[1], 1)]))
    if pairs is None:
        return None
    nb, na = pc.fill_null(pairs["_n_b"], 0), pc.fill_null(pairs["_n_a"], 0)
    offset = pairs["offset"]
    in_b, in_a = pc.greater(nb, 0), pc.greater(na, 0)
    removed = pc.and_(in_b, pc.invert(in_a))
    young = cleaner.uncleanable_after_ms(now_ms, config)

    def first(where, timestamp, bound, newer=pc.greater):
        return pc.min(offset.filter(pc.and_(where, pc.fill_null(newer(pairs[timestamp], bound), False)))).as_py()

    gone = pairs.select(["offset", "_size_b"]).filter(removed)
    highest = pc.max(gone["offset"]).as_py()
    kept = pairs.filter(pc.and_(pc.and_(in_b, in_a), pc.greater_equal(offset, log_start_after)))
    data_bounds = scoped_bounds.finished_bounds({
        "u_before": first(in_b, "timestamp_b", young), "u_after": first(in_a, "timestamp_a", young),
        # time retention keeps every record from the first one at most retention.ms old
        "time_boundary": first(in_b, "timestamp_b", now_ms - config.retention_ms, pc.greater_equal)
        if config.delete and config.retention_ms >= 0 else None,
        "kept_bytes": pc.sum(kept["_size_b"]).as_py() or 0,
        "records_before": _count(in_b), "records_after": _count(in_a),
        "highest_removed": None if highest is None else {
            "offset": highest, "size": gone.filter(pc.equal(gone["offset"], highest))["_size_b"][0].as_py()},
        "removed": _count(removed), "added": _count(pc.and_(in_a, pc.invert(in_b))),
    })
    scope = scope_of(data_bounds)
    return _judged(pairs, in_b, in_a, scope, config), data_bounds, scope


def _judged(pairs, in_b, in_a, scope: Scope, config: TopicConfig) -> dict[str, int]:
    """The violations per guarantee the stage's check judges (none counted zero)."""
    checked = STAGE_GUARANTEES[scope.mode]
    counts: dict[str, int] = {}
    for code, mask in (*_offset_rules(pairs, in_b, in_a, scope, config), *_key_rules(pairs, in_b, in_a, scope)):
        if code in checked:
            counts[code] = counts.get(code, 0) + _count(mask)
    return {code: n for code, n in counts.items() if n}


def _offset_rules(pairs, in_b, in_a, scope: Scope, config: TopicConfig):
    """``rules._offset_rules`` of a compaction or retention stage, or of ``validate``:
    (guarantee, the offsets the rule holds for)."""
    import pyarrow.compute as pc

    offset, na = pairs["offset"], pc.fill_null(pairs["_n_a"], 0)
    both = pc.and_(in_b, in_a)
    says = [pc.invert(_same(pairs[f"{c}_b"], pairs[f"{c}_a"])) for c in ("timestamp", "key", "value", "_headers")]
    changed = pc.and_(both, pc.or_(pc.or_(says[0], says[1]), pc.or_(says[2], says[3])))
    horizon_b, horizon_a = pairs["_delete_horizon_b"], pairs["_delete_horizon_a"]
    horizon_moved = pc.and_(both, pc.invert(_same(horizon_b, horizon_a)))
    below = pc.less(offset, scope.checkpoint_after)
    yield "G1", pc.greater(na, 1)
    yield "G1", changed
    yield "G1", pc.and_(pc.and_(in_a, pc.invert(in_b)), pc.less(offset, scope.log_end_before))
    yield "G1", pc.and_(in_a, pc.greater_equal(offset, scope.log_end_after))
    if scope.mode == "compact":
        stamp = cleaner.delete_horizon_ms(scope.now_ms, config)
        head = pc.and_(in_b, pc.and_(pc.greater_equal(offset, scope.head_start),
                                     pc.less(offset, scope.log_end_before)))
        fresh_stamp = pc.and_(pc.and_(pc.is_null(horizon_b), pc.is_null(pairs["value_b"])),
                              pc.fill_null(pc.equal(horizon_a, stamp), False))
        yield "G2", pc.and_(head, pc.invert(in_a))
        yield "G2", pc.and_(pc.and_(head, in_a), pc.or_(changed, horizon_moved))
        yield "G7", pc.and_(pc.and_(pc.less(offset, scope.head_start), horizon_moved), pc.invert(fresh_stamp))
    if scope.mode in ("retain", "delete_records"):
        start = scope.log_start_after
        removed = pc.and_(in_b, pc.invert(in_a))
        yield "G8", pc.and_(removed, pc.greater_equal(offset, start))
        yield "G8", pc.and_(both, pc.less(offset, start))
        yield "G1", horizon_moved
        if not scope.consumed_explained:
            yield "G8", pc.and_(pc.and_(removed, pc.greater_equal(offset, scope.smallest_committed)),
                                pc.less(offset, start))
    if scope.mode == "validate" and scope.appends_only:
        yield "G1", pc.and_(pc.and_(in_b, pc.invert(in_a)), pc.greater_equal(offset, scope.log_start_after))
        yield "G1", horizon_moved
    if config.compact and scope.max_lag_end is not None:
        deadline = scope.now_ms - config.max_compaction_lag_ms
        lagging = pc.and_(pc.greater_equal(offset, scope.checkpoint_after), pc.less(offset, scope.max_lag_end))
        yield "G6", pc.and_(pc.and_(in_a, lagging), pc.less(pairs["timestamp_a"], deadline))
    if config.compact:
        tombstone = pc.and_(pc.is_null(pairs["value_a"]), pc.is_null(horizon_a))
        yield "G7", pc.and_(pc.and_(in_a, below), tombstone)


def _key_rows(pairs, in_b, in_a):
    """The pairing unfolded: a row per offset and side (``_side``: 0 before, 1 after), with
    its key's group number (``_group``; keyless rows one group, the last)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    columns = ["key", "_rank", "value", "_delete_horizon"]
    sides = []
    for side, present in ((0, in_b), (1, in_a)):
        suffix = "_b" if side == 0 else "_a"
        rows = pairs.select(["offset", "_n_a", *(c + suffix for c in columns)]).filter(present)
        table = pa.table({"offset": rows["offset"], **{c: rows[c + suffix] for c in columns},
                          "_side": pa.array([side] * rows.num_rows, pa.int8()),
                          "_removed": (pc.equal(pc.fill_null(rows["_n_a"], 0), 0) if side == 0
                                       else pa.array([False] * rows.num_rows))})
        sides.append(table)
    rows = pa.concat_tables(sides, promote_options="permissive").combine_chunks()
    encoded = pc.dictionary_encode(rows["key"]).combine_chunks()
    keyless = len(encoded.dictionary)
    group = pc.fill_null(encoded.indices, keyless).cast(pa.int64())
    return rows.append_column("_group", group), keyless + 1


def _per_group(groups: int, group, mask, values):
    """The largest of ``values`` where ``mask`` holds, per group (-1: none; ranks are not negative)."""
    import numpy as np

    found = np.full(groups, -1, dtype=np.int64)
    np.maximum.at(found, group[mask], values[mask])
    return found


def _key_rules(pairs, in_b, in_a, scope: Scope):
    """``rules._key_rules`` of a compaction or retention stage, or of ``validate``: (guarantee,
    the key rows the rule holds for), each key's numbers computed per group number and
    spread back to its rows."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    rows, groups = _key_rows(pairs, in_b, in_a)

    def numpy(column):
        return rows[column].to_numpy(zero_copy_only=False)

    group, offset, rank, side = numpy("_group"), numpy("offset"), numpy("_rank"), numpy("_side")
    tombstone = pc.is_null(rows["value"]).to_numpy(zero_copy_only=False)
    horizon = rows["_delete_horizon"]
    is_b, is_a = side == 0, side == 1
    below = offset < scope.checkpoint_after
    clean_after = is_a & below
    keyed = group != groups - 1
    # a compaction's survivor must be the winner among the records the run looked at (the
    # before version below the new checkpoint); a retention's, among the after version's
    candidates = (is_b if scope.mode == "compact" else is_a) & below
    win = _per_group(groups, group, candidates, rank)[group]
    clean = np.bincount(group, weights=clean_after, minlength=groups)[group]
    yield "G3", clean_after & keyed & (clean > 1)
    yield "G4", clean_after & ~keyed
    yield "G4", clean_after & keyed & ((win < 0) | (rank != win))
    if scope.mode != "compact":
        return
    expired_rows = (is_b & tombstone & (offset < scope.head_start)
                    & pc.fill_null(pc.less_equal(horizon, scope.now_ms), False).to_numpy(zero_copy_only=False))
    final_b = _per_group(groups, group, is_b, rank)
    final_a = _per_group(groups, group, is_a & (offset < scope.log_end_before), rank)
    expired = np.bincount(group, weights=expired_rows, minlength=groups) > 0
    # each key's final records' values: the row of its side whose rank is the side's final one
    values = []
    for final, side_rows in ((final_b, is_b), (final_a, is_a)):
        where = np.full(groups, -1, dtype=np.int64)
        chosen = side_rows & (rank == final[group])
        where[group[chosen]] = np.flatnonzero(chosen)
        values.append(rows["value"].take(pa.array(where, mask=where < 0)))
    moved = pc.invert(_same(*values)).to_numpy(zero_copy_only=False)[group]
    final_b, final_a = final_b[group], final_a[group]
    speaks = (is_b & (rank == final_b)) | ((final_b < 0) & is_a & (rank == final_a))
    yield "G5", speaks & keyed & ~expired[group] & moved
    waiting = pc.or_(pc.is_null(horizon), pc.fill_null(pc.greater(horizon, scope.now_ms), False))
    yield "G7", (is_b & tombstone & numpy("_removed") & (offset < scope.head_start) & (win >= 0) & (rank == win)
                 & waiting.to_numpy(zero_copy_only=False))
