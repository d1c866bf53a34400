"""Partition tables: layout, idempotent creation, specs that no longer fit, and appends."""

import json
import sys
import threading
import types
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from framework.clients.partitioner import default_partition
from framework.clients.produce import produce, produce_frame
from framework.clients.records import parse_records
from framework.errors import RecordError, TableMismatchError
from framework.log.table_layout import desired_properties, table_schema
from framework.log.topic import Topic
from framework.log.warehouse import delta_table_sql
from framework.spec import parse_spec


def spec(partitions=1, key_type="string", **config):
    settings = {"cleanup.policy": "compact"}
    settings.update(config)
    return parse_spec({"topic": "orders", "partitions": partitions, "key": {"type": key_type},
                       "config": settings}, "orders.yaml")


def records(topic, items):
    return parse_records(list(enumerate(items)), topic.spec, "test")


def test_layout_and_properties(spark, warehouse):
    topic = Topic(spark, warehouse, spec(2, **{"time.travel.retention.ms": 86_400_000 * 10,
                                                "min.compaction.lag.ms": 3_600_000}))
    assert topic.create() == {0: "created", 1: "created"}
    log = topic.partition(1)
    assert log.path == warehouse.root + "/orders-1"
    fields = {f.name: (f.dataType.simpleString(), f.nullable) for f in log.schema().fields}
    assert fields["offset"] == ("bigint", False) and fields["timestamp"] == ("timestamp", False)
    assert fields["key"] == ("string", True) and fields["value"] == ("string", True)
    assert fields["headers"][0] == "array<struct<key:string,value:binary>>"
    assert set(fields) == {f.name for f in table_schema(topic.spec).fields}
    props = log.properties()
    assert props["delta.deletedFileRetentionDuration"] == "interval 864000000 milliseconds"
    assert props["delta.logRetentionDuration"] == "interval 864000000 milliseconds"
    assert props["topiclake.topic"] == "orders" and props["topiclake.partition"] == "1"
    assert props["topiclake.config.min.compaction.lag.ms"] == "3600000"
    partitioned = spark.sql(f"DESCRIBE DETAIL {delta_table_sql(log.path)}").collect()[0]["partitionColumns"]
    assert partitioned == ["_segment"]


def test_create_is_idempotent_and_syncs_properties(spark, warehouse):
    Topic(spark, warehouse, spec(1)).create()
    assert Topic(spark, warehouse, spec(1)).create() == {0: "exists"}
    changed = Topic(spark, warehouse, spec(1, **{"time.travel.retention.ms": 1000}))
    assert changed.create() == {0: "updated"}
    assert changed.partition(0).properties()["delta.deletedFileRetentionDuration"] == "interval 1000 milliseconds"
    # The log is kept at least a day: topiclake's offset bookkeeping lives in it.
    assert desired_properties(changed.spec, 0)["delta.logRetentionDuration"] == "interval 86400000 milliseconds"
    grown = Topic(spark, warehouse, spec(3))
    assert grown.create() == {0: "updated", 1: "created", 2: "created"}


def test_the_properties_sync_reads_are_show_tblproperties(spark, warehouse):
    """``sync_properties`` reads the current properties from the newest version's checksum:
    the same as ``SHOW TBLPROPERTIES`` says, but for the protocol's own entries, after a
    create and after a change; without a checksum it asks Spark."""
    from framework.log import version_checksum
    from framework.log.commit_log import read_commits

    def protocol_entry(name: str) -> bool:
        return name in ("delta.minReaderVersion", "delta.minWriterVersion") or name.startswith("delta.feature.")

    topic = Topic(spark, warehouse, spec(1))
    topic.create()
    log = topic.partition(0)
    for window in (None, 5000):
        if window is not None:
            log = Topic(spark, warehouse, spec(1, **{"time.travel.retention.ms": window})).partition(0)
            assert set(log.sync_properties()) == {"delta.deletedFileRetentionDuration", "delta.logRetentionDuration",
                                                  "topiclake.config.time.travel.retention.ms"}
        version = read_commits(spark, log.path, 1)[0].version
        read = version_checksum.configuration(log.path, version)
        shown = {k: v for k, v in log.properties().items() if not protocol_entry(k)}
        assert read == shown and "delta.enableChangeDataFeed" in read
    assert log.sync_properties() == {}
    crc = Path(log.path) / "_delta_log" / f"{version:020d}.crc"
    crc.unlink()  # no checksum: SHOW TBLPROPERTIES answers
    assert version_checksum.configuration(log.path, version) is None
    assert log.sync_properties() == {}
    changed = Topic(spark, warehouse, spec(1, **{"time.travel.retention.ms": 7000})).partition(0)
    assert changed.sync_properties()["delta.deletedFileRetentionDuration"] == "interval 7000 milliseconds"


def test_a_vacuum_hands_the_newest_version_to_the_properties_sync(spark, warehouse, monkeypatch):
    """vacuum reads its page of commits first and the properties' sync takes the newest
    version from it instead of reading the log again; when the sync commits a property
    change, the vacuum starts from that new version."""
    from framework.log import partition_log
    from framework.log.commit_log import read_commits
    from framework.stages.vacuum import vacuum

    topic = Topic(spark, warehouse, spec(1))
    topic.create()
    own_reads = []
    shipped = partition_log.read_commits
    monkeypatch.setattr(partition_log, "read_commits", lambda *args, **kwargs: own_reads.append(args) or shipped(
        *args, **kwargs))
    unchanged = vacuum(topic.partition(0))
    assert unchanged.properties_changed == () and own_reads == []
    newest = read_commits(spark, topic.partition(0).path, 1)[0].version
    assert unchanged.version_before == unchanged.version_after == newest
    shorter = Topic(spark, warehouse, spec(1, **{"time.travel.retention.ms": 5000})).partition(0)
    changed = vacuum(shorter)
    assert "delta.deletedFileRetentionDuration" in changed.properties_changed and own_reads == []
    assert changed.version_before == unchanged.version_before + 1 == read_commits(spark, shorter.path, 1)[0].version


def _killed_create(path: Path) -> Path:
    """What Delta's create leaves when killed before its first commit (seen in the crash test):
    the log folder with its ``_staged_commits``, and maybe a commit's temp file not yet renamed."""
    log = path / "_delta_log"
    (log / "_staged_commits").mkdir(parents=True)
    (log / ".00000000000000000000.json.8f1c2b7e.tmp").write_text('{"commitInfo":{')
    return log


def test_a_create_killed_before_its_first_commit_is_cleared_and_made_again(spark, warehouse):
    """Delta says no table is there, yet refused to create one (DELTA_TABLE_NOT_FOUND): the
    partition, and topiclake's own tables, stayed broken for every later run."""
    from delta.tables import DeltaTable
    from pyspark.sql.types import LongType, StructField, StructType

    from framework.log.warehouse import create_own_table

    topic = Topic(spark, warehouse, spec(2))
    _killed_create(Path(topic.partition(1).path))
    assert not topic.partition(1).exists()
    produce(topic, records(topic, [{"key": f"k{i}", "value": "v", "timestamp": 0} for i in range(8)]), 0)
    assert topic.create() == {0: "exists", 1: "exists"}
    offsets = sorted(r["offset"] for r in topic.partition(1).read().select("offset").collect())
    assert offsets and offsets == list(range(len(offsets)))
    assert topic.partition(0).read().count() + len(offsets) == 8

    _killed_create(Path(warehouse.consumer_offsets_path))
    create_own_table(spark, warehouse.consumer_offsets_path, StructType([StructField("offset", LongType())]))
    assert DeltaTable.isDeltaTable(spark, warehouse.consumer_offsets_path)


def _actions(commit: Path) -> dict:
    """A commit file's actions by name (the last of a name), and ``adds``: how many ``add``
    actions it holds."""
    actions = {"adds": 0}
    for line in commit.read_text().splitlines():
        (name, action), = json.loads(line).items()
        actions[name] = action
        actions["adds"] += name == "add"
    return actions


def _first_commit(path: str) -> dict:
    """Commit 0's actions by name, less what differs between any two creates."""
    actions = _actions(Path(path) / "_delta_log" / "00000000000000000000.json")
    for varying in ("id", "createdTime"):
        actions["metaData"].pop(varying)
    for varying in ("timestamp", "txnId", "engineInfo"):
        actions["commitInfo"].pop(varying)
    parameters = actions["commitInfo"]["operationParameters"]  # a JSON map, in the order of a Scala Map
    parameters["properties"] = json.loads(parameters["properties"])
    return actions


@pytest.mark.parametrize("table", ["partition table", "own table"])
def test_a_create_through_the_transaction_api_commits_what_deltas_builder_commits(spark, tmp_path, table):
    """The create is commit 0 written through Delta's transaction API; Delta's
    ``DeltaTable.createIfNotExists`` (kept for a session without a JVM) must commit the
    same metadata, protocol and operation, and neither commits over a table that is there.
    So must topiclake's own commit (``own_commits.created``), a session not started yet or
    a started one, with the user metadata of the block it is made in."""
    from framework.deferred_session import DeferredSession
    from framework.log import delta_create
    from framework.log.delta_commits import commit_metadata
    from framework.log.delta_transactions import through_the_jvm
    from framework.log.warehouse import OWN_TABLE_PROPERTIES

    if table == "partition table":
        topic_spec = spec(1, **{"min.compaction.lag.ms": 3_600_000})
        shape = dict(schema=table_schema(topic_spec), properties=desired_properties(topic_spec, 0),
                     partition_columns=("_segment",), description="topiclake: topic orders, partition 0")
    else:
        from framework.log.history import history_schema

        shape = dict(schema=history_schema(), properties=OWN_TABLE_PROPERTIES)
    paths = {way: str(tmp_path / way)
             for way in ("transaction", "builder", "own commit", "own commit, session started")}
    with commit_metadata(spark, '{"topiclake":{"operation":"create"}}'):
        assert through_the_jvm(spark, lambda delta: delta_create._create_in(delta, paths["transaction"], **shape),
                               lambda: pytest.fail("Delta's transaction API is not there"))
        assert delta_create._create_by_builder(spark, paths["builder"], **shape)
        deferred = DeferredSession(lambda: spark)
        assert delta_create.create_table(deferred, paths["own commit"], **shape) and not deferred.started
        assert delta_create.create_table(spark, paths["own commit, session started"], **shape)
        for path in paths.values():
            assert not delta_create.create_table(spark, path, **shape)  # there: nothing committed
    for path in paths.values():
        assert not (Path(path) / "_delta_log" / "00000000000000000001.json").exists()
    for way in ("own commit", "own commit, session started"):
        assert "(no JVM)" in _actions(Path(paths[way]) / "_delta_log" / "00000000000000000000.json")[
            "commitInfo"]["engineInfo"]
    by_transaction, by_builder = _first_commit(paths["transaction"]), _first_commit(paths["builder"])
    assert by_transaction == by_builder == _first_commit(paths["own commit"]) == _first_commit(
        paths["own commit, session started"])
    assert by_builder["commitInfo"]["operation"] == "CREATE TABLE"
    assert by_builder["commitInfo"]["userMetadata"] == '{"topiclake":{"operation":"create"}}'
    assert by_builder["metaData"]["configuration"] == shape["properties"]
    assert spark.read.format("delta").load(paths["transaction"]).schema == shape["schema"]


def test_a_session_that_sets_a_new_table_default_creates_through_delta(spark, tmp_path):
    """A new-table default of Delta's set in the running session (here deletion vectors)
    is applied by Delta's create only: the table is created through Delta, with it."""
    from framework.log import own_commits
    from framework.log.delta_commits import session_confs
    from framework.log.warehouse import Warehouse

    log = Topic(spark, Warehouse.resolve(str(tmp_path)), spec(1)).partition(0)
    with session_confs(spark, {own_commits.NEW_TABLE_DEFAULTS + "enableDeletionVectors": "true"}):
        assert own_commits.session_may_default_new_tables(spark)
        assert log.create()
    assert not own_commits.session_may_default_new_tables(spark)
    first = _actions(Path(log.path) / "_delta_log" / "00000000000000000000.json")
    assert "(no JVM)" not in first["commitInfo"]["engineInfo"]
    assert first["metaData"]["configuration"].get("delta.enableDeletionVectors") == "true"


def test_commits_through_the_transaction_api_carry_the_settings_of_the_session_given(spark, warehouse):
    """Delta's transaction reads its settings (the commit's user metadata: topiclake's
    bookkeeping) from the JVM thread's active session. Handed a session that is not the
    active one, the create, the claimed append, the compaction rewrite and the bin-packing still commit
    that session's, and the create leaves the active session active."""
    from framework.stages import compaction, optimize

    jvm_sessions = getattr(spark._jvm, "org.apache.spark.sql.SparkSession")

    def make_the_test_session_active():
        jvm_sessions.setActiveSession(spark._jsparkSession)

    other = spark.newSession()
    topic = Topic(other, warehouse, spec(1, **{"min.cleanable.dirty.ratio": 0.0}))
    log = topic.partition(0)
    def append(count):
        return lambda: produce(topic, records(topic, [{"key": f"k{i % 2}", "value": "v", "timestamp": 0}
                                                      for i in range(count)]), 0)

    steps = [lambda: topic.create(), append(6),
             lambda: compaction.execute(log, compaction.plan(log, 0, force=True)),
             append(2), append(2), append(2),
             lambda: optimize.execute(log, optimize.plan(log), run_id="test")]
    for step in steps:
        make_the_test_session_active()
        step()
        if step is steps[0]:  # pyspark's own createDataFrame (a produce) leaves its session active
            assert jvm_sessions.getActiveSession().get().equals(spark._jsparkSession)
    commits = log.commits()
    assert [c.version for c in commits] == list(range(6, -1, -1))
    assert all('"topiclake"' in (c.user_metadata or "") for c in commits), commits
    assert sorted(r["offset"] for r in log.read().collect()) == [4, 5, *range(6, 12)]
    assert log.snapshot().state.log_end_offset == 12


@pytest.mark.parametrize("session", ["through Hadoop's file system", "no session started: through the OS"])
def test_a_log_folder_that_may_hold_a_commit_is_never_cleared(spark, tmp_path, session):
    from framework.deferred_session import DeferredSession
    from framework.log.delta_create import clear_uncommitted_log

    deferred = DeferredSession(lambda: spark)
    if session.startswith("no session"):
        spark = deferred  # the tests' session, which nothing below may start
    for name in ("00000000000000000000.json", "_last_checkpoint", "00000000000000000000.crc"):
        log = _killed_create(tmp_path / name)
        (log / name).write_text("{}")
        assert not clear_uncommitted_log(spark, str(tmp_path / name))
        assert (log / name).exists() and (log / "_staged_commits").is_dir(), name
    staged = _killed_create(tmp_path / "staged") / "_staged_commits" / "00000000000000000000.uuid.json"
    staged.write_text("{}")
    assert not clear_uncommitted_log(spark, str(tmp_path / "staged")) and staged.exists()
    assert clear_uncommitted_log(spark, str(tmp_path / "killed")) is False  # no folder at all
    _killed_create(tmp_path / "killed")
    assert clear_uncommitted_log(spark, str(tmp_path / "killed"))
    assert not (tmp_path / "killed" / "_delta_log").exists()
    assert not deferred.started


def test_whether_a_table_is_there_is_answered_from_its_local_log_as_delta_answers(spark, tmp_path):
    """``is_delta_table`` reads a local table's log folder (no Py4J call, no state loaded)
    and must answer as ``DeltaTable.isDeltaTable`` does (its strict check) in every state a
    folder can be in; without a log folder here it asks Delta."""
    from framework.log.delta_create import has_a_commit, is_delta_table

    def delta_says(path: str) -> bool:
        return bool(getattr(spark._jvm, "io.delta.tables.DeltaTable").isDeltaTable(spark._jsparkSession, path))

    (tmp_path / "no log folder").mkdir()
    (tmp_path / "no log folder" / "part-0.parquet").write_text("")
    _killed_create(tmp_path / "killed create")
    staged = _killed_create(tmp_path / "staged commit only") / "_staged_commits" / "00000000000000000000.uuid.json"
    staged.write_text("{}")
    (_killed_create(tmp_path / "checksum only") / "00000000000000000000.crc").write_text("{}")
    spark.range(3).write.format("delta").save(str(tmp_path / "table"))
    cleaned = str(tmp_path / "cleaned log")
    spark.range(3).write.format("delta").option("delta.checkpointInterval", "2").save(cleaned)
    for _ in range(3):
        spark.range(1).write.format("delta").mode("append").save(cleaned)
    log = Path(cleaned) / "_delta_log"
    checkpoint = max(int(p.name[:20]) for p in log.glob("*.checkpoint.parquet"))
    for commit in log.glob("*.json"):  # as Delta's log cleanup leaves it: nothing before the checkpoint
        if int(commit.name[:20]) < checkpoint:
            commit.unlink()
    answers = {}
    for name in ("missing", "no log folder", "killed create", "staged commit only", "checksum only", "table",
                 "cleaned log"):
        path = str(tmp_path / name)
        answers[name] = (has_a_commit(path), is_delta_table(spark, path), delta_says(path))
    assert answers == {
        "missing": (None, False, False), "no log folder": (None, False, False),
        "killed create": (False, False, False), "staged commit only": (False, False, False),
        "checksum only": (False, False, False), "table": (True, True, True), "cleaned log": (True, True, True)}


def test_a_missing_warehouse_is_told_missing_here_unless_spark_may_look_elsewhere(spark, tmp_path, monkeypatch):
    """A path with no scheme names the local file system in the embedded session unless
    Spark's launch settings or a ``core-site.xml`` on its class path name another default
    file system: only then (or with a session running, or under spark-submit) is a table
    of a warehouse folder that is not here left for Spark to tell."""
    from framework import session
    from framework.log.warehouse import Warehouse

    for name in ("SPARK_CONF_DIR", "HADOOP_CONF_DIR", "YARN_CONF_DIR", "PYSPARK_SUBMIT_ARGS", "PYSPARK_GATEWAY_PORT"):
        monkeypatch.delenv(name, raising=False)
    assert not session.no_session_here()  # the tests' own session runs in this process
    monkeypatch.setattr(session, "no_session_here", lambda: True)
    new = Warehouse.resolve(str(tmp_path / "not here yet"))
    table = new.partition_path("t", 0)

    def told() -> tuple:
        return session.paths_without_scheme_are_local(), new.has_table(table)

    assert told() == (True, False)
    for folder, variable in ((tmp_path / "hadoop", "HADOOP_CONF_DIR"), (tmp_path / "yarn", "YARN_CONF_DIR"),
                             (tmp_path / "spark", "SPARK_CONF_DIR")):
        folder.mkdir()
        monkeypatch.setenv(variable, str(folder))
        assert told() == (True, False), variable  # no core-site.xml there
        (folder / "core-site.xml").write_text("<configuration><property><name>fs.defaultFS</name>"
                                              "<value>hdfs://namenode:8020</value></property></configuration>")
        assert told() == (False, None), variable
        monkeypatch.delenv(variable)
    (tmp_path / "spark" / "core-site.xml").unlink()
    (tmp_path / "spark" / "spark-defaults.conf").write_text("spark.hadoop.fs.default.name hdfs://namenode:8020\n")
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path / "spark"))
    assert told() == (False, None)
    monkeypatch.delenv("SPARK_CONF_DIR")
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", "--conf spark.hadoop.fs.defaultFS=s3a://bucket pyspark-shell")
    assert told() == (False, None)
    monkeypatch.delenv("PYSPARK_SUBMIT_ARGS")
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "1")  # spark-submit: its JVM was configured elsewhere
    assert told() == (False, None)
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT")
    # a session running in the process answers for itself; a file: warehouse is local by its scheme
    monkeypatch.setattr(session, "no_session_here", lambda: False)
    assert new.has_table(table) is None
    explicit = Warehouse.resolve("file:" + str(tmp_path / "not here either"))
    assert explicit.has_table(explicit.partition_path("t", 0)) is False
    # a process that has not imported pyspark runs no session, unless a Spark Connect one is asked for
    monkeypatch.undo()
    monkeypatch.setitem(sys.modules, "pyspark.context", None)
    assert session.no_session_here()
    # nor does one whose import another thread has begun (pyspark's SparkContext not defined yet)
    monkeypatch.setitem(sys.modules, "pyspark.context", types.ModuleType("pyspark.context"))
    assert session.no_session_here()
    monkeypatch.setenv("SPARK_REMOTE", "sc://localhost")
    assert not session.no_session_here()


def test_specs_that_no_longer_fit_are_refused(spark, warehouse):
    Topic(spark, warehouse, spec(2)).create()
    with pytest.raises(TableMismatchError, match="partitions: the spec says 1"):
        Topic(spark, warehouse, spec(1)).create()
    with pytest.raises(TableMismatchError, match="key.type: the spec says binary"):
        Topic(spark, warehouse, spec(2, key_type="binary")).create()


def test_offsets_are_dense_per_partition_and_never_reused(spark, warehouse):
    topic = Topic(spark, warehouse, spec(1))
    first = produce(topic, records(topic, [{"key": "a", "value": str(i), "timestamp": 0} for i in range(3)]), 0)
    second = produce(topic, records(topic, [{"key": "b", "value": "x", "timestamp": 0}]), 0)
    assert [(r.base_offset, r.count) for r in first + second] == [(0, 3), (3, 1)]
    rows = topic.partition(0).read().orderBy("offset").collect()
    assert [(r["offset"], r["value"], r["_size"]) for r in rows] == [(0, "0", 2), (1, "1", 2), (2, "2", 2), (3, "x", 2)]


def test_log_append_time_stamps_the_append_time(spark, warehouse):
    topic = Topic(spark, warehouse, spec(1, **{"message.timestamp.type": "LogAppendTime"}))
    produce(topic, records(topic, [{"key": "a", "value": "1", "timestamp": 5}, {"key": "b", "value": "1"}]), 777)
    stamps = [r[0] for r in topic.partition(0).read().select(F.unix_millis("timestamp")).collect()]
    assert stamps == [777, 777]


def test_binary_keys_and_header_bytes_round_trip(spark, warehouse):
    topic = Topic(spark, warehouse, spec(1, key_type="binary"))
    produce(topic, records(topic, [{"key": {"base64": "AP8="}, "value": "v", "timestamp": 0,
                                    "headers": [["v", {"base64": "AAAAAAAAAAU="}], ["v", None]]}]), 0)
    row = topic.partition(0).read().collect()[0]
    assert bytes(row["key"]) == b"\x00\xff"
    assert [(h["key"], None if h["value"] is None else bytes(h["value"])) for h in row["headers"]] == [
        ("v", b"\x00" * 7 + b"\x05"), ("v", None)]
    assert row["_size"] == 2 + 1 + 1 + 8 + 1


def test_a_batch_that_fails_mid_write_lands_not_at_all(spark, warehouse):
    topic = Topic(spark, warehouse, spec(1))
    produce(topic, records(topic, [{"key": "a", "value": "1", "timestamp": 0}]), 0)
    before = topic.partition(0).snapshot()

    @F.udf("string")
    def explode_on_the_last(value):
        if value == "boom":
            raise ValueError("a task failed half way through the batch")
        return value

    frame = spark.createDataFrame([("k1", "1", 0), ("k2", "boom", 0)], "key string, value string, timestamp long")
    frame = frame.withColumn("value", explode_on_the_last("value"))
    with pytest.raises(Exception):
        produce_frame(topic, frame, 0)
    after = topic.partition(0).snapshot()
    assert after.version == before.version and after.state.log_end_offset == 1


def test_produce_frame_partitions_like_kafka_and_checks_in_spark(spark, warehouse):
    topic = Topic(spark, warehouse, spec(3))
    frame = spark.createDataFrame([(k, "1", 0) for k in ("a", "b", "c", "order-42")],
                                  "key string, value string, timestamp long")
    results = produce_frame(topic, frame, 0)
    assert {r.partition: r.count for r in results} == {0: 1, 1: 2, 2: 1}
    assert [r["key"] for r in topic.partition(1).read().orderBy("offset").collect()] == ["a", "c"]
    bad = spark.createDataFrame([("a", "1", 0), (None, "1", 0)], "key string, value string, timestamp long")
    with pytest.raises(RecordError, match="without a key"):
        produce_frame(topic, bad, 0)
    assert sum(log.snapshot().state.log_end_offset for log in topic.partitions()) == 4


def test_produce_frame_holds_its_frame_uncompressed_and_leaves_the_session_s_setting(spark, warehouse):
    # produce_frame persists the frame with Spark's columnar cache uncompressed (a setting
    # Spark takes at persist time); the session's own setting, set or not, is left as it was,
    # also when the checks refuse the frame.
    from framework.clients.produce import HELD_FRAME_SETTINGS

    [(name, held)] = HELD_FRAME_SETTINGS.items()
    assert (name, held) == ("spark.sql.inMemoryColumnarStorage.compressed", "false")
    topic = Topic(spark, warehouse, spec(2))
    good = spark.createDataFrame([("a", "1", 0), ("b", "2", 0)], "key string, value string, timestamp long")
    bad = spark.createDataFrame([(None, "1", 0)], "key string, value string, timestamp long")
    for own in (None, "true"):
        if own is not None:
            spark.conf.set(name, own)
        try:
            produce_frame(topic, good, 0)
            with pytest.raises(RecordError):
                produce_frame(topic, bad, 0)
            assert spark.conf.get(name, None) == own
        finally:
            spark.conf.unset(name)
    assert sum(log.snapshot().state.log_end_offset for log in topic.partitions()) == 4


def test_produce_frame_keeps_the_frames_order_in_every_partition(spark, warehouse):
    # Many Spark partitions, and Arrow batches smaller than them (the partitioner and the
    # numbering carry on from batch to batch), binary keys, some records with an explicit
    # partition: each partition gets its records in the frame's order at offsets 0..n-1,
    # each where Kafka's partitioner (or the record) puts it.
    topic = Topic(spark, warehouse, spec(5, key_type="binary"))
    rows = [(f"key-{n % 700}".encode(), f"{n}", n, 4 if n % 11 == 0 else None) for n in range(5000)]
    frame = spark.createDataFrame(rows, "key binary, value string, timestamp long, partition int").repartition(7)
    frame = frame.orderBy("timestamp")  # the frame's order, across its Spark partitions
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "300")
    try:
        produce_frame(topic, frame, 0)
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    expected = {}
    for key, value, _ts, given in rows:
        expected.setdefault(given if given is not None else default_partition(key, 5), []).append(value)
    for partition, values in expected.items():
        got = topic.partition(partition).read().orderBy("offset").select("offset", "value").collect()
        assert [r["offset"] for r in got] == list(range(len(values)))
        assert [r["value"] for r in got] == values, partition


@pytest.mark.parametrize("table", ["created first", "created by the first append"])
def test_concurrent_producers_never_share_an_offset(spark, warehouse, table):
    """Three producers append into one partition at once. When its table is not there yet,
    each first append's commit would create it: one wins version 0, the others conflict
    and append after it."""
    topic = Topic(spark, warehouse, spec(1))
    if table == "created first":
        topic.create()
    errors = []
    start = threading.Barrier(3)

    def producer(name):
        session = spark.newSession()  # the engine sets session confs: one session per thread
        mine = Topic(session, warehouse, topic.spec)
        start.wait()
        try:
            for batch in range(3):
                items = [{"key": f"{name}-{batch}-{i}", "value": name, "timestamp": 0, "partition": 0} for i in range(2)]
                produce(mine, parse_records(list(enumerate(items)), mine.spec, name), 0)
        except Exception as error:  # noqa: BLE001 - collected and asserted below
            errors.append(error)

    threads = [threading.Thread(target=producer, args=(f"p{n}",)) for n in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    rows = topic.partition(0).read().select("offset", "key").collect()
    assert sorted(r["offset"] for r in rows) == list(range(18))
    assert len({r["key"] for r in rows}) == 18
    assert topic.partition(0).snapshot().state.log_end_offset == 18
    declared = [v for v, actions in _commits(topic.partition(0).path).items() if "metaData" in actions]
    assert declared == [0]


def test_a_first_produce_whose_commit_another_creator_cleared_plans_again(spark, warehouse):
    """Of producers racing to create a partition table (as above), one that finds no commit
    clears the log folder as a killed create's (``delta_create.clear_uncommitted_log``), and
    with it the temporary commit file of another, which commits without the JVM (a new
    process's deferred session): a lost race, not an error. That producer plans again and
    appends after the winner."""
    from framework import faults
    from framework.deferred_session import DeferredSession
    from framework.log.delta_create import clear_uncommitted_log

    def records(name, count):
        return parse_records([(None, {"key": f"{name}{i}", "value": name, "timestamp": 0}) for i in range(count)],
                             topic.spec, name)

    writer = DeferredSession(lambda: spark)
    Path(warehouse.root).mkdir()  # a warehouse that is here: a table missing in it is missing, no JVM asked
    topic = Topic(writer, warehouse, spec(1))
    path = topic.partition(0).path
    raced = []

    def another_creator_first(point, context):
        if not raced:
            raced.append(clear_uncommitted_log(writer, path))
            raced.append([(r.base_offset, r.version) for r in produce(
                Topic(DeferredSession(lambda: spark), warehouse, topic.spec), records("other", 2), 0)])

    with faults.installed("own_commit.temporary_written", another_creator_first):
        ours = produce(topic, records("ours", 3), 0)
    assert raced == [True, [(0, 0)]] and [(r.base_offset, r.version) for r in ours] == [(2, 1)]
    assert not writer.started
    rows = Topic(spark, warehouse, topic.spec).partition(0).read().select("offset", "key").collect()
    assert sorted((r["offset"], r["key"]) for r in rows) == [
        (0, "other0"), (1, "other1"), (2, "ours0"), (3, "ours1"), (4, "ours2")]
    log = Path(path) / "_delta_log"
    assert not [p for p in log.iterdir() if p.name.endswith(".tmp")]
    assert len(list(Path(path).glob("_segment=*/*.parquet"))) == 2  # the loser's first file went


def _commits(path: str) -> dict[int, dict]:
    """Each commit file of the table at ``path`` by version: its :func:`_actions`."""
    return {int(commit.name.split(".")[0]): _actions(commit)
            for commit in sorted((Path(path) / "_delta_log").glob("*.json"))}


def test_a_first_append_creates_its_table_in_its_own_commit_as_a_create_then_the_append_would(
        spark, warehouse, tmp_path):
    """A producer's first append into a partition declares its table in the append's commit,
    version 0 (``PartitionLog._claimed_append``), where a create makes version 0 and the
    append version 1: the same schema, partitioning, properties, protocol and description,
    the same records, every column, and the same bookkeeping. The topic's partition that
    gets no record is created, as Kafka creates every partition of a topic."""
    from framework.log.warehouse import Warehouse

    topic_spec = spec(2, **{"min.compaction.lag.ms": 3_600_000, "delete.retention.ms": 1000})
    items = [{"key": f"k{i % 3}", "value": None if i == 4 else f"v{i}", "timestamp": 1000 + i, "partition": 0,
              "headers": {"h": str(i)}} for i in range(7)]
    fused = Topic(spark, warehouse, topic_spec)
    apart = Topic(spark, Warehouse.resolve(str(tmp_path / "apart")), topic_spec)
    assert apart.create() == {0: "created", 1: "created"}
    versions = {name: [r.version for r in produce(topic, records(topic, items), 5000)]
                for name, topic in (("fused", fused), ("apart", apart))}
    assert versions == {"fused": [0], "apart": [1]}

    by_append, by_create = _commits(fused.partition(0).path), _commits(apart.partition(0).path)
    assert list(by_append) == [0] and list(by_create) == [0, 1]
    assert by_append[0]["commitInfo"]["operation"] == "WRITE" and by_append[0]["adds"] == 1
    assert by_create[0]["commitInfo"]["operation"] == "CREATE TABLE" and by_create[0]["adds"] == 0

    def declared(metadata):
        return {k: v for k, v in metadata.items() if k not in ("id", "createdTime")}

    assert declared(by_append[0]["metaData"]) == declared(by_create[0]["metaData"])
    assert by_append[0]["protocol"] == by_create[0]["protocol"]
    # the same offset claim (SetTransaction; its time aside)
    claims = [{k: v for k, v in commit["txn"].items() if k != "lastUpdated"} for commit in (by_append[0], by_create[1])]
    assert claims[0] == claims[1] == {"appId": "topiclake.append", "version": 1}
    assert set(by_append[0]) == {"commitInfo", "metaData", "protocol", "add", "adds", "txn"}

    def rows(topic):
        return [tuple(r) for r in topic.partition(0).read().orderBy("offset").collect()]

    assert rows(fused) == rows(apart) and len(rows(fused)) == 7
    assert fused.partition(0).snapshot().state == apart.partition(0).snapshot().state
    # the partition that got no record: an empty table, created as a create makes it
    assert _commits(fused.partition(1).path)[0]["commitInfo"]["operation"] == "CREATE TABLE"
    assert fused.partition(1).snapshot().state == apart.partition(1).snapshot().state


def test_tables_created_side_by_side_keep_the_defaults_the_caller_set_at_run_time(spark, warehouse):
    """A new topic's empty tables are created four at a time, each thread through a child
    session; a table default a notebook set with ``spark.conf.set`` (here Delta's deletion
    vectors) must hold in every one of them, as it does for a table created one at a time."""
    key = "spark.databricks.delta.properties.defaults.enableDeletionVectors"
    spark.conf.set(key, "true")
    try:
        topic = Topic(spark, warehouse, spec(6))
        topic.ensure()
    finally:
        spark.conf.unset(key)
    found = {log.partition: log.properties().get("delta.enableDeletionVectors") for log in topic.partitions()}
    assert found == {p: "true" for p in range(6)}


def test_the_size_column_is_the_contract_s_record_size(spark, warehouse):
    """``_size`` (``table_layout.RECORD_SIZE_SQL``, computed in Spark at every append) is
    CONTRACT section 4's size, as the reference model counts it: UTF-8 bytes of key and
    value, and of every header's name and value; nothing for a NULL."""
    import sys
    from types import SimpleNamespace

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from reference_model import record_size

    corpus = [
        ("k", "v", []),
        (None, "vé", [("h", b"12")]),                       # two-byte UTF-8; a NULL key counts 0
        ("ké€", None, [("h", None), ("hh", b"")]),          # a tombstone; a header without a value
        (None, None, [("名前", b"\x00\x01\x02"), ("h", b"x")]),
        ("", "", []),
    ]
    topic = Topic(spark, warehouse, spec(1, **{"cleanup.policy": "delete"}))
    topic.create()
    frame = spark.createDataFrame([(k, v, 1_700_000_000_000 + i, [(n, bytearray(h) if h is not None else None)
                                                                  for n, h in hs], 0)
                                   for i, (k, v, hs) in enumerate(corpus)],
                                  "key string, value string, timestamp bigint, "
                                  "headers array<struct<key:string,value:binary>>, partition int")
    produce_frame(topic, frame, 1_700_000_000_000)
    sizes = dict(topic.partition(0).read().select("offset", "_size").collect())
    wanted = {offset: record_size(SimpleNamespace(key=k, value=v, headers=hs))
              for offset, (k, v, hs) in enumerate(corpus)}
    assert sizes == wanted and wanted[3] == 6 + 3 + 1 + 1
