"""Bin-packing (CONTRACT section 11): small files into files near segment.bytes, no record changed.

The grouping rule is pure and tested on its own: what it packs, what it leaves, and that
its cost follows the small files (every byte is rewritten a logarithmic number of times).
Then the stage runs on real partitions: fewer files, the same records for every reader,
a commit that says it changed no data, no conflict with a producer appending meanwhile,
and deletion vectors dropped on the way.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import replace
from urllib.parse import unquote

import pyarrow.parquet as pq
import pytest

from framework import faults
from framework.clients.produce import produce, produce_frame
from framework.clients.records import parse_records
from framework.log import version_checksum
from framework.log.topic import Topic
from framework.log.warehouse import delta_table_sql
from framework.spec import MIB, parse_spec
from framework.stages import arrow_rewrite, optimize
from framework.stages.maintenance import Maintenance
from framework.stages.optimize import DataFile, pack_groups
from tests.support.table_files import data_files_on_disk, live_physical_types
from tests.support.writers import arrow_writes


def files(*sizes: int, segment: int = 0, start: int = 0) -> list[DataFile]:
    out, offset = [], start
    for i, size in enumerate(sizes):
        out.append(DataFile(f"f{segment}-{i}", segment, size, offset, offset + 9, 10))
        offset += 10
    return out


def sizes(groups) -> list[list[int]]:
    return [[f.size_bytes for f in g] for g in groups]


# ------------------------------------------------------------------ the pure rule
def test_consecutive_small_files_make_one_group_and_a_lone_file_is_left():
    assert sizes(pack_groups(files(10, 10, 10), 100)) == [[10, 10, 10]]
    assert pack_groups(files(10), 100) == []
    assert pack_groups([], 100) == []


def test_a_file_at_the_target_size_is_never_rewritten_and_ends_a_run():
    assert sizes(pack_groups(files(10, 10, 100, 10, 10), 100)) == [[10, 10], [10, 10]]
    assert pack_groups(files(10, 150, 10), 100) == []


def test_bins_stay_within_the_target_size():
    groups = pack_groups(files(*[30] * 7), 100)
    assert sizes(groups) == [[30, 30, 30], [30, 30, 30]]  # the seventh is alone: not worth a rewrite
    assert all(sum(g) <= 100 for g in sizes(groups))


def test_a_big_file_is_not_rewritten_to_absorb_a_small_one():
    assert pack_groups(files(60, 5), 100) == []
    assert pack_groups(files(5, 60, 5), 100) == []
    assert pack_groups(files(60, 25), 100) == []
    assert sizes(pack_groups(files(60, 30), 100)) == [[60, 30]]  # largest is twice the rest: pays
    assert sizes(pack_groups(files(5, 5, 60, 5, 5), 100)) == [[5, 5], [5, 5]]


def test_a_file_without_offset_statistics_is_left_alone_and_ends_a_run():
    listed = files(10, 10, 10, 10)
    listed[1] = DataFile("foreign", 0, 10, listed[1].min_offset, listed[1].max_offset, 10, packable=False)
    assert [[f.path for f in g] for g in pack_groups(listed, 100)] == [["f0-2", "f0-3"]]


def test_groups_follow_offsets_and_never_cross_a_segment():
    mixed = files(10, 10, segment=0) + files(10, 10, segment=500, start=500)
    groups = pack_groups(list(reversed(mixed)), 100)
    assert [[f.path for f in g] for g in groups] == [["f0-0", "f0-1"], ["f500-0", "f500-1"]]


def timed(*spans: tuple[int, int]) -> list[DataFile]:
    """Files of 10 B, 10 records each, in offset order, with these (oldest, newest) timestamps."""
    return [replace(f, min_timestamp_ms=oldest, max_timestamp_ms=newest)
            for f, (oldest, newest) in zip(files(*[10] * len(spans)), spans)]


def test_under_retention_a_bin_spans_at_most_its_share_of_the_time():
    """With time retention a bin's timestamps span at most a tenth of ``retention.ms``: the
    cut, which rewrites the file its offset falls in, then rewrites a bounded share of the
    log, not one file packed from every append of the window."""
    minutes = timed(*[(60 * i, 60 * i + 59) for i in range(6)])
    assert sizes(pack_groups(minutes, 100)) == [[10] * 6]  # no span limit: one bin
    assert [[f.path for f in g] for g in pack_groups(minutes, 100, 120)] == [
        ["f0-0", "f0-1"], ["f0-2", "f0-3"], ["f0-4", "f0-5"]]
    assert pack_groups(minutes, 100, 100) == []  # two files span 119 ms: none packs
    # a file with no timestamps in its statistics, or one that spans more alone, is left alone
    # and ends a run
    gap = minutes[:2] + [replace(minutes[2], min_timestamp_ms=None)] + minutes[3:5]
    assert [[f.path for f in g] for g in pack_groups(gap, 100, 1000)] == [["f0-0", "f0-1"], ["f0-3", "f0-4"]]
    wide = timed((0, 10), (0, 5000), (20, 30), (25, 40))
    assert [[f.path for f in g] for g in pack_groups(wide, 100, 1000)] == [["f0-2", "f0-3"]]
    # out of order timestamps: the span is the newest less the oldest of the bin
    assert pack_groups(timed((500, 600), (0, 100)), 100, 550) == []
    assert len(pack_groups(timed((500, 600), (0, 100)), 100, 600)) == 1


def test_packing_bounds_follow_retention_only_where_it_deletes():
    def bounds(**config):
        return optimize.packing_bounds(parse_spec({"topic": "t", "partitions": 1, "config": config}, "test").config)

    assert bounds(**{"cleanup.policy": "compact"}) == (1024 * MIB, None)
    assert bounds(**{"cleanup.policy": "compact", "retention.ms": 600_000}) == (1024 * MIB, None)
    assert bounds(**{"cleanup.policy": "delete"}) == (1024 * MIB, 60_480_000)  # Kafka's 7 days
    assert bounds(**{"cleanup.policy": "delete", "retention.ms": -1}) == (1024 * MIB, None)
    assert bounds(**{"cleanup.policy": "compact,delete", "retention.ms": 600_000,
                     "retention.bytes": 50 * MIB}) == (5 * MIB, 60_000)
    assert bounds(**{"cleanup.policy": "delete", "retention.ms": -1, "retention.bytes": 100 * 1024 * MIB}) == (
        1024 * MIB, None)
    # never under Kafka's least segment.bytes: retention.bytes counts record bytes, a file's
    # size holds its Parquet overhead too
    assert bounds(**{"cleanup.policy": "delete", "retention.ms": -1, "retention.bytes": 120}) == (MIB, None)


def test_cost_follows_the_small_files_and_the_count_stays_logarithmic():
    """Append one small file at a time and pack after each: each byte is rewritten at most
    log1.5(n) times (a big packed file never absorbs a single small one), and the partition
    never holds more than log1.5(n) + 2 files."""
    live: list[DataFile] = []
    rewritten = 0
    n = 300
    for i in range(n):
        live.append(DataFile(f"new{i}", 0, 1, i, i, 1))
        for group in pack_groups(live, 10**9):
            rewritten += sum(f.size_bytes for f in group)
            merged = DataFile(f"packed{i}-{group[0].path}", 0, sum(f.size_bytes for f in group),
                              group[0].min_offset, group[-1].max_offset, sum(f.records for f in group))
            live = sorted([f for f in live if f not in group] + [merged], key=lambda f: f.min_offset)
        assert len(live) <= math.log(i + 1, 1.5) + 2
    assert rewritten <= n * math.log(n, 1.5)
    assert sum(f.size_bytes for f in live) == n


# ------------------------------------------------------------- on real partitions
SPEC = {"topic": "small", "partitions": 1,
        "config": {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": 0.0, "segment.bytes": MIB}}


def many_small_appends(topic, spec, calls: int, per_call: int = 20, start: int = 0) -> None:
    for call in range(calls):
        raw = [(i, {"key": f"k{start + call * per_call + i}", "value": "v" * 100, "timestamp": 1_000})
               for i in range(per_call)]
        produce(topic, parse_records(raw, spec, "test"), 1_000)


def records(log, version=None) -> list[tuple]:
    return sorted((r["offset"], r["key"], r["value"]) for r in log.read(version).collect())


def commit_actions(log, version: int) -> list[dict]:
    with open(os.path.join(log.path, "_delta_log", f"{version:020d}.json")) as handle:
        return [json.loads(line) for line in handle if line.strip()]


#: what the commit records alike, made without the JVM or through Delta's transaction
RECORDED = ("operation", "operationParameters", "operationMetrics", "isolationLevel", "isBlindAppend")


@pytest.mark.slow
@pytest.mark.parametrize("writer", ["arrow", "spark", "arrow, without the JVM"])
def test_maintain_bin_packs_small_files_without_changing_a_record(spark, warehouse, monkeypatch, writer):
    """As shipped on a local table, Arrow writes the packed file and the commit is made
    without the JVM (``optimize._execute_locally``); through Delta's transaction, Arrow or
    Spark's writer writes it. The commit records the same either way."""
    without_jvm = writer.endswith("without the JVM")
    if not without_jvm:
        monkeypatch.setattr(optimize, "_execute_locally", lambda *args: None)
    spec = parse_spec(SPEC, "test")
    topic = Topic(spark, warehouse, spec)
    topic.create()
    many_small_appends(topic, spec, 12)
    log = topic.partition(0)
    before_version = log.snapshot().version
    state_before = log.snapshot().state
    before = records(log)
    assert optimize.plan(log).files_before >= 12
    # Arrow writes the packed file on a local table (as shipped); Spark's writer where it cannot
    by_arrow = arrow_writes(monkeypatch, arrow_rewrite, "packed", writer.split(",")[0])
    by_arrow_locally = arrow_writes(monkeypatch, arrow_rewrite, "packed_local", "arrow")
    monkeypatch.setattr(arrow_rewrite, "ROWS_A_BATCH", 7)  # each 20-record source file in three groups
    run = Maintenance(spark, warehouse, [spec], record_history=True).run(2_000, stages=("optimize",))
    row = run.partitions[0].rows[0]
    assert row.stage == "optimize" and row.committed, row.message
    assert by_arrow == ([True] if writer == "arrow" else [])
    assert by_arrow_locally == ([True] if without_jvm else [])
    assert row.files_before >= 12 and row.files_after == 1
    assert records(log) == before
    assert records(log, before_version) == before  # time travel to the version before is intact
    actions = commit_actions(log, row.version_after)
    info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
    assert info["operation"] == "OPTIMIZE" and info["isolationLevel"] == "SnapshotIsolation"
    assert ("(no JVM)" in info["engineInfo"]) == without_jvm, info["engineInfo"]
    # (the same for every writer: the one made without the JVM records what Delta's does)
    assert {k: info[k] for k in RECORDED} == {
        "operation": "OPTIMIZE", "isolationLevel": "SnapshotIsolation", "isBlindAppend": False,
        "operationParameters": {"predicate": "[]", "zOrderBy": "[]", "clusterBy": "[]", "auto": False},
        "operationMetrics": {}}
    changes = [a.get("add") or a.get("remove") for a in actions if "add" in a or "remove" in a]
    assert len(changes) == row.files_before + 1
    assert all(change["dataChange"] is False for change in changes)  # streaming readers skip it
    # the packed file is in offset order, so its statistics skip by offset
    add = next(a["add"] for a in actions if "add" in a)
    added = json.loads(add["stats"])
    assert (added["minValues"]["offset"], added["maxValues"]["offset"]) == (0, len(before) - 1)
    if writer != "spark":  # in row groups a reader of a stretch of offsets can skip between
        footer = pq.ParquetFile(os.path.join(log.path, unquote(add["path"]))).metadata
        groups = [footer.row_group(i).num_rows for i in range(footer.num_row_groups)]
        assert max(groups) <= 7 and sum(groups) == len(before), groups
    # the state rides along, so the log's bookkeeping reads the same
    assert log.snapshot().state == state_before
    again = Maintenance(spark, warehouse, [spec], record_history=False).run(3_000, stages=("optimize",))
    assert not again.partitions[0].rows[0].committed  # one file: nothing left worth packing


@pytest.mark.slow
def test_a_timestamp_after_2262_in_files_spark_wrote_is_packed_as_it_was(spark, warehouse, monkeypatch):
    """Spark writes timestamps as Parquet's INT96, which Arrow reads as nanoseconds unless
    told otherwise: one after 2262-04-11 then wraps (the year 3000 read as 1830)."""
    spec = parse_spec(SPEC, "test")
    topic = Topic(spark, warehouse, spec)
    topic.create()
    year_3000 = 32_503_680_000_000
    for call in range(12):
        produce_frame(topic, spark.createDataFrame([(f"k{call}", "v", year_3000 + call)],
                                                   "key STRING, value STRING, timestamp BIGINT"), 1_000)
    log = topic.partition(0)
    assert live_physical_types(log, "timestamp") == ["INT96"] * 12, "the test needs files written by Spark"
    by_arrow = arrow_writes(monkeypatch, arrow_rewrite, "packed_local", "arrow")  # (committed without the JVM)
    run = Maintenance(spark, warehouse, [spec], record_history=False).run(2_000, stages=("optimize",))
    packing = run.partitions[0].rows[0]
    assert packing.committed and packing.files_after == 1 and by_arrow == [True], packing.message
    kept = log.read().selectExpr("unix_millis(timestamp) AS ms").collect()
    assert sorted(row["ms"] for row in kept) == [year_3000 + call for call in range(12)]


@pytest.mark.slow
def test_files_whose_offsets_interleave_are_left_to_spark_s_writer(spark, warehouse):
    """Arrow packs a file at a time, in the order of their first offsets, so it writes nothing
    for files whose offsets interleave (here: one file listed twice); Spark's writer sorts them."""
    from framework.log.delta_transactions import DeltaJvm

    spec = parse_spec(SPEC, "test")
    topic = Topic(spark, warehouse, spec)
    topic.create()
    many_small_appends(topic, spec, 2)
    log = topic.partition(0)
    adds = version_checksum.live_adds(log.path, log.snapshot().version)
    on_disk = set(data_files_on_disk(log.path))
    delta = DeltaJvm(spark)
    txn = delta.delta_log(log.path).startTransaction()
    assert arrow_rewrite.packed(delta, txn, log.path, [adds[0], adds[0]]) is None
    assert set(data_files_on_disk(log.path)) == on_disk, "a file left behind"
    packed = arrow_rewrite.packed(delta, txn, log.path, adds)  # the same files, each once: packed
    assert packed is not None and json.loads(packed["stats"])["numRecords"] == 40 and not packed["dataChange"]


def test_a_local_table_with_nothing_worth_packing_is_planned_without_asking_the_session(spark, warehouse):
    """What the session could do matters only to a rewrite: ``status`` and ``plan`` of a
    local table with nothing to pack start no session (framework/cli/context.py)."""
    from types import SimpleNamespace

    spec = parse_spec(SPEC, "test")
    topic = Topic(spark, warehouse, spec)
    topic.create()
    many_small_appends(topic, spec, 1)
    log = topic.partition(0)

    class Unstarted:  # notes each question; answers none (as a session with no JVM would)
        def __init__(self):
            self.asked = []

        def __getattr__(self, name):
            self.asked.append(name)
            raise AttributeError(name)

    session = Unstarted()
    packing = optimize.plan(SimpleNamespace(spark=session, spec=spec, path=log.path), log.snapshot())
    assert session.asked == [] and not packing.due and packing.unavailable is None and len(packing.files) == 1
    assert packing == optimize.plan(log, log.snapshot())
    many_small_appends(topic, spec, 2, start=100)  # now worth packing: the session's abilities count
    packing = optimize.plan(SimpleNamespace(spark=session, spec=spec, path=log.path), log.snapshot())
    assert session.asked and packing.unavailable is not None and not packing.due
    assert optimize.plan(log, log.snapshot()).due


def test_a_session_without_file_statistics_packs_nothing_and_says_why(spark, warehouse):
    """The rewrite is checked record for record against the written files' statistics, so
    a session that does not collect them (a setting some tests and platforms use) skips."""
    spec = parse_spec(SPEC, "test")
    topic = Topic(spark, warehouse, spec)
    topic.create()
    many_small_appends(topic, spec, 3)
    session = spark.newSession()
    session.conf.set("spark.databricks.delta.stats.collect", "false")
    log = Topic(session, warehouse, spec).partition(0)
    version = log.snapshot().version
    packing = optimize.plan(log)
    assert not packing.due and "spark.databricks.delta.stats.collect is false" in packing.describe()
    assert not optimize.execute(log, packing).committed
    assert log.snapshot().version == version
    assert optimize.plan(topic.partition(0)).due  # the suite's session would pack them


@pytest.mark.slow
def test_a_producer_appending_while_it_packs_never_conflicts(spark, warehouse):
    spec = parse_spec({**SPEC, "topic": "busy"}, "test")
    topic = Topic(spark, warehouse, spec)
    topic.create()
    many_small_appends(topic, spec, 6)
    log = topic.partition(0)
    end_before = log.snapshot().state.log_end_offset

    def append_meanwhile(point, context):  # (the packing takes the next version, as Delta's would)
        many_small_appends(topic, spec, 1, start=10_000)

    with faults.installed("optimize.before_commit", append_meanwhile):
        run = Maintenance(spark, warehouse, [spec], record_history=False).run(2_000, stages=("optimize",))
    row = run.partitions[0].rows[0]
    assert row.committed and not run.failed, row.message
    state = log.snapshot().state
    assert state.log_end_offset == end_before + 20  # the append's offsets are kept, none reused
    assert [r[0] for r in records(log)] == list(range(end_before + 20))
    # the next produce continues after both
    many_small_appends(topic, spec, 1, start=20_000)
    assert [r[0] for r in records(log)] == list(range(end_before + 40))


def compacted_with_deletion_vectors(spark, warehouse, name: str, appends: int, every: int):
    """A partition of ``appends`` small files whose compaction hid every ``every``-th record
    of them behind deletion vectors (their keys were updated)."""
    spec = parse_spec({**SPEC, "topic": name}, "test")
    topic = Topic(spark, warehouse, spec)
    topic.create()
    log = topic.partition(0)
    spark.sql(f"ALTER TABLE {delta_table_sql(log.path)} SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    many_small_appends(topic, spec, appends)
    raw = [(i, {"key": f"k{i}", "value": "new", "timestamp": 1_500}) for i in range(0, 20 * appends, every)]
    produce(topic, parse_records(raw, spec, "test"), 1_500)  # updates: compaction deletes the old ones
    assert not Maintenance(spark, warehouse, [spec], record_history=False).run(2_000, stages=("compact",)).failed
    return spec, log


@pytest.mark.slow
@pytest.mark.parametrize("route", ["without the JVM", "through Delta's transaction"])
def test_bin_packing_drops_deletion_vectors_and_keeps_the_live_records(spark, warehouse, monkeypatch, route):
    """Files with deletion vectors packed: their live records alone, in new files without a
    vector whose statistics are tight (as Delta writes a new file of such a table), each old
    file removed with its vector; made without the JVM on a local table, as through Delta."""
    if route != "without the JVM":
        monkeypatch.setattr(optimize, "_execute_locally", lambda *args: None)
    _, log = compacted_with_deletion_vectors(spark, warehouse, "dv", appends=4, every=3)
    assert any(a.get("add", {}).get("deletionVector") for v in range(log.snapshot().version + 1)
               for a in commit_actions(log, v)), "compaction left no deletion vector to drop"
    before = records(log)
    packing = optimize.plan(log)
    assert packing.due and sum(f.records for f in packing.files) == len(before)
    result = optimize.execute(log, packing)
    assert records(log) == before
    actions = commit_actions(log, result.version_after)
    info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
    assert ("(no JVM)" in info["engineInfo"]) == (route == "without the JVM")
    added = [a["add"] for a in actions if "add" in a]
    assert added and all("deletionVector" not in a and json.loads(a["stats"])["tightBounds"] for a in added)
    removed = [a["remove"] for a in actions if "remove" in a]
    assert any(r.get("deletionVector") for r in removed)
    with open(os.path.join(log.path, "_delta_log", f"{result.version_after:020d}.crc")) as handle:
        checksum = json.load(handle)
    assert checksum["numDeletionVectorsOpt"] == sum(1 for a in checksum["allFiles"] if a.get("deletionVector"))
    live = [f for f in optimize.plan(log).files]
    assert len(live) < packing.files_before
    assert len(data_files_on_disk(log.path)) > len(live)  # the old files stay for time travel until vacuum


def _listed_by_delta(log, monkeypatch) -> optimize.PackPlan:
    """The plan as it is made when the version's checksum does not list the files."""
    with monkeypatch.context() as patched:
        patched.setattr(version_checksum, "live_adds", lambda path, version: None)
        return optimize.plan(log)


def _by_path(packing) -> list[DataFile]:
    return sorted(packing.files, key=lambda f: f.path)


def test_the_files_listed_by_the_version_checksum_are_the_files_delta_lists(spark, warehouse, monkeypatch):
    """A small partition's plan is made from the version's checksum file, without a Spark job;
    it must be the plan Delta's own snapshot gives, deletion vectors (hidden records) included,
    and a table with more files than the checksum lists falls back to Delta's listing."""
    spec, log = compacted_with_deletion_vectors(spark, warehouse, "listed", appends=3, every=4)
    assert version_checksum.live_adds(log.path, log.snapshot().version) is not None
    with monkeypatch.context() as patched:  # listed from the checksum alone: Delta's snapshot is not asked
        patched.setattr(optimize, "_data_files", lambda *args: pytest.fail("listed through Delta's snapshot"))
        from_checksum = optimize.plan(log)
    from_delta = _listed_by_delta(log, monkeypatch)
    assert any(f.records < 20 for f in from_checksum.files), "no file had records hidden by a deletion vector"
    assert _by_path(from_checksum) == _by_path(from_delta)
    assert from_checksum.groups == from_delta.groups and from_checksum.due

    few = spark.newSession()
    few.conf.set("spark.databricks.delta.allFilesInCrc.thresholdNumFiles", "2")
    crowded = Topic(few, warehouse, spec).partition(0)
    many_small_appends(Topic(few, warehouse, spec), spec, 1, start=1_000)
    assert version_checksum.live_adds(crowded.path, crowded.snapshot().version) is None
    assert _by_path(optimize.plan(crowded)) == _by_path(_listed_by_delta(crowded, monkeypatch))
    assert len(optimize.plan(crowded).files) == len(from_delta.files) + 1


@pytest.mark.slow
def test_plan_and_status_show_the_files(spark, warehouse, tmp_path, capsys):
    from framework.cli.main import main

    spec_file = tmp_path / "small.yaml"
    spec_file.write_text("topic: shown\npartitions: 1\nconfig:\n  cleanup.policy: compact\n  segment.bytes: 1048576\n")
    spec = parse_spec({**SPEC, "topic": "shown"}, "test")
    topic = Topic(spark, warehouse, spec)
    topic.create()
    many_small_appends(topic, spec, 3)
    common = ["--warehouse", warehouse.root, "--specs", str(spec_file)]
    assert main([*common, "--json", "plan", "--now", "2000"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert "optimize" in out[0], out
    planned = out[0]["optimize"]
    assert planned["due"] and planned["files"] == 3 and planned["files_after"] == 1
    assert planned["groups"] == [{"files": 3, "bytes": planned["bytes"], "offsets": [0, 59]}]
    assert main([*common, "plan", "--now", "2000"]) == 0
    assert "bin-packing: DUE; would bin-pack 3 of 3 file(s)" in capsys.readouterr().out
    assert main([*common, "--json", "status"]) == 0
    status = json.loads(capsys.readouterr().out)[0]
    assert status["data_files"] == 3 and status["bin_packing_due"] is True
    assert main([*common, "optimize", "--now", "2000"]) == 0
    capsys.readouterr()
    assert main([*common, "--json", "status"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["data_files"] == 1


@pytest.mark.parametrize("value", [1024, "1MB", -1])
def test_segment_bytes_below_kafkas_minimum_is_refused(value):
    from framework.errors import SpecError

    with pytest.raises(SpecError, match="segment.bytes"):
        parse_spec({"topic": "t", "partitions": 1, "config": {"segment.bytes": value}}, "test.yaml")


def test_a_spark_connect_session_skips_the_stage_and_says_why(tmp_path):
    """Spark Connect exposes no JVM, so no Delta transaction API: the stage is skipped, not a failure."""
    from types import SimpleNamespace

    from framework.log.log_state import LogState
    from framework.log.partition_log import Snapshot

    class ConnectSession:  # like pyspark.sql.connect's session: no _jvm attribute
        pass

    # a table elsewhere (no checksum here lists its files), so the session is asked
    log = SimpleNamespace(spark=ConnectSession(), spec=parse_spec(SPEC, "test"), path=str(tmp_path / "elsewhere"))
    packing = optimize.plan(log, Snapshot(version=3, state=LogState()))
    assert not packing.due and packing.files == ()
    assert packing.describe().startswith("skipped: bin-packing needs a classic Spark session")
