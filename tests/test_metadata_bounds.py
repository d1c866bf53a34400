"""Bounded metadata (CONTRACT section 11): logs and topiclake's own tables do not grow forever.

A partition's ``_delta_log`` is cleaned by Delta at each checkpoint of what is older than
``delta.logRetentionDuration`` (the time-travel window, at least a day). Time cannot pass
in a test, so the log files' modification times are moved two days back, which is what
Delta's cleanup reads. The offset bookkeeping lives in the commits, so the test also
checks that it survives the cleanup. topiclake's own tables are bounded by their packing
(the history's own, Delta's auto compaction for the consumer offsets), the history's prune,
and the VACUUM of both own tables that comes with it.
"""

from __future__ import annotations

import glob
import json
import os
import random
import time
from pathlib import Path

import pytest

from framework.clients.produce import produce
from framework.clients.records import parse_records
from framework.log import history as history_module
from framework.log.consumer_offsets import ConsumerOffsets
from framework.log.history import HistoryRow, MaintenanceHistory
from framework.log.topic import Topic
from framework.log.warehouse import delta_table_sql
from framework.spec import parse_spec
from framework.stages.maintenance import Maintenance
from tests.support.delta_readers import delta_rs_query
from tests.support.table_files import data_files_on_disk

pytestmark = pytest.mark.slow

TWO_DAYS_S = 2 * 86_400


def commit_files(path: str) -> list[str]:
    return sorted(glob.glob(os.path.join(path, "_delta_log", "*.json")))


def age_log(path: str, seconds: int) -> None:
    for name in glob.glob(os.path.join(path, "_delta_log", "*")):
        if os.path.isfile(name):
            stat = os.stat(name)
            os.utime(name, (stat.st_atime - seconds, stat.st_mtime - seconds))


def live_files(path: str) -> int:
    """The files the table's latest version holds (as ``DESCRIBE DETAIL``'s ``numFiles``),
    read by delta-rs: milliseconds, where Spark's command costs jobs."""
    import deltalake

    return len(deltalake.DeltaTable(path).file_uris())


def produce_one(topic, spec, n: int) -> None:
    produce(topic, parse_records([(0, {"key": f"k{n % 5}", "value": str(n), "timestamp": 1_000})], spec, "test"), 1_000)


def test_log_cleanup_bounds_a_partitions_delta_log_and_keeps_its_offsets(spark, warehouse):
    spec = parse_spec({"topic": "bounded", "partitions": 1, "config": {
        "cleanup.policy": "compact", "time.travel.retention.ms": 0}}, "test")
    topic = Topic(spark, warehouse, spec)
    topic.create()
    log = topic.partition(0)
    # a checkpoint every 3 commits instead of Delta's 10, so the test needs few commits
    spark.sql(f"ALTER TABLE {delta_table_sql(log.path)} SET TBLPROPERTIES ('delta.checkpointInterval' = '3')")  # version 1
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


@pytest.mark.parametrize("route", ["by Arrow", "by Delta's OPTIMIZE"])
def test_the_historys_files_are_packed_once_pack_at_are_live(spark, warehouse, monkeypatch, route):
    """The history's appends write a file each and run no auto compaction, so the history packs
    its files once PACK_AT are live: on a local table by Arrow, with no Spark job, as an
    OPTIMIZE commit whose every action says dataChange=false (a stream of the history skips
    it), else by Delta's OPTIMIZE. Either way the rows stay the same."""
    import json

    from framework.log import local_append

    monkeypatch.setattr(history_module, "PACK_AT", 4)  # 32 as shipped
    if route != "by Arrow":
        monkeypatch.setattr(local_append, "packed_locally", lambda spark, path: None)
    history = MaintenanceHistory(spark, warehouse)
    most = 0
    tracker = spark.sparkContext.statusTracker()
    for run in range(12):
        jobs = set(tracker.getJobIdsForGroup())
        history.append([HistoryRow(run_id=f"r{run}", run_started_ms=int(time.time() * 1000), now_ms=run,
                                   topic="t", partition=0, stage="compact")])
        if run in (3, 7, 11) and route == "by Arrow":  # the appends that pack
            assert set(tracker.getJobIdsForGroup()) == jobs, f"a Spark job in run {run}'s append and pack"
        most = max(most, live_files(history.path))
    assert most == 3, f"at most {most} live files between packs of 4"
    assert sorted(r["run_id"] for r in history.read().collect()) == sorted(f"r{run}" for run in range(12))
    operations = [r["operation"] for r in spark.sql(f"DESCRIBE HISTORY {delta_table_sql(history.path)}").collect()]
    assert operations.count("OPTIMIZE") == 3 and operations.count("WRITE") == 12, operations
    packs = [version for version, operation in enumerate(reversed(operations)) if operation == "OPTIMIZE"]
    for version in packs:
        with open(os.path.join(history.path, "_delta_log", f"{version:020d}.json")) as commit:
            actions = [json.loads(line) for line in commit]
        changes = [body["dataChange"] for action in actions for kind, body in action.items()
                   if kind in ("add", "remove")]
        assert changes and not any(changes), (version, actions)


def test_the_historys_pack_with_no_session_commits_what_deltas_transaction_commits(spark, tmp_path, monkeypatch):
    """A verb's deferred session that has not started (an idle ``maintain`` in a new
    process) packs the history by Arrow and commits the OPTIMIZE itself, as the transaction
    API commits it with the session up: the same operation, parameters and isolation, every
    action's dataChange false, the same rows; nothing asks Spark."""
    from framework.deferred_session import DeferredSession
    from framework.log.warehouse import Warehouse

    monkeypatch.setattr(history_module, "PACK_AT", 4)
    packs, rows = {}, {}
    for way in ("no session", "through Delta's transaction"):
        place = Warehouse.resolve(str(tmp_path / way))
        os.makedirs(place.root)  # (a warehouse folder not there yet is asked of the running session)
        session = DeferredSession(lambda: pytest.fail("the pack started a session")) if way == "no session" else spark
        history = MaintenanceHistory(session, place)
        for run in range(4):
            history.append([HistoryRow(run_id=f"r{run}", run_started_ms=run, now_ms=run, topic="t", partition=0,
                                       stage="compact")])
        for name in commit_files(history.path):
            with open(name) as handle:
                actions = [json.loads(line) for line in handle]
            info = next(action["commitInfo"] for action in actions if "commitInfo" in action)
            if info["operation"] == "OPTIMIZE":
                packs[way] = (info, [body["dataChange"] for action in actions for kind, body in action.items()
                                     if kind in ("add", "remove")])
        rows[way] = sorted(row["run_id"] for row in delta_rs_query(history.path, "run_id"))
        assert live_files(history.path) == 1, way
    ours, theirs = (packs[way][0] for way in ("no session", "through Delta's transaction"))
    assert "(no JVM)" in ours["engineInfo"] and "(no JVM)" not in theirs["engineInfo"]
    same = ("operation", "operationParameters", "isolationLevel", "isBlindAppend", "operationMetrics")
    assert {k: ours.get(k) for k in same} == {k: theirs.get(k) for k in same}, (ours, theirs)
    assert all(len(changes) == 5 and not any(changes) for _, changes in packs.values()), packs
    assert rows["no session"] == rows["through Delta's transaction"] == ["r0", "r1", "r2", "r3"]


def test_the_highest_recorded_versions_read_by_arrow_are_sparks(spark, warehouse):
    history = MaintenanceHistory(spark, warehouse)
    history.append(_history_rows([("a1", 0, 1, True), ("a2", 1, 2, False)]))
    history.append([HistoryRow(run_id="b1", run_started_ms=3, now_ms=3, topic="u", partition=2, stage="retain",
                               version_before=7, version_after=None),
                    HistoryRow(run_id="b1", run_started_ms=3, now_ms=3, topic="u", partition=2, stage="compact",
                               version_before=5, version_after=6),
                    HistoryRow(run_id="b1", run_started_ms=3, now_ms=3, topic="u", partition=3, stage="compact")])
    by_arrow = history.recorded_versions_by_arrow()
    assert by_arrow == history.recorded_versions_by_spark()
    assert by_arrow == {("t", 0): 1, ("t", 1): 2, ("u", 2): 7}, by_arrow
    assert history.recorded_versions() == by_arrow


def test_the_last_runs_read_by_arrow_are_sparks(spark, warehouse):
    """status and validate read each partition's last committed run by Arrow: row for row,
    every column, what the Spark query answers, over uncommitted rows, other topics, runs
    started at the same moment, NULL versions and list columns."""
    history = MaintenanceHistory(spark, warehouse)
    history.append(_history_rows([("a1", 0, 1, True), ("a2", 0, 2, False), ("b1", 1, 5, True), ("b2", 1, 4, True)]))
    history.append([
        HistoryRow(run_id="c1", run_started_ms=9, now_ms=9, topic="t", partition=2, stage="compact", committed=True,
                   version_before=3, version_after=4, reasons=["dirty_ratio", "max_lag"], validation="failed",
                   failed_guarantees=["G3 unique keys below the checkpoint"], dirty_ratio=0.25, attempts=2),
        HistoryRow(run_id="c1", run_started_ms=9, now_ms=9, topic="t", partition=2, stage="retain", committed=True,
                   version_before=4, version_after=5, max_lag_caused=False),
        HistoryRow(run_id="c2", run_started_ms=9, now_ms=9, topic="t", partition=2, stage="vacuum", committed=True,
                   version_before=5, version_after=None),
        HistoryRow(run_id="d1", run_started_ms=20, now_ms=20, topic="u", partition=0, stage="compact", committed=True,
                   version_before=1, version_after=2),
    ])
    by_arrow = history.last_runs_by_arrow("t")
    assert by_arrow == history.last_runs_by_spark("t")
    assert {p: (row["run_id"], row["stage"]) for p, row in by_arrow.items()} == {
        0: ("a1", "compact"), 1: ("b1", "compact"), 2: ("c1", "retain")}, by_arrow
    assert by_arrow[2]["max_lag_caused"] is False and by_arrow[2]["reasons"] == []
    assert history.last_runs_by_arrow("t", 1) == history.last_runs_by_spark("t", 1) == {1: by_arrow[1]}
    assert history.last_runs_by_arrow("v") == history.last_runs_by_spark("v") == {}
    assert history.last_runs("t") == by_arrow


def _history_rows(runs: list[tuple[str, int, int, bool]]) -> list[HistoryRow]:
    """(run id, partition, started ms, committed) -> one compact row each."""
    return [HistoryRow(run_id=run_id, run_started_ms=started, now_ms=started, topic="t", partition=partition,
                       stage="compact", committed=committed, version_before=started, version_after=started)
            for run_id, partition, started, committed in runs]


@pytest.mark.parametrize("route", ["by Arrow", "by Spark's MERGE"])
def test_a_prune_keeps_each_partitions_newest_runs_and_its_latest_committed_one(spark, warehouse, route,
                                                                               monkeypatch):
    """A local history is pruned by Arrow, with no Spark job, in one overwrite commit; any
    other by Spark's expression of the rule and a MERGE. Both keep the same runs."""
    from framework.log import history_prune
    from tests.support.spark_jobs import spark_jobs

    if route != "by Arrow":
        monkeypatch.setattr(history_prune, "pruned_locally", lambda *args: None)
    history = MaintenanceHistory(spark, warehouse)
    # partition 0: one committed run (a1), then five idle ones; partition 1: three committed runs
    history.append(_history_rows([("a1", 0, 1, True), ("a2", 0, 2, False), ("a3", 0, 3, False), ("a4", 0, 4, False),
                                  ("a5", 0, 5, False), ("a6", 0, 6, False),
                                  ("b1", 1, 1, True), ("b2", 1, 2, True), ("b3", 1, 3, True)]))
    pruned, jobs = spark_jobs(spark, lambda: history.prune(runs_kept=2))
    assert pruned == 4  # a2, a3, a4 and b1; a1 stays as partition 0's latest commit
    with open(commit_files(history.path)[-1]) as handle:
        newest = next(json.loads(line)["commitInfo"] for line in handle if '"commitInfo"' in line)
    if route == "by Arrow":
        assert jobs == 0 and newest["operation"] == "WRITE", (jobs, newest)
        assert newest["operationParameters"]["mode"] == "Overwrite", newest
    else:
        assert newest["operation"] == "MERGE", newest
    kept = sorted((r["partition"], r["run_id"]) for r in history.read().collect())
    assert kept == [(0, "a1"), (0, "a5"), (0, "a6"), (1, "b2"), (1, "b3")], kept
    assert history.last_run("t", 0)["run_id"] == "a1"
    assert history.recorded_versions() == {("t", 0): 6, ("t", 1): 3}


def test_the_history_is_pruned_every_so_many_commits_and_stays_bounded(spark, warehouse):
    history = MaintenanceHistory(spark, warehouse)
    pruned_at = []
    for run in range(1, 25):
        history.append(_history_rows([(f"r{run}", 0, run, run % 8 == 0)]))
        if history.prune_if_due(runs_kept=3, every=6) is not None:
            pruned_at.append(run)
        # kept runs, the latest commit, appends since (counted by delta-rs: no Spark job)
        assert len(delta_rs_query(history.path, "run_id")) <= 3 + 1 + 6, run
    # At versions 6, 12, 18, ...: each prune is followed by its own commit (and no VACUUM's:
    # nothing in the history is a week old), so the appends of every fifth run reach the
    # next multiple of 6.
    assert pruned_at == [6, 11, 16, 21], pruned_at
    # at the last prune, the newest three runs and the latest committed one (r16); the
    # appends since
    assert sorted(r["run_id"] for r in history.read().collect()) == ["r16", "r19", "r20", "r21", "r22", "r23", "r24"]
    latest = MaintenanceHistory(spark, warehouse)
    assert latest.prune_if_due(runs_kept=100, every=1) is None  # it appended nothing yet
    versions = len(commit_files(history.path))
    assert history.prune(runs_kept=100) == 0
    assert len(commit_files(history.path)) == versions, "a prune that deletes nothing commits nothing"


def test_the_prune_rule_in_python_is_the_one_spark_runs(spark):
    """``history_prune.doomed_runs`` (a local history's prune) against ``doomed_frame``
    (Spark's, for any other) on 120 random histories, with ties in start times, runs of
    several stages that committed in some, and NULL starts and commits (Spark orders them
    last), and a fixed one whose oldest run did not commit and whose newer ones do not say
    (none is kept for a commit). One Spark job per ``runs_kept``: each history is a topic of
    its own."""
    from framework.log.history_prune import RUN_COLUMNS, doomed_frame, doomed_runs

    rng = random.Random(113)
    for runs_kept in (1, 2, 3):
        rows = []
        for case in range(40):
            for partition in range(rng.randint(1, 3)):
                for run in range(rng.randint(0, 7)):
                    started = rng.choice([None, *range(1, 6)]) if rng.random() < 0.9 else None
                    for stage in range(rng.randint(1, 3)):
                        committed = rng.choice([True, False, False, None])
                        rows.append((f"c{case}", partition, rng.choice([f"r{run}", None]) if run == 0 else f"r{run}",
                                     started if stage == 0 else rng.choice([started, None, 3]), committed))
        # the oldest run did not commit and no newer one says: none is kept for a commit
        rows += [("unsaid", 0, "r0", 0, False), *(("unsaid", 0, f"r{run}", run, None) for run in range(1, 5))]
        frame = spark.createDataFrame(rows, "topic string, `partition` int, run_id string, run_started_ms long, "
                                            "committed boolean")
        by_spark = {tuple(row) for row in doomed_frame(frame, runs_kept).collect()}
        assert doomed_runs(rows, runs_kept) == by_spark, runs_kept
        assert {("unsaid", 0, f"r{run}") for run in range(5 - runs_kept)} <= by_spark, by_spark
    assert RUN_COLUMNS == list(frame.columns)


def test_a_prune_of_a_local_history_starts_no_session(spark, warehouse):
    """A history written and pruned with a verb's deferred session that has not started
    (an idle ``maintain`` in a new process, its history at a prune's multiple): the prune,
    its commit and the vacuum of topiclake's own tables ask nothing of Spark."""
    from framework.deferred_session import DeferredSession

    os.makedirs(warehouse.root)  # (a warehouse folder not there yet, in a process that runs a session, is asked of it)
    history = MaintenanceHistory(DeferredSession(lambda: pytest.fail("the prune started a session")), warehouse)
    for run in range(1, 7):
        history.append(_history_rows([(f"r{run}", 0, run, run == 2)]))
    assert history.prune_if_due(runs_kept=2, every=6) == 3  # r1, r3 and r4; r2 is the latest commit
    assert sorted(row["run_id"] for row in delta_rs_query(history.path, "run_id")) == ["r2", "r5", "r6"]
    assert history.prune_if_due(runs_kept=2, every=1) is None  # it appended nothing since


@pytest.mark.parametrize("window, replaced_files_go", [("interval 7 days", False), ("interval 0 hours", True)])
def test_a_prune_vacuums_topiclakes_own_tables_inside_their_window(spark, warehouse, window, replaced_files_go):
    """The files a prune and the consumer offsets' upserts replace leave the disk at the next
    prune, once they are past their table's window, and not before."""
    history, offsets = MaintenanceHistory(spark, warehouse), ConsumerOffsets(spark, warehouse)
    for offset in range(1, 5):  # each upsert rewrites the table's one file
        offsets.commit("readers", "t", 0, offset)
    history.append(_history_rows([("r1", 0, 1, True)]))
    for path in (history.path, offsets.path):
        spark.sql(f"ALTER TABLE {delta_table_sql(path)} SET TBLPROPERTIES "
                  f"('delta.deletedFileRetentionDuration' = '{window}')")
    for run in range(2, 6):
        history.append(_history_rows([(f"r{run}", 0, run, False)]))
    assert len(data_files_on_disk(offsets.path)) > live_files(offsets.path)
    time.sleep(1)  # the replaced files are older than a window of 0 hours, by the clock VACUUM reads
    assert history.prune_if_due(runs_kept=1, every=5) == 3  # r2..r4 go; r1 is the latest commit, r5 the newest
    for path in (history.path, offsets.path):
        left, live = len(data_files_on_disk(path)), live_files(path)
        assert (left == live) if replaced_files_go else (left > live), (path, left, live)
        # a VACUUM that could delete nothing yet (a week's window) is not run at all
        vacuums = [name for name in commit_files(path) if '"VACUUM START"' in Path(name).read_text()]
        assert len(vacuums) == (1 if replaced_files_go else 0), (path, vacuums)
    assert offsets.committed("t", 0) == {"readers": 4}
    assert sorted(r["run_id"] for r in history.read().collect()) == ["r1", "r5"]


def test_a_suite_keeps_its_newest_validation_results_and_data_docs_shows_only_those(spark, warehouse):
    from framework.checks import gx_project, gx_suites

    project = gx_suites.Project(warehouse)
    store = os.path.join(gx_project.project_root(warehouse), "gx", "uncommitted", "validations", "topiclake", "bounded",
                         "guarantees")
    seen: set[str] = set()
    for n in range(5):
        project.run(definition="topiclake.bounded.guarantees", suite_name="topiclake.bounded.guarantees",
                    expectations=gx_suites.guarantee_expectations(), asset="bounded.guarantees",
                    frame=gx_suites.metrics_frame([({}, ("G1",), {"n": n})]), result_format="BOOLEAN_ONLY",
                    datasource=gx_suites.METRICS_DATASOURCE, keep=2)
        seen.update(glob.glob(os.path.join(store, "*", "*")))
        assert len(glob.glob(os.path.join(store, "*", "*", "*.json"))) == min(n + 1, 2)
        if n == 1:
            gx_project.build_data_docs(warehouse)  # pages of results that are pruned below
    assert len(seen) == 5
    assert sorted(glob.glob(os.path.join(store, "*", "*"))) == sorted(seen)[-2:]  # the newest two
    index = gx_project.build_data_docs(warehouse)
    pages = glob.glob(os.path.join(os.path.dirname(index), "validations", "**", "*.html"), recursive=True)
    assert len(pages) == 2, pages  # the pruned results' pages went with them
