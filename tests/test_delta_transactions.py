"""Claimed commits through Delta's transaction API (framework/log/delta_transactions.py):
the same claim semantics as a DataFrame write with ``txnAppId``, without its state
reconstruction."""

from __future__ import annotations

import glob
import json
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from support.spark_jobs import spark_jobs  # noqa: E402

from framework.cleaner.rules import removes_files  # noqa: E402
from framework.log.commit_log import read_commits  # noqa: E402
from framework.log.delta_commits import is_retryable_conflict  # noqa: E402
from framework.log.delta_transactions import DeltaJvm, claimed_commit  # noqa: E402


@pytest.fixture
def table(spark, tmp_path):
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    schema = StructType([StructField("offset", LongType(), False), StructField("v", StringType(), True)])
    path = str(tmp_path / "t")
    spark.createDataFrame([(0, "a"), (1, "b")], schema).write.format("delta").save(path)
    return path, schema


def _last_commit(path: str) -> list[dict]:
    newest = sorted(glob.glob(os.path.join(path, "_delta_log", "*.json")))[-1]
    return [json.loads(line) for line in Path(newest).read_text().splitlines()]


def _rows(spark, path):
    return sorted(tuple(r) for r in spark.read.format("delta").load(path).collect())


def _version(spark, path) -> int:
    return max(int(Path(name).stem) for name in glob.glob(os.path.join(path, "_delta_log", "*.json")))


def test_a_claim_lands_once_with_its_rows_and_metadata_and_a_held_claim_writes_nothing(spark, table):
    path, schema = table
    rows = spark.createDataFrame([("c", 2)], ["v", "offset"])  # column order is the table's business
    assert claimed_commit(spark, path, schema, "topiclake.append", 3, '{"n": 1}', rows) == 1
    commit = _last_commit(path)
    info = next(a["commitInfo"] for a in commit if "commitInfo" in a)
    assert (info["operation"], info["userMetadata"], info["isBlindAppend"]) == ("WRITE", '{"n": 1}', True)
    assert [a["txn"]["appId"] for a in commit if "txn" in a] == ["topiclake.append"]
    assert all(a["add"]["dataChange"] for a in commit if "add" in a)
    assert _rows(spark, path) == [(0, "a"), (1, "b"), (2, "c")]
    # the version held, or an older one: nothing written, as Delta's writers skip it
    for older in (3, 2):
        assert claimed_commit(spark, path, schema, "topiclake.append", older, "{}", rows) is None
    assert _version(spark, path) == 1 and len(_rows(spark, path)) == 3
    # a newer claim with no rows is a commit of the claim alone
    assert claimed_commit(spark, path, schema, "topiclake.append", 4, '{"n": 2}') == 2
    assert _rows(spark, path) == [(0, "a"), (1, "b"), (2, "c")]
    assert [a["txn"]["version"] for a in _last_commit(path) if "txn" in a] == [4]


def test_the_claim_comes_from_the_version_checksum_without_a_spark_job(spark, table):
    path, schema = table
    for app_id, version in (("a", 1), ("b", 7), ("a", 2)):
        claimed_commit(spark, path, schema, app_id, version, "{}")
    delta = DeltaJvm(spark)
    txn = delta.delta_log(path).startTransaction()
    claims, jobs = spark_jobs(spark, lambda: [delta.claimed_version(txn, app) for app in ("a", "b", "c")])
    assert (claims, jobs) == ([2, 7, -1], 0)
    # Delta's own answer, from the snapshot's state, is the same
    fresh = delta.delta_log(path).startTransaction()
    assert [fresh.txnVersion(app) for app in ("a", "b", "c")] == [2, 7, -1]
    _, jobs = spark_jobs(spark, lambda: claimed_commit(spark, path, schema, "a", 3, "{}"))
    assert jobs == 0


def test_without_a_checksum_the_snapshots_state_answers(spark, table):
    path, schema = table
    claimed_commit(spark, path, schema, "a", 5, "{}")
    os.remove(os.path.join(path, "_delta_log", f"{1:020d}.crc"))
    DeltaJvm(spark).cls("org.apache.spark.sql.delta.DeltaLog").invalidateCache(spark._jsparkSession,
                                                                              spark._jvm.org.apache.hadoop.fs.Path(path))
    delta = DeltaJvm(spark)
    txn = delta.delta_log(path).startTransaction()
    assert not txn.snapshot().checksumOpt().isDefined()
    assert delta.claimed_version(txn, "a") == 5
    assert claimed_commit(spark, path, schema, "a", 5, "{}") is None
    assert claimed_commit(spark, path, schema, "a", 6, "{}") == 2


def test_a_concurrent_claim_of_the_same_app_id_makes_the_later_commit_conflict(spark, table):
    path, schema = table
    delta = DeltaJvm(spark)
    txn = delta.delta_log(path).startTransaction()
    assert delta.claimed_version(txn, "topiclake.maintenance") == -1
    # another writer claims the same app id first
    assert claimed_commit(spark, path, schema, "topiclake.maintenance", 1, "{}") == 1
    claim = delta.cls("org.apache.spark.sql.delta.actions.SetTransaction")("topiclake.maintenance", 1, delta.none())
    with pytest.raises(Exception) as raised:
        txn.commit(delta.seq([claim]), delta.append_operation("{}"))
    assert is_retryable_conflict(raised.value)
    assert _version(spark, path) == 1


def test_a_partition_tables_claims_come_from_its_checksum(spark, warehouse, monkeypatch):
    """On a topic's own table (its properties and layout): an append of a produce's rows runs
    no Spark job (its claim read from the checksum, its file written by Arrow), and a
    bookkeeping commit none. A table property that
    makes Delta leave the SetTransactions out of the checksum
    (``delta.setTransactionRetentionDuration``) would bring back the state's three jobs."""
    from dataclasses import replace

    from framework.clients.produce import produce
    from framework.clients.records import parse_records
    from framework.log import partition_log
    from framework.log.topic import Topic
    from framework.spec import parse_spec

    topic = Topic(spark, warehouse, parse_spec({"topic": "orders", "partitions": 1, "config": {
        "cleanup.policy": "compact"}}, "orders.yaml"))
    topic.create()
    produce(topic, parse_records([(0, {"key": "k", "value": "v1", "timestamp": 500})], topic.spec, "test"), 1_000)
    log = topic.partition(0)
    assert "delta.setTransactionRetentionDuration" not in log.properties()
    writes = []
    real = partition_log.claimed_commit

    def counted(*args, **kwargs):
        version, jobs = spark_jobs(spark, lambda: real(*args, **kwargs))
        writes.append(jobs)
        return version

    monkeypatch.setattr(partition_log, "claimed_commit", counted)
    produce(topic, parse_records([(1, {"key": "k", "value": "v2", "timestamp": 1_500})], topic.spec, "test"), 2_000)
    snap = log.snapshot()
    log.commit_maintenance(replace(snap.state, checkpoint=snap.state.log_end_offset), "compact", None, snap.version)
    assert writes == [0, 0]
    assert log.snapshot().state.checkpoint == 2
    assert [r["value"] for r in log.records().collect()] == ["v1", "v2"]


def test_a_delta_whose_jvm_api_has_another_shape_gets_a_dataframe_write(spark, table, monkeypatch):
    """Another Delta version or platform may name or shape these JVM calls differently; then
    the commit is the DataFrame write it replaced, with the same claim, not a failure."""
    from py4j.protocol import Py4JError

    from framework.log import delta_transactions
    from framework.log.delta_transactions import WRITTEN_OR_SKIPPED

    path, schema = table

    def missing(self, metadata):
        raise Py4JError("Constructor org.apache.spark.sql.delta.DeltaOperations$Write does not exist")

    monkeypatch.setattr(delta_transactions.DeltaJvm, "append_operation", missing)
    rows = spark.createDataFrame([(2, "c")], schema)
    assert claimed_commit(spark, path, schema, "a", 1, '{"n": 1}', rows) == WRITTEN_OR_SKIPPED
    assert _rows(spark, path) == [(0, "a"), (1, "b"), (2, "c")]
    assert next(a["commitInfo"] for a in _last_commit(path) if "commitInfo" in a)["userMetadata"] == '{"n": 1}'
    # the DataFrame write honours the claim too: the same version again writes nothing
    claimed_commit(spark, path, schema, "a", 1, "{}", rows)
    assert _version(spark, path) == 1


def test_through_the_jvm_falls_back_on_a_missing_method_and_raises_what_java_raised(spark):
    """The one way back of every transaction-API commit: a class or method py4j cannot
    find means another Delta (the caller's fallback runs), an exception Java threw is
    Delta's answer (raised, no fallback), and either way the JVM's active session is
    restored."""
    from py4j.protocol import Py4JError, Py4JJavaError

    from framework.log.delta_transactions import through_the_jvm

    sessions = spark._jvm.org.apache.spark.sql.SparkSession
    active_before = sessions.getActiveSession()
    fell_back = []

    def otherwise():
        fell_back.append(True)
        return "fallback"

    assert through_the_jvm(spark, lambda delta: delta.spark is spark and "work", otherwise) == "work"
    assert not fell_back

    def missing_class(delta):
        return delta.cls("org.apache.spark.sql.delta.NoSuchClassHere")()

    def missing_method(delta):
        return delta.cls("java.lang.Integer").noSuchMethodHere("1")

    assert through_the_jvm(spark, missing_class, otherwise) == "fallback"
    assert through_the_jvm(spark, missing_method, otherwise) == "fallback"
    assert fell_back == [True, True]
    with pytest.raises(TypeError, match="unsupported operand"):  # a Python mistake is not a missing method
        through_the_jvm(spark, lambda delta: 1 + "1", otherwise)

    def java_throws(delta):  # an exception pyspark leaves as py4j's
        return delta.cls("java.util.ArrayList")().get(5)

    def java_throws_converted(delta):  # one pyspark converts (as it converts Delta's conflicts)
        return delta.cls("java.lang.Integer").parseInt("not a number")

    with pytest.raises(Py4JJavaError, match="IndexOutOfBoundsException"):
        through_the_jvm(spark, java_throws, otherwise)
    with pytest.raises(Exception, match="not a number"):
        through_the_jvm(spark, java_throws_converted, otherwise)
    assert fell_back == [True, True]
    assert issubclass(Py4JJavaError, Py4JError)  # why the order of the two handlers matters
    assert sessions.getActiveSession().isDefined() == active_before.isDefined()


def test_a_scala_seq_is_read_without_a_java_exception(spark, monkeypatch):
    """Iterating a Java list through py4j ends in a Java NoSuchElementException, which
    pyspark converts through a dozen class lookups (about 50 ms on a busy JVM, and every
    append read two lists so); the items are read by index instead."""
    from pyspark.errors.exceptions import captured

    converted = []
    original = captured.convert_exception
    monkeypatch.setattr(captured, "convert_exception", lambda error: converted.append(error) or original(error))
    delta = DeltaJvm(spark)
    assert delta.items(delta.seq(["a", "b", "c"])) == ["a", "b", "c"]
    assert delta.items(delta.seq([])) == []
    assert converted == []


def test_committed_offsets_are_upserted_by_one_overwrite_as_a_merge_upserts_them(spark, warehouse, tmp_path,
                                                                                   monkeypatch):
    """The consumer offsets table (a row per group and partition) is rewritten whole in one
    overwrite commit: on the local file system by Arrow, with no Spark job, else with the
    new rows written by Spark. Both leave the same rows, commit after commit, as Delta's
    MERGE of each row leaves in a twin table, and read back the same by Arrow and by Spark;
    a commit to the table since the transaction read it makes the overwrite conflict."""
    from framework.log import delta_transactions
    from framework.log.consumer_offsets import ConsumerOffsets
    from framework.log.warehouse import Warehouse

    ways = {"local": ConsumerOffsets(spark, warehouse),
            "rewritten": ConsumerOffsets(spark, Warehouse.resolve(str(tmp_path / "rewritten"))),
            "merged": ConsumerOffsets(spark, Warehouse.resolve(str(tmp_path / "merged")))}
    commits = [("billing", "orders", 0, 5), ("billing", "orders", 1, 2), ("audit", "orders", 0, 9),
               ("billing", "orders", 0, 3)]  # the latest commit wins, even a lower one
    jobs = dict.fromkeys(ways, 0)
    for group, topic, partition, offset in commits:
        for way, offsets in ways.items():
            with monkeypatch.context() as patch:
                if way != "local":
                    patch.setattr("framework.log.consumer_offsets.replaced_locally", lambda *args: None)
                if way == "merged":
                    patch.setattr("framework.log.consumer_offsets.replaced_commit", lambda *args: False)
                jobs[way] += spark_jobs(spark, lambda: offsets.commit(group, topic, partition, offset))[1]

    def rows(offsets):
        return sorted((r["group"], r["topic"], r["partition"], r["offset"]) for r in offsets.all().collect())

    expected = [("audit", "orders", 0, 9), ("billing", "orders", 0, 3), ("billing", "orders", 1, 2)]
    assert [rows(offsets) for offsets in ways.values()] == [expected] * 3
    for way, offsets in ways.items():
        newest = _last_commit(offsets.path)
        info = next(a["commitInfo"] for a in newest if "commitInfo" in a)
        assert info["operation"] == ("MERGE" if way == "merged" else "WRITE"), (way, info)
        if way != "merged":
            assert info["operationParameters"]["mode"] == "Overwrite" and len([a for a in newest if "add" in a]) == 1
            # as Delta's own overwrite records them: vacuum's rules read what a WRITE removed
            removed = [a["remove"] for a in newest if "remove" in a]
            metrics = info["operationMetrics"]
            assert metrics["numRemovedFiles"] == str(len(removed)) == "1", (way, metrics)
            assert metrics["numRemovedBytes"] == str(sum(r["size"] for r in removed)), (way, metrics)
            assert metrics["numOutputRows"] == "3" and metrics["numFiles"] == "1", (way, metrics)
        assert removes_files(read_commits(spark, offsets.path, 1)[0]), way
        assert offsets.committed("orders", 0) == {"billing": 3, "audit": 9}  # by Arrow
        with monkeypatch.context() as patch:
            patch.setattr("framework.log.consumer_offsets.read_locally", lambda *args: None)
            assert offsets.committed("orders", 0) == {"billing": 3, "audit": 9}  # by Spark
            assert offsets.committed("orders", 1, ("billing", "nobody")) == {"billing": 2}
        assert offsets.committed("orders", 1, ("billing", "nobody")) == {"billing": 2}
    assert jobs["local"] == 0 and 0 < jobs["rewritten"] < jobs["merged"], jobs  # the create too: own_commits.created
    rewritten = ways["rewritten"]

    # a commit to the table between the transaction's read and its commit: a conflict
    real = delta_transactions._replaced_in

    def overtaken(delta, path, replace):
        def replace_after_another_commit(rows):
            with monkeypatch.context() as patch:
                patch.setattr(delta_transactions, "_replaced_in", real)
                ConsumerOffsets(spark, Warehouse.resolve(str(tmp_path / "rewritten"))).commit("other", "orders", 0, 1)
            return replace(rows)
        return real(delta, path, replace_after_another_commit)

    monkeypatch.setattr(delta_transactions, "_replaced_in", overtaken)
    with pytest.raises(Exception) as raised:
        delta_transactions.replaced_commit(spark, rewritten.path, lambda rows: rows)
    assert is_retryable_conflict(raised.value)
    assert rewritten.committed("orders", 0) == {"billing": 3, "audit": 9, "other": 1}
