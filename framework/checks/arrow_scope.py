"""A stage check counted in the driver: the records in scope read by Arrow from the files of
a local table, and judged by ``framework.checks.arrow_rules``, with no Spark job.

A retention check of a small partition reads both whole versions, as Spark pairs them
(``framework.checks.arrow_whole``). A compaction check, any size of
partition, reads the records in scope (``framework.checks.changes``): a small one's check
(the long run's 20-record partitions) costs about 15 ms here against 0.6 s of Spark
queries pairing its whole versions in one task (stop 101).

The scoped check Spark runs reads the change data feed, broadcasts the touched keys and
offsets, scans the after version for the records in scope and nets both versions per offset
in a shuffle: 3.4 to 4.4 s at 500k records, twice the compaction it checks (stop 95). The
same scope is read here as Delta lays it out:

* **The change**: each commit after the before version, from its file in ``_delta_log``:
  its ``cdc`` files when it wrote any, else the rows of the files it added (inserts) and
  removed (deletes) with ``dataChange``, as Delta's change data feed reads it; a file
  removed and added back with another deletion vector gives the rows its new vector hides
  and the old one did not (deletes), and the other way round (inserts), as Delta's
  ``CDCReader`` diffs them (the rows a vector deleted are read without their values where
  the rules need only whether one is null: :func:`_deleted_rows_at`). A commit that
  changed the table's metadata or protocol, a deletion vector not read here, and a commit
  file gone, leave the count to Spark.
* **The touched keys**: those of the change at or above the new log start, and of the
  before version's records at or above the clean end (from the files whose offset
  statistics may hold them).
* **The after version's records in scope**: of each file (a file per core), its offset and
  key columns decide which rows are in scope (less those its deletion vector hides); only
  the row groups holding those are read whole. A file with a key index
  (``framework/log/key_index.py``) is not read for them: its offsets are the index's, and
  the touched keys' rows are looked up; the rows a vector deleted get their keys and
  offsets from it too.

The before version's records in scope are netted from these (``arrow_rules``), and the
bounds outside the pairing are the files' statistics, as Spark's scoped check takes them.
Where a version is not local plain files, where a young record lies below the clean end
(read from the files whose statistics may hold one), where the scope is larger than
:data:`MAX_ROWS`, or where a timestamp has digits below the millisecond, this says
nothing (None) and Spark checks.

``jobs/benchmark.py --only compaction`` (stop 99, 50k updates): the check, judged by Great
Expectations as a run judges it, took 0.50 to 0.60 s against 4.17 to 4.57 s counted by
Spark at 500k records (0.37 to 0.55 x the compaction it checks, three runs), 0.73 to
0.82 s against 5.94 to 7.03 s at 5M (0.12 to 0.20 x).
"""

from __future__ import annotations

import os
from typing import NamedTuple

from framework.checks import arrow_rules, arrow_whole, changes
from framework.checks.scope import stage_scope
from framework.cleaner.rules import uncleanable_after_ms
from framework.log import deletion_vectors, file_stats, key_index, local_records, version_checksum
from framework.log.commit_log import commit_actions

__all__ = ["MAX_ROWS", "counted"]

#: Above this many records in scope (the dirty section, the change, or the after version's
#: records read) Spark counts: they are all held in the driver's memory here.
MAX_ROWS = 500_000
_NAMES = arrow_rules.RECORD_COLUMNS
_MADE, _UNDONE = ("insert", "update_postimage"), ("delete", "update_preimage")


class _Feed(NamedTuple):
    """The files of the change: a path, the change type of all its rows (None: a ``cdc``
    file, whose rows carry their own), and which of its rows (their indexes; None: all)."""

    path: str
    change_type: str | None
    rows: object = None
    #: the file's key index (``key_index.load``), when only some of its rows changed and it has one
    index: object = None


def _feed(path: str, folder: str, version_before: int, version_after: int, configuration) -> list[_Feed] | None:
    """The change data feed's files of the commits after ``version_before`` up to
    ``version_after``, as Delta's change data feed reads them (the module's text), with
    the key index of each file a vector changed, where the table's properties
    (``configuration``) leave indexes on."""
    from urllib.parse import unquote

    found = []
    for version in range(version_before + 1, version_after + 1):
        actions = commit_actions(path, version)
        if actions is None or any("metaData" in action or "protocol" in action for action in actions):
            return None
        cdc = [action["cdc"] for action in actions if "cdc" in action]
        files = [(None, entry) for entry in cdc] if cdc else [
            (kind, action[kind]) for action in actions for kind in ("add", "remove")
            if kind in action and action[kind].get("dataChange", True)]
        for relative in {entry.get("path") for _, entry in files}:
            if not isinstance(relative, str) or "://" in relative or relative.startswith("/"):
                return None
        changed = _vector_changes(folder, files) if not cdc else [(None, entry, None) for _, entry in files]
        if changed is None:
            return None
        for kind, entry, rows in changed:
            file = os.path.join(folder, unquote(entry["path"]))
            index = None if rows is None else key_index.of_file(folder, file, entry, configuration)
            found.append(_Feed(file, kind, rows, index))
    return found


def _vector_changes(folder: str, files: list[tuple[str, dict]]) -> list[tuple[str, dict, object]] | None:
    """A commit's adds and removes as the rows they insert and delete: a file added and
    removed in one commit, one of them with a deletion vector, by the difference of the two
    vectors; any other by its rows no vector of its own hides. None: a vector not read here."""
    by_path: dict[str, dict[str, dict]] = {}
    for kind, entry in files:
        by_path.setdefault(entry["path"], {})[kind] = entry
    changed = []
    for entries in by_path.values():
        hidden = {kind: deletion_vectors.hidden_rows(folder, entry.get("deletionVector"))
                  for kind, entry in entries.items()}
        if None in hidden.values():
            return None
        if len(entries) == 2 and (hidden["add"] or hidden["remove"]):
            changed += [("delete", entries["add"], hidden["add"] - hidden["remove"]),
                        ("insert", entries["add"], hidden["remove"] - hidden["add"])]
            continue
        for kind, entry in entries.items():
            rows = _visible(entry, hidden[kind])
            if rows is False:
                return None
            changed.append(("insert" if kind == "add" else "delete", entry, rows))
    return [(kind, entry, rows) for kind, entry, rows in changed if rows is None or len(rows)]


def _visible(entry: dict, hidden):
    """The rows of a file no deletion vector ``hidden`` hides (None: all of them; False: the
    file's statistics do not say how many rows it has)."""
    from pyroaring import BitMap64

    if not hidden:
        return None
    records = file_stats.of(entry).records
    if records is None:
        return False
    every = BitMap64()
    every.add_range(0, records)
    return every - hidden


def _in_scope(path: str, by_offset, keys, hidden=None, index=None):
    """The rows of the file at ``path`` whose offset ``by_offset`` marks (a mask of an
    offset column) or whose key is one of ``keys`` (None: none), and that no deletion
    vector (``hidden``) hides, reading whole only the row groups that hold them; the
    offsets and keys from the file's key index when it has one (``index``), else from its
    columns. None: not a partition table's."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    parquet = local_records.opened(path)
    if index is not None:
        marked = by_offset(pa.array(index.offsets)).to_numpy(zero_copy_only=False, writable=True)
        if keys is not None:
            marked[index.rows_of(keys)] = True
    else:
        narrow = local_records.file_columns(parquet, ["offset", "key"])
        if narrow is None:
            return None
        mask = by_offset(narrow["offset"])
        if keys is not None:
            mask = pc.or_(mask, pc.fill_null(pc.is_in(narrow["key"], value_set=keys.cast(narrow["key"].type)), False))
        marked = mask.to_numpy(zero_copy_only=False)
    if hidden:
        marked = marked & deletion_vectors.visible(hidden, len(marked))
    return _rows_at(parquet, np.flatnonzero(marked))


def _rows_at(parquet, picked, names=_NAMES):
    """The rows at indexes ``picked`` (sorted) of the ``parquet`` file, in their order,
    reading whole only the row groups that hold them; None: not a partition table's."""
    if not len(picked):
        return local_records.file_columns(parquet, names, row_groups=[], whole_ms=True)
    groups, places = local_records.row_groups_holding(parquet, picked)
    rows = local_records.file_columns(parquet, names, row_groups=groups, whole_ms=True)
    return None if rows is None else rows.take(places)


def _young_below(files, dirty_from: int, young: int) -> bool:
    """Whether a record of ``files`` (a version's) below ``dirty_from`` is newer than
    ``young`` (then U lies below the clean end, outside the pairing). Only the files whose
    statistics may hold one are read, their offsets and timestamps less the rows a
    deletion vector hides: a file across the clean end has young records above it and
    old ones below, as a first run over fresh records leaves it. Also True where such a
    file is not read here, or they hold more than :data:`MAX_ROWS` records."""
    import pyarrow.compute as pc

    suspects = [(path, add) for path, add in zip(files.paths, files.adds, strict=True)
                if file_stats.may_hold_newer([file_stats.of(add)], dirty_from, young)]
    if not suspects:
        return False
    if (sum(file_stats.of(add).records or MAX_ROWS + 1 for _, add in suspects) > MAX_ROWS
            or not all(os.path.isfile(path) for path, _ in suspects)):
        return True
    tables = local_records.each_file(suspects, lambda file: local_records.visible_file_columns(
        files.folder, *file, ["offset", "timestamp"]))
    return tables is None or any(
        pc.any(pc.and_(pc.less(table["offset"], dirty_from), pc.greater(table["timestamp"], young))).as_py()
        for table in tables)


def _listed(files):
    """A version's files (``plain_files``' answer) as their paths and the rows each one's
    deletion vector hides (None: one not read here)."""
    return list(files.paths), [deletion_vectors.hidden_rows(files.folder, add.get("deletionVector"))
                               for add in files.adds]


def _feed_rows(entry: _Feed, made=None):
    """The rows of a file of the change (:func:`_feed`), its columns read only from the row
    groups holding them when only some rows changed. Rows a deletion vector deleted
    (``made``: the offsets the change makes) are read without their values where that
    says all it needs (:func:`_deleted_rows_at`)."""
    names = [*_NAMES, *(["_change_type"] if entry.change_type is None else [])]
    if entry.rows is None:
        return local_records.file_columns(entry.path, names, whole_ms=True)
    picked = deletion_vectors.indexes(entry.rows)
    parquet = local_records.opened(entry.path)
    return _rows_at(parquet, picked) if made is None else _deleted_rows_at(parquet, picked, made, entry.index)


def _deleted_rows_at(parquet, picked, made, index=None):
    """:func:`_rows_at` of rows a deletion vector deleted, their ``value`` read only where
    the rules look at more than whether it is null: where the change makes another record
    at the offset (``made``), the pairing compares the two. Elsewhere a row group whose
    column statistics count no null value holds no tombstone, and each row's value is
    given as an empty one (the rules ask only whether it is null); the value column, most
    of a file's bytes, is then not decoded, nor the key column where the file's key index
    (``index``) gives the keys and offsets."""
    import pyarrow as pa
    import pyarrow.compute as pc

    metadata = parquet.metadata
    groups, _ = local_records.row_groups_holding(parquet, picked)
    at = parquet.schema_arrow.get_field_index("value")
    leaves = [parquet.schema.column(i).path for i in range(len(parquet.schema))]
    column = leaves.index("value") if "value" in leaves else -1

    def no_nulls(group: int) -> bool:
        chunk = metadata.row_group(group).column(column)
        return chunk.is_stats_set and chunk.statistics.has_null_count and chunk.statistics.null_count == 0

    if at < 0 or column < 0 or not all(no_nulls(g) for g in groups):
        return _rows_at(parquet, picked)
    names = [name for name in _NAMES if name != "value"]
    if index is None:
        rows = _rows_at(parquet, picked, names)
    else:
        rest = _rows_at(parquet, picked, [name for name in names if name not in ("key", "offset")])
        # (each column with the file's own field: its offset is NOT NULL)
        rows = None if rest is None else rest.append_column(
            parquet.schema_arrow.field("offset"), pa.array(index.offsets_at(picked), pa.int64())).append_column(
            parquet.schema_arrow.field("key"), index.keys_at(picked).cast(parquet.schema_arrow.field("key").type)
        ).select(names)
    if rows is None or pc.any(pc.is_in(rows["offset"], value_set=made)).as_py():
        return _rows_at(parquet, picked)
    kind = parquet.schema_arrow.field(at).type
    empty = pa.array([b""], pa.binary()).cast(kind) if pa.types.is_binary(kind) else pa.array([""]).cast(kind)
    return rows.append_column("value", pa.repeat(empty[0], rows.num_rows)).select(_NAMES)


def _change_rows(feed: list[_Feed]) -> list | None:
    """Each file of the change read (:func:`_feed_rows`), in order: first those that make
    records or delete whole files, then the rows deletion vectors deleted, given the
    offsets the others make."""
    import pyarrow as pa
    import pyarrow.compute as pc

    vectored = [entry.rows is not None and entry.change_type == "delete" for entry in feed]
    whole = [entry for entry, by_vector in zip(feed, vectored, strict=True) if not by_vector]
    first = local_records.each_file(whole, _feed_rows)
    if first is None:
        return None
    made = [table.filter(pc.is_in(table["_change_type"] if entry.change_type is None
                                  else pa.array([entry.change_type] * table.num_rows, pa.string()),
                                  value_set=pa.array(_MADE)))["offset"]
            for entry, table in zip(whole, first, strict=True)]
    offsets = pc.unique(_joined(made, pa.int64())) if made else pa.array([], pa.int64())
    second = local_records.each_file([entry for entry, by_vector in zip(feed, vectored, strict=True) if by_vector],
                                     lambda entry: _feed_rows(entry, offsets))
    if second is None:
        return None
    ordered, rest = iter(first), iter(second)
    return [next(rest) if v else next(ordered) for v in vectored]


def _joined(columns: list, kind):
    """``columns`` (chunked arrays) as one array of type ``kind``. Their chunks are passed on:
    ``pa.chunked_array`` given chunked arrays converts them value by value (58 ms for
    100,000 keys, against 0.1 ms)."""
    import pyarrow as pa

    return pa.chunked_array([chunk for column in columns for chunk in column.cast(kind).chunks],
                            type=kind).combine_chunks()


def counted(check, state_after, dirty_from: int | None = None):
    """The stage ``check``'s violations per guarantee, its data's bounds and scope, as
    ``arrow_rules`` counts them from the records read here (a compaction's in scope, from
    ``dirty_from`` on whole: by default ``changes.dirty_from``; a small retention's whole
    versions); None where Spark counts (the module's text), and for any other stage."""
    if check.stage == "compact":
        start = changes.dirty_from("compact", check.state_before) if dirty_from is None else dirty_from
        return _compaction_counted(check, state_after, start)
    if check.stage in ("retain", "delete_records"):
        return arrow_whole.retention_counted(check, state_after)
    return None


def _compaction_counted(check, state_after, dirty_from: int):
    """A compaction check over the records in scope (the module's text)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    log, state_before = check.log, check.state_before
    if state_before.log_end_offset - dirty_from > MAX_ROWS:
        return None
    files = [version_checksum.plain_files(log.path, version, deletion_vectors=True)
             for version in (check.version_before, check.version_after)]
    if None in files or files[0].schema_json != files[1].schema_json:
        return None
    before_files, after_files = files
    after_hidden = _listed(after_files)[1]
    if None in after_hidden:
        return None
    records = [version_checksum.record_count(listed) for listed in files]
    young = uncleanable_after_ms(check.now_ms, log.spec.config)
    if None in records or _young_below(before_files, dirty_from, young):
        return None  # U lies below the clean end: Spark reads it from the before version's files
    feed = _feed(log.path, after_files.folder, check.version_before, check.version_after,
                 after_files.configuration)
    if feed is None or not all(os.path.isfile(path) for path in (*after_files.paths, *(f.path for f in feed))):
        return None
    start = state_after.log_start_offset
    try:
        changes = _change_rows(feed)
        dirty = local_records.each_file(
            list(zip(*_listed(version_checksum.holding_offsets(before_files, dirty_from, None)), strict=True)),
            lambda file: local_records.visible_rows(local_records.file_columns(file[0], ["offset", "key"]), file[1]))
        if changes is None or dirty is None:
            return None
        made, undone, touched_keys, touched_offsets = [], [], [], []
        for entry, table in zip(feed, changes, strict=True):
            kinds = (pa.array([entry.change_type] * table.num_rows, pa.string()) if entry.change_type is not None
                     else table["_change_type"])
            made.append(table.filter(pc.is_in(kinds, value_set=pa.array(_MADE))).select(_NAMES))
            undone.append(table.filter(pc.is_in(kinds, value_set=pa.array(_UNDONE))).select(_NAMES))
            changed = table.filter(pc.greater_equal(table["offset"], start))
            touched_keys.append(changed["key"])
            touched_offsets.append(changed["offset"])
        touched_keys += [part.filter(pc.greater_equal(part["offset"], dirty_from))["key"] for part in dirty]
        if sum(table.num_rows for table in (*made, *undone)) > MAX_ROWS:
            return None
        keys = pc.unique(_joined(touched_keys, touched_keys[0].type)).drop_null() if touched_keys else None
        offsets = pc.unique(_joined(touched_offsets, pa.int64()))

        def by_offset(offset):
            mask = pc.or_(pc.greater_equal(offset, dirty_from), pc.less(offset, start))
            return pc.or_(mask, pc.is_in(offset, value_set=offsets))

        after = local_records.each_file(
            list(zip(after_files.paths, after_files.adds, after_hidden, strict=True)),
            lambda file: _in_scope(file[0], by_offset, keys, file[2],
                                   key_index.of_file(after_files.folder, file[0], file[1],
                                                     after_files.configuration)))
        if after is None or sum(table.num_rows for table in after) > MAX_ROWS:
            return None
        outside = {"records_before": records[0], "records_after": records[1], "time_boundary": None,
                   "from_start": None}
        schema = (after or changes)[0].select(_NAMES).schema if after or changes else None
        if schema is None:
            return None

        def one(tables):
            return pa.concat_tables([schema.empty_table(), *tables], promote_options="permissive")

        return arrow_rules.counted(
            one(after), one(made), one(undone), log.spec.config, check.now_ms, dirty_from, start, outside,
            lambda bounds: stage_scope(check, state_before, state_after, bounds))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, KeyError, TypeError):
        return None  # columns of types no partition table writes: Spark says what they are
