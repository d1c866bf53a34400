"""A long run: many maintenance runs on a simulated clock, producers in between, and what
must stay bounded (issue 10, item 5).

Three topics, one of each cleanup policy, one partition each. Before every run a producer
appends a few keyed records (now and then a tombstone) to one topic in turn, the clock
moves one minute, and ``maintain`` runs over all three with the history on and the
guarantee checks after every committed stage. Every run must pass. At the end:

* each partition table is bounded by its policy: a compacted one by its keys plus what
  is not yet cleanable, a retained one by ``retention.ms`` worth of records;
* its Delta log is bounded by Delta's log cleanup: half way, the log files are aged by
  two days (the cleanup goes by their modification times), and at the end each log holds
  only the commits made since, plus one checkpoint interval;
* the maintenance history by its prune (each partition's newest runs; kept small here);
* the Great Expectations store by its prune (each suite's newest results), and with it
  the report: its Data Docs hold one page per kept result (its other pages are drawn
  from the bounded history).

Cost: a run costs about 0.6 s here, alone on two cores (three partitions, a produce call,
the checks and a history append; 200 runs in 119 s, 2026-12-03), so ``make test`` runs all
200, with the shipped prune cadence, store bound and checkpoint interval, and 20 runs kept
per partition (the shipped 500 would never be reached in 200 runs). ``make test-long``
runs this file alone; ``TOPICLAKE_LONG_RUNS`` asks for more runs (never fewer than 200).
"""

from __future__ import annotations

import glob
import json
import os
import time

import pytest

from framework.checks import gx_project
from framework.checks.guarantees import Guarantees
from framework.checks.gx_project import RESULTS_KEPT
from framework.clients.produce import produce
from framework.clients.records import parse_records
from framework.log.history import PRUNE_EVERY, MaintenanceHistory
from framework.log.topic import Topic
from framework.log.warehouse import CHECKPOINT_INTERVAL
from framework.report.site import write_report
from framework.spec import parse_spec
from framework.stages.maintenance import Maintenance

pytestmark = pytest.mark.slow

MIN_RUNS = 200
RUNS = max(MIN_RUNS, int(os.environ.get("TOPICLAKE_LONG_RUNS", str(MIN_RUNS))))
START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
MINUTE_MS = 60_000
KEYS = 12
#: each partition's newest runs the history keeps (the shipped 500 is never reached in 200 runs)
RUNS_KEPT = 20
TWO_DAYS_S = 2 * 86_400

SPECS = {
    "compacted": {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": 0.5, "delete.retention.ms": 600_000},
    "logs": {"cleanup.policy": "delete", "retention.ms": 1_800_000},
    "mixed": {"cleanup.policy": "compact,delete", "min.cleanable.dirty.ratio": 0.5, "retention.ms": 3_600_000,
              "delete.retention.ms": 600_000},
}


def _commit_versions(path: str) -> list[int]:
    names = glob.glob(os.path.join(path, "_delta_log", "*.json"))
    return sorted(int(os.path.basename(name).split(".")[0]) for name in names)


def _age_log(path: str, seconds: int) -> None:
    for name in glob.glob(os.path.join(path, "_delta_log", "*")):
        if os.path.isfile(name):
            stat = os.stat(name)
            os.utime(name, (stat.st_atime - seconds, stat.st_mtime - seconds))


def _folder_bytes(folder: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(folder) for f in files)


@pytest.mark.timeout(1800)
def test_long_run_passes_every_check_and_stays_bounded(spark, warehouse, tmp_path):
    specs = [parse_spec({"topic": topic, "partitions": 1, "config": {**config, "time.travel.retention.ms": 3_600_000}},
                        f"{topic}.yaml") for topic, config in SPECS.items()]
    topics = {spec.topic: Topic(spark, warehouse, spec) for spec in specs}
    for topic in topics.values():
        topic.create()
    maintenance = Maintenance(spark, warehouse, specs, validator=Guarantees(spark, warehouse),
                              history_runs_kept=RUNS_KEPT)
    produced = {name: 0 for name in topics}
    checked = {name: 0 for name in topics}  # checks passed, per topic
    judged = {name: 0 for name in topics}  # runs whose checks Great Expectations judged, per topic
    committed_stages = 0
    aged_at: dict[str, int] = {}
    started = time.monotonic()
    for run_number in range(1, RUNS + 1):
        now = START_MS + run_number * MINUTE_MS
        name = list(topics)[run_number % len(topics)]
        spec = topics[name].spec
        records = [{"key": f"k{(run_number * 5 + i) % KEYS}",
                    "value": None if spec.config.compact and (run_number + i) % 9 == 0 else f"{run_number}.{i}",
                    "timestamp": now - 1_000 + i} for i in range(4)]
        produce(topics[name], parse_records([(None, r) for r in records], spec, "long-run"), now)
        produced[name] += len(records)
        run = maintenance.run(now)
        failures = [(p.topic, p.error, p.failed_guarantees, [r.message for r in p.rows if r.message])
                    for p in run.partitions if p.failed]
        assert not failures, f"run {run_number} at {now}: {json.dumps(failures, default=str)[:3000]}"
        committed_stages += sum(1 for p in run.partitions for r in p.rows if r.committed)
        for part in run.partitions:
            passed = sum(1 for r in part.rows if r.validation == "passed")
            checked[part.topic] += passed
            judged[part.topic] += passed > 0  # one partition a topic: one validation a run
        if run_number == RUNS // 4:
            for name_, topic in topics.items():
                path = topic.partition(0).path
                _age_log(path, TWO_DAYS_S)
                aged_at[name_] = _commit_versions(path)[-1]
    elapsed = time.monotonic() - started

    # the partition tables: bounded by their policies
    cleaned: list[str] = []
    for name, topic in topics.items():
        log = topic.partition(0)
        state = log.snapshot().state
        records = log.read().count()
        config = topic.spec.config
        if config.compact:
            # one record per key in the clean section, plus what was produced since it was cleaned
            assert records <= KEYS + (state.log_end_offset - state.checkpoint), (name, records, state)
        if config.delete:
            # a minute per run, four records every third run: retention.ms worth of runs, plus one
            assert records <= 4 * (config.retention_ms // MINUTE_MS // len(topics) + 1), (name, records)
        assert state.log_end_offset == produced[name], name

        # its Delta log: once a checkpoint came after the ageing, only the commits since the
        # ageing and at most one checkpoint interval more
        versions = _commit_versions(log.path)
        made_since = versions[-1] - aged_at[name]
        if made_since >= CHECKPOINT_INTERVAL:
            cleaned.append(name)
            assert len(versions) <= made_since + CHECKPOINT_INTERVAL + 1, (name, len(versions), made_since)
    assert cleaned, "no partition made a checkpoint's worth of commits after the ageing: the check is vacuous"

    # the history: each partition's newest runs, plus its latest committed one, plus one prune cadence
    from pyspark.sql import functions as F

    history = MaintenanceHistory(spark, warehouse).read()
    runs_per_partition = {(r["topic"], r["partition"]): r["n"] for r in
                          history.groupBy("topic", "partition").agg(F.countDistinct("run_id").alias("n")).collect()}
    assert set(runs_per_partition) == {(name, 0) for name in topics}
    for key, count in runs_per_partition.items():
        assert count <= RUNS_KEPT + 1 + PRUNE_EVERY, (key, count)
    assert max(runs_per_partition.values()) < RUNS, "the history was never pruned"

    # the GE store: each suite keeps its newest results
    store = os.path.join(gx_project.project_root(warehouse), "gx", "uncommitted", "validations")
    for name in topics:
        kept = glob.glob(os.path.join(store, "topiclake", name, "guarantees", "*", "*", "*.json"))
        assert len(kept) == min(judged[name], RESULTS_KEPT), (name, len(kept), judged[name])
    assert max(judged.values()) > RESULTS_KEPT, "no suite had more results than it keeps: the check is vacuous"

    # the report: its Data Docs hold a page per kept result, no more (its other pages are
    # drawn from the history, bounded above)
    results = glob.glob(os.path.join(store, "**", "*.json"), recursive=True)
    final = os.path.dirname(write_report(spark, warehouse, str(tmp_path / "final")))
    pages = glob.glob(os.path.join(final, "data_docs", "validations", "**", "*.html"), recursive=True)
    assert len(pages) == len(results) <= RESULTS_KEPT * len(topics), (len(pages), len(results))
    report_bytes = _folder_bytes(final)
    print(f"\n{RUNS} runs in {elapsed:.0f} s ({elapsed / RUNS:.2f} s a run), {committed_stages} committed stages "
          f"checked; checks per topic {checked}, judged in {judged} validations; runs kept per partition {runs_per_partition}; "
          f"report {report_bytes} bytes, {len(pages)} Data Docs result pages")
