"""A purge of deletion vectors made without the JVM (framework/stages/purge.py) is Delta's
``REORG TABLE ... APPLY (PURGE)`` of the same table.

A partition with deletion vectors on is compacted run after run (its vectors committed by
topiclake, as a run commits them), so that files of two segments carry vectors, one file
none. On two copies of it, one purged by Delta and one here: the same records stay, read
by Spark, and no vector; the commits carry the same operation, parameters, isolation,
user metadata, removes and metric counts; the new files the same partition values and
statistics; the checksums the same state; and Delta reads the table purged here. Where
the purge cannot be made as Delta would make it, nothing is written, and the vacuum stage
runs Delta's REORG."""

from __future__ import annotations

import json
import os
import shutil

import pyarrow.parquet as pq
import pytest

from framework.clients.produce import produce
from framework.clients.records import parse_records
from framework.deferred_session import DeferredSession
from framework.log.commit_log import local_commits
from framework.log.delta_commits import commit_metadata
from framework.log.topic import Topic
from framework.log.warehouse import Warehouse, delta_table_sql
from framework.spec import parse_spec
from framework.stages import compaction, purge

NOW = 1_767_225_600_000
DAY_MS = 86_400_000
SPEC = {"topic": "marked", "partitions": 1,
        "config": {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": 0.0, "delete.retention.ms": DAY_MS}}
METADATA = '{"topiclake":{"operation":"vacuum"}}'


def _produce(topic, first: int, count: int, keys: int) -> None:
    raw = [(i, {"key": f"k{(first + i) % keys}", "value": None if (first + i) % 7 == 0 else f"v{first + i}",
                "timestamp": NOW - DAY_MS + first + i, "headers": {}}) for i in range(count)]
    produce(topic, parse_records(raw, topic.spec, "test"), NOW)


def _commit(path: str, version: int) -> tuple[dict, list[dict], list[dict]]:
    with open(os.path.join(path, "_delta_log", f"{version:020d}.json")) as handle:
        actions = [json.loads(line) for line in handle]
    info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
    return info, [a["add"] for a in actions if "add" in a], [a["remove"] for a in actions if "remove" in a]


def _checksum(path: str, version: int) -> dict:
    with open(os.path.join(path, "_delta_log", f"{version:020d}.crc")) as handle:
        return json.load(handle)


def _marked_warehouse(spark, folder) -> tuple[str, int]:
    """A warehouse whose one partition has vectors on files of two segments (and one
    file without): its folder and the partition's version."""
    topic = Topic(spark, Warehouse.resolve(str(folder)), parse_spec(SPEC, "test"))
    topic.create()
    log = topic.partition(0)
    spark.sql(f"ALTER TABLE {delta_table_sql(log.path)} SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    # the first run stamps six tombstones, copied into one file (inside the first file's
    # offsets); the second marks one of the copies, a record of its key newer
    for first, count, keys in ((0, 40, 40), (40, 12, 5), (52, 6, 30), (58, 10, 5)):
        if first == 52:
            log.roll_segment(log.snapshot())  # (as a maintenance run rolls it)
        _produce(topic, first, count, keys)
        compaction.execute(log, compaction.plan(log, NOW, force=True))
    _produce(topic, 68, 5, 100)  # new keys only: a file no run marks
    return str(folder), local_commits(log.path, 1)[0].version


def _partition(session, folder: str):
    return Topic(session, Warehouse.resolve(folder), parse_spec(SPEC, "test")).partition(0)


def _rows(spark, path: str) -> list[tuple]:
    return sorted(tuple(row) for row in spark.read.format("delta").load(path).collect())


def _statistics(adds: list[dict]) -> list[tuple]:
    return sorted((json.dumps(add["partitionValues"], sort_keys=True), json.dumps(json.loads(add["stats"]),
                                                                                  sort_keys=True))
                  for add in adds)


def test_a_purge_without_the_jvm_commits_what_delta_s_reorg_commits(spark, tmp_path):
    base, version = _marked_warehouse(spark, tmp_path / "base")
    before = _checksum(_partition(spark, base).path, version)
    marked = [add for add in before["allFiles"] if add.get("deletionVector")]
    segments = {add["partitionValues"]["_segment"] for add in marked}
    assert len(marked) >= 3 and len(segments) == 2 and len(marked) < before["numFiles"]  # not vacuous
    assert _interleaved(marked), "no marked files whose offsets interleave"
    twins = {way: str(tmp_path / way) for way in ("delta", "own")}
    for folder in twins.values():
        shutil.copytree(base, folder)
    logs = {"delta": _partition(spark, twins["delta"])}
    expected = _rows(spark, logs["delta"].path)
    with commit_metadata(spark, METADATA):
        spark.sql(f"REORG TABLE {delta_table_sql(logs['delta'].path)} APPLY (PURGE)").collect()
    deferred = DeferredSession(lambda: spark)
    logs["own"] = _partition(deferred, twins["own"])
    with commit_metadata(deferred, METADATA):
        assert purge.purged_locally(logs["own"]) == version + 1
    assert not deferred.started
    commits = {way: _commit(log.path, version + 1) for way, log in logs.items()}
    (theirs, their_adds, their_removes), (ours, our_adds, our_removes) = commits["delta"], commits["own"]
    named = ("operation", "operationParameters", "readVersion", "isolationLevel", "isBlindAppend", "userMetadata")
    assert {k: ours[k] for k in named} == {k: theirs[k] for k in named}
    assert ours["operation"] == "REORG" and ours["userMetadata"] == METADATA
    assert set(ours["operationMetrics"]) == set(theirs["operationMetrics"])
    counted = ("numRemovedFiles", "numRemovedBytes", "numDeletionVectorsRemoved", "numAddedFiles")
    assert {k: ours["operationMetrics"][k] for k in counted} == {k: theirs["operationMetrics"][k] for k in counted}
    assert ours["operationMetrics"]["numAddedFiles"] == str(len(segments))  # a bin a segment

    def as_removed(remove):
        return {k: v for k, v in remove.items() if k != "deletionTimestamp"}

    assert sorted(json.dumps(as_removed(r), sort_keys=True) for r in our_removes) == sorted(
        json.dumps(as_removed(r), sort_keys=True) for r in their_removes)
    assert all(not add["dataChange"] and "deletionVector" not in add for add in our_adds)
    assert _statistics(our_adds) == _statistics(their_adds)
    checksums = {way: _checksum(log.path, version + 1) for way, log in logs.items()}
    same = ("numFiles", "numDeletedRecordsOpt", "numDeletionVectorsOpt", "deletedRecordCountsHistogramOpt",
            "metadata", "protocol", "setTransactions", "domainMetadata", "numMetadata", "numProtocol")
    assert {k: checksums["own"].get(k) for k in same} == {k: checksums["delta"].get(k) for k in same}
    assert checksums["own"]["numDeletionVectorsOpt"] == 0
    assert _statistics(checksums["own"]["allFiles"]) == _statistics(checksums["delta"]["allFiles"])
    assert _rows(spark, logs["own"].path) == _rows(spark, logs["delta"].path) == expected
    for add in our_adds:  # (Delta's new file holds its files' rows as it read them)
        offsets = pq.read_table(os.path.join(logs["own"].path, add["path"]), columns=["offset"])["offset"].to_pylist()
        assert offsets == sorted(offsets)


@pytest.mark.parametrize("case", ["no vector", "a vector not read here", "a bin too large to read whole",
                                  "a lost race"])
def test_a_purge_it_cannot_make_as_delta_would_writes_nothing(spark, tmp_path, monkeypatch, case):
    """A vector file damaged; a bin of more bytes than are read whole; another writer
    committing first. No vector to purge: nothing written, as Delta's REORG writes nothing."""
    from framework import faults
    from framework.log import deletion_vectors

    if case == "no vector":
        topic = Topic(spark, Warehouse.resolve(str(tmp_path / "w")), parse_spec(SPEC, "test"))
        topic.create()
        _produce(topic, 0, 10, 3)
        folder = str(tmp_path / "w")
    else:
        folder, _ = _marked_warehouse(spark, tmp_path / "w")
    log = _partition(DeferredSession(lambda: spark), folder)
    if case == "a vector not read here":
        version = local_commits(log.path, 1)[0].version
        marked = [add for add in _checksum(log.path, version)["allFiles"] if add.get("deletionVector")]
        with open(deletion_vectors.file_of(log.path, marked[-1]["deletionVector"]), "r+b") as handle:
            handle.seek(marked[-1]["deletionVector"]["offset"] + 10)
            handle.write(b"\xff\xff")  # its CRC no longer holds
    if case == "a bin too large to read whole":
        monkeypatch.setattr(purge, "MAX_BIN_READ_BYTES", 1000)
    before = sorted(os.listdir(log.path)), sorted(os.listdir(os.path.join(log.path, "_delta_log")))

    def other_writer(point, context):
        _produce(Topic(spark, Warehouse.resolve(folder), parse_spec(SPEC, "test")), 200, 2, 2)

    with faults.installed("vacuum.before_purge", other_writer if case == "a lost race" else lambda *_: None):
        assert purge.purged_locally(log) == (local_commits(log.path, 1)[0].version if case == "no vector" else None)
    if case == "a lost race":  # the producer's append is all that is new
        assert len(os.listdir(os.path.join(log.path, "_delta_log"))) == len(before[1]) + 2
    else:
        assert (sorted(os.listdir(log.path)), sorted(os.listdir(os.path.join(log.path, "_delta_log")))) == before


def _interleaved(adds: list[dict]) -> bool:
    """Whether a file's offsets lie inside another's of the same partition."""
    spans = [(add["partitionValues"], json.loads(add["stats"])) for add in adds]
    return any(a is not b and a[0] == b[0] and a[1]["minValues"]["offset"] <= b[1]["minValues"]["offset"]
               <= b[1]["maxValues"]["offset"] <= a[1]["maxValues"]["offset"] for a in spans for b in spans)
