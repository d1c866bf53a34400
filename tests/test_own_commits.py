"""A blind append committed without a JVM (framework/log/own_commits.py) is the commit Delta
makes of the same rows: the same actions and checksum, read back by Delta and delta-rs,
carried on by Delta's next commit; of two writers racing for a version each commits once;
and a table it cannot append to as Delta would is left to Delta, with nothing written.
Likewise a replace of a small table's rows, a produce's claimed append into a partition
table, and a partition table's first commit (a create, or a produce's first append)."""

from __future__ import annotations

import glob
import inspect
import json
import os

import pytest

from framework.clients.produce import produce
from framework.clients.records import parse_records
from framework.deferred_session import DeferredSession, not_started
from framework.local_rows import arrow_rows
from framework.log import commit_files, own_checkpoints, own_commits, version_checksum
from framework.log.commit_log import local_commits
from framework.log.consumer_offsets import ConsumerOffsets
from framework.log.history import HistoryRow, MaintenanceHistory, history_schema
from framework.log.local_append import appended_locally
from framework.log.topic import Topic
from framework.log.warehouse import Warehouse, delta_table_sql
from framework.spec import parse_spec
from tests.support.delta_readers import delta_rs_query


def _rows(run: str, count: int = 3) -> list[tuple]:
    return [HistoryRow(run_id=run, run_started_ms=1_000 + i, now_ms=2_000, topic="t", partition=i, stage="compact",
                       reasons=["dirty_ratio"], dirty_ratio=0.25 * i, message=None if i else "not due").as_tuple()
            for i in range(count)]


def _history(spark, root) -> str:
    """A maintenance history with one run's rows, made and appended through Delta."""
    history = MaintenanceHistory(spark, Warehouse.resolve(str(root)))
    history.append([HistoryRow(*row) for row in _rows("first")])
    return history.path


@pytest.fixture(autouse=True)
def started_sessions_commit_through_delta(monkeypatch):
    """The commits these tests pin topiclake's own to are Delta's: here a started session's
    (``spark``'s) creates go through Delta's transaction API, as they did before stop 104
    made them topiclake's own with the session up too (``tests/test_tables.py`` pins that
    way to Delta's builder and transaction as well); its produces go there anyway. A
    deferred session's are topiclake's own. (``claimed`` passes ``spark`` by position.)"""
    real = own_commits.created
    signature = inspect.signature(real)

    def refusing_started(*args, **options):
        spark = signature.bind(*args, **options).arguments.get("spark")
        return None if spark is not None and not not_started(spark) else real(*args, **options)

    monkeypatch.setattr(own_commits, "created", refusing_started)


def _commit(path: str, version: int) -> list[dict]:
    with open(os.path.join(path, "_delta_log", f"{version:020d}.json")) as handle:
        return [json.loads(line) for line in handle]


def _files(path: str) -> set[str]:
    return {os.path.relpath(p, path) for p in glob.glob(os.path.join(path, "**"), recursive=True)
            if os.path.isfile(p)}


#: What differs between two tables' commits of the same rows however they are made.
_OWN = {"path", "modificationTime", "deletionTimestamp", "tags", "txnId", "timestamp", "engineInfo",
        "operationMetrics", "id",
        "createdTime", "pathOrInlineDv"}


def _same_shape(value):
    """``value`` without what each table or commit has of its own (``_OWN``)."""
    if isinstance(value, dict):
        return {k: _same_shape(v) for k, v in value.items() if k not in _OWN}
    if isinstance(value, list):
        return sorted((_same_shape(v) for v in value), key=json.dumps)
    return value


def test_a_blind_append_commits_what_delta_commits_for_the_same_rows(spark, tmp_path):
    by_delta, by_topiclake = _history(spark, tmp_path / "a"), _history(spark, tmp_path / "b")
    rows = _rows("second")
    assert appended_locally(spark, by_delta, rows, history_schema()) == 2
    assert own_commits.appended(by_topiclake, arrow_rows(rows, history_schema())) == 2

    ours, theirs = _commit(by_topiclake, 2), _commit(by_delta, 2)
    assert "Delta-Lake" in theirs[0]["commitInfo"]["engineInfo"]  # the pin is Delta's
    assert _same_shape(ours) == _same_shape(theirs)
    assert ours[0]["commitInfo"]["operationMetrics"] == {"numFiles": "1", "numOutputRows": "3",
                                                         "numOutputBytes": str(ours[1]["add"]["size"])}
    checksums = [version_checksum.checksum(path, 2) for path in (by_topiclake, by_delta)]
    assert None not in checksums and _same_shape(checksums[0]) == _same_shape(checksums[1])
    assert checksums[0]["txnId"] == ours[0]["commitInfo"]["txnId"]  # so the local reads trust it

    # Delta and delta-rs read it, and Delta's next commit carries the checksum on
    def read(path):
        return sorted(tuple(r) for r in spark.read.format("delta").load(path).drop("run_started_ms").collect())

    assert read(by_topiclake) == read(by_delta) and len(read(by_topiclake)) == 6
    assert sorted(r["run_id"] for r in delta_rs_query(by_topiclake, "run_id")) == ["first"] * 3 + ["second"] * 3
    for path in (by_topiclake, by_delta):
        assert appended_locally(spark, path, _rows("third"), history_schema()) == 3
    detail = spark.sql(f"DESCRIBE DETAIL {delta_table_sql(by_topiclake)}").first()
    checksum = version_checksum.checksum(by_topiclake, 3)
    assert (checksum["numFiles"], checksum["tableSizeBytes"]) == (detail["numFiles"], detail["sizeInBytes"]) == (3, (
        sum(os.path.getsize(p) for p in glob.glob(os.path.join(by_topiclake, "*.parquet")))))
    assert _same_shape(checksum) == _same_shape(version_checksum.checksum(by_delta, 3))
    assert read(by_topiclake) == read(by_delta)


def test_an_append_without_a_jvm_goes_this_way_only_while_no_session_started(spark, tmp_path):
    path = _history(spark, tmp_path)
    deferred = DeferredSession(lambda: spark)
    assert appended_locally(deferred, path, _rows("second"), history_schema()) == 2
    assert not deferred.started and "no JVM" in _commit(path, 2)[0]["commitInfo"]["engineInfo"]
    assert appended_locally(spark, path, _rows("third"), history_schema()) == 3
    assert "Delta-Lake" in _commit(path, 3)[0]["commitInfo"]["engineInfo"]


def test_two_writers_racing_for_a_version_each_commit_once(spark, tmp_path, monkeypatch):
    path = _history(spark, tmp_path)
    put = commit_files.put_if_absent
    raced = []

    def another_writer_first(folder, version, text):
        if not raced:  # the other writer takes this version between our read and our commit
            raced.append(None)
            raced[0] = own_commits.appended(path, arrow_rows(_rows("other"), history_schema()))
        return put(folder, version, text)

    monkeypatch.setattr(commit_files, "put_if_absent", another_writer_first)
    assert own_commits.appended(path, arrow_rows(_rows("ours"), history_schema())) == 3
    assert raced == [2] and [c.version for c in local_commits(path)] == [3, 2, 1, 0]
    assert _commit(path, 3)[0]["commitInfo"]["readVersion"] == 2
    runs = [r["run_id"] for r in spark.read.format("delta").load(path).select("run_id").collect()]
    assert sorted(runs) == ["first"] * 3 + ["other"] * 3 + ["ours"] * 3
    listed = version_checksum.plain_files(path, 3)
    assert listed is not None and len(listed.paths) == 3  # each checksum carried the other's file


@pytest.mark.parametrize("case", ["a checkpoint is due, no delta-rs to write it", "a table feature", "no checksum",
                                  "rows of another shape"])
def test_a_table_it_cannot_append_to_as_delta_would_is_left_to_delta(spark, tmp_path, case, monkeypatch):
    path = _history(spark, tmp_path)
    table = delta_table_sql(path)
    if case.startswith("a checkpoint is due"):  # version 2 would be one (tests/test_own_checkpoints.py: with delta-rs)
        spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('delta.checkpointInterval' = '3')")
        monkeypatch.setattr(own_checkpoints, "available", lambda: False)
    elif case == "a table feature":  # one an append does not meet as Delta's writer does
        spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('delta.enableTypeWidening' = 'true')")
    elif case == "no checksum":
        os.remove(os.path.join(path, "_delta_log", f"{local_commits(path, 1)[0].version:020d}.crc"))
    rows = arrow_rows(_rows("second"), history_schema())
    if case == "rows of another shape":
        rows = rows.drop_columns(["message"])
    before = _files(path)
    assert own_commits.appended(path, rows) is None
    assert _files(path) == before


def test_a_crash_between_the_commit_and_its_checksum_leaves_a_version_delta_reads_and_goes_on_from(
        spark, tmp_path, monkeypatch):
    path = _history(spark, tmp_path)

    def killed(*args):
        raise KeyboardInterrupt("killed after the commit file")

    monkeypatch.setattr(commit_files, "write_checksum", killed)
    with pytest.raises(KeyboardInterrupt):
        own_commits.appended(path, arrow_rows(_rows("second"), history_schema()))
    monkeypatch.undo()
    assert [c.version for c in local_commits(path)] == [2, 1, 0] and version_checksum.checksum(path, 2) is None
    assert own_commits.appended(path, arrow_rows(_rows("third"), history_schema())) is None  # Delta's way next
    assert appended_locally(spark, path, _rows("third"), history_schema()) == 3
    runs = sorted(r["run_id"] for r in spark.read.format("delta").load(path).select("run_id").collect())
    assert runs == ["first"] * 3 + ["second"] * 3 + ["third"] * 3
    listed = version_checksum.plain_files(path, 3)
    assert listed is not None and len(listed.paths) == 3  # Delta wrote the next checksum whole


def _offsets(spark, root, commits: list[tuple]) -> ConsumerOffsets:
    """Committed offsets made and upserted through Delta."""
    offsets = ConsumerOffsets(spark, Warehouse.resolve(str(root)))
    for commit in commits:
        offsets.commit(*commit)
    return offsets


def _upsert(group: str, offset: int):
    """The replacement of a committed-offsets table's rows that ``commit-offset`` makes."""
    import pyarrow as pa
    import pyarrow.compute as pc

    def replace(rows):
        others = rows.filter(~((pc.field("group") == group) & (pc.field("topic") == "t")
                               & (pc.field("partition") == 0)))
        new = pa.table({"group": [group], "topic": ["t"], "partition": [0], "offset": [offset],
                        "commit_timestamp": pa.array([0], pa.timestamp("ms", tz="UTC"))})
        return pa.concat_tables([others, new.cast(rows.schema)])

    return replace


def _replacement(replace):
    from framework.log.consumer_offsets import offsets_schema
    from framework.log.local_append import _replacement

    return lambda files: _replacement(files, offsets_schema(), replace)


def test_a_replace_commits_what_delta_commits_for_the_same_rows(spark, tmp_path):
    from framework.log.consumer_offsets import offsets_schema
    from framework.log.local_append import replaced_locally

    first = [("g", "t", 0, 5), ("h", "t", 0, 7)]
    by_delta, by_topiclake = (_offsets(spark, tmp_path / side, first).path for side in ("a", "b"))
    version = local_commits(by_delta, 1)[0].version
    assert replaced_locally(spark, by_delta, _upsert("g", 9), offsets_schema())
    assert own_commits.replaced(by_topiclake, _replacement(_upsert("g", 9))) == version + 1

    ours, theirs = _commit(by_topiclake, version + 1), _commit(by_delta, version + 1)
    assert "Delta-Lake" in theirs[0]["commitInfo"]["engineInfo"]  # the pin is Delta's
    assert _same_shape(ours) == _same_shape(theirs)
    metrics = [{k: str(v) for k, v in commit[0]["commitInfo"]["operationMetrics"].items() if "Bytes" not in k}
               for commit in (ours, theirs)]
    assert metrics[0] == metrics[1] == {"numFiles": "1", "numOutputRows": "2", "numRemovedFiles": "1"}
    checksums = [version_checksum.checksum(path, version + 1) for path in (by_topiclake, by_delta)]
    assert None not in checksums and _same_shape(checksums[0]) == _same_shape(checksums[1])

    def read(path):
        return sorted((r["group"], r["offset"]) for r in spark.read.format("delta").load(path).collect())

    assert read(by_topiclake) == read(by_delta) == [("g", 9), ("h", 7)]
    assert sorted(r["offset"] for r in delta_rs_query(by_topiclake, '"offset"')) == [7, 9]
    for path in (by_topiclake, by_delta):  # Delta's next commit carries the checksum on
        assert replaced_locally(spark, path, _upsert("k", 1), offsets_schema())
    assert _same_shape(version_checksum.checksum(by_topiclake, version + 2)) == _same_shape(
        version_checksum.checksum(by_delta, version + 2))
    assert read(by_topiclake) == read(by_delta) == [("g", 9), ("h", 7), ("k", 1)]


def test_a_replace_that_loses_its_version_starts_again_from_the_winner_s_rows(spark, tmp_path, monkeypatch):
    path = _offsets(spark, tmp_path, [("g", "t", 0, 5)]).path
    version = local_commits(path, 1)[0].version
    put = commit_files.put_if_absent
    raced = []

    def another_writer_first(folder, at, text):
        if not raced:
            raced.append(None)
            raced[0] = own_commits.replaced(path, _replacement(_upsert("other", 3)))
        return put(folder, at, text)

    monkeypatch.setattr(commit_files, "put_if_absent", another_writer_first)
    assert own_commits.replaced(path, _replacement(_upsert("ours", 4))) == version + 2
    assert raced == [version + 1]
    rows = sorted((r["group"], r["offset"]) for r in spark.read.format("delta").load(path).collect())
    assert rows == [("g", 5), ("other", 3), ("ours", 4)]
    assert len(glob.glob(os.path.join(path, "*.parquet"))) == 3  # the loser's first file went again
    assert version_checksum.plain_files(path, version + 2).paths == (
        os.path.join(path, _commit(path, version + 2)[1]["add"]["path"]),)


def test_a_file_system_without_hard_links_leaves_the_commit_to_delta(spark, tmp_path, monkeypatch):
    path = _history(spark, tmp_path)
    before = _files(path)

    def refused(source, target):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(commit_files.os, "link", refused)
    assert own_commits.appended(path, arrow_rows(_rows("second"), history_schema())) is None
    assert own_commits.replaced(path, lambda files: arrow_rows(_rows("second"), history_schema())) is None
    assert _files(path) == before
    new = _topic(spark, tmp_path / "w").partition(0)  # nor is a new table's log folder left for Delta's create
    assert own_commits.created(new.path, new.definition(), "{}") is None
    assert not os.path.exists(os.path.join(new.path, "_delta_log"))


# -------------------------------------------------------------- a produce into a partition table
NOW = 5_000


def _topic(spark, root) -> Topic:
    """A one-partition compacted topic (a partition table: change data feed, append-only,
    ``_segment`` partitions, statistics columns of its own)."""
    spec = parse_spec({"topic": "t", "partitions": 1, "config": {"cleanup.policy": "compact"}}, "t.yaml")
    return Topic(spark, Warehouse.resolve(str(root)), spec)


def _records(topic: Topic, batch: str, count: int = 3) -> list:
    raws = [{"key": f"k{i % 2}", "value": None if i == 2 else f"{batch}.{i}", "timestamp": 1_000 + i,
             "headers": {"h": batch}} for i in range(count)]
    return parse_records([(None, raw) for raw in raws], topic.spec, "t")


def _produced_shape(commit: list[dict]) -> list:
    """A produce's commit without what each produce has of its own (its producer id, its claim's time)."""
    actions = []
    for action in commit:
        if "commitInfo" in action:
            own = json.loads(action["commitInfo"]["userMetadata"])
            own["topiclake"].pop("producer_id")
            action = {"commitInfo": {**action["commitInfo"], "userMetadata": own}}
        if "txn" in action:
            action = {"txn": {k: v for k, v in action["txn"].items() if k != "lastUpdated"}}
        actions.append(action)
    return _same_shape(actions)


def _checksum_shape(path: str, version: int):
    checksum = version_checksum.checksum(path, version)
    assert checksum is not None
    return _same_shape({**checksum, "setTransactions": [
        {k: v for k, v in t.items() if k != "lastUpdated"} for t in checksum["setTransactions"]]})


def _read_records(spark, path: str) -> list[tuple]:
    return sorted(tuple(r) for r in spark.read.format("delta").load(path).drop("_segment").collect())


@pytest.mark.parametrize("vectors", [False, True], ids=["plain", "deletion vectors"])
def test_a_produce_without_a_jvm_commits_what_delta_commits_for_the_same_records(spark, tmp_path, vectors):
    """With deletion vectors on (the owner's opt-in) and a record deleted by one, the
    append's files say their bounds are tight, and the checksum carries the vectors' counts
    on, as Delta's append does."""
    by_delta, by_topiclake = _topic(spark, tmp_path / "a"), _topic(spark, tmp_path / "b")
    for topic in (by_delta, by_topiclake):
        produce(topic, _records(topic, "first"), NOW)  # creates the table, through Delta
        if vectors:
            table = delta_table_sql(topic.partition(0).path)
            spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
            spark.sql(f"DELETE FROM {table} WHERE offset = 1")
    path, twin = by_topiclake.partition(0).path, by_delta.partition(0).path
    version = local_commits(path, 1)[0].version + 1
    deferred = DeferredSession(lambda: spark)
    assert [r.version for r in produce(by_delta, _records(by_delta, "second"), NOW)] == [version]
    ours = produce(_topic(deferred, tmp_path / "b"), _records(by_topiclake, "second"), NOW)
    assert [(r.base_offset, r.count, r.version) for r in ours] == [(3, 3, version)] and not deferred.started
    assert "no JVM" in _commit(path, version)[0]["commitInfo"]["engineInfo"]
    assert "Delta-Lake" in _commit(twin, version)[0]["commitInfo"]["engineInfo"]  # the pin is Delta's
    assert _produced_shape(_commit(path, version)) == _produced_shape(_commit(twin, version))
    assert _checksum_shape(path, version) == _checksum_shape(twin, version)
    if vectors:
        [add] = [a["add"] for a in _commit(path, version) if "add" in a]
        assert json.loads(add["stats"])["tightBounds"] is True
        assert version_checksum.checksum(path, version)["numDeletedRecordsOpt"] == 1
    assert _read_records(spark, path) == _read_records(spark, twin)
    assert sorted(r["offset"] for r in delta_rs_query(path, '"offset"')) == [o for o in range(6) if not (
        vectors and o == 1)]
    assert by_topiclake.partition(0).snapshot().state == by_delta.partition(0).snapshot().state
    for topic in (by_topiclake, by_delta):  # Delta's next commit carries the checksum on
        produce(topic, _records(topic, "third"), NOW)
    assert _checksum_shape(path, version + 1) == _checksum_shape(twin, version + 1)
    assert _read_records(spark, path) == _read_records(spark, twin)


def test_a_produce_past_the_files_a_checksum_lists_carries_the_checksum_on_as_delta_does(
        spark, tmp_path, monkeypatch):
    """Past ``ALL_FILES_THRESHOLD`` files Delta's checksum stops listing them; an append then
    carries the counts and the histogram on without the list (the threshold made small here,
    in Delta's session and in the module alike)."""
    threshold = "spark.databricks.delta.allFilesInCrc.thresholdNumFiles"
    monkeypatch.setattr(own_commits, "ALL_FILES_THRESHOLD", 2)
    spark.conf.set(threshold, "2")
    try:
        by_delta, by_topiclake = _topic(spark, tmp_path / "a"), _topic(spark, tmp_path / "b")
        for topic in (by_delta, by_topiclake):
            for batch in ("first", "second"):
                produce(topic, _records(topic, batch), NOW)
        path, twin = by_topiclake.partition(0).path, by_delta.partition(0).path
        listed = version_checksum.checksum(path, 1)
        assert len(listed["allFiles"]) == 2 and not own_commits.committable(listed, 1, append=True)
        for topic in (by_delta, by_topiclake):  # the third file: Delta's checksum lists none
            produce(topic, _records(topic, "third"), NOW)
        assert "allFiles" not in version_checksum.checksum(path, 2)
        produce(by_delta, _records(by_delta, "fourth"), NOW)
        deferred = DeferredSession(lambda: spark)
        assert [r.version for r in produce(_topic(deferred, tmp_path / "b"), _records(by_topiclake, "fourth"),
                                           NOW)] == [3]
        assert not deferred.started
        assert _checksum_shape(path, 3) == _checksum_shape(twin, 3)
        assert version_checksum.checksum(path, 3)["numFiles"] == 4
    finally:
        spark.conf.unset(threshold)
    assert _read_records(spark, path) == _read_records(spark, twin)


def test_a_produce_that_loses_its_version_plans_again_after_the_winner(spark, tmp_path, monkeypatch):
    topic = _topic(spark, tmp_path)
    produce(topic, _records(topic, "first"), NOW)
    path = topic.partition(0).path
    put = commit_files.put_if_absent
    raced = []

    def another_producer_first(folder, version, text):
        if not raced:  # another producer commits between this one's plan and its commit
            raced.append(None)
            raced[0] = [(r.base_offset, r.version) for r in produce(
                _topic(DeferredSession(lambda: spark), tmp_path), _records(topic, "other", 2), NOW)]
        return put(folder, version, text)

    monkeypatch.setattr(commit_files, "put_if_absent", another_producer_first)
    deferred = DeferredSession(lambda: spark)
    ours = produce(_topic(deferred, tmp_path), _records(topic, "ours"), NOW)
    assert raced == [[(3, 1)]] and [(r.base_offset, r.version) for r in ours] == [(5, 2)]
    assert not deferred.started  # planned again and committed, all without a JVM
    offsets = sorted(r["offset"] for r in delta_rs_query(path, '"offset"'))
    assert offsets == list(range(8))
    assert len(glob.glob(os.path.join(path, "_segment=0", "*.parquet"))) == 3  # the loser's file went


def test_a_claim_already_taken_or_a_feature_an_append_cannot_meet_writes_nothing(spark, tmp_path):
    topic = _topic(spark, tmp_path)
    produce(topic, _records(topic, "first"), NOW)  # claims base offset 0 + 1
    path = topic.partition(0).path
    assert own_commits.claimed(path, None, "topiclake.append", 1, "{}") == own_commits.CLAIM_TAKEN
    spark.sql(f"ALTER TABLE {delta_table_sql(path)} SET TBLPROPERTIES ('delta.enableTypeWidening' = 'true')")
    before = _files(path)
    assert own_commits.claimed(path, None, "topiclake.append", 9, "{}") is None
    assert _files(path) == before


# -------------------------------------------------------------- a partition table's first commit
def _created_shape(commit: list[dict]) -> list:
    """A table's first commit without what each has of its own; its properties as a mapping
    (Delta writes them in its map's order)."""
    actions = []
    for action in commit:
        if "commitInfo" in action:
            info = dict(action["commitInfo"])
            parameters = dict(info["operationParameters"])
            if "properties" in parameters:
                parameters["properties"] = json.loads(parameters["properties"])
            info["operationParameters"] = parameters
            action = {"commitInfo": info}
        actions.append(action)
    return _produced_shape(actions) if any("txn" in a for a in commit) else _same_shape(actions)


def test_a_create_without_a_jvm_commits_what_delta_commits_for_the_same_table(spark, tmp_path):
    by_delta = _topic(spark, tmp_path / "a").partition(0)
    deferred = DeferredSession(lambda: spark)
    (tmp_path / "b").mkdir()  # a warehouse that is here: a table missing in it is missing (Warehouse.has_table)
    by_topiclake = _topic(deferred, tmp_path / "b").partition(0)
    assert by_delta.create() and by_topiclake.create() and not deferred.started
    assert not by_topiclake.create()  # there already
    assert "no JVM" in _commit(by_topiclake.path, 0)[0]["commitInfo"]["engineInfo"]
    assert "Delta-Lake" in _commit(by_delta.path, 0)[0]["commitInfo"]["engineInfo"]  # the pin is Delta's
    assert _created_shape(_commit(by_topiclake.path, 0)) == _created_shape(_commit(by_delta.path, 0))
    assert _checksum_shape(by_topiclake.path, 0) == _checksum_shape(by_delta.path, 0)
    assert sorted(os.listdir(os.path.join(by_topiclake.path, "_delta_log"))) == sorted(
        os.listdir(os.path.join(by_delta.path, "_delta_log")))
    detail = [spark.sql(f"DESCRIBE DETAIL {delta_table_sql(log.path)}").first().asDict() for log in (by_topiclake,
                                                                                                    by_delta)]
    assert [{k: v for k, v in d.items() if k not in ("id", "location", "createdAt", "lastModified")}
            for d in detail][0] == [{k: v for k, v in d.items() if k not in ("id", "location", "createdAt",
                                                                              "lastModified")} for d in detail][1]
    assert by_topiclake.snapshot().state == by_delta.snapshot().state
    for topic in (_topic(spark, tmp_path / "a"), _topic(spark, tmp_path / "b")):  # Delta carries the checksum on
        produce(topic, _records(topic, "first"), NOW)
    assert _checksum_shape(by_topiclake.path, 1) == _checksum_shape(by_delta.path, 1)
    assert _read_records(spark, by_topiclake.path) == _read_records(spark, by_delta.path)


def test_an_own_table_is_created_without_a_jvm_as_delta_creates_it(spark, tmp_path):
    """topiclake's own tables (here the committed offsets', by a first ``commit-offset``) get
    the same first commit: their properties, auto compaction among them (a setting, not a
    table feature), give Delta's plain protocol, as Delta's create derives it."""
    deferred = DeferredSession(lambda: spark)
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    by_delta = ConsumerOffsets(spark, Warehouse.resolve(str(tmp_path / "a")))
    by_topiclake = ConsumerOffsets(deferred, Warehouse.resolve(str(tmp_path / "b")))
    for offsets in (by_delta, by_topiclake):
        offsets.commit("g", "t", 0, 5)
    assert not deferred.started
    path, twin = by_topiclake.path, by_delta.path
    assert "no JVM" in _commit(path, 0)[0]["commitInfo"]["engineInfo"]
    assert "Delta-Lake" in _commit(twin, 0)[0]["commitInfo"]["engineInfo"]  # the pin is Delta's
    assert _created_shape(_commit(path, 0)) == _created_shape(_commit(twin, 0))
    assert _checksum_shape(path, 0) == _checksum_shape(twin, 0)
    assert sorted(os.listdir(os.path.join(path, "_delta_log"))) == sorted(os.listdir(os.path.join(twin, "_delta_log")))
    detail = [{k: v for k, v in spark.sql(f"DESCRIBE DETAIL {delta_table_sql(p)}").first().asDict().items()
               if k not in ("id", "location", "createdAt", "lastModified")} for p in (path, twin)]
    assert detail[0] == detail[1] and detail[0]["minWriterVersion"] == 2, detail
    assert by_topiclake.committed("t", 0) == by_delta.committed("t", 0) == {"g": 5}


def test_a_first_produce_without_a_jvm_creates_its_table_as_delta_does(spark, tmp_path):
    by_delta = _topic(spark, tmp_path / "a")
    deferred = DeferredSession(lambda: spark)
    (tmp_path / "b").mkdir()
    by_topiclake = _topic(deferred, tmp_path / "b")
    assert [r.version for r in produce(by_delta, _records(by_delta, "first"), NOW)] == [0]
    assert [r.version for r in produce(by_topiclake, _records(by_topiclake, "first"), NOW)] == [0]
    assert not deferred.started
    path, twin = by_topiclake.partition(0).path, by_delta.partition(0).path
    assert "Delta-Lake" in _commit(twin, 0)[0]["commitInfo"]["engineInfo"]  # the pin is Delta's
    assert _created_shape(_commit(path, 0)) == _created_shape(_commit(twin, 0))
    assert _checksum_shape(path, 0) == _checksum_shape(twin, 0)
    assert _read_records(spark, path) == _read_records(spark, twin)
    assert sorted(r["offset"] for r in delta_rs_query(path, '"offset"')) == [0, 1, 2]
    assert by_topiclake.partition(0).snapshot().state == by_delta.partition(0).snapshot().state
    for topic in (_topic(spark, tmp_path / "a"), _topic(spark, tmp_path / "b")):
        produce(topic, _records(topic, "second"), NOW)
    assert _checksum_shape(path, 1) == _checksum_shape(twin, 1)
    assert _read_records(spark, path) == _read_records(spark, twin)


def test_a_session_that_may_give_new_tables_defaults_leaves_the_create_to_delta(spark, tmp_path, monkeypatch):
    """A table property default in Spark's own configuration is applied by Delta's create
    only: with one named there, no table is created without the session."""
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "spark-defaults.conf").write_text(
        "spark.databricks.delta.properties.defaults.enableDeletionVectors true\n")
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path / "conf"))
    log = _topic(spark, tmp_path / "w").partition(0)
    assert own_commits.spark_may_default_new_tables()
    assert own_commits.created(log.path, log.definition(), "{}") is None
    assert not os.path.exists(log.path)
    monkeypatch.delenv("SPARK_CONF_DIR")
    assert not own_commits.spark_may_default_new_tables()
    assert own_commits.new_table_protocol({**log.definition().properties, "delta.appendOnly": "true"}) is None


def test_a_killed_create_s_folder_is_cleared_and_the_table_made_without_a_jvm(spark, tmp_path):
    log = _topic(DeferredSession(lambda: spark), tmp_path).partition(0)
    killed = os.path.join(log.path, "_delta_log")
    os.makedirs(os.path.join(killed, "_staged_commits"))
    with open(os.path.join(killed, ".00000000000000000000.json.8f1c2b7e.tmp"), "w") as handle:
        handle.write('{"commitInfo":{')
    assert log.create() and not log.spark.started
    assert sorted(os.listdir(killed)) == ["00000000000000000000.crc", "00000000000000000000.json", "_staged_commits"]
    assert spark.read.format("delta").load(log.path).count() == 0


def test_temporary_files_a_killed_commit_left_are_deleted_by_the_next_vacuum_once_an_hour_old(spark, tmp_path,
                                                                                              monkeypatch):
    """A writer killed between writing its commit's temporary file and removing it (topiclake's
    own commit, or Delta's log store) leaves the file in ``_delta_log``; Delta never removes
    it. The vacuum stage of a partition, and the own tables' vacuum, delete such files once
    they are an hour old (a commit holds one for milliseconds), and nothing else."""
    import time

    from framework.log.abandoned_temporaries import ABANDONED_AFTER_MS
    from framework.log.warehouse import vacuum_own_tables
    from framework.stages.maintenance import Maintenance

    warehouse = Warehouse.resolve(str(tmp_path / "wh"))
    # topiclake's own commit of the history, its temporary file left where a kill leaves it
    history = _history(spark, tmp_path / "wh")
    monkeypatch.setattr(commit_files.os, "unlink", lambda path: None)
    assert own_commits.appended(history, arrow_rows(_rows("second"), history_schema())) == 2
    monkeypatch.undo()
    own_left = [n for n in os.listdir(os.path.join(history, "_delta_log")) if n.endswith(".tmp")]
    assert len(own_left) == 1, own_left  # the commit's (its checksum's was renamed into place)

    spec = parse_spec({"topic": "t", "partitions": 1, "config": {"cleanup.policy": "delete", "retention.ms": -1}},
                      "t.yaml")
    topic = Topic(spark, warehouse, spec)
    produce(topic, parse_records([(None, {"key": "k", "value": "v", "timestamp": 0})], spec, "t"), 1_000)
    log = topic.partition(0)
    delta_log = os.path.join(log.path, "_delta_log")
    planted = _plant_temporaries(delta_log)
    hour_ago = time.time() - ABANDONED_AFTER_MS / 1000 - 60
    for name in own_left:
        os.utime(os.path.join(history, "_delta_log", name), (hour_ago, hour_ago))
    version = log.snapshot().version

    run = Maintenance(spark, warehouse, [spec], record_history=False).run(1_000, stages=("vacuum",))
    stage = run.partitions[0].rows[0]
    assert "abandoned commit temporary files deleted 3" in stage.message, stage.message
    left = {n for n in os.listdir(delta_log) if n.startswith(".")}
    assert left == {name for name, old in planted.items() if not old}
    assert log.snapshot().version == version and log.read().count() == 1
    vacuum_own_tables(spark, warehouse)
    assert not [n for n in os.listdir(os.path.join(history, "_delta_log")) if n.endswith(".tmp")]
    assert [r["run_id"] for r in delta_rs_query(history, "run_id")].count("second") == 3


def _plant_temporaries(delta_log: str) -> dict[str, bool]:
    """Files in ``delta_log`` named as Delta's log store names a commit, a checksum and a
    checkpoint on their way, an hour and a minute old, beside a young one and a dot file
    that is not a commit's; each name, and whether it is abandoned."""
    import time
    import uuid

    from framework.log.abandoned_temporaries import ABANDONED_AFTER_MS

    planted = {f".{0:020d}.json.{uuid.uuid4()}.tmp": True, f".{0:020d}.crc.{uuid.uuid4()}.tmp": True,
               f".{0:020d}.checkpoint.parquet.{uuid.uuid4()}.tmp": True,
               f".{1:020d}.json.{uuid.uuid4()}.tmp": False,  # young: maybe a commit in flight
               ".notes.tmp": False}  # not a commit's
    hour_ago = time.time() - ABANDONED_AFTER_MS / 1000 - 60
    for name, old in planted.items():
        with open(os.path.join(delta_log, name), "w") as handle:
            handle.write("{}")
        if old:
            os.utime(os.path.join(delta_log, name), (hour_ago, hour_ago))
    return planted


def test_temporary_files_of_a_table_elsewhere_are_deleted_through_hadoops_file_system(spark, tmp_path):
    """A table on HDFS or Azure storage (Delta's rename-based log stores) gets the same sweep
    through Hadoop's file system, by the same rule: here a local table reached through
    Hadoop's (as a ``file:`` URI and as a plain path), so the two listings are held to the
    same answer on the same files."""
    import time

    from framework.log.abandoned_temporaries import (
        ABANDONED_AFTER_MS,
        delete_abandoned,
        delete_abandoned_through_hadoop,
    )

    spec = parse_spec({"topic": "t", "partitions": 1, "config": {"cleanup.policy": "delete", "retention.ms": -1}},
                      "t.yaml")
    topic = Topic(spark, Warehouse.resolve(str(tmp_path / "wh")), spec)
    produce(topic, parse_records([(None, {"key": "k", "value": "v", "timestamp": 0})], spec, "t"), 1_000)
    log = topic.partition(0)
    delta_log = os.path.join(log.path, "_delta_log")
    now = int(time.time() * 1000)
    for path in (f"file://{log.path}", log.path):
        planted = _plant_temporaries(delta_log)
        assert delete_abandoned_through_hadoop(spark, path, now) == 3
        assert {n for n in os.listdir(delta_log) if n.startswith(".")} == {n for n, old in planted.items() if not old}
        assert delete_abandoned_through_hadoop(spark, path, now) == 0  # nothing old is left
        for name in (n for n, old in planted.items() if not old):
            os.remove(os.path.join(delta_log, name))
    # the local listing, on the same files, gives the same answer; and it also finds the
    # staging files of delta-rs's checkpoint writes (only local tables' commits have them)
    planted = _plant_temporaries(delta_log)
    staged = {name: os.path.join(delta_log, name) for name in (f"{0:020d}.checkpoint.parquet#1", "_last_checkpoint#1")}
    for file in staged.values():
        with open(file, "w") as handle:
            handle.write("{}")
        os.utime(file, ((now - ABANDONED_AFTER_MS) / 1000 - 60,) * 2)
    assert delete_abandoned(log.path, now) == 5
    assert {n for n in os.listdir(delta_log) if n.startswith(".")} == {n for n, old in planted.items() if not old}
    assert not [name for name in staged if os.path.exists(staged[name])]
    assert log.snapshot().version == 0 and log.read().count() == 1
    # a table not there yet: nothing to list, nothing deleted
    assert delete_abandoned_through_hadoop(spark, str(tmp_path / "none"), now) == 0
