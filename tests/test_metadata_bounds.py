"""Bounded metadata (CONTRACT section 11): logs and topiclake's own tables do not grow forever.

A partition's ``_delta_log`` is cleaned by Delta at each checkpoint of what is older than
``delta.logRetentionDuration`` (the time-travel window, at least a day). Time cannot pass
in a test, so the log files' modification times are moved two days back, which is what
Delta's cleanup reads. The offset bookkeeping lives in the commits, so the test also
checks that it survives the cleanup. topiclake's own tables are bounded by Delta's auto
compaction.
"""

from __future__ import annotations

import glob
import os
import time

import pytest

from framework.clients.produce import produce
from framework.clients.records import parse_records
from framework.log.history import HistoryRow, MaintenanceHistory
from framework.log.topic import Topic
from framework.spec import parse_spec
from framework.stages.maintenance import Maintenance

pytestmark = pytest.mark.slow

TWO_DAYS_S = 2 * 86_400


def commit_files(path: str) -> list[str]:
    return sorted(glob.glob(os.path.join(path, "_delta_log", "*.json")))


def age_log(path: str, seconds: int) -> None:
    for name in glob.glob(os.path.join(path, "_delta_log", "*")):
        if os.path.isfile(name):
            stat = os.stat(name)
            os.utime(name, (stat.st_atime - seconds, stat.st_mtime - seconds))


def produce_one(topic, spec, n: int) -> None:
    produce(topic, parse_records([(0, {"key": f"k{n % 5}", "value": str(n), "timestamp": 1_000})], spec, "test"), 1_000)


def test_log_cleanup_bounds_a_partitions_delta_log_and_keeps_its_offsets(spark, warehouse):
    spec = parse_spec({"topic": "bounded", "partitions": 1, "config": {
        "cleanup.policy": "compact", "time.travel.retention.ms": 0}}, "test")
    topic = Topic(spark, warehouse, spec)
    topic.create()
    log = topic.partition(0)
    # a checkpoint every 3 commits instead of Delta's 10, so the test needs few commits
    spark.sql(f"ALTER TABLE delta.`{log.path}` SET TBLPROPERTIES ('delta.checkpointInterval' = '3')")  # version 1
    for n in range(7):  # versions 2..8; checkpoints at 3 and 6
        produce_one(topic, spec, n)
    assert len(commit_files(log.path)) == 9
    age_log(log.path, TWO_DAYS_S)  # two days pass: past the one-day floor of log retention
    for n in range(7, 12):  # versions 9..13; the checkpoint at 9 cleans what is older than a day
        produce_one(topic, spec, n)
    kept = [int(os.path.basename(name).split(".")[0]) for name in commit_files(log.path)]
    # every commit before the checkpoint at 9 was older than the cutoff: the log starts there
    assert kept == list(range(9, 14)), kept
    # the bookkeeping rides in the commits that are left: offsets go on, none reused
    assert log.snapshot().state.log_end_offset == 12
    produce_one(topic, spec, 12)
    assert sorted(r["offset"] for r in log.read().select("offset").collect()) == list(range(13))
    run = Maintenance(spark, warehouse, [spec], record_history=False).run(5_000, force=True)
    assert not run.failed, run.partitions[0].error
    assert sorted(r["offset"] for r in log.read().select("offset").collect()) == list(range(8, 13))


def test_auto_compaction_bounds_the_history_tables_files(spark, warehouse):
    history = MaintenanceHistory(spark, warehouse)
    previous = spark.conf.get("spark.databricks.delta.autoCompact.minNumFiles", None)
    spark.conf.set("spark.databricks.delta.autoCompact.minNumFiles", "4")  # Delta's default is 50
    try:
        for run in range(12):
            history.append([HistoryRow(run_id=f"r{run}", run_started_ms=int(time.time() * 1000), now_ms=run,
                                       topic="t", partition=0, stage="compact")])
    finally:
        if previous is None:
            spark.conf.unset("spark.databricks.delta.autoCompact.minNumFiles")
        else:
            spark.conf.set("spark.databricks.delta.autoCompact.minNumFiles", previous)
    live = spark.sql(f"DESCRIBE DETAIL delta.`{history.path}`").collect()[0]["numFiles"]
    assert live <= 4, f"{live} live files after 12 appends"
    assert history.read().count() == 12
    operations = [r["operation"] for r in spark.sql(f"DESCRIBE HISTORY delta.`{history.path}`").collect()]
    assert "OPTIMIZE" in operations
