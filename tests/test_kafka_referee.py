"""Kafka's own log cleaner as the referee of topiclake's compaction (offset strategy).

The same random keyed records (several keys, tombstones, several rounds) go into a real
compacted Kafka topic whose cleaner runs within seconds, and, through ``topiclake ingest``,
into topiclake with the same settings. Each seed drives one partition: partitions are
independent logs in Kafka and in topiclake alike, so one topic of ``SEEDS_PER_TOPIC``
partitions is that many independent runs, cleaned and maintained side by side.

After Kafka's cleaner has cleaned every partition up to its active segment, topiclake
compacts (maintain's compaction stage, through the Python API; the Great Expectations
checks of those runs are left to the tests about them, which is half the time here) at a
later clock, and again past the tombstones' delete horizon (Kafka removes a
tombstone only in a cleaning after its horizon, KIP-534; topiclake's second run is that
cleaning). Then, per partition:

(a) the final key -> value state (a tombstone: the key is gone) is identical;
(b) every offset Kafka's cleaner removed, topiclake removed too (records are at least as
    compact as segments). Offsets Kafka still holds that topiclake removed are allowed
    only for a reason the KIPs give, which the test names and counts:
    - the active segment, which Kafka never cleans (topiclake's head is set by
      ``min.compaction.lag.ms``, here 0, KIP-58);
    - a tombstone Kafka's first pass kept and no later pass has removed yet (KIP-534).
"""

from __future__ import annotations

import random
import time
import uuid
from collections import Counter

import pytest
import yaml

from framework.cli.main import main
from framework.log.partition_log import PartitionLog
from framework.log.warehouse import Warehouse
from framework.spec import load_spec
from framework.stages.maintenance import Maintenance
from tests.support.delta_readers import delta_rs_query

pytestmark = pytest.mark.slow

#: 2 topics x 10 partitions: 20 seeds, each its own partition (its own log).
TOPICS = 2
SEEDS_PER_TOPIC = 10
ROUNDS = 3
DELETE_RETENTION_MS = 60_000
#: Kafka rolls a segment when a record arrives segment.ms after the segment's first record.
SEGMENT_MS = 1000


def _round(rng: random.Random, keys: int) -> list[tuple[str, str | None]]:
    records = []
    for _ in range(rng.randint(5, 30)):
        key = f"k{rng.randrange(keys)}"
        records.append((key, None if rng.random() < 0.2 else f"v{rng.randrange(10**6)}"))
    return records


def _state(records) -> dict:
    """Key -> value after the log is read in offset order; a tombstone removes the key."""
    state: dict = {}
    for r in records:
        if r["value"] is None:
            state.pop(r["key"], None)
        else:
            state[r["key"]] = r["value"]
    return state


def test_topiclake_compacts_at_least_as_far_as_kafkas_cleaner(spark, kafka_broker, tmp_path):
    kafka_config = {"cleanup.policy": "compact", "segment.ms": str(SEGMENT_MS), "min.cleanable.dirty.ratio": "0.01",
                    "delete.retention.ms": str(DELETE_RETENTION_MS), "min.compaction.lag.ms": "0"}
    spec_config = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": 0.01,
                   "delete.retention.ms": DELETE_RETENTION_MS, "min.compaction.lag.ms": 0}
    specs, topics = tmp_path / "specs", []
    specs.mkdir()
    for t in range(TOPICS):
        kafka_topic = f"referee-{t}-{uuid.uuid4().hex[:8]}"
        kafka_broker.create_topic(kafka_topic, SEEDS_PER_TOPIC, kafka_config)
        spec_path = specs / f"referee{t}.yaml"
        spec_path.write_text(yaml.safe_dump({
            "topic": f"referee{t}", "partitions": SEEDS_PER_TOPIC, "config": spec_config,
            "source": {"kafka": {"bootstrap.servers": kafka_broker.bootstrap_servers, "topic": kafka_topic}}}))
        topics.append((kafka_topic, spec_path))
    seeds = {(t, p): random.Random(1000 * t + p) for t in range(TOPICS) for p in range(SEEDS_PER_TOPIC)}
    key_counts = {seed: rng.randint(2, 8) for seed, rng in seeds.items()}

    # Rounds more than segment.ms apart, so each round starts a new segment, and the cleaner
    # (dirty ratio 0.01) cleans the older ones while later rounds arrive.
    last_ts = 0
    for round_number in range(ROUNDS + 1):
        for t, (kafka_topic, _) in enumerate(topics):
            batch = []
            for p in range(SEEDS_PER_TOPIC):
                rows = _round(seeds[(t, p)], key_counts[(t, p)]) if round_number < ROUNDS else [("roll", "roll")]
                batch += [{"key": k, "value": v, "partition": p} for k, v in rows]
            kafka_broker.produce(kafka_topic, batch)
        last_ts = int(time.time() * 1000)
        if round_number < ROUNDS:
            time.sleep(SEGMENT_MS / 1000 + 0.2)
    for kafka_topic, _ in topics:
        for p in range(SEEDS_PER_TOPIC):
            kafka_broker.wait_cleaned(kafka_topic, p)

    warehouse = tmp_path / "warehouse"
    assert main(["--warehouse", str(warehouse), "--specs", str(specs), "ingest"]) == 0
    first = last_ts + 60_000
    maintenance = Maintenance(spark, Warehouse.resolve(str(warehouse)), [load_spec(p) for _, p in topics],
                              record_history=False)
    for now in (first, first + DELETE_RETENTION_MS + 1):  # four partitions at a time, as a cluster would
        assert not maintenance.run(now, stages=("compact",), cleaner_threads=4).failed

    reasons: Counter = Counter()
    removed_by_kafka = 0
    for kafka_topic, spec_path in topics:
        spec = load_spec(spec_path)
        for p in range(SEEDS_PER_TOPIC):
            kafka = kafka_broker.consume_all(kafka_topic, p)
            log = PartitionLog(spark, Warehouse.resolve(str(warehouse)), spec, p)
            ours = delta_rs_query(log.path, '"offset", "key", "value"')  # (delta-rs: no Spark job)
            where = f"{kafka_topic}-{p} (seed {spec.topic}/{p})"
            assert _state(ours) == _state(kafka), f"{where}: key -> value differs from Kafka's"
            kafka_offsets = {r["offset"] for r in kafka}
            our_offsets = {r["offset"] for r in ours}
            end = max(kafka_offsets) + 1
            removed_by_kafka += end - len(kafka_offsets)
            kept_only_by_us = our_offsets - kafka_offsets
            assert not kept_only_by_us, f"{where}: Kafka's cleaner removed offsets topiclake kept: {sorted(kept_only_by_us)}"
            active = kafka_broker.active_segment_base(kafka_topic, p)
            for r in kafka:
                if r["offset"] in our_offsets:
                    continue
                if r["offset"] >= active:
                    reasons["active segment: Kafka never cleans it (KIP-58 head is min.compaction.lag.ms=0 here)"] += 1
                elif r["value"] is None:
                    reasons["tombstone kept by Kafka's first pass, removed past its horizon (KIP-534)"] += 1
                else:
                    pytest.fail(f"{where}: offset {r['offset']} survives in Kafka's cleaned section but topiclake "
                                "removed it, and no KIP explains why")
    assert removed_by_kafka > 0, "Kafka's cleaner removed nothing: the referee never ran"
    print(f"\n{TOPICS * SEEDS_PER_TOPIC} seeds agreed with Kafka's cleaner; Kafka removed {removed_by_kafka} "
          f"offsets, topiclake all of them and more: {dict(reasons)}")
