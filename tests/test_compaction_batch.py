"""A topic's small partitions' compactions decided in one Spark job
(framework/stages/compaction_batch.py).

Twin warehouses get the same records and the same maintenance runs; one decides its small
partitions' compactions together and writes their rewrites in one Spark job
(framework/stages/staged_rewrite.py), the other each alone (batches turned off). Every
partition must end with the same records, tombstone horizons, change data feed, file
statistics and history rows, with the guarantees checked after every run; a batch must
cost one query for all its members, decide only the plans it made, and let its cache go
when the run ends; a staged rewrite a commit does not take leaves no file behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from unittest import mock

import pytest

from framework.checks.guarantees import Guarantees
from framework.clients.produce import produce
from framework.clients.records import parse_records
from framework.log import version_checksum
from framework.log.delta_commits import StaleSnapshotError
from framework.log.topic import Topic
from framework.log.warehouse import Warehouse
from framework.spec import parse_spec
from framework.stages import arrow_rewrite, compaction, compaction_batch, staged_rewrite
from framework.stages.compaction_batch import CompactionBatches
from framework.stages.maintenance import Maintenance
from tests.support.spark_jobs import spark_jobs
from tests.support.strategies import STRATEGIES
from tests.support.writers import arrow_writes

PARTITIONS = 5
#: the young partition: a record too young to compact at the first run's ``now`` (its plan
#: needs a scan, so it is decided alone)
YOUNG = 4


def _spec(strategy: str):
    return parse_spec({"topic": f"by-{strategy}", "partitions": PARTITIONS, "config": {
        "cleanup.policy": "compact", "min.cleanable.dirty.ratio": 0.0, "delete.retention.ms": 1000,
        "min.compaction.lag.ms": 500, **STRATEGIES[strategy]}}, source="test")


def _round(p: int, round_: int, base_ms: int) -> list[dict]:
    """Partition ``p``'s records of one round: keys that repeat (each partition its own
    mix), tombstones, timestamps out of order, header versions out of offset order."""
    records = []
    for i in range(6 + 3 * p):
        key = f"k{(i * (p + 1) + round_) % (3 + p)}"
        value = None if (i + p + round_) % 4 == 3 else f"{p}-{round_}-{i}"
        records.append({"partition": p, "key": key, "value": value, "timestamp": base_ms + (7 * i) % 11 * 10,
                        "headers": {"v": str((5 * i + round_) % 9)}})
    if p == YOUNG and round_ == 0:
        records.append({"partition": p, "key": "young", "value": "y", "timestamp": base_ms + 900})
    return records


def _state(spark, topics: list[Topic]) -> dict:
    """Each partition's records (offset, key, value and delete horizon), its change data
    feed, and its files' partition values and statistics (the files written by Delta's
    writer either way: in a batch's staging folder, or each partition's own)."""
    found = {}
    for log in (log for topic in topics for log in topic.partitions()):
        records = sorted(map(repr, log.read().select("offset", "key", "value", "_delete_horizon").collect()))
        feed = sorted(map(repr, spark.read.format("delta").option("readChangeFeed", "true")
                          .option("startingVersion", 0).load(log.path)
                          .select("offset", "value", "_delete_horizon", "_change_type", "_commit_version").collect()))
        listed = version_checksum.plain_files(log.path, log.snapshot().version)
        files = sorted((json.dumps(add["partitionValues"]), add.get("stats")) for add in listed.adds)
        found[log.name] = (records, feed, files)
    return found


def _history(run) -> list[tuple]:
    return [(part.topic, row.partition, row.stage, row.due, row.committed, row.removed_records,
             row.stamped_tombstones, row.checkpoint_after, row.validation)
            for part in run.partitions for row in part.rows]


def _twin_runs(spark, tmp_path, batched: bool) -> tuple[dict, list]:
    """Two runs (a first, then one over a clean section with tombstones to expire) of one
    twin, a topic of each strategy: its records at the end and each run's history rows. The
    batched twin's runs check the guarantees (the other is the reference)."""
    specs = [_spec(strategy) for strategy in sorted(STRATEGIES)]
    warehouse = Warehouse.resolve(str(tmp_path / ("batched" if batched else "alone")))
    topics = [Topic(spark, warehouse, spec) for spec in specs]
    histories = []
    with contextlib.nullcontext() if batched else mock.patch.object(compaction_batch, "MIN_BATCH", 10 ** 9):
        for round_, (base_ms, now_ms) in enumerate(((0, 1_000), (1_200, 5_000))):
            for topic in topics:
                produced = (r for p in range(PARTITIONS) for r in _round(p, round_, base_ms))
                produce(topic, parse_records(list(enumerate(produced)), topic.spec, "test"), now_ms)
            validator = Guarantees(spark, warehouse) if batched else None
            run = Maintenance(spark, warehouse, specs, validator=validator).run(now_ms, stages=("compact",))
            assert not run.failed, [p.error for p in run.partitions]
            histories.append(_history(run))
    return _state(spark, topics), histories


def test_a_batch_leaves_what_each_partition_decided_alone_leaves(spark, tmp_path, monkeypatch):
    decided = []
    shipped = compaction_batch.CompactionBatches._decide

    def counting(self, batch):
        decided.append(len(batch.plans))
        return shipped(self, batch)

    monkeypatch.setattr(compaction_batch.CompactionBatches, "_decide", counting)
    together, history_together = _twin_runs(spark, tmp_path, True)
    # the young partitions need a scan to plan (a record too young, then a head the append
    # commits do not describe), which Arrow reads (framework/stages/local_measure.py): each
    # topic's five are a batch, the young one's U below its log end
    assert decided == [PARTITIONS] * 6, decided
    alone, history_alone = _twin_runs(spark, tmp_path, False)
    assert together == alone
    assert [[row[:-1] for row in rows] for rows in history_together] == [
        [row[:-1] for row in rows] for rows in history_alone]
    assert {row[-1] for rows in history_together for row in rows} == {"passed"}, history_together
    assert any(row[5] for rows in history_together for row in rows), "no run removed a record"
    assert any(row[6] for rows in history_together for row in rows), "no run stamped a tombstone"


def _produced(spark, tmp_path) -> tuple[Warehouse, list]:
    """A topic of the offset strategy with one round of records: its warehouse and partitions."""
    spec = _spec("offset")
    warehouse = Warehouse.resolve(str(tmp_path / "w"))
    topic = Topic(spark, warehouse, spec)
    produced = (r for p in range(PARTITIONS) for r in _round(p, 1, 0))
    produce(topic, parse_records(list(enumerate(produced)), spec, "test"), 1_000)
    return warehouse, topic.partitions()


def test_a_batch_decides_in_a_few_jobs_only_its_own_plans_and_lets_its_cache_go(spark, tmp_path):
    _, logs = _produced(spark, tmp_path)
    batches = CompactionBatches(spark, logs, 1_000, force=False)
    plans = [batches.plan(log) for log in logs]
    assert all(p is not None and p.decision.due for p in plans)
    assert batches.plan(logs[0]) is None  # a plan is given once: a retry plans afresh
    # a plan the batch did not make (a retry's) is decided alone
    assert batches.decided(logs[0], compaction.plan(logs[0], 1_000)) is None
    # every member's actions, totals and rewrite in a handful of Spark jobs whatever the
    # members (the dirty keys' broadcast, the totals; the changes' broadcast, the staged
    # write); the others' shares then cost none
    first, jobs = spark_jobs(spark, lambda: batches.decided(logs[0], plans[0]))
    assert jobs <= 5
    # the batch's frame is in Spark's cache (the JVM's cache manager says so, not pyspark's flag)
    frame = batches._member_of[(logs[0].spec.topic, 0)][0].frame
    assert frame._jdf.storageLevel().useMemory()
    shares, jobs = spark_jobs(spark, lambda: [batches.decided(log, p) for log, p in zip(logs[1:], plans[1:])])
    assert jobs == 0 and all(share.totals["removed"] for share in shares)
    alone = compaction.version_actions(logs[0], plans[0].snapshot, plans[0].measure.first_uncleanable_offset,
                                       1_000, plans[0].measure.checkpoint, plans[0].measure.log_start_offset,
                                       carried=("_file",))
    expected = alone.selectExpr(*compaction.TOTALS).collect()[0].asDict()
    assert expected["removed"] and expected["touched_files"], expected
    assert ({**first.totals, "touched_files": sorted(first.totals["touched_files"])}
            == {**expected, "touched_files": sorted(expected["touched_files"])})
    columns = ["offset", "_action", "_reason", "_horizon", "_file"]
    assert sorted(first.actions().select(*columns).collect()) == sorted(alone.select(*columns).collect())
    for log in logs:
        batches.done(log)
    assert not frame._jdf.storageLevel().useMemory()
    batches.close()


@pytest.mark.parametrize("writer", ["arrow", "spark"])
def test_a_staged_rewrite_is_taken_by_its_commit_or_leaves_no_file(spark, tmp_path, monkeypatch, writer):
    from urllib.parse import unquote

    import pyarrow.parquet as pq

    by_arrow = arrow_writes(monkeypatch, arrow_rewrite, "staged", writer)
    warehouse, logs = _produced(spark, tmp_path)
    batches = CompactionBatches(spark, logs, 1_000, force=False)
    plans = [batches.plan(log) for log in logs]
    # a staging folder a killed run left an hour and more ago, and one another run is writing now
    staging = os.path.join(warehouse.internal_root, "staged_rewrites")
    abandoned, running = os.path.join(staging, "a" * 32), os.path.join(staging, "b" * 32)
    for folder in (abandoned, running):
        os.makedirs(os.path.join(folder, "_member=0"))
    old = time.time() - staged_rewrite.ABANDONED_AFTER_S - 60
    os.utime(abandoned, (old, old))
    # every member's rewrite is written at once (by Arrow in each table's folder; by Spark's
    # writer in one writeFiles into a staging folder, then moved into each table's folder)
    decided, jobs = spark_jobs(spark, lambda: [batches.decided(log, p) for log, p in zip(logs, plans)])
    assert jobs <= 5  # as above
    assert by_arrow == ([True] if writer == "arrow" else [])
    # the killed run's folder is swept whichever writer writes; the running one's is left
    # alone, and neither writer leaves a folder of its own behind
    assert os.listdir(staging) == [os.path.basename(running)]

    def staged_files(log, share) -> list[str]:
        return [os.path.join(log.path, unquote(next(iter(a.values()))["path"])) for a in share.staged.actions]

    assert all(share.staged is not None for share in decided)
    lost, kept = staged_files(logs[0], decided[0]), staged_files(logs[1], decided[1])
    assert lost and kept and all(os.path.exists(path) for path in lost + kept)
    # Spark's writer leaves its own change-feed marker column in the data files it writes
    assert {"__is_cdc" in pq.read_schema(path).names for path in kept if "part-" in path} == {writer == "spark"}
    # another run compacts partition 0 first: the batch's commit is refused (the run then
    # re-plans), and its staged files are deleted
    assert compaction.execute(logs[0], compaction.plan(logs[0], 1_000)).committed
    with pytest.raises(StaleSnapshotError):
        compaction.execute(logs[0], plans[0], decided=decided[0])
    assert not any(os.path.exists(path) for path in lost)
    # partition 1's commit takes its staged files: they are the table's files now
    done = compaction.execute(logs[1], plans[1], decided=decided[1])
    assert done.committed
    listed = version_checksum.plain_files(logs[1].path, done.version_after)
    assert {os.path.basename(p) for p in kept if "_change_data" not in p} <= {
        os.path.basename(p) for p in listed.paths}
    batches.done(logs[0])
    batches.done(logs[1])
    assert all(os.path.exists(path) for path in kept)  # taken: done leaves them
    # the others' staged files no commit took, as a run killed after staging leaves them:
    # no version lists them, and the next run compacts those partitions as if they were not there
    left = [path for log, share in zip(logs[2:], decided[2:]) for path in staged_files(log, share)]
    assert left and all(os.path.exists(path) for path in left)
    versions = [log.snapshot().version for log in logs[2:]]
    run = Maintenance(spark, warehouse, [logs[0].spec], validator=Guarantees(spark, warehouse)).run(
        1_000, stages=("compact",))
    assert not run.failed and {row.validation for part in run.partitions for row in part.rows if row.committed} == {
        "passed"}
    for log, version in zip(logs[2:], versions):
        listed = version_checksum.plain_files(log.path, log.snapshot().version)
        assert log.snapshot().version == version + 1
        assert not {os.path.basename(p) for p in left} & {os.path.basename(p) for p in listed.paths}
    # a run that stops (its batches closed) deletes the staged files no commit took
    batches.close()
    assert not any(os.path.exists(path) for path in left)


def test_a_table_whose_plan_fails_is_left_to_its_own_turn(spark, tmp_path, monkeypatch):
    _, logs = _produced(spark, tmp_path)
    shipped = compaction.plan

    def plan(log, *args, **kwargs):
        if log.partition == 1:
            raise OSError("partition 1's log cannot be read")
        return shipped(log, *args, **kwargs)

    monkeypatch.setattr(compaction, "plan", plan)
    batches = CompactionBatches(spark, logs, 1_000, force=False)  # (no error: the others are planned)
    plans = {log.partition: batches.plan(log) for log in logs}
    assert plans[1] is None and all(plans[p] is not None for p in plans if p != 1)
    assert batches.decided(logs[0], plans[0]) is not None
    batches.close()
