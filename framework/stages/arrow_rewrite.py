"""A rewrite's files written by Arrow instead of Spark's Parquet writer (local tables).

``file_rewrite.commit`` reads the files a stage touches, keeps, stamps or drops each record
of them, and writes what it keeps with the change data feed's rows beside. Through Delta's
``writeFiles`` that is Spark's Parquet writer, row by row in the JVM: at 5M records of 200
bytes (two files of 370 MB) about 8 s of a compaction's 9.6 s on 2 cores. Arrow decodes,
marks, filters and encodes column by column, a file per thread (it lets go of the GIL):
about 2.5 s for the same files. The records pass through the driver's process
:data:`ROWS_A_BATCH` at a time, each batch a row group of the new file; the touched files
are local files (``version_checksum.plain_files``), so this is the machine Spark would
have used. :func:`write` serves one partition's rewrite,
:func:`staged` a batch of small partitions' (``staged_rewrite``), each written into its
own table, and :func:`packed` a bin-packing group (``optimize``).

What the files hold is what ``writeFiles`` writes of ``file_rewrite.rewritten_rows``: each
record as kept, with its new delete horizon when stamped; with the change data feed on, a
``delete`` row for each dropped record and an ``update_preimage``/``update_postimage`` pair
for each stamped one, in ``_change_data``. So is the layout: a segment's touched files up
to ``one_file_bytes`` become one file in offset order, larger ones a file each, in the
order they hold. The data files carry the table's columns without its partition columns,
in Arrow's form of the table's schema, and Delta's statistics, as a producer's Arrow
append writes them (``arrow_files``). ``tests/test_compaction_rewrite.py``,
``test_retention_rewrite.py``, ``test_compaction_batch.py`` and ``test_optimize.py`` run
each stage with both writers.

Not taken (None, nothing left behind; the caller writes through Spark) when ``arrow_files``
would not write the table's files (a feature, column mapping, invariants, a partition or
statistics column of another type), when a touched file lacks a column of the table, or
when Arrow cannot read a file's column as the table's type.
"""

from __future__ import annotations

import contextlib
import os
from typing import Callable, NamedTuple
from urllib.parse import unquote

from framework.log import arrow_files, file_stats, local_records, version_checksum
from framework.stages.compaction import DELETE, STAMP

__all__ = ["Marks", "marks_of", "packed", "packed_local", "staged", "write", "write_local"]

#: Records a touched file is read, marked and written in at a time: each a row group of
#: the new file (about 20 MB of 200-byte records; DuckDB writes 122,880 rows a group). A
#: whole row group of the old file at a time (Spark's 128 MB) took 3.7 to 7.4 s for the 5M
#: case's two files, each batch fresh memory; these batches, reused, 3.5 to 3.6 s (stop 97).
ROWS_A_BATCH = 131_072

#: Given a batch's offsets, what the stage does to each record: its ``_action`` (DELETE,
#: STAMP or null) and ``_horizon`` (a stamped record's new delete horizon), as Arrow arrays.
Marks = Callable[[object], tuple[object, object]]


def marks_of(changes) -> Marks:
    """:data:`Marks` from the changes a stage decided (an Arrow table of offset, _action,
    _horizon; an offset it leaves alone is not in it)."""
    import pyarrow.compute as pc

    offsets = changes.column("offset").combine_chunks()

    def mark(batch_offsets):
        at = pc.index_in(batch_offsets, value_set=offsets)
        return changes.column("_action").take(at), changes.column("_horizon").take(at)

    return mark


def write(delta, txn, files: version_checksum.PlainFiles, touched: set[str], marks: Callable[[], Marks],
          feed: bool, one_file_bytes: int) -> list[dict] | None:
    """The ``touched`` files of ``files`` (the version ``txn`` reads) rewritten as ``marks``
    (called once, inside the transaction) says, with the change feed's rows when ``feed``:
    the ``add`` and ``cdc`` actions of the files written (dicts as in the Delta log), or None
    when Arrow does not write this table's files (nothing is written)."""
    layout = _layout(delta, txn)
    if layout is None:
        return None
    written = _written(layout, [(files, touched)], lambda: [marks()], feed, one_file_bytes)
    return None if written is None else written[0][0]


def write_local(metadata: dict, codec: str | None, files: version_checksum.PlainFiles, touched: set[str],
                marks: Callable[[], Marks], feed: bool, one_file_bytes: int) -> list[dict] | None:
    """:func:`write` for a rewrite committed without the JVM (``file_rewrite.commit_locally``):
    the table's layout from its version's ``metadata`` (the checksum's, as in the Delta
    log) and the Parquet ``codec`` the caller's session would write (None: one Arrow does
    not write)."""
    layout = _layout_of_metadata(metadata, codec)
    if layout is None:
        return None
    written = _written(layout, [(files, touched)], lambda: [marks()], feed, one_file_bytes)
    return None if written is None else written[0][0]


def staged(delta, txn, members: list[tuple[version_checksum.PlainFiles, frozenset[str]]],
           marks: Callable[[], list[Marks]], feed: bool, one_file_bytes: int) -> list[tuple[list, list]] | None:
    """:func:`write` for a batch of partitions of one layout (``txn`` reads one of them):
    ``members`` are each one's files and the names of those it touches, ``marks`` gives
    each one's :data:`Marks`. Per member, the actions of its files (paths relative to its
    table) and the files (absolute paths), each written in its own table's folder; or None
    (nothing is written)."""
    layout = _layout(delta, txn)
    return None if layout is None else _written(layout, members, marks, feed, one_file_bytes)


def _written(layout, members: list, marks: Callable[[], list[Marks]], feed: bool,
             one_file_bytes: int) -> list[tuple[list, list]] | None:
    import pyarrow as pa

    schema = layout.schema
    jobs = [(place, files.folder, job) for place, (files, touched) in enumerate(members)
            for job in _jobs(files, touched, one_file_bytes)]
    if any(not set(schema.names) <= set(_file_columns(path)) for _, _, (_, paths, _) in jobs for path in paths):
        return None
    each = marks()
    outputs: list[_Output] = []

    def run(job):
        place, folder, piece = job
        return place, _rewrite(folder, *piece, layout, each[place], feed, outputs)

    try:
        done = local_records.each_file(jobs, run)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, _NoStatistics):
        _discard(outputs)
        return None
    except BaseException:
        _discard(outputs)
        raise
    written: list[tuple[list, list]] = [([], []) for _ in members]
    for place, actions in done:
        written[place][0].extend(actions)
        written[place][1].extend(os.path.join(members[place][0].folder, *next(iter(a.values()))["path"].split("/"))
                                 for a in actions)
    return written


def packed(delta, txn, folder: str, adds: list[dict]) -> dict | None:
    """Bin-packing's group ``adds`` (``add`` actions as dicts, of files in the table's local
    ``folder``, of one segment) written as one file in offset order: its ``add`` action, a
    rearrangement (``dataChange`` false), or None, nothing written, when Arrow does not write
    this table's files or the files' offsets are not disjoint stretches. A file at a time is
    read, so a group of small files never sits in memory whole."""
    return _packed(_layout(delta, txn), folder, adds)


def packed_local(metadata: dict, codec: str | None, folder: str, adds: list[dict],
                 tight_bounds: bool = False) -> dict | None:
    """:func:`packed` for a bin-packing without the JVM: the layout from ``metadata`` and
    ``codec``; each file less the rows its deletion vector hides (``tight_bounds``: a table
    with vectors' statistics)."""
    return _packed(_layout_of_metadata(metadata, codec), folder, adds, tight_bounds)


def _packed(layout: _Layout | None, folder: str, adds: list[dict], tight_bounds: bool = False) -> dict | None:
    import pyarrow as pa

    values = [add.get("partitionValues") or {} for add in adds]
    if layout is None or any(value != values[0] for value in values):
        return None
    schema = layout.schema
    firsts = [(file_stats.of(add).min_offset, os.path.join(folder, *unquote(add["path"]).split("/")),
               add.get("deletionVector")) for add in adds]
    paths = sorted((f for f in firsts if f[0] is not None), key=lambda f: f[:2])
    if len(paths) != len(adds) or any(not os.path.isfile(path) or not set(schema.names) <= set(_file_columns(path))
                                      for _, path, _ in paths):
        return None
    output = _Output(folder, values[0], schema, layout.stats_columns, layout.codec, change=False, tight=tight_bounds)
    try:
        highest = None
        for _, path, vector in paths:  # (one file open at a time: a group may hold thousands)
            rows = local_records.visible_file(path, folder, vector, schema.names)
            if rows is None:  # a vector not read here: Delta's route applies it
                _discard([output])
                return None
            rows = rows.cast(schema, safe=False).sort_by("offset")
            if not rows.num_rows:
                continue
            if highest is not None and rows.column("offset")[0].as_py() <= highest:
                _discard([output])  # stretches that interleave: Spark's writer sorts them whole
                return None
            highest = rows.column("offset")[-1].as_py()
            for piece in _slices(rows):
                output.write(piece)
        written = output.close()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, _NoStatistics):
        _discard([output])
        return None
    except BaseException:
        _discard([output])
        raise
    return None if written is None else {**written["add"], "dataChange": False}


class _Layout(NamedTuple):
    """What Arrow writes a table's files as: their schema, statistics columns and codec."""

    schema: object
    stats_columns: list[str]
    codec: str


def _layout(delta, txn) -> _Layout | None:
    """The Arrow schema of the files of the table ``txn`` reads (its columns, no partition
    column), its statistics columns and the session's codec (``arrow_files.session_codec``:
    what Spark's writer would compress them by); None when Arrow does not write its files."""
    metadata = txn.metadata()
    struct = arrow_files.table_struct(txn, metadata)
    codec = arrow_files.session_codec(delta.spark)
    if struct is None or codec is None:
        return None
    named = metadata.configuration().get("delta.dataSkippingStatsColumns")
    return _layout_of(struct, list(delta.items(metadata.partitionColumns())),
                      str(named.get()) if named.isDefined() else None, codec)


def rows_written(metadata: dict, codec: str | None, folder: str, values: dict, read,
                 tight_bounds: bool = False) -> dict | None:
    """``read(schema)`` (the rows, as an Arrow table of the files' ``schema``) written as one
    new data file of the table of ``metadata`` in ``folder`` (partition ``values``): its
    ``add`` action; None, nothing written, when Arrow does not write this table's files."""
    import pyarrow as pa

    layout = _layout_of_metadata(metadata, codec)
    if layout is None:
        return None
    output = _Output(folder, values, layout.schema, layout.stats_columns, layout.codec, False, tight_bounds)
    try:
        output.write(read(layout.schema))
        written = output.close()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, _NoStatistics):
        written = None
    if written is None:
        _discard([output])
    return None if written is None else written["add"]


def _layout_of_metadata(metadata: dict, codec: str | None) -> _Layout | None:
    """The layout of a table of ``metadata`` (a ``metaData`` action as in the Delta log, of
    a table ``own_commits.committable`` takes) written in ``codec`` (None: one Arrow does
    not write)."""
    import json

    from pyspark.sql.types import StructType

    if codec is None:
        return None
    configuration = metadata.get("configuration") or {}
    return _layout_of(StructType.fromJson(json.loads(metadata["schemaString"])),
                      list(metadata.get("partitionColumns") or []),
                      configuration.get("delta.dataSkippingStatsColumns"), codec)


def _layout_of(struct, partition_columns: list[str], named_stats: str | None, codec: str) -> _Layout | None:
    """The layout of a table of schema ``struct`` (a rewritable one: ``table_struct``'s
    checks made), its partition columns, ``delta.dataSkippingStatsColumns`` (``named_stats``)
    and the Parquet ``codec``; None when Arrow does not write its files."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    stats_columns = arrow_files.stats_columns(named_stats, partition_columns)
    schema = pa.schema([f for f in to_arrow_schema(struct) if f.name not in partition_columns])
    if not arrow_files.takes(struct, partition_columns, stats_columns) or not {"offset", "_delete_horizon"} <= set(
            schema.names):
        return None
    return _Layout(schema, stats_columns, codec)


def _jobs(files: version_checksum.PlainFiles, touched: set[str], one_file_bytes: int) -> list[tuple[dict, list, bool]]:
    """The rewrite's pieces of work: (partition values, input paths, whether they become one
    file sorted by offset). A segment's touched files up to ``one_file_bytes`` are one
    piece; larger ones a piece each, in offset order."""
    segments: dict[tuple, list[tuple[str, dict]]] = {}
    for path, add in zip(files.paths, files.adds, strict=True):
        if version_checksum.file_name(add["path"]) in touched:
            values = tuple(sorted((add.get("partitionValues") or {}).items()))
            segments.setdefault(values, []).append((path, add))
    jobs = []
    for values, members in sorted(segments.items()):
        members.sort(key=lambda member: file_stats.of(member[1]).min_offset or 0)
        if sum(int(add["size"]) for _, add in members) <= one_file_bytes:
            jobs.append((dict(values), [path for path, _ in members], True))
        else:
            jobs.extend((dict(values), [path], False) for path, _ in members)
    return jobs


def _file_columns(path: str) -> list[str]:
    """The columns of the file at ``path`` (its footer; read again when the file is
    rewritten: holding every touched file open instead could take thousands of
    descriptors in a batch of small partitions)."""
    import pyarrow.parquet as pq

    return pq.read_schema(path).names


def _rewrite(folder: str, values: dict, paths: list[str], one_file: bool, layout: _Layout, mark: Marks, feed: bool,
             outputs: list) -> list[dict]:
    """One piece of :func:`_jobs`: its files read :data:`ROWS_A_BATCH` records at a time
    (all of them, sorted by offset, then sliced, when ``one_file``), marked, and written;
    the actions of what was written."""
    import pyarrow as pa
    import pyarrow.compute as pc

    schema = layout.schema
    data = _Output(folder, values, schema, layout.stats_columns, layout.codec, change=False)
    change = _Output(folder, values, schema.append(pa.field("_change_type", pa.string())), [], layout.codec,
                     change=True)
    outputs.extend((data, change))

    def batches():
        for path in paths:
            for batch in local_records.opened(path).iter_batches(batch_size=ROWS_A_BATCH, columns=schema.names):
                yield pa.Table.from_batches([batch]).cast(schema, safe=False)

    pieces = _slices(pa.concat_tables(list(batches())).sort_by("offset")) if one_file else batches()
    at = schema.get_field_index("_delete_horizon")
    horizon_type = schema.field(at).type
    for rows in pieces:
        action, horizon = mark(rows.column("offset"))
        deleted = pc.fill_null(pc.equal(action, DELETE), False)
        stamped = pc.fill_null(pc.equal(action, STAMP), False)
        after = rows.set_column(at, schema.field(at),
                                pc.if_else(stamped, pc.cast(horizon, horizon_type), rows.column(at)))
        data.write(after.filter(pc.invert(deleted)))
        if feed:
            # as Delta's commands write the feed: a delete per dropped record, a pre- and a
            # post-image per stamped one, in offset order (the sort is stable: pre before post)
            feed_rows = pa.concat_tables([_typed(rows.filter(deleted), "delete"),
                                          _typed(rows.filter(stamped), "update_preimage"),
                                          _typed(after.filter(stamped), "update_postimage")])
            change.write(feed_rows.sort_by("offset"))
    return [action for action in (data.close(), change.close()) if action is not None]


def _slices(rows):
    """``rows`` :data:`ROWS_A_BATCH` at a time: a file's row groups, so that a reader (a
    check reading the dirty section's records, DuckDB) skips those outside its offsets."""
    return (rows.slice(start, ROWS_A_BATCH) for start in range(0, rows.num_rows, ROWS_A_BATCH))


def _typed(rows, change_type: str):
    import pyarrow as pa

    return rows.append_column("_change_type", pa.array([change_type] * rows.num_rows, pa.string()))


class _NoStatistics(Exception):
    """A bound Delta's statistics cannot hold as Delta writes them."""


class _Output:
    """One file being written: a data file (``add``, with statistics) or a change data file (``cdc``)."""

    def __init__(self, folder: str, values: dict, schema, stats_columns: list[str], codec: str, change: bool,
                 tight: bool = False):
        self.relative, self.codec, self.tight = arrow_files.new_file(values, change, codec), codec, tight
        self.path = os.path.join(folder, *self.relative.split("/"))
        self.values, self.schema, self.stats_columns, self.change = values, schema, stats_columns, change
        self.writer = None
        self.bounds: list = []  # the statistics columns of what was written (the offset always: it counts the rows)
        self.pending: list = []  # a change data file's rows not written yet

    def write(self, rows) -> None:
        """``rows`` into the file: a row group each, but a change data file's few rows a
        batch gather into row groups of about :data:`ROWS_A_BATCH`."""
        if not rows.num_rows:
            return
        if self.change:
            self.pending.append(rows)
            if sum(table.num_rows for table in self.pending) >= ROWS_A_BATCH:
                self._flush()
            return
        self._write(rows)
        self.bounds.append(rows.select(["offset", *(c for c in self.stats_columns if c != "offset")]))

    def _flush(self) -> None:
        import pyarrow as pa

        if self.pending:
            self._write(pa.concat_tables(self.pending))
            self.pending = []

    def _write(self, rows) -> None:
        import pyarrow.parquet as pq

        if self.writer is None:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            self.writer = pq.ParquetWriter(self.path, self.schema, compression=arrow_files.CODECS[self.codec][0],
                                           use_dictionary=arrow_files.dictionary_columns(rows))
        self.writer.write_table(rows)

    def close(self) -> dict | None:
        """The file's action, or None when nothing was written (no file)."""
        import pyarrow as pa

        self._flush()
        if self.writer is None:
            return None
        self.writer.close()
        self.writer = None
        action = {"path": self.relative, "partitionValues": self.values, "size": os.path.getsize(self.path)}
        if self.change:
            return {"cdc": {**action, "dataChange": False}}
        stats = arrow_files.statistics(pa.concat_tables(self.bounds), self.stats_columns, self.tight)
        if stats is None:
            raise _NoStatistics(self.path)
        return {"add": {**action, "modificationTime": int(os.path.getmtime(self.path) * 1000), "dataChange": True,
                        "stats": stats}}


def _discard(outputs: list[_Output]) -> None:
    """Delete what a rewrite that is not committed wrote (a crash leaves it to VACUUM)."""
    for output in outputs:
        with contextlib.suppress(Exception):
            if output.writer is not None:
                output.writer.close()
        with contextlib.suppress(FileNotFoundError):
            os.remove(output.path)
