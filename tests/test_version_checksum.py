"""A pinned version read from the files its checksum lists is the version Delta reads.

The guarantee checks of a small partition read the two versions they pair from the data
files ``_delta_log/<version>.crc`` lists (``framework.log.version_checksum.read_plain``),
not through Delta's time travel, which rebuilds the version's snapshot state first. These
tests pin that read to Delta's on every version of real partitions (segments rolled,
tombstones stamped, records compacted, retained, deleted and bin-packed), and show where
it must step aside: deletion vectors, no checksum, column mapping, a file outside its
partition's folder, a path Spark would read as a glob.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil

import pytest

from framework.checks.guarantees import Guarantees
from framework.clients.produce import produce
from framework.clients.records import parse_records
from framework.log import file_stats, version_checksum
from framework.log.commit_log import read_commits
from framework.log.partition_log import PartitionLog
from framework.log.topic import Topic
from framework.log.warehouse import delta_table_sql
from framework.spec import MIB, parse_spec
from framework.stages import arrow_actions, optimize, retention
from framework.stages.maintenance import Maintenance

NOW = 1_767_225_600_000
DAY_MS = 86_400_000
SPEC = {"topic": "listed", "partitions": 1,
        "config": {"cleanup.policy": "compact,delete", "min.cleanable.dirty.ratio": 0.0, "segment.bytes": MIB,
                   "retention.ms": 3 * DAY_MS, "delete.retention.ms": DAY_MS}}


def _produce(topic, spec, first: int, count: int, now: int, keys: int = 7) -> None:
    raw = [(i, {"key": f"k{(first + i) % keys}", "value": None if (first + i) % 5 == 0 else f"v{first + i}",
                "timestamp": now - DAY_MS + i, "headers": {"h": f"{first + i}\n"}})
           for i in range(count)]
    produce(topic, parse_records(raw, spec, "test"), now)


def _rows(frame) -> list[tuple]:
    return sorted((tuple(row) for row in frame.collect()), key=repr)


def _checksum_path(log, version: int) -> str:
    return os.path.join(log.path, "_delta_log", f"{version:020d}.crc")


@pytest.fixture(scope="module")
def lived(spark, tmp_path_factory):
    """A topic through a life: appends in small files over three segments, bin-packing,
    compactions that remove records and stamp tombstones, retention by time and
    delete-records; every version stays on disk."""
    from framework.log.warehouse import Warehouse

    warehouse = Warehouse.resolve(str(tmp_path_factory.mktemp("lived")))
    spec = parse_spec(SPEC, "test")
    topic = Topic(spark, warehouse, spec)
    topic.create()
    log = topic.partition(0)
    for round_, now in enumerate((NOW - 4 * DAY_MS, NOW - 2 * DAY_MS, NOW)):
        if round_:
            log.roll_segment(log.snapshot())
        for call in range(3):  # small files
            _produce(topic, spec, 40 * round_ + 10 * call, 10, now, keys=60)
        packing = optimize.plan(log)
        assert packing.due
        optimize.execute(log, packing)
        assert not Maintenance(spark, warehouse, [spec], record_history=False).run(now, force=True).failed
    lowest = log.read().agg({"offset": "min"}).collect()[0][0]
    retention.delete_records(log, lowest + 1)
    return topic


def _not_through_delta():
    raise AssertionError("read through Delta, not from the files the checksum lists")


def test_every_version_read_from_its_files_is_the_version_delta_reads(spark, lived):
    versions = 0
    segments = set()
    for log in lived.partitions():
        for version in range(log.snapshot().version + 1):
            files = version_checksum.plain_files(log.path, version)
            assert files is not None, f"{log.name} version {version}: its checksum lists no plain files"
            segments.update(os.path.dirname(os.path.relpath(p, log.path)) for p in files.paths)
            from_files = version_checksum.read_plain(spark, log.path, version, _not_through_delta)
            from_delta = log.read(version)
            assert [(f.name, f.dataType) for f in from_files.schema] == [(f.name, f.dataType) for f in from_delta.schema]
            # the spec's check against the tables reads the schema from the checksum too
            assert version_checksum.schema(log.path, version) == from_delta.schema, f"{log.name} version {version}"
            assert _rows(from_files) == _rows(from_delta), f"{log.name} version {version}"
            # the scoped checks' record counts come from the files' statistics
            assert version_checksum.record_count(files) == from_delta.count(), f"{log.name} version {version}"
            versions += 1
    assert versions >= 10 and len(segments) >= 3, (versions, segments)
    # the life did what it says: records compacted and retained away, tombstones stamped,
    # files bin-packed, records deleted
    log = lived.partition(0)
    operations = {commit.operation for commit in read_commits(spark, log.path)}
    assert {"MERGE", "DELETE", "OPTIMIZE"} <= operations, operations
    latest = log.read()
    assert latest.count() < 60 and latest.where("_delete_horizon IS NOT NULL").count() > 0


def test_a_version_s_files_pruned_to_an_offset_range_hold_every_record_of_it(spark, lived):
    """What the compaction reads of each branch (the dirty section, the clean one below it):
    the listed files less those whose offset statistics rule the range out hold exactly
    the records of that range that all of them hold (which the test above pins to Delta's
    read), and the pruning leaves files out. Every version, two cuts each way, in one
    query a side."""
    from functools import reduce

    from pyspark.sql import functions as F

    log = lived.partition(0)
    pruned, from_files, from_whole = 0, [], []
    for version in range(log.snapshot().version + 1):
        files = version_checksum.plain_files(log.path, version)
        stats = [file_stats.of(add) for add in files.adds]
        if not stats:
            continue
        low, high = min(s.min_offset for s in stats), max(s.max_offset for s in stats)
        whole = version_checksum.frame_of(spark, files)
        for cut in sorted({low, (low + high) // 2}):
            for start, end in ((cut, None), (None, cut)):
                kept = version_checksum.holding_offsets(files, start, end)
                pruned += len(files.paths) - len(kept.paths)
                in_range = (F.col("offset") >= (low if start is None else start)) & (
                    F.col("offset") < (high + 1 if end is None else end))
                label = F.lit(f"version {version}, [{start}, {end})").alias("range")
                from_files.append(version_checksum.frame_of(spark, kept).where(in_range).select(label, "*"))
                from_whole.append(whole.where(in_range).select(label, "*"))
    union = [reduce(lambda left, right: left.unionByName(right), frames) for frames in (from_files, from_whole)]
    assert len(from_files) >= 30 and pruned > 0, (len(from_files), pruned)
    assert _rows(union[0]) == _rows(union[1])


def test_a_file_without_statistics_leaves_the_record_count_to_the_check(lived):
    log = lived.partition(0)
    files = version_checksum.plain_files(log.path, log.snapshot().version)
    assert files.adds and version_checksum.record_count(files) > 0
    unknown = ({**files.adds[0], "stats": None},) + files.adds[1:]
    assert version_checksum.record_count(dataclasses.replace(files, adds=unknown)) is None
    assert version_checksum.record_count(None) is None


def test_a_version_with_deletion_vectors_is_read_through_delta(spark, warehouse):
    spec = parse_spec({**SPEC, "topic": "hidden"}, "test")
    topic = Topic(spark, warehouse, spec)
    topic.create()
    log = topic.partition(0)
    spark.sql(f"ALTER TABLE {delta_table_sql(log.path)} SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    _produce(topic, spec, 0, 30, NOW)
    log.delta_table().delete("offset % 3 = 0")
    version = log.snapshot().version
    assert any(add.get("deletionVector") for add in version_checksum.live_adds(log.path, version))
    assert version_checksum.plain_files(log.path, version) is None
    assert version_checksum.read_plain(spark, log.path, version, lambda: "through Delta") == "through Delta"
    assert _rows(log.read_files(version)) == _rows(log.read(version))
    assert log.read_files(version).count() == 20


def test_a_small_version_with_deletion_vectors_pinned_with_no_window_is_read_from_its_files_and_vectors(
        spark, tmp_path):
    """With no time-travel window Delta refuses the version a stage started from once the
    stage committed; a small partition's is then pinned without a session
    (``stage_check.pinned_before``): a reader of its files less the rows their vectors hide
    (``version_checksum.frame_of``, by Parquet's row index), which reads, after the commit,
    every column of what Delta read before it."""
    from framework.deferred_session import DeferredSession
    from framework.log.warehouse import Warehouse
    from framework.stages.stage_check import pinned_before

    spec = parse_spec({**SPEC, "topic": "hidden", "config": {**SPEC["config"], "time.travel.retention.ms": 0}},
                      "test")
    topic = Topic(spark, Warehouse.resolve(str(tmp_path / "w")), spec)
    topic.create()
    log = topic.partition(0)
    spark.sql(f"ALTER TABLE {delta_table_sql(log.path)} SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    for first in (0, 30):
        _produce(topic, spec, first, 30, NOW)
        log.delta_table().delete(f"offset % 3 = {first // 30}")  # the first file marked twice, the second once
    snap = log.snapshot()
    expected = _rows(log.read(snap.version))
    marked = [add for add in version_checksum.live_adds(log.path, snap.version) if add.get("deletionVector")]
    assert len(marked) >= 2 and len(expected) == 30
    deferred = DeferredSession(lambda: spark)
    pinned = pinned_before(PartitionLog(deferred, log.warehouse, spec, 0), snap)
    assert pinned is not None and not deferred.started
    log.delta_table().delete("offset = 1")  # the stage's commit: Delta no longer reads the version
    for suffix in ("json", "crc"):  # nor could: the reader reads data and vector files alone
        os.unlink(os.path.join(log.path, "_delta_log", f"{snap.version:020d}.{suffix}"))
    assert _rows(pinned()) == expected


def test_without_a_checksum_or_with_column_mapping_the_read_goes_through_delta(spark, warehouse):
    spec = parse_spec({**SPEC, "topic": "plainer"}, "test")
    topic = Topic(spark, warehouse, spec)
    topic.create()
    log = topic.partition(0)
    _produce(topic, spec, 0, 10, NOW)
    version = log.snapshot().version
    assert version_checksum.plain_files(log.path, version) is not None
    assert version_checksum.newest_schema(spark, log.path) == log.read().schema
    os.remove(_checksum_path(log, version))
    assert version_checksum.plain_files(log.path, version) is None
    assert _rows(log.read_files(version)) == _rows(log.read(version))
    assert version_checksum.newest_schema(spark, log.path) is None and log.schema() == log.read().schema

    spark.sql(f"ALTER TABLE {delta_table_sql(log.path)} SET TBLPROPERTIES ("
              "'delta.minReaderVersion' = '2', 'delta.minWriterVersion' = '5', 'delta.columnMapping.mode' = 'name')")
    mapped = log.snapshot().version
    assert os.path.exists(_checksum_path(log, mapped))
    assert version_checksum.plain_files(log.path, mapped) is None


def test_a_file_outside_its_partition_folder_or_a_glob_in_the_path_is_not_read_plainly(lived, tmp_path):
    log = lived.partition(0)
    version = log.snapshot().version
    with open(_checksum_path(log, version), encoding="utf-8") as handle:
        checksum = json.load(handle)
    assert checksum["metadata"]["partitionColumns"] == ["_segment"]

    copy = tmp_path / "moved"
    shutil.copytree(log.path, copy)
    first = checksum["allFiles"][0]
    first["partitionValues"] = {"_segment": str(int(first["partitionValues"]["_segment"]) + 1)}
    with open(copy / "_delta_log" / f"{version:020d}.crc", "w", encoding="utf-8") as handle:
        json.dump(checksum, handle)
    assert version_checksum.plain_files(str(copy), version) is None

    globbed = tmp_path / "tables[1]"
    shutil.copytree(log.path, globbed)
    assert version_checksum.live_adds(str(globbed), version) is not None  # the listing itself is fine
    assert version_checksum.plain_files(str(globbed), version) is None


def test_a_checksum_is_read_only_while_its_commit_names_the_same_transaction(lived, tmp_path):
    """A commit rewritten or broken behind Delta's back (Delta would refuse to read it) is
    never read around through the version's checksum, which still lists the old files."""
    log = lived.partition(0)
    version = log.snapshot().version
    commit_name = f"{version:020d}.json"
    for case in ("broken", "another transaction's"):
        copy = tmp_path / case
        shutil.copytree(log.path, copy)
        assert version_checksum.plain_files(str(copy), version) is not None
        commit = copy / "_delta_log" / commit_name
        if case == "broken":
            commit.write_text("not json\n")
        else:
            lines = commit.read_text().splitlines()
            info = next(i for i, line in enumerate(lines) if line.startswith('{"commitInfo"'))
            action = json.loads(lines[info])
            action["commitInfo"]["txnId"] = "another"
            lines[info] = json.dumps(action)
            commit.write_text("\n".join(lines) + "\n")
        assert version_checksum.plain_files(str(copy), version) is None, case
        assert version_checksum.live_adds(str(copy), version) is None, case


@pytest.mark.parametrize("route", ["measured at once", "measured in a batch", "counted by Arrow"])
def test_a_small_partitions_stage_check_reads_its_versions_from_their_files(spark, warehouse, monkeypatch, route):
    """The compaction and its check read the versions they need from their files, and the
    check still passes: counted by Arrow in the driver (framework/checks/arrow_scope.py, a
    compaction check's first route), from the files with no Spark read; on Spark's routes
    (Arrow's count turned off), measured at once, through ``read_plain``, or counted in a
    batch (framework/checks/batched.py), in one scan of the files both versions' checksums list."""
    from framework.checks import arrow_scope, batched

    batches, count = [], batched.count
    counted_by_arrow, arrow_count = [], arrow_scope.counted
    if route == "counted by Arrow":
        monkeypatch.setattr(arrow_scope, "counted", lambda *args: (
            counted_by_arrow.append(arrow_count(*args)), counted_by_arrow[-1])[1])
    else:
        monkeypatch.setattr(arrow_scope, "counted", lambda *args: None)
    if route == "measured at once":
        monkeypatch.setattr(Guarantees, "batchable", lambda self, check, peers: False)
    else:
        monkeypatch.setattr(batched, "MIN_BATCH", 1)  # one partition's check, as a batch would read it
    monkeypatch.setattr(batched, "count", lambda session, checks, state_after: (
        batches.append([(c.version_before, c.version_after) for c in checks]), count(session, checks, state_after))[1])
    spec = parse_spec({**SPEC, "topic": f"checked-{route.split()[-1]}"}, "test")
    topic = Topic(spark, warehouse, spec)
    topic.create()
    _produce(topic, spec, 0, 30, NOW)
    read = []
    plain = version_checksum.read_plain

    def counted(session, path, version, through_delta):
        fell_back = []
        frame = plain(session, path, version, lambda: fell_back.append(version) or through_delta())
        read.append((version, not fell_back))
        return frame

    monkeypatch.setattr(version_checksum, "read_plain", counted)
    framed, through_delta = [], []
    frame_of, read_through_delta = version_checksum.frame_of, PartitionLog.read
    monkeypatch.setattr(version_checksum, "frame_of", lambda session, files: framed.append(files) or frame_of(session, files))
    monkeypatch.setattr(PartitionLog, "read", lambda self, version=None, as_of=None: (
        through_delta.append(version) or read_through_delta(self, version, as_of)))
    by_arrow, decide = [], arrow_actions.decide
    monkeypatch.setattr(arrow_actions, "decide", lambda log, plan, end: (
        lambda decided: by_arrow.append(decided is not None) or decided)(decide(log, plan, end)))
    run = Maintenance(spark, warehouse, [spec], validator=Guarantees(spark, warehouse),
                      record_history=False).run(NOW, stages=("compact",))
    assert not run.failed, [(p.error, p.failed_guarantees) for p in run.partitions]
    compacted = next(row for row in run.partitions[0].rows if row.stage == "compact")
    assert compacted.validation == "passed" and compacted.removed_records > 0
    # the check reads the version the compaction planned from and the one it made; the
    # compaction is decided by Arrow from the files (no Spark read), and nothing is read
    # through Delta's time travel
    assert by_arrow == [True]
    if route == "measured at once":
        assert read == [(compacted.version_before, True), (compacted.version_after, True)]
        assert len(framed) == 2 and through_delta == [] and batches == []
    elif route == "measured in a batch":
        assert read == [] and framed == [] and through_delta == []
        assert batches == [[(compacted.version_before, compacted.version_after)]]
    else:  # counted clean by Arrow: no Spark read, and no batch (nothing is left to count)
        assert len(counted_by_arrow) == 1 and counted_by_arrow[0] is not None and not counted_by_arrow[0][0]
        assert read == [] and framed == [] and through_delta == [] and batches == []
