"""A real Structured Streaming consumer across maintenance: Kafka's consumer guarantees.

The stream (availableNow triggers, a checkpoint) starts at the empty log and catches up
after each cycle of produce calls and a maintain (compaction with tombstones and their
second pass, time and size retention, delete-records, bin-packing, vacuum). It must never fail and must see every appended
offset exactly once. A consumer that starts after compaction sees the compacted log,
then every new append.
"""

from __future__ import annotations

import pytest

from framework.clients.consume import stream_partition, stream_topic
from framework.clients.produce import produce
from framework.clients.records import parse_records
from framework.log.commit_log import read_commits
from framework.log.topic import Topic
from framework.log.warehouse import delta_table_sql
from framework.spec import parse_spec
from framework.stages.maintenance import Maintenance
from framework.stages.retention import delete_records

pytestmark = pytest.mark.slow

SPEC = {"topic": "feed", "partitions": 1, "config": {
    "cleanup.policy": "compact,delete", "min.cleanable.dirty.ratio": 0.0, "delete.retention.ms": 1000,
    "retention.ms": 20_000, "retention.bytes": 120}}


def catch_up(query_frame, sink: str, checkpoint: str) -> None:
    (query_frame.writeStream.format("delta").option("checkpointLocation", checkpoint)
     .trigger(availableNow=True).start(sink).awaitTermination())


def test_a_stream_sees_every_appended_offset_once_through_maintenance(spark, warehouse, tmp_path):
    spec = parse_spec(SPEC, "test")
    topic = Topic(spark, warehouse, spec)
    topic.create()
    sink, checkpoint = str(tmp_path / "sink"), str(tmp_path / "checkpoint")
    maintenance = Maintenance(spark, warehouse, [spec], record_history=False)
    catch_up(stream_partition(topic, 0), sink, checkpoint)  # the consumer starts at the empty log
    appended = 0
    retained_by = set()
    for cycle in range(5):
        now = cycle * 10_000
        for call in range(3):
            raw = [(i, {"key": f"k{(cycle + i) % 4}", "value": None if (call + i) % 5 == 0 else f"{cycle}.{call}.{i}",
                        "timestamp": now + call}) for i in range(4)]
            # a key never written again: only time retention removes it
            raw.append((4, {"key": f"once-{cycle}.{call}", "value": "x", "timestamp": now + call}))
            produce(topic, parse_records(raw, spec, "test"), now)
            appended += len(raw)
        # a call of keys written once: compaction leaves its file alone, so bin-packing has work
        raw = [(i, {"key": f"single-{cycle}.{i}", "value": "y", "timestamp": now + 3}) for i in range(3)]
        produce(topic, parse_records(raw, spec, "test"), now)
        appended += len(raw)
        if cycle == 2:  # Kafka's deleteRecords, as an admin would call it between runs
            log = topic.partition(0)
            delete_records(log, log.snapshot().state.log_end_offset - 3)
        run = maintenance.run(now + 5_000, force=True)  # compaction, retention, bin-packing, vacuum
        assert not run.failed, run.partitions[0].error
        retained_by |= {reason for row in run.partitions[0].rows if row.stage == "retain" for reason in row.reasons}
        catch_up(stream_partition(topic, 0), sink, checkpoint)
    seen = [r["offset"] for r in spark.read.format("delta").load(sink).select("offset").collect()]
    assert sorted(seen) == list(range(appended)), "an appended offset was missed or seen twice"
    assert {"time", "size"} <= retained_by, retained_by
    # The stream went through compaction MERGEs, retention DELETEs and bin-packing, not around them.
    operations = {commit.operation for commit in read_commits(spark, topic.partition(0).path)}
    assert {"MERGE", "DELETE", "OPTIMIZE"} <= operations, operations


def test_a_consumer_starting_after_compaction_sees_the_compacted_log_then_new_appends(spark, warehouse, tmp_path):
    spec = parse_spec({**SPEC, "topic": "late", "partitions": 2}, "test")
    topic = Topic(spark, warehouse, spec)
    topic.create()
    raw = [(i, {"key": f"k{i % 3}", "value": str(i), "timestamp": 0, "partition": i % 2}) for i in range(12)]
    produce(topic, parse_records(raw, spec, "test"), 0)
    assert not Maintenance(spark, warehouse, [spec], record_history=False).run(1_000, force=True).failed
    compacted = {(p, r["offset"]) for p in range(2) for r in topic.partition(p).read().select("offset").collect()}
    assert len(compacted) < 12
    sink, checkpoint = str(tmp_path / "sink"), str(tmp_path / "checkpoint")
    catch_up(stream_topic(topic), sink, checkpoint)
    first = {(r["partition"], r["offset"]) for r in spark.read.format("delta").load(sink).collect()}
    assert first == compacted
    more = [(i, {"key": "new", "value": "x", "timestamp": 2_000, "partition": 1}) for i in range(2)]
    produce(topic, parse_records(more, spec, "test"), 2_000)
    catch_up(stream_topic(topic), sink, checkpoint)
    after = {(r["partition"], r["offset"]) for r in spark.read.format("delta").load(sink).collect()}
    assert after == compacted | {(1, 6), (1, 7)}


def test_a_stream_goes_through_deletion_vectors_and_their_purge(spark, warehouse, tmp_path):
    """On a table whose owner turned deletion vectors on, compaction marks rows and vacuum
    later purges them (REORG, once they are half a time-travel window old): the stream
    goes on through both."""
    import time

    spec = parse_spec({**SPEC, "topic": "purged", "config": {**SPEC["config"], "time.travel.retention.ms": 4_000}},
                      "test")
    topic = Topic(spark, warehouse, spec)
    topic.create()
    log = topic.partition(0)
    spark.sql(f"ALTER TABLE {delta_table_sql(log.path)} SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    sink, checkpoint = str(tmp_path / "sink"), str(tmp_path / "checkpoint")
    maintenance = Maintenance(spark, warehouse, [spec], record_history=False)
    catch_up(stream_partition(topic, 0), sink, checkpoint)  # the consumer starts at the empty log
    appended = 0
    for cycle in range(2):
        for call in range(2):
            raw = [(i, {"key": f"k{i % 3}", "value": f"{cycle}.{call}.{i}", "timestamp": cycle * 1_000})
                   for i in range(6)]
            produce(topic, parse_records(raw, spec, "test"), cycle * 1_000)
            appended += len(raw)
        assert not maintenance.run(cycle * 1_000 + 500, force=True).failed
        catch_up(stream_partition(topic, 0), sink, checkpoint)
        if cycle == 0:
            time.sleep(2.5)  # the deletion vectors become half a window (4 s) old
    seen = [r["offset"] for r in spark.read.format("delta").load(sink).select("offset").collect()]
    assert sorted(seen) == list(range(appended))
    operations = [commit.operation for commit in read_commits(spark, log.path)]
    assert any(op.startswith("REORG") for op in operations), operations
