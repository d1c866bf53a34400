"""A small partition's compaction written through Delta's transaction API is the MERGE.

``framework.stages.compaction_rewrite`` commits a small partition's compaction itself
(the touched files rewritten, their change data feed rows, one MERGE commit) where Delta's
MERGE cost ten Spark jobs; on a local table it commits without the JVM
(``file_rewrite.commit_locally``). These tests run the same compactions on twin
partitions, one through each path (Delta's MERGE, the rewrite through Delta's transaction,
the rewrite committed without the JVM), and require the same records (every column) and
the same change data feed rows at every step: a first run that removes superseded records
and stamps tombstones, a later one whose tombstones' horizons have passed, one that a
producer's append overtakes between the plan and the commit, and a table without a change
data feed. The commit made without the JVM records what the one through Delta records.
"""

from __future__ import annotations

import json
import os
from urllib.parse import unquote, urlparse

import pyarrow.parquet as pq
import pytest

from framework import faults
from framework.clients.produce import produce, produce_frame
from framework.clients.records import parse_records
from framework.log import arrow_files
from framework.log.commit_log import read_commits
from framework.log.delta_commits import session_confs
from framework.log.topic import Topic
from framework.log.warehouse import Warehouse, delta_table_sql
from framework.spec import parse_spec
from framework.stages import (
    arrow_actions,
    arrow_rewrite,
    compaction,
    compaction_rewrite,
    compaction_vectors,
    file_rewrite,
)
from tests.support.table_files import (
    data_files_on_disk,
    live_codecs,
    live_encodings,
    live_physical_types,
)
from tests.support.writers import arrow_writes

NOW = 1_767_225_600_000
DAY_MS = 86_400_000
SPEC = {"topic": "twin", "partitions": 1,
        "config": {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": 0.0, "delete.retention.ms": DAY_MS}}
PATHS = ("merge", "rewrite", "own commit")
#: what a commit made without the JVM names as its engine (``commit_files.commit_lines``)
NO_JVM = "(no JVM)"


def _produce(topic, first: int, count: int, now: int) -> None:
    raw = [(i, {"key": f"k{(first + i) % 9}", "value": None if (first + i) % 4 == 0 else f"v{first + i}",
                "timestamp": now - DAY_MS + first + i, "headers": {"h": f"{first + i}"}})
           for i in range(count)]
    produce(topic, parse_records(raw, topic.spec, "test"), now)


def _rows(log) -> list[tuple]:
    return sorted(tuple(row) for row in log.read().collect())


def _commit(spark, log, version: int):
    """The commit of ``version`` as the commit log reads it."""
    return next(c for c in read_commits(spark, log.path) if c.version == version)


def _commit_info(log, version: int) -> dict:
    """The ``commitInfo`` of ``version``, as its commit file holds it."""
    with open(os.path.join(log.path, "_delta_log", f"{version:020d}.json")) as handle:
        return next(json.loads(line)["commitInfo"] for line in handle if line.startswith('{"commitInfo"'))


def _feed(spark, log, version: int) -> list[tuple]:
    """The change data feed rows of one commit: offset, change type, delete horizon."""
    frame = (spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", version)
             .option("endingVersion", version).load(log.path))
    return sorted(tuple(row) for row in frame.select("offset", "_change_type", "_delete_horizon").collect())


class Twins:
    """One partition per path, fed the same records, compacted at the same clock."""

    def __init__(self, spark, folder, monkeypatch, writer: str = "arrow"):
        self.spark, self.monkeypatch, self.writer = spark, monkeypatch, writer
        self.topics = {}
        for path in PATHS:
            topic = Topic(spark, Warehouse.resolve(str(folder / path)), parse_spec(SPEC, "test"))
            topic.create()
            self.topics[path] = topic
        self.rewrites = []
        real = compaction_rewrite.rewrite
        monkeypatch.setattr(compaction_rewrite, "rewrite", lambda *a, **k: self.rewrites.append(1) or real(*a, **k))
        self.by_arrow = arrow_writes(monkeypatch, arrow_rewrite, "write", writer)
        self.by_arrow_locally = arrow_writes(monkeypatch, arrow_rewrite, "write_local", writer)
        #: whether the own commit path commits without the JVM (a run Spark decided, or whose
        #: planned files are gone at the commit, goes through Delta's transaction)
        self.without_jvm = True

    def produce(self, first: int, count: int, now: int) -> None:
        for topic in self.topics.values():
            _produce(topic, first, count, now)

    def compact(self, now: int) -> dict:
        """Compact both twins at ``now``; each twin's committed version."""
        versions = {}
        for path, topic in self.topics.items():
            log = topic.partition(0)
            with self.monkeypatch.context() as patch:
                if path == "merge":  # Delta's MERGE (with deletion vectors too, not those committed here)
                    patch.setattr(compaction_rewrite, "available", lambda *a: False)
                    patch.setattr(compaction_vectors, "commit_locally", lambda *a, **k: compaction_vectors.NOT_LOCAL)
                elif path == "rewrite":  # through Delta's transaction
                    patch.setattr(file_rewrite, "commit_locally", lambda *a, **k: file_rewrite.NOT_LOCAL)
                before, arrow_before = len(self.rewrites), len(self.by_arrow)
                locally_before = len(self.by_arrow_locally)
                result = compaction.execute(log, compaction.plan(log, now, force=True))
                assert len(self.rewrites) - before == (path != "merge"), f"{path}: the wrong path ran"
                own_merge = result.committed and "executionTimeMs" in _commit(
                    self.spark, log, result.version_after).metrics
                no_jvm = result.committed and NO_JVM in _commit_info(log, result.version_after)["engineInfo"]
                if path == "own commit" and result.removed_records and not own_merge:
                    # Arrow writes it without the JVM; when Arrow declines, Delta's transaction commits
                    wrote = {"arrow": [True], "spark": [], "arrow declines": [False]}[self.writer]
                    wrote = wrote if self.without_jvm else []
                    assert self.by_arrow_locally[locally_before:] == wrote, self.writer
                    assert no_jvm == (wrote == [True]), "committed through the wrong route"
                if path == "rewrite" and result.removed_records and not own_merge:  # the rewrite wrote it
                    expected = {"arrow": [True], "spark": [], "arrow declines": [False]}[self.writer]
                    assert self.by_arrow[arrow_before:] == expected, self.writer
                    assert not no_jvm
            assert result.committed
            versions[path] = result.version_after
        return versions

    def assert_same(self, versions: dict) -> None:
        merge = self.topics["merge"].partition(0)
        rows, feed = _rows(merge), _feed(self.spark, merge, versions["merge"])  # (read once for both twins)
        for path in PATHS[1:]:
            rewrite = self.topics[path].partition(0)
            assert _rows(rewrite) == rows, path
            assert _feed(self.spark, rewrite, versions[path]) == feed, path


@pytest.fixture
def twins(spark, tmp_path, monkeypatch):
    return Twins(spark, tmp_path, monkeypatch)


def removed_by(info: dict) -> int:
    """The records a compaction commit's bookkeeping says it removed."""
    return json.loads(info["userMetadata"])["topiclake"]["removed"]


def _statistics_hold(spark, log) -> None:
    """Each live file's statistics say what the file holds: its records, its lowest and
    highest offset, its records without a delete horizon (read by Spark, file by file)."""
    from pyspark.sql import functions as F

    per_file = {row["f"]: row for row in log.read().groupBy(F.col("_metadata.file_name").alias("f")).agg(
        F.count("*").alias("n"), F.min("offset").alias("lo"), F.max("offset").alias("hi"),
        F.count(F.when(F.col("_delete_horizon").isNull(), 1)).alias("open")).collect()}
    with open(os.path.join(log.path, "_delta_log", f"{log.snapshot().version:020d}.crc")) as handle:
        adds = json.load(handle)["allFiles"]
    assert len(adds) == len(per_file)
    for add in adds:
        stats, held = json.loads(add["stats"]), per_file[os.path.basename(unquote(add["path"]))]
        assert (stats["numRecords"], stats["minValues"]["offset"], stats["maxValues"]["offset"],
                stats["nullCount"]["_delete_horizon"]) == (held["n"], held["lo"], held["hi"], held["open"]), add


def _offset_ranges(spark, log) -> list[tuple[int, int]]:
    """Each live data file's lowest and highest offset, in order."""
    from pyspark.sql import functions as F

    files = log.read().groupBy(F.col("_metadata.file_name")).agg(F.min("offset").alias("lo"), F.max("offset").alias("hi"))
    return sorted((row["lo"], row["hi"]) for row in files.collect())


@pytest.mark.parametrize("layout, writer", [
    *((layout, writer) for writer in ("arrow", "spark")
      for layout in ("small, one task", "large, by splits", "large, read through Delta")),
    # Arrow reading and writing a touched file a few records at a time (a segment's small
    # files sorted as one, then written a few at a time), and gathering the change feed's
    # rows across them (arrow_rewrite.ROWS_A_BATCH)
    *((layout, "arrow, in batches of 4 records") for layout in ("small, one task", "large, by splits"))])
def test_a_rewrite_commits_what_a_merge_commits_run_after_run(spark, tmp_path, monkeypatch, layout, writer):
    batched = writer.endswith("4 records")
    if batched:
        monkeypatch.setattr(arrow_rewrite, "ROWS_A_BATCH", 4)
    twins = Twins(spark, tmp_path, monkeypatch, writer.split(",")[0])
    if layout.startswith("large"):
        # a large partition: its touched files written in the splits they were read in
        monkeypatch.setattr(file_rewrite, "ONE_TASK_BYTES", 0)
    if layout.endswith("through Delta"):
        # as for a version whose checksum lists no files (Delta lists up to 50): read through
        # Delta's time travel, each record's file named by the scan's metadata (and decided by
        # Spark: Arrow decides only a version whose files are listed)
        monkeypatch.setattr(compaction, "_offsets_reader", compaction._through_delta)
        monkeypatch.setattr(arrow_actions, "decide", lambda *args: None)
        twins.without_jvm = False  # (Spark's changes)
    twins.produce(0, 40, NOW - 2 * DAY_MS)
    first = twins.compact(NOW - 2 * DAY_MS)  # superseded records removed, tombstones stamped
    twins.assert_same(first)
    kinds = {row[1] for row in _feed(spark, twins.topics["rewrite"].partition(0), first["rewrite"])}
    assert kinds == {"delete", "update_preimage", "update_postimage"}

    twins.produce(40, 25, NOW)
    second = twins.compact(NOW)  # the first run's tombstones are past their horizon
    twins.assert_same(second)

    log = twins.topics["rewrite"].partition(0)
    commit = _commit(spark, log, second["rewrite"])
    assert commit.operation == "MERGE"
    merged = _commit(spark, twins.topics["merge"].partition(0), second["merge"])
    assert set(commit.metrics) <= set(merged.metrics), "a metric Delta's MERGE does not write"
    # the commit made without the JVM records what the one through Delta's transaction records
    own_log = twins.topics["own commit"].partition(0)
    own, through_delta = _commit_info(own_log, second["own commit"]), _commit_info(log, second["rewrite"])
    assert (NO_JVM in own["engineInfo"]) == (writer != "spark" and twins.without_jvm), own["engineInfo"]
    assert {k: own[k] for k in ("operation", "operationParameters", "operationMetrics", "readVersion",
                                "isolationLevel", "isBlindAppend")} == {
        k: through_delta[k] for k in ("operation", "operationParameters", "operationMetrics", "readVersion",
                                      "isolationLevel", "isBlindAppend")}
    assert json.loads(own["userMetadata"])["topiclake"]["removed"] == removed_by(through_delta)
    removed = int(commit.metrics["numTargetRowsDeleted"])
    assert removed > 0 and int(commit.metrics["numTargetFilesRemoved"]) >= 1
    # the version's checksum lists exactly the files Delta reads for it
    with open(os.path.join(log.path, "_delta_log", f"{second['rewrite']:020d}.crc")) as handle:
        listed = {os.path.basename(add["path"]) for add in json.load(handle)["allFiles"]}
    assert {os.path.basename(path) for path in log.read().inputFiles()} == listed
    # every file holds one stretch of offsets, apart from the others' (statistics skip by offset)
    ranges = _offset_ranges(spark, log)
    assert ranges and all(hi < lo for (_, hi), (lo, _) in zip(ranges, ranges[1:])), ranges
    # and holds it in offset order, so that its row groups skip by offset too
    groups = []
    for uri in log.read().inputFiles():
        offsets = pq.read_table(unquote(urlparse(uri).path), columns=["offset"])["offset"].to_pylist()
        assert offsets == sorted(offsets), uri
        groups.append(pq.ParquetFile(unquote(urlparse(uri).path)).metadata.num_row_groups)
    if batched:  # the rewrite's files were written a batch (a row group) at a time
        assert max(groups) > 1, groups
    _statistics_hold(spark, log)


def test_a_timestamp_after_2262_in_a_file_spark_wrote_keeps_its_value(spark, tmp_path, monkeypatch):
    """Spark writes timestamps as Parquet's INT96, which Arrow reads as nanoseconds unless
    told otherwise: one after 2262-04-11 then wraps (the year 3000 read as 1830). Arrow's
    rewrite of such a file keeps it as Spark's MERGE does."""
    twins = Twins(spark, tmp_path, monkeypatch)
    year_3000 = 32_503_680_000_000
    # k1's first record loses to its second, so the file that also holds k2's is rewritten
    frame = spark.createDataFrame([("k1", "a", NOW - DAY_MS), ("k1", "b", NOW - DAY_MS + 1), ("k2", "c", year_3000)],
                                  "key STRING, value STRING, timestamp BIGINT")
    for topic in twins.topics.values():
        produce_frame(topic, frame, NOW)
    log = twins.topics["rewrite"].partition(0)
    assert live_physical_types(log, "timestamp") == ["INT96"], "the test needs one file, written by Spark"
    versions = twins.compact(NOW)
    assert twins.by_arrow == [True]
    twins.assert_same(versions)
    kept = log.read().where("key = 'k2'").selectExpr("unix_millis(timestamp) AS ms").collect()
    assert [row["ms"] for row in kept] == [year_3000]


@pytest.mark.parametrize("codec", ["zstd", "lz4"])
def test_arrow_compresses_as_the_session_tells_spark_s_writer(spark, tmp_path, monkeypatch, codec):
    """Arrow writes the files Spark's writer would, in the codec the session names
    (``spark.sql.parquet.compression.codec``); Hadoop's framing of LZ4 (Spark's ``lz4``)
    Arrow does not write, so Spark's writer writes that rewrite."""
    with session_confs(spark, {arrow_files.CODEC_SETTING: codec}):
        twins = Twins(spark, tmp_path, monkeypatch, "arrow" if codec == "zstd" else "arrow declines")
        twins.produce(0, 30, NOW)
        versions = twins.compact(NOW)
        twins.assert_same(versions)
        codecs = live_codecs(twins.topics["rewrite"].partition(0), "value")
        offsets = live_encodings(twins.topics["rewrite"].partition(0), "offset")
    # named as Spark's writer names them (a zstd file's name says so whoever wrote it)
    assert all(name.endswith(".zstd.parquet" if codec == "zstd" else ".lz4hadoop.parquet") for name in codecs), codecs
    if codec == "zstd":
        assert set(codecs.values()) == {"ZSTD"}, codecs
        # offsets never repeat: Arrow writes them plain (arrow_files.dictionary_columns)
        assert not any("RLE_DICTIONARY" in encodings for encodings in offsets.values()), offsets


def test_a_file_arrow_cannot_read_as_the_table_is_rewritten_by_spark(spark, tmp_path, monkeypatch):
    """A touched file without one of the table's columns (a file an older writer wrote, say):
    Arrow writes nothing and Spark's writer, which reads it as nulls, writes the rewrite."""
    twins = Twins(spark, tmp_path, monkeypatch, "arrow declines")
    monkeypatch.setattr(arrow_rewrite, "_file_columns", lambda path: ["offset"])
    twins.produce(0, 30, NOW)
    versions = twins.compact(NOW)
    # declined by the rewrite through Delta's transaction, then by the one without the JVM,
    # which then goes through Delta's transaction
    assert twins.by_arrow == [False, False] and twins.by_arrow_locally == [False]
    twins.assert_same(versions)
    log = twins.topics["rewrite"].partition(0)
    assert all("__is_cdc" in pq.read_schema(unquote(urlparse(uri).path)).names for uri in log.read().inputFiles()
               if "part-" in uri), "not Spark's writer"


def test_more_changes_than_a_rewrite_broadcasts_go_to_delta_s_merge(spark, twins, monkeypatch):
    monkeypatch.setattr(compaction_rewrite, "MAX_CHANGES", 0)
    twins.produce(0, 30, NOW)
    topic = twins.topics["rewrite"]
    log = topic.partition(0)
    result = compaction.execute(log, compaction.plan(log, NOW, force=True))
    assert result.removed_records > 0 and not twins.rewrites
    commit = _commit(spark, log, result.version_after)
    assert commit.operation == "MERGE" and "executionTimeMs" in commit.metrics, "not Delta's own MERGE"


def test_an_append_that_lands_before_the_commit_is_kept(spark, twins):
    """The run's decisions apply to the table its transaction reads, as a MERGE's do: a
    producer's append between the plan and the commit stays, untouched."""
    twins.produce(0, 30, NOW)
    state = {"next": 100}

    def producer(point, context):
        log = context["log"]
        topic = next(t for t in twins.topics.values() if t.partition(0).path == log.path)
        _produce(topic, state["next"], 5, NOW)

    with faults.installed("compact.before_commit", producer):
        versions = twins.compact(NOW)
    twins.assert_same(versions)
    offsets = {row[0] for row in _rows(twins.topics["rewrite"].partition(0))}
    assert set(range(30, 35)) <= offsets, "the overtaking append lost records"


def test_without_a_change_data_feed_only_the_records_are_written(spark, twins):
    for topic in twins.topics.values():
        spark.sql(f"ALTER TABLE {delta_table_sql(topic.partition(0).path)} "
                  "SET TBLPROPERTIES ('delta.enableChangeDataFeed' = 'false')")
    twins.produce(0, 30, NOW)
    versions = twins.compact(NOW)
    merge = twins.topics["merge"].partition(0)
    for path in PATHS[1:]:
        rewrite = twins.topics[path].partition(0)
        assert _rows(rewrite) == _rows(merge), path
        assert "_change_type" not in rewrite.read().columns
        assert not os.path.exists(os.path.join(rewrite.path, "_change_data")), f"{path}: change rows without a feed"
        assert versions[path] == versions["merge"]
    assert NO_JVM in _commit_info(twins.topics["own commit"].partition(0), versions["own commit"])["engineInfo"]


def test_a_version_since_the_plan_that_is_not_its_files_is_merged(spark, twins):
    """A writer that commits between the plan and the transaction can leave a version the
    rewrite cannot read file by file (here: its checksum is gone); that run then commits
    through Delta's MERGE, in the same attempt."""
    twins.produce(0, 30, NOW)

    def writer(point, context):
        log = context["log"]
        topic = next(t for t in twins.topics.values() if t.partition(0).path == log.path)
        _produce(topic, 100, 5, NOW)
        os.remove(os.path.join(log.path, "_delta_log", f"{log.snapshot().version:020d}.crc"))

    with faults.installed("compact.before_commit", writer):
        versions = twins.compact(NOW)
    twins.assert_same(versions)
    log = twins.topics["rewrite"].partition(0)
    commit = _commit(spark, log, versions["rewrite"])
    assert commit.operation == "MERGE" and "executionTimeMs" in commit.metrics, "not Delta's own MERGE"


def test_a_table_feature_turned_on_since_the_plan_is_merged(spark, twins):
    """Deletion vectors turned on between the plan and the transaction: the version the
    transaction reads is judged as the planned one was, and Delta's MERGE commits (with
    deletion vectors, as on any table that has them)."""
    twins.produce(0, 30, NOW)

    def owner(point, context):
        spark.sql(f"ALTER TABLE {delta_table_sql(context['log'].path)} "
                  "SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")

    with faults.installed("compact.before_commit", owner):
        versions = twins.compact(NOW)
    twins.assert_same(versions)
    commit = _commit(spark, twins.topics["rewrite"].partition(0), versions["rewrite"])
    assert commit.operation == "MERGE" and "executionTimeMs" in commit.metrics, "not Delta's own MERGE"
    assert commit.metrics.get("numTargetDeletionVectorsAdded", "0") != "0", commit.metrics


def test_files_rewritten_since_the_plan_are_found_again(spark, twins):
    """The run's totals name the files it touches; when the version the transaction reads no
    longer holds them (here the owner bin-packed them after the plan), the rewrite finds
    the touched files again by a pass over the offsets and commits what the MERGE commits."""
    twins.produce(0, 20, NOW)
    twins.produce(20, 20, NOW)
    planned = twins.topics["rewrite"].partition(0).read().inputFiles()

    def owner(point, context):
        spark.sql(f"OPTIMIZE {delta_table_sql(context['log'].path)}")

    twins.without_jvm = False  # (a pass over the offsets is Spark's)
    with faults.installed("compact.before_commit", owner):
        versions = twins.compact(NOW)
    twins.assert_same(versions)
    log = twins.topics["rewrite"].partition(0)
    commit = _commit(spark, log, versions["rewrite"])
    assert commit.operation == "MERGE" and "executionTimeMs" not in commit.metrics, "not the rewrite's commit"
    assert len(planned) == 2 and int(commit.metrics["numTargetFilesRemoved"]) == 1, \
        "the two planned files were not bin-packed into one before the commit"


def test_a_forced_run_on_an_empty_partition_commits_nothing(spark, twins):
    """An empty version is no file read (no record has a file to name): the run still
    plans, counts nothing and commits nothing."""
    log = twins.topics["rewrite"].partition(0)
    result = compaction.execute(log, compaction.plan(log, NOW, force=True))
    assert not result.committed and result.removed_records == 0 and not twins.rewrites


def test_a_commit_without_the_jvm_that_loses_its_version_goes_through_delta_s_transaction(spark, twins, monkeypatch):
    """A producer commits between the files written without the JVM and their commit, taking
    its version: the files written for it are deleted, Delta's transaction reads the new
    version and commits the same rewrite, and the append stays. The result is the twin's
    that the producer appended to after its compaction."""
    twins.produce(0, 30, NOW)
    own, through_delta = twins.topics["own commit"], twins.topics["rewrite"]
    written = arrow_rewrite.write_local  # (the twins' spy)

    def then_an_append(*args, **options):
        files = written(*args, **options)
        _produce(own, 100, 5, NOW)
        return files

    monkeypatch.setattr(arrow_rewrite, "write_local", then_an_append)
    log = own.partition(0)
    on_disk = set(data_files_on_disk(log.path))
    result = compaction.execute(log, compaction.plan(log, NOW, force=True))
    assert result.committed and twins.by_arrow_locally == [True] and twins.by_arrow == [True]
    info = _commit_info(log, result.version_after)
    assert NO_JVM not in info["engineInfo"] and info["readVersion"] == result.version_after - 1
    # what is on disk now: the append's file, the rewrite's (Delta's transaction wrote them),
    # and the change data; nothing the lost commit wrote
    live = {os.path.basename(uri) for uri in log.read().inputFiles()}
    added = {os.path.basename(path) for path in set(data_files_on_disk(log.path)) - on_disk}
    changes = {name for name in added if name.startswith("cdc-")}
    assert added - changes == live - {os.path.basename(path) for path in on_disk}, "a lost commit's file was left"
    reference = through_delta.partition(0)
    with monkeypatch.context() as patch:
        patch.setattr(file_rewrite, "commit_locally", lambda *a, **k: file_rewrite.NOT_LOCAL)
        assert compaction.execute(reference, compaction.plan(reference, NOW, force=True)).committed
    _produce(through_delta, 100, 5, NOW)
    assert _rows(log) == _rows(reference)
