"""Kafka's names and values: the topic configs topiclake acts on and their defaults (Kafka's),
the ones it accepts and ignores, the value sets, and what ``source.kafka`` may set."""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

LONG_MIN = -(2**63)
LONG_MAX = 2**63 - 1
HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
WEEK_MS = 7 * DAY_MS
MIB = 1 << 20
GIB = 1 << 30

#: The contract's defaults, which are Kafka's, by Kafka config name.
KAFKA_DEFAULTS: Mapping[str, Any] = MappingProxyType({
    "cleanup.policy": "delete",
    "min.compaction.lag.ms": 0,
    "max.compaction.lag.ms": LONG_MAX,
    "min.cleanable.dirty.ratio": 0.5,
    "delete.retention.ms": DAY_MS,
    "retention.ms": WEEK_MS,
    "retention.bytes": -1,
    "message.timestamp.type": "CreateTime",
    "compaction.strategy": "offset",
    "compaction.strategy.header": None,  # no default: required when the strategy is header
    "consumed.retention.ms": -1,
    "consumed.retention.groups": (),
    "time.travel.retention.ms": WEEK_MS,  # raised to min.compaction.lag.ms when that is longer
    "segment.bytes": GIB,  # Kafka's default; here the target data-file size of bin-packing
})

#: Every config name topiclake acts on.
KNOWN_CONFIGS: frozenset[str] = frozenset(KAFKA_DEFAULTS)

#: Kafka topic configs about segments, replicas, compression or the broker's disks: they
#: mean nothing for a Delta table, but are accepted so a topic's real config can be pasted.
IGNORED_CONFIGS: frozenset[str] = frozenset({
    "segment.ms", "segment.index.bytes", "segment.jitter.ms",
    "min.insync.replicas", "compression.type", "compression.gzip.level",
    "compression.lz4.level", "compression.zstd.level", "max.message.bytes",
    "flush.messages", "flush.ms", "index.interval.bytes", "file.delete.delay.ms",
    "preallocate", "unclean.leader.election.enable", "message.format.version",
    "message.downconversion.enable", "message.timestamp.difference.max.ms",
    "message.timestamp.before.max.ms", "message.timestamp.after.max.ms",
    "follower.replication.throttled.replicas", "leader.replication.throttled.replicas",
    "local.retention.bytes", "local.retention.ms", "remote.storage.enable",
    "remote.log.copy.disable", "remote.log.delete.on.disable",
})

#: The fields a spec file may have at the top level, and in each expectation.
SPEC_FIELDS: tuple[str, ...] = ("topic", "partitions", "key", "value", "config", "expectations", "source", "table")

EXPECTATION_FIELDS: tuple[str, ...] = ("type", "kwargs", "meta")
KAFKA_SOURCE_FIELDS: tuple[str, ...] = ("bootstrap.servers", "topic", "options")

#: Options of Spark's Kafka source that topiclake sets itself for an exactly-once batch read.
KAFKA_OPTIONS_SET_BY_INGEST = frozenset({
    "assign", "subscribe", "subscribePattern", "startingOffsets", "endingOffsets",
    "startingOffsetsByTimestamp", "endingOffsetsByTimestamp", "startingTimestamp", "endingTimestamp",
    "startingOffsetsByTimestampStrategy", "includeHeaders", "failOnDataLoss", "maxOffsetsPerTrigger",
    "minOffsetsPerTrigger", "maxTriggerDelay", "kafka.bootstrap.servers", "kafka.key.deserializer",
    "kafka.value.deserializer", "kafka.enable.auto.commit", "kafka.auto.offset.reset",
    "kafka.interceptor.classes",
})

#: Spark Kafka source options, besides the ``kafka.*`` client settings, that a batch read honours.
KAFKA_READER_OPTIONS = frozenset({
    "minPartitions", "maxRecordsPerPartition", "kafkaConsumer.pollTimeoutMs", "fetchOffset.numRetries",
    "fetchOffset.retryIntervalMs", "groupIdPrefix",
})

#: ``${NAME}``: an environment variable, read when ingest runs (never stored in the spec).
ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")

CLEANUP_POLICIES = ("compact", "delete")  # also the order `to_kafka` writes them in
RECORD_TYPES = ("string", "binary")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
COMPACTION_STRATEGIES = ("offset", "timestamp", "header")  # KIP-280
TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]+")  # Kafka's Topic.LEGAL_CHARS
TOPIC_MAX_LENGTH = 249
