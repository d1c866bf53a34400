"""A large data file's key index (framework/log/key_index.py) and the compaction that looks
its dirty keys up in it (framework/stages/arrow_actions.py).

A lookup is pinned to Arrow's ``is_in`` over the file's keys on keys chosen to be hard (the
empty key, keys that differ only by trailing zero bytes, repeated keys, keys longer than the
file's), with real hashes and with hashes that all collide. An index is used only for the
file it was built from, and the vacuum stage deletes those of vacuumed files. The decision
made through the index is pinned, run after run on a table with deletion vectors, to the
decision made by reading every key."""

from __future__ import annotations

import os
import random

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from framework.clients.produce import produce
from framework.clients.records import parse_records
from framework.log import key_index
from framework.log.topic import Topic
from framework.log.warehouse import Warehouse, delta_table_sql
from framework.spec import parse_spec
from framework.stages import arrow_actions, compaction
from tests.support.delta_readers import delta_rs_query

NOW = 1_767_225_600_000
DAY_MS = 86_400_000
HARD_KEYS = ["", "a", "a\x00", "a\x00\x00", "\x00", "key-1", "key-10", "ключ", "🔑", "x" * 40, "k" * 200]


def _file(folder, name="part-0.parquet", size=100) -> str:
    """A data file's path in ``folder`` (its contents are not read by the index)."""
    path = os.path.join(folder, "_segment=0", name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(b"\x00" * size)
    return path


@pytest.mark.parametrize("seed", range(6))
def test_a_lookup_finds_exactly_the_rows_of_the_keys(tmp_path, seed):
    generator = random.Random(seed)
    pool = HARD_KEYS + [f"key-{generator.randrange(10_000)}" for _ in range(300)]
    keys = pa.array([generator.choice(pool) for _ in range(2_000)], pa.string())  # (keys repeat)
    offsets = pa.array(np.arange(2_000, dtype=np.int64) * 3 + seed)
    data_file = _file(str(tmp_path))
    assert key_index.build(str(tmp_path), data_file, 100, keys, offsets)
    index = key_index.load(str(tmp_path), data_file, 100, 2_000)
    assert index is not None
    wanted = pc.unique(pa.array(generator.sample(pool, 60) + ["absent", "a\x00\x00\x00", "k" * 300], pa.string()))
    rows = index.rows_of(wanted)
    assert rows.tolist() == np.flatnonzero(pc.is_in(keys, value_set=wanted).to_numpy(zero_copy_only=False)).tolist()
    assert index.keys_at(rows).equals(keys.take(pa.array(rows)))
    assert index.offsets_at(rows).tolist() == offsets.take(pa.array(rows)).to_pylist()
    assert index.rows_of(pa.array([], pa.string())).tolist() == []


def test_binary_keys_come_back_binary(tmp_path):
    keys = pa.array([b"\xff\x00", b"\xff", b"", b"\x00\xff"], pa.binary())
    data_file = _file(str(tmp_path))
    assert key_index.build(str(tmp_path), data_file, 100, keys, pa.array([5, 6, 7, 8], pa.int64()))
    index = key_index.load(str(tmp_path), data_file, 100, 4)
    rows = index.rows_of(pa.array([b"\xff", b"\x00\xff", b"\xfe"], pa.binary()))
    assert rows.tolist() == [1, 3]
    assert index.keys_at(rows).equals(pa.array([b"\xff", b"\x00\xff"], pa.binary()))


def test_a_hash_only_proposes_rows_the_key_bytes_decide(tmp_path, monkeypatch):
    """Every key hashed alike: each wanted key is compared with every row, and only the rows
    of equal bytes are found."""
    monkeypatch.setattr(key_index, "_hashes", lambda padded: np.zeros(len(padded), np.uint64))
    keys = pa.array(HARD_KEYS * 3, pa.string())
    data_file = _file(str(tmp_path))
    assert key_index.build(str(tmp_path), data_file, 100, keys, pa.array(range(len(keys)), pa.int64()))
    index = key_index.load(str(tmp_path), data_file, 100, len(keys))
    for chosen in (["a"], ["a\x00"], ["", "\x00"], ["ключ", "absent"]):
        wanted = pa.array(chosen, pa.string())
        assert index.rows_of(wanted).tolist() == [i for i, key in enumerate(keys.to_pylist()) if key in chosen]


def test_what_an_index_cannot_hold_is_not_built(tmp_path):
    data_file = _file(str(tmp_path))
    for keys in (pa.array(["a", None], pa.string()), pa.array(["a", "x" * (key_index.MAX_KEY_BYTES + 1)]),
                 pa.array(["a", "b"], pa.large_string()), pa.array([1, 2], pa.int64())):
        assert not key_index.build(str(tmp_path), data_file, 100, keys, pa.array([1, 2], pa.int64()))
    assert not key_index.build(str(tmp_path), data_file, None, pa.array(["a", "b"]), pa.array([1, 2], pa.int64()))
    assert not os.path.exists(key_index.path_of(str(tmp_path), data_file))


def test_an_index_answers_only_for_the_file_it_was_built_from(tmp_path):
    data_file = _file(str(tmp_path))
    assert key_index.build(str(tmp_path), data_file, 100, pa.array(["a", "b"]), pa.array([1, 2], pa.int64()))
    assert key_index.load(str(tmp_path), data_file, 100, 2) is not None
    assert key_index.load(str(tmp_path), data_file, 101, 2) is None  # another file's size
    assert key_index.load(str(tmp_path), data_file, 100, 3) is None  # another file's records
    assert key_index.load(str(tmp_path), data_file, 100, None) is None  # the statistics say nothing
    assert key_index.load(str(tmp_path), _file(str(tmp_path), "part-1.parquet"), 100, 2) is None  # none built
    target = key_index.path_of(str(tmp_path), data_file)
    whole = open(target, "rb").read()
    with open(target, "wb") as handle:  # torn
        handle.write(whole[: len(whole) // 2])
    assert key_index.load(str(tmp_path), data_file, 100, 2) is None


def test_a_sweep_deletes_the_indexes_of_files_gone_and_abandoned_temporaries(tmp_path):
    table = str(tmp_path)
    kept, gone = _file(table, "kept.parquet"), _file(table, "gone.parquet")
    for data_file in (kept, gone):
        assert key_index.build(table, data_file, 100, pa.array(["a"]), pa.array([1], pa.int64()))
    os.remove(gone)
    folder = os.path.dirname(key_index.path_of(table, kept))
    abandoned, under_way = os.path.join(folder, "x.keys.1.tmp"), os.path.join(folder, "y.keys.2.tmp")
    for path in (abandoned, under_way):
        open(path, "wb").close()
    hour_ago = NOW / 1000 - 3_601
    os.utime(abandoned, (hour_ago, hour_ago))
    os.utime(under_way, (NOW / 1000, NOW / 1000))
    assert key_index.sweep(table, NOW, 0) == 2  # (no table there: its properties unknown, indexes kept)
    assert sorted(os.listdir(folder)) == sorted([os.path.basename(key_index.path_of(table, kept)), "y.keys.2.tmp"])


def test_only_false_turns_the_indexes_off():
    assert key_index.turned_on(None) and key_index.turned_on({}) and key_index.turned_on({"other": "false"})
    assert key_index.turned_on({key_index.PROPERTY: "true"})
    assert not key_index.turned_on({key_index.PROPERTY: "false"})
    assert not key_index.turned_on({key_index.PROPERTY: "FALSE"})


# ------------------------------------------- the compaction's decision through the index
SPEC = {"topic": "indexed", "partitions": 1,
        "config": {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": 0.0, "delete.retention.ms": DAY_MS}}


def _produce(topic, first: int, count: int, keys: int, tombstones: bool = True) -> None:
    import base64

    def key(n: int):  # a binary topic's keys end in zero bytes and are not UTF-8
        if topic.spec.key_type == "binary":
            return {"base64": base64.b64encode(b"\xff" + bytes([n % 256, n // 256]) + b"\x00" * (n % 3)).decode()}
        return f"k{n}"

    raw = [(i, {"key": key((first + i) * 7 % keys),
                "value": None if tombstones and (first + i) % 9 == 0 else f"v{first + i}",
                "timestamp": NOW - DAY_MS + first + i, "headers": {}}) for i in range(count)]
    produce(topic, parse_records(raw, topic.spec, "test"), NOW)


def _vector_topic(spark, folder, key_type: str = "string"):
    """A one-partition topic whose owner turned deletion vectors on."""
    topic = Topic(spark, Warehouse.resolve(str(folder)), parse_spec({**SPEC, "key": {"type": key_type}}, "test"))
    topic.create()
    spark.sql(f"ALTER TABLE {delta_table_sql(topic.partition(0).path)} SET TBLPROPERTIES "
              "('delta.enableDeletionVectors' = 'true')")
    return topic


def _with_a_clean_file(topic):
    """``topic``'s partition compacted once (its first file now clean), then fresh updates."""
    log = topic.partition(0)
    _produce(topic, 0, 60, 20)
    assert compaction.execute(log, compaction.plan(log, NOW, force=True)).committed
    _produce(topic, 60, 20, 20)
    return log


def _indexes(log) -> list[str]:
    return [os.path.join(folder, name) for folder, _, names in os.walk(os.path.join(log.path, key_index.FOLDER))
            for name in names]


def _decided_both_ways(log, monkeypatch):
    """The compaction's actions as planned now, decided through the key indexes (every file
    indexed) and by reading every key (none)."""
    planned = compaction.plan(log, NOW + 2 * DAY_MS, force=True)
    end = planned.measure.first_uncleanable_offset
    with monkeypatch.context() as patched:
        patched.setattr(key_index, "MIN_ROWS", 10**12)
        read = arrow_actions.decided(log, planned, end)
    looked_up = arrow_actions.decided(log, planned, end, build_indexes=True)
    order = [("_file", "ascending"), ("_row", "ascending")]
    return looked_up.sort_by(order), read.sort_by(order)


@pytest.mark.parametrize("key_type", ["string", "binary"])
def test_a_decision_through_the_key_index_is_the_decision_made_by_reading_every_key(spark, tmp_path, monkeypatch,
                                                                                   key_type):
    """Every file indexed (the size floor lowered): on a table with deletion vectors on,
    the first run builds each clean file's index as it reads the file, and each run after
    it looks the dirty keys up; at every run the actions are those decided by reading every
    key, and the table keeps what it keeps without the index."""
    monkeypatch.setattr(key_index, "MIN_ROWS", 1)
    lookups = []
    shipped = key_index.KeyIndex.rows_of
    monkeypatch.setattr(key_index.KeyIndex, "rows_of", lambda self, wanted: lookups.append(len(wanted))
                        or shipped(self, wanted))
    topics = {way: _vector_topic(spark, tmp_path / way, key_type) for way in ("indexed", "read")}
    indexed = topics["indexed"].partition(0)
    for run, (first, count, keys) in enumerate([(0, 80, 23), (80, 30, 23), (110, 40, 50), (150, 23, 23)]):
        for topic in topics.values():
            _produce(topic, first, count, keys)
        looked_up, read = _decided_both_ways(indexed, monkeypatch)
        assert looked_up.equals(read), f"run {run}"
        if run >= 2:  # (run 1 builds the indexes of the files run 0 left)
            assert looked_up.num_rows and lookups, f"run {run} looked nothing up"
        for way, topic in topics.items():
            with monkeypatch.context() as patched:
                if way == "read":
                    patched.setattr(key_index, "MIN_ROWS", 10**12)
                log = topic.partition(0)
                assert compaction.execute(log, compaction.plan(log, NOW + 2 * DAY_MS, force=True)).committed
        # (read by delta-rs, which applies the deletion vectors: milliseconds where Spark costs jobs)
        rows = {way: delta_rs_query(topic.partition(0).path) for way, topic in topics.items()}
        assert rows["indexed"] == rows["read"], f"run {run}"
    assert _indexes(indexed) and not _indexes(topics["read"].partition(0))


def test_a_plan_writes_no_index_a_run_does(spark, tmp_path, monkeypatch):
    """``topiclake plan`` decides as the run does, through the indexes it finds, and builds
    none: only the run writes into the table's folder."""
    from framework.log.consumer_offsets import ConsumerOffsets
    from framework.stages.planning import plan_partition

    monkeypatch.setattr(key_index, "MIN_ROWS", 1)
    topic = _vector_topic(spark, tmp_path / "w")
    log = _with_a_clean_file(topic)
    planned = plan_partition(log, NOW + 2 * DAY_MS, ConsumerOffsets(spark, topic.warehouse), force=True)
    assert planned.compaction_would_remove and not _indexes(log)
    assert compaction.execute(log, compaction.plan(log, NOW + 2 * DAY_MS, force=True)).committed
    assert _indexes(log)


def test_a_wrong_index_is_caught_by_the_parity(spark, tmp_path, monkeypatch):
    """The pin above fails when the index lies: offsets shifted in every index."""
    monkeypatch.setattr(key_index, "MIN_ROWS", 1)
    log = _with_a_clean_file(_vector_topic(spark, tmp_path / "w"))
    _decided_both_ways(log, monkeypatch)  # builds the indexes
    shipped = key_index.KeyIndex.offsets_at
    monkeypatch.setattr(key_index.KeyIndex, "offsets_at", lambda self, rows: shipped(self, rows) + 1)
    looked_up, read = _decided_both_ways(log, monkeypatch)
    assert not looked_up.equals(read)


def test_the_vacuum_stage_sweeps_the_indexes_of_vacuumed_files(spark, tmp_path, monkeypatch):
    from framework.stages.vacuum import vacuum

    monkeypatch.setattr(key_index, "MIN_ROWS", 1)
    log = _with_a_clean_file(_vector_topic(spark, tmp_path / "w"))
    compaction.execute(log, compaction.plan(log, NOW, force=True))  # indexes the clean file
    indexes = _indexes(log)
    assert indexes
    spark.sql(f"OPTIMIZE {delta_table_sql(log.path)}")  # its files replaced by one
    spark.sql(f"REORG TABLE {delta_table_sql(log.path)} APPLY (PURGE)")
    vacuum(log, requested_ms=0, unsafe=True)
    left = _indexes(log)
    assert all(os.path.exists(os.path.join(log.path, os.path.relpath(index, os.path.join(
        log.path, key_index.FOLDER))[: -len(".keys")])) for index in left)
    assert set(indexes) - set(left), "nothing swept"


@pytest.mark.parametrize("key_type", ["string", "binary"])
def test_the_check_reads_through_the_index_what_it_reads_from_the_columns(spark, tmp_path, key_type):
    """``arrow_scope``'s reads of a file's records in scope and of the rows a deletion vector
    deleted, through the file's key index and from its columns, on the same rows: the same
    records."""
    from pyroaring import BitMap64

    from framework.checks import arrow_scope
    from framework.log import local_records

    topic = _vector_topic(spark, tmp_path / "w", key_type)
    _produce(topic, 0, 400, 97, tombstones=False)  # (the deleted rows' values then not read)
    log = topic.partition(0)
    data_file = next(os.path.join(folder, name) for folder, _, names in os.walk(log.path)
                     for name in names if name.endswith(".parquet") and "_delta_log" not in folder)
    read = local_records.file_columns(data_file, ["key", "offset"])
    assert key_index.build(log.path, data_file, 1, read["key"], read["offset"])
    index = key_index.load(log.path, data_file, 1, read.num_rows)
    generator = random.Random(5)
    for _ in range(4):
        keys = pc.unique(read["key"].take(pa.array(generator.sample(range(read.num_rows), 30))))
        low, high = sorted(generator.sample(range(400), 2))
        hidden = BitMap64(generator.sample(range(read.num_rows), 50))

        def by_offset(offset, low=low, high=high):
            return pc.or_(pc.less(offset, low), pc.greater_equal(offset, high))

        looked_up = arrow_scope._in_scope(data_file, by_offset, keys, hidden, index)
        assert looked_up.equals(arrow_scope._in_scope(data_file, by_offset, keys, hidden))
        assert looked_up.num_rows and looked_up.num_rows != read.num_rows
        picked = np.array(sorted(hidden), np.int64)
        parquet = local_records.opened(data_file)
        made = pa.array([], pa.int64())
        through = arrow_scope._deleted_rows_at(parquet, picked, made, index)
        assert through.equals(arrow_scope._deleted_rows_at(parquet, picked, made)) and through.num_rows == 50


def test_an_owner_turns_the_indexes_off_and_the_next_vacuum_deletes_them(spark, tmp_path, monkeypatch):
    """A maintain with the indexes on reads them (the decision and its check) and keeps
    them; with ``topiclake.keyIndexes`` false, none is read or built, the run's checks pass,
    and its vacuum deletes every index; turned on again, the next run builds them again."""
    from framework.stages.maintenance import Maintenance

    monkeypatch.setattr(key_index, "MIN_ROWS", 1)
    loaded = []
    shipped = key_index.load
    monkeypatch.setattr(key_index, "load", lambda *args: loaded.append(args[1]) or shipped(*args))
    topic = _vector_topic(spark, tmp_path / "w")
    log = _with_a_clean_file(topic)
    maintenance = Maintenance(spark, topic.warehouse, [topic.spec], record_history=False)
    runs = iter(range(1, 10))

    def maintained(switch: str | None):
        if switch is not None:
            spark.sql(f"ALTER TABLE {delta_table_sql(log.path)} "
                      f"SET TBLPROPERTIES ('{key_index.PROPERTY}' = '{switch}')")
        _produce(topic, 100 * next(runs), 20, 20)
        loaded.clear()
        assert not maintenance.run(NOW + 2 * DAY_MS, force=True).failed
        return list(loaded), _indexes(log)

    maintained(None)  # builds the clean file's index
    read, kept = maintained(None)
    assert read and kept, "the indexes on: read and kept"
    read, kept = maintained("False")
    assert not read and not kept, "the indexes off: not read, and deleted"
    maintained("true")
    assert _indexes(log), "on again: built again"
