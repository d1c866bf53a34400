"""Retention (time, size, consumed), deleteRecords, time travel and vacuum, on real Delta tables."""

import dataclasses
import functools
import glob
import json
import os

import pytest

from framework.cli.main import main
from framework.clients.produce import produce
from framework.clients.records import parse_records
from framework.errors import PolicyViolationError, TimeTravelError
from framework.log.consumer_offsets import ConsumerOffsets
from framework.log.topic import Topic
from framework.log.warehouse import delta_table_sql
from framework.spec import load_specs, parse_spec
from framework.stages.maintenance import Maintenance
from framework.stages.retention import delete_records
from tests.support.delta_readers import delta_rs_offsets
from tests.support.table_files import data_files_on_disk


def make_topic(spark, warehouse, **config):
    settings = {"cleanup.policy": "delete", "retention.ms": -1}
    settings.update(config)
    spec = parse_spec({"topic": "t", "partitions": 1, "config": settings}, "test")
    topic = Topic(spark, warehouse, spec)
    topic.create()
    return topic


def send(topic, records):
    raw = [(i, {"partition": 0, **r}) for i, r in enumerate(records)]
    return produce(topic, parse_records(raw, topic.spec, "test"), 0)


def offsets(topic):
    return delta_rs_offsets(topic.partition(0).path)


def maintain(spark, topic, now, **kwargs):
    run = Maintenance(spark, topic.warehouse, [topic.spec], record_history=False).run(now, **kwargs)
    assert not run.failed, run.partitions[0].error
    return run


def test_time_retention_removes_only_a_prefix(spark, warehouse):
    topic = make_topic(spark, warehouse, **{"retention.ms": 1000})
    # offset 2 is young; offset 3 is old again but sits behind it, so it stays (a prefix only).
    send(topic, [{"key": "a", "value": "1", "timestamp": 0}, {"key": "b", "value": "1", "timestamp": 100},
                 {"key": "c", "value": "1", "timestamp": 4500}, {"key": "d", "value": "1", "timestamp": 0}])
    maintain(spark, topic, 5000)
    assert offsets(topic) == [2, 3]
    assert topic.partition(0).snapshot().state.log_start_offset == 2


def test_time_retention_reads_no_record_while_the_oldest_timestamp_bound_keeps_them_all(spark, warehouse, monkeypatch):
    """The state carries a lower bound of every record's timestamp (each append folds its
    oldest in; a cut sets it to the oldest of what it keeps). While the bound is young
    enough, retention's plan is metadata (no record read, by Spark or by Arrow); whenever it
    plans, it plans what the scan plans, with the bound unknown."""
    from dataclasses import replace

    from framework.stages import retention
    from tests.support.spark_jobs import spark_jobs

    topic = make_topic(spark, warehouse, **{"retention.ms": 1000})
    log = topic.partition(0)
    send(topic, [{"key": "a", "value": "1", "timestamp": 300}, {"key": "b", "value": "1", "timestamp": 900}])
    send(topic, [{"key": "c", "value": "1", "timestamp": 4500}, {"key": "d", "value": "1", "timestamp": 200}])
    assert log.snapshot().state.min_timestamp_ms == 200
    local, read_locally = retention._first_offsets_locally, []

    def agrees(now_ms):
        """The plan, and its reads: Spark jobs, and reads of a local table's files by Arrow."""
        snapshot = log.snapshot()
        read_locally.clear()
        with monkeypatch.context() as counting:
            counting.setattr(retention, "_first_offsets_locally", lambda *args: read_locally.append(1) or local(*args))
            planned, jobs = spark_jobs(spark, lambda: retention.plan(log, now_ms, None, snapshot=snapshot))
        unknown = replace(snapshot, state=replace(snapshot.state, min_timestamp_ms=None))
        scanned = retention.plan(log, now_ms, None, snapshot=unknown)
        assert (planned.new_log_start, planned.boundaries) == (scanned.new_log_start, scanned.boundaries)
        return planned, jobs + len(read_locally)

    planned, jobs = agrees(1200)  # keeps t >= 200: every record
    assert not planned.due and jobs == 0
    planned, jobs = agrees(1350)  # keeps t >= 350: offsets 0 (t=300) goes; 3 (t=200) stays behind 1 and 2
    assert planned.due and planned.new_log_start == 1 and jobs > 0
    maintain(spark, topic, 1350)
    assert offsets(topic) == [1, 2, 3]
    assert log.snapshot().state.min_timestamp_ms == 200  # exact: the oldest kept, offset 3
    planned, jobs = agrees(1200)
    assert not planned.due and jobs == 0
    delete_records(log, 3)
    assert log.snapshot().state.min_timestamp_ms == 200  # offset 3 (t=200) is what is left
    delete_records(log, 4)
    send(topic, [{"key": "e", "value": "1", "timestamp": 5000}])
    assert log.snapshot().state.min_timestamp_ms == 5000  # the empty log's bound, then the append's
    planned, jobs = agrees(5900)
    assert not planned.due and jobs == 0


def test_size_retention_removes_the_oldest_until_it_fits(spark, warehouse):
    topic = make_topic(spark, warehouse, **{"retention.bytes": 5})
    # sizes: 2, 3, 2, 2 bytes (key + value)
    send(topic, [{"key": "a", "value": "1", "timestamp": 0}, {"key": "b", "value": "22", "timestamp": 0},
                 {"key": "c", "value": "3", "timestamp": 0}, {"key": "d", "value": "4", "timestamp": 0}])
    maintain(spark, topic, 10)
    assert offsets(topic) == [2, 3]


def test_size_retention_reads_no_record_while_the_metadata_says_the_log_fits(spark, warehouse, monkeypatch):
    """The log's bytes come from the commit metadata (the appends; after a cut inside an
    append, the cut's own count): while they fit, size retention's plan needs no Spark job;
    over them, a local table's oldest files are read by Arrow in the driver (no Spark job
    either); and whenever it plans, it plans what a scan plans."""
    from dataclasses import replace

    from framework.stages import retention, retention_counts
    from tests.support.spark_jobs import spark_jobs

    topic = make_topic(spark, warehouse, **{"retention.bytes": 7})
    log = topic.partition(0)
    local, read_locally = retention_counts.local_rows, []

    def agrees(now_ms):
        """The plan, its Spark jobs, and its reads of a local table's files by Arrow."""
        snapshot = log.snapshot()
        read_locally.clear()
        with monkeypatch.context() as counting:
            counting.setattr(retention_counts, "local_rows", lambda files: read_locally.append(1) or local(files))
            planned, jobs = spark_jobs(spark, lambda: retention.plan(log, now_ms, None, snapshot=snapshot))
        unknown = replace(snapshot, past_checkpoint=None, after_cut=None)
        scanned = retention.plan(log, now_ms, None, snapshot=unknown)
        assert (planned.new_log_start, planned.boundaries) == (scanned.new_log_start, scanned.boundaries)
        return planned, jobs, len(read_locally)

    # sizes: 2, 3, 2 bytes (key + value), one append
    send(topic, [{"key": "a", "value": "1", "timestamp": 0}, {"key": "b", "value": "22", "timestamp": 0},
                 {"key": "c", "value": "3", "timestamp": 0}])
    planned, jobs, read = agrees(10)
    assert not planned.due and jobs == read == 0
    send(topic, [{"key": "d", "value": "4", "timestamp": 0}])  # 9 bytes: over
    planned, jobs, read = agrees(10)
    assert planned.due and planned.new_log_start == 1 and jobs == 0 and read > 0
    maintain(spark, topic, 10)  # a cut inside the first append, which counts what it keeps
    assert offsets(topic) == [1, 2, 3] and log.snapshot().past_checkpoint is None
    planned, jobs, read = agrees(10)
    assert not planned.due and jobs == read == 0


def test_over_deletion_vectors_time_and_consumed_retention_read_only_the_files_their_bounds_leave_open(
        spark, warehouse, monkeypatch):
    """Where deletion vectors hide rows, a file's statistics only bound the records it still
    shows, and retention once read every such file at every plan: an idle partition whose
    files all carry vectors read all its offsets and timestamps each run. The bounds still
    decide most files: a file kept whole is read only when it is the lowest one left open,
    a file with none kept only when it lies across the boundary, and the rows its vector
    leaves say whether it shows a record at all. Wherever the thresholds, the start, the end
    and the committed offset fall, the boundary and whether a record lies below it are the
    pure rule's (``cleaner.retention_keeps``) over the records Delta shows."""
    from framework.cleaner import rules as cleaner
    from framework.stages import retention

    topic = make_topic(spark, warehouse)
    log = topic.partition(0)
    spark.sql(f"ALTER TABLE {delta_table_sql(log.path)} SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    # four files of three records, timestamps out of order; vectors then hide a file's
    # lowest offset, its oldest record and its newest, so its bounds only bound
    for stamps in ((500, 100, 600), (700, 900, 650), (50, 800, 820), (1000, 950, 990)):
        send(topic, [{"key": f"k{ms}", "value": "v", "timestamp": ms} for ms in stamps])
    spark.sql(f"DELETE FROM {delta_table_sql(log.path)} WHERE `offset` IN (1, 3, 4, 8)")
    snapshot = log.snapshot()
    shown = {r["offset"]: r["ms"] for r in log.read_snapshot(snapshot).selectExpr(
        "`offset`", "unix_millis(`timestamp`) AS ms").collect()}
    assert shown == {0: 500, 2: 600, 5: 650, 6: 50, 7: 800, 9: 1000, 10: 950, 11: 990}
    listing = functools.partial(retention._listed_with_stats, log, snapshot)
    assert [s.tight for s in sorted(listing()[1], key=lambda s: s.min_offset)] == [False, False, False, True]

    def expected(since, keep_from, start, end):
        kept = min((o for o, ms in shown.items() if o >= start and cleaner.retention_keeps(o, ms, since, keep_from)),
                   default=12)
        boundary = min(end, kept)
        return boundary, any(start <= o < boundary for o in shown)

    files_read, local = {}, retention._first_offsets_locally
    for since in sorted({0, 1200, *(ms + d for ms in (100, 500, 600, 650, 700, 800, 820, 900, 950) for d in (0, 1))}):
        for keep_from in (None, 3, 6):
            for start in (0, 1, 3, 6):
                for end in (12, 7):
                    seen = []

                    def by_arrow(files, *args, seen=seen):
                        seen.append(len(files.paths))
                        return local(files, *args)

                    monkeypatch.setattr(retention, "_first_offsets_locally", by_arrow)
                    case = (since, keep_from, start, end)
                    assert retention._first_kept(log, snapshot, start, end, None, listing, since,
                                                 keep_from) == expected(*case), case
                    monkeypatch.undo()
                    files_read[case] = sum(seen)
    assert len(files_read) == 20 * 3 * 4 * 2
    # all kept: the lowest file kept whole is read for its lowest record, the two above it are not
    assert files_read[0, None, 0, 12] == 1 and expected(0, None, 0, 12) == (0, False)
    # none kept: the tight file's lowest offset shows a record below the end, none read
    assert files_read[1200, None, 0, 12] == 0 and expected(1200, None, 0, 12) == (12, True)
    # none kept, the boundary at 7: the first file's vector leaves two of its three rows, none read
    assert files_read[1200, None, 0, 7] == 0
    # none kept, from 6 to 7: the only file below the boundary lies across it, and is read
    assert files_read[1200, None, 6, 7] == 1 and expected(1200, None, 6, 7) == (7, True)
    # since 651: the second file's one record left is 650 (its bounds say up to 900), the
    # third's 50 and 800: the third is read, then the second (below what the third gave)
    assert expected(651, None, 3, 12) == (7, True) and files_read[651, None, 3, 12] == 2
    # consumed up to 6: the files from 6 on are kept whole by their offsets; the lowest is read
    assert files_read[1200, 6, 6, 12] == 1 and expected(1200, 6, 6, 12) == (6, False)
    # the Spark route (a file that is not local) leaves out the hidden rows as Arrow does
    monkeypatch.setattr(retention, "_first_offsets_locally", lambda *args: None)
    for case in [(0, None, 0, 12), (651, None, 3, 12), (1200, None, 6, 7), (601, 3, 1, 12)]:
        assert retention._first_kept(log, snapshot, case[2], case[3], None, listing, case[0],
                                     case[1]) == expected(*case), case


def test_a_cut_reads_only_the_files_below_it_and_counts_what_a_whole_pass_counts(spark, warehouse, monkeypatch):
    """A cut counts what it removes from the files that may hold a record below it; what it
    keeps comes from the other files' statistics (their oldest timestamps) and the log's size
    in the commits. Every count equals one pass over the whole log, wherever the cut falls
    (an append's edge, inside one, everything) and wherever the clean section ends, whether
    the files are counted by Arrow in the driver (local files) or by Spark; and the oldest
    kept record may sit in a file the cut does not read."""
    from framework.log import version_checksum
    from framework.stages import retention, retention_counts

    topic = make_topic(spark, warehouse)
    log = topic.partition(0)
    send(topic, [{"key": "a", "value": "1", "timestamp": 500}, {"key": "b", "value": "22", "timestamp": 100}])
    send(topic, [{"key": "c", "value": "333", "timestamp": 700}, {"key": "d", "value": "4", "timestamp": 900}])
    send(topic, [{"key": "e", "value": None, "timestamp": 50}, {"key": "f", "value": "55", "timestamp": 800}])
    snapshot = log.snapshot()
    assert snapshot.size_from_metadata() is not None
    assert len(version_checksum.plain_files(log.path, snapshot.version).paths) == 3
    read, local = version_checksum.frame_of, retention_counts.counted_locally
    listing = functools.partial(retention._listed_with_stats, log, snapshot)
    for new_start in range(0, 7):
        for checkpoint in (0, 3, 6):
            whole = retention_counts.counted(log.read_snapshot(snapshot), new_start, checkpoint)
            for route in ("Arrow", "Spark"):
                files_read = []

                def by_spark(spark, files, files_read=files_read):
                    files_read.append(("Spark", len(files.paths)))
                    return read(spark, files)

                def by_arrow(files, *args, files_read=files_read, route=route):
                    files_read.append(("Arrow", len(files.paths)))
                    return local(files, *args) if route == "Arrow" else None

                monkeypatch.setattr(version_checksum, "frame_of", by_spark)
                monkeypatch.setattr(retention_counts, "counted_locally", by_arrow)
                assert retention_counts.cut_counts(log, snapshot, new_start, checkpoint, listing) == whole, (
                    new_start, checkpoint, route)
                monkeypatch.undo()
                # two records an append
                expected = [("Arrow", (new_start + 1) // 2)] + ([("Spark", (new_start + 1) // 2)] if route == "Spark"
                                                                 else [])
                assert files_read == expected, (new_start, route, files_read)
    assert retention_counts.counted(log.read_snapshot(snapshot), 3, 0)["oldest_kept"] == 50  # in the third file
    # the two expressions over every file, a tombstone's delete horizon set and the oldest
    # record rewritten by Spark (INT96 timestamps beside Arrow's)
    log.delta_table().update("offset = 4", {"_delete_horizon": "timestamp_millis(2000)"})
    log.delta_table().update("offset = 5", {"timestamp": "timestamp_millis(20)"})
    latest = version_checksum.plain_files(log.path, log.snapshot().version)
    for new_start in range(0, 7):
        for checkpoint in (0, 3, 5, 6):
            by_arrow = retention_counts.counted_locally(latest, new_start, checkpoint)
            by_spark = retention_counts.counted(read(spark, latest), new_start, checkpoint)
            assert by_arrow == by_spark, (new_start, checkpoint)
    assert retention_counts.counted_locally(latest, 6, 6)["clean_t"] == 1
    # the earliest delete horizon a cut keeps in the clean section, by Arrow and by Spark
    snapshot = log.snapshot()
    listing = functools.partial(retention._listed_with_stats, log, snapshot)
    horizons = {}
    for route in ("Arrow", "Spark"):
        with monkeypatch.context() as patched:
            if route == "Spark":
                patched.setattr(retention_counts, "local_rows", lambda files: None)
            horizons[route] = [retention_counts.kept_clean_horizon(log, snapshot, new_start, checkpoint, listing)
                               for new_start in range(0, 6) for checkpoint in (new_start + 1, 5, 6)]
    assert horizons["Arrow"] == horizons["Spark"] and {2000, None} == set(horizons["Arrow"]), horizons
    assert retention_counts.counted_locally(latest, 0, 0)["oldest_kept"] == 20


def test_time_and_consumed_retention_read_only_the_files_that_straddle_their_boundary(spark, warehouse, monkeypatch):
    """Time and consumed retention's boundary (the first record at or after the start that
    the rule keeps) from the files' statistics: a file kept whole gives its lowest offset
    unread, a file with nothing kept is skipped, and only a file with both below the lowest
    whole-kept one, or one across the start, is read. Wherever the thresholds, the start,
    the end and the committed offset fall, the boundary and whether a record lies below it
    are the pure rule's (``cleaner.retention_keeps``) over the records, with the statistics
    and without them, and so is the plan of both rules in turn."""
    from framework.cleaner import rules as cleaner
    from framework.log import version_checksum
    from framework.stages import retention

    topic = make_topic(spark, warehouse, **{"retention.ms": 300, "consumed.retention.ms": 100,
                                           "consumed.retention.groups": ["g"]})
    log = topic.partition(0)
    # three files, two records each; timestamps out of order within and across files
    send(topic, [{"key": "a", "value": "1", "timestamp": 500}, {"key": "b", "value": "2", "timestamp": 100}])
    send(topic, [{"key": "c", "value": "3", "timestamp": 700}, {"key": "d", "value": "4", "timestamp": 900}])
    send(topic, [{"key": "e", "value": None, "timestamp": 50}, {"key": "f", "value": "5", "timestamp": 800}])
    snapshot = log.snapshot()
    records = log.read_snapshot(snapshot).select("offset", "timestamp", "_size")
    stamps = {r["offset"]: r["ms"] for r in records.selectExpr("`offset`", "unix_millis(`timestamp`) AS ms").collect()}
    assert stamps == {0: 500, 1: 100, 2: 700, 3: 900, 4: 50, 5: 800}
    read = version_checksum.frame_of
    listing = functools.partial(retention._listed_with_stats, log, snapshot)

    def expected(since, keep_from, start, end):
        kept = min((o for o, ms in stamps.items() if o >= start and cleaner.retention_keeps(o, ms, since, keep_from)),
                   default=6)
        boundary = min(end, kept)
        return boundary, any(start <= o < boundary for o in stamps)

    files_read, compared = {}, 0
    local = retention._first_offsets_locally
    for since in sorted({0, 1000, *(ms + d for ms in stamps.values() for d in (0, 1))}):
        for keep_from in (None, 2, 4):
            for start in (0, 1):
                for end in ((6, 3) if start == 0 and keep_from is None else (6,)):
                    # the files read by Arrow in the driver (a local table's), and by Spark
                    for route in ("Arrow", "Spark"):
                        seen = []

                        def by_spark(spark, files, seen=seen):
                            seen.append(len(files.paths))
                            return read(spark, files)

                        def by_arrow(files, *args, seen=seen, route=route):
                            if route == "Spark":
                                return None
                            seen.append(len(files.paths))
                            return local(files, *args)

                        monkeypatch.setattr(version_checksum, "frame_of", by_spark)
                        monkeypatch.setattr(retention, "_first_offsets_locally", by_arrow)
                        narrowed = retention._first_kept(log, snapshot, start, end, lambda: records, listing, since,
                                                         keep_from)
                        monkeypatch.undo()
                        case = (since, keep_from, start, end, route)
                        assert narrowed == expected(since, keep_from, start, end), case
                        assert files_read.setdefault((since, keep_from, start, end), sum(seen)) == sum(seen), case
                    compared += 1
    for since, keep_from, start in [(101, None, 0), (850, 2, 1), (950, None, 1), (0, 4, 0)]:
        with monkeypatch.context() as scanning:  # no file list: one pass over the records
            scanning.setattr(version_checksum, "plain_files", lambda *args, **kwargs: None)
            whole = retention._first_kept(log, snapshot, start, 6, lambda: records, listing, since, keep_from)
        assert whole == expected(since, keep_from, start, 6), (since, keep_from, start)
    assert compared == 14 * (2 + 1 + 2 + 2)
    # time, 101..500: the first file straddles, the second is kept whole: one file read
    assert files_read[101, None, 0, 6] == 1 and expected(101, None, 0, 6) == (0, False)
    # time, 501..700: the second file kept whole, the first has nothing kept, the third above it: none read
    assert files_read[501, None, 0, 6] == 0 and expected(501, None, 0, 6) == (2, True)
    # time, 801..900: the second file straddles, the third has nothing kept: one file read
    assert files_read[801, None, 0, 6] == 1 and expected(801, None, 0, 6) == (3, True)
    # nothing young: no file read, the boundary is the end
    assert files_read[1000, None, 0, 6] == 0 and files_read[1000, None, 0, 3] == 0
    # consumed up to 2, nothing young: the second file is kept whole by its offsets, none read
    assert files_read[1000, 2, 0, 6] == 0 and expected(1000, 2, 0, 6) == (2, True)
    # a start inside the first file: that file is read, whatever its records' ages
    assert files_read[1000, 2, 1, 6] == 1 and expected(1000, 2, 1, 6) == (2, True)
    # both rules in turn (time retention's cut is consumed retention's start): the plan
    # with the statistics is the plan without them, at clocks where neither, one or both cut;
    # the version's files are listed once a plan, however many rules read them
    planned, both_read = 0, 0
    list_files, first_kept = version_checksum.plain_files, retention._first_kept
    for now in (600, 850, 1000, 1050, 1300):
        for committed in ({"g": 3}, {"g": 5}):
            listings, searches = [], []
            with monkeypatch.context() as counting:
                counting.setattr(version_checksum, "plain_files", lambda *args, **kwargs: (
                    listings.append(args), list_files(*args, **kwargs))[1])
                counting.setattr(retention, "_first_kept", lambda *args: (
                    searches.append(args), first_kept(*args))[1])
                plan = retention.plan(log, now, committed, snapshot)
            assert len(listings) == (1 if searches else 0), (now, committed, listings, len(searches))
            both_read += len(searches) == 2
            with monkeypatch.context() as scanning:
                scanning.setattr(version_checksum, "plain_files", lambda *args, **kwargs: None)
                assert retention.plan(log, now, committed, snapshot).boundaries == plan.boundaries, (now, committed)
            planned += "consumed" in plan.boundaries
    assert planned == 5 and both_read > 0, (planned, both_read)
    # and the cut that follows a plan counts what it removes from the plan's listing: a
    # planned and executed cut lists the planned version's files once, and the commit lists
    # the version its transaction reads (the same one here: no writer came between)
    listings = []
    with monkeypatch.context() as counting:
        counting.setattr(version_checksum, "plain_files",
                         lambda *args, **kwargs: (listings.append(args), list_files(*args, **kwargs))[1])
        plan = retention.plan(log, 1050, {"g": 5}, log.snapshot())
        result = retention.execute(log, plan)
    assert plan.boundaries and result.committed and result.removed_records > 0, (plan.boundaries, result)
    assert [version for _, version in listings] == [plan.snapshot.version] * 2, listings


def test_size_retention_finds_its_boundary_in_one_range_as_the_pure_rule_does(spark, warehouse):
    """Size retention's boundary in two passes (the bytes of each range of offsets, then a
    window over the one range the boundary falls in) is ``cleaner.size_boundary``'s, for
    every limit, with ranges of one offset, of a few, and of more than the log, and with the
    records past the log start only."""
    from framework.cleaner import rules as cleaner
    from framework.stages import retention_size

    topic = make_topic(spark, warehouse)
    log = topic.partition(0)
    send(topic, [{"key": "a", "value": "1" * 7, "timestamp": 1}, {"key": "b", "value": None, "timestamp": 2}])
    send(topic, [{"key": "c", "value": "3" * 30, "timestamp": 3}, {"key": "d", "value": "4", "timestamp": 4},
                 {"key": "e", "value": "5" * 12, "timestamp": 5}])
    send(topic, [{"key": "f", "value": "", "timestamp": 6}, {"key": "g", "value": "7" * 3, "timestamp": 7}])
    records = log.read_snapshot(log.snapshot())
    sizes = sorted((r["offset"], r["_size"]) for r in records.select("offset", "_size").collect())
    total = sum(size for _, size in sizes)
    limits = sorted({0, 1, 2, 5, 13, 20, 31, 45, 50, total - 1, total, total + 1})
    compared = 0
    for start in (0, 2):
        rest = records.where(f"`offset` >= {start}")
        tail = [(o, size) for o, size in sizes if o >= start]
        for max_bytes in limits:
            expected = cleaner.size_boundary(tail, max_bytes, 7)
            for width in (1, 3, 1 << 16):
                boundary, moved = retention_size.boundary(rest, max_bytes, 7, 7, width)
                assert (boundary, moved) == (expected, expected > start), (start, max_bytes, width)
                compared += 1
        assert retention_size.boundary(rest, 0, 5, 7, 3) == (5, True)  # bounded by the end given
    assert compared == 2 * 3 * len(limits)


def test_size_retention_over_arrays_cuts_where_the_pure_rule_cuts():
    """Size retention's numpy expression (``retention_size.first_kept_by_size``, over a local
    table's oldest files read by Arrow) is ``cleaner.size_boundary`` on random logs: offsets
    with gaps, records of no bytes, no records, and every limit from 0 past their bytes."""
    import random

    import numpy as np

    from framework.cleaner import rules as cleaner
    from framework.stages import retention_size

    rng = random.Random(112)
    compared = 0
    for _ in range(200):
        first = rng.randint(0, 50)
        offsets = sorted(rng.sample(range(first, first + 60), rng.randint(0, 12)))
        sizes = [rng.choice([0, 1, 5, 17, 200]) for _ in offsets]
        log_end = (offsets[-1] + 1 if offsets else first) + rng.randint(0, 3)
        total = sum(sizes)
        for max_bytes in sorted({0, 1, max(total - 1, 0), total, total + 1, rng.randint(0, total + 2)}):
            by_arrays = retention_size.first_kept_by_size(np.array(offsets, dtype=np.int64),
                                                      np.array(sizes, dtype=np.int64), max_bytes, log_end)
            assert by_arrays == cleaner.size_boundary(list(zip(offsets, sizes)), max_bytes, log_end), (
                offsets, sizes, max_bytes)
            compared += 1
    assert compared > 600


def test_size_retention_over_deletion_vectors_reads_only_the_oldest_files(spark, warehouse, monkeypatch):
    """Where a compaction's deletion vectors hide rows, a file counts the records it shows
    (its rows less the vector's cardinality) and its lowest offset only bounds them: size
    retention still reads only the oldest files, and where its candidate C is such a bound
    (not known to be a record's), a boundary at C moves C further out instead. For every
    limit, start and end, the boundary is ``cleaner.size_boundary``'s over the records Delta
    shows; before, any vector's file sent the plan to read every file."""
    from framework.cleaner import rules as cleaner
    from framework.stages import compaction, retention, retention_counts, retention_size

    topic = make_topic(spark, warehouse, **{"cleanup.policy": "compact,delete", "min.cleanable.dirty.ratio": 0.0,
                                           "segment.ms": 1})
    log = topic.partition(0)
    spark.sql(f"ALTER TABLE {delta_table_sql(log.path)} SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    # six files of two records, sizes growing with the offset; 2 and 7 supersede 0 and 2, and 10 supersedes 4
    key = {2: 0, 7: 0, 10: 4}
    for first in range(0, 12, 2):
        send(topic, [{"key": f"k{key.get(o, o)}", "value": "v" * o, "timestamp": o} for o in (first, first + 1)])
    compaction.execute(log, compaction.plan(log, 1000))
    snapshot = log.snapshot()
    sizes = sorted((r["offset"], r["_size"]) for r in log.read_snapshot(snapshot).select("offset", "_size").collect())
    assert [o for o, _ in sizes] == [1, 3, 5, 6, 7, 8, 9, 10, 11]
    total = sum(size for _, size in sizes)
    assert snapshot.size_from_metadata() == (9, total)
    listing = functools.partial(retention._listed_with_stats, log, snapshot)
    assert sorted((s.min_offset, s.tight) for s in listing()[1]) == [
        (0, False), (2, False), (4, False), (6, True), (8, True), (10, True)]

    def expected(max_bytes, start, end):
        tail = [(o, size) for o, size in sizes if o >= start]
        boundary = min(end, cleaner.size_boundary(tail, max_bytes, 12))
        return boundary, any(start <= o < boundary for o, _ in sizes)

    local, files_read = retention_counts.local_rows, {}
    suffixes = {sum(size for o, size in sizes if o >= first) for first in (3, 5, 6, 8, 11)}
    for max_bytes in sorted({0, 1, *suffixes, *(b - 1 for b in suffixes), total - 1, total, total + 1}):
        for start, end in ((0, 12), (0, 4), (0, 5), (2, 12), (6, 12)):
            seen = []
            monkeypatch.setattr(retention_counts, "local_rows", lambda files, seen=seen: (
                seen.append(len(files.paths)), local(files))[1])
            got = retention_size.boundary_from_oldest(log, snapshot, start, end, listing, max_bytes)
            monkeypatch.undo()
            boundary, moved = expected(max_bytes, start, end)
            case = (max_bytes, start, end, got)
            assert got == (boundary, True) if moved else not got[1], case
            files_read[max_bytes, start, end] = seen
    assert len(files_read) == 15 * 5
    # one byte over: the first file and the one after it, not all six
    assert expected(total - 1, 0, 12) == (3, True) and files_read[total - 1, 0, 12] == [2]
    # keeping from 5: C is the third file's bound 4, which is no record's; nothing below it
    # is kept, so C moves out to 8 (a tight file's) and the boundary is found there
    from_5 = sum(size for o, size in sizes if o >= 5)
    assert expected(from_5, 0, 12) == (5, True) and files_read[from_5, 0, 12] == [2, 4]
    # ... and with the end at 4, the boundary is the end, at C: no need to move it
    assert expected(from_5, 0, 4) == (4, True) and files_read[from_5, 0, 4] == [2]
    # through Spark (a table not local), the same boundaries
    monkeypatch.setattr(retention_counts, "local_rows", lambda files: None)
    for max_bytes, start, end in [(total - 1, 0, 12), (from_5, 0, 12), (from_5, 0, 4), (0, 0, 12), (1, 2, 12)]:
        boundary, moved = expected(max_bytes, start, end)
        got = retention_size.boundary_from_oldest(log, snapshot, start, end, listing, max_bytes)
        assert got == (boundary, True) if moved else not got[1], (max_bytes, start, end, got)


def test_size_retention_over_its_limit_reads_only_the_oldest_files(spark, warehouse, monkeypatch):
    """Over ``retention.bytes``, the log's bytes known from the commits, size retention's
    boundary reads only the files below a candidate offset past what the excess would take
    (and moves the candidate further out when that was too near): for every limit, start
    and end it is ``cleaner.size_boundary``'s over the records, it reads no file when the log
    fits, and the oldest files only when a little is over, the same files whether Arrow reads
    them in the driver (a local table's) or Spark does; and without the statistics the
    plan falls back to the pass over the log and plans the same. (A boundary with no record
    below it cuts nothing, whatever its offset.)"""
    from framework.cleaner import rules as cleaner
    from framework.log import version_checksum
    from framework.stages import retention, retention_counts, retention_size

    topic = make_topic(spark, warehouse)
    log = topic.partition(0)
    for first in range(0, 12, 2):  # six files of two records each, sizes growing with the offset
        send(topic, [{"key": f"k{o}", "value": "v" * o, "timestamp": o} for o in (first, first + 1)])
    snapshot = log.snapshot()
    assert snapshot.size_from_metadata() is not None
    records = log.read_snapshot(snapshot)
    sizes = sorted((r["offset"], r["_size"]) for r in records.select("offset", "_size").collect())
    total = sum(size for _, size in sizes)
    assert snapshot.size_from_metadata() == (12, total)
    assert len(version_checksum.plain_files(log.path, snapshot.version).paths) == 6
    read = version_checksum.frame_of
    listing = functools.partial(retention._listed_with_stats, log, snapshot)

    def expected(max_bytes, start, end):
        tail = [(o, size) for o, size in sizes if o >= start]
        boundary = min(end, cleaner.size_boundary(tail, max_bytes, 12))
        return boundary, any(start <= o < boundary for o, _ in sizes)

    local = retention_counts.local_rows
    files_read, compared = {}, 0
    # limits at and just below what keeps the records from a file's start, its middle, the last
    suffixes = {sum(size for o, size in sizes if o >= first) for first in (2, 3, 8, 11)}
    for max_bytes in sorted({0, 1, *suffixes, *(b - 1 for b in suffixes), total - 1, total, total + 1}):
        for start, end in ((0, 12), (0, 5), (7, 12)):
            # the files read by Arrow in the driver (a local table's), and by Spark: the same ones
            for route in ("Arrow", "Spark"):
                seen = []
                monkeypatch.setattr(version_checksum, "frame_of", lambda spark, files, seen=seen: (
                    seen.append(("Spark", len(files.paths))), read(spark, files))[1])
                monkeypatch.setattr(retention_counts, "local_rows", lambda files, seen=seen, route=route: (
                    seen.append(("Arrow", len(files.paths))), local(files) if route == "Arrow" else None)[1])
                got = retention_size.boundary_from_oldest(log, snapshot, start, end, listing, max_bytes)
                monkeypatch.setattr(version_checksum, "frame_of", read)
                monkeypatch.setattr(retention_counts, "local_rows", local)
                boundary, moved = expected(max_bytes, start, end)
                case = (max_bytes, start, end, route, got)
                # the boundary is a cut only when a record lies below it
                assert got == (boundary, True) if moved else not got[1], case
                read_here = [files for way, files in seen if way == route]
                assert files_read.setdefault((max_bytes, start, end), read_here) == read_here, case
                compared += 1
    assert compared == 2 * len(files_read) == 2 * 13 * 3
    # the log fits: nothing read
    assert files_read[total, 0, 12] == [] and files_read[total + 1, 7, 12] == []
    # one byte over: the first file, and the one after it that may straddle
    assert files_read[total - 1, 0, 12] == [2] and expected(total - 1, 0, 12) == (1, True)
    # everything over: every file, in one read
    assert files_read[0, 0, 12] == [6] and expected(0, 0, 12) == (12, True)
    # a limit that keeps the newest two files: the four below them read, in one read
    keeps_two = sum(size for o, size in sizes if o >= 8)
    assert expected(keeps_two, 0, 12) == (8, True) and files_read[keeps_two, 0, 12] == [4]
    # a byte less: the boundary lies past that candidate, so the files are read again, further out
    assert expected(keeps_two - 1, 0, 12) == (9, True) and files_read[keeps_two - 1, 0, 12] == [4, 6]
    # the plan: with the statistics as without them (one pass over the log)
    rules_of = cleaner.retention_rules
    for max_bytes in (0, 1, keeps_two, total - 1, total):
        with monkeypatch.context() as limited:
            limited.setattr(cleaner, "retention_rules", lambda *args: dataclasses.replace(
                rules_of(*args), max_bytes=max_bytes))
            plan = retention.plan(log, 100, None, snapshot)
            limited.setattr(version_checksum, "plain_files", lambda *args, **kwargs: None)
            assert retention.plan(log, 100, None, snapshot).boundaries == plan.boundaries, max_bytes
        assert plan.new_log_start == expected(max_bytes, 0, 12)[0], max_bytes


def test_consumed_retention_safety(spark, warehouse):
    topic = make_topic(spark, warehouse, **{"consumed.retention.ms": 1000,
                                           "consumed.retention.groups": ["billing", "audit"]})
    send(topic, [{"key": "k", "value": str(i), "timestamp": t} for i, t in enumerate([0, 0, 0, 9500, 0, 0])])
    commits = ConsumerOffsets(spark, warehouse)
    commits.commit("billing", "t", 0, 6)
    maintain(spark, topic, 10_000)
    assert offsets(topic) == [0, 1, 2, 3, 4, 5], "a listed group without a commit blocks consumed retention"
    commits.commit("other", "t", 0, 6)  # a group that is not listed changes nothing
    maintain(spark, topic, 10_000)
    assert offsets(topic) == [0, 1, 2, 3, 4, 5]
    commits.commit("audit", "t", 0, 5)
    maintain(spark, topic, 10_000)
    # below min(6, 5) = 5 and older than 1 s: 0..2 go; offset 3 is young (9500) and stops it.
    assert offsets(topic) == [3, 4, 5]
    commits.commit("audit", "t", 0, 4)  # a group moving back never brings records back
    maintain(spark, topic, 20_000)
    assert offsets(topic) == [4, 5]  # 3 is old now; 4 is not below min(6, 4)


def test_unreadable_commits_mean_no_consumed_retention(spark, warehouse):
    topic = make_topic(spark, warehouse, **{"consumed.retention.ms": 0, "consumed.retention.groups": ["g"]})
    send(topic, [{"key": "k", "value": str(i), "timestamp": 0} for i in range(3)])
    ConsumerOffsets(spark, warehouse).commit("g", "t", 0, 3)
    # Break the committed-offsets table behind topiclake's back.
    for path in glob.glob(os.path.join(warehouse.consumer_offsets_path, "_delta_log", "*.json")):
        with open(path, "w") as handle:
            handle.write("not json\n")
    run = Maintenance(spark, warehouse, [topic.spec], record_history=True).run(1000, stages=("retain",))
    assert not run.failed
    assert offsets(topic) == [0, 1, 2]
    [row] = run.partitions[0].rows
    assert "consumed retention skipped" in row.message


def test_compact_only_never_deletes_and_delete_only_never_compacts(spark, warehouse, tmp_path):
    compact = Topic(spark, warehouse, parse_spec({"topic": "c", "partitions": 1, "config": {
        "cleanup.policy": "compact", "retention.ms": 1, "retention.bytes": 1, "min.cleanable.dirty.ratio": 0.0}},
        "test"))
    compact.create()
    raw = [(i, {"partition": 0, "key": k, "value": "1", "timestamp": 0}) for i, k in enumerate("aab")]
    produce(compact, parse_records(raw, compact.spec, "t"), 0)
    maintain(spark, compact, 10_000)
    assert [r["offset"] for r in compact.partition(0).read().orderBy("offset").collect()] == [1, 2]
    with pytest.raises(PolicyViolationError, match="POLICY_VIOLATION"):
        delete_records(compact.partition(0), 1)

    delete_only = make_topic(spark, warehouse, **{"min.cleanable.dirty.ratio": 0.0})
    send(delete_only, [{"key": "a", "value": "1", "timestamp": 0}, {"key": "a", "value": "2", "timestamp": 0}])
    maintain(spark, delete_only, 10_000, force=True)
    assert offsets(delete_only) == [0, 1]


def test_offsets_continue_after_delete_records_empties_the_log(spark, warehouse):
    topic = make_topic(spark, warehouse)
    send(topic, [{"key": "a", "value": "1", "timestamp": 0}] * 3)
    result = delete_records(topic.partition(0), 3)
    assert result.removed_records == 3 and offsets(topic) == []
    assert delete_records(topic.partition(0), 2).version_after is None  # below the log start: nothing to do
    [appended] = send(topic, [{"key": "b", "value": "1", "timestamp": 0}])
    assert appended.base_offset == 3 and offsets(topic) == [3]
    state = topic.partition(0).snapshot().state
    assert (state.log_start_offset, state.log_end_offset) == (3, 4)


def spec_file(tmp_path, text):
    folder = tmp_path / "specs"
    folder.mkdir(exist_ok=True)
    (folder / "t.yaml").write_text(text)
    return str(folder)


def test_time_travel_reads_inside_the_window_and_refuses_outside(spark, warehouse, tmp_path, capsys):
    # No waiting on the wall clock (Delta's vacuum reads it): the same table is first kept
    # with a day's window, then the spec shrinks the window to 1 ms, which every version
    # but the latest is already outside of.
    spec = "topic: tt\npartitions: 1\nconfig: {cleanup.policy: delete, retention.ms: -1, time.travel.retention.ms: %d}\n"
    specs = spec_file(tmp_path, spec % 86_400_000)
    wh = ["--warehouse", warehouse.root, "--specs", specs]
    source = tmp_path / "in.jsonl"
    source.write_text('{"key": "a", "value": "1", "timestamp": 0}\n{"key": "b", "value": "2", "timestamp": 0}\n')
    assert main([*wh, "produce", "--topic", "tt", "--input", str(source)]) == 0
    assert main([*wh, "delete-records", "--topic", "tt", "--partition", "0", "--before-offset", "1"]) == 0
    capsys.readouterr()
    assert main([*wh, "vacuum"]) == 0
    # version 0: the produce (which created the table); 1: delete-records rewrote its file
    assert main([*wh, "read", "--topic", "tt", "--partition", "0", "--version", "0"]) == 0
    assert len([line for line in capsys.readouterr().out.splitlines() if line.startswith("{")]) == 2
    # the window shrinks; vacuum now removes the file version 0 needed
    spec_file(tmp_path, spec % 1)
    assert main([*wh, "vacuum"]) == 0
    capsys.readouterr()
    assert main([*wh, "read", "--topic", "tt", "--partition", "0", "--version", "0"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "cannot read that version" in err
    with pytest.raises(TimeTravelError):
        Topic(spark, warehouse, load_specs([specs])[0]).partition(0).read(version=1)
    # the latest version is always readable
    assert main([*wh, "read", "--topic", "tt", "--partition", "0"]) == 0
    assert [json.loads(line)["key"] for line in capsys.readouterr().out.splitlines() if line.startswith("{")] == ["b"]


def test_a_shorter_vacuum_window_is_refused_unless_forced(spark, warehouse, tmp_path, capsys):
    specs = spec_file(tmp_path, "topic: v\npartitions: 1\nconfig: {cleanup.policy: delete}\n")
    wh = ["--warehouse", warehouse.root, "--specs", specs]
    assert main([*wh, "create"]) == 0
    capsys.readouterr()
    assert main([*wh, "vacuum", "--retention-ms", "0"]) == 2
    assert "--unsafe-shorter-time-travel" in capsys.readouterr().err
    assert main([*wh, "vacuum", "--retention-ms", "3600000", "--unsafe-shorter-time-travel"]) == 2
    assert "ignores a vacuum window" in capsys.readouterr().err
    assert main([*wh, "vacuum", "--retention-ms", "0", "--unsafe-shorter-time-travel"]) == 0


@pytest.mark.parametrize("deletion_vectors", [False, True], ids=["copy-on-write", "deletion-vectors"])
def test_deleted_values_leave_every_parquet_file_after_the_window(spark, warehouse, deletion_vectors):
    spec = parse_spec({"topic": "secrets", "partitions": 1, "config": {
        "cleanup.policy": "compact", "min.cleanable.dirty.ratio": 0.0, "delete.retention.ms": 0,
        "time.travel.retention.ms": 1}}, "test")
    topic = Topic(spark, warehouse, spec)
    topic.create()
    log = topic.partition(0)
    if deletion_vectors:
        spark.sql(f"ALTER TABLE {delta_table_sql(log.path)} SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    raw = [(0, {"partition": 0, "key": "user-1", "value": "secret-address", "timestamp": 0}),
           (1, {"partition": 0, "key": "user-2", "value": "kept-value", "timestamp": 0})]
    produce(topic, parse_records(raw, spec, "t"), 0)
    tombstone = [(0, {"partition": 0, "key": "user-1", "value": None, "timestamp": 0})]
    produce(topic, parse_records(tombstone, spec, "t"), 0)

    def values_on_disk():
        files = data_files_on_disk(log.path)
        if not files:
            return set()
        return {r["value"] for r in spark.read.parquet(*files).select("value").collect()}

    maintain(spark, topic, 1000)   # removes secret-address, stamps the tombstone (horizon 1000)
    maintain(spark, topic, 2000)   # the horizon has passed: the tombstone goes too
    assert offsets(topic) == [1]
    # the window is 1 ms (no waiting on the wall clock), so every replaced file is outside it
    maintain(spark, topic, 3000)   # purge (if DVs) and vacuum
    assert values_on_disk() == {"kept-value"}


@pytest.mark.parametrize("bad", [["--retention-ms", "1000"], ["--retention-ms", "1000", "--unsafe-shorter-time-travel"],
                                 ["--partition", "5"]], ids=["short-window", "short-window-unsafe", "partition"])
def test_maintain_checks_every_argument_before_the_first_write(spark, warehouse, tmp_path, capsys, bad):
    """A bad argument used to be found only at the vacuum stage, after compaction and
    retention had committed on the first partitions: exit 2 must mean nothing written."""
    specs = spec_file(tmp_path, "topic: due\npartitions: 2\nconfig: {cleanup.policy: 'compact,delete', "
                                "min.cleanable.dirty.ratio: 0.0, retention.ms: 1000}\n")
    wh = ["--warehouse", warehouse.root, "--specs", specs]
    source = tmp_path / "in.jsonl"
    source.write_text("".join(f'{{"key": "k", "value": "{i}", "timestamp": 0, "partition": {i % 2}}}\n'
                              for i in range(6)))
    assert main([*wh, "produce", "--topic", "due", "--input", str(source)]) == 0
    topic = Topic(spark, warehouse, load_specs([specs])[0])
    versions = [log.snapshot().version for log in topic.partitions()]
    capsys.readouterr()
    assert main([*wh, "maintain", "--now", "5000", *bad]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and bad[0] in err[0], err
    assert [log.snapshot().version for log in topic.partitions()] == versions
    assert [sorted(r["offset"] for r in log.read().select("offset").collect()) for log in topic.partitions()] \
        == [[0, 1, 2], [0, 1, 2]]
    assert not os.path.exists(os.path.join(warehouse.root, "_topiclake", "maintenance_history"))


#: Spark's largest TIMESTAMP in milliseconds (9999-12-31T23:59:59.999Z).
MAX_TIMESTAMP_MS = 253402300799999


def test_the_young_predicate_is_plain_millisecond_arithmetic(spark):
    """``newer_than_sql`` is how U (min.compaction.lag.ms) and time retention find young
    records: a TIMESTAMP literal that lets Delta skip old files, clamped to Spark's range,
    and the exact millisecond comparison. It must select exactly ``timestamp > ms``, for
    thresholds below zero, at the edges of a millisecond and past Spark's range."""
    from pyspark.sql import functions as F

    from framework.cleaner import rules as cleaner
    from framework.cleaner.spark_sql import newer_than_sql

    stamps = [0, 1, 999, 1000, 1001, 1_700_000_000_000, MAX_TIMESTAMP_MS - 1, MAX_TIMESTAMP_MS]
    frame = spark.createDataFrame([(ms,) for ms in stamps], "ms long").select(
        "ms", F.timestamp_millis("ms").alias("timestamp"))
    for threshold in (-10, -1, 0, 1, 999, 1000, 1_699_999_999_999, 1_700_000_000_000,
                      MAX_TIMESTAMP_MS - 1, MAX_TIMESTAMP_MS, MAX_TIMESTAMP_MS + 10):
        got = sorted(r["ms"] for r in frame.where(newer_than_sql(threshold)).collect())
        assert got == [ms for ms in stamps if cleaner.newer_than(ms, threshold)], threshold
        # U's shortcut from the commit metadata agrees: no record newer exactly when the newest is not
        assert cleaner.none_newer_than(max(stamps), threshold) == (not got), threshold
        assert not cleaner.none_newer_than(None, threshold)
        # below 0 every record is newer, so U's scans skip the comparison (a null timestamp too)
        assert cleaner.all_newer_than(threshold) == (threshold < 0), threshold
        assert not cleaner.all_newer_than(threshold) or got == stamps, threshold


def test_what_time_and_consumed_retention_keep_is_one_rule_in_python_and_in_spark(spark):
    """``retention_keeps_sql`` selects exactly the records ``cleaner.retention_keeps`` keeps,
    for time retention (no committed offset) and consumed retention, at the edges of an
    offset and of a millisecond, and past Spark's range; so does ``retention._kept`` over
    numpy arrays."""
    import numpy as np
    from pyspark.sql import functions as F

    from framework.cleaner import rules as cleaner
    from framework.cleaner.spark_sql import retention_keeps_sql
    from framework.stages import retention

    stamps = [0, 1, 999, 1000, 1001, MAX_TIMESTAMP_MS - 1, MAX_TIMESTAMP_MS]
    rows = [(offset, ms) for offset in (0, 4, 5, 6, 1 << 40) for ms in stamps]
    frame = spark.createDataFrame(rows, "offset long, ms long").select(
        "offset", "ms", F.timestamp_millis("ms").alias("timestamp"))
    cases = [(since, keep_from) for since in (-10, 0, 1, 1000, 1001, MAX_TIMESTAMP_MS, MAX_TIMESTAMP_MS + 10)
             for keep_from in (None, 0, 5, 1 << 40, 1 << 41)]
    # every case a column of one query
    kept = frame.select("offset", "ms", *[F.expr(retention_keeps_sql(*case)).alias(f"c{i}")
                                          for i, case in enumerate(cases)]).collect()
    assert len(kept) == len(rows) == 35
    for i, (since, keep_from) in enumerate(cases):
        got = sorted((r["offset"], r["ms"]) for r in kept if r[f"c{i}"])
        assert got == sorted(row for row in rows if cleaner.retention_keeps(*row, since, keep_from)), (since, keep_from)
        # the same rule over numpy arrays (a local table's straddling files, read by Arrow)
        by_numpy = retention._kept(np.array([o for o, _ in rows]), np.array([ms for _, ms in rows]), since, keep_from)
        assert sorted(row for row, keeps in zip(rows, by_numpy, strict=True) if keeps) == got, (since, keep_from)
        # the plan's shortcut from the oldest-timestamp bound: time keeps all exactly when it keeps the oldest
        kept_by_time = [row for row in rows if cleaner.retention_keeps(*row, since)]
        assert cleaner.all_kept_by_time(min(stamps), since) == (len(kept_by_time) == len(rows)), since
        assert not cleaner.all_kept_by_time(None, since)
