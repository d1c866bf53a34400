"""The command line, in-process (the CLI reuses the session fixture's active session)."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from framework.cli.main import main
from tests.support.cli_process import in_a_new_cli_process, printed_with_no_jvm

REPO = Path(__file__).resolve().parents[1]

COMPACTED = """\
topic: users
partitions: 2
config:
  cleanup.policy: compact
  min.cleanable.dirty.ratio: 0.0
"""
CHANGELOG = """\
topic: events
partitions: 1
config:
  cleanup.policy: delete
  retention.ms: -1
"""


@pytest.fixture
def specs(tmp_path):
    folder = tmp_path / "specs"
    folder.mkdir()
    (folder / "users.yaml").write_text(COMPACTED)
    (folder / "events.yaml").write_text(CHANGELOG)
    return folder


def run(capsys, *args):
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


def test_lint_needs_no_spark(tmp_path):
    """A fresh interpreter: lint must not import pyspark or great_expectations (how fast it
    answers is measured by jobs/benchmark.py, not asserted here). The first lint on a machine
    asks great_expectations' registry which expectation types exist, once, and keeps the
    answer in topiclake's cache folder; every lint after that imports neither."""
    code = (
        "import sys; from framework.cli.main import main; "
        "rc = main(['lint', 'table_specs']); "
        "print('imported:', sorted({m.split('.')[0] for m in sys.modules} & {'pyspark', 'great_expectations'})); "
        "sys.exit(rc)"
    )
    env = dict(os.environ, TOPICLAKE_CACHE=str(tmp_path / "cache"))
    for first in (True, False):
        done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr
        assert "ok   table_specs/customers-cdc.yaml" in done.stdout
        if first:
            assert list((tmp_path / "cache").glob("gx-expectation-types-*.json")), "the first lint kept no list"
        else:
            assert "imported: []" in done.stdout, done.stdout


def test_lint_reports_problems_with_exit_2(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("topic: x\npartitions: 1\nconfig:\n  min.compaction.lag.ms: 60000\n  max.compaction.lag.ms: 1000\n")
    code, out, _ = run(capsys, "lint", str(bad))
    assert code == 2
    assert f"{bad}:5:" in out and "max.compaction.lag.ms" in out


def test_bad_arguments_give_one_line_and_exit_2(capsys):
    code, out, err = run(capsys, "produce", "--topic")
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and err.startswith("topiclake: ")
    code, _, err = run(capsys, "no-such-verb")
    assert code == 2 and "invalid choice" in err
    from framework import __version__

    code, out, _ = run(capsys, "--version")
    assert code == 0 and out == f"topiclake {__version__}\n"


def test_create_produce_read_round_trip(spark, specs, tmp_path, capsys):
    wh = str(tmp_path / "wh")
    code, out, _ = run(capsys, "--warehouse", wh, "--specs", str(specs), "create")
    assert code == 0 and "users-0: created" in out and "users-1: created" in out and "events-0: created" in out
    code, out, _ = run(capsys, "--warehouse", wh, "--specs", str(specs), "create", "--topic", "users")
    assert code == 0 and "users-0: exists" in out

    records = [{"key": "a", "value": "1", "timestamp": 0, "headers": [["h", "x"], ["h", "y"]]},
               {"key": "c", "value": None, "timestamp": "1970-01-01T00:00:01Z"},
               {"key": "a", "value": "2", "timestamp": 2}]
    source = write_jsonl(tmp_path / "in.jsonl", records)
    code, out, _ = run(capsys, "produce", "--warehouse", wh, "--specs", str(specs), "--topic", "users", "--input", source)
    assert code == 0, out
    assert "users-0: 3 record(s) at offsets 0..2" in out  # murmur2: "a" and "c" both go to partition 0 of 2

    code, out, _ = run(capsys, "read", "--warehouse", wh, "--specs", str(specs), "--topic", "users", "--partition", "0")
    lines = [json.loads(line) for line in out.splitlines()]
    assert [r["offset"] for r in lines] == [0, 1, 2]
    assert lines[0]["headers"] == [["h", "x"], ["h", "y"]]
    assert lines[1]["value"] is None and lines[1]["timestamp"] == 1000

    code, out, _ = run(capsys, "read", "--warehouse", wh, "--specs", str(specs), "--topic", "users",
                       "--partition", "0", "--from-offset", "2")
    assert [json.loads(line)["offset"] for line in out.splitlines()] == [2]
    code, out, _ = run(capsys, "read", "--warehouse", wh, "--specs", str(specs), "--topic", "users",
                       "--partition", "0", "--version", "0")
    assert code == 0 and out == ""  # version 0 is the empty table

    code, out, _ = run(capsys, "--json", "--warehouse", wh, "--specs", str(specs), "status", "--topic", "users")
    status = {row["partition"]: row for row in json.loads(out)}
    assert status["users-0"]["log_end_offset"] == 3 and status["users-0"]["records"] == 3
    assert status["users-1"]["log_end_offset"] == 0


def test_read_of_a_small_local_version_by_arrow_prints_what_sparks_read_prints(spark, specs, tmp_path, capsys,
                                                                               monkeypatch):
    """``read`` of a small partition whose version is plain local files reads them by Arrow
    (``framework.log.local_records``): it prints exactly what the read through Spark prints,
    for text and binary keys, text and binary header values, tombstones, millisecond and
    year-9999 timestamps, a version holding Spark's INT96 files (a compaction's rewrite) and
    Arrow's beside them, ``--from-offset`` and ``--version``; in a new process no JVM starts."""
    import pyarrow.parquet as pq

    from framework.log import local_records

    (specs / "blobs.yaml").write_text("topic: blobs\npartitions: 1\nkey: {type: binary}\nvalue: {type: binary}\n"
                                      "config:\n  cleanup.policy: compact\n  min.cleanable.dirty.ratio: 0.0\n")
    wh = str(tmp_path / "wh")
    common = ["--warehouse", wh, "--specs", str(specs)]
    batches = {
        "users": [[{"key": "a", "value": "1", "timestamp": 1, "headers": [["h", "x"], ["b", {"base64": "AP8="}]]},
                   {"key": "b", "value": None, "timestamp": "2026-12-05T00:00:00.123Z", "partition": 0},
                   {"key": "a", "value": "2", "timestamp": 253402300799999, "partition": 0}],
                  [{"key": "c", "value": "3", "timestamp": 1999, "partition": 0, "headers": [["h", None]]}]],
        "blobs": [[{"key": {"base64": "AP8="}, "value": {"base64": "gA=="}, "timestamp": 5},
                   {"key": {"base64": "AP8="}, "value": None, "timestamp": 6}],
                  [{"key": {"base64": "AQ=="}, "value": {"base64": "AA=="}, "timestamp": 7}]]}
    for topic, (first, second) in batches.items():
        assert run(capsys, *common, "produce", "--topic", topic, "--input",
                   write_jsonl(tmp_path / f"{topic}-1.jsonl", first), "--now", "10")[0] == 0
        # Spark rewrites the files that lose records (INT96 timestamps), then Arrow appends beside them
        assert run(capsys, *common, "compact", "--topic", topic, "--now", "253402300799999")[0] == 0
        assert run(capsys, *common, "produce", "--topic", topic, "--input",
                   write_jsonl(tmp_path / f"{topic}-2.jsonl", second), "--now", "10")[0] == 0
    reads = [("users", ()), ("users", ("--from-offset", "2")), ("users", ("--version", "0")),
             ("blobs", ()), ("blobs", ("--from-offset", "1"))]

    def read_all() -> list:
        return [run(capsys, *common, "read", "--topic", topic, "--partition", "0", *options) for topic, options in reads]

    by_arrow = read_all()
    asked = []
    monkeypatch.setattr(local_records, "records", lambda *args: asked.append(args))  # every read through Spark
    by_spark = read_all()
    assert len(asked) == len(reads) and by_arrow == by_spark
    printed = [[json.loads(line) for line in out.splitlines()] for _, out, _ in by_arrow]
    assert [r["offset"] for r in printed[0]] == [1, 2, 3] and [r["offset"] for r in printed[1]] == [2, 3]
    assert [r["timestamp"] for r in printed[2]] == [1, 1796428800123, 253402300799999]  # before the compaction
    assert printed[2][0]["headers"] == [["h", "x"], ["b", {"base64": "AP8="}]] and printed[2][1]["value"] is None
    assert [(r["key"], r["value"]) for r in printed[3]] == [("AP8=", None), ("AQ==", "AA==")]
    users = local_records.small_plain_files(f"{wh}/users-0", 2)
    assert sorted(pq.ParquetFile(path).schema.column(1).physical_type for path in users.paths) == ["INT64", "INT96"]
    assert printed_with_no_jvm(*common, "read", "--topic", "users", "--partition", "0") + "\n" == by_arrow[0][1]


def test_a_small_partition_with_deletion_vectors_is_read_and_maintained_without_the_jvm(spark, tmp_path, capsys,
                                                                                         monkeypatch):
    """A small partition whose files carry deletion vectors (its owner turned them on; a
    compaction marked its losers) is read by Arrow less the rows its vectors hide: ``read``
    and a checked ``maintain`` that compacts, purges the vectors and vacuums (no time-travel
    window) start no JVM in a new process, and print what the same commands print on a
    twin warehouse through Spark and Delta (the measure and the read by Spark, the version
    before pinned through Delta, the check counted by Spark, Delta's REORG and VACUUM),
    which then holds the same records; so do a ``produce`` into them (its files' statistics
    tight, as Delta's append writes them) and a ``validate`` after it, which tells without
    Delta, in Delta's words, that Delta no longer reads the version the run left."""
    from framework.checks import arrow_scope, arrow_whole, validation_plan
    from framework.log import local_records, own_vacuum, version_checksum
    from framework.log.commit_log import local_commits
    from framework.stages import local_measure, maintenance, vacuum

    folder = tmp_path / "specs"
    folder.mkdir()
    (folder / "marked.yaml").write_text("topic: marked\npartitions: 2\nconfig:\n  cleanup.policy: compact\n"
                                        "  min.cleanable.dirty.ratio: 0.0\n  delete.retention.ms: 100000\n"
                                        "  time.travel.retention.ms: 0\n")
    warehouses = {way: str(tmp_path / way) for way in ("no jvm", "through spark")}
    now = ["--now", "100000"]
    common = ["--warehouse", warehouses["no jvm"], "--specs", str(folder)]
    for call in range(3):
        lines = write_jsonl(tmp_path / f"in-{call}.jsonl", [
            {"key": f"k{(call + i) % 5}", "value": None if (call, i) == (1, 2) else f"{call}.{i}",
             "timestamp": 1_000 * call + i} for i in range(10)])
        assert run(capsys, *common, "produce", "--topic", "marked", "--input", lines, *now)[0] == 0
        if call == 0:
            for partition in range(2):
                spark.sql(f"ALTER TABLE delta.`{warehouses['no jvm']}/marked-{partition}` "
                          "SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
        if call < 2:
            assert run(capsys, *common, "compact", "--topic", "marked", *now)[0] == 0
    shutil.copytree(warehouses["no jvm"], warehouses["through spark"])
    for partition in range(2):
        path = f"{warehouses['no jvm']}/marked-{partition}"
        version = local_commits(path, 1)[0].version
        assert version_checksum.plain_files(path, version) is None, "no deletion vector"
        assert local_records.small_plain_files(path, version) is not None
    later = write_jsonl(tmp_path / "later.jsonl", [{"key": f"k{i}", "value": "3", "timestamp": 3_000 + i}
                                                   for i in range(4)])
    commands = [["read", "--topic", "marked", "--partition", "1"],
                ["--json", "maintain", "--topic", "marked", *now, "--no-report"],
                ["--json", "produce", "--topic", "marked", "--input", later, *now],
                ["--json", "validate", "--topic", "marked", *now]]
    by_arrow = [printed_with_no_jvm(*common, *command, timeout=300) for command in commands]
    with monkeypatch.context() as patch:
        patch.setattr(local_records, "records", lambda *args: None)
        patch.setattr(local_measure, "scanned", lambda *args: None)
        patch.setattr(arrow_scope, "counted", lambda *args: None)
        def pinned_through_delta(log, snapshot):
            frame = log.read(snapshot.version)
            return lambda: frame

        patch.setattr(maintenance, "pinned_before", pinned_through_delta)
        patch.setattr(arrow_whole, "validated", lambda check: None)
        patch.setattr(validation_plan, "travels_here", lambda *args: False)
        patch.setattr(vacuum, "purged_locally", lambda log: None)
        patch.setattr(own_vacuum, "vacuumed", lambda *args: None)
        by_spark = []
        for command in commands:
            status, out, err = run(capsys, "--warehouse", warehouses["through spark"], "--specs", str(folder),
                                   *command)
            assert status == 0, err
            by_spark.append(out)
    assert by_arrow[0] and by_arrow[0].strip() == by_spark[0].strip()

    def stages(printed: str) -> list:
        return [[(s["stage"], s["committed"], s.get("removed_records"), s.get("files_after")) for s in p["stages"]]
                for p in json.loads(printed)["partitions"]]

    assert stages(by_arrow[1]) == stages(by_spark[1])
    assert all(s["validation"] == "passed" for p in json.loads(by_arrow[1])["partitions"] for s in p["stages"]
               if s["committed"])
    # the same appends (committed by topiclake, by Delta on the twin)
    assert [(r["partition"], r["base_offset"], r["count"]) for r in json.loads(by_arrow[2])] == [
        (r["partition"], r["base_offset"], r["count"]) for r in json.loads(by_spark[2])]
    # with no window, Delta no longer reads the version the run left: told here in Delta's words
    assert json.loads(by_arrow[3]) == json.loads(by_spark[3]) == [
        {"partition": f"marked-{p}", "passed": True, "failed_guarantees": [], "details": [
            f"note: compared with nothing: marked-{p}: cannot read that version: "
            "[DELTA_UNSUPPORTED_TIME_TRAVEL_BEYOND_DELETED_FILE_RETENTION_DURATION] Cannot time travel beyond "
            "delta.deletedFileRetentionDuration (0 HOURS) set on the table."]} for p in range(2)]
    assert any(stage == "compact" and committed for p in stages(by_arrow[1]) for stage, committed, _, _ in p)
    vacuums = [s["message"] for p in json.loads(by_arrow[1])["partitions"] for s in p["stages"]
               if s["stage"] == "vacuum"]
    assert len(vacuums) == 2 and all("purged=True" in m and "; files deleted 0;" not in m for m in vacuums), vacuums
    for partition in range(2):  # no vector left, nor a file of one (the purge's, the vacuum's)
        path = f"{warehouses['no jvm']}/marked-{partition}"
        assert not [name for name in os.listdir(path) if name.startswith("deletion_vector_")]
    for partition in range(2):
        records = {way: sorted(tuple(r) for r in spark.read.format("delta").load(f"{wh}/marked-{partition}").collect())
                   for way, wh in warehouses.items()}
        assert records["no jvm"] == records["through spark"] and records["no jvm"]


def test_a_retention_cut_over_deletion_vectors_starts_no_jvm(spark, tmp_path, capsys):
    """A compact,delete partition with deletion vectors turned on: a ``maintain`` in a new
    process compacts, plans its retention over files whose vectors hide rows, cuts what is
    older than ``retention.ms`` as a DELETE of vectors and checks both, with no JVM; the
    next one, with nothing due, neither. (``tests/test_deletion_vectors.py`` pins the cut
    to Delta's DELETE.)"""
    folder = tmp_path / "specs"
    folder.mkdir()
    (folder / "aged.yaml").write_text("topic: aged\npartitions: 1\nconfig:\n  cleanup.policy: compact,delete\n"
                                      "  min.cleanable.dirty.ratio: 0.0\n  retention.ms: 50000\n"
                                      "  segment.ms: 1000\n  time.travel.retention.ms: 0\n")
    wh = str(tmp_path / "wh")
    common = ["--warehouse", wh, "--specs", str(folder)]
    for call in range(4):  # six keys a call, four of its ten records superseded within it
        lines = write_jsonl(tmp_path / f"in-{call}.jsonl", [
            {"key": f"k{call}-{i % 6}", "value": f"{call}.{i}", "timestamp": 20_000 * call + i} for i in range(10)])
        assert run(capsys, *common, "produce", "--topic", "aged", "--input", lines, "--now", "60000")[0] == 0
        if call == 0:
            spark.sql(f"ALTER TABLE delta.`{wh}/aged-0` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")

    def stages(now: int) -> dict:
        printed = printed_with_no_jvm(*common, "--json", "maintain", "--topic", "aged", "--now", str(now),
                                      "--no-report", timeout=300)
        [partition] = json.loads(printed)["partitions"]
        assert all(s["validation"] == "passed" for s in partition["stages"] if s["committed"]), partition
        return {s["stage"]: s for s in partition["stages"]}

    first = stages(100_000)  # keeps what is newer than 50 s: call 3's survivors, offsets 34 to 39
    assert (first["compact"]["committed"], first["compact"]["removed_records"]) == (True, 16)
    assert (first["retain"]["committed"], first["retain"]["removed_records"]) == (True, 18)
    assert first["retain"]["log_start_after"] == 34
    cut = Path(wh, "aged-0", "_delta_log", f"{first['retain']['version_after']:020d}.json").read_text()
    commit = next(json.loads(line)["commitInfo"] for line in cut.splitlines() if "commitInfo" in line)
    assert commit["operation"] == "DELETE" and "(no JVM)" in commit["engineInfo"]
    again = stages(110_000)
    assert not again["compact"]["committed"] and not again["retain"]["committed"]
    offsets = sorted(r["offset"] for r in spark.read.format("delta").load(f"{wh}/aged-0").collect())
    assert offsets == list(range(34, 40))


def test_bad_records_write_nothing(spark, specs, tmp_path, capsys):
    wh = tmp_path / "wh"
    source = write_jsonl(tmp_path / "in.jsonl", [{"key": "a", "value": "1", "timestamp": 0},
                                                 {"key": None, "value": "1", "timestamp": 0}])
    code, out, err = run(capsys, "produce", "--warehouse", str(wh), "--specs", str(specs), "--topic", "users",
                         "--input", source)
    assert code == 2 and out == ""
    [line] = err.strip().splitlines()
    assert f"{source}:2: key:" in line and "compacted topic" in line
    assert not wh.exists()  # refused before Spark wrote anything


def test_produce_to_one_partition_and_conflicts(spark, specs, tmp_path, capsys):
    wh = str(tmp_path / "wh")
    source = write_jsonl(tmp_path / "in.jsonl", [{"key": "a", "value": "1", "timestamp": 0}])
    code, out, _ = run(capsys, "produce", "--warehouse", wh, "--specs", str(specs), "--topic", "users",
                       "--partition", "0", "--input", source)
    assert code == 0 and "users-0: 1 record(s) at offsets 0..0" in out
    clash = write_jsonl(tmp_path / "clash.jsonl", [{"key": "a", "value": "1", "timestamp": 0, "partition": 1}])
    code, _, err = run(capsys, "produce", "--warehouse", wh, "--specs", str(specs), "--topic", "users",
                       "--partition", "0", "--input", clash)
    assert code == 2 and "contradicts --partition 0" in err
    code, _, err = run(capsys, "produce", "--warehouse", wh, "--specs", str(specs), "--topic", "users",
                       "--partition", "5", "--input", source)
    assert code == 2 and "out of range" in err
    code, _, err = run(capsys, "produce", "--warehouse", wh, "--specs", str(specs), "--topic", "nope",
                       "--input", source)
    assert code == 2 and "no spec for topic 'nope'" in err


def test_commit_offset_and_delete_records(spark, specs, tmp_path, capsys):
    wh = str(tmp_path / "wh")
    source = write_jsonl(tmp_path / "in.jsonl", [{"key": "k", "value": str(i), "timestamp": 0} for i in range(5)])
    assert run(capsys, "produce", "--warehouse", wh, "--specs", str(specs), "--topic", "events", "--input", source)[0] == 0
    code, out, _ = run(capsys, "commit-offset", "--warehouse", wh, "--specs", str(specs), "--group", "g",
                       "--topic", "events", "--partition", "0", "--offset", "3")
    assert code == 0 and "committed offset 3" in out
    code, _, err = run(capsys, "commit-offset", "--warehouse", wh, "--specs", str(specs), "--group", "g",
                       "--topic", "events", "--partition", "0", "--offset", "-1")
    assert code == 2 and ">= 0" in err

    code, out, _ = run(capsys, "delete-records", "--warehouse", wh, "--specs", str(specs), "--topic", "events",
                       "--partition", "0", "--before-offset", "2")
    assert code == 0 and "log start 0 -> 2" in out and "removed 2 record(s)" in out
    code, _, err = run(capsys, "delete-records", "--warehouse", wh, "--specs", str(specs), "--topic", "events",
                       "--partition", "0", "--before-offset", "9")
    assert code == 2 and "OFFSET_OUT_OF_RANGE" in err
    code, _, err = run(capsys, "delete-records", "--warehouse", wh, "--specs", str(specs), "--topic", "users",
                       "--partition", "0", "--before-offset", "1")
    assert code == 2 and "POLICY_VIOLATION" in err
    code, out, _ = run(capsys, "read", "--warehouse", wh, "--specs", str(specs), "--topic", "events", "--partition", "0")
    assert [json.loads(line)["offset"] for line in out.splitlines()] == [2, 3, 4]


def test_plan_writes_nothing(spark, specs, tmp_path, capsys):
    wh = str(tmp_path / "wh")
    records = [{"key": "a", "value": str(i), "timestamp": 0} for i in range(4)]
    source = write_jsonl(tmp_path / "in.jsonl", records)
    assert run(capsys, "produce", "--warehouse", wh, "--specs", str(specs), "--topic", "users", "--partition", "0",
               "--input", source)[0] == 0
    from framework.log.topic import Topic
    from framework.log.warehouse import Warehouse
    from framework.spec import load_spec

    log = Topic(spark, Warehouse.resolve(wh), load_spec(specs / "users.yaml")).partition(0)
    before = log.snapshot().version
    code, out, _ = run(capsys, "--json", "--warehouse", wh, "--specs", str(specs), "plan", "--topic", "users",
                       "--now", "1000")
    assert code == 0
    plan = {p["partition"]: p for p in json.loads(out)}
    compaction = plan["users-0"]["compaction"]
    assert compaction["due"] and compaction["reasons"] == ["dirty_ratio"]
    assert compaction["first_uncleanable_offset"] == 4 and compaction["would_remove"]["superseded"]["records"] == 3
    assert log.snapshot().version == before
    # a due partition's would-remove is decided by Arrow from the local version's files: in a
    # new process no JVM starts, and it prints the same plan
    assert json.loads(printed_with_no_jvm("--json", "--warehouse", wh, "--specs", str(specs), "plan", "--topic",
                                          "users", "--now", "1000")) == json.loads(out)
    code, out, _ = run(capsys, "--warehouse", wh, "--specs", str(specs), "plan", "--topic", "users", "--now", "1000")
    assert "compaction: DUE (dirty_ratio)" in out and "would remove 3 record(s) (superseded)" in out


def test_status_plan_and_create_of_a_settled_local_warehouse_start_no_jvm(spark, specs, tmp_path, capsys):
    """With nothing due, ``status`` and ``plan`` read a local warehouse from its Delta logs'
    files (the commits, the checksums, the history by Arrow), and so does ``create`` of
    tables that exist with the spec's properties: in a new process no JVM starts, and they
    print what they print in the tests' session."""
    wh = str(tmp_path / "wh")
    records = [{"key": f"k{i % 3}", "value": str(i), "timestamp": 0} for i in range(6)]
    assert run(capsys, "produce", "--warehouse", wh, "--specs", str(specs), "--topic", "users",
               "--input", write_jsonl(tmp_path / "in.jsonl", records), "--now", "1000")[0] == 0
    assert run(capsys, "maintain", "--warehouse", wh, "--specs", str(specs), "--topic", "users", "--now", "1000",
               "--no-report")[0] == 0
    for verb, *options in (("status", "--now", "1000"), ("plan", "--now", "1000"), ("create",)):
        command = ["--json", "--warehouse", wh, "--specs", str(specs), verb, "--topic", "users", *options]
        status, here, _ = run(capsys, *command)
        assert status == 0
        entries = json.loads(here)
        assert entries == {"users": {"0": "exists", "1": "exists"}} if verb == "create" else (
            [e["partition"] for e in entries] == ["users-0", "users-1"])
        printed = printed_with_no_jvm(*command)
        assert json.loads(printed) == entries, verb


def test_a_first_command_into_a_new_warehouse_starts_no_jvm(spark, specs, tmp_path, capsys):
    """A warehouse folder that is not there yet, on a machine whose Spark names no other
    default file system: ``create`` and a first ``produce`` tell that its tables are missing
    from the local folders (no JVM asked) and make them by topiclake's own commits. In a new
    process no JVM starts, they print what they print in the tests' session (whose session
    answers through Delta), and Spark then reads the same tables."""
    from framework.log.topic import Topic
    from framework.log.warehouse import Warehouse
    from framework.spec import load_spec

    records = write_jsonl(tmp_path / "in.jsonl", [{"key": f"k{i % 3}", "value": str(i), "timestamp": 0}
                                                  for i in range(6)])
    for verb, *options in (("create", "--topic", "users"), ("produce", "--topic", "users", "--input", records,
                                                                 "--now", "1000")):
        here, there = tmp_path / f"{verb}-here" / "wh", tmp_path / f"{verb}-new-process" / "wh"
        status, printed_here, _ = run(capsys, "--json", "--warehouse", str(here), "--specs", str(specs), verb,
                                      *options)
        assert status == 0
        printed = printed_with_no_jvm("--json", "--warehouse", str(there), "--specs", str(specs), verb, *options)
        assert json.loads(printed) == json.loads(printed_here.replace(str(here), str(there))), verb
        spec = load_spec(specs / "users.yaml")
        logs = [Topic(spark, Warehouse.resolve(str(w)), spec).partitions() for w in (here, there)]
        for left, right in zip(*logs, strict=True):
            assert left.snapshot().state == right.snapshot().state, (verb, left.name)
            assert left.read().orderBy("offset").collect() == right.read().orderBy("offset").collect(), verb


def test_validate_of_a_warehouse_with_no_tables_starts_no_jvm(spark, specs, tmp_path, capsys):
    """``validate`` where no partition table exists yet (a new warehouse, or topics not
    produced to) has nothing to pair: it says so, and in a new process starts no JVM."""
    (tmp_path / "empty").mkdir()
    for where in (tmp_path / "new" / "wh", tmp_path / "empty"):
        command = ["--warehouse", str(where), "--specs", str(specs), "validate"]
        status, here, _ = run(capsys, *command)
        assert (status, here) == (0, "no partition table to validate yet\n")
        assert json.loads(printed_with_no_jvm("--json", *command)) == []


def test_commit_offset_into_a_local_table_starts_no_jvm(spark, specs, tmp_path, capsys):
    """``commit-offset`` creates the committed offsets' table, and once it exists reads its
    rows by Arrow and commits the upserted rows itself (framework/log/own_commits.py): in a
    new process no JVM starts, it prints what it prints in the tests' session, and Delta
    reads the offsets."""
    from framework.log.consumer_offsets import ConsumerOffsets
    from framework.log.warehouse import Warehouse

    wh = str(tmp_path / "wh")
    source = write_jsonl(tmp_path / "in.jsonl", [{"key": "k", "value": str(i), "timestamp": 0} for i in range(5)])
    assert run(capsys, "produce", "--warehouse", wh, "--specs", str(specs), "--topic", "events",
               "--input", source)[0] == 0

    def command(group: str, offset: int) -> list[str]:
        return ["--json", "--warehouse", wh, "--specs", str(specs), "commit-offset", "--group", group,
                "--topic", "events", "--partition", "0", "--offset", str(offset)]


    def in_a_new_process(group: str, offset: int) -> dict:
        printed = printed_with_no_jvm(*command(group, offset))
        return json.loads(printed)

    first = in_a_new_process("h", 1)  # creates the table too
    status, here, _ = run(capsys, *command("g", 2))  # through Delta
    assert status == 0 and first == {**json.loads(here), "group": "h", "offset": 1}
    assert in_a_new_process("g", 3) == {**json.loads(here), "offset": 3}
    offsets = ConsumerOffsets(spark, Warehouse.resolve(wh))
    assert offsets.committed("events", 0) == {"g": 3, "h": 1}
    rows = spark.read.format("delta").load(offsets.path).collect()
    assert sorted((r["group"], r["offset"]) for r in rows) == [("g", 3), ("h", 1)]
    # consumed retention (KIP-68) reads them: once it has cut, an idle run reads them by Arrow
    (specs / "consumed.yaml").write_text("topic: consumed\npartitions: 1\nconfig:\n  cleanup.policy: delete\n"
                                         "  retention.ms: -1\n  consumed.retention.ms: 0\n"
                                         "  consumed.retention.groups: g\n")
    maintain = ["--json", "--warehouse", wh, "--specs", str(specs), "maintain", "--topic", "consumed", "--now", "9"]
    assert run(capsys, "produce", "--warehouse", wh, "--specs", str(specs), "--topic", "consumed",
               "--input", source)[0] == 0
    assert run(capsys, "commit-offset", "--warehouse", wh, "--specs", str(specs), "--group", "g",
               "--topic", "consumed", "--partition", "0", "--offset", "2")[0] == 0
    status, here, _ = run(capsys, *maintain)
    assert status == 0 and json.loads(here)["partitions"][0]["stages"][0]["removed_records"] == 2

    def in_a_new_process(*command: str) -> tuple[dict, bool]:
        """What ``command`` printed, and whether it ran with no JVM started."""
        printed, jvm_started = in_a_new_cli_process(*command)
        return json.loads(printed), not jvm_started

    assert in_a_new_process("--json", "--warehouse", wh, "--specs", str(specs), "commit-offset", "--group", "g",
                            "--topic", "consumed", "--partition", "0", "--offset", "4")[1]
    cut, _ = in_a_new_process(*maintain)  # the offsets read by Arrow, with no session yet
    assert cut["partitions"][0]["stages"][0]["removed_records"] == 2
    idle, no_jvm = in_a_new_process(*maintain)
    assert no_jvm and not any(s["committed"] for s in idle["partitions"][0]["stages"])


def test_a_produce_into_local_partition_tables_starts_no_jvm(spark, specs, tmp_path, capsys):
    """Once a topic's tables exist, ``produce`` appends each partition's records with the
    commit Delta would make, made by topiclake itself (framework/log/own_commits.py): in a
    new process no JVM starts, its offsets follow the log end, and Delta, a maintain and
    delta-rs then read the records."""
    from framework.log.topic import Topic
    from framework.log.warehouse import Warehouse
    from framework.spec import load_spec
    from tests.support.delta_readers import delta_rs_query

    wh = str(tmp_path / "wh")
    first = [{"key": f"k{i % 3}", "value": str(i), "timestamp": 0} for i in range(6)]
    status, here, _ = run(capsys, "--json", "produce", "--warehouse", wh, "--specs", str(specs), "--topic", "users",
                          "--input", write_jsonl(tmp_path / "first.jsonl", first), "--now", "1000")
    assert status == 0  # creates the tables, through Delta
    command = ["--json", "--warehouse", wh, "--specs", str(specs), "produce", "--topic", "users",
               "--input", write_jsonl(tmp_path / "second.jsonl", first), "--now", "2000"]
    printed = printed_with_no_jvm(*command)
    before = {r["partition"]: r for r in json.loads(here)}
    after = {r["partition"]: r for r in json.loads(printed)}
    assert sorted(after) == sorted(before) and all(
        (after[p]["base_offset"], after[p]["count"], after[p]["version"]) == (r["count"], r["count"], 1)
        for p, r in before.items())  # the same keys land in the same partitions, after the first batch
    topic = Topic(spark, Warehouse.resolve(wh), load_spec(specs / "users.yaml"))
    for p, r in before.items():
        path = topic.partition(p).path
        offsets = sorted(row["offset"] for row in spark.read.format("delta").load(path).collect())
        assert offsets == list(range(2 * r["count"])) == sorted(o["offset"] for o in delta_rs_query(path, '"offset"'))
    status, out, _ = run(capsys, "--json", "maintain", "--warehouse", wh, "--specs", str(specs), "--topic", "users",
                         "--now", "2000", "--no-report")
    # exit 0: every stage committed and passed its guarantee checks
    assert status == 0 and any(s["committed"] for p in json.loads(out)["partitions"] for s in p["stages"])
    # a topic with no tables yet, in that warehouse: its tables made by the append's own commit
    # (a partition with records) or a create (one without), still with no JVM
    command = ["--json", "--warehouse", wh, "--specs", str(specs), "produce", "--topic", "events", "--partition",
               "0", "--input", write_jsonl(tmp_path / "third.jsonl", first[:2]), "--now", "3000"]
    printed = printed_with_no_jvm(*command)
    assert [(r["partition"], r["base_offset"], r["count"], r["version"]) for r in json.loads(printed)] == [
        (0, 0, 2, 0)]
    events = Topic(spark, Warehouse.resolve(wh), load_spec(specs / "events.yaml"))
    assert [sorted(r["value"] for r in spark.read.format("delta").load(log.path).collect())
            for log in events.partitions()] == [["0", "1"], *[[]] * (events.spec.partitions - 1)]
    status, out, _ = run(capsys, "--json", "status", "--warehouse", wh, "--specs", str(specs), "--topic", "events",
                         "--now", "3000")
    assert status == 0 and [p["log_end_offset"] for p in json.loads(out)] == [2, *[0] * (events.spec.partitions - 1)]


#: What tells two runs' JSON apart besides what they decided: the run, its clock and its time.
_RUN_OWN = ("run_id", "run_started_ms", "duration_ms")


def _decided(printed: str) -> dict:
    run = json.loads(printed)
    for part in run["partitions"]:
        part["stages"] = [{k: v for k, v in stage.items() if k not in _RUN_OWN} for stage in part["stages"]]
    return {k: v for k, v in run.items() if k not in _RUN_OWN}


@pytest.mark.parametrize("young", [False, True], ids=["settled", "a young record in the head"])
def test_an_idle_maintain_of_a_local_warehouse_starts_no_jvm(spark, specs, tmp_path, capsys, young):
    """A ``maintain`` with nothing due decides from the Delta logs' files and commits its
    history rows itself (framework/log/own_commits.py): in a new process no JVM starts, it
    prints what the same run prints in the tests' session, and Delta then reads its rows.
    With a record too young to compact, the commit metadata cannot rule out a head, and the
    partition is scanned: by Arrow (framework/stages/local_measure.py). Settled, the history
    append is at a checkpoint version, whose checkpoint delta-rs writes."""
    from framework.log.history import MaintenanceHistory
    from framework.log.warehouse import Warehouse

    wh = str(tmp_path / "wh")
    records = [{"key": f"k{i % 3}", "value": str(i), "timestamp": 5000 if young and i == 4 else 0} for i in range(6)]
    assert run(capsys, "produce", "--warehouse", wh, "--specs", str(specs), "--topic", "users",
               "--input", write_jsonl(tmp_path / "in.jsonl", records), "--now", "1000")[0] == 0
    command = ["--json", "--warehouse", wh, "--specs", str(specs), "maintain", "--topic", "users", "--now", "1000"]
    assert run(capsys, *command)[0] == 0  # the first run compacts
    status, here, _ = run(capsys, *command)
    assert status == 0 and not any(s["committed"] for p in json.loads(here)["partitions"] for s in p["stages"])
    heads = [s["first_uncleanable_offset"] < s["log_end_offset"] for p in json.loads(here)["partitions"]
             for s in p["stages"] if s["stage"] == "compact"]
    assert any(heads) == young, here
    history = MaintenanceHistory(spark, Warehouse.resolve(wh))
    if not young:  # the new process's history append is a checkpoint's (framework/log/own_checkpoints.py)
        from framework.log.commit_log import local_commits

        checkpoint_at = local_commits(history.path, 1)[0].version + 2  # (the ALTER is the next)
        spark.sql(f"ALTER TABLE delta.`{history.path}` SET TBLPROPERTIES "
                  f"('delta.checkpointInterval' = '{checkpoint_at}')")
    printed = printed_with_no_jvm(*command)
    assert _decided(printed) == _decided(here)
    if not young:
        with open(os.path.join(history.path, "_delta_log", "_last_checkpoint")) as handle:
            assert json.load(handle)["version"] == checkpoint_at
    run_id = json.loads(printed)["run_id"]
    rows = history.read().where(f"run_id = '{run_id}'").select("topic", "partition", "stage").collect()
    assert sorted(tuple(r) for r in rows) == sorted(
        (p["topic"], p["partition"], s["stage"]) for p in json.loads(printed)["partitions"]
        for s in p["stages"])


def test_console_script_is_installed_and_works():
    script = Path(sys.executable).with_name("topiclake")
    assert script.exists(), "run `make setup` (pip install -e .) to install the console script"
    done = subprocess.run([str(script), "lint", "table_specs"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


@pytest.mark.slow
def test_a_first_command_prints_what_topiclake_says_not_sparks_start_up(tmp_path):
    """Ivy's resolution report and the JVM's start-up lines go to a log file (--verbose shows
    them), and so does what Delta prints on the JVM's stdout: ``--json`` output stays JSON
    when a VACUUM runs (it prints "Deleted 0 files ..."). A first command: topiclake's cache
    folder is empty, so Ivy resolves (and the jars it resolved are written down there)."""
    cache = tmp_path / "cache"
    process = subprocess.Popen([sys.executable, "-m", "framework.cli", "--warehouse", str(tmp_path / "w"), "--specs",
                                str(REPO / "table_specs"), "--json", "vacuum", "--topic", "prices-feed",
                                "--partition", "0", "--retention-ms", "0", "--unsafe-shorter-time-travel"],
                               cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "TOPICLAKE_CACHE": str(cache)})
    out, err = process.communicate(timeout=240)
    assert process.returncode == 0, err[-2000:]
    run = json.loads(out)
    vacuums = [stage for part in run["partitions"] for stage in part["stages"] if stage["stage"] == "vacuum"]
    assert len(vacuums) == 1 and all("vacuumed: " in v["message"] and "not needed" not in v["message"]
                                     for v in vacuums), vacuums
    assert err == ""
    log = Path(tempfile.gettempdir()) / "topiclake-spark" / f"spark-{process.pid}.log"
    text = log.read_text(errors="replace")
    assert "delta-spark" in text  # Ivy resolved Delta's jars into it
    assert list(cache.glob("spark-jars-*.txt")), "the first start wrote down no jars"
    assert "Deleted 0 files and directories" in text  # VACUUM's console line


def test_a_maintain_that_compacts_cuts_and_packs_small_local_partitions_starts_no_jvm(spark, tmp_path, capsys,
                                                                                      monkeypatch):
    """On a local warehouse topiclake commits a small partition's compaction, retention cut
    and bin-packing itself (``file_rewrite.commit_locally``, ``optimize._execute_locally``),
    and vacuums it (``own_vacuum.vacuumed``, no time-travel window here): a checked
    ``maintain`` that does all four starts no JVM in a new process, and leaves
    what the same run through Delta's transaction leaves on a twin warehouse (the same
    records in every column, the same stages' figures), which Delta reads."""
    from framework.log import own_vacuum
    from framework.stages import file_rewrite, optimize
    from tests.support.delta_readers import delta_rs_query

    folder = tmp_path / "specs"
    folder.mkdir()
    (folder / "trades.yaml").write_text(
        "topic: trades\npartitions: 2\nconfig:\n  cleanup.policy: compact,delete\n  min.cleanable.dirty.ratio: 0.0\n"
        "  retention.ms: 60000\n  delete.retention.ms: 1000\n  time.travel.retention.ms: 0\n")
    warehouses = {way: str(tmp_path / way) for way in ("no jvm", "through delta")}
    # three old appends whose keys repeat (compacted, then cut by time), four new ones of new
    # keys: small files worth packing
    for call in range(7):
        old = call < 3
        lines = write_jsonl(tmp_path / f"in-{call}.jsonl", [
            {"key": f"c{call}-k{i % 4 if old else i}", "value": None if i == 3 else f"{call}.{i}",
             "timestamp": (10_000 if old else 100_000) + 1_000 * call + i} for i in range(8)])
        for wh in warehouses.values():
            assert run(capsys, "produce", "--warehouse", wh, "--specs", str(folder), "--topic", "trades",
                       "--input", lines, "--now", "100000")[0] == 0
    maintain = ["--specs", str(folder), "--json", "maintain", "--topic", "trades", "--now", "130000", "--no-report"]

    def commits(partition: int) -> list[str]:
        log = f"{warehouses['no jvm']}/trades-{partition}/_delta_log"
        return sorted(name for name in os.listdir(log) if name.endswith(".json"))

    produced = {partition: commits(partition) for partition in range(2)}
    printed = json.loads(printed_with_no_jvm("--warehouse", warehouses["no jvm"], *maintain, timeout=300))
    with monkeypatch.context() as patch:
        patch.setattr(file_rewrite, "commit_locally", lambda *args, **options: file_rewrite.NOT_LOCAL)
        patch.setattr(optimize, "_execute_locally", lambda *args: None)
        patch.setattr(own_vacuum, "vacuumed", lambda *args: None)
        status, here, err = run(capsys, "--warehouse", warehouses["through delta"], *maintain)
    assert status == 0, err
    stages = {way: [[(s["stage"], s["committed"], s.get("removed_records"), s.get("files_after"))
                     for s in p["stages"]] for p in done["partitions"]]
              for way, done in (("no jvm", printed), ("through delta", json.loads(here)))}
    assert stages["no jvm"] == stages["through delta"]
    done = {stage for partition in stages["no jvm"] for stage, committed, _, _ in partition if committed}
    assert {"compact", "retain", "optimize", "vacuum"} <= done, stages["no jvm"]
    for partition in range(2):
        tables = {way: f"{wh}/trades-{partition}" for way, wh in warehouses.items()}
        through_spark = {way: sorted(tuple(r) for r in spark.read.format("delta").load(path).collect())
                         for way, path in tables.items()}
        assert through_spark["no jvm"] == through_spark["through delta"] and through_spark["no jvm"]
        assert delta_rs_query(tables["no jvm"]) == delta_rs_query(tables["through delta"])
        maintained = [name for name in commits(partition) if name not in produced[partition]]
        engines = [json.loads(line)["commitInfo"]["engineInfo"] for name in maintained
                   for line in open(f"{tables['no jvm']}/_delta_log/{name}") if line.startswith('{"commitInfo"')]
        assert len(engines) >= 5 and all("(no JVM)" in engine for engine in engines), engines
        # the vacuum left as many data files on disk as Delta's (the files' names differ)
        on_disk = {way: len([n for n in os.listdir(path) if n.endswith(".parquet")]) for way, path in tables.items()}
        assert on_disk["no jvm"] == on_disk["through delta"], on_disk
