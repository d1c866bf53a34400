"""Planning compaction of a settled partition costs no Spark job, and decides as a scan would.

A partition with nothing at or past its checkpoint (the usual state after a run) is
planned from its commit metadata alone (``compaction.settled_measure``). These tests pin
that shortcut to the full measure on the same table: the same numbers and the same
decision, and a scan whenever the run is due (forced, or a tombstone's horizon passed).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from framework.clients.produce import produce
from framework.clients.records import parse_records
from framework.log.topic import Topic
from framework.spec import parse_spec
from framework.stages import compaction
from framework.stages.maintenance import Maintenance

SPEC = {"topic": "settled", "partitions": 1,
        "config": {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": 0.0, "delete.retention.ms": 1000}}


def spark_jobs(spark, action):
    """What ``action`` returns, and how many Spark jobs it ran."""
    context = spark.sparkContext
    context.setJobGroup("plan-cost", "counting", False)
    try:
        result = action()
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
    return result, len(context.statusTracker().getJobIdsForGroup("plan-cost"))


@pytest.fixture
def settled(spark, warehouse):
    spec = parse_spec(SPEC, source="test")
    topic = Topic(spark, warehouse, spec)
    lines = [(0, {"key": "a", "value": "1", "timestamp": 0}), (1, {"key": "a", "value": None, "timestamp": 0}),
             (2, {"key": "b", "value": "2", "timestamp": 0})]
    produce(topic, parse_records(lines, spec, "test"), 0)
    Maintenance(spark, warehouse, [spec], record_history=False).run(100)  # stamps a's tombstone: horizon 1100
    return topic.partition(0)


def test_a_settled_partition_is_planned_without_a_spark_job(spark, settled):
    planned, jobs = spark_jobs(spark, lambda: compaction.plan(settled, 500))
    assert jobs == 0
    assert not planned.decision.due
    full = compaction.measure(settled, planned.snapshot, 500)
    # the full scan agrees on every number but U, which a settled log does not need
    assert replace(planned.measure, first_uncleanable_offset=full.first_uncleanable_offset) == full
    assert planned.measure.first_uncleanable_offset == planned.measure.log_end_offset == 3
    assert planned.decision == replace(
        compaction.cleaner.decide_compaction(settled.spec.config, full, 500),
        first_uncleanable_offset=planned.measure.first_uncleanable_offset)


@pytest.mark.parametrize("now, force, reasons", [(500, True, ("forced",)), (1100, False, ("tombstone_horizon",))])
def test_a_due_run_measures_the_table(spark, settled, now, force, reasons):
    planned, jobs = spark_jobs(spark, lambda: compaction.plan(settled, now, force))
    assert planned.decision.due and planned.decision.reasons == reasons
    assert jobs > 0
    assert planned.measure == compaction.measure(settled, planned.snapshot, now)


def test_new_records_are_measured(spark, settled):
    produce(Topic(settled.spark, settled.warehouse, settled.spec),
            parse_records([(0, {"key": "b", "value": "3", "timestamp": 200})], settled.spec, "test"), 200)
    planned, jobs = spark_jobs(spark, lambda: compaction.plan(settled, 500))
    assert jobs > 0 and planned.measure.dirty_records == 1 and planned.decision.due
