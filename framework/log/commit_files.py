"""The files of a Delta commit that topiclake makes itself (``framework.log.own_commits``):
its data files, written by Arrow as the JVM route writes them; its commit file, created
only if absent; and its checksum, Delta's previous one carried forward, or a new table's.
Each is written as Delta writes it, which ``tests/test_own_commits.py`` pins to Delta's
commits and checksums of the same rows."""

from __future__ import annotations

import bisect
import contextlib
import json
import os
import time
import uuid
from typing import NamedTuple

from framework import __version__, faults
from framework.log import arrow_files, deletion_vectors, own_checkpoints
from framework.log.commit_log import DELTA_LOG

__all__ = ["OPTIMIZE_RECORDED", "Operation", "commit", "commit_lines", "data_files", "new_checksum",
           "next_checksum", "put_if_absent", "removed_metrics", "removes", "remove_files", "schema_string",
           "write_checksum"]

class Operation(NamedTuple):
    """A commit's operation as Delta's command records it: its name, parameters and metrics
    (values as strings in the log), and the isolation level it commits at."""

    name: str
    parameters: dict
    metrics: dict
    isolation: str = "Serializable"


#: Delta's OPTIMIZE (bin-packing, no predicate, no Z-order, not auto compaction) as its
#: commit records it: no metrics of its own through the transaction API, snapshot isolation.
OPTIMIZE_RECORDED = Operation(
    "OPTIMIZE", {"predicate": "[]", "zOrderBy": "[]", "clusterBy": "[]", "auto": False}, {}, "SnapshotIsolation")


_MB = 1 << 20
#: Delta's file-size histogram bins (its ``FileSizeHistogram``'s default boundaries), which
#: a new table's checksum starts with: 0, powers of two to 4 MB, then steps that widen with
#: the size, then powers of two from 8 GB.
HISTOGRAM_BINS = (0, *(1 << p for p in range(13, 23)), *range(8 * _MB, 41 * _MB, 4 * _MB),
                  *range(48 * _MB, 121 * _MB, 8 * _MB), *range(124 * _MB, 145 * _MB, 4 * _MB),
                  *range(160 * _MB, 577 * _MB, 16 * _MB), *range(640 * _MB, 1409 * _MB, 64 * _MB),
                  *range(1536 * _MB, 2049 * _MB, 128 * _MB), *range(2304 * _MB, 4097 * _MB, 256 * _MB),
                  *(1 << p for p in range(33, 39)))


def data_files(folder: str, metadata: dict, table, max_records_per_file: int | None = None,
               single: bool = False, codec: str = arrow_files.SPARK_DEFAULT_CODEC,
               tight_bounds: bool = False) -> list[dict] | None:
    """``table`` written as Parquet files for a table of ``metadata`` (``single``: as one
    file) in ``codec``, as ``arrow_files`` writes them for Delta's commit (``tight_bounds``:
    as ``arrow_files.statistics``): their ``add`` actions, or None (nothing written)."""
    from pyspark.sql.types import StructType

    struct = StructType.fromJson(json.loads(metadata["schemaString"]))
    partition_columns = list(metadata.get("partitionColumns") or [])
    named = (metadata.get("configuration") or {}).get("delta.dataSkippingStatsColumns")
    adds = arrow_files.add_actions(folder, table, struct, partition_columns,
                                   arrow_files.stats_columns(named, partition_columns), max_records_per_file, codec,
                                   tight_bounds)
    if adds is not None and single and len(adds) != 1:
        remove_files(folder, adds)
        return None
    return adds


def removes(adds, data_change: bool = True) -> list[dict]:
    """``remove`` actions for live files' ``add`` actions, as Delta's overwrite writes them
    (``data_change`` False: a rearrangement, as a bin-packing's), each with the deletion
    vector its file had (the protocol's rule: a remove names the file and vector it ends)."""
    removed_at = int(time.time() * 1000)
    kept = ("path", "partitionValues", "size", "stats", "tags", "deletionVector")
    return [{**{k: add[k] for k in kept if k in add}, "deletionTimestamp": removed_at, "dataChange": data_change,
             "extendedFileMetadata": True} for add in adds]


def commit_lines(read_version: int | None, mode: str, adds: list[dict], removes: list[dict], txn_id: str,
                 user_metadata: str | None = None, claim: dict | None = None,
                 created: tuple[dict, dict] | None = None, changes: list[dict] = (),
                 operation: Operation | None = None) -> str:
    """The commit file's lines: its ``commitInfo``, the new table's ``metaData`` and
    ``protocol`` (``created``: a version 0, whose ``read_version`` is None), the ``add``,
    ``cdc`` (``changes``) and ``remove`` actions, and the ``txn`` claim. ``operation``
    (its name, parameters and metrics, as Delta's command records them): a rewrite's
    ``MERGE`` or ``DELETE``; otherwise a new table with no rows is Delta's ``CREATE
    TABLE``, anything else a ``WRITE`` in ``mode``."""
    isolation = "Serializable" if operation is None else operation.isolation
    if operation is not None:
        operation, parameters, metrics = (operation.name, operation.parameters,
                                          {k: str(v) for k, v in operation.metrics.items()})
    elif created is not None and not adds:
        metadata = created[0]
        operation, parameters, metrics = "CREATE TABLE", {
            "partitionBy": json.dumps(metadata["partitionColumns"], separators=(",", ":")), "clusterBy": "[]",
            "description": metadata.get("description"), "isManaged": "false",  # (null without one, as Delta's)
            "properties": json.dumps(metadata["configuration"], separators=(",", ":"))}, {}
    else:
        # as Delta's writes record them (vacuum's rules read what a WRITE removed); as strings in the log
        counted = {**arrow_files.written_metrics(adds), **(removed_metrics(removes) if removes else {})}
        operation, parameters, metrics = "WRITE", {"mode": mode}, {name: str(value) for name, value in counted.items()}
    info = {"timestamp": int(time.time() * 1000), "operation": operation, "operationParameters": parameters,
            **({"readVersion": read_version} if read_version is not None else {}),
            "isolationLevel": isolation, "isBlindAppend": not removes, "operationMetrics": metrics,
            **({"userMetadata": user_metadata} if user_metadata is not None else {}),
            "engineInfo": f"topiclake/{__version__} (no JVM)", "txnId": txn_id}
    declared = [{"metaData": created[0]}, {"protocol": created[1]}] if created is not None else []
    actions = [{"commitInfo": info}, *declared, *({"add": add} for add in adds), *({"cdc": c} for c in changes),
               *({"remove": r} for r in removes), *([{"txn": claim}] if claim else [])]
    return "".join(json.dumps(action, separators=(",", ":")) + "\n" for action in actions)


def removed_metrics(adds) -> dict:
    """The operation metrics Delta's own overwrite registers for the files it removes
    (``add`` or ``remove`` actions as dicts): vacuum's rules read them to know a WRITE
    removed files (``framework.cleaner.rules.removes_files``)."""
    adds = list(adds)
    return {"numRemovedFiles": len(adds), "numRemovedBytes": sum(int(add.get("size", 0)) for add in adds)}


def commit(folder: str, version: int, checksum: dict, adds: list[dict], removes: list[dict] = (),
           mode: str = "Append", user_metadata: str | None = None, claim: tuple[str, int] | None = None,
           declares: bool = False, changes: list[dict] = (), operation: Operation | None = None) -> bool | None:
    """Commit ``version`` of the table in ``folder``: its commit file (``adds``, ``changes``
    (``cdc`` actions), ``removes``, a WRITE in ``mode`` or ``operation``, and ``claim``, an
    app id and version, as a ``txn``) created only if absent, then its checksum,
    ``checksum`` (the version before's, or with ``declares`` a new table's,
    :func:`new_checksum`, whose metadata and protocol version 0 declares) carried forward.
    :func:`put_if_absent`'s answer: whether it was made."""
    removes = list(removes)
    txn = None if claim is None else {"appId": claim[0], "version": claim[1], "lastUpdated": int(time.time() * 1000)}
    txn_id = str(uuid.uuid4())
    created = (checksum["metadata"], checksum["protocol"]) if declares else None
    lines = commit_lines(None if declares else version - 1, mode, adds, removes, txn_id, user_metadata, txn, created,
                         list(changes), operation)
    made = put_if_absent(folder, version, lines)
    if made:
        write_checksum(folder, version, next_checksum(checksum, adds, removes, txn_id, txn))
        # as Delta's writer does after such a commit (own_commits.committable took it knowing)
        if own_checkpoints.due(checksum["metadata"].get("configuration") or {}, version):
            own_checkpoints.write(folder, version)
    return made


def put_if_absent(folder: str, version: int, text: str) -> bool | None:
    """Create the version's commit file with ``text`` unless it exists: a hard link of a
    written temporary file, which the file system refuses when the name is taken. Whether
    it was created; None on a file system without hard links (this way does not apply).
    A log folder or temporary file gone meanwhile is a lost race too: only a creator that
    found no commit clears a log folder (``delta_create.clear_uncommitted_log``), and
    another creator is then on its way to version 0."""
    log = os.path.join(folder, DELTA_LOG)
    temporary = os.path.join(log, f".{version:020d}.json.{uuid.uuid4()}.tmp")
    try:
        with open(temporary, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
    except FileNotFoundError:  # the log folder cleared meanwhile
        return False
    faults.reached("own_commit.temporary_written", path=temporary)
    try:
        os.link(temporary, os.path.join(log, f"{version:020d}.json"))
        return True
    except (FileExistsError, FileNotFoundError):
        return False
    except OSError:  # no hard links here (EPERM, ENOTSUP): no put-if-absent to rely on
        return None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)


def next_checksum(checksum: dict, adds: list[dict], removes: list[dict], txn_id: str,
                  claim: dict | None = None) -> dict:
    """The previous version's checksum with ``adds`` added, ``removes`` gone and ``claim``
    (a SetTransaction) taking its app id's place, as Delta carries it forward."""
    added, removed = sum(a["size"] for a in adds), sum(r["size"] for r in removes)
    following = dict(checksum, txnId=txn_id, numFiles=checksum["numFiles"] + len(adds) - len(removes),
                     tableSizeBytes=checksum["tableSizeBytes"] + added - removed)
    if "allFiles" in checksum:
        gone = {r["path"] for r in removes}
        following["allFiles"] = [f for f in checksum["allFiles"] if f["path"] not in gone] + [
            dict(add, dataChange=False) for add in adds]
    histogram = checksum.get("fileSizeHistogram")
    if isinstance(histogram, dict):
        bins, counts, sizes = histogram["sortedBinBoundaries"], [*histogram["fileCounts"]], [*histogram["totalBytes"]]
        for sign, f in [*((1, a) for a in adds), *((-1, r) for r in removes)]:
            bin_ = bisect.bisect_right(bins, f["size"]) - 1
            counts[bin_] += sign
            sizes[bin_] += sign * f["size"]
        following["fileSizeHistogram"] = dict(histogram, fileCounts=counts, totalBytes=sizes)
    following.update(deletion_vectors.checksum_counts(checksum, adds, removes))
    if claim is not None:
        following["setTransactions"] = [t for t in checksum["setTransactions"] if t["appId"] != claim["appId"]] + [
            claim]
    return following


#: The key order of Spark's JSON of a data type and of a struct's field (its Scala side),
#: which Delta writes as a table's ``schemaString``; pyspark's own ``json()`` sorts the keys.
_TYPE_KEYS = ("type", "fields", "elementType", "containsNull", "keyType", "valueType", "valueContainsNull")
_FIELD_KEYS = ("name", "type", "nullable", "metadata")


def schema_string(struct) -> str:
    """``struct`` (a pyspark ``StructType``) as Delta writes a table's schema."""
    def ordered(value):
        if isinstance(value, list):
            return [ordered(v) for v in value]
        if not isinstance(value, dict):
            return value
        order = _FIELD_KEYS if "name" in value else _TYPE_KEYS
        keys = sorted(value, key=lambda k: order.index(k) if k in order else len(order))
        return {k: value[k] if k == "metadata" else ordered(value[k]) for k in keys}

    return json.dumps(ordered(struct.jsonValue()), separators=(",", ":"))


def new_checksum(metadata: dict, protocol: dict) -> dict:
    """A new table's checksum before its first commit's files and claims (Delta's, empty)."""
    empty = [0] * len(HISTOGRAM_BINS)
    return {"txnId": None, "tableSizeBytes": 0, "numFiles": 0, "numMetadata": 1, "numProtocol": 1,
            "setTransactions": [], "domainMetadata": [], "metadata": metadata, "protocol": protocol,
            "fileSizeHistogram": {"sortedBinBoundaries": list(HISTOGRAM_BINS), "fileCounts": empty,
                                  "totalBytes": list(empty)}, "allFiles": []}


def write_checksum(folder: str, version: int, checksum: dict) -> None:
    log = os.path.join(folder, DELTA_LOG)
    temporary = os.path.join(log, f".{version:020d}.crc.{uuid.uuid4()}.tmp")
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(checksum, handle, separators=(",", ":"))
    os.replace(temporary, os.path.join(log, f"{version:020d}.crc"))


def remove_files(folder: str, adds: list[dict]) -> None:
    """Delete the data files of a commit that was not made (no version lists them)."""
    for add in adds:
        os.unlink(os.path.join(folder, *add["path"].split("/")))
