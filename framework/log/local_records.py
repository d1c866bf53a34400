"""A small local partition's records read by Arrow from the files a version's checksum
lists, with no Spark job (and in a new process, no JVM).

A partition table's version is exactly its data files' rows, less those their deletion
vectors hide, when ``version_checksum.plain_files`` says so (local files, deletion vectors
read here, no column mapping). For a small one (``small_partitions.is_small`` by its
files' statistics) reading those files by Arrow costs about a millisecond where a Spark
query costs a job, and a JVM in a new process. ``stages.local_measure`` reads the
compaction measure's three columns this way, and ``topiclake read`` prints a partition's
records so. ``stages.arrow_actions`` reads the columns a compaction decides by the same
way from a local table of any size, a file per core at once, and ``checks.arrow_scope``
the records a large compaction's check must see (only the row groups that hold them,
:func:`file_columns`).

Spark writes timestamps as Parquet's INT96 (no time zone) and Arrow as microseconds in UTC,
and a version may hold files of both: each file's timestamps are read as epoch
milliseconds on their own (floored, as Spark's ``unix_millis``), so files of both kinds
never have to share one Arrow type.
"""

from __future__ import annotations

import os

from framework.log import deletion_vectors, version_checksum
from framework.log.commit_log import local_commits
from framework.log.small_partitions import is_small

__all__ = ["READ_COLUMNS", "columns", "each_file", "file_columns", "opened", "records", "row_groups_holding",
           "small_plain_files", "visible_columns", "visible_file_columns", "visible_rows"]

#: A partition table's timestamp columns, and the units its files hold them in (Arrow's,
#: Spark's INT96 read as "us").
_TIMESTAMPS = frozenset({"timestamp", "_delete_horizon"})
_UNITS = ("ms", "us", "ns")


def small_plain_files(path: str, version: int) -> version_checksum.PlainFiles | None:
    """The files of ``version`` when they are its records (less the rows their deletion
    vectors hide: :func:`visible_columns` reads them so) and a small partition's (by their
    statistics), else None."""
    files = version_checksum.plain_files(path, version, deletion_vectors=True)
    count = version_checksum.record_count(files)
    return files if count is not None and is_small(count) else None


def columns(files: version_checksum.PlainFiles, names: list[str]) -> list | None:
    """The ``names`` columns of each of ``files``' files, one Arrow table a file
    (:func:`file_columns`), every row, hidden by a deletion vector or not; None when a
    file's columns are not what a partition table writes."""
    tables = []
    for path in files.paths:
        table = file_columns(path, names)
        if table is None:
            return None
        tables.append(table)
    return tables


def visible_columns(files: version_checksum.PlainFiles, names: list[str]) -> list | None:
    """:func:`columns` of the version's records: each file's rows less those its deletion
    vector hides; None also when a vector is not read here."""
    found = []
    for path, add in zip(files.paths, files.adds, strict=True):
        table = visible_file_columns(files.folder, path, add, names)
        if table is None:
            return None
        found.append(table)
    return found


def visible_file_columns(folder: str, path: str, add: dict, names: list[str]):
    """:func:`file_columns` of the file at ``path`` (its ``add`` action in the table at
    ``folder``) less the rows its deletion vector hides; None when its columns are not a
    partition table's or its vector is not read here."""
    table = file_columns(path, names)
    if table is None or not add.get("deletionVector"):
        return table
    return visible_rows(table, deletion_vectors.hidden_rows(folder, add["deletionVector"]))


def visible_file(path: str, folder: str, descriptor: dict | None, names: list[str]):
    """The ``names`` columns of the table's file at ``path``, as Arrow reads them, less the
    rows its deletion vector ``descriptor`` hides (:func:`visible_rows`); None when the
    vector is not read here."""
    return visible_rows(opened(path).read(columns=names), deletion_vectors.hidden_rows(folder, descriptor))


def visible_rows(table, hidden):
    """``table`` (a whole file's rows) less those ``hidden`` (a deletion vector's rows,
    :func:`deletion_vectors.hidden_rows`); None when either is None."""
    import pyarrow as pa

    if table is None or hidden is None:
        return None
    return table.filter(pa.array(deletion_vectors.visible(hidden, table.num_rows))) if hidden else table


def each_file(items: list, read) -> list | None:
    """``read(item)`` of each of ``items`` (each a file's work), a file per core at once
    (Arrow lets go of the GIL while it decodes and encodes); None if any gave None."""
    from concurrent.futures import ThreadPoolExecutor

    if not items:
        return []
    with ThreadPoolExecutor(max_workers=max(1, min(len(items), os.cpu_count() or 1))) as pool:
        found = list(pool.map(read, items))
    return None if any(result is None for result in found) else found


def opened(path: str):
    """The Parquet file at ``path``, its INT96 timestamps read as microseconds (see above;
    as nanoseconds, Arrow's default, one after 2262 wraps), memory-mapped (its pages read
    where the page cache holds them, not copied into fresh memory first: a Delta data file
    never changes)."""
    import pyarrow.parquet as pq

    return pq.ParquetFile(path, coerce_int96_timestamp_unit="us", memory_map=True)


def file_columns(path, names: list[str], row_groups: list[int] | None = None, whole_ms: bool = False):
    """The ``names`` columns of one file (a path, or the file :func:`opened`; of only its
    ``row_groups``, when given), with
    ``timestamp`` and ``_delete_horizon`` (when named) as epoch milliseconds (int64, floored,
    nulls kept); None when its columns are not what a partition table writes (a null
    offset, a timestamp of another type, a column missing) or, with ``whole_ms``, when a
    timestamp has digits below the millisecond (which flooring would hide)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    parquet = opened(path) if isinstance(path, str) else path
    if not set(names) <= set(parquet.schema_arrow.names):
        return None
    table = parquet.read(columns=names) if row_groups is None else parquet.read_row_groups(row_groups, columns=names)
    if "offset" in names and table.column("offset").null_count:
        return None
    for name in _TIMESTAMPS & set(names):
        kind = table.schema.field(name).type
        if not (pa.types.is_timestamp(kind) and kind.unit in _UNITS):
            return None
        floored = pc.floor_temporal(table.column(name), unit="millisecond")
        if whole_ms and not pc.all(pc.equal(floored, table.column(name)), min_count=0).as_py():
            return None
        ms = floored.cast(pa.timestamp("ms", kind.tz))
        table = table.set_column(table.schema.get_field_index(name), name, ms.cast(pa.int64()))
    return table


def row_groups_holding(parquet, picked):
    """The row groups of the ``parquet`` file (:func:`opened`) that hold the rows at indexes
    ``picked`` (sorted, numpy), and each picked row's place among those groups' rows read in
    order: what a ``read_row_groups(groups).take(places)`` needs, so that only they are read."""
    import numpy as np

    metadata = parquet.metadata
    sizes = [metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)]
    starts = np.cumsum([0, *sizes])
    group_of = np.searchsorted(starts, picked, side="right") - 1
    groups = np.unique(group_of)
    read_from = np.zeros(len(sizes), dtype=np.int64)
    read_from[groups] = np.cumsum([0, *(sizes[g] for g in groups)])[:-1]
    return groups.tolist(), picked - starts[group_of] + read_from[group_of]


#: What ``topiclake read`` prints of a record (``timestamp`` as epoch milliseconds).
READ_COLUMNS = ["offset", "timestamp", "key", "value", "headers"]


def records(path: str, version: int | None, from_offset: int | None) -> list[dict] | None:
    """The records of ``version`` (the newest when None) from ``from_offset`` on (all when
    None), in offset order, as dicts of :data:`READ_COLUMNS`; None when this way does not
    apply (not small plain local files, a file gone): Spark reads them, and says why a
    version cannot be read."""
    if version is None:
        commits = local_commits(path, 1)
        version = commits[0].version if commits else None
    files = None if version is None else small_plain_files(path, version)
    if files is None or not all(os.path.isfile(p) for p in files.paths):
        return None
    tables = visible_columns(files, READ_COLUMNS)
    if tables is None:
        return None
    rows = [row for table in tables for row in table.to_pylist() if from_offset is None or row["offset"] >= from_offset]
    return sorted(rows, key=lambda row: row["offset"])
