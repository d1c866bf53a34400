"""Ingest from a real Kafka broker (KRaft, loopback): Kafka's offsets, exactly once, gaps.

Every test here talks to the session's broker (``kafka_broker`` in conftest.py) and reads
with Spark's real Kafka source; records are produced with Kafka's own client.
"""

from __future__ import annotations

import json
import os
import runpy
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import yaml

from framework.cli.main import main
from framework.log.partition_log import PartitionLog
from framework.log.warehouse import Warehouse
from framework.spec import load_spec
from framework.stages import compaction
from tests.reference_model import ModelTopic
from tests.support.delta_readers import delta_rs_query

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def write_spec(folder: Path, topic: str, partitions: int, config: dict, source: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{topic}.yaml"
    path.write_text(yaml.safe_dump({"topic": topic, "partitions": partitions, "config": config,
                                    "source": {"kafka": source}}, sort_keys=False))
    return path


def table_records(spark, warehouse: Path, spec_path: Path, partition: int) -> list[dict]:
    """A partition table's records in offset order, read by delta-rs (an independent Delta
    reader: milliseconds, where a Spark query costs two jobs)."""
    log = PartitionLog(spark, Warehouse.resolve(str(warehouse)), load_spec(spec_path), partition)
    rows = delta_rs_query(log.path, '"offset", "timestamp", "key", "value", "headers"')
    return [{"offset": r["offset"], "timestamp_ms": (r["timestamp"] - EPOCH) // timedelta(milliseconds=1),
             "key": r["key"], "value": r["value"], "headers": [(h["key"], h["value"]) for h in r["headers"]]}
            for r in rows]


def kafka_records(broker, topic: str, partition: int) -> list[dict]:
    return [{"offset": r["offset"], "timestamp_ms": r["timestamp_ms"], "key": r["key"], "value": r["value"],
             "headers": [(k, v) for k, v in r["headers"] or []]} for r in broker.consume_all(topic, partition)]


def versions(spark, warehouse: Path, spec_path: Path) -> list[int]:
    spec = load_spec(spec_path)
    return [PartitionLog(spark, Warehouse.resolve(str(warehouse)), spec, p).snapshot().version
            for p in range(spec.partitions)]


def cli(warehouse: Path, specs: Path, *args: str) -> int:
    return main(["--warehouse", str(warehouse), "--specs", str(specs), *args])


#: Topics whose records carry old timestamps keep them: Kafka's time retention would
#: otherwise delete those records before they are read.
KEEP = {"retention.ms": "-1"}


@pytest.fixture
def kafka_topic(kafka_broker):
    """A fresh Kafka topic name per test (the broker is shared by the session)."""
    return f"t-{uuid.uuid4().hex[:10]}"


def test_ingest_keeps_kafka_records_and_is_idempotent(spark, kafka_broker, kafka_topic, tmp_path, monkeypatch, capsys):
    kafka_broker.create_topic(kafka_topic, 2, KEEP)
    first = [{"key": f"k{i % 3}", "value": None if i % 4 == 3 else f"v{i}", "partition": i % 2,
              "headers": [("trace", f"t{i}".encode()), ("trace", b"again")] if i % 2 else [],
              "timestamp_ms": 1_700_000_000_000 + i} for i in range(12)]
    kafka_broker.produce(kafka_topic, first)
    monkeypatch.setenv("TEST_KAFKA_BOOTSTRAP", kafka_broker.bootstrap_servers)
    specs = tmp_path / "specs"
    spec = write_spec(specs, "orders", 2, {"cleanup.policy": "compact"},
                      {"bootstrap.servers": "${TEST_KAFKA_BOOTSTRAP}", "topic": kafka_topic})
    warehouse = tmp_path / "warehouse"

    assert cli(warehouse, specs, "ingest") == 0
    for p in range(2):
        got = table_records(spark, warehouse, spec, p)
        assert got == kafka_records(kafka_broker, kafka_topic, p)
        assert [r["offset"] for r in got] == list(range(6))
        assert any(r["value"] is None for r in got) and any(r["headers"] for r in got) or p == 0
    after_first = versions(spark, warehouse, spec)
    # each partition's table was created by its first append, in the same commit
    assert after_first == [0, 0]

    capsys.readouterr()
    assert cli(warehouse, specs, "ingest") == 0  # nothing new: no commit anywhere
    assert versions(spark, warehouse, spec) == after_first
    assert "nothing new" in capsys.readouterr().err
    # The job file (spark-submit, Databricks) is the same command.
    monkeypatch.setattr(sys, "argv", ["jobs/ingest.py", "--warehouse", str(warehouse), "--specs", str(specs)])
    with pytest.raises(SystemExit) as done:
        runpy.run_path(str(REPO / "jobs" / "ingest.py"), run_name="__main__")
    assert done.value.code == 0 and versions(spark, warehouse, spec) == after_first

    kafka_broker.produce(kafka_topic, [{"key": "k9", "value": "late", "partition": 1, "timestamp_ms": 1_700_000_001_000}])
    assert cli(warehouse, specs, "ingest") == 0
    now = versions(spark, warehouse, spec)
    assert now[0] == after_first[0] and now[1] == after_first[1] + 1
    assert table_records(spark, warehouse, spec, 1) == kafka_records(kafka_broker, kafka_topic, 1)
    # The log end offset is Kafka's last ingested offset + 1.
    log = PartitionLog(spark, Warehouse.resolve(str(warehouse)), load_spec(spec), 1)
    snapshot = log.snapshot()
    assert snapshot.state.log_end_offset == 7
    # Its two ingest commits measure the records (headers included) as a scan does.
    assert snapshot.past_checkpoint is not None and snapshot.past_checkpoint.records == 7
    now_ms = 1_700_000_002_000
    assert compaction.measure(log, snapshot, now_ms) == compaction.measure(
        log, replace(snapshot, past_checkpoint=None), now_ms)


def test_produce_is_refused_on_a_kafka_fed_topic(spark, kafka_broker, kafka_topic, tmp_path, capsys):
    specs = tmp_path / "specs"
    write_spec(specs, "fed", 1, {}, {"bootstrap.servers": kafka_broker.bootstrap_servers, "topic": kafka_topic})
    records = tmp_path / "in.jsonl"
    records.write_text('{"key": "a", "value": "b", "timestamp": 1}\n')
    assert cli(tmp_path / "w", specs, "produce", "--topic", "fed", "--input", str(records)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "produce is refused" in err[0] and "fed.yaml" in err[0]
    assert not (tmp_path / "w" / "fed-0").exists()


def test_a_first_ingest_creates_each_fed_table_with_its_records_and_the_others_empty(spark, kafka_broker,
                                                                                      kafka_topic, tmp_path):
    """As a producer's first append: a Kafka partition with records gets its table in the commit
    that appends them (version 0); one with none is created empty, as Kafka creates every
    partition of a topic."""
    kafka_broker.create_topic(kafka_topic, 2, KEEP)
    kafka_broker.produce(kafka_topic, [{"key": f"k{i}", "value": f"v{i}", "partition": 0,
                                        "timestamp_ms": 1_700_000_000_000 + i} for i in range(5)])
    specs = tmp_path / "specs"
    spec = write_spec(specs, "orders", 2, {"cleanup.policy": "compact"},
                      {"bootstrap.servers": kafka_broker.bootstrap_servers, "topic": kafka_topic})
    warehouse = tmp_path / "warehouse"
    assert cli(warehouse, specs, "ingest") == 0
    assert versions(spark, warehouse, spec) == [0, 0]
    assert table_records(spark, warehouse, spec, 0) == kafka_records(kafka_broker, kafka_topic, 0)
    assert table_records(spark, warehouse, spec, 1) == []
    first = [json.loads(line) for line in (warehouse / "orders-0" / "_delta_log" / f"{0:020d}.json").open()]
    assert any("metaData" in action for action in first) and any("add" in action for action in first)


@pytest.mark.parametrize("case", ["missing topic", "partition count", "unset variable", "unreachable", "no source"])
def test_ingest_refusals_name_the_field_and_write_nothing(spark, kafka_broker, kafka_topic, tmp_path, case, capsys):
    kafka_broker.create_topic(kafka_topic, 2, KEEP)
    source = {"bootstrap.servers": kafka_broker.bootstrap_servers, "topic": kafka_topic}
    partitions, expected = 2, None
    if case == "missing topic":
        source["topic"] = kafka_topic + "-nope"
        expected = f"source.kafka.topic: Kafka at {kafka_broker.bootstrap_servers} has no topic"
    elif case == "partition count":
        partitions, expected = 3, "partitions: the spec says 3 but Kafka topic"
    elif case == "unset variable":
        source["bootstrap.servers"] = "${TOPICLAKE_TEST_UNSET_VARIABLE}"
        expected = "source.kafka.bootstrap.servers: environment variable TOPICLAKE_TEST_UNSET_VARIABLE is not set"
    elif case == "unreachable":
        with __import__("socket").socket() as s:  # a loopback port nobody listens on
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        source["bootstrap.servers"] = f"127.0.0.1:{port}"
        source["options"] = {"kafka.default.api.timeout.ms": 3000}
        expected = f"source.kafka.bootstrap.servers: Kafka at 127.0.0.1:{port} did not answer within 3 s"
    specs = tmp_path / "specs"
    write_spec(specs, "orders", partitions, {}, source)
    args = ["ingest"]
    if case == "no source":
        (specs / "plain.yaml").write_text("topic: plain\npartitions: 1\n")
        args += ["--topic", "plain"]
        expected = "--topic: topic plain has no source.kafka"
    capsys.readouterr()
    assert cli(tmp_path / "w", specs, *args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and expected in err[0], err
    assert not (tmp_path / "w").exists()


@pytest.mark.parametrize("point", ["ingest.before_commit", "ingest.files_written", "ingest.after_commit"])
def test_ingest_killed_then_rerun_is_exact(spark, kafka_broker, kafka_topic, tmp_path, point):
    kafka_broker.create_topic(kafka_topic, 2, KEEP)
    kafka_broker.produce(kafka_topic, [{"key": f"k{i}", "value": f"v{i}", "partition": i % 2,
                                        "timestamp_ms": 1_700_000_000_000 + i} for i in range(40)])
    specs = tmp_path / "specs"
    spec = write_spec(specs, "orders", 2, {"cleanup.policy": "compact"},
                      {"bootstrap.servers": kafka_broker.bootstrap_servers, "topic": kafka_topic})
    warehouse = tmp_path / "warehouse"
    env = dict(os.environ, TOPICLAKE_FAULTS=point, PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-m", "framework.cli", "--warehouse", str(warehouse), "--specs",
                           str(specs), "ingest"], env=env, cwd=REPO, capture_output=True, text=True, timeout=240)
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]  # it died at the point
    # a table comes with its first append's commit, so a partition not appended to has none
    before = [table_records(spark, warehouse, spec, p) if (warehouse / f"orders-{p}" / "_delta_log").exists() else []
              for p in range(2)]
    if point == "ingest.after_commit":
        assert any(before), "the killed run committed one partition before dying"
    else:
        assert not any(before), "a run killed before its first commit appended records"
    # killed between them: a new table's data files in a folder with no Delta log yet
    uncommitted = [f for f in warehouse.glob("orders-*/_segment=*/*.parquet")
                   if not (f.parent.parent / "_delta_log").exists()]
    assert bool(uncommitted) == (point == "ingest.files_written"), uncommitted
    assert cli(warehouse, specs, "ingest") == 0
    for p in range(2):
        assert table_records(spark, warehouse, spec, p) == kafka_records(kafka_broker, kafka_topic, p)


def test_a_topic_kafka_already_compacted_keeps_its_gaps_and_maintains_exactly(spark, kafka_broker, kafka_topic,
                                                                              tmp_path):
    config = {"cleanup.policy": "compact", "segment.ms": "1000", "min.cleanable.dirty.ratio": "0.01",
              "delete.retention.ms": "600000"}
    kafka_broker.create_topic(kafka_topic, 1, config)
    base = int(time.time() * 1000)
    kafka_broker.produce(kafka_topic, [{"key": f"k{i % 5}", "value": None if i == 17 else f"v{i}", "partition": 0,
                                        "timestamp_ms": base + i} for i in range(30)])
    time.sleep(1.5)  # past segment.ms: the next record rolls the segment, so the cleaner may clean it
    kafka_broker.produce(kafka_topic, [{"key": "k0", "value": "roll", "partition": 0, "timestamp_ms": base + 2000}])
    kafka_broker.wait_cleaned(kafka_topic, 0)
    in_kafka = kafka_records(kafka_broker, kafka_topic, 0)
    offsets = [r["offset"] for r in in_kafka]
    assert offsets[-1] == 30 and len(offsets) < 31, "Kafka's cleaner left gaps"

    specs = tmp_path / "specs"
    spec_config = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": 0.01, "delete.retention.ms": 600000}
    spec = write_spec(specs, "cdc", 1, spec_config,
                      {"bootstrap.servers": kafka_broker.bootstrap_servers, "topic": kafka_topic})
    warehouse = tmp_path / "warehouse"
    assert cli(warehouse, specs, "ingest") == 0
    assert [r["offset"] for r in table_records(spark, warehouse, spec, 0)] == offsets
    # The ingest commit measures its records (Kafka's gaps between them) as a scan does.
    log = PartitionLog(spark, Warehouse.resolve(str(warehouse)), load_spec(spec), 0)
    snapshot = log.snapshot()
    assert snapshot.past_checkpoint is not None and snapshot.past_checkpoint.records == len(offsets)
    assert compaction.measure(log, snapshot, base + 60_000) == compaction.measure(
        log, replace(snapshot, past_checkpoint=None), base + 60_000)

    model = ModelTopic(1, spec_config)
    model.ingest(0, [{"offset": r["offset"], "timestamp": r["timestamp_ms"], "key": r["key"], "value": r["value"],
                      "headers": r["headers"]} for r in in_kafka], kafka_log_start=0)
    for now in (base + 60_000, base + 60_000 + 600_001):  # the second run is past the tombstone's horizon
        assert cli(warehouse, specs, "compact", "--now", str(now)) == 0
        model.maintain(now)
        assert [r["offset"] for r in table_records(spark, warehouse, spec, 0)] == model.offsets(0)
    state = PartitionLog(spark, Warehouse.resolve(str(warehouse)), load_spec(spec), 0).snapshot().state
    assert (state.log_start_offset, state.log_end_offset) == (model.log_start(0), model.end_offset(0)) == (0, 31)


def test_offsets_kafka_removed_before_they_were_ingested_are_an_error(spark, kafka_broker, kafka_topic, tmp_path,
                                                                      capsys):
    kafka_broker.create_topic(kafka_topic, 1, KEEP)
    batch = [{"key": f"k{i}", "value": f"v{i}", "partition": 0, "timestamp_ms": 1_700_000_000_000 + i}
             for i in range(10)]
    kafka_broker.produce(kafka_topic, batch)
    specs = tmp_path / "specs"
    spec = write_spec(specs, "orders", 1, {"cleanup.policy": "compact"},
                      {"bootstrap.servers": kafka_broker.bootstrap_servers, "topic": kafka_topic})
    warehouse = tmp_path / "warehouse"
    assert cli(warehouse, specs, "ingest") == 0
    kafka_broker.produce(kafka_topic, batch)  # offsets 10..19
    assert kafka_broker.delete_records(kafka_topic, 0, 15) == 15  # Kafka drops 10..14 before they are read
    before = versions(spark, warehouse, spec)
    capsys.readouterr()
    assert cli(warehouse, specs, "ingest") == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "offsets 10..14 were never ingested" in err[0], err
    assert versions(spark, warehouse, spec) == before
    assert [r["offset"] for r in table_records(spark, warehouse, spec, 0)] == list(range(10))


def test_offsets_with_gaps_through_commit_offset_delete_records_and_retention(spark, kafka_broker, kafka_topic,
                                                                              tmp_path):
    """Every verb that reasons about offsets, on Kafka's gapped offsets, against the model."""
    kafka_broker.create_topic(kafka_topic, 1, {"cleanup.policy": "compact", "segment.ms": "1000",
                                               "min.cleanable.dirty.ratio": "0.01"})
    base = int(time.time() * 1000)
    kafka_broker.produce(kafka_topic, [{"key": f"k{i % 4}", "value": f"v{i}", "partition": 0,
                                        "timestamp_ms": base + 1000 * i} for i in range(40)])
    time.sleep(1.5)
    kafka_broker.produce(kafka_topic, [{"key": "k9", "value": "roll", "partition": 0, "timestamp_ms": base + 50_000}])
    kafka_broker.wait_cleaned(kafka_topic, 0)
    in_kafka = kafka_records(kafka_broker, kafka_topic, 0)
    offsets = [r["offset"] for r in in_kafka]
    gaps = sorted(set(range(offsets[-1])) - set(offsets))
    assert len(gaps) > 10, offsets

    config = {"cleanup.policy": "compact,delete", "min.cleanable.dirty.ratio": 0.01, "retention.ms": 45_000,
              "consumed.retention.ms": 0, "consumed.retention.groups": ["billing"]}
    specs = tmp_path / "specs"
    spec = write_spec(specs, "gappy", 1, config, {"bootstrap.servers": kafka_broker.bootstrap_servers,
                                                   "topic": kafka_topic})
    warehouse = tmp_path / "warehouse"
    assert cli(warehouse, specs, "ingest") == 0
    model = ModelTopic(1, config)
    model.ingest(0, [{"offset": r["offset"], "timestamp": r["timestamp_ms"], "key": r["key"], "value": r["value"],
                      "headers": r["headers"]} for r in in_kafka], kafka_log_start=0)

    def same() -> None:
        assert [r["offset"] for r in table_records(spark, warehouse, spec, 0)] == model.offsets(0)
        state = PartitionLog(spark, Warehouse.resolve(str(warehouse)), load_spec(spec), 0).snapshot().state
        assert (state.log_start_offset, state.log_end_offset) == (model.log_start(0), model.end_offset(0))

    # A committed offset and a deleteRecords cut that both fall inside gaps.
    assert cli(warehouse, specs, "commit-offset", "--group", "billing", "--topic", "gappy", "--partition", "0",
               "--offset", str(gaps[-1])) == 0
    model.commit_offset("billing", 0, gaps[-1])
    assert cli(warehouse, specs, "delete-records", "--topic", "gappy", "--partition", "0",
               "--before-offset", str(gaps[3])) == 0
    model.delete_records(0, gaps[3])
    same()
    # Compaction, then time and consumed retention, at clocks that cut inside the gapped log.
    for now in (base + 60_000, base + 80_000):
        assert cli(warehouse, specs, "maintain", "--now", str(now)) == 0
        model.maintain(now)
        same()
