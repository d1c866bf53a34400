"""A VACUUM made by topiclake itself (framework/log/own_vacuum.py) is Delta's VACUUM of the
same table: on two copies of one table, one vacuumed by Delta and one by topiclake, the
same files are left (data, change data, folders, hidden ones, the log), both commits carry
the same operation, parameters, metrics and user metadata, the checksums the same state,
and Delta reads the table after it. A table it cannot vacuum as Delta would is left to
Delta, with nothing written or deleted."""

from __future__ import annotations

import json
import os
import shutil
import time

import pytest

from framework.deferred_session import DeferredSession
from framework.log import own_checkpoints, own_vacuum
from framework.log.commit_log import local_commits
from framework.log.delta_commits import commit_metadata
from framework.log.warehouse import delta_table_sql

HOUR_MS = 3_600_000


def _files(path: str) -> set[str]:
    """Every file and folder under ``path``, relative (folders end with ``/``)."""
    found = set()
    for root, dirs, names in os.walk(path):
        base = os.path.relpath(root, path)
        found.update(os.path.normpath(os.path.join(base, d)) + "/" for d in dirs)
        found.update(os.path.normpath(os.path.join(base, n)) for n in names)
    return found


def _commit_info(path: str, version: int) -> dict:
    with open(os.path.join(path, "_delta_log", f"{version:020d}.json")) as handle:
        actions = [json.loads(line) for line in handle]
    assert len(actions) == 1, actions  # a VACUUM's commits are empty
    info = actions[0]["commitInfo"]
    return {k: v for k, v in info.items() if k not in ("timestamp", "txnId", "engineInfo")}


def _checksum(path: str, version: int) -> dict:
    """A version's checksum but its transaction id; a file's tags absent read as none (Delta
    computes a VACUUM's checksum from its snapshot's state, which gives every file ``{}``)."""
    with open(os.path.join(path, "_delta_log", f"{version:020d}.crc")) as handle:
        checksum = {k: v for k, v in json.load(handle).items() if k != "txnId"}
    checksum["allFiles"] = [{"tags": {}, **add} for add in checksum["allFiles"]]
    return checksum


def _age(path: str, ms: int) -> None:
    then = time.time() - ms / 1000
    os.utime(path, (then, then))


def _rewrite_commit(path: str, version: int, edit) -> None:
    """Edit a commit's actions in place (its removes' and its own time, to make them old)."""
    name = os.path.join(path, "_delta_log", f"{version:020d}.json")
    with open(name) as handle:
        actions = [json.loads(line) for line in handle]
    with open(name, "w") as handle:
        handle.writelines(json.dumps(edit(a)) + "\n" for a in actions)


def _made_old(action: dict) -> dict:
    old = int(time.time() * 1000) - 2 * HOUR_MS
    if "remove" in action:
        action["remove"]["deletionTimestamp"] = old
    if "commitInfo" in action:
        action["commitInfo"]["timestamp"] = old
    return action


def _table(spark, path: str, window_ms: int, partitioned: bool, vectors: bool = False) -> dict:
    """A table with appends, two DELETEs (change data on) and files no version lists: what
    each case below leaves on disk before its VACUUM. ``vectors``: deletion vectors on, and
    three DELETEs, each marking one more row of one file, so each of the first two vector
    files is named only by the next DELETE's ``remove``."""
    table = delta_table_sql(path)
    partition = "PARTITIONED BY (_segment)" if partitioned else ""
    spark.sql(f"CREATE TABLE {table} (offset BIGINT, value STRING, _segment BIGINT) USING delta {partition} "
              f"TBLPROPERTIES ('delta.deletedFileRetentionDuration' = 'interval {window_ms} milliseconds', "
              "'delta.logRetentionDuration' = 'interval 30 days', 'delta.enableChangeDataFeed' = 'true', "
              f"'delta.enableDeletionVectors' = '{str(vectors).lower()}')")
    one_file = "/*+ COALESCE(1) */" if vectors else ""
    for start in (0, 4, 8):
        spark.sql(f"INSERT INTO {table} SELECT {one_file} id, CAST(id AS STRING), id DIV 6 "
                  f"FROM range({start}, {start + 4})")
    deletes = ("offset = 1", "offset = 0", "offset = 2") if vectors else ("offset IN (1, 9)", "offset = 5")
    for predicate in deletes:  # without vectors: removes, change data
        spark.sql(f"DELETE FROM {table} WHERE {predicate}")
    # files no version lists: a killed writer's (old and new), an empty folder, a folder
    # holding only a new file, hidden files and folders (never VACUUM's)
    for name, age in (("part-old-stray.parquet", 2 * HOUR_MS), ("part-new-stray.parquet", 0)):
        with open(os.path.join(path, name), "w") as handle:
            handle.write("stray")
        _age(os.path.join(path, name), age)
    os.makedirs(os.path.join(path, "empty"))
    os.makedirs(os.path.join(path, "young"))
    with open(os.path.join(path, "young", "part-young.parquet"), "w") as handle:
        handle.write("young")
    os.makedirs(os.path.join(path, "_hidden"))
    for name in ("_hidden/part-x.parquet", ".part-y.parquet.crc", "_SUCCESS"):
        with open(os.path.join(path, name), "w") as handle:
            handle.write("hidden")
        _age(os.path.join(path, name), 2 * HOUR_MS)
    return {"version": local_commits(path, 1)[0].version}


def _removes(path: str, version: int) -> list[dict]:
    with open(os.path.join(path, "_delta_log", f"{version:020d}.json")) as handle:
        return [json.loads(line)["remove"] for line in handle if '"remove"' in line]


def _vector_files(path: str) -> set[str]:
    return {name for name in os.listdir(path) if name.startswith("deletion_vector_")}


@pytest.mark.parametrize("case", ["no window", "a window of an hour", "a partition table, an hour's window",
                                  "deletion vectors, no window", "deletion vectors, an hour's window"])
def test_a_vacuum_without_the_jvm_leaves_what_deltas_vacuum_leaves(spark, tmp_path, case):
    window = 0 if "no window" in case else HOUR_MS
    vectors = "vectors" in case
    base = str(tmp_path / "base")
    made = _table(spark, base, window, partitioned="partition" in case, vectors=vectors)
    version = made["version"]
    vector_files = _vector_files(base)
    # with vectors, each of the last two DELETEs' removes names the vector the one before wrote
    assert not vectors or (len(vector_files) == 3 and all(
        any(r.get("deletionVector") for r in _removes(base, v)) for v in (version - 1, version)))
    if window:
        # the first DELETE an old one: its tombstones expired, its files old; the second's
        # tombstone inside the window, whose file is old too (it stays); the commits before
        # the first as old (a history's times do not go back)
        first_delete = version - 1
        for older in range(first_delete + 1):
            _rewrite_commit(base, older, _made_old)
        removed = [r["path"] for r in _removes(base, first_delete)]
        second = [r["path"] for r in _removes(base, version)]
        for relative in [*removed, *second, *vector_files]:
            _age(os.path.join(base, relative), 2 * HOUR_MS)
        for root, _, names in os.walk(os.path.join(base, "_change_data")):
            for name in names:
                _age(os.path.join(root, name), 2 * HOUR_MS)
    twins = {way: str(tmp_path / way) for way in ("delta", "own")}
    for path in twins.values():
        shutil.copytree(base, path)  # (copy2: the modification times too)
    metadata = '{"topiclake":{"operation":"vacuum"}}'
    with commit_metadata(spark, metadata):
        spark.sql(f"VACUUM {delta_table_sql(twins['delta'])}").collect()
    deferred = DeferredSession(lambda: spark)
    with commit_metadata(deferred, metadata):
        deleted = own_vacuum.vacuumed(twins["own"], deferred)
    assert deleted is not None and not deferred.started
    assert _files(twins["own"]) == _files(twins["delta"])
    left = _files(twins["own"])
    for new_version in (version + 1, version + 2):
        assert _commit_info(twins["own"], new_version) == _commit_info(twins["delta"], new_version)
        assert _checksum(twins["own"], new_version) == _checksum(twins["delta"], new_version)
    began, ended = _commit_info(twins["own"], version + 1), _commit_info(twins["own"], version + 2)
    assert began["operation"] == "VACUUM START" and began["userMetadata"] == metadata
    assert ended["operation"] == "VACUUM END" and int(ended["operationMetrics"]["numDeletedFiles"]) == deleted
    # not vacuous: files went, and each kind of file VACUUM keeps is there to be kept
    assert deleted >= 3 and "part-old-stray.parquet" not in left and "empty/" not in left
    assert {"_hidden/part-x.parquet", "_SUCCESS", ".part-y.parquet.crc"} <= left
    new_files = {"part-new-stray.parquet", "young/part-young.parquet"}  # inside the window, when there is one
    assert (new_files <= left) if window else not (new_files & left)
    if window:
        assert all(os.path.normpath(p) in left for p in second)  # a tombstone inside the window
        # (with vectors a DELETE's files stay live, given a vector)
        assert vectors or not any(os.path.normpath(p) in left for p in removed)
    if vectors:  # a live file's vector file stays, and one a remove inside the window names
        assert len(_vector_files(twins["own"])) == (2 if window else 1)
    for way in ("delta", "own"):
        with open(os.path.join(twins[way], "_delta_log", own_vacuum.LAST_VACUUM_INFO)) as handle:
            assert json.load(handle) == {}
    rows = {way: sorted(tuple(r) for r in spark.read.format("delta").load(path).collect())
            for way, path in twins.items()}
    assert rows["own"] == rows["delta"] and len(rows["own"]) == 9


@pytest.mark.parametrize("case", ["a checkpoint is due, no delta-rs to write it", "deletion vectors turned off since",
                                  "a commit of the window is gone"])
def test_a_table_it_cannot_vacuum_as_delta_would_is_left_to_delta(spark, tmp_path, case, monkeypatch):
    path = str(tmp_path / "t")
    table = delta_table_sql(path)
    _table(spark, path, 0, partitioned=False)
    if case.startswith("a checkpoint is due"):  # (with delta-rs: framework/log/own_checkpoints.py)
        version = local_commits(path, 1)[0].version
        spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('delta.checkpointInterval' = '{version + 3}')")
        monkeypatch.setattr(own_checkpoints, "available", lambda: False)
    elif case.startswith("deletion vectors"):  # (the protocol has them, the table no longer writes them)
        spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
        spark.sql(f"DELETE FROM {table} WHERE offset = 0")
        spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'false')")
    else:
        os.unlink(os.path.join(path, "_delta_log", f"{local_commits(path, 1)[0].version - 1:020d}.json"))
    before = _files(path)
    assert own_vacuum.vacuumed(path) is None
    assert _files(path) == before
