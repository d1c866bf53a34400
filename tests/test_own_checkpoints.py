"""The checkpoint of a version topiclake committed itself (framework/log/own_checkpoints.py)
holds what Delta's checkpoint of the same commits holds, Delta and delta-rs read the table
from it, Delta's next commits go on from it, and the log's expired files go at it. An own
commit at a checkpoint version, which went to Delta's transaction (and started the JVM)
before, is now topiclake's, in a new process too; killed between the commit and its
checkpoint, it leaves a table every reader reads."""

from __future__ import annotations

import json
import os
import shutil
import time

import pyarrow.parquet as pq
import pytest

from framework.local_rows import arrow_rows
from framework.log import own_checkpoints, own_commits
from framework.log.history import HistoryRow, MaintenanceHistory, history_schema
from framework.log.warehouse import Warehouse, delta_table_sql
from tests.support.cli_process import printed_with_no_jvm
from tests.support.delta_readers import delta_rs_query, duckdb_connection

SCHEMA = "offset BIGINT, key STRING, value STRING"
#: The tables checkpointed here: topiclake's own tables' protocol (plain), a partition
#: table's (the change data feed: writer 7 and its features), and one whose owner turned
#: deletion vectors on (reader 3).
PROTOCOLS = {
    "plain": "",
    "change data feed": ", 'delta.enableChangeDataFeed' = 'true'",
    "deletion vectors": ", 'delta.enableChangeDataFeed' = 'true', 'delta.enableDeletionVectors' = 'true'",
}


def _log(path: str) -> str:
    return os.path.join(path, "_delta_log")


#: What Delta's and delta-rs's checkpoints write differently, and no reader reads from a
#: checkpoint (the module's text): the parsed copy of an add's statistics (Delta's), and a
#: remove's statistics (delta-rs's, carried from the commit).
_WRITTEN_DIFFERENTLY = {"add": {"stats_parsed"}, "remove": {"stats"}}


def _checkpoint_actions(path: str, version: int) -> list[str]:
    """The checkpoint's actions, each as sorted JSON, in order; files with ``dataChange:
    false`` and without :data:`_WRITTEN_DIFFERENTLY`."""
    rows = pq.read_table(os.path.join(_log(path), f"{version:020d}.checkpoint.parquet")).to_pylist()
    actions = []
    for row in rows:
        (kind, action), = ((kind, action) for kind, action in row.items() if action is not None)
        if kind in ("add", "remove"):
            action = {**{k: v for k, v in action.items() if k not in _WRITTEN_DIFFERENTLY[kind]}, "dataChange": False}
        # (a field one writer's schema has and the other's not is null in it: both as absent)
        action = {k: v for k, v in action.items() if v is not None} if isinstance(action, dict) else action
        if isinstance(action.get("deletionVector"), dict):
            action["deletionVector"] = {k: v for k, v in action["deletionVector"].items() if v is not None}
        actions.append(json.dumps({kind: action}, sort_keys=True, default=str))
    return sorted(actions)


def _last_checkpoint(path: str) -> dict:
    with open(os.path.join(_log(path), "_last_checkpoint")) as handle:
        return json.load(handle)


def _rows(spark, path: str, version: int | None = None) -> list[tuple]:
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    return sorted(tuple(r) for r in reader.load(path).collect())


def _records(offsets) -> list[tuple]:
    return [(o, f"k{o % 3}", f"v{o}") for o in offsets]


def _append(spark, path: str, offsets, txn: tuple[str, int] | None = None) -> None:
    writer = spark.createDataFrame(_records(offsets), SCHEMA).write.format("delta")
    if txn is not None:
        writer = writer.option("txnAppId", txn[0]).option("txnVersion", txn[1])
    writer.mode("append").save(path)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_checkpoint_by_delta_rs_holds_what_deltas_holds(spark, tmp_path, protocol):
    """Four commits of every kind a table here meets (appends, one claimed as a produce
    claims them; a DELETE, whose removes are tombstones inside the retention, or with
    deletion vectors a vector; an UPDATE), then a fifth at the checkpoint interval: Delta's
    checkpoint of it, and delta-rs's of the same commits on a twin, hold the same actions, and
    Delta reads the twin from its checkpoint as it reads Delta's table (so do delta-rs and
    DuckDB), now and after its next commit; and Delta's next checkpoint, built from it, is
    the one Delta builds from its own."""
    by_delta, by_delta_rs = str(tmp_path / "delta"), str(tmp_path / "delta-rs")
    spark.sql(f"CREATE TABLE delta.`{by_delta}` ({SCHEMA}) USING delta TBLPROPERTIES "
              f"('delta.checkpointInterval' = '5'{PROTOCOLS[protocol]})")
    _append(spark, by_delta, range(0, 6))
    _append(spark, by_delta, range(6, 9), txn=("producer-1", 7))
    spark.sql(f"DELETE FROM delta.`{by_delta}` WHERE offset IN (1, 7)")
    spark.sql(f"UPDATE delta.`{by_delta}` SET value = 'updated' WHERE offset = 4")
    shutil.copytree(by_delta, by_delta_rs)
    _append(spark, by_delta, range(9, 11))
    assert os.path.exists(os.path.join(_log(by_delta), f"{5:020d}.checkpoint.parquet"))
    for name in (f"{5:020d}.json", f"{5:020d}.crc"):  # the same fifth commit, no checkpoint
        shutil.copy(os.path.join(_log(by_delta), name), _log(by_delta_rs))
    with open(os.path.join(_log(by_delta), f"{5:020d}.json")) as handle:
        for added in (action["add"]["path"] for action in map(json.loads, handle) if "add" in action):
            shutil.copy(os.path.join(by_delta, added), by_delta_rs)

    assert own_checkpoints.write(by_delta_rs, 5)
    deltas_actions = _checkpoint_actions(by_delta, 5)
    assert _checkpoint_actions(by_delta_rs, 5) == deltas_actions
    kinds = {json.loads(a).popitem()[0] for a in deltas_actions}
    assert {"protocol", "metaData", "add", "remove", "txn"} <= kinds, kinds  # none of them vacuous
    ours, deltas = _last_checkpoint(by_delta_rs), _last_checkpoint(by_delta)
    assert {k: ours[k] for k in ("version", "size", "numOfAddFiles")} == {
        k: deltas[k] for k in ("version", "size", "numOfAddFiles")}
    # Delta and delta-rs read the twin from it (the commits before it gone from the listing)
    for name in os.listdir(_log(by_delta_rs)):
        if name.endswith(".json") and int(name[:20]) < 5:
            os.remove(os.path.join(_log(by_delta_rs), name))
    read_by_delta = _rows(spark, by_delta)
    assert _rows(spark, by_delta_rs) == read_by_delta and len(read_by_delta) == 9
    assert sorted(r["offset"] for r in delta_rs_query(by_delta_rs, "offset")) == [0, 2, 3, 4, 5, 6, 8, 9, 10]
    read_by_duckdb = duckdb_connection().execute(f"SELECT \"offset\", key, value FROM delta_scan('{by_delta_rs}')")
    assert sorted(read_by_duckdb.fetchall()) == read_by_delta
    # Delta goes on from it: its next commit, and (on the richest protocol) its next
    # checkpoint, built from this one after four commits of topiclake's own (no Spark job)
    schema = spark.read.format("delta").load(by_delta).schema
    for path in (by_delta, by_delta_rs):
        if protocol == "deletion vectors":
            for start in range(11, 23, 3):
                assert own_commits.appended(path, arrow_rows(_records(range(start, start + 3)), schema)) is not None
        _append(spark, path, [30])
    assert _rows(spark, by_delta_rs) == _rows(spark, by_delta)
    if protocol == "deletion vectors":
        assert os.path.exists(os.path.join(_log(by_delta_rs), f"{10:020d}.checkpoint.parquet"))
        # (the appends since wrote files of their own names and times on each side)
        def written_alike(path):
            actions = [json.loads(a) for a in _checkpoint_actions(path, 10)]
            for action in actions:
                for name in ("path", "modificationTime"):
                    action.get("add", {}).pop(name, None)
            return sorted(json.dumps(action, sort_keys=True) for action in actions)

        assert written_alike(by_delta_rs) == written_alike(by_delta)


def _history(spark, root, interval: int) -> str:
    """A maintenance history with one run's rows through Delta, checkpointed every
    ``interval`` commits."""
    history = MaintenanceHistory(spark, Warehouse.resolve(str(root)))
    history.append([HistoryRow(*row) for row in _history_rows("first")])
    spark.sql(f"ALTER TABLE {delta_table_sql(history.path)} SET TBLPROPERTIES "
              f"('delta.checkpointInterval' = '{interval}')")
    return history.path


def _history_rows(run: str) -> list[tuple]:
    return [HistoryRow(run_id=run, run_started_ms=1_000 + i, now_ms=2_000, topic="t", partition=i, stage="compact",
                       reasons=["dirty_ratio"], dirty_ratio=0.25 * i, message=None).as_tuple() for i in range(3)]


def test_an_own_append_at_a_checkpoint_version_is_committed_and_checkpointed(spark, tmp_path):
    """The history at version 2, checkpointed every 3 commits: topiclake's own append makes
    version 3 (Delta's transaction did, before) and its checkpoint, which lists the files
    the version's checksum lists; Delta reads the table from it and commits on."""
    path = _history(spark, tmp_path, interval=3)
    assert own_commits.appended(path, arrow_rows(_history_rows("second"), history_schema())) == 3
    with open(os.path.join(_log(path), f"{3:020d}.json")) as handle:
        commit_info, = (action["commitInfo"] for action in map(json.loads, handle) if "commitInfo" in action)
    assert "no JVM" in commit_info["engineInfo"]
    assert _last_checkpoint(path)["version"] == 3
    with open(os.path.join(_log(path), f"{3:020d}.crc")) as handle:
        listed = {f["path"] for f in json.load(handle)["allFiles"]}
    checkpointed = {action["add"]["path"] for action in map(json.loads, _checkpoint_actions(path, 3))
                    if "add" in action}
    assert checkpointed == listed and len(listed) == 2
    runs = sorted(r["run_id"] for r in spark.read.format("delta").load(path).select("run_id").collect())
    assert runs == ["first"] * 3 + ["second"] * 3
    MaintenanceHistory(spark, Warehouse.resolve(str(tmp_path))).append(
        [HistoryRow(*row) for row in _history_rows("third")])
    assert len(spark.read.format("delta").load(path).collect()) == 9


@pytest.mark.parametrize("cleanup", ["on", "turned off"])
def test_an_own_checkpoint_cleans_the_expired_log(spark, tmp_path, cleanup):
    """Commits older than ``delta.logRetentionDuration``, below the newest checkpoint that
    old, go at the next checkpoint with their checksums (delta-rs's rule; Delta's own cleanup
    differs: the README, "What is not there yet"); the versions left inside the retention
    read as they read before. A table whose owner turned Delta's cleanup off keeps every commit."""
    path = str(tmp_path / "t")
    spark.sql(f"CREATE TABLE delta.`{path}` ({SCHEMA}) USING delta TBLPROPERTIES "
              "('delta.checkpointInterval' = '4', 'delta.logRetentionDuration' = 'interval 86400000 milliseconds', "
              "'delta.deletedFileRetentionDuration' = 'interval 86400000 milliseconds', "
              f"'delta.enableExpiredLogCleanup' = '{str(cleanup == 'on').lower()}')")
    schema = spark.read.format("delta").load(path).schema
    for start in range(0, 21, 3):  # versions 1 to 7 (topiclake's own appends, a checkpoint at 4)
        own_commits.appended(path, arrow_rows(_records(range(start, start + 3)), schema))
    before = {version: _rows(spark, path, version) for version in (6, 7)}
    two_days_ago = time.time() - 2 * 86_400
    for name in os.listdir(_log(path)):
        if name[:20].isdigit() and int(name[:20]) <= 5:
            os.utime(os.path.join(_log(path), name), (two_days_ago, two_days_ago))
    assert own_commits.appended(path, arrow_rows(_records([21]), schema)) == 8

    def versions(suffix):
        return sorted(int(n[:20]) for n in os.listdir(_log(path)) if n.endswith(suffix))

    kept = [4, 5, 6, 7, 8] if cleanup == "on" else list(range(9))
    assert versions(".json") == versions(".crc") == kept
    assert versions(".checkpoint.parquet") == [4, 8] and _last_checkpoint(path)["version"] == 8
    # (the aged versions are past the files' retention: Delta refuses to travel there)
    assert {version: _rows(spark, path, version) for version in (6, 7)} == before
    assert len(_rows(spark, path)) == 22


def test_a_produce_whose_commits_fall_on_checkpoints_starts_no_jvm(spark, tmp_path, capsys):
    """A ``produce`` in a new process into local partitions whose next versions are
    checkpoints' commits and checkpoints each without a JVM (it started one for Delta's
    checkpoints before); Delta reads every partition from its new checkpoint."""
    from framework.cli.main import main

    folder = tmp_path / "specs"
    folder.mkdir()
    (folder / "t.yaml").write_text("topic: t\npartitions: 2\nconfig:\n  cleanup.policy: delete\n  retention.ms: -1\n")
    common = ["--warehouse", str(tmp_path / "w"), "--specs", str(folder)]
    lines = tmp_path / "in.jsonl"
    lines.write_text("".join(json.dumps({"key": f"k{i}", "value": f"v{i}", "timestamp": i}) + "\n" for i in range(10)))
    lines = str(lines)
    assert main([*common, "produce", "--topic", "t", "--input", lines, "--now", "1000"]) == 0, capsys.readouterr()
    paths = [str(tmp_path / "w" / f"t-{partition}") for partition in range(2)]
    for path in paths:  # the next commit, version 2, is a checkpoint's
        spark.sql(f"ALTER TABLE {delta_table_sql(path)} SET TBLPROPERTIES ('delta.checkpointInterval' = '2')")
    printed_with_no_jvm(*common, "produce", "--topic", "t", "--input", lines, "--now", "2000")
    for path in paths:
        assert _last_checkpoint(path)["version"] == 2
    assert sum(len(_rows(spark, path)) for path in paths) == 20
    assert sorted(r["offset"] for path in paths for r in delta_rs_query(path, "offset")) == sorted(
        r[0] for path in paths for r in _rows(spark, path))


def test_a_crash_between_the_commit_and_its_checkpoint_leaves_a_table_every_reader_reads(spark, tmp_path, monkeypatch):
    """Killed after the commit at a checkpoint version and before its checkpoint (as a Delta
    writer may be): the version stands without one, Delta and delta-rs read it by replaying
    the commits, and the commits after it go on, the next checkpoint written at its turn."""
    path = _history(spark, tmp_path, interval=3)

    def killed(*args):
        raise KeyboardInterrupt("killed after the commit")

    monkeypatch.setattr(own_checkpoints, "write", killed)
    with pytest.raises(KeyboardInterrupt):
        own_commits.appended(path, arrow_rows(_history_rows("second"), history_schema()))
    monkeypatch.undo()
    assert not os.path.exists(os.path.join(_log(path), f"{3:020d}.checkpoint.parquet"))
    assert sorted(r["run_id"] for r in delta_rs_query(path, "run_id")) == ["first"] * 3 + ["second"] * 3
    for run, version in (("third", 4), ("fourth", 5), ("fifth", 6)):
        assert own_commits.appended(path, arrow_rows(_history_rows(run), history_schema())) == version
    assert _last_checkpoint(path)["version"] == 6
    runs = sorted(r["run_id"] for r in spark.read.format("delta").load(path).select("run_id").collect())
    assert runs == sorted(["first", "second", "third", "fourth", "fifth"] * 3)
