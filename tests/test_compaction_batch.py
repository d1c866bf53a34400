"""A topic's small partitions' compactions decided in one Spark job
(framework/stages/compaction_batch.py).

Twin warehouses get the same records and the same maintenance runs; one decides its small
partitions' compactions together, the other each alone (batches turned off). Every
partition must end with the same records, tombstone horizons and history rows, with the
guarantees checked after every run; a batch must cost one query for all its members,
decide only the plans it made, and let its cache go when the run ends.
"""

from __future__ import annotations

import contextlib
from unittest import mock

from framework.checks.guarantees import Guarantees
from framework.clients.produce import produce
from framework.clients.records import parse_records
from framework.log.topic import Topic
from framework.log.warehouse import Warehouse
from framework.spec import parse_spec
from framework.stages import compaction, compaction_batch
from framework.stages.compaction_batch import CompactionBatches
from framework.stages.maintenance import Maintenance
from tests.support.spark_jobs import spark_jobs

PARTITIONS = 5
#: the young partition: a record too young to compact at the first run's ``now`` (its plan
#: needs a scan, so it is decided alone)
YOUNG = 4
STRATEGIES = {
    "offset": {},
    "timestamp": {"compaction.strategy": "timestamp"},
    "header": {"compaction.strategy": "header", "compaction.strategy.header": "v"},
}


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
    """Each partition's records: offset, key, value and delete horizon."""
    return {log.name: sorted(tuple(row) for row in log.read().select("offset", "key", "value", "_delete_horizon")
                             .collect()) for topic in topics for log in topic.partitions()}


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
    # in the first two runs the young partitions need a scan to plan (a record too young,
    # then a head the append commits do not describe): each topic's other four are a batch
    assert decided == [PARTITIONS - 1] * 6, decided
    alone, history_alone = _twin_runs(spark, tmp_path, False)
    assert together == alone
    assert [[row[:-1] for row in rows] for rows in history_together] == [
        [row[:-1] for row in rows] for rows in history_alone]
    assert {row[-1] for rows in history_together for row in rows} == {"passed"}, history_together
    assert any(row[5] for rows in history_together for row in rows), "no run removed a record"
    assert any(row[6] for rows in history_together for row in rows), "no run stamped a tombstone"


def test_a_batch_is_one_job_decides_only_its_own_plans_and_lets_its_cache_go(spark, tmp_path):
    spec = _spec("offset")
    warehouse = Warehouse.resolve(str(tmp_path / "w"))
    topic = Topic(spark, warehouse, spec)
    produced = (r for p in range(PARTITIONS) for r in _round(p, 1, 0))
    produce(topic, parse_records(list(enumerate(produced)), spec, "test"), 1_000)
    logs = topic.partitions()
    cached = spark.sparkContext._jsc.getPersistentRDDs().size()
    batches = CompactionBatches(spark, logs, 1_000, force=False)
    plans = [batches.plan(log) for log in logs]
    assert all(p is not None and p.decision.due for p in plans)
    assert batches.plan(logs[0]) is None  # a plan is given once: a retry plans afresh
    # a plan the batch did not make (a retry's) is decided alone
    assert batches.decided(logs[0], compaction.plan(logs[0], 1_000)) is None
    # every member's actions and totals in one query (two Spark jobs: the dirty keys'
    # broadcast, then the totals); the others' shares then cost none
    first, jobs = spark_jobs(spark, lambda: batches.decided(logs[0], plans[0]))
    assert jobs <= 2
    assert spark.sparkContext._jsc.getPersistentRDDs().size() == cached + 1
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
    assert sorted(first.actions.select(*columns).collect()) == sorted(alone.select(*columns).collect())
    for log in logs:
        batches.done(log)
    assert spark.sparkContext._jsc.getPersistentRDDs().size() == cached
    batches.close()
