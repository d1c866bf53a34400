"""A compaction's actions decided by Arrow in the driver, from a local version's files.

:func:`framework.stages.compaction.compaction_actions` decides a run in Spark SQL: one job
reads the dirty section and the clean section's keys and offsets, joins them by key and
ranks each key's records in a window, and a second counts the run's totals. On a local
table whose version is its files
(``version_checksum.plain_files``), the same frame is read here by Arrow, a file per core
at once: the dirty section ``[C, U)`` whole, and of each clean file only its records of the
dirty section's keys and its tombstones (the records with a horizon).
Each key's winner is the record of the largest ``cleaner.rules.winner_rank``, as
``cleaner.arrow_ranks`` ranks the frame's records in columns (the header strategy's
version parsed record by record; the frame holds at most the dirty section, as many clean
records, and the clean tombstones). Each record's fate is ``compaction_actions``' CASE in
Arrow's compute functions; ``tests/test_compaction_actions.py`` pins the two deciders to
the same actions on the same versions, for every strategy.

A clean file of ``key_index.MIN_ROWS`` records or more with a key index
(``framework/log/key_index.py``) is not read for its keys: the dirty keys are looked up in
the index, which gives their rows and offsets, and only the file's horizon, size and rank
columns are read (:func:`_looked_up`). On a table with deletion vectors on, whose clean
files outlive the runs, the index is built the first time the file is read whole
(:func:`_read_clean`). ``tests/test_key_index.py`` pins the decision through the index to
the decision made by reading every key, run after run.

The decided actions reach Arrow's rewrite as they are (:func:`changes`); the DataFrame a
MERGE or Spark's writer reads is made only when one of them runs (:func:`decide`).

Spark decides instead (None here) where the version is not local plain files, the dirty
section holds more than :data:`MAX_DIRTY` records (the frame is held in the driver, and the
header strategy's versions are parsed record by record), or a file's columns are not what
a partition table writes.

``jobs/benchmark.py --only compaction`` (stop 95, two runs, 50k updates): a compaction
decided here took 0.44 and 0.45 x its time decided by Spark's query over 500k clean
records (1.64 s against 3.75 s, 1.85 s against 4.09 s), 0.86 and 0.85 x over 5M (6.32 s
against 7.31 s, 6.52 s against 7.64 s), where rewriting the touched files is most of it.
"""

from __future__ import annotations

from framework.cleaner import arrow_ranks
from framework.cleaner import rules as cleaner
from framework.log import deletion_vectors, key_index, local_records, version_checksum
from framework.spec import TopicConfig
from framework.stages.compaction import DELETE, KEEP, STAMP

__all__ = ["MAX_DIRTY", "by_reason", "changes", "decide", "decided", "totals"]

#: Above this many dirty records Spark decides: the frame is held in the driver's memory, and
#: the header strategy parses each record's version in Python (about a microsecond a record).
MAX_DIRTY = 500_000
#: The columns each strategy's rank reads, beside the offset.
_RANK_COLUMNS = {"offset": [], "timestamp": ["timestamp"], "header": ["headers"]}


def _schema():
    """The actions' columns, as ``compaction_actions`` gives them with the record's file
    carried (``_horizon_ms``: :func:`_frame` makes it the ``_horizon`` timestamp)."""
    import pyarrow as pa

    return pa.schema([("offset", pa.int64()), ("_size", pa.int64()), ("_file", pa.string()), ("_action", pa.string()),
                      ("_reason", pa.string()), ("_horizon_ms", pa.int64()), ("_row", pa.int64())])


def decide(log, plan, cleanable_end: int):
    """``plan``'s actions up to ``cleanable_end`` (U, or less after a roll) decided by Arrow,
    for ``compaction.execute``, or None where Spark decides: the actions (a local relation,
    made when first asked for), their totals counted here, and the changes (:func:`changes`)."""
    import functools

    from framework.stages.compaction_batch import DecidedActions

    actions = decided(log, plan, cleanable_end, build_indexes=True)
    if actions is None:
        return None
    # a local relation costs a round trip to the JVM (0.4 to 0.9 s in a new process at
    # 100k actions): made only for a MERGE or Spark's writer
    frame = functools.cache(lambda: _frame(log.spark, actions))
    return DecidedActions(plan, frame, totals(actions), changes=changes(actions))


def changes(actions):
    """The records ``actions`` (what :func:`decided` gives) deletes or stamps, as the rewrite
    marks them (``arrow_rewrite.marks_of``) and as Spark gives them from :func:`_frame`:
    offset, _action, and _horizon, the new delete horizon as a timestamp."""
    import pyarrow as pa
    import pyarrow.compute as pc

    changed = actions.filter(pc.is_in(actions["_action"], value_set=pa.array([DELETE, STAMP])))
    return pa.table({"offset": changed["offset"], "_action": changed["_action"],
                     "_horizon": changed["_horizon_ms"].cast(pa.timestamp("ms", "UTC")),
                     "_file": changed["_file"], "_row": changed["_row"]})


def totals(actions) -> dict:
    """:data:`compaction.TOTALS` of ``actions`` (what :func:`decided` gives), as Spark's
    query counts them (a ``sum`` of nothing is None)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    action, reason = actions["_action"], actions["_reason"]
    deleted, stamped = pc.equal(action, DELETE), pc.equal(action, STAMP)
    with_horizon = pc.is_in(action, value_set=pa.array([STAMP, KEEP]))

    def count(mask) -> int:
        return pc.sum(pc.cast(mask, pa.int64())).as_py() or 0

    return {"removed": count(deleted), "removed_bytes": pc.sum(actions["_size"].filter(deleted)).as_py(),
            "superseded": count(pc.equal(reason, "superseded")), "keyless": count(pc.equal(reason, "keyless")),
            "expired": count(pc.equal(reason, "tombstone_expired")), "stamped": count(stamped),
            "tombstones": count(with_horizon),
            "min_horizon": pc.min(actions["_horizon_ms"].filter(with_horizon)).as_py(),
            "touched_files": sorted(set(actions["_file"].filter(pc.or_(deleted, stamped)).to_pylist()) - {None})}


def by_reason(actions) -> dict[str, dict[str, int]]:
    """The records and bytes of ``actions`` (what :func:`decided` gives) by their reason,
    as ``plan`` reports what a run would remove and keep."""
    counted = actions.group_by("_reason").aggregate([("_reason", "count"), ("_size", "sum")])
    return {row["_reason"]: {"records": row["_reason_count"], "bytes": row["_size_sum"] or 0}
            for row in counted.to_pylist()}


def decided(log, plan, cleanable_end: int, build_indexes: bool = False):
    """``compaction_actions`` of ``plan``'s version up to ``cleanable_end`` with the records'
    files carried, as an Arrow table of :func:`_schema`; None where Spark decides (the
    module's text). With ``build_indexes`` (a run's decision; ``topiclake plan`` writes
    nothing) the large clean files' key indexes are built where they are missing."""
    import pyarrow as pa
    import pyarrow.compute as pc

    measured, config, now_ms = plan.measure, log.spec.config, plan.now_ms
    # (the measure's dirty section [C, U) holds every record read as dirty here)
    files = (None if measured.dirty_records > MAX_DIRTY
             else version_checksum.plain_files(log.path, plan.snapshot.version, deletion_vectors=True))
    if files is None:
        return None
    checkpoint, log_start_offset = measured.checkpoint, measured.log_start_offset
    clean_end = min(checkpoint, cleanable_end)
    names = ["offset", "key", "_delete_horizon", "_size", *_RANK_COLUMNS[config.compaction_strategy]]

    def in_dirty(rows):
        return pc.and_(pc.greater_equal(rows["offset"], clean_end), pc.less(rows["offset"], cleanable_end))

    try:
        dirty = _read(version_checksum.holding_offsets(files, clean_end, cleanable_end), [*names, "value"], in_dirty)
        if dirty is None:
            return None
        frame = [part.append_column("_tomb", pc.is_null(part["value"])).drop_columns(["value"]) for part in dirty]
        dirty_rows = pa.concat_tables(frame, promote_options="permissive") if frame else None
        if clean_end > log_start_offset:
            # a clean record may lose only to a dirty record of its key; a clean tombstone may expire
            keys = (pc.unique(dirty_rows["key"].drop_null())
                    if dirty_rows is not None and clean_end < cleanable_end else None)

            clean = _read_clean(version_checksum.holding_offsets(files, None, clean_end), names, keys, clean_end,
                                build_indexes)
            if clean is None:
                return None
            frame += [part.append_column("_tomb", pc.is_valid(part["_delete_horizon"])) for part in clean]
        if not frame:
            return _schema().empty_table()
        rows = pa.concat_tables(frame, promote_options="permissive").combine_chunks()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None  # columns of types no partition table writes: Spark says what they are
    return _fates(rows, config, now_ms)


def below(files: version_checksum.PlainFiles, new_start: int):
    """The records of ``files`` below ``new_start`` as :func:`changes` gives them, each
    deleted: what a retention cut there deletes, for ``compaction_vectors.commit_locally``.
    None when a file's columns are not what a partition table writes, or its deletion
    vector is not read here."""
    import pyarrow as pa
    import pyarrow.compute as pc

    tables = _read(files, ["offset"], lambda table: pc.less(table["offset"], int(new_start)))
    if tables is None:
        return None
    rows = pa.concat_tables([pa.table({"offset": pa.array([], pa.int64()), "_row": pa.array([], pa.int64()),
                                       "_file": pa.array([], pa.string())}), *tables], promote_options="permissive")
    return pa.table({"offset": rows["offset"], "_action": pa.array([DELETE] * rows.num_rows, pa.string()),
                     "_horizon": pa.nulls(rows.num_rows, pa.timestamp("ms", "UTC")),
                     "_file": rows["_file"], "_row": rows["_row"]})


def _read(files: version_checksum.PlainFiles, names: list[str], keep) -> list | None:
    """The ``names`` columns of the rows of ``files`` that ``keep`` marks and no deletion
    vector hides, a table a file (a file per core at once; :func:`_read_file`); None when a
    file's columns are not what a partition table writes, or its deletion vector is not
    read here."""
    return local_records.each_file(list(zip(files.paths, files.adds, strict=True)),
                                   lambda file: _read_file(files, file, names, keep))


def _read_file(files: version_checksum.PlainFiles, file: tuple, names: list[str], keep, indexed: bool = False):
    """Of one of ``files`` (a ``(path, add)`` pair), the ``names`` columns of the rows that
    ``keep`` marks and no deletion vector hides, each with its index in the file (``_row``,
    what a deletion vector names) and its file's name (``_file``), timestamps as epoch
    milliseconds; None when its columns are not what a partition table writes, or its
    deletion vector is not read here. With ``indexed``, the file's key index is built from
    the keys read (``key_index.build``)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    path, add = file
    tables = local_records.columns(files.only([file]), names)
    hidden = deletion_vectors.hidden_rows(files.folder, add.get("deletionVector"))
    if tables is None or hidden is None:
        return None
    table = tables[0]
    if indexed:
        key_index.build(files.folder, path, add.get("size"), table["key"], table["offset"])
    wanted = keep(table)
    if hidden:
        wanted = pc.and_(wanted, pa.array(deletion_vectors.visible(hidden, table.num_rows)))
    rows = table.filter(wanted).append_column("_row", pc.indices_nonzero(wanted).cast(pa.int64()))
    return _named(rows, path)


def _named(rows, path: str):
    """``rows`` with their file's name (``_file``)."""
    import pyarrow as pa

    return rows.append_column("_file", pa.array([version_checksum.file_name(path)] * rows.num_rows, pa.string()))


def _read_clean(files: version_checksum.PlainFiles, names: list[str], keys, clean_end: int,
                build_indexes: bool) -> list | None:
    """What :func:`_read` gives of the clean section's ``files``: their records below
    ``clean_end`` whose key is one of ``keys`` (an Arrow array; None for none) and their
    tombstones (a horizon set). A file of ``key_index.MIN_ROWS`` records or more is looked
    up in its key index (:func:`_looked_up`) when it has one; with ``build_indexes``, on a
    table with deletion vectors on (its files outlive the runs), one is built as the file
    is read."""
    import pyarrow.compute as pc

    def wanted(rows):
        tombstone = pc.is_valid(rows["_delete_horizon"])
        touched = tombstone if keys is None else pc.or_(pc.is_in(rows["key"], value_set=keys), tombstone)
        return pc.and_(pc.less(rows["offset"], clean_end), touched)

    build_indexes = (build_indexes and deletion_vectors.turned_on(files.configuration)
                     and key_index.turned_on(files.configuration))

    def read(file):
        path, add = file
        index = key_index.of_file(files.folder, path, add, files.configuration)
        if index is None:
            return _read_file(files, file, names, wanted, indexed=build_indexes and key_index.large(add))
        looked_up = _looked_up(files, file, names, index, keys, clean_end)
        return looked_up if looked_up is not None else _read_file(files, file, names, wanted)

    return local_records.each_file(list(zip(files.paths, files.adds, strict=True)), read)


def _looked_up(files: version_checksum.PlainFiles, file: tuple, names: list[str], index, keys, clean_end: int):
    """:func:`_read_file` of a clean file with a key index: the rows of ``keys`` found in
    the index and the tombstones found by the horizon column, their keys and offsets taken
    from the index and their other columns read (the key column, most of the read, is not).
    None when a column is not what a partition table writes or the deletion vector is not
    read here."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    path, add = file
    table = local_records.file_columns(path, [name for name in names if name not in ("key", "offset")])
    hidden = deletion_vectors.hidden_rows(files.folder, add.get("deletionVector"))
    if table is None or hidden is None:
        return None
    matched = index.rows_of(keys) if keys is not None else np.empty(0, np.int64)
    tombstones = np.flatnonzero(pc.is_valid(table["_delete_horizon"]).to_numpy(zero_copy_only=False))
    rows = np.union1d(matched, tombstones).astype(np.int64)
    rows = rows[index.offsets_at(rows) < clean_end]
    if hidden:
        rows = rows[deletion_vectors.visible(hidden, table.num_rows)[rows]]
    taken = table.take(pa.array(rows))
    found = {"key": index.keys_at(rows), "offset": pa.array(index.offsets_at(rows), pa.int64())}
    columns = {name: found[name] if name in found else taken[name] for name in names}
    return _named(pa.table({**columns, "_row": pa.array(rows, pa.int64())}), path)


def _fates(rows, config: TopicConfig, now_ms: int):
    """``compaction_actions``' fate of each record of ``rows`` (what it reads, with ``_tomb``
    and ``_file``): the records it changes or keeps a horizon for, as :func:`_schema`;
    None when Spark must rank them (:func:`_losers`)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    loses = _losers(rows, config)
    if loses is None:
        return None
    horizon = rows["_delete_horizon"]
    tomb = rows["_tomb"]
    has_horizon = pc.is_valid(horizon)
    keyless = pc.is_null(rows["key"])
    expired = pc.and_(pc.and_(tomb, has_horizon), pc.fill_null(pc.less_equal(horizon, int(now_ms)), False))
    first_kept = pc.and_(tomb, pc.invert(has_horizon))
    deleted = pc.or_(pc.or_(keyless, loses), expired)
    action = pc.case_when(pc.make_struct(deleted, first_kept, has_horizon), DELETE, STAMP, KEEP)
    reason = pc.case_when(pc.make_struct(keyless, loses, expired, first_kept, has_horizon),
                          "keyless", "superseded", "tombstone_expired", "tombstone_kept", "tombstone_waiting")
    stamp = pa.scalar(cleaner.delete_horizon_ms(now_ms, config), pa.int64())
    new_horizon = pc.if_else(first_kept, stamp, horizon)
    decided = pa.table({"offset": rows["offset"].cast(pa.int64()), "_size": rows["_size"].cast(pa.int64()),
                        "_file": rows["_file"], "_action": action, "_reason": reason, "_horizon_ms": new_horizon,
                        "_row": rows["_row"]},
                       schema=_schema())
    return decided.filter(pc.is_valid(action))


def _losers(rows, config: TopicConfig):
    """Whether each keyed row loses to another row of its key: not the largest
    ``cleaner.arrow_ranks.dense_ranks`` (the KIP-280 rule) among them; None when a
    timestamp the rank needs is missing (Spark ranks it as SQL orders a null)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    ranks = arrow_ranks.dense_ranks(rows, config)
    if ranks is None:
        return None
    best = pa.table({"key": rows["key"], "_rank": ranks}).group_by("key").aggregate([("_rank", "max")])
    top = best["_rank_max"].take(pc.index_in(rows["key"], value_set=best["key"]))
    return pc.and_kleene(pc.is_valid(rows["key"]), pc.not_equal(ranks, top))


def _frame(spark, actions):
    """The actions as the DataFrame ``compaction_actions`` gives with ``_file`` carried: a
    local relation, so the run's totals, changes and MERGE read it with no file scan."""
    return spark.createDataFrame(actions).selectExpr(
        "`offset`", "_size", "_file", "_action", "_reason", "timestamp_millis(_horizon_ms) AS _horizon")
