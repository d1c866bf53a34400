"""Retention written through Delta's transaction API is Delta's DELETE.

``framework.stages.retention_rewrite`` commits a retention cut itself (the files that may
hold a record below the new log start rewritten, their change data feed rows, one DELETE
commit) where Delta's DELETE first rebuilt the table's snapshot state. These tests cut
twin partitions, one through each path, and require the same records (every column),
the same change data feed rows and the same bookkeeping at every step: time retention
over several segments, deleteRecords inside a segment, a cut that a producer's append
overtakes, and a table without a change data feed. Files of segments at or past the new
log start are never rewritten. On a local table the cut commits without the JVM
(``file_rewrite.commit_locally``): a third twin takes that path, and its commit records
what the one through Delta's transaction records.
"""

from __future__ import annotations

import json
import os

import pytest

from framework import faults
from framework.clients.produce import produce
from framework.clients.records import parse_records
from framework.log.commit_log import read_commits
from framework.log.topic import Topic
from framework.log.warehouse import Warehouse, delta_table_sql
from framework.spec import parse_spec
from framework.stages import arrow_rewrite, compaction, file_rewrite, retention, retention_rewrite
from tests.support.writers import arrow_writes

NOW = 1_767_225_600_000
MINUTE_MS = 60_000
SPEC = {"topic": "twin", "partitions": 1,
        "config": {"cleanup.policy": "compact,delete", "min.cleanable.dirty.ratio": 0.0,
                   "retention.ms": 10 * MINUTE_MS, "delete.retention.ms": MINUTE_MS}}
PATHS = ("delete", "rewrite", "own commit")
#: what a commit made without the JVM names as its engine (``commit_files.commit_lines``)
NO_JVM = "(no JVM)"
#: the commit's fields the two rewrite paths record alike
RECORDED = ("operation", "operationParameters", "operationMetrics", "readVersion", "isolationLevel", "isBlindAppend")


def _produce(topic, first: int, count: int, at: int) -> None:
    raw = [(i, {"key": f"k{(first + i) % 23}", "value": None if (first + i) % 5 == 0 else f"v{first + i}",
                "timestamp": at + i, "headers": {"h": f"{first + i}"}}) for i in range(count)]
    produce(topic, parse_records(raw, topic.spec, "test"), at + count)


def _rows(log) -> list[tuple]:
    return sorted(tuple(row) for row in log.read().collect())


def _feed(spark, log, version: int) -> list[tuple]:
    frame = (spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", version)
             .option("endingVersion", version).load(log.path))
    return sorted(tuple(row) for row in frame.select("offset", "_change_type").collect())


def _commit(spark, log, version: int):
    return next(c for c in read_commits(spark, log.path) if c.version == version)


def _commit_info(log, version: int) -> dict:
    """The ``commitInfo`` of ``version``, as its commit file holds it."""
    with open(os.path.join(log.path, "_delta_log", f"{version:020d}.json")) as handle:
        return next(json.loads(line)["commitInfo"] for line in handle if line.startswith('{"commitInfo"'))


class Twins:
    """One partition per path, fed the same records, maintained at the same clock."""

    def __init__(self, spark, folder, monkeypatch, spec=SPEC, writer: str = "arrow"):
        self.spark, self.monkeypatch, self.writer = spark, monkeypatch, writer
        self.topics = {}
        for path in PATHS:
            topic = Topic(spark, Warehouse.resolve(str(folder / path)), parse_spec(spec, "test"))
            topic.create()
            self.topics[path] = topic
        self.cuts = []
        real = retention_rewrite.cut
        monkeypatch.setattr(retention_rewrite, "cut", lambda *a, **k: self.cuts.append(1) or real(*a, **k))
        self.by_arrow = arrow_writes(monkeypatch, arrow_rewrite, "write", writer)
        self.by_arrow_locally = arrow_writes(monkeypatch, arrow_rewrite, "write_local", writer)

    def logs(self):
        return {path: topic.partition(0) for path, topic in self.topics.items()}

    def produce(self, first: int, count: int, at: int) -> None:
        for topic in self.topics.values():
            _produce(topic, first, count, at)

    def compact_and_roll(self, now: int) -> None:
        """A compaction on both, then a new active segment, so later appends start one."""
        for log in self.logs().values():
            compaction.execute(log, compaction.plan(log, now, force=True))
            log.roll_segment(log.snapshot())

    def cut(self, step) -> dict:
        """``step(log)`` (a retention result) on both twins: each twin's committed version."""
        versions = {}
        for path, log in self.logs().items():
            with self.monkeypatch.context() as patch:
                if path == "delete":
                    patch.setattr(retention_rewrite, "cut", lambda log, start, app, epoch, removed, delete: delete())
                elif path == "rewrite":  # through Delta's transaction
                    patch.setattr(file_rewrite, "commit_locally", lambda *a, **k: file_rewrite.NOT_LOCAL)
                before, arrow_before, locally_before = len(self.cuts), len(self.by_arrow), len(self.by_arrow_locally)
                result = step(log)
                assert len(self.cuts) - before == (path != "delete"), f"{path}: the wrong path ran"
                wrote = [True] if self.writer == "arrow" else []
                if path == "rewrite":
                    assert self.by_arrow[arrow_before:] == wrote, self.writer
                if path == "own commit":  # Arrow writes it without the JVM, else Delta's transaction commits
                    assert self.by_arrow_locally[locally_before:] == wrote, self.writer
                    assert self.by_arrow[arrow_before:] == [], "the rewrite went through Delta's transaction too"
            assert result.committed and result.removed_records > 0
            versions[path] = result.version_after
            no_jvm = NO_JVM in _commit_info(log, result.version_after)["engineInfo"]
            assert no_jvm == (path == "own commit" and self.writer == "arrow"), f"{path}: committed the wrong way"
        return versions

    def assert_same(self, versions: dict) -> None:
        logs = self.logs()
        delete = logs["delete"]
        theirs = _commit(self.spark, delete, versions["delete"])
        for path in PATHS[1:]:
            rewrite = logs[path]
            assert _rows(rewrite) == _rows(delete), path
            assert _feed(self.spark, rewrite, versions[path]) == _feed(self.spark, delete, versions["delete"]), path
            assert rewrite.snapshot().state == delete.snapshot().state, path
            mine = _commit(self.spark, rewrite, versions[path])
            assert mine.operation == theirs.operation == "DELETE"
            assert "executionTimeMs" not in mine.metrics and "executionTimeMs" in theirs.metrics
            assert mine.metrics["numDeletedRows"] == theirs.metrics["numDeletedRows"]
        # the commit made without the JVM records what the one through Delta's transaction records
        own, through_delta = (_commit_info(logs[p], versions[p]) for p in ("own commit", "rewrite"))
        assert {k: own[k] for k in RECORDED} == {k: through_delta[k] for k in RECORDED}


@pytest.fixture
def twins(spark, tmp_path, monkeypatch):
    return Twins(spark, tmp_path, monkeypatch)


def _retain(now: int):
    return lambda log: retention.execute(log, retention.plan(log, now, None))


def _live_files(log, version: int) -> dict[str, dict]:
    with open(os.path.join(log.path, "_delta_log", f"{version:020d}.crc")) as handle:
        return {add["path"]: add for add in json.load(handle)["allFiles"]}


@pytest.mark.parametrize("writer", ["arrow", "spark"])
def test_a_rewrite_commits_what_delta_s_delete_commits_cut_after_cut(spark, tmp_path, monkeypatch, writer):
    twins = Twins(spark, tmp_path, monkeypatch, writer=writer)
    for batch in range(4):  # four segments, a minute apart
        twins.produce(batch * 10, 10, NOW + batch * MINUTE_MS)
        twins.compact_and_roll(NOW + batch * MINUTE_MS + 20)
    rewrite = twins.logs()["rewrite"]
    before = _live_files(rewrite, rewrite.snapshot().version)
    segments = {int(add["partitionValues"]["_segment"]) for add in before.values()}
    assert len(segments) >= 3, segments

    # time retention: the first two minutes' records are past retention.ms
    first = twins.cut(_retain(NOW + 12 * MINUTE_MS - 1))
    twins.assert_same(first)
    assert {kind for _, kind in _feed(spark, rewrite, first["rewrite"])} == {"delete"}
    new_start = rewrite.snapshot().state.log_start_offset
    after = _live_files(rewrite, first["rewrite"])
    untouched = {p for p, add in before.items() if int(add["partitionValues"]["_segment"]) >= new_start}
    assert untouched and untouched <= set(after), "a file of a segment past the new log start was rewritten"

    # deleteRecords in the middle of a segment
    second = twins.cut(lambda log: retention.delete_records(log, new_start + 3))
    twins.assert_same(second)
    assert rewrite.snapshot().state.log_start_offset == new_start + 3


def test_an_append_that_lands_before_the_commit_is_kept(spark, twins):
    twins.produce(0, 20, NOW)
    twins.compact_and_roll(NOW + 30)
    twins.produce(20, 10, NOW + 5 * MINUTE_MS)

    def producer(point, context):
        log = context["log"]
        topic = next(t for t in twins.topics.values() if t.partition(0).path == log.path)
        _produce(topic, 100, 5, NOW + 6 * MINUTE_MS)

    with faults.installed("retain.before_commit", producer):
        versions = twins.cut(_retain(NOW + 11 * MINUTE_MS))
    twins.assert_same(versions)
    offsets = {row[0] for row in _rows(twins.logs()["rewrite"])}
    assert offsets == set(range(20, 35)), sorted(offsets)


def test_without_a_change_data_feed_only_the_records_are_written(spark, twins):
    for topic in twins.topics.values():
        spark.sql(f"ALTER TABLE {delta_table_sql(topic.partition(0).path)} "
                  "SET TBLPROPERTIES ('delta.enableChangeDataFeed' = 'false')")
    twins.produce(0, 20, NOW)
    twins.produce(20, 10, NOW + 5 * MINUTE_MS)
    versions = twins.cut(_retain(NOW + 11 * MINUTE_MS))
    delete = twins.logs()["delete"]
    for path in PATHS[1:]:
        rewrite = twins.logs()[path]
        assert _rows(rewrite) == _rows(delete) and {r[0] for r in _rows(rewrite)} == set(range(20, 30)), path
        assert not os.path.exists(os.path.join(rewrite.path, "_change_data")), f"{path}: change rows without a feed"
        assert versions[path] == versions["delete"]


@pytest.mark.parametrize("add, new_start, expected", [
    ({"partitionValues": {"_segment": "0"}}, 10, True),               # no statistics: it may
    ({"partitionValues": {"_segment": "10"}}, 10, False),             # its segment starts at the cut
    ({"partitionValues": {"_segment": "12"}}, 10, False),
    ({"partitionValues": {"_segment": "0"}, "stats": json.dumps({"minValues": {"offset": 4}})}, 10, True),
    ({"partitionValues": {"_segment": "0"}, "stats": json.dumps({"minValues": {"offset": 10}})}, 10, False),
    ({"partitionValues": {"_segment": "0"}, "stats": json.dumps({"numRecords": 3})}, 10, True),
    ({"partitionValues": {}}, 10, True),                               # outside the segment layout: read it
])
def test_the_files_a_cut_reads_are_those_that_may_hold_a_record_below_it(add, new_start, expected):
    assert retention_rewrite.may_hold_below(add, new_start) is expected
