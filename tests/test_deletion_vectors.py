"""Deletion vectors read and written without the JVM (framework/log/deletion_vectors.py),
and a compaction committed as deletion vectors (framework/stages/compaction_vectors.py).

The format is pinned to Delta's own: the rows a vector Delta wrote hides are the rows
Delta's DELETE removed, and the same rows written here are the same bytes. The compaction
is pinned to Delta's MERGE of the same changes on a twin table, run after run: the same
records, the same change data once an update's two images are read as a delete and an
insert, the same operation metrics and checksum counts."""

from __future__ import annotations

import glob
import json
import os
import uuid

import pyarrow.parquet as pq
import pytest
from pyroaring import BitMap64

from framework import faults
from framework.clients.produce import produce
from framework.clients.records import parse_records
from framework.log import deletion_vectors
from framework.log.topic import Topic
from framework.log.warehouse import Warehouse, delta_table_sql
from framework.spec import parse_spec
from framework.stages import compaction, compaction_vectors

NOW = 1_767_225_600_000
DAY_MS = 86_400_000
SPEC = {"topic": "vectors", "partitions": 1,
        "config": {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": 0.0, "delete.retention.ms": DAY_MS}}
ON = "'delta.enableDeletionVectors' = 'true'"
#: what a commit made without the JVM names as its engine (``commit_files.commit_lines``)
NO_JVM = "(no JVM)"


def _actions(path: str, version: int) -> list[dict]:
    with open(os.path.join(path, "_delta_log", f"{version:020d}.json")) as handle:
        return [json.loads(line) for line in handle]


def _checksum(path: str, version: int) -> dict:
    with open(os.path.join(path, "_delta_log", f"{version:020d}.crc")) as handle:
        return json.load(handle)


def test_z85_is_zeromq_s():
    """The spec's example (ZeroMQ's RFC 32) both ways, and a UUID's 20 characters."""
    raw = bytes([0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B])
    assert deletion_vectors.z85_encode(raw) == "HelloWorld"
    assert deletion_vectors.z85_decode("HelloWorld") == raw
    identity = uuid.uuid4()
    assert len(deletion_vectors.z85_encode(identity.bytes)) == 20
    assert deletion_vectors.z85_decode(deletion_vectors.z85_encode(identity.bytes)) == identity.bytes
    assert deletion_vectors.z85_decode("Hello") is not None and deletion_vectors.z85_decode("Hell") is None
    assert deletion_vectors.z85_decode("Hello~orld") is None  # not of Z85's alphabet


@pytest.mark.parametrize(("hidden", "bin_"), [(0, 0), (1, 1), (9, 1), (10, 2), (143, 3), (999, 3), (1000, 4),
                                              (10_000_000, 8), (2**31 - 2, 8), (2**31 - 1, 9), (2**40, 9)])
def test_the_histogram_bins_are_delta_s(hidden, bin_):
    """``DeletedRecordCountsHistogramUtils.getHistogramBin`` over its bucket boundaries."""
    assert deletion_vectors.histogram_bin(hidden) == bin_


def test_delta_s_vectors_read_here_hide_what_its_delete_removed_and_are_written_byte_for_byte(spark, tmp_path):
    path = str(tmp_path / "table")
    spark.range(0, 3000).selectExpr("id AS offset", "repeat('x', 20) AS value").coalesce(2).write.format(
        "delta").option("delta.enableDeletionVectors", "true").save(path)
    table = delta_table_sql(path)
    spark.sql(f"DELETE FROM {table} WHERE offset % 7 = 0")
    spark.sql(f"DELETE FROM {table} WHERE offset % 11 = 3")  # a second vector over the first
    left = {row["offset"] for row in spark.read.format("delta").load(path).select("offset").collect()}
    version = max(int(os.path.basename(name)[:20]) for name in glob.glob(os.path.join(path, "_delta_log", "*.json")))
    adds = _checksum(path, version)["allFiles"]
    assert adds and all(add.get("deletionVector") for add in adds)
    for add in adds:
        descriptor = add["deletionVector"]
        hidden = deletion_vectors.hidden_rows(path, descriptor)
        offsets = pq.read_table(os.path.join(path, add["path"]), columns=["offset"])["offset"].to_pylist()
        assert {offsets[row] for row in hidden} == set(offsets) - left, add["path"]
        # the same rows written here: the same bytes Delta wrote at the vector's offset
        with open(deletion_vectors.file_of(path, descriptor), "rb") as handle:
            handle.seek(descriptor["offset"])
            theirs = handle.read(descriptor["sizeInBytes"] + 8)
        ours_descriptor = deletion_vectors.write(str(tmp_path), [hidden])[0]
        with open(deletion_vectors.file_of(str(tmp_path), ours_descriptor), "rb") as handle:
            assert handle.read(1) == b"\x01"
            assert handle.read() == theirs
        named = ("storageType", "sizeInBytes", "cardinality")  # (Delta's file holds several vectors)
        assert {k: ours_descriptor[k] for k in named} == {k: descriptor[k] for k in named}
    # what this reads as no vector: a wrong cardinality, a damaged file, an inline vector
    descriptor = adds[0]["deletionVector"]
    assert deletion_vectors.hidden_rows(path, {**descriptor, "cardinality": descriptor["cardinality"] + 1}) is None
    assert deletion_vectors.hidden_rows(path, {**descriptor, "storageType": "i"}) is None
    with open(deletion_vectors.file_of(path, descriptor), "r+b") as handle:
        handle.seek(descriptor["offset"] + 10)
        byte = handle.read(1)
        handle.seek(descriptor["offset"] + 10)
        handle.write(bytes([byte[0] ^ 0xFF]))
    assert deletion_vectors.hidden_rows(path, descriptor) is None  # its CRC no longer holds


def _produce(topic, first: int, count: int, keys: int, now: int, tombstones: bool = True) -> None:
    raw = [(i, {"key": f"k{(first + i) % keys}",
                "value": None if tombstones and (first + i) % 5 == 0 else f"v{first + i}",
                "timestamp": now - DAY_MS + first + i, "headers": {}})
           for i in range(count)]
    produce(topic, parse_records(raw, topic.spec, "test"), now)


def _rows(log) -> list[tuple]:
    return sorted(tuple(row) for row in log.read().collect())


def _net_feed(spark, log, version: int) -> list[tuple]:
    """One commit's change data: offset, change (an update's pre-image read as a delete and
    its post-image as an insert, as topiclake's checks read them), delete horizon."""
    frame = (spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", version)
             .option("endingVersion", version).load(log.path))
    net = {"update_preimage": "delete", "update_postimage": "insert"}
    return sorted((row["offset"], net.get(row["_change_type"], row["_change_type"]), row["_delete_horizon"])
                  for row in frame.select("offset", "_change_type", "_delete_horizon").collect())


class Twins:
    """Two partitions with deletion vectors on, fed the same records: one compacted by
    Delta's MERGE, one by deletion vectors committed here."""

    def __init__(self, spark, folder, monkeypatch):
        self.spark, self.monkeypatch = spark, monkeypatch
        self.topics = {}
        for way in ("merge", "vectors"):
            topic = Topic(spark, Warehouse.resolve(str(folder / way)), parse_spec(SPEC, "test"))
            topic.create()
            spark.sql(f"ALTER TABLE {delta_table_sql(topic.partition(0).path)} SET TBLPROPERTIES ({ON})")
            self.topics[way] = topic

    def produce(self, first: int, count: int, keys: int) -> None:
        for topic in self.topics.values():
            _produce(topic, first, count, keys, NOW)

    def compact(self, now: int) -> dict:
        results = {}
        for way, topic in self.topics.items():
            log = topic.partition(0)
            with self.monkeypatch.context() as patch:
                if way == "merge":
                    patch.setattr(compaction_vectors, "commit_locally", lambda *a, **k: compaction_vectors.NOT_LOCAL)
                results[way] = compaction.execute(log, compaction.plan(log, now, force=True))
            assert results[way].committed, way
        return results

    def assert_same(self, results: dict) -> tuple[dict, dict]:
        merge, vectors = (self.topics[way].partition(0) for way in ("merge", "vectors"))
        assert _rows(vectors) == _rows(merge)
        versions = {way: result.version_after for way, result in results.items()}
        assert _net_feed(self.spark, vectors, versions["vectors"]) == _net_feed(self.spark, merge, versions["merge"])
        infos = {way: next(a["commitInfo"] for a in _actions(self.topics[way].partition(0).path, versions[way])
                           if "commitInfo" in a) for way in versions}
        assert NO_JVM in infos["vectors"]["engineInfo"] and "executionTimeMs" in infos["merge"]["operationMetrics"]
        assert infos["vectors"]["operation"] == infos["merge"]["operation"] == "MERGE"
        ours = dict(infos["vectors"]["operationMetrics"])
        theirs = {k: v for k, v in infos["merge"]["operationMetrics"].items() if k in ours}
        # Delta's MERGE writes the change data as files; here Delta's feed reads it from the vectors
        assert ours.pop("numTargetChangeFilesAdded") == "0"
        theirs.pop("numTargetChangeFilesAdded", None)
        for sized in ("numTargetBytesAdded", "numTargetBytesRemoved"):  # (Arrow's files and Spark's differ in size)
            assert (ours.pop(sized) == "0") == (theirs.pop(sized) == "0")
        assert ours == theirs
        counts = ("numFiles", "numDeletedRecordsOpt", "numDeletionVectorsOpt", "deletedRecordCountsHistogramOpt")
        checksums = {way: _checksum(self.topics[way].partition(0).path, versions[way]) for way in versions}
        assert {k: checksums["vectors"].get(k) for k in counts} == {k: checksums["merge"].get(k) for k in counts}
        return infos["vectors"], checksums["vectors"]


@pytest.fixture
def twins(spark, tmp_path, monkeypatch):
    return Twins(spark, tmp_path, monkeypatch)


def test_a_compaction_s_deletion_vectors_commit_what_delta_s_merge_commits_run_after_run(spark, twins):
    twins.produce(0, 60, 13)  # tombstones among them: the first run stamps them
    info, checksum = twins.assert_same(twins.compact(NOW))
    metrics = info["operationMetrics"]
    assert int(metrics["numTargetRowsMatchedUpdated"]) > 0 and int(metrics["numTargetDeletionVectorsAdded"]) > 0
    twins.produce(60, 10, 5)  # losers in a file that has a vector already: its vector grows
    info, checksum = twins.assert_same(twins.compact(NOW))
    assert int(info["operationMetrics"]["numTargetDeletionVectorsUpdated"]) > 0
    twins.produce(100, 13, 13)  # every key again: files every record of which lost are removed
    twins.produce(113, 13, 13)
    info, checksum = twins.assert_same(twins.compact(NOW + 2 * DAY_MS))  # and expired tombstones go
    assert int(info["operationMetrics"]["numTargetFilesRemoved"]) > 0
    vectors = twins.topics["vectors"].partition(0)
    for add in checksum["allFiles"]:  # each vector written here reads back as Delta's reader read it
        if add.get("deletionVector"):
            assert deletion_vectors.hidden_rows(vectors.path, add["deletionVector"]) is not None


def test_a_vector_changed_since_the_decision_leaves_the_run_to_delta_s_merge(spark, twins):
    """The owner deletes records between the plan and the commit (Delta's DELETE, with
    deletion vectors): the row indexes the run decided may no longer be the file's, so
    nothing is written here and Delta's MERGE commits the run."""
    twins.produce(0, 40, 7)
    log = twins.topics["vectors"].partition(0)
    before = set(os.listdir(log.path))

    def owner(point, context):
        if context["log"].path == log.path:
            spark.sql(f"DELETE FROM {delta_table_sql(log.path)} WHERE offset = 39")

    with faults.installed("compact.before_commit", owner):
        result = compaction.execute(log, compaction.plan(log, NOW, force=True))
    info = next(a["commitInfo"] for a in _actions(log.path, result.version_after) if "commitInfo" in a)
    assert info["operation"] == "MERGE" and "executionTimeMs" in info["operationMetrics"], "not Delta's MERGE"
    named = {os.path.basename(deletion_vectors.file_of(log.path, action[kind]["deletionVector"]))
             for version in range(result.version_after + 1) for action in _actions(log.path, version)
             for kind in ("add", "remove") if action.get(kind, {}).get("deletionVector")}
    on_disk = {name for name in set(os.listdir(log.path)) - before if name.startswith("deletion_vector_")}
    assert len(on_disk) == 2 and on_disk == named  # the owner's DELETE's and Delta's MERGE's: none left here
    assert 39 not in {row[0] for row in _rows(log)}


def test_a_vector_that_does_not_hide_what_the_run_decided_is_not_committed(spark, tmp_path):
    """``commit_locally`` with changes naming a row the file's vector already hides (a
    decision not made from this version): nothing is written."""
    import pyarrow as pa

    topic = Topic(spark, Warehouse.resolve(str(tmp_path / "w")), parse_spec(SPEC, "test"))
    topic.create()
    log = topic.partition(0)
    spark.sql(f"ALTER TABLE {delta_table_sql(log.path)} SET TBLPROPERTIES ({ON})")
    _produce(topic, 0, 20, 20, NOW)
    spark.sql(f"DELETE FROM {delta_table_sql(log.path)} WHERE offset = 3")
    version = log.snapshot().version
    add = _checksum(log.path, version)["allFiles"][0]
    assert deletion_vectors.hidden_rows(log.path, add["deletionVector"]) == BitMap64([3])
    before = sorted(os.listdir(log.path)), sorted(os.listdir(os.path.join(log.path, "_delta_log")))
    changes = pa.table({"offset": [3], "_action": ["delete"], "_horizon": pa.array([None], pa.timestamp("ms", "UTC")),
                        "_file": [add["path"]], "_row": [3]})
    from framework.log.delta_commits import USER_METADATA_CONF, session_confs

    with session_confs(spark, {USER_METADATA_CONF: "{}"}):
        made = compaction_vectors.commit_locally(spark, log.path, "app", 1, version, changes)
    assert made == compaction_vectors.NOT_LOCAL
    assert (sorted(os.listdir(log.path)), sorted(os.listdir(os.path.join(log.path, "_delta_log")))) == before


# ------------------------------- a compaction check counted by Arrow over deletion vectors
def _check_of(log, result, version_after: int | None = None):
    from framework.stages.stage_check import StageCheck

    plan, after = result.plan, version_after or result.version_after
    return StageCheck(log=log, stage="compact", now_ms=plan.now_ms, version_before=result.version_before,
                      version_after=after, before=None, state_before=plan.snapshot.state,
                      state_after=log.states_at([after])[after],
                      first_uncleanable_offset=plan.measure.first_uncleanable_offset,
                      cleaned_up_to=result.cleaned_up_to)


def _counted_both_ways(spark, warehouse, check, monkeypatch):
    """``check`` counted by Arrow (``arrow_scope.counted``) and measured by Spark's scoped
    route (the size floor lowered, Arrow's count turned off)."""
    from framework.checks import arrow_scope, changes
    from framework.checks.guarantees import Guarantees

    found = arrow_scope.counted(check, check.state_after, changes.dirty_from("compact", check.state_before))
    with monkeypatch.context() as patched:
        patched.setattr(changes, "MIN_SCOPED_RECORDS", 0)
        patched.setattr(changes, "MAX_WHOLE_SHARE", 1.0)
        patched.setattr(arrow_scope, "counted", lambda *args: None)
        by_spark = Guarantees(spark, warehouse).measure(check)
    return found, by_spark


@pytest.mark.parametrize("indexed", [False, True], ids=["keys read", "keys looked up"])
def test_arrow_counts_a_check_over_deletion_vectors_as_spark_does(spark, tmp_path, monkeypatch, indexed):
    """The compaction check of a table with deletion vectors, counted by Arrow from the
    files and their vectors (``arrow_scope``), pinned to Spark's scoped check (which reads
    Delta's change data feed, itself diffing the vectors): two healthy runs, the second
    growing the vectors the first wrote; then corruptions made by Delta's own DELETE and
    UPDATE with deletion vectors on (a winner removed; a kept record changed, the feed then
    written as files), each of which both count as a violation; and a kept record deleted
    and appended back as it was, which neither counts as one. The third run deletes from a file with no tombstone, whose
    deleted rows Arrow reads without their values, unless the change makes their offset again.
    Keys looked up: every file indexed (the size floor lowered), the compactions build the
    indexes, and the check reads the after version's and the deleted rows' keys and offsets
    from them (``key_index``)."""
    from framework.checks import arrow_scope
    from framework.checks.guarantees import _context
    from framework.log import key_index

    looked_up = []
    if indexed:
        monkeypatch.setattr(key_index, "MIN_ROWS", 1)
        shipped_offsets = key_index.KeyIndex.offsets_at
        monkeypatch.setattr(key_index.KeyIndex, "offsets_at", lambda self, rows: (
            looked_up.append("deleted rows"), shipped_offsets(self, rows))[1])
        shipped_rows = key_index.KeyIndex.rows_of
        monkeypatch.setattr(key_index.KeyIndex, "rows_of", lambda self, wanted: (
            looked_up.append("in scope"), shipped_rows(self, wanted))[1])

    shipped, read_names = arrow_scope._rows_at, []
    monkeypatch.setattr(arrow_scope, "_rows_at", lambda parquet, picked, names=arrow_scope._NAMES: (
        read_names.append(names), shipped(parquet, picked, names))[1])

    warehouse = Warehouse.resolve(str(tmp_path / "w"))
    topic = Topic(spark, warehouse, parse_spec(SPEC, "test"))
    topic.create()
    log = topic.partition(0)
    table = delta_table_sql(log.path)
    spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ({ON})")
    cases = []
    for first, count, keys, now in ((0, 60, 13, NOW), (60, 10, 5, NOW), (70, 40, 20, NOW)):
        if first == 70:  # a file of keys k0..k19 with no tombstone, then updates of half of them
            _produce(topic, first, 20, 20, NOW, tombstones=False)
            compaction.execute(log, compaction.plan(log, now, force=True))
            first, count, keys = 90, 10, 10
        _produce(topic, first, count, keys, NOW, tombstones=first < 90)
        result = compaction.execute(log, compaction.plan(log, now, force=True))
        assert NO_JVM in next(a["commitInfo"] for a in _actions(log.path, result.version_after)
                              if "commitInfo" in a)["engineInfo"], "not committed as deletion vectors here"
        cases.append((f"healthy run from offset {first}", _check_of(log, result)))
    winner = max(row[0] for row in _rows(log))
    spark.sql(f"DELETE FROM {table} WHERE offset = {winner}")
    cases.append(("a winner deleted", _check_of(log, result, log.snapshot().version)))
    kept = min(row[0] for row in _rows(log))  # of the file with no tombstone
    record = spark.createDataFrame(log.read().where(f"offset = {kept}").collect(), log.read().schema)
    spark.sql(f"DELETE FROM {table} WHERE offset = {kept}")
    record.write.format("delta").mode("append").save(log.path)  # as it was: no violation of its own
    cases.append(("and a kept record deleted and appended back", _check_of(log, result, log.snapshot().version)))
    spark.sql(f"UPDATE {table} SET value = 'changed again' WHERE offset = {kept}")
    cases.append(("and a kept record changed", _check_of(log, result, log.snapshot().version)))
    looked_up.clear()  # (the compactions' own lookups)
    for what, check in cases:
        found, by_spark = _counted_both_ways(spark, warehouse, check, monkeypatch)
        assert found is not None, what
        counts, bounds, scope = found
        assert counts == by_spark.counts, what
        assert bool(counts) == (not what.startswith("healthy")), what
        context = {"partition": check.log.partition, **_context("compact", scope, bounds, check.now_ms)}
        assert context == by_spark.context, what
    assert any("value" not in names for names in read_names), "no deleted row read without its value"
    assert set(looked_up) == ({"deleted rows", "in scope"} if indexed else set())


# ----------------------------------------------- a retention cut over deletion vectors
RETAINED = {"topic": "retained", "partitions": 1,
            "config": {"cleanup.policy": "compact,delete", "min.cleanable.dirty.ratio": 0.0,
                       "delete.retention.ms": DAY_MS, "retention.ms": DAY_MS}}


def test_a_retention_cut_over_deletion_vectors_plans_and_commits_what_delta_does(spark, tmp_path, monkeypatch):
    """Twin partitions with deletion vectors on, compacted alike (the files their vectors
    hide rows of have statistics that only bound their records), then cut by time, by size,
    by deleteRecords inside a file with a vector, and by consumed retention at an offset a
    vector hides. One twin plans and cuts as before this route: its records read by Delta
    (no file list) and cut by Delta's DELETE, which
    marks them in vectors. The other reads its files and their vectors by Arrow and
    commits the DELETE itself, without the JVM (``retention_rewrite.vector_cut``). Each
    cut: the same boundaries, counts and log state, the same records, the same change
    data, Delta's DELETE's operation metrics and the same checksum counts."""
    from framework.stages import retention, retention_rewrite

    twins = {}
    for way in ("delta", "arrow"):
        topic = Topic(spark, Warehouse.resolve(str(tmp_path / way)), parse_spec(RETAINED, "test"))
        topic.create()
        spark.sql(f"ALTER TABLE {delta_table_sql(topic.partition(0).path)} SET TBLPROPERTIES ({ON})")
        twins[way] = topic
    for first, count, keys in ((0, 60, 13), (60, 20, 7)):
        for topic in twins.values():
            log = topic.partition(0)
            _produce(topic, first, count, keys, NOW)
            assert compaction.execute(log, compaction.plan(log, NOW, force=True)).committed
            log.roll_segment(log.snapshot())  # a new segment: a cut may take the one before
    assert any(not stats.tight for stats in retention._listed_with_stats(
        twins["arrow"].partition(0), twins["arrow"].partition(0).snapshot())[1]), "no file with a vector"

    def cut(way, spec, act):
        log = Topic(spark, twins[way].warehouse, parse_spec(spec, "test")).partition(0)
        with monkeypatch.context() as patch:
            if way == "delta":
                patch.setattr(retention, "_listed_with_stats", lambda log, snap: (None, None))
                patch.setattr(retention_rewrite, "vector_cut", None)  # (never reached)
            return log, act(log)

    def same(spec, act, expected_boundaries):
        (delta_log, theirs), (log, ours) = (cut(way, spec, act) for way in ("delta", "arrow"))
        assert ours.committed and theirs.committed
        if ours.plan is not None:
            assert (ours.plan.boundaries, ours.plan.new_log_start) == (theirs.plan.boundaries,
                                                                     theirs.plan.new_log_start)
            assert set(ours.plan.boundaries) == expected_boundaries
        assert (ours.removed_records, ours.removed_bytes, ours.state_after) == (
            theirs.removed_records, theirs.removed_bytes, theirs.state_after)
        assert ours.removed_records > 0
        assert _rows(log) == _rows(delta_log)
        assert _net_feed(spark, log, ours.version_after) == _net_feed(spark, delta_log, theirs.version_after)
        infos = [next(a["commitInfo"] for a in _actions(each.path, version) if "commitInfo" in a)
                 for each, version in ((log, ours.version_after), (delta_log, theirs.version_after))]
        assert NO_JVM in infos[0]["engineInfo"] and "executionTimeMs" in infos[1]["operationMetrics"]
        assert infos[0]["operation"] == infos[1]["operation"] == "DELETE"
        metrics = infos[0]["operationMetrics"]
        assert metrics == {k: v for k, v in infos[1]["operationMetrics"].items() if k in metrics}
        counts = ("numFiles", "numDeletedRecordsOpt", "numDeletionVectorsOpt", "deletedRecordCountsHistogramOpt")
        checksums = [_checksum(each.path, version) for each, version in ((log, ours.version_after),
                                                                         (delta_log, theirs.version_after))]
        assert [{k: c.get(k) for k in counts} for c in checksums] == [{k: checksums[1].get(k) for k in counts}] * 2
        return metrics

    # by time: what is older than a day at NOW + 55 (offset 55's timestamp on; compaction left 47 to 59 of the first 60)
    metrics = same(RETAINED, lambda log: retention.execute(log, retention.plan(log, NOW + 55, None)), {"time"})
    assert int(metrics["numRemovedFiles"]) > 0 or int(metrics["numDeletionVectorsAdded"]) > 0
    # by size: half the bytes the log holds now
    records, total = twins["arrow"].partition(0).snapshot().size_from_metadata()
    by_size = {**RETAINED, "config": {**RETAINED["config"], "retention.ms": -1, "retention.bytes": total // 2}}
    same(by_size, lambda log: retention.execute(log, retention.plan(log, NOW + 55, None)), {"size"})
    # deleteRecords inside a file one of whose rows a vector hides already: its vector grows
    kept = [row[0] for row in _rows(twins["arrow"].partition(0))]
    metrics = same(RETAINED, lambda log: retention.delete_records(log, kept[len(kept) // 2]), set())
    assert int(metrics["numDeletionVectorsUpdated"]) + int(metrics["numDeletionVectorsAdded"]) > 0
    # by consumed retention (KIP-68), every record consumed long enough ago, at a group's
    # offset a vector hides: the cut lands on the next record shown. First more records,
    # compacted alike: 90 to 92 supersede 82, 85 and 87, which vectors then hide
    raw = [(i, {"key": f"c{[*range(10), 2, 5, 7][i]}", "value": "v", "timestamp": NOW - DAY_MS + 80 + i,
                "headers": {}}) for i in range(13)]
    for topic in twins.values():
        log = topic.partition(0)
        produce(topic, parse_records(raw, topic.spec, "test"), NOW)
        assert compaction.execute(log, compaction.plan(log, NOW, force=True)).committed
    kept = [row[0] for row in _rows(twins["arrow"].partition(0))]
    assert {82, 85, 87}.isdisjoint(kept) and {84, 86} <= set(kept)
    hidden = 85  # the group's committed offset
    by_consumed = {**RETAINED, "config": {**RETAINED["config"], "retention.ms": -1, "consumed.retention.ms": 1,
                                         "consumed.retention.groups": ["g"]}}
    same(by_consumed, lambda log: retention.execute(log, retention.plan(log, NOW + DAY_MS, {"g": hidden})),
         {"consumed"})
    assert [row[0] for row in _rows(twins["arrow"].partition(0))][0] == 86
