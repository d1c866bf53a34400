"""A table version's live files from Delta's version checksum, without a Spark job.

After each commit Delta writes ``_delta_log/<version, 20 digits>.crc``: the version's
size and file count and, while the table has at most
``spark.databricks.delta.allFilesInCrc.thresholdNumFiles`` live files (50 by default,
on by default in Delta 4), every live file's ``add`` action with its statistics. A
partition's file listing through Delta's snapshot costs a state reconstruction and a
collect, about 0.5 s; the checksum is one small local file. So a small partition is
listed from here, and anything else (no checksum written yet, more files than the
threshold, a session that turned it off, storage that is not local) goes the JVM way.
``tests/test_optimize.py`` pins the two listings together.

:func:`plain_files` and :func:`read_plain` go one step further, for the readers of a
pinned version: when the version's records are exactly the rows of its files and the
partition values their folders name (no deletion vectors, no column mapping), a read of
those files with the table's schema is the version, without the snapshot state Delta
would rebuild first (three Spark jobs and their planning on a small table).
``tests/test_version_checksum.py`` pins that read to Delta's.
"""

from __future__ import annotations

import functools
import json
import os
import re
from dataclasses import dataclass, field, replace
from urllib.parse import unquote

from framework.log import deletion_vectors as deletion_vector_files
from framework.log import file_stats
from framework.log.commit_log import DELTA_LOG, commit_txn_id, local_folder, read_commits

_PLAIN = re.compile(r"[A-Za-z0-9_.-]+")
#: characters Spark's file sources read as a glob pattern in a path
_GLOB = re.compile(r"[*?\[\]{}\\]")


@dataclass(frozen=True)
class PlainFiles:
    """The data files of a version whose records are exactly their rows."""

    #: the table schema, as Delta's metadata writes it (Spark's JSON form)
    schema_json: str
    #: the table's folder (where Spark's partition discovery starts)
    folder: str
    #: absolute local paths of the live data files
    paths: tuple[str, ...]
    #: their ``add`` actions (dicts as in the Delta log), in the same order
    adds: tuple[dict, ...] = ()
    #: the table's properties (``delta.enableChangeDataFeed``, ...) at the version
    configuration: dict = field(default_factory=dict)
    #: the reader and writer features of the table's protocol
    features: frozenset = frozenset()

    @property
    def schema(self):
        """The table schema as a ``StructType``."""
        from pyspark.sql.types import StructType

        return StructType.fromJson(json.loads(self.schema_json))

    def only(self, files) -> PlainFiles:
        """These of the files (``(path, add)`` pairs of this listing), in their order."""
        files = tuple(files)
        return replace(self, paths=tuple(path for path, _ in files), adds=tuple(add for _, add in files))


def _checksum(path: str, version: int) -> tuple[str, dict] | None:
    """The table's folder and the checksum of ``version``, when it is the checksum of that
    version's commit: one that names a transaction (``txnId``) is trusted only while the
    commit file names the same one, so a commit rewritten or broken behind Delta's back
    (which Delta itself would refuse to read) is never read around through its checksum."""
    folder = local_folder(path)
    if folder is None:
        return None
    try:
        with open(os.path.join(folder, DELTA_LOG, f"{version:020d}.crc"), encoding="utf-8") as handle:
            checksum = json.load(handle)
    except (OSError, ValueError):  # not written (yet), or not ours to read
        return None
    if not isinstance(checksum, dict):
        return None
    if "txnId" in checksum and commit_txn_id(os.path.join(folder, DELTA_LOG), version) != checksum["txnId"]:
        return None
    return folder, checksum


def checksum(path: str, version: int) -> dict | None:
    """The checksum of ``version`` of the local table at ``path`` (as :func:`_checksum`
    trusts it), or None."""
    found = _checksum(path, version)
    return None if found is None else found[1]


def _adds(checksum: dict) -> list[dict] | None:
    adds = checksum.get("allFiles")
    if not isinstance(adds, list) or len(adds) != checksum.get("numFiles"):
        return None
    return adds


def _metadata(path: str, version: int) -> dict | None:
    """The table's metadata action at ``version``, as its checksum holds it, or None."""
    found = _checksum(path, version)
    metadata = None if found is None else found[1].get("metadata")
    return metadata if isinstance(metadata, dict) else None


def live_adds(path: str, version: int) -> list[dict] | None:
    """The ``add`` actions of the files live at ``version`` (dicts as in the Delta log), or
    None when the checksum does not list them."""
    found = _checksum(path, version)
    return None if found is None else _adds(found[1])


def file_count(path: str, version: int) -> int | None:
    """How many files are live at ``version`` (the checksum's ``numFiles``), or None when
    there is no checksum to read."""
    found = _checksum(path, version)
    count = None if found is None else found[1].get("numFiles")
    return count if isinstance(count, int) else None


def configuration(path: str, version: int) -> dict[str, str] | None:
    """The table's properties (its metadata's ``configuration``) at ``version``, or None
    when the checksum does not hold them. ``SHOW TBLPROPERTIES`` answers the same through
    a Spark command, about 15 ms a partition; vacuum compares them with the spec's on every
    run of every partition."""
    metadata = _metadata(path, version)
    properties = metadata.get("configuration", {}) if metadata is not None else None
    if not isinstance(properties, dict) or not all(isinstance(v, str) for v in properties.values()):
        return None
    return dict(properties)


def schema(path: str, version: int):
    """The table's schema at ``version`` (a ``StructType``, from its metadata's
    ``schemaString``), or None when the checksum does not hold it. Delta's answer
    (``spark.read.load(path).schema``) loads a snapshot and analyses a plan, about 20 ms;
    the spec's check against the tables asks for every partition on every produce and
    maintain."""
    from pyspark.sql.types import StructType

    metadata = _metadata(path, version)
    text = metadata.get("schemaString") if metadata is not None else None
    return StructType.fromJson(json.loads(text)) if isinstance(text, str) else None


def newest_schema(spark, path: str):
    """:func:`schema` at the table's newest version, or None."""
    newest = read_commits(spark, path, 1)
    return schema(path, newest[0].version) if newest else None


def _in_its_partition_folder(relative: str, add: dict, columns: list[str]) -> bool:
    """Whether the file (at ``relative``, unquoted) sits in the folder that names its
    partition values exactly as a Hive-style path (``_segment=3/part-...``), so that
    Spark's partition discovery reads the values the log holds; only plain values (no
    escaping, no nulls) count."""
    values = add.get("partitionValues") or {}
    if set(values) != set(columns) or not all(isinstance(v, str) and _PLAIN.fullmatch(v) for v in values.values()):
        return False
    return os.path.dirname(relative) == "/".join(f"{c}={values[c]}" for c in columns)


def file_name(path: str) -> str:
    """A data file's name from an add action's path (URL-encoded, relative to the table or
    under a partition folder) or from a local path: what a rewrite's touched files are named by."""
    return unquote(path).rsplit("/", 1)[-1]


def plain_files(path: str, version: int, deletion_vectors: bool = False) -> PlainFiles | None:
    """The files and schema of ``version`` when reading its files is reading the version,
    else None: no checksum or file list; a deletion vector hides rows of a file; column
    mapping renames the files' columns; a partition value the file's folder does not name.
    With ``deletion_vectors``, a file's deletion vector is taken when it is one that
    ``deletion_vectors.hidden_rows`` reads (a file of the table's folder): its reader then
    reads the file's rows less those (the ``add``'s ``deletionVector``)."""
    found = _checksum(path, version)
    if found is None:
        return None
    folder, checksum = found
    if _GLOB.search(folder):
        return None
    adds = _adds(checksum)
    metadata = checksum.get("metadata")
    if adds is None or not isinstance(metadata, dict) or not isinstance(metadata.get("schemaString"), str):
        return None
    columns = metadata.get("partitionColumns") or []
    configuration = metadata.get("configuration") or {}
    if configuration.get("delta.columnMapping.mode", "none") != "none":
        return None
    paths = []
    for add in adds:
        if not isinstance(add, dict) or not isinstance(add.get("path"), str):
            return None
        if add.get("deletionVector") and (
                not deletion_vectors or deletion_vector_files.file_of(folder, add["deletionVector"]) is None):
            return None
        relative = unquote(add["path"])
        if ("://" in relative or relative.startswith("/") or _GLOB.search(relative)
                or not _in_its_partition_folder(relative, add, columns)):
            return None
        paths.append(os.path.join(folder, relative))
    protocol = checksum.get("protocol") or {}
    features = frozenset(protocol.get("readerFeatures") or ()) | frozenset(protocol.get("writerFeatures") or ())
    return PlainFiles(metadata["schemaString"], folder, tuple(paths), tuple(adds), dict(configuration), features)


#: Table features under which rewriting a version's files is not what Delta's own command
#: would write (row ids, deletion vectors) or that topiclake's tables never have and the
#: rewrites do not claim to keep. (``invariants``, the schema's NOT NULLs, every table
#: has: ``writeFiles`` checks them.)
REWRITE_BLOCKING_FEATURES = frozenset({"rowTracking", "deletionVectors", "columnMapping", "identityColumns",
                                       "generatedColumns", "checkConstraints"})


def rewritable(files: PlainFiles | None) -> bool:
    """Whether a version (``plain_files``' answer) can be rewritten file by file through
    Delta's transaction API: its files are its records, and no feature forbids it."""
    return files is not None and not files.features.intersection(REWRITE_BLOCKING_FEATURES)


def record_count(files: PlainFiles | None) -> int | None:
    """The records of a version (``plain_files``' answer) from its files' statistics
    (Delta's ``numRecords``, less the rows a file's deletion vector hides), or None when a
    file carries none."""
    if files is None:
        return None
    counts = [file_stats.of(add).records for add in files.adds]
    return None if None in counts else sum(counts) - sum(map(deletion_vector_files.cardinality, files.adds))


def holding_offsets(files: PlainFiles, start: int | None, end: int | None) -> PlainFiles:
    """``files`` less those whose offset statistics put every record outside ``[start, end)``
    (None: unbounded): what Delta's file skipping leaves of a scan with that offset filter."""
    return files.only((path, add) for path, add in zip(files.paths, files.adds)
                      if file_stats.may_hold_offsets(file_stats.of(add), start, end))


def offsets_reader(spark, path: str, version: int, through_delta):
    """A reader ``(start, end) -> (records, scanned)`` of ``version``'s records that may hold
    offsets in ``[start, end)`` (None: unbounded): the files :func:`plain_files` lists, less
    those whose offset statistics rule the range out, as Delta's skipping would, with no
    snapshot state to rebuild (Delta's ``PrepareDeltaScan`` does at each scan of a pinned
    version: 0.6 to 1 s at 500k records). Else ``through_delta()``, the version read
    through Delta, for every range. ``scanned`` is false when no file is read."""
    listed = plain_files(path, version)
    if listed is None:
        # read only when asked: a decision made by Arrow (deletion vectors) never asks, and
        # Delta's read would start the JVM
        whole = functools.cache(through_delta)
        return lambda start, end: (whole(), True)

    def read(start: int | None, end: int | None):
        # every offset (read_plain): every listed file, without parsing their statistics
        files = listed if start is None and end is None else holding_offsets(listed, start, end)
        return frame_of(spark, files), bool(files.paths)

    return read


def read_plain(spark, path: str, version: int, through_delta):
    """The records of ``version`` (:func:`offsets_reader`, every offset)."""
    return offsets_reader(spark, path, version, through_delta)(None, None)[0]


def frame_of(spark, files: PlainFiles):
    """The rows of ``files``, in the table's column order, less those a file's deletion
    vector hides (files listed with ``deletion_vectors``): left out by the Parquet row
    index Spark reads beside each row, as Delta's reader leaves them out."""
    from pyspark.sql import functions as F

    schema = files.schema
    if not files.paths:
        return spark.createDataFrame([], schema)
    frame = spark.read.schema(schema).option("basePath", files.folder).parquet(*files.paths)
    hidden = [(os.path.basename(unquote(add["path"])), row) for add in files.adds if add.get("deletionVector")
              for row in _hidden(files.folder, add)]
    if hidden:  # (a small version's: ``stage_check.pinned_before``)
        gone = spark.createDataFrame(hidden, "_file STRING, _row LONG")
        frame = frame.select("*", F.col("_metadata.file_name").alias("_file"),
                             F.col("_metadata.row_index").alias("_row")).join(F.broadcast(gone), ["_file", "_row"],
                                                                              "left_anti")
    return frame.select(*(frame[name] for name in schema.fieldNames()))


def _hidden(folder: str, add: dict) -> list[int]:
    rows = deletion_vector_files.hidden_rows(folder, add["deletionVector"])
    if rows is None:
        raise ValueError(f"{add['path']}: its deletion vector does not read whole")
    return [int(row) for row in deletion_vector_files.indexes(rows)]
