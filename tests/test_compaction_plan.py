"""Planning compaction of a settled partition costs no Spark job, and decides as a scan would.

A partition with nothing at or past its checkpoint (the usual state after a run) is
planned from its commit metadata alone (``compaction.settled_measure``). These tests pin
that shortcut to the full measure on the same table: the same numbers and the same
decision, and a scan whenever the run is due (forced, or a tombstone's horizon passed).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from framework.clients.produce import produce, produce_frame
from framework.clients.records import parse_records
from framework.log import version_checksum
from framework.log.log_state import AppendedRecords, Snapshot
from framework.log.topic import Topic
from framework.log.warehouse import delta_table_sql
from framework.spec import parse_spec
from framework.stages import compaction, retention
from framework.stages.maintenance import Maintenance
from tests.support.spark_jobs import spark_jobs

SPEC = {"topic": "settled", "partitions": 1,
        "config": {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": 0.0, "delete.retention.ms": 1000}}


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


def scanned(log, snapshot, now_ms):
    """The measure as a scan of the records gives it (the append commits not consulted)."""
    return compaction.measure(log, replace(snapshot, past_checkpoint=None), now_ms)


@pytest.mark.parametrize("now, force, reasons", [(500, True, ("forced",)), (1100, False, ("tombstone_horizon",))])
def test_a_due_run_of_a_settled_partition_measures_as_a_scan_would(spark, settled, now, force, reasons):
    planned, jobs = spark_jobs(spark, lambda: compaction.plan(settled, now, force))
    assert planned.decision.due and planned.decision.reasons == reasons
    assert jobs == 0  # no record is newer than now (the newest timestamp is 0): U is the log end
    assert planned.measure == scanned(settled, planned.snapshot, now)


def test_new_records_are_measured_from_their_append_commits(spark, settled):
    produce(Topic(settled.spark, settled.warehouse, settled.spec),
            parse_records([(0, {"key": "b", "value": "3é", "timestamp": 200, "headers": {"h": "x"}})],
                          settled.spec, "test"), 200)
    planned, jobs = spark_jobs(spark, lambda: compaction.plan(settled, 500))
    assert jobs == 0 and planned.measure.dirty_records == 1 and planned.decision.due
    assert planned.measure.dirty_bytes == 1 + 3 + 2 and planned.measure.oldest_dirty_timestamp_ms == 200
    assert planned.measure == scanned(settled, planned.snapshot, 500)


def test_more_appends_than_a_page_of_history_are_measured_from_the_next_page(spark, settled):
    """Twenty produce calls since the last run: the newest page of the history (16 commits)
    does not reach back to the checkpoint, the next one does, and planning still needs no
    Spark job; the measure is the scan's."""
    from framework.log.partition_log import HISTORY_PAGES

    topic = Topic(settled.spark, settled.warehouse, settled.spec)
    for call in range(HISTORY_PAGES[0] + 4):
        produce(topic, parse_records([(0, {"key": f"k{call % 3}", "value": str(call), "timestamp": 200})],
                                     settled.spec, "test"), 200)
    planned, jobs = spark_jobs(spark, lambda: compaction.plan(settled, 500))
    assert planned.snapshot.past_checkpoint == AppendedRecords(20, sum(2 + len(str(c)) for c in range(20)), 200)
    assert jobs == 0 and planned.decision.due
    assert planned.measure == scanned(settled, planned.snapshot, 500)


def test_the_append_commits_measure_what_a_scan_measures_through_a_logs_life(spark, warehouse):
    """Produce (JSON lines and a DataFrame, several batches, text beyond ASCII, headers),
    compaction, time retention cutting inside an append and deleteRecords at its edge: after
    each, the measure from the append commits equals the scan's, and it is used whenever the
    commits cover the records past the checkpoint (a cut inside an append falls back to the scan).
    The whole log's size equals the scan's after each too, and is known without one: a cut
    counts what it kept in its own commit."""
    spec = parse_spec({"topic": "lifelong", "partitions": 1, "config": {
        "cleanup.policy": "compact,delete", "min.cleanable.dirty.ratio": 0.0, "retention.ms": 1000,
        "delete.retention.ms": 100}}, source="test")
    topic = Topic(spark, warehouse, spec)
    log = topic.partition(0)
    used, sized = [], []

    def agrees(now_ms):
        snapshot = log.snapshot()
        from_commits = compaction.measure(log, snapshot, now_ms)
        assert from_commits == scanned(log, snapshot, now_ms)
        used.append(snapshot.past_checkpoint is not None)
        # the whole log's size too: the clean summary and the append commits, else the newest
        # cut's count and the appends since
        size = snapshot.size_from_metadata()
        sized.append(size is not None)
        if size is not None:
            assert size == log.size(snapshot.version)

    def lines(first, timestamps):
        return parse_records([(i, {"key": f"k{(first + i) % 3}", "value": None if i % 4 == 3 else "vä" * i,
                                   "timestamp": ts, "headers": [["h", "é"]] * (i % 2)})
                              for i, ts in enumerate(timestamps)], spec, "test")

    produce(topic, lines(0, [10, 5, 30]), 0)
    produce(topic, lines(3, [40, 50]), 0)
    agrees(100)
    frame = spark.createDataFrame([("k1", "x", 60), ("k2", None, 70), ("k9", "é", 65)],
                                  "key string, value string, timestamp long")
    produce_frame(topic, frame, 0)
    agrees(100)
    Maintenance(spark, warehouse, [spec], record_history=False).run(100)
    agrees(100)
    produce(topic, lines(5, [900, 950, 2000]), 0)
    agrees(2100)
    Maintenance(spark, warehouse, [spec], record_history=False).run(1950)  # time retention keeps t >= 950
    agrees(2100)
    produce(topic, lines(8, [2100, 2200]), 0)
    agrees(2300)
    retention.delete_records(log, log.snapshot().state.log_end_offset - 1)  # inside the last append
    agrees(2300)
    produce(topic, lines(10, [2300]), 0)
    retention.delete_records(log, log.snapshot().state.log_end_offset - 1)  # at the start of the new one
    agrees(2400)
    # after the run at 1950 the checkpoint sits inside an append (U cut it: t=2000 was too
    # young), and after a cut inside one the log start does: those are scanned
    assert used == [True, True, True, True, False, False, False, True], used
    # the retention cut at 1950 and deleteRecords counted what they kept: the size is known
    # without a scan throughout
    assert sized == [True] * 8, sized


@pytest.mark.parametrize("lag_ms, young", [(0, False), (5, True)])
def test_u_comes_from_the_newest_timestamp_when_no_record_can_be_too_young(spark, warehouse, lag_ms, young):
    """The commits carry the newest timestamp ever appended. When it is not newer than
    ``now - min.compaction.lag.ms``, no record is, and U is the log end offset without a
    Spark job; otherwise the records are scanned. Either way U is the scan's U, and a
    state without the bound (a table written before it was recorded) is scanned."""
    config = {"cleanup.policy": "compact", "min.compaction.lag.ms": lag_ms}
    spec = parse_spec({"topic": "young", "partitions": 1, "config": config}, source="test")
    topic = Topic(spark, warehouse, spec)
    lines = [(i, {"key": f"k{i % 2}", "value": str(i), "timestamp": ts}) for i, ts in enumerate([3, 9, 4, 7])]
    produce(topic, parse_records(lines[:2], spec, "test"), 0)
    produce(topic, parse_records(lines[2:], spec, "test"), 0)
    log = topic.partition(0)
    snapshot = log.snapshot()
    assert snapshot.state.max_timestamp_ms == 9
    records, end = log.read(snapshot.version), snapshot.state.log_end_offset
    scanned = compaction.first_uncleanable_offset(records, spec.config, 10, end)
    from_metadata, jobs = spark_jobs(spark, lambda: compaction.first_uncleanable_offset(
        records, spec.config, 10, end, snapshot.state.max_timestamp_ms))
    # at 10 with a 5 ms lag, offsets 1 (t=9) and 3 (t=7) are too young: U is 1
    assert from_metadata == scanned == (1 if young else end)
    assert (jobs > 0) == young
    assert compaction.measure(log, snapshot, 10).first_uncleanable_offset == scanned
    unknown = replace(snapshot, state=replace(snapshot.state, max_timestamp_ms=None))
    # scanned: a small partition by Arrow (no Spark job), as Spark's query scans it
    by_arrow, jobs = spark_jobs(spark, lambda: compaction.measure(log, unknown, 10))
    assert jobs == 0 and by_arrow.first_uncleanable_offset == scanned
    assert compaction._scanned(log, unknown, 10, 0)[0] == scanned


def test_a_binary_topics_append_commits_measure_as_a_scan(spark, warehouse):
    """Bytes, not text: the JSON-lines produce counts a binary key, value and header value
    by their length, as the table's ``_size`` column does."""
    spec = parse_spec({"topic": "bytes", "partitions": 1, "key": {"type": "binary"}, "value": {"type": "binary"},
                       "config": {"cleanup.policy": "compact"}}, source="test")
    topic = Topic(spark, warehouse, spec)
    produce(topic, parse_records([(1, {"key": {"base64": "AAEC"}, "value": {"base64": "/w=="}, "timestamp": 5,
                                       "headers": [["é", {"base64": "AAAAAAAAAAc="}], ["n", None]]}),
                                  (2, {"key": {"base64": "AAEC"}, "value": None, "timestamp": 4})], spec, "test"), 0)
    log = topic.partition(0)
    snapshot = log.snapshot()
    assert snapshot.past_checkpoint == AppendedRecords(2, 3 + 1 + 2 + 8 + 1 + 3, 4)
    assert compaction.measure(log, snapshot, 10) == scanned(log, snapshot, 10)


def test_a_small_partitions_measure_by_arrow_is_the_spark_measure(spark, warehouse):
    """A small partition's scan is read by Arrow (``framework.stages.local_measure``): on
    every version of a partition, at clocks that put U before, inside and past its records
    (and ``now - lag`` below 0, where every record is young), it gives Spark's numbers. Its
    versions hold files written by Spark (INT96 timestamps) and by Arrow, a compaction's
    checkpoint and tombstones; the log it reads through has a session that fails the test
    if anything starts it. A version whose file carries a deletion vector is read less the
    rows the vector hides, as Spark reads it."""
    from framework.deferred_session import DeferredSession
    from framework.log.partition_log import PartitionLog
    from framework.stages import local_measure

    spec = parse_spec({"topic": "arrow", "partitions": 1,
                       "config": {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": 0.0,
                                  "min.compaction.lag.ms": 40}}, source="test")
    topic = Topic(spark, warehouse, spec)
    produce(topic, parse_records([(i, {"key": f"k{i % 3}", "value": None if i == 4 else "v" * i, "timestamp": ts})
                                  for i, ts in enumerate([5, 0, 30, 12, 7, 60])], spec, "test"), 0)
    produce_frame(topic, spark.createDataFrame([("k1", "w", 90), ("k5", None, 45), ("k0", "xyz", 200)],
                                               "key string, value string, timestamp bigint"), 0)
    Maintenance(spark, warehouse, [spec], record_history=False).run(100)  # U is 6 (t=60 is young): C 0 -> 6
    produce(topic, parse_records([(i, {"key": "k2", "value": "z", "timestamp": ts})
                                  for i, ts in enumerate([150, 10, 300])], spec, "test"), 0)
    log = topic.partition(0)
    untouched = PartitionLog(DeferredSession(lambda: pytest.fail("the Arrow measure started a session")),
                             warehouse, spec, 0)
    compared = set()
    latest = log.snapshot().version
    for version, state in log.states_at(range(latest + 1)).items():
        checkpoint = max(state.checkpoint, state.log_start_offset)
        for now in (0, 30, 100, 200, 1000):
            after = compaction.cleaner.uncleanable_after_ms(now, spec.config)
            by_arrow = local_measure.scanned(untouched, version, checkpoint, after, state.log_end_offset, None)
            by_spark = compaction._scanned(log, Snapshot(version, replace(state, max_timestamp_ms=None)), now,
                                           checkpoint)
            assert by_arrow == by_spark, (version, now)
            compared.add((by_arrow[0] < state.log_end_offset, by_arrow[1]["dirty_records"] > 0, checkpoint > 0))
    # U inside the log and at its end, a dirty section or none, before and after the checkpoint moved
    assert {(True, True, True), (False, True, True), (True, False, False)} <= compared, compared
    spark.sql(f"ALTER TABLE {delta_table_sql(log.path)} SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    log.delta_table().delete("`offset` = 7")  # (a dirty record: the dirty section's numbers tell)
    version = log.snapshot().version
    assert version_checksum.plain_files(log.path, version) is None, "no deletion vector was written"
    state = log.states_at([version])[version]
    checkpoint = max(state.checkpoint, state.log_start_offset)
    for now in (0, 100, 1000):
        after = compaction.cleaner.uncleanable_after_ms(now, spec.config)
        by_arrow = local_measure.scanned(untouched, version, checkpoint, after, state.log_end_offset, None)
        assert by_arrow == compaction._scanned(log, Snapshot(version, replace(state, max_timestamp_ms=None)), now,
                                               checkpoint), now
