"""The spec model: Kafka's config names and defaults, and the typed, immutable spec
(``TopicSpec``, ``TopicConfig``, ``ExpectationSpec``, ``KafkaSource``) every other module reads.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from framework.errors import ArgumentError, Problem, SpecError
from framework.spec.problems import shown
from framework.spec.yaml_source import Marks


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
SPEC_FIELDS: tuple[str, ...] = ("topic", "partitions", "key", "value", "config", "expectations", "source")

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
_TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]+")  # Kafka's Topic.LEGAL_CHARS
_TOPIC_MAX_LENGTH = 249


@dataclass(frozen=True)
class TopicConfig:
    """A topic's Kafka configs, validated and with every default filled in."""

    cleanup_policy: frozenset[str]
    min_compaction_lag_ms: int
    max_compaction_lag_ms: int
    min_cleanable_dirty_ratio: float
    delete_retention_ms: int
    retention_ms: int
    retention_bytes: int
    message_timestamp_type: str
    compaction_strategy: str
    compaction_strategy_header: str | None
    consumed_retention_ms: int
    consumed_retention_groups: tuple[str, ...]
    time_travel_retention_ms: int
    segment_bytes: int = GIB

    def __post_init__(self) -> None:
        # Keep the instance hashable and immutable whatever collections it was given.
        object.__setattr__(self, "cleanup_policy", frozenset(self.cleanup_policy))
        object.__setattr__(self, "consumed_retention_groups", tuple(self.consumed_retention_groups))

    @property
    def compact(self) -> bool:
        """The policy includes compact."""
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        """The policy includes delete."""
        return "delete" in self.cleanup_policy

    def to_kafka(self) -> dict[str, Any]:
        """Every setting under its Kafka name, as plain YAML-able values."""
        settings: dict[str, Any] = {
            "cleanup.policy": ",".join(p for p in CLEANUP_POLICIES if p in self.cleanup_policy),
            "min.compaction.lag.ms": self.min_compaction_lag_ms,
            "max.compaction.lag.ms": self.max_compaction_lag_ms,
            "min.cleanable.dirty.ratio": self.min_cleanable_dirty_ratio,
            "delete.retention.ms": self.delete_retention_ms,
            "retention.ms": self.retention_ms,
            "retention.bytes": self.retention_bytes,
            "message.timestamp.type": self.message_timestamp_type,
            "compaction.strategy": self.compaction_strategy,
            "consumed.retention.ms": self.consumed_retention_ms,
            "consumed.retention.groups": list(self.consumed_retention_groups),
            "time.travel.retention.ms": self.time_travel_retention_ms,
            "segment.bytes": self.segment_bytes,
        }
        if self.compaction_strategy_header is not None:
            settings["compaction.strategy.header"] = self.compaction_strategy_header
        return settings

    @classmethod
    def from_kafka(cls, settings: Mapping[str, Any] | None = None, source: str = "<config>") -> TopicConfig:
        """Validate Kafka-named settings (the `config:` of a spec); raise SpecError."""
        from framework.spec.configs import parse_config  # the parser builds this model
        from framework.spec.problems import Checker

        checker = Checker(source, Marks())
        config, _, _ = parse_config(checker, settings)
        checker.raise_if_any()
        return config


@dataclass(frozen=True)
class ExpectationSpec:
    """One extra Great Expectations check on the partition tables, as written in the spec."""

    type: str
    kwargs: Mapping[str, Any]
    meta: Mapping[str, Any]
    line: int | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "kwargs", _freeze(self.kwargs))
        object.__setattr__(self, "meta", _freeze(self.meta))

    def to_dict(self) -> dict[str, Any]:
        """Plain dicts and lists, as Great Expectations' ExpectationConfiguration takes them."""
        written: dict[str, Any] = {"type": self.type, "kwargs": _thaw(self.kwargs)}
        if self.meta:
            written["meta"] = _thaw(self.meta)
        return written


@dataclass(frozen=True)
class KafkaSource:
    """``source.kafka``: the Kafka topic whose records ``ingest`` appends, with Kafka's offsets.

    Values may hold ``${ENV}`` references, read when ingest runs: secrets never live in a spec.
    """

    bootstrap_servers: str
    #: the Kafka topic; None means the spec's own topic name
    topic: str | None = None
    #: passed to Spark's Kafka source (``kafka.*`` are the Kafka client's settings)
    options: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "options", MappingProxyType(dict(self.options)))

    def __hash__(self) -> int:
        return hash((self.bootstrap_servers, self.topic, tuple(sorted(self.options.items()))))

    def to_dict(self) -> dict[str, Any]:
        written: dict[str, Any] = {"bootstrap.servers": self.bootstrap_servers}
        if self.topic is not None:
            written["topic"] = self.topic
        if self.options:
            written["options"] = dict(self.options)
        return written


@dataclass(frozen=True)
class TopicSpec:
    """One topic: its partitions, record types, configs and expectations.

    Equality compares what the spec means: not `source`, and not `ignored_configs`,
    which name settings that mean nothing for a table.
    """

    topic: str
    partitions: int
    key_type: str
    value_type: str
    config: TopicConfig
    expectations: tuple[ExpectationSpec, ...] = ()
    ignored_configs: tuple[str, ...] = field(default=(), compare=False)
    warnings: tuple[str, ...] = ()
    source: str = field(default="<spec>", compare=False)
    #: where the records come from when not from ``produce`` (CONTRACT section 3)
    kafka_source: KafkaSource | None = None

    def __post_init__(self) -> None:
        problem = topic_name_problem(self.topic)
        if problem is not None:  # a spec built in Python gets the rule the YAML reader applies
            raise SpecError([Problem(self.source, None, None, "topic", problem)])
        for name in ("expectations", "ignored_configs", "warnings"):
            object.__setattr__(self, name, tuple(getattr(self, name)))

    def table_name(self, partition: int) -> str:
        """The table of one partition, named as Kafka names its log directory."""
        if isinstance(partition, bool) or not isinstance(partition, int) or not 0 <= partition < self.partitions:
            raise ArgumentError(
                f"partition must be an integer from 0 to {self.partitions - 1}"
                f" (topic {self.topic} has {self.partitions}), got {partition!r}"
            )
        return f"{self.topic}-{partition}"

    @property
    def kafka_topic(self) -> str | None:
        """The Kafka topic ``ingest`` reads, or None for a topic fed by ``produce``."""
        if self.kafka_source is None:
            return None
        return self.kafka_source.topic or self.topic

    def to_dict(self) -> dict[str, Any]:
        """A plain YAML-able spec with Kafka's names; `parse_spec` gives this spec back."""
        written = {
            "topic": self.topic,
            "partitions": self.partitions,
            "key": {"type": self.key_type},
            "value": {"type": self.value_type},
            "config": self.config.to_kafka(),
            "expectations": [e.to_dict() for e in self.expectations],
        }
        if self.kafka_source is not None:
            written["source"] = {"kafka": self.kafka_source.to_dict()}
        return written


def _freeze(value: Any) -> Any:
    """Read-only copies all the way down: mappings become MappingProxyType, lists tuples."""
    if isinstance(value, Mapping):
        return MappingProxyType({k: _freeze(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    return value


def _thaw(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _thaw(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_thaw(v) for v in value]
    return value


def topic_name_problem(topic: Any) -> str | None:
    """Why ``topic`` is not a legal topic name (Kafka's ``Topic.validate``), or None.

    The one rule: the YAML reader, :class:`TopicSpec` and the warehouse's paths all ask it,
    so no table path is ever built from a name that could leave the warehouse.
    """
    if not isinstance(topic, str):
        return f"must be a string (quote it if it looks like a number), got {shown(topic)}"
    if topic in (".", ".."):
        return f"cannot be {topic!r} (Kafka refuses it)"
    if not 1 <= len(topic) <= _TOPIC_MAX_LENGTH:
        return f"must be 1 to {_TOPIC_MAX_LENGTH} characters long, got {len(topic)}"
    if not _TOPIC_NAME.fullmatch(topic):
        return f"may use only A-Z, a-z, 0-9, '.', '_' and '-' (Kafka's legal topic names), got {topic!r}"
    return None


def colliding_name(topic: str) -> str:
    """What two topic names must not share in one warehouse: Kafka refuses topics that differ
    only by '.' against '_' (their metric names collide), and a case-insensitive file system
    (macOS, Windows, some object-store gateways) would give topics that differ only by case
    one folder."""
    return topic.lower().replace(".", "_")
