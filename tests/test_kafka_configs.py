"""import-kafka-config: a spec from a Kafka topic's configs, checked on the real broker's output."""

from __future__ import annotations

import subprocess
import uuid

import pytest
import yaml

from framework.cli.main import main
from framework.errors import ArgumentError, SpecError
from framework.spec import load_spec
from framework.spec.kafka_configs import import_spec, read_settings
from tests.support.kafka_broker import KAFKA_LIB

DESCRIBED = """\
Dynamic configs for topic orders.v1 are:
  cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact,delete, DEFAULT_CONFIG:log.cleanup.policy=delete}
  min.compaction.lag.ms=3600000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:min.compaction.lag.ms=3600000, DEFAULT_CONFIG:log.cleaner.min.compaction.lag.ms=0}
  segment.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:segment.ms=1000}
"""


def test_a_describe_gives_the_topic_and_its_overrides():
    imported = import_spec(DESCRIBED, "describe.txt", partitions=3)
    assert imported.spec == {"topic": "orders.v1", "partitions": 3,
                             "config": {"cleanup.policy": "compact,delete", "min.compaction.lag.ms": 3600000}}
    assert imported.ignored == ["segment.ms"]


def test_a_properties_file_needs_a_topic_and_keeps_only_what_differs_from_the_defaults():
    text = "# team settings\n! legacy comment\ncleanup.policy=compact\nmin.cleanable.dirty.ratio: 0.5\n" \
           "delete.retention.ms = 3600000\nlog.cleaner.threads=2\nmin.insync.replicas=2\n"
    with pytest.raises(ArgumentError, match="--topic"):
        import_spec(text, "t.properties", partitions=2)
    imported = import_spec(text, "t.properties", partitions=2, topic="cdc", bootstrap_servers="${BROKERS}")
    assert imported.spec["config"] == {"cleanup.policy": "compact", "delete.retention.ms": 3600000}
    assert imported.spec["source"] == {"kafka": {"bootstrap.servers": "${BROKERS}", "topic": "cdc"}}
    assert imported.unknown == ["log.cleaner.threads"] and imported.ignored == ["min.insync.replicas"]


def test_bad_text_and_bad_values_name_the_file_and_line():
    with pytest.raises(SpecError, match=r"describe.txt:3: not a line of `kafka-configs --describe`"):
        import_spec(DESCRIBED.splitlines()[0] + "\n  cleanup.policy=compact sensitive=false synonyms={}\n  oops\n",
                    "describe.txt", partitions=1)
    with pytest.raises(SpecError, match="cleanup.policy"):
        import_spec("cleanup.policy=shred\n", "t.properties", partitions=1, topic="t")
    with pytest.raises(ArgumentError, match="describes 2 topics"):
        import_spec(DESCRIBED + DESCRIBED.replace("orders.v1", "other"), "d.txt", partitions=1)
    assert set(read_settings(DESCRIBED + DESCRIBED.replace("orders.v1", "other"), "d.txt")) == {"orders.v1", "other"}


def _describe(broker, topic: str, *extra: str) -> str:
    """What Kafka's own `kafka-configs --describe` prints (its ConfigCommand, from the broker's jars)."""
    done = subprocess.run(["java", "-cp", f"{KAFKA_LIB}/*", "kafka.admin.ConfigCommand", "--bootstrap-server",
                           broker.bootstrap_servers, "--describe", "--entity-type", "topics", "--entity-name", topic,
                           *extra], capture_output=True, text=True, timeout=120, check=True)
    return done.stdout


def test_the_real_brokers_describe_output_becomes_a_spec_that_lints(kafka_broker, tmp_path, capsys):
    topic = f"orders.{uuid.uuid4().hex[:8]}"
    configs = {"cleanup.policy": "compact,delete", "min.compaction.lag.ms": "3600000", "retention.ms": "86400000",
               "message.timestamp.type": "LogAppendTime", "segment.ms": "1000", "min.insync.replicas": "1"}
    kafka_broker.create_topic(topic, 3, configs)
    overrides = tmp_path / "describe.txt"
    overrides.write_text(_describe(kafka_broker, topic))
    everything = tmp_path / "describe-all.txt"
    everything.write_text(_describe(kafka_broker, topic, "--all"))

    # What Kafka's Admin API says the topic has, for the settings topiclake keeps.
    from confluent_kafka.admin import ConfigResource

    resource = ConfigResource("topic", topic)
    described = kafka_broker.admin().describe_configs([resource])[resource].result()
    expected = {name: described[name].value for name in configs if name not in ("segment.ms", "min.insync.replicas")}

    specs = []
    for source in (overrides, everything):
        out = tmp_path / f"{source.stem}.yaml"
        assert main(["import-kafka-config", str(source), "--partitions", "3", "--output", str(out)]) == 0
        err = capsys.readouterr().err
        assert "segment.ms" in err and "min.insync.replicas" in err  # reported as ignored
        # every topic config the real broker has (--all lists them all) is one topiclake
        # knows or ignores by name: a pasted config never meets an unknown Kafka setting
        assert "left out" not in err, err
        written = yaml.safe_load(out.read_text())
        assert {k: str(v) for k, v in written["config"].items()} == expected
        assert main(["lint", str(out)]) == 0
        specs.append(load_spec(out))
    assert specs[0] == specs[1]  # --all lists Kafka's defaults too; the spec is the same
    assert main(["import-kafka-config", str(overrides), "--partitions", "3", "--output", str(out)]) == 2
    assert "exists" in capsys.readouterr().err
