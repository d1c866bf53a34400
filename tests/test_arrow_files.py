"""Driver-side rows written by Arrow (framework/log/arrow_files.py) are the files Delta's own
writer makes of them: a produce of JSON lines commits the same add actions (partition
folder and values, every statistic), operation metrics and records as the same produce
written by Spark, for Spark, delta-rs, DuckDB and the change data feed; with no Spark job
once its tables exist; and where Arrow's files do not apply, nothing is written by Arrow."""

from __future__ import annotations

import glob
import json
import os

import pytest

from framework.clients.produce import produce
from framework.clients.records import parse_records
from framework.log import arrow_files, delta_transactions
from framework.log.appended_rows import in_layout, numbered
from framework.log.delta_transactions import DeltaJvm
from framework.log.topic import Topic
from framework.log.warehouse import Warehouse
from framework.spec import parse_spec
from tests.support.delta_readers import delta_rs_query, duckdb_connection
from tests.support.spark_jobs import spark_jobs

# tombstones, headers (one without a value), a two-byte key, timestamps a millisecond apart
# and one before 1970's end, every second record in partition 1
LINES = [{"key": f"k\u00e9{i % 5}", "value": None if i % 7 == 3 else f"v{i}", "timestamp": 1_700_000_000_000 + i,
          "partition": i % 2, "headers": {"h": str(i), "empty": None} if i % 3 == 0 else {}} for i in range(40)]
LINES.append({"key": "old", "value": "x", "timestamp": 86_400_123, "partition": 0})


def _topic(spark, root: str, name: str = "arrowed", kind: str = "string", **config) -> Topic:
    spec = parse_spec({"topic": name, "partitions": 2, "key": {"type": kind}, "value": {"type": kind},
                       "config": {"cleanup.policy": "compact,delete", "retention.ms": -1, **config}}, "test")
    return Topic(spark, Warehouse.resolve(root), spec)


def _as_base64(line: dict) -> dict:
    """A line for a topic of binary keys and values: each given as base64 text."""
    import base64

    def encoded(text):
        return None if text is None else base64.b64encode(text.encode()).decode()

    return {**line, "key": encoded(line["key"]), "value": encoded(line["value"])}


def _produce(topic: Topic, lines: list[dict], now: int = 1_700_000_100_000):
    return produce(topic, parse_records(list(enumerate(lines, 1)), topic.spec, "test"), now)


def _commits(path: str) -> list[list[dict]]:
    files = sorted(glob.glob(os.path.join(path, "_delta_log", "*.json")))
    return [[json.loads(line) for line in open(f)] for f in files]


def _adds(commit: list[dict]) -> list[dict]:
    return [action["add"] for action in commit if "add" in action]


def _info(commit: list[dict]) -> dict:
    return next(action["commitInfo"] for action in commit if "commitInfo" in action)


def _by_spark(monkeypatch):
    """Produce as before: the table takes no Arrow file, so the rows go through Spark."""
    monkeypatch.setattr(arrow_files, "data_files", lambda *args, **kwargs: None)


@pytest.mark.parametrize("kind", ["string", "binary"])
def test_a_produce_by_arrow_commits_what_the_same_produce_by_spark_commits(spark, tmp_path, monkeypatch, kind):
    ours, theirs = _topic(spark, str(tmp_path / "ours"), kind=kind), _topic(spark, str(tmp_path / "theirs"), kind=kind)
    lines = LINES if kind == "string" else [_as_base64(line) for line in LINES]
    for half in (lines[:20], lines[20:]):
        _produce(ours, half)
    with monkeypatch.context() as patched:
        _by_spark(patched)
        for half in (lines[:20], lines[20:]):
            _produce(theirs, half)

    for partition in (0, 1):
        mine, spark_s = ours.partition(partition), theirs.partition(partition)
        by_arrow, by_spark = _commits(mine.path), _commits(spark_s.path)
        assert len(by_arrow) == len(by_spark) == 2
        for arrow_commit, spark_commit in zip(by_arrow, by_spark):
            [arrow_add], [spark_add] = _adds(arrow_commit), _adds(spark_commit)
            assert arrow_add["partitionValues"] == spark_add["partitionValues"] == {"_segment": "0"}
            assert arrow_add["path"].split("/")[0] == spark_add["path"].split("/")[0] == "_segment=0"
            assert os.path.exists(os.path.join(mine.path, arrow_add["path"]))
            assert json.loads(arrow_add["stats"]) == json.loads(spark_add["stats"]), (arrow_add, spark_add)
            assert arrow_add["dataChange"] is spark_add["dataChange"] is True
            metrics = [_info(commit)["operationMetrics"] for commit in (arrow_commit, spark_commit)]
            assert set(metrics[0]) == set(metrics[1]) and metrics[0]["numOutputRows"] == metrics[1]["numOutputRows"]
            assert metrics[0]["numFiles"] == "1" and int(metrics[0]["numOutputBytes"]) == arrow_add["size"]
            assert _info(arrow_commit)["isBlindAppend"] is True
        assert mine.snapshot().state == spark_s.snapshot().state

        def by_spark_reader(log):
            return [tuple(r) for r in log.read().orderBy("offset").collect()]

        assert by_spark_reader(mine) == by_spark_reader(spark_s) and len(by_spark_reader(mine)) > 15
        assert delta_rs_query(mine.path) == delta_rs_query(spark_s.path)
        db = duckdb_connection()
        # timestamps as epoch microseconds: DuckDB's Python values of them need pytz
        scans = [db.execute("SELECT * REPLACE (epoch_us(\"timestamp\") AS \"timestamp\", "
                            f"epoch_us(_delete_horizon) AS _delete_horizon) FROM delta_scan('{log.path}') "
                            "ORDER BY \"offset\"").fetchall() for log in (mine, spark_s)]
        db.close()
        assert scans[0] == scans[1]

        def feed(log):
            rows = (spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", 0)
                    .load(log.path).drop("_commit_timestamp").collect())
            return sorted((tuple(r) for r in rows), key=repr)

        assert feed(mine) == feed(spark_s) and {r[-2] for r in feed(mine)} == {"insert"}


def test_appends_into_existing_tables_run_no_spark_job(spark, tmp_path):
    topic = _topic(spark, str(tmp_path / "w"))
    _produce(topic, LINES[:10])
    results, jobs = spark_jobs(spark, lambda: _produce(topic, LINES[10:]))
    assert [r.count for r in results] == [16, 15] and jobs == 0, jobs
    assert topic.partition(0).read().count() == 5 + 16


def test_a_table_with_deletion_vectors_takes_its_rows_through_spark(spark, tmp_path):
    """Deletion vectors are a feature Arrow's files do not meet: the same rows go through
    Spark's writer, and read back the same."""
    plain = _topic(spark, str(tmp_path / "plain"))
    marked = _topic(spark, str(tmp_path / "marked"))
    key = "spark.databricks.delta.properties.defaults.enableDeletionVectors"
    spark.conf.set(key, "true")
    try:
        marked.create()
    finally:
        spark.conf.unset(key)
    for topic in (plain, marked):
        _produce(topic, LINES)
    assert marked.partition(0).properties().get("delta.enableDeletionVectors") == "true"
    for partition in (0, 1):
        logs = [topic.partition(partition) for topic in (plain, marked)]
        assert ([tuple(r) for r in logs[0].read().orderBy("offset").collect()]
                == [tuple(r) for r in logs[1].read().orderBy("offset").collect()])
        [spark_add] = _adds(_commits(logs[1].path)[-1])
        assert "tightBounds" in json.loads(spark_add["stats"]), "written by Spark's writer, not Arrow's"


@pytest.mark.parametrize("case", ["a null in a NOT NULL column", "another column", "a stats column of another type"])
def test_rows_a_table_does_not_take_are_not_written(spark, tmp_path, case):
    topic = _topic(spark, str(tmp_path / "w"))
    _produce(topic, LINES[:4])
    log = topic.partition(0)
    rows = numbered(_driver_side(topic, LINES[:4]), 10)
    rows = in_layout(rows, topic.spec, 0, rows.num_rows)
    if case == "a null in a NOT NULL column":
        import pyarrow as pa

        rows = rows.set_column(0, rows.schema.field(0), pa.nulls(rows.num_rows, pa.int64()))
    elif case == "another column":
        rows = rows.drop_columns(["_size"])
    else:
        spark.sql(f"ALTER TABLE delta.`{log.path}` SET TBLPROPERTIES "
                  "('delta.dataSkippingStatsColumns' = 'offset,key')")
    before = sorted(glob.glob(os.path.join(log.path, "**", "*.parquet"), recursive=True))
    delta = DeltaJvm(spark)
    with delta.active():
        txn = delta.delta_log(log.path).startTransaction()
        assert arrow_files.data_files(delta, txn, log.path, rows) is None
    assert sorted(glob.glob(os.path.join(log.path, "**", "*.parquet"), recursive=True)) == before


def _driver_side(topic: Topic, lines: list[dict]):
    """A partition's driver-side rows as produce makes them (one partition's worth)."""
    from framework.clients import produce as produce_module

    batches = produce_module._batches(topic, parse_records(list(enumerate(lines, 1)), topic.spec, "test"),
                                      1_700_000_100_000, "test")
    return batches[0][0]


def test_an_arrow_table_as_a_claimed_commit_s_rows_is_recognised():
    import pyarrow as pa

    assert delta_transactions.is_arrow(pa.table({"a": [1]}))
    assert not delta_transactions.is_arrow(None) and not delta_transactions.is_arrow([1])


def test_arrow_dictionary_encodes_the_columns_that_repeat_and_only_those(spark, tmp_path):
    """A column whose values do not repeat (the offset, the values, the timestamps) is
    written plain, where Arrow's default hashes it into a dictionary it then gives up; the
    keys that repeat and the headers (nested) keep their dictionary."""
    import pyarrow.parquet as pq

    topic = _topic(spark, str(tmp_path / "w"))
    _produce(topic, LINES)
    log = topic.partition(0)
    [add] = _adds(_commits(log.path)[-1])
    footer = pq.ParquetFile(os.path.join(log.path, add["path"])).metadata
    encoded = {footer.row_group(0).column(i).path_in_schema: footer.row_group(0).column(i).encodings
               for i in range(footer.num_columns)}
    dictionary = {path for path, encodings in encoded.items() if "RLE_DICTIONARY" in encodings}
    assert {"offset", "timestamp", "value"}.isdisjoint(dictionary), encoded
    assert {"key", "headers.list.element.key"} <= dictionary, encoded
    # the same columns chosen from the rows alone
    rows = pq.read_table(os.path.join(log.path, add["path"]))
    assert set(arrow_files.dictionary_columns(rows)) == dictionary
