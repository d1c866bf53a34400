"""Real `topiclake maintain` runs: partition isolation (CONTRACT section 6) and what the
maintenance history records (CONTRACT section 8).

Everything here goes through the command line (``framework.cli.main.main``) on real Delta
tables, and every expected number is worked out by hand in the test, never by calling
the engine's own functions, so that a rewritten engine that gets one wrong turns red.
Surviving offsets are read straight from the Delta tables, not through the engine.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from framework import faults
from framework.cli.main import main
from framework.log.warehouse import delta_table_sql
from tests.support.delta_readers import delta_rs_offsets
from tests.support.table_files import data_files_on_disk

# --------------------------------------------------------------------- helpers


def write_jsonl(path, records) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


def cli(capsys, *args) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def delta_log_files(path: str) -> list[str]:
    return sorted(os.listdir(os.path.join(path, "_delta_log")))


# ------------------------------------------------------ a. partition isolation
ISOLATED = """\
topic: iso
partitions: 3
config:
  cleanup.policy: compact
  min.cleanable.dirty.ratio: 0.0
"""

#: Per partition, what it holds and what one compaction leaves (the latest offset per key).
RECORDS = {
    0: ["a", "a", "b"],        # a: 0, 1; b: 2          -> [1, 2]
    1: ["a", "a", "b"],        # (made to fail)         -> unchanged [0, 1, 2]
    2: ["x", "y", "x", "y"],   # x: 0, 2; y: 1, 3       -> [2, 3]
}
COMPACTED = {0: [1, 2], 2: [2, 3]}
DAY_MS = 86_400_000


@pytest.fixture
def isolated(spark, tmp_path, capsys):
    """Three partitions of a compacted topic, produced and not yet maintained."""
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "iso.yaml").write_text(ISOLATED)
    warehouse = tmp_path / "warehouse"
    common = ["--warehouse", str(warehouse), "--specs", str(specs)]
    records = [{"partition": p, "key": key, "value": str(i), "timestamp": 0}
               for p, keys in RECORDS.items() for i, key in enumerate(keys)]
    code, _, err = cli(capsys, "produce", *common, "--topic", "iso", "--input",
                       write_jsonl(tmp_path / "in.jsonl", records), "--now", "0")
    assert code == 0, err
    paths = {p: str(warehouse / f"iso-{p}") for p in RECORDS}
    assert {p: delta_rs_offsets(path) for p, path in paths.items()} == {0: [0, 1, 2], 1: [0, 1, 2], 2: [0, 1, 2, 3]}
    return common, paths


def assert_others_compacted(spark, paths) -> None:
    assert {p: delta_rs_offsets(paths[p]) for p in (0, 2)} == COMPACTED


@pytest.mark.parametrize("threads", ["1", "2"], ids=["one cleaner thread", "two cleaner threads"])
def test_a_partition_that_fails_does_not_stop_the_others(spark, isolated, capsys, threads):
    common, paths = isolated
    version_files = delta_log_files(paths[1])
    calls = []

    def fail_partition_1(point, context):
        calls.append(context["log"].partition)
        if context["log"].partition == 1:
            raise RuntimeError("injected failure in partition 1")

    with faults.installed("compact.before_commit", fail_partition_1):
        code, out, err = cli(capsys, "maintain", *common, "--now", "1000", "--cleaner-threads", threads)
    assert sorted(set(calls)) == [0, 1, 2], err  # partition 2 still ran after partition 1 failed
    assert code == 1, err
    lines = out.splitlines()
    assert [lines[0], lines[2]] == ["iso-0: ok", "iso-2: ok"], out
    assert lines[1].startswith("iso-1: FAILED") and "injected failure in partition 1" in lines[1], out
    assert len(lines) == 3, out
    assert_others_compacted(spark, paths)
    assert delta_rs_offsets(paths[1]) == [0, 1, 2]
    assert delta_log_files(paths[1]) == version_files  # nothing committed to partition 1


@pytest.mark.parametrize("route", ["measured at once", "measured in a batch", "counted by Arrow"])
def test_a_check_that_cannot_run_fails_its_partition_and_its_committed_stage_is_recorded(
        spark, isolated, capsys, monkeypatch, route):
    """A check runs after its stage committed; when the check itself cannot run (here: Delta
    refuses the version it reads), the stage's row still says it committed, the row says the
    check erred, and the partition fails (exit 1) while the others go on: it is not the
    user's input that is wrong (no exit 2), and the history keeps every commit. A small
    partition's check measured with others (framework/checks/batched.py) fails alone too:
    the batch that cannot read partition 1 fails, and each check is measured on its own.
    So does a compaction check Arrow counts in the driver (framework/checks/arrow_scope.py,
    the first route of every compaction check) that cannot read partition 1's files; the
    first two routes are Spark's, with Arrow's count turned off."""
    from framework.checks import arrow_scope, batched
    from framework.checks.guarantees import Guarantees
    from framework.errors import TimeTravelError

    real_measure, real_count, real_counted = Guarantees.measure, batched.count, arrow_scope.counted

    def refused_on_partition_1(self, check):
        if check.log.partition == 1:
            raise TimeTravelError(f"{check.log.name}: cannot read that version: injected refusal")
        return real_measure(self, check)

    def batch_refused_with_partition_1(spark, checks, state_after):
        if any(check.log.partition == 1 for check in checks):
            raise TimeTravelError("cannot read a version of the batch: injected refusal")
        return real_count(spark, checks, state_after)

    def arrow_refused_on_partition_1(check, *args):
        if check.log.partition == 1:
            raise TimeTravelError(f"{check.log.name}: cannot read that version: injected refusal")
        return real_counted(check, *args)

    if route == "counted by Arrow":
        monkeypatch.setattr(arrow_scope, "counted", arrow_refused_on_partition_1)
    else:
        monkeypatch.setattr(arrow_scope, "counted", lambda *args: None)
        monkeypatch.setattr(Guarantees, "measure", refused_on_partition_1)
    if route == "measured at once":
        monkeypatch.setattr(Guarantees, "batchable", lambda self, check, peers: False)
    elif route == "measured in a batch":
        monkeypatch.setattr(batched, "count", batch_refused_with_partition_1)
    common, paths = isolated
    code, out, err = cli(capsys, "maintain", *common, "--now", "1000", "--no-report")
    assert code == 1, out + err
    lines = out.splitlines()
    assert [lines[0], lines[2]] == ["iso-0: ok", "iso-2: ok"], out
    assert lines[1] == ("iso-1: FAILED (the check of compact could not run: iso-1: cannot read that version: "
                        "injected refusal)"), out
    # partition 1's compaction committed (keys a, a, b: offsets 1 and 2 stay), and so did the others'
    assert delta_rs_offsets(paths[1]) == [1, 2]
    assert_others_compacted(spark, paths)
    history = compact_rows(spark, common)
    assert [(r["partition"], r["committed"], r["validation"]) for r in history] == [
        (0, True, "passed"), (1, True, "error"), (2, True, "passed")]
    assert "injected refusal" in history[1]["message"]


@pytest.mark.parametrize("policy", ["compact", "compact,delete"])
@pytest.mark.parametrize("window", [(), ("--retention-ms", "0", "--unsafe-shorter-time-travel")],
                         ids=["the spec's window", "a window of 0"])
def test_small_partitions_checks_are_measured_in_one_batch_a_stage_when_their_files_stay(
        spark, isolated, capsys, monkeypatch, window, policy):
    """A run's small partitions' compaction and retention checks wait for their verdicts;
    they are counted clean by Arrow in the driver (framework/checks/arrow_scope.py), every
    one passing; unless the run's vacuum may delete the files a stage just removed (a window
    under an hour): then each is measured at once, before that vacuum runs (still counted by
    Arrow). What Arrow does not count waits for one Spark job a stage
    (framework/checks/batched.py): here, with the spec's window, the retentions, which Arrow
    is told to leave. (The topic turns to compact,delete after its records were produced: a
    day's time retention then removes every record the compaction kept.)"""
    from framework.checks import arrow_scope, batched

    real, batches = batched._count_group, []
    real_arrow, by_arrow = arrow_scope.counted, []

    def counted(spark, checks, files, scopes, stage, *rest):
        batches.append((stage, sorted(check.log.partition for check in checks)))
        return real(spark, checks, files, scopes, stage, *rest)

    def counted_by_arrow(check, *args):
        if check.stage == "retain" and not window:
            return None
        found = real_arrow(check, *args)
        by_arrow.append((check.stage, check.log.partition, found is not None and not found[0]))
        return found

    monkeypatch.setattr(batched, "_count_group", counted)
    monkeypatch.setattr(arrow_scope, "counted", counted_by_arrow)
    common, paths = isolated
    if policy != "compact":
        (Path(common[3]) / "iso.yaml").write_text(ISOLATED.replace("compact", policy) + "  retention.ms: 86400000\n")
    code, out, err = cli(capsys, "maintain", *common, "--now", str(2 * DAY_MS), "--no-report", *window)
    assert code == 0, out + err
    stages = ("compact",) if policy == "compact" else ("compact", "retain")
    assert sorted(batches) == ([] if window or policy == "compact" else [("retain", [0, 1, 2])])
    assert sorted(by_arrow) == [(stage, p, True) for stage in (stages if window else ("compact",)) for p in (0, 1, 2)]
    assert [(r["partition"], r["committed"], r["validation"]) for r in stage_rows(spark, common, stages)] == [
        (p, True, "passed") for p in (0, 1, 2) for _ in stages]
    if policy != "compact":
        assert {p: delta_rs_offsets(path) for p, path in paths.items()} == {0: [], 1: [], 2: []}


def compact_rows(spark, common: list[str]) -> list:
    """The history rows of the compact stage, per partition, of the warehouse ``common`` names."""
    return stage_rows(spark, common, ("compact",))


def stage_rows(spark, common: list[str], stages) -> list:
    """The history rows of ``stages``, by partition and stage, of the warehouse ``common`` names."""
    return spark.sql(
        "SELECT partition, committed, validation, message FROM "
        f"{delta_table_sql(os.path.join(common[1], '_topiclake', 'maintenance_history'))} "
        f"WHERE stage IN ({', '.join(repr(stage) for stage in stages)}) ORDER BY partition, stage").collect()


def test_checks_that_cannot_be_judged_fail_their_partitions_and_their_committed_stages_are_recorded(
        spark, isolated, capsys, monkeypatch):
    """Great Expectations judges a run's checks together when the run records them; when that
    judgment cannot run, every partition it was for fails (exit 1), and their rows still
    say their stages committed, with the check in error."""
    from framework.checks.guarantees import Guarantees

    def judgment_refused(self, measured):
        raise OSError("injected: the Great Expectations store cannot be written")

    monkeypatch.setattr(Guarantees, "judge", judgment_refused)
    common, paths = isolated
    code, out, err = cli(capsys, "maintain", *common, "--now", "1000", "--no-report")
    assert code == 1, out + err
    assert out.splitlines() == [f"iso-{p}: FAILED (the check of compact could not be judged: injected: the Great "
                                "Expectations store cannot be written)" for p in range(3)], out
    history = compact_rows(spark, common)
    assert [(r["partition"], r["committed"], r["validation"]) for r in history] == [
        (0, True, "error"), (1, True, "error"), (2, True, "error")]
    assert all("injected" in r["message"] for r in history)
    assert delta_rs_offsets(paths[1]) == [1, 2]
    assert_others_compacted(spark, paths)


def corrupt_a_data_file(path: str) -> None:
    """Overwrite partition 1's data files with garbage: its log reads, its records do not."""
    data = data_files_on_disk(path)
    assert data
    for name in data:
        with open(name, "wb") as corrupt:
            corrupt.write(b"this is not a parquet file")


def corrupt_the_log(path: str) -> None:
    """Add a garbage commit file to partition 1's _delta_log: Delta cannot read the table at all."""
    folder = os.path.join(path, "_delta_log")
    newest = max(int(name.split(".")[0]) for name in os.listdir(folder) if name.endswith(".json"))
    with open(os.path.join(folder, f"{newest + 1:020d}.json"), "w") as corrupt:
        corrupt.write("{this is not a Delta commit\n")


@pytest.mark.parametrize("threads", ["1", "2"], ids=["one cleaner thread", "two cleaner threads"])
@pytest.mark.parametrize("corrupt", [
    corrupt_a_data_file,
    corrupt_the_log,
], ids=["data file", "delta log"])
def test_a_broken_partition_table_does_not_stop_the_others(spark, isolated, capsys, corrupt, threads):
    common, paths = isolated
    corrupt(paths[1])
    version_files = delta_log_files(paths[1])

    code, out, err = cli(capsys, "maintain", *common, "--now", "1000", "--json", "--cleaner-threads", threads)
    assert code == 1, err
    assert out, [line for line in err.splitlines() if line.startswith("topiclake:")]
    summary = json.loads(out)
    outcome = {p["partition"]: (p["failed"], p["error"] is not None) for p in summary["partitions"]}
    assert outcome == {0: (False, False), 1: (True, True), 2: (False, False)}, out
    assert_others_compacted(spark, paths)
    assert delta_log_files(paths[1]) == version_files  # nothing committed to partition 1


# --------------------------------------------- partitions side by side (log.cleaner.threads)
SIDE_BY_SIDE = {
    "kept.yaml": "topic: kept\npartitions: 4\nconfig:\n  cleanup.policy: compact\n  min.cleanable.dirty.ratio: 0.0\n",
    "timed.yaml": "topic: timed\npartitions: 2\nconfig:\n  cleanup.policy: delete\n  retention.ms: 1000\n",
}


def _twin(spark, tmp_path, capsys, name: str) -> list[str]:
    """A warehouse with both topics produced: kept's partitions hold keys a, a, b, c, a (offsets
    0-4; compaction keeps 2, 3, 4), timed's hold offsets 0-2 stamped 0, 500 and 3000."""
    specs = tmp_path / "specs"
    if not specs.exists():
        specs.mkdir()
        for file, text in SIDE_BY_SIDE.items():
            (specs / file).write_text(text)
    common = ["--warehouse", str(tmp_path / name), "--specs", str(specs)]
    kept = [{"partition": p, "key": k, "value": f"{p}{i}", "timestamp": 0}
            for p in range(4) for i, k in enumerate("aabca")]
    timed = [{"partition": p, "key": None, "value": str(t), "timestamp": t} for p in range(2) for t in (0, 500, 3000)]
    for topic, records in (("kept", kept), ("timed", timed)):
        code, _, err = cli(capsys, "produce", *common, "--topic", topic, "--now", "0",
                           "--input", write_jsonl(tmp_path / f"{name}-{topic}.jsonl", records))
        assert code == 0, err
    return common


def test_cleaner_threads_maintain_partitions_side_by_side_as_one_thread_would(spark, tmp_path, capsys):
    import threading
    import time
    from unittest import mock

    from great_expectations.core.validation_definition import ValidationDefinition

    from framework.checks import arrow_scope, rules

    one, two = _twin(spark, tmp_path, capsys, "one"), _twin(spark, tmp_path, capsys, "two")
    code, out_one, err_one = cli(capsys, "maintain", *one, "--now", "3500", "--no-report")
    assert code == 0, err_one
    # two partitions must be in their compaction commit at the same moment, or this times out
    together, threads, confs = threading.Barrier(2, timeout=120), set(), set()

    # a conf set at run time on the caller's session holds in every cleaner thread's session
    # (one the engine never sets: a small partition's stages set their own shuffle settings)
    probe, value = "spark.sql.files.openCostInBytes", "4194305"

    def meet(point, context):
        threads.add(threading.current_thread().name)
        confs.add(context["log"].spark.conf.get(probe))
        together.wait()

    kept = spark.conf.get(probe)
    spark.conf.set(probe, value)
    # the two threads' first checks must be in their Spark work at the same moment (or this
    # times out, and the checks fail), while Great Expectations validates one at a time:
    # timed's two partitions are fewer than a batch of checks needs (batched.MIN_BATCH), so
    # their retention checks are measured at once, each in its cleaner thread (by Spark: Arrow
    # would count them in the driver, with no Spark work to meet in)
    checking, summaries, shipped_summary = threading.Barrier(2, timeout=120), [], rules.summary
    shipped_counted = arrow_scope.counted
    validating, most, shipped_run, counting = [0], [0], ValidationDefinition.run, threading.Lock()

    def summary(*args, **kwargs):
        summaries.append(threading.current_thread().name)
        if len(summaries) <= 2:
            checking.wait()
        return shipped_summary(*args, **kwargs)

    def run(self, *args, **kwargs):
        with counting:
            validating[0] += 1
            most[0] = max(most[0], validating[0])
        try:
            time.sleep(0.05)  # room for a second validation to come in, were it let
            return shipped_run(self, *args, **kwargs)
        finally:
            with counting:
                validating[0] -= 1

    try:
        with faults.installed("compact.before_commit", meet), \
                mock.patch.object(rules, "summary", summary), mock.patch.object(ValidationDefinition, "run", run), \
                mock.patch.object(arrow_scope, "counted", lambda check, *args: None if check.stage == "retain"
                                  else shipped_counted(check, *args)):
            code, out_two, err_two = cli(capsys, "maintain", *two, "--now", "3500", "--no-report",
                                         "--cleaner-threads", "2")
    finally:
        spark.conf.set(probe, kept)
    assert code == 0, err_two
    assert len(threads) == 2 and all(name.startswith("cleaner") for name in threads), threads
    assert confs == {value}
    assert len(set(summaries[:2])) == 2 and most[0] == 1, (summaries, most)

    survivors = {}
    for common in (one, two):
        folder = common[1]
        survivors[folder] = {name: delta_rs_offsets(os.path.join(folder, name))
                             for name in sorted(os.listdir(folder)) if not name.startswith("_")}
    assert survivors[one[1]] == {**{f"kept-{p}": [2, 3, 4] for p in range(4)},
                                 **{f"timed-{p}": [2] for p in range(2)}}
    assert survivors[two[1]] == survivors[one[1]]
    # the same summary, progress lines and history rows, in the same order
    assert out_two == out_one
    assert err_two.splitlines() == err_one.splitlines()
    columns = "topic, partition, stage, committed, removed_records, validation"
    history = [[tuple(r) for r in spark.sql(
        f"SELECT {columns} FROM {delta_table_sql(os.path.join(common[1], '_topiclake', 'maintenance_history'))} "
        "ORDER BY topic, partition, stage").collect()] for common in (one, two)]
    assert history[1] == history[0] and len(history[0]) == 4 * 3 + 2 * 3  # compact|retain, optimize, vacuum


def test_cleaner_threads_below_one_are_refused_before_anything_is_written(spark, tmp_path, capsys):
    common = _twin(spark, tmp_path, capsys, "w")
    before = {name: delta_log_files(os.path.join(common[1], name)) for name in ("kept-0", "timed-0")}
    code, _, err = cli(capsys, "maintain", *common, "--now", "3500", "--cleaner-threads", "0")
    assert code == 2 and err.count("\n") == 1 and "--cleaner-threads" in err and "Traceback" not in err, err
    assert {name: delta_log_files(os.path.join(common[1], name)) for name in before} == before


NO_WINDOW = """\
topic: marked
partitions: 1
config:
  cleanup.policy: compact,delete
  retention.ms: 5000
  min.cleanable.dirty.ratio: 0.0
  time.travel.retention.ms: 0
"""


def test_a_stage_on_deletion_vectors_is_checked_with_no_time_travel_window(spark, tmp_path, capsys, monkeypatch):
    """With a time-travel window of 0 Delta refuses every version but the latest, so a
    check cannot read the version a stage started from through Delta once the stage has
    committed. A small partition's check counts it by Arrow from its files and vectors; its
    Spark route, which runs here (Arrow's count turned off), reads it from the same files
    less the rows their vectors hide (``stage_check.pinned_before``, where
    ``stage_check.readable_later`` says Delta could refuse it).
    Two compactions in a row (the second starts from the deletion vectors the first left,
    with no vacuum between to purge them), then a retention that cuts through them: each
    stage commits, and its check passes."""
    from framework.checks import arrow_scope

    monkeypatch.setattr(arrow_scope, "counted", lambda *args: None)
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "marked.yaml").write_text(NO_WINDOW)
    common = ["--warehouse", str(tmp_path / "warehouse"), "--specs", str(specs)]
    path = str(tmp_path / "warehouse" / "marked-0")
    code, _, err = cli(capsys, "create", *common)
    assert code == 0, err
    spark.sql(f"ALTER TABLE {delta_table_sql(path)} SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    for batch, now in enumerate((1000, 2000)):
        # keys a, b, c, a, b at timestamps now .. now + 4: each compaction keeps the last a, b and c
        records = [{"key": k, "value": f"{batch}{i}", "timestamp": now + i} for i, k in enumerate("abcab")]
        code, _, err = cli(capsys, "produce", *common, "--topic", "marked", "--now", str(now),
                           "--input", write_jsonl(tmp_path / f"b{batch}.jsonl", records))
        assert code == 0, err
        code, out, err = cli(capsys, "compact", *common, "--now", str(now + 10))
        assert code == 0 and "marked-0: ok" in out, out + err
    # 0-4 then 5-9; the first compaction kept 2, 3, 4, the second the last a, b, c: 7, 8, 9
    assert delta_rs_offsets(path) == [7, 8, 9]
    # the second compaction deleted rows by deletion vectors on the files the first left
    operations = [r["operation"] for r in spark.sql(f"DESCRIBE HISTORY {delta_table_sql(path)}").collect()]
    assert operations.count("MERGE") == 2, operations
    # retention at 7003 keeps from the first record at most 5000 ms old: offset 8 (timestamp 2003)
    code, out, err = cli(capsys, "retain", *common, "--now", "7003")
    assert code == 0 and "marked-0: ok" in out, out + err
    assert delta_rs_offsets(path) == [8, 9]
    history = spark.sql(f"SELECT stage, committed, validation FROM "
                        f"{delta_table_sql(str(tmp_path / 'warehouse' / '_topiclake' / 'maintenance_history'))} "
                        "WHERE committed ORDER BY run_started_ms").collect()
    assert [tuple(r) for r in history] == [("compact", True, "passed")] * 2 + [("retain", True, "passed")]


def test_a_version_is_pinned_only_where_delta_could_refuse_it_before_its_check():
    """A small partition's version with deletion vectors is left for its check to read
    through Delta only while Delta's window holds it for ``CHECK_WITHIN_MS`` more; Delta
    refuses a version other than the latest whose commit is older than the window."""
    from framework.stages.stage_check import CHECK_WITHIN_MS, readable_later

    now, week = 1_796_000_000_000, 7 * 86_400_000
    assert readable_later(now - 1_000, week, now)
    assert readable_later(now + CHECK_WITHIN_MS - week, week, now)
    assert not readable_later(now + CHECK_WITHIN_MS - week - 1, week, now)  # a version a week old
    assert not readable_later(now, 0, now) and not readable_later(now, CHECK_WITHIN_MS - 1, now)
    assert not readable_later(None, week, now) and not readable_later(now, None, now)  # unknown: pinned
    # and where Delta refuses it now, and so ever after (``validate`` says so without Delta)
    from framework.stages.stage_check import refused_now

    assert refused_now(now - week - 1, week, now) and refused_now(now - 1, 0, now)
    assert not refused_now(now - week, week, now) and not refused_now(now, 0, now)
    assert not refused_now(None, week, now) and not refused_now(now - 2 * week, None, now)  # unknown: Delta asked


EMPTIED = """\
topic: emptied
partitions: 1
config:
  cleanup.policy: compact,delete
  retention.ms: 1000
  min.cleanable.dirty.ratio: 0.0
"""


def test_a_forced_compaction_of_an_empty_partition_logs_no_error(spark, tmp_path, capsys):
    """Retention empties the partition; a forced maintain then compacts a version with no
    files. That is a normal run: it must not make Spark refuse a query on the way (PySpark
    logs every refusal as an ERROR with its stack trace, which the user's terminal showed)."""
    import logging

    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "emptied.yaml").write_text(EMPTIED)
    common = ["--warehouse", str(tmp_path / "warehouse"), "--specs", str(specs)]
    records = [{"key": "a", "value": str(i), "timestamp": i} for i in range(2)]
    code, _, err = cli(capsys, "produce", *common, "--topic", "emptied", "--now", "10",
                       "--input", write_jsonl(tmp_path / "in.jsonl", records))
    assert code == 0, err
    code, out, err = cli(capsys, "maintain", *common, "--now", "100000", "--no-report")
    assert code == 0, out + err
    assert delta_rs_offsets(str(tmp_path / "warehouse" / "emptied-0")) == []

    logged: list[logging.LogRecord] = []

    class Kept(logging.Handler):
        def emit(self, record):
            logged.append(record)

    from pyspark.logger import PySparkLogger

    # PySpark's own loggers (a plain logging.Logger of that name would break its calls)
    loggers = [PySparkLogger.getLogger(name) for name in ("DataFrameQueryContextLogger", "SQLQueryContextLogger")]
    for logger in loggers:
        logger.addHandler(Kept())
    try:
        code, out, err = cli(capsys, "maintain", *common, "--now", "200000", "--no-report", "--force")
    finally:
        for logger in loggers:
            logger.handlers = [h for h in logger.handlers if not isinstance(h, Kept)]
    assert code == 0 and "emptied-0: ok" in out, out + err
    assert "compact (forced): removed 0 record(s)" in err, err
    assert [record.getMessage()[:200] for record in logged] == []


# ------------------------------------------------------------ b. the history
HISTORY_SPEC = """\
topic: hist
partitions: 1
config:
  cleanup.policy: compact
  min.cleanable.dirty.ratio: 0.5
  max.compaction.lag.ms: 10000
  delete.retention.ms: 100000
"""


def test_the_history_records_each_trigger_and_the_numbers_behind_it(spark, tmp_path, capsys):
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "hist.yaml").write_text(HISTORY_SPEC)
    warehouse = tmp_path / "warehouse"
    common = ["--warehouse", str(warehouse), "--specs", str(specs)]
    table = str(warehouse / "hist-0")

    def produce(name, records, now):
        code, _, err = cli(capsys, "produce", *common, "--topic", "hist", "--input",
                           write_jsonl(tmp_path / name, records), "--now", str(now))
        assert code == 0, err

    def maintain(now):
        code, _, err = cli(capsys, "maintain", *common, "--now", str(now), "--json")
        assert code == 0, err

    # Sizes (UTF-8 bytes of key + value + header names and values):
    #   offset 0  k1 = "v1"                      2 + 2         = 4
    #   offset 1  k2 = "vé", header h = "x"      2 + 3 + 1 + 1 = 7   ("é" is 2 bytes)
    #   offset 2  k1 = "v2"                      2 + 2         = 4
    #   offset 3  k3 = null (tombstone)          2 + 0         = 2
    #   offset 4  k2 = "v3"                      2 + 2         = 4
    produce("1.jsonl", [
        {"key": "k1", "value": "v1", "timestamp": 1000},
        {"key": "k2", "value": "vé", "timestamp": 1000, "headers": {"h": "x"}},
        {"key": "k1", "value": "v2", "timestamp": 2000},
        {"key": "k3", "value": None, "timestamp": 2000},
    ], now=3000)                                                  # table version 0 (the append creates it)

    # Run 1, now = 5000: C = 0, U = 4 (no min lag: the log end). Dirty = 4+7+4+2 = 17 bytes,
    # clean = 0: ratio 17/17 = 1.0 > 0.5 -> dirty_ratio. Oldest dirty t = 1000, not below
    # 5000 - 10000 -> not max lag; delay = max(0, 5000 - 1000 - 10000) = 0. Removes offset 0
    # (k1's older record, 4 bytes); keeps and stamps the k3 tombstone: horizon 5000 + 100000.
    maintain(5000)                                                # MERGE: version 1

    produce("2.jsonl", [{"key": "k2", "value": "v3", "timestamp": 6000}], now=7000)   # version 2

    # Run 2, now = 20000: C = 4, U = 5. Clean = 7+4+2 = 13, dirty = 4: ratio 4/17 < 0.5.
    # Oldest dirty t = 6000 < 20000 - 10000 -> max_lag, alone; delay = 20000 - 6000 - 10000
    # = 4000. The tombstone's horizon (105000) is not reached. Removes offset 1 (k2's older
    # record, 7 bytes).
    maintain(20000)                                               # version 3
    # ... and bin-packing: the MERGE's file and the produce's are two small files: OPTIMIZE, version 4

    # Run 3, now = 105000 = the horizon: nothing dirty (C = U = 5): ratio 0 / 10 = 0.0 and
    # no max lag; the tombstone at offset 3 has reached its horizon -> tombstone_horizon.
    # Removes it (2 bytes); delay 0 (no dirty record).
    maintain(105000)                                              # version 5

    rows = [r.asDict() for r in spark.read.format("delta").load(
        str(warehouse / "_topiclake" / "maintenance_history")).collect()]
    assert sorted((r["now_ms"], r["stage"]) for r in rows) == [
        (5000, "compact"), (5000, "optimize"), (5000, "vacuum"), (20000, "compact"), (20000, "optimize"),
        (20000, "vacuum"), (105000, "compact"), (105000, "optimize"), (105000, "vacuum")]
    assert len({r["run_id"] for r in rows}) == 3
    compact = {r["now_ms"]: r for r in rows if r["stage"] == "compact"}

    common_fields = dict(topic="hist", partition=0, due=True, committed=True, validation="passed",
                         failed_guarantees=[], log_start_before=0, log_start_after=0)
    expected = {
        5000: dict(trigger="dirty_ratio", reasons=["dirty_ratio"], max_lag_caused=False,
                   dirty_ratio=17 / 17, oldest_dirty_age_ms=5000 - 1000, max_compaction_delay_ms=0,
                   version_before=0, version_after=1, records_before=4, records_after=3,
                   bytes_before=17, bytes_after=17 - 4, removed_records=1, removed_bytes=4, stamped_tombstones=1,
                   checkpoint_before=0, checkpoint_after=4, first_uncleanable_offset=4, log_end_offset=4),
        20000: dict(trigger="max_lag", reasons=["max_lag"], max_lag_caused=True,
                    dirty_ratio=4 / (13 + 4), oldest_dirty_age_ms=20000 - 6000,
                    max_compaction_delay_ms=20000 - 6000 - 10000,
                    version_before=2, version_after=3, records_before=3 + 1, records_after=3,
                    bytes_before=13 + 4, bytes_after=17 - 7, removed_records=1, removed_bytes=7, stamped_tombstones=0,
                    checkpoint_before=4, checkpoint_after=5, first_uncleanable_offset=5, log_end_offset=5),
        105000: dict(trigger="tombstone_horizon", reasons=["tombstone_horizon"], max_lag_caused=False,
                     dirty_ratio=0.0, oldest_dirty_age_ms=None, max_compaction_delay_ms=0,
                     version_before=4, version_after=5, records_before=3, records_after=2,
                     bytes_before=10, bytes_after=10 - 2, removed_records=1, removed_bytes=2, stamped_tombstones=0,
                     checkpoint_before=5, checkpoint_after=5, first_uncleanable_offset=5, log_end_offset=5),
    }
    for now, fields in expected.items():
        fields = {**common_fields, **fields}
        assert {name: compact[now][name] for name in fields} == fields, f"the compact row of the run at {now}"

    # The versions are the table's own: each run's compaction is the MERGE commit it names,
    # and what survives is k1 = "v2" (offset 2) and k2 = "v3" (offset 4).
    operations = {r["version"]: r["operation"] for r in
                  spark.sql(f"DESCRIBE HISTORY {delta_table_sql(table)}").select("version", "operation").collect()}
    assert operations == {0: "WRITE", 1: "MERGE", 2: "WRITE", 3: "MERGE", 4: "OPTIMIZE", 5: "MERGE"}
    packing = {r["now_ms"]: r for r in rows if r["stage"] == "optimize"}
    assert [(now, r["committed"], r["files_before"], r["files_after"]) for now, r in sorted(packing.items())] == [
        (5000, False, 1, 1), (20000, True, 2, 1), (105000, False, 1, 1)]
    assert packing[20000]["version_before"] == 3 and packing[20000]["version_after"] == 4
    assert delta_rs_offsets(table) == [2, 4]


def test_a_runs_history_rows_are_appended_together_and_soon_after_each_change(spark, tmp_path, monkeypatch):
    """A history append costs about what a small partition's compaction does, so a run
    appends its rows in one commit; a change waits no longer than ``FLUSH_AFTER_S`` for its
    row (0 here: every partition that committed is recorded before the next one starts).
    The checks of the rows appended together are judged together: one Great Expectations
    validation over a metrics row a check (one costs about what 200 rows do)."""
    from framework.checks import gx_suites
    from framework.checks.guarantees import Guarantees
    from framework.clients.produce import produce
    from framework.clients.records import parse_records
    from framework.log import history
    from framework.log.commit_log import read_commits
    from framework.log.topic import Topic
    from framework.log.warehouse import Warehouse
    from framework.spec import parse_spec
    from framework.stages.maintenance import Maintenance

    warehouse = Warehouse.resolve(str(tmp_path / "warehouse"))
    spec = parse_spec({"topic": "batched", "partitions": 3,
                       "config": {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": 0.0}}, "test")
    topic = Topic(spark, warehouse, spec)
    topic.create()
    judged: list[int] = []  # the metrics rows of each validation
    shipped_run = gx_suites.Project.run

    def run_counted(self, *args, frame, **kwargs):
        judged.append(len(frame))
        return shipped_run(self, *args, frame=frame, **kwargs)

    monkeypatch.setattr(gx_suites.Project, "run", run_counted)

    def history_commits_of_a_run(now: int) -> tuple[int, int, list[int]]:
        """(history commits, history rows, rows of each validation) a checked compaction of
        all three partitions adds."""
        raw = [(i, {"key": f"k{i % 2}", "value": "v", "timestamp": now, "partition": i % 3}) for i in range(12)]
        produce(topic, parse_records(raw, spec, "test"), now)
        path = warehouse.maintenance_history_path
        before, rows_before = read_commits(spark, path, 1)[0].version, spark.read.format("delta").load(path).count()
        judged.clear()
        run = Maintenance(spark, warehouse, [spec], validator=Guarantees(spark, warehouse)).run(
            now, stages=("compact",))
        assert not run.failed and all(p.rows[0].committed for p in run.partitions)
        assert [p.rows[0].validation for p in run.partitions] == ["passed"] * 3
        after = read_commits(spark, path, 1)[0].version
        return after - before, spark.read.format("delta").load(path).count() - rows_before, list(judged)

    Maintenance(spark, warehouse, [spec]).run(500, stages=("compact",))  # the history table exists
    assert history_commits_of_a_run(1_000) == (1, 3, [3])
    monkeypatch.setattr(history, "FLUSH_AFTER_S", 0.0)
    assert history_commits_of_a_run(2_000) == (3, 3, [1, 1, 1])


@pytest.mark.slow
def test_the_history_says_a_killed_run_did_not_finish(spark, tmp_path, capsys):
    """A maintain SIGKILLed right after its compaction commit leaves no history row for it; the
    next run finds the commit newer than anything the history records and says, under the
    killed run's id, that it did not finish, and what it committed."""
    import signal
    import subprocess
    import sys
    from pathlib import Path

    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "t.yaml").write_text("topic: t\npartitions: 1\nconfig:\n  cleanup.policy: compact\n")
    warehouse = str(tmp_path / "warehouse")
    source = write_jsonl(tmp_path / "in.jsonl", [{"key": "a", "value": str(i), "timestamp": i} for i in range(4)])
    assert cli(capsys, "--warehouse", warehouse, "--specs", str(specs), "produce", "--topic", "t",
               "--input", source, "--now", "100")[0] == 0

    killed = subprocess.run(
        [sys.executable, "-m", "framework.cli", "--warehouse", warehouse, "--specs", str(specs), "maintain", "--force",
         "--now", "1000"], cwd=Path(__file__).resolve().parents[1], capture_output=True, text=True, timeout=300,
        env={**os.environ, faults.ENVIRONMENT: "compact.after_commit"})
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert delta_rs_offsets(f"{warehouse}/t-0") == [3]  # the compaction committed, whole

    code, out, err = cli(capsys, "--warehouse", warehouse, "--specs", str(specs), "--json", "maintain", "--now", "2000")
    assert code == 0, err
    this_run = json.loads(out)["run_id"]
    rows = spark.read.format("delta").load(f"{warehouse}/_topiclake/maintenance_history").collect()
    [interrupted] = [r for r in rows if r["stage"] == "interrupted"]
    assert interrupted["run_id"] != this_run and interrupted["committed"]
    assert interrupted["version_after"] == 1  # the append that created the table 0, the killed run's compaction 1
    assert f"run {interrupted['run_id']} did not finish: it committed compact at version 1" in interrupted["message"]
    # the killed run's id is the one its commit carries, and it is said once: a third run adds nothing
    assert cli(capsys, "--warehouse", warehouse, "--specs", str(specs), "maintain", "--now", "3000")[0] == 0
    rows = spark.read.format("delta").load(f"{warehouse}/_topiclake/maintenance_history").collect()
    assert [r["stage"] for r in rows].count("interrupted") == 1
    page = Path(warehouse) / "_topiclake" / "report" / "partitions" / "t-0.html"
    assert "did not finish" in page.read_text()


# ------------------------------------------------------ c. a bounded driver
def test_maintain_and_validate_leave_no_partition_in_deltas_cache(spark, isolated, capsys, monkeypatch):
    """Delta caches every table it touches with its snapshot (about 3 MB once read through
    Delta); a run over many partitions must not keep them all. After ``maintain`` and after
    ``validate``, Delta hands out a new log object for each partition: the run forgot it.
    (A table touched otherwise stays cached: the same object comes back twice.) The verbs
    run on the started session, as a run that needs the JVM does: a run that never starts
    it (these small local tables need none) fills no cache."""
    from framework.cli.context import Context

    monkeypatch.setattr(Context, "deferred_spark", property(lambda ctx: ctx.spark))
    common, paths = isolated
    delta_log = getattr(spark._jvm, "org.apache.spark.sql.delta.DeltaLog")

    def cached() -> list:
        return [delta_log.forTable(spark._jsparkSession, path) for path in paths.values()]

    for verb in (["maintain", "--no-report", "--now", "1000"], ["validate", "--now", "1000"]):
        held = cached()
        assert all(a.equals(b) for a, b in zip(held, cached())), "Delta's cache did not hold the tables"
        code, out, err = cli(capsys, verb[0], *common, *verb[1:])
        assert code == 0, out + err
        assert not any(a.equals(b) for a, b in zip(held, cached())), f"{verb[0]} left a partition's table cached"
