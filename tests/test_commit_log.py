"""The commit reader (framework/log/commit_log.py) against Delta's own history.

Maintenance reads a table's newest commits from the ``_delta_log`` files directly; this
pins that reading to ``DeltaTable.history()`` on a table with every kind of commit
topiclake makes (create, append, MERGE, DELETE, OPTIMIZE, property changes, VACUUM), with
its files' times moved so that Delta has to make them increasing, as it does.
"""

from __future__ import annotations

import glob
import os

import pytest

from framework.clients.produce import produce
from framework.clients.records import parse_records
from framework.log.commit_log import _from_delta_history, local_folder, read_commits
from framework.log.topic import Topic
from framework.spec import parse_spec
from framework.stages.maintenance import Maintenance

SPEC = {"topic": "commits", "partitions": 1,
        "config": {"cleanup.policy": "compact,delete", "min.cleanable.dirty.ratio": 0.0, "retention.ms": 10_000,
                   "time.travel.retention.ms": 0}}


@pytest.fixture(scope="module")
def table(spark, tmp_path_factory):
    from framework.log.warehouse import Warehouse

    warehouse = Warehouse.resolve(str(tmp_path_factory.mktemp("commit-log")))
    spec = parse_spec(SPEC, source="test")
    topic = Topic(spark, warehouse, spec)
    topic.create()
    for round_ in range(3):
        for call in range(3):  # small appends, for bin-packing to pack
            lines = [(i, {"key": f"k{i % 3}", "value": f"v{round_}.{call}.{i}", "timestamp": round_ * 10_000 + i})
                     for i in range(4)]
            produce(topic, parse_records(lines, spec, "test"), round_ * 10_000)
        Maintenance(spark, warehouse, [spec], record_history=False).run(round_ * 10_000 + 100)
    for call in range(3):
        produce(topic, parse_records([(0, {"key": "k", "value": str(call), "timestamp": 30_000})], spec, "test"), 30_000)
    Maintenance(spark, warehouse, [spec], record_history=False).run(30_000, stages=("optimize",))
    log = topic.partition(0)
    # Two commit files get the same old time: Delta reports them one millisecond apart.
    for name in sorted(glob.glob(os.path.join(log.path, "_delta_log", "*.json")))[1:3]:
        os.utime(name, (1_000_000, 1_000_000))
    return log


def test_the_files_say_what_delta_history_says(spark, table):
    ours = read_commits(spark, table.path)
    delta = _from_delta_history(spark, table.path, None)
    assert [c.version for c in ours] == list(range(ours[0].version, -1, -1))
    assert {c.operation for c in ours} >= {"CREATE TABLE", "WRITE", "MERGE", "OPTIMIZE", "VACUUM END"}
    assert ours == delta


@pytest.mark.parametrize("limit", [1, 3, 5])
def test_a_limit_reads_the_newest_commits(spark, table, limit):
    ours = read_commits(spark, table.path, limit)
    assert ours == _from_delta_history(spark, table.path, limit)
    assert len(ours) == limit and ours[0].version == read_commits(spark, table.path)[0].version


def test_only_local_paths_are_read_directly():
    assert local_folder("/tmp/w/t-0") == "/tmp/w/t-0"
    assert local_folder("file:/tmp/w/t-0") == "/tmp/w/t-0"
    assert local_folder("file:///tmp/w/t-0") == "/tmp/w/t-0"
    assert local_folder("s3a://bucket/w/t-0") is None
    assert local_folder("dbfs:/w/t-0") is None
