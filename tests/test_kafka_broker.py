"""The real Kafka broker the tests use as a referee (tests/support/kafka_broker.py), checked on
its own: produce and consume round-trip exactly, and Kafka's own cleaner compacts a topic the
way the other tests will rely on. Spark-free; one broker JVM for the session."""

from __future__ import annotations

import time
import uuid

import pytest

pytestmark = pytest.mark.slow


def _topic(prefix: str) -> str:
    # one broker serves the whole session: every test gets topics of its own
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_broker_is_up_on_loopback(kafka_broker):
    host, port = kafka_broker.bootstrap_servers.split(":")
    assert host == "127.0.0.1" and int(port) > 0
    assert kafka_broker.pid > 0
    assert kafka_broker.log_dirs.is_dir()
    assert (kafka_broker.log_dirs / "meta.properties").is_file()  # formatted by StorageTool


def test_produce_and_consume_round_trip(kafka_broker):
    topic = _topic("roundtrip")
    kafka_broker.create_topic(topic, 2, {})
    records = [
        {"key": "a", "value": "1", "partition": 0, "headers": [("h1", b"x"), ("h2", b"\x00\xff")]},
        {"key": "b", "value": "2", "partition": 0, "timestamp_ms": 1_700_000_000_123},
        {"key": None, "value": "no key", "partition": 0},
        {"key": "a", "value": None, "partition": 0, "headers": [("op", b"delete")]},  # tombstone
        {"key": "c", "value": "3", "partition": 1},
        {"key": "b", "value": "", "partition": 0},  # empty, not a tombstone
    ]
    before_ms = int(time.time() * 1000) - 1
    assigned = kafka_broker.produce(topic, records)
    assert assigned == [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0), (0, 4)]

    got = kafka_broker.consume_all(topic, 0)
    p0 = [r for r in records if r["partition"] == 0]
    assert [r["offset"] for r in got] == list(range(len(p0)))
    assert [r["key"] for r in got] == [r["key"] for r in p0]
    assert [r["value"] for r in got] == [r["value"] for r in p0]
    assert [r["headers"] for r in got] == [r.get("headers", []) for r in p0]
    assert got[1]["timestamp_ms"] == 1_700_000_000_123
    assert got[0]["timestamp_ms"] >= before_ms  # CreateTime defaults to now

    assert [(r["offset"], r["key"], r["value"]) for r in kafka_broker.consume_all(topic, 1)] == [
        (0, "c", "3")]


def test_consume_all_of_an_empty_partition(kafka_broker):
    topic = _topic("empty")
    kafka_broker.create_topic(topic, 1, {})
    assert kafka_broker.consume_all(topic, 0) == []


def test_delete_records_moves_the_log_start(kafka_broker):
    topic = _topic("deleterecords")
    kafka_broker.create_topic(topic, 1, {})
    kafka_broker.produce(topic, [{"key": f"k{i}", "value": str(i), "partition": 0} for i in range(5)])
    assert kafka_broker.delete_records(topic, 0, 3) == 3
    assert [r["offset"] for r in kafka_broker.consume_all(topic, 0)] == [3, 4]


def test_kafka_cleaner_compacts_to_the_last_offset_of_each_key(kafka_broker):
    topic = _topic("compacted")
    kafka_broker.create_topic(topic, 1, {
        "cleanup.policy": "compact",
        "segment.ms": "1000",
        "min.cleanable.dirty.ratio": "0.01",
        "delete.retention.ms": "100",
    })
    keys = [f"k{i % 5}" for i in range(30)]
    assigned = kafka_broker.produce(topic, [
        {"key": k, "value": f"v{i}", "partition": 0} for i, k in enumerate(keys)])
    assert [o for _, o in assigned] == list(range(30))
    # Nothing to clean while all of it is the active segment.
    with pytest.raises(ValueError, match="only its active segment"):
        kafka_broker.wait_cleaned(topic, 0)

    # Past segment.ms, one more append rolls the segment; the old one becomes cleanable.
    time.sleep(1.2)
    [(_, new_offset)] = kafka_broker.produce(topic, [{"key": "new", "value": "n", "partition": 0}])
    assert new_offset == 30
    assert kafka_broker.wait_cleaned(topic, 0, timeout=60) == 30

    got = kafka_broker.consume_all(topic, 0)
    assert [(r["offset"], r["key"], r["value"]) for r in got] == [
        (25, "k0", "v25"), (26, "k1", "v26"), (27, "k2", "v27"), (28, "k3", "v28"),
        (29, "k4", "v29"), (30, "new", "n")]
