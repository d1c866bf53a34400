"""An append of driver-side rows without a Spark job (framework/log/local_append.py) commits
what a DataFrame write commits: the same rows for Spark, delta-rs and DuckDB, as a blind
append; a replace of a table's rows commits them in one overwrite, and conflicts with a
commit since it read them; where either does not apply it writes nothing, so the caller's
write is the only one."""

from __future__ import annotations

import glob
import json
import os

import pytest

from framework.clients.produce import produce
from framework.clients.records import parse_records
from framework.local_rows import local_frame
from framework.log import local_append
from framework.log.commit_log import read_commits
from framework.log.delta_commits import is_retryable_conflict
from framework.log.delta_create import create_table
from framework.log.history import MaintenanceHistory
from framework.log.local_append import appended_locally, read_locally, replaced_locally
from framework.log.topic import Topic
from framework.log.warehouse import delta_table_sql
from framework.spec import parse_spec
from framework.stages.maintenance import Maintenance
from tests.support.delta_readers import duckdb_connection
from tests.support.spark_jobs import spark_jobs

SCHEMA = "`run_id` STRING, `partition` INT, `version` BIGINT, `ratio` DOUBLE, `due` BOOLEAN, `reasons` ARRAY<STRING>"
ROWS = [("r1", 0, 7, 0.5, True, ["dirty_ratio", "forced"]), ("r1", 1, None, None, None, []),
        ("r2", 2, 9, 1.0, False, None), ("r\u00e9", 3, -1, 0.0, True, ["max_lag"])]


def _table(spark, path: str, schema: str = SCHEMA, partition_columns: tuple[str, ...] = (), properties=None):
    create_table(spark, path, local_frame(spark, [], schema).schema, properties or {}, partition_columns)


def _data_files(path: str) -> list[str]:
    return sorted(glob.glob(os.path.join(path, "**", "*.parquet"), recursive=True))


def _spark_rows(spark, path: str) -> list[tuple]:
    return sorted((tuple(r) for r in spark.read.format("delta").load(path).collect()), key=repr)


def test_a_local_append_commits_what_a_dataframe_write_commits(spark, tmp_path):
    from deltalake import DeltaTable

    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    for path in (ours, theirs):
        _table(spark, path)
    assert appended_locally(spark, ours, ROWS[:2], SCHEMA) == 1
    assert appended_locally(spark, ours, ROWS[2:], SCHEMA) == 2
    for part in (ROWS[:2], ROWS[2:]):
        local_frame(spark, part, SCHEMA).write.format("delta").mode("append").save(theirs)

    assert _spark_rows(spark, ours) == _spark_rows(spark, theirs) == sorted(ROWS, key=lambda r: repr(tuple(r)))
    by_delta_rs = [sorted(DeltaTable(path).to_pyarrow_table().to_pylist(), key=repr) for path in (ours, theirs)]
    assert by_delta_rs[0] == by_delta_rs[1] and len(by_delta_rs[0]) == 4
    db = duckdb_connection()
    by_duckdb = [sorted(db.execute(f"SELECT * FROM delta_scan('{path}')").fetchall(), key=repr)
                 for path in (ours, theirs)]
    db.close()
    assert by_duckdb[0] == by_duckdb[1] and len(by_duckdb[0]) == 4

    newest = read_commits(spark, ours, 1)[0]
    assert newest.operation == "WRITE"
    commit = [json.loads(line) for line in open(os.path.join(ours, "_delta_log", f"{newest.version:020d}.json"))]
    info = next(action["commitInfo"] for action in commit if "commitInfo" in action)
    assert info["isBlindAppend"] is True and info["operationParameters"]["mode"] == "Append", info
    adds = [action["add"] for action in commit if "add" in action]
    assert len(adds) == 1 and json.loads(adds[0]["stats"]) == {"numRecords": 2}
    detail = spark.sql(f"DESCRIBE DETAIL {delta_table_sql(ours)}").collect()[0]
    assert detail["numFiles"] == 2


def test_local_appends_side_by_side_are_blind_appends_that_all_land(spark, tmp_path):
    """Runs of different topics append to one history at once: Delta's conflict check lets
    blind appends through, each at a version of its own."""
    from concurrent.futures import ThreadPoolExecutor

    path = str(tmp_path / "t")
    _table(spark, path)

    def appends(writer: int) -> list[int]:
        session = spark.newSession()
        return [appended_locally(session, path, [(f"w{writer}", n, n, 0.0, True, [])], SCHEMA) for n in range(3)]

    with ThreadPoolExecutor(4) as pool:
        versions = [v for landed in pool.map(appends, range(4)) for v in landed]
    assert sorted(versions) == list(range(1, 13)), versions
    assert len(_spark_rows(spark, path)) == 12


@pytest.mark.parametrize("case", ["another column", "a column's type", "partitioned", "deletion vectors",
                                  "a check constraint", "not local"])
def test_where_a_local_append_does_not_apply_it_writes_nothing(spark, tmp_path, case):
    """A partitioned table takes an append (a file per partition value, in its folder) but
    not a replace: its files read one by one lack their partition values. So does a table
    with deletion vectors on (an append's new files carry none), where a replace would have
    to end every vector its files have."""
    path = str(tmp_path / "t")
    if case == "another column":
        _table(spark, path, SCHEMA + ", `extra` STRING")
    elif case == "a column's type":
        _table(spark, path, SCHEMA.replace("`version` BIGINT", "`version` INT"))
    elif case == "partitioned":
        _table(spark, path, partition_columns=("partition",))
    elif case == "deletion vectors":
        _table(spark, path, properties={"delta.enableDeletionVectors": "true"})
    elif case == "a check constraint":  # (a feature whose rule Spark's write enforces)
        _table(spark, path)
        spark.sql(f"ALTER TABLE {delta_table_sql(path)} ADD CONSTRAINT known CHECK (`partition` >= 0)")
    else:
        _table(spark, path)
    before = (read_commits(spark, path, 1)[0].version, _data_files(path))
    target = "s3a://bucket/t" if case == "not local" else path
    if case not in ("partitioned", "deletion vectors"):
        assert appended_locally(spark, target, ROWS, SCHEMA) is None
    assert replaced_locally(spark, target, lambda rows: rows, SCHEMA) is None
    assert (read_commits(spark, path, 1)[0].version, _data_files(path)) == before


def test_a_null_partition_value_is_left_to_a_dataframe_write(spark, tmp_path):
    path = str(tmp_path / "t")
    _table(spark, path, partition_columns=("partition",))
    before = (read_commits(spark, path, 1)[0].version, _data_files(path))
    assert appended_locally(spark, path, [("r", None, 1, 0.0, True, [])], SCHEMA) is None
    assert (read_commits(spark, path, 1)[0].version, _data_files(path)) == before


def test_a_local_append_to_a_partitioned_table_writes_each_value_s_folder_as_a_dataframe_write(spark, tmp_path):
    from deltalake import DeltaTable

    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    for path in (ours, theirs):
        _table(spark, path, partition_columns=("partition",))
    assert appended_locally(spark, ours, ROWS, SCHEMA) == 1
    local_frame(spark, ROWS, SCHEMA).write.format("delta").mode("append").save(theirs)

    assert _spark_rows(spark, ours) == _spark_rows(spark, theirs) == sorted(ROWS, key=lambda r: repr(tuple(r)))
    by_delta_rs = [sorted(DeltaTable(path).to_pyarrow_table().to_pylist(), key=repr) for path in (ours, theirs)]
    assert by_delta_rs[0] == by_delta_rs[1] and len(by_delta_rs[0]) == 4
    folders = [sorted({os.path.relpath(os.path.dirname(f), path) for f in _data_files(path)})
               for path in (ours, theirs)]
    assert folders[0] == folders[1] == ["partition=0", "partition=1", "partition=2", "partition=3"]
    commit = [json.loads(line) for line in open(os.path.join(ours, "_delta_log", f"{1:020d}.json"))]
    adds = sorted((action["add"] for action in commit if "add" in action), key=lambda a: a["path"])
    assert [a["partitionValues"] for a in adds] == [{"partition": str(n)} for n in range(4)]


def test_an_idle_maintain_with_history_runs_no_spark_job(spark, warehouse):
    """Nothing due: the partitions' metadata, the history's question (each partition's highest
    recorded version, read by Arrow) and its append (a local append) need no Spark job."""
    spec = parse_spec({"topic": "idle", "partitions": 3, "config": {"cleanup.policy": "compact"}}, "test")
    topic = Topic(spark, warehouse, spec)
    topic.create()
    produce(topic, parse_records([(n, {"key": f"k{n % 2}", "value": str(n), "partition": n % 3, "timestamp": 1_000})
                                  for n in range(12)], spec, "test"), 1_000)
    first = Maintenance(spark, warehouse, [spec]).run(2_000, force=True, cleaner_threads=1)
    assert not first.failed
    history = MaintenanceHistory(spark, warehouse)
    appends = len(read_commits(spark, history.path))
    idle, jobs = spark_jobs(spark, lambda: Maintenance(spark, warehouse, [spec]).run(2_000, cleaner_threads=1))
    assert not idle.failed
    rows = history.read().where(f"run_id = '{idle.run_id}'").collect()
    assert len(rows) == 9 and not any(row["committed"] or row["due"] for row in rows), rows  # 3 stages a partition
    assert len(read_commits(spark, history.path)) == appends + 1, "the idle run's rows: one append"
    assert jobs == 0, f"an idle maintain of 3 partitions ran {jobs} Spark jobs"


def test_a_history_an_older_topiclake_wrote_gains_the_new_columns_then_appends_locally(spark, warehouse, monkeypatch):
    """An older history lacks a column: its first append is the DataFrame write that adds the
    column (mergeSchema), and the appends after it are local again."""
    from pyspark.sql.types import StructType

    from framework.log import history as history_module

    history = MaintenanceHistory(spark, warehouse)
    older = StructType([f for f in history_module.history_schema().fields if f.name != "attempts"])
    assert len(older.fields) == len(history_module.history_schema().fields) - 1
    create_table(spark, history.path, local_frame(spark, [], older).schema, {})
    local = []
    real = history_module.appended_locally
    monkeypatch.setattr(history_module, "appended_locally", lambda *args: local.append(real(*args)) or local[-1])
    for run in ("r1", "r2"):
        history.append([history_module.HistoryRow(run_id=run, run_started_ms=1, now_ms=1, topic="t", partition=0,
                                                  stage="compact", attempts=2)])
    assert local[0] is None and local[1] is not None, local
    rows = sorted((r["run_id"], r["attempts"]) for r in history.read().collect())
    assert rows == [("r1", 2), ("r2", 2)]


def test_a_local_replace_commits_the_new_rows_in_one_overwrite_without_a_spark_job(spark, tmp_path):
    """Each replace reads the rows by Arrow and leaves exactly the rows it returned, one file,
    for Spark and delta-rs; ``read_locally`` reads what Spark reads, filtered."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from deltalake import DeltaTable

    path = str(tmp_path / "t")
    _table(spark, path)
    appended_locally(spark, path, ROWS, SCHEMA)
    seen = []

    def without_r1(rows):
        seen.append(sorted(rows.column("partition").to_pylist()))
        return rows.filter(pc.field("run_id") != "r1")

    def plus_one(rows):
        extra = pa.table({"run_id": ["r3"], "partition": [4], "version": [None], "ratio": [2.5], "due": [False],
                          "reasons": [["forced"]]})
        return pa.concat_tables([rows, extra.cast(rows.schema)])

    for replace in (without_r1, plus_one):
        assert spark_jobs(spark, lambda: replaced_locally(spark, path, replace, SCHEMA)) == (True, 0)
    assert seen == [[0, 1, 2, 3]]
    expected = sorted([r for r in ROWS if r[0] != "r1"] + [("r3", 4, None, 2.5, False, ["forced"])], key=repr)
    assert _spark_rows(spark, path) == expected
    assert sorted((tuple(r.values()) for r in DeltaTable(path).to_pyarrow_table().to_pylist()), key=repr) == expected
    newest = read_commits(spark, path, 1)[0]
    commit = [json.loads(line) for line in open(os.path.join(path, "_delta_log", f"{newest.version:020d}.json"))]
    info = next(action["commitInfo"] for action in commit if "commitInfo" in action)
    assert info["operationParameters"]["mode"] == "Overwrite" and len([a for a in commit if "add" in a]) == 1
    assert len([a for a in commit if "remove" in a]) == 1  # the file the first replace wrote
    read = read_locally(path, SCHEMA, ["run_id", "partition"], pc.field("partition") >= 3)
    assert sorted(read.to_pylist(), key=repr) == [{"run_id": "r3", "partition": 4},
                                                  {"run_id": "r\u00e9", "partition": 3}]


def test_a_local_replace_overtaken_by_another_commit_conflicts_and_writes_nothing(spark, tmp_path, monkeypatch):
    path = str(tmp_path / "t")
    _table(spark, path)
    appended_locally(spark, path, ROWS[:1], SCHEMA)
    real = local_append._replaced_in

    def overtaken(delta, path, folder, replace, struct):
        def replace_after_another_commit(rows):
            assert appended_locally(spark, path, ROWS[1:2], SCHEMA) is not None  # lands between read and commit
            return replace(rows)
        return real(delta, path, folder, replace_after_another_commit, struct)

    monkeypatch.setattr(local_append, "_replaced_in", overtaken)
    with pytest.raises(Exception) as raised:
        replaced_locally(spark, path, lambda rows: rows.slice(0, 0), SCHEMA)
    assert is_retryable_conflict(raised.value)
    assert len(_spark_rows(spark, path)) == 2  # the append landed; the replace did not
