"""Topic specs (CONTRACT section 2): typed, immutable, loaded from YAML with line numbers.

A spec names a topic, its partitions, the key and value types, Kafka's own topic configs
and optional Great Expectations checks. Parsing reports every problem of a file at once,
each with its file, line, field and the rule it breaks, and never starts Spark or imports
great_expectations, so `lint` answers in a fraction of a second (for git hooks and CI).
"""

from __future__ import annotations

import difflib
import functools
import importlib.util
import math
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable

from framework.errors import ArgumentError, Problem, ProblemsError, SpecError
from framework.yaml_source import Marks, YamlPath, load_yaml_file

__all__ = [
    "EXPECTATION_FIELDS",
    "IGNORED_CONFIGS",
    "KAFKA_DEFAULTS",
    "KNOWN_CONFIGS",
    "SPEC_FIELDS",
    "ExpectationSpec",
    "LintReport",
    "TopicConfig",
    "KafkaSource",
    "TopicSpec",
    "known_expectation_types",
    "lint",
    "load_spec",
    "load_specs",
    "parse_spec",
]

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
#: Client settings that hold secrets: only ``${ENV}`` references are accepted for them.
_SECRET_SETTING = re.compile(r"password|secret|jaas\.config|token|credential", re.IGNORECASE)
#: ``${NAME}``: an environment variable, read when ingest runs (never stored in the spec).
ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")

CLEANUP_POLICIES = ("compact", "delete")  # also the order `to_kafka` writes them in
RECORD_TYPES = ("string", "binary")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
COMPACTION_STRATEGIES = ("offset", "timestamp", "header")  # KIP-280

_TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]+")  # Kafka's Topic.LEGAL_CHARS
_TOPIC_MAX_LENGTH = 249
_DECIMAL_INTEGER = re.compile(r"[+-]?[0-9]+")
_DECIMAL_NUMBER = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")
_SNAKE_CASE = re.compile(r"[a-z][a-z0-9_]*")
_UNEXPECTED_ROWS = "unexpected_rows_expectation"


# --------------------------------------------------------------------------- the model


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
        checker = _Checker(source, Marks())
        config, _, _ = _parse_config(checker, settings)
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


# --------------------------------------------------------------------------- problems


class _Checker:
    """Collects the problems of one spec, each placed where the marks say it was written."""

    def __init__(self, source: str, marks: Marks):
        self.source = source
        self.marks = marks
        self.problems: list[Problem] = []

    def add(self, path: YamlPath, rule: str, *, at_key: bool = False, place: YamlPath | None = None) -> None:
        """A problem with the field at `path`, placed at `place` if given (another setting)."""
        where = path if place is None else place
        line, column = self.marks.key(where) if at_key else self.marks.at(where)
        self.problems.append(Problem(self.source, line, column, _dotted(path), rule))

    def raise_if_any(self) -> None:
        if self.problems:
            # In file order, so a reader can walk down the file.
            ordered = sorted(self.problems, key=lambda p: (p.line is None, p.line or 0, p.column or 0))
            raise SpecError(ordered)


class _Refused(Exception):
    """A value breaks a rule; the message is the rule, said to the user."""


def _dotted(path: YamlPath) -> str | None:
    """("expectations", 2, "type") -> "expectations[2].type"."""
    text = ""
    for part in path:
        if isinstance(part, int) and not isinstance(part, bool):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text or None


def _shown(value: Any) -> str:
    """A value as the user wrote it in YAML, short."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return repr(value if len(value) <= 60 else value[:57] + "...")
    if isinstance(value, bytes):
        return "binary data"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    return f"a {type(value).__name__}"


def _closest(name: str, candidates: Iterable[str]) -> tuple[str, bool]:
    """The candidate closest to `name`, and whether it is close enough to be a likely typo."""
    ordered = sorted(candidates)
    likely = difflib.get_close_matches(name.lower(), ordered, n=1, cutoff=0.6)
    if likely:
        return likely[0], True
    return difflib.get_close_matches(name.lower(), ordered, n=1, cutoff=0.0)[0], False


def _suggestion(name: str, candidates: Iterable[str], kind: str) -> str:
    best, likely = _closest(name, candidates)
    return f"did you mean {best!r}?" if likely else f"the closest {kind} is {best!r}"


# --------------------------------------------------------------------------- values


def _is_list(value: Any) -> bool:
    return isinstance(value, (list, tuple))


def _long(value: Any) -> int:
    """Kafka's LONG: a YAML integer, or a string of decimal digits as in a properties file."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        hint = f"; write {int(value)}" if isinstance(value, float) and value.is_integer() else ""
        raise _Refused(f"must be an integer, got {_shown(value)}{hint}")
    if isinstance(value, str):
        if not _DECIMAL_INTEGER.fullmatch(value.strip()):
            raise _Refused(f"must be an integer, got {_shown(value)}")
        value = int(value.strip())
    if not LONG_MIN <= value <= LONG_MAX:
        raise _Refused(f"must fit a signed 64-bit long ({LONG_MIN} to {LONG_MAX}), got {value}")
    return value


def _long_at_least(minimum: int, meaning: str = "") -> Callable[[Any], int]:
    def parse(value: Any) -> int:
        number = _long(value)
        if number < minimum:
            note = f" ({meaning})" if meaning else ""
            raise _Refused(f"must be >= {minimum}{note}, got {number}")
        return number
    return parse


def _ratio(value: Any) -> float:
    """Kafka's DOUBLE in [0, 1]: a YAML number or a numeric string."""
    if isinstance(value, str) and _DECIMAL_NUMBER.fullmatch(value.strip()):
        value = float(value.strip())
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _Refused(f"must be a number from 0 to 1, got {_shown(value)}")
    if not 0 <= value <= 1:
        raise _Refused(f"must be from 0 to 1 (a fraction of the partition's bytes), got {value}")
    return float(value)


def _one_of(*allowed: str) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        if isinstance(value, str) and value.strip() in allowed:
            return value.strip()  # Kafka trims string configs
        words = ", ".join(allowed)
        if isinstance(value, str):
            same_but_case = [a for a in allowed if a.lower() == value.strip().lower()]
            if same_but_case:
                raise _Refused(
                    f"must be one of {words} (case matters; did you mean {same_but_case[0]}?), got {_shown(value)}"
                )
        raise _Refused(f"must be one of {words}, got {_shown(value)}")
    return parse


def _cleanup_policy(value: Any) -> frozenset[str]:
    """"compact", "delete", "compact,delete" (any order, Kafka's "[...]" too) or a YAML list."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("[") and text.endswith("]"):
            text = text[1:-1]
        words = [word.strip() for word in text.split(",")] if text.strip() else []
    elif _is_list(value):
        words = list(value)
    else:
        raise _Refused(f"must be compact, delete or compact,delete (a string or a list), got {_shown(value)}")
    if not words:
        raise _Refused("must not be empty: write compact, delete or compact,delete")
    for word in words:
        if word not in CLEANUP_POLICIES:
            raise _Refused(
                f"allows only compact and delete (e.g. compact,delete or [compact, delete]), got {_shown(word)}"
            )
    return frozenset(words)


def _header_name(value: Any) -> str | None:
    """The header that holds a record's version under compaction.strategy=header."""
    if value is None:  # written but empty: as if not set
        return None
    if not isinstance(value, str) or not value.strip():
        raise _Refused(f"must be a non-empty header name, got {_shown(value)}")
    return value.strip()


def _group_list(value: Any) -> tuple[str, ...]:
    """Consumer group ids: a YAML list, or a comma-separated string as in Kafka's lists."""
    if isinstance(value, str):
        groups = [group.strip() for group in value.split(",")] if value.strip() else []
    elif _is_list(value):
        groups = list(value)
    else:
        raise _Refused(f"must be a list of consumer group ids, got {_shown(value)}")
    for group in groups:
        if not isinstance(group, str) or not group.strip():
            raise _Refused(f"must be a list of non-empty consumer group ids, got {_shown(group)} in it")
    return tuple(dict.fromkeys(groups))  # a group listed twice counts once


#: How each known config is read; the checks between settings are in `_check_together`.
_SETTINGS: Mapping[str, Callable[[Any], Any]] = MappingProxyType({
    "cleanup.policy": _cleanup_policy,
    "min.compaction.lag.ms": _long_at_least(0),
    "max.compaction.lag.ms": _long_at_least(1),
    "min.cleanable.dirty.ratio": _ratio,
    "delete.retention.ms": _long_at_least(0),
    "retention.ms": _long_at_least(-1, "-1 means unlimited"),
    "retention.bytes": _long_at_least(-1, "-1 means unlimited"),
    "message.timestamp.type": _one_of(*TIMESTAMP_TYPES),
    "compaction.strategy": _one_of(*COMPACTION_STRATEGIES),
    "compaction.strategy.header": _header_name,
    "consumed.retention.ms": _long_at_least(-1, "-1 means off"),
    "consumed.retention.groups": _group_list,
    "time.travel.retention.ms": _long_at_least(0),
    # Kafka 4 refuses segments under 1 MiB; a data file that small would not pay either
    "segment.bytes": _long_at_least(MIB, "Kafka's minimum, 1 MiB"),
})


# --------------------------------------------------------------------------- config


def _parse_config(checker: _Checker, raw: Any) -> tuple[TopicConfig | None, tuple[str, ...], tuple[str, ...]]:
    """The config (None if not even a mapping), the ignored names in file order, and warnings."""
    if raw is None:  # `config:` written with nothing under it
        raw = {}
    if not isinstance(raw, Mapping):
        checker.add(("config",), f"must be a mapping of Kafka topic configs, got {_shown(raw)}")
        return None, (), ()
    given: dict[str, Any] = {}
    refused: set[str] = set()
    ignored: list[str] = []
    for name, value in raw.items():
        path = ("config", name)
        if not isinstance(name, str):
            checker.add(path, f"config names are Kafka's (strings), got {_shown(name)}", at_key=True)
        elif name in IGNORED_CONFIGS:
            ignored.append(name)
        elif name in _SETTINGS:
            try:
                given[name] = _SETTINGS[name](value)
            except _Refused as refusal:
                checker.add(path, str(refusal))
                refused.add(name)
        else:
            checker.add(path, _unknown_config(name), at_key=True)
    settings = {**KAFKA_DEFAULTS, "cleanup.policy": frozenset({"delete"}), **given}
    settings["time.travel.retention.ms"] = given.get(
        "time.travel.retention.ms", max(WEEK_MS, settings["min.compaction.lag.ms"])
    )
    _check_together(checker, settings, refused)
    config = TopicConfig(
        cleanup_policy=settings["cleanup.policy"],
        min_compaction_lag_ms=settings["min.compaction.lag.ms"],
        max_compaction_lag_ms=settings["max.compaction.lag.ms"],
        min_cleanable_dirty_ratio=float(settings["min.cleanable.dirty.ratio"]),
        delete_retention_ms=settings["delete.retention.ms"],
        retention_ms=settings["retention.ms"],
        retention_bytes=settings["retention.bytes"],
        message_timestamp_type=settings["message.timestamp.type"],
        compaction_strategy=settings["compaction.strategy"],
        compaction_strategy_header=settings["compaction.strategy.header"],
        consumed_retention_ms=settings["consumed.retention.ms"],
        consumed_retention_groups=settings["consumed.retention.groups"],
        time_travel_retention_ms=settings["time.travel.retention.ms"],
        segment_bytes=settings["segment.bytes"],
    )
    return config, tuple(ignored), tuple(_warnings(config))


def _unknown_config(name: str) -> str:
    if name in SPEC_FIELDS:
        return f"{name} is a top-level field of the spec, not a config"
    return "unknown config; " + _suggestion(name, KNOWN_CONFIGS | IGNORED_CONFIGS, "known config")


def _check_together(checker: _Checker, settings: Mapping[str, Any], refused: set[str]) -> None:
    """Rules between settings, checked only where each setting involved is valid itself."""
    def valid(*names: str) -> bool:
        return not refused.intersection(names)

    min_lag = settings["min.compaction.lag.ms"]
    max_lag = settings["max.compaction.lag.ms"]
    time_travel = settings["time.travel.retention.ms"]
    if valid("min.compaction.lag.ms", "max.compaction.lag.ms") and max_lag < min_lag:
        # As Kafka refuses at topic creation (KIP-354).
        checker.add(
            ("config", "max.compaction.lag.ms"),
            f"must be >= min.compaction.lag.ms ({min_lag}), got {max_lag}",
        )
    if valid("min.compaction.lag.ms", "time.travel.retention.ms") and time_travel < min_lag:
        checker.add(
            ("config", "time.travel.retention.ms"),
            f"must be >= min.compaction.lag.ms ({min_lag}), got {time_travel}:"
            " older table versions would otherwise be vacuumed while min.compaction.lag.ms still protects them",
        )
    if (valid("compaction.strategy", "compaction.strategy.header")
            and settings["compaction.strategy"] == "header" and settings["compaction.strategy.header"] is None):
        checker.add(
            ("config", "compaction.strategy.header"),
            "is required when compaction.strategy is header: name the record header that holds"
            " the version, e.g. compaction.strategy.header: version (KIP-280)",
            place=("config", "compaction.strategy"),
        )


def _warnings(config: TopicConfig) -> list[str]:
    """Settings that are valid but do nothing, which is most likely not what was meant."""
    notes = []
    if config.compaction_strategy_header is not None and config.compaction_strategy != "header":
        notes.append(
            f"compaction.strategy.header ({config.compaction_strategy_header}) does nothing:"
            f" compaction.strategy is {config.compaction_strategy}, not header"
        )
    if config.compaction_strategy == "timestamp" and config.message_timestamp_type == "LogAppendTime":
        notes.append(
            "compaction.strategy timestamp with message.timestamp.type LogAppendTime keeps the"
            " same records as offset: append times only grow"
        )
    if config.consumed_retention_ms >= 0 and not config.consumed_retention_groups:
        notes.append(
            f"consumed.retention.ms is {config.consumed_retention_ms} but consumed.retention.groups"
            " is empty, which means no consumed retention (as -1)"
        )
    if config.consumed_retention_ms < 0 and config.consumed_retention_groups:
        notes.append("consumed.retention.groups does nothing while consumed.retention.ms is -1 (off)")
    notes.extend(_unused_by_policy(config))
    return notes


_DELETE_ONLY = ("retention.ms", "retention.bytes", "consumed.retention.ms")
_COMPACT_ONLY = ("min.compaction.lag.ms", "max.compaction.lag.ms", "min.cleanable.dirty.ratio",
                 "delete.retention.ms", "compaction.strategy")


def _unused_by_policy(config: TopicConfig) -> list[str]:
    """Non-default settings of the policy the topic does not have (CONTRACT section 4)."""
    kafka = config.to_kafka()
    notes = []
    for names, needs, has in ((_DELETE_ONLY, "delete", config.delete), (_COMPACT_ONLY, "compact", config.compact)):
        unused = [name for name in names if kafka[name] != KAFKA_DEFAULTS[name]]
        if unused and not has:
            notes.append(
                f"{', '.join(unused)} {'does' if len(unused) == 1 else 'do'} nothing:"
                f" cleanup.policy does not include {needs}"
            )
    return notes


# --------------------------------------------------------------------------- expectations


@functools.lru_cache(maxsize=1)
def known_expectation_types() -> frozenset[str] | None:
    """The expectation types the installed great_expectations registers, or None if it is
    not installed. Read from its files: importing it would take seconds."""
    try:
        found = importlib.util.find_spec("great_expectations")
    except (ImportError, ValueError):
        return None
    for folder in (found.submodule_search_locations or []) if found else []:
        names = _expectation_modules(Path(folder) / "expectations" / "core")
        if names:
            return names
    return None


def _expectation_modules(core: Path) -> frozenset[str]:
    # core/__init__.py imports exactly the expectations great_expectations registers (1.x);
    # a few older modules sit in the folder unregistered, and their names are refused.
    try:
        init = (core / "__init__.py").read_text(encoding="utf-8")
    except OSError:
        init = ""
    imported = re.findall(r"^\s*from \.(\w+) import", init, re.MULTILINE)
    names = {name for name in imported if _is_expectation_name(name)}
    if not names:  # another layout: fall back to every module in the folder
        names = {p.stem for p in core.glob("*.py") if _is_expectation_name(p.stem)}
    return frozenset(names)


def _is_expectation_name(name: str) -> bool:
    return name.startswith("expect_") or name == _UNEXPECTED_ROWS


def _snake_case(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def _expectation_type(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise _Refused(f"must name an expectation, e.g. expect_column_values_to_not_be_null, got {_shown(value)}")
    if not _SNAKE_CASE.fullmatch(value):
        raise _Refused(f"must be the snake_case name, e.g. {_snake_case(value)}, got {_shown(value)}")
    if not _is_expectation_name(value):
        raise _Refused(f"must start with expect_ (or be {_UNEXPECTED_ROWS}), got {_shown(value)}")
    known = known_expectation_types()
    if known is not None and value not in known:
        raise _Refused(
            f"is not an expectation the installed great_expectations has, got {_shown(value)};"
            f" {_suggestion(value, known, 'one')}"
        )
    return value


def _parse_expectations(checker: _Checker, raw: Any) -> tuple[ExpectationSpec, ...]:
    if raw is None:
        return ()
    if not _is_list(raw):
        checker.add(("expectations",), f"must be a list of {{type, kwargs, meta}} mappings, got {_shown(raw)}")
        return ()
    parsed = (_parse_expectation(checker, ("expectations", index), item) for index, item in enumerate(raw))
    return tuple(e for e in parsed if e is not None)


def _parse_expectation(checker: _Checker, path: YamlPath, item: Any) -> ExpectationSpec | None:
    if not isinstance(item, Mapping):
        checker.add(path, f"must be a mapping with type, kwargs and meta, got {_shown(item)}")
        return None
    before = len(checker.problems)
    for name in item:
        if name not in EXPECTATION_FIELDS:
            rule = "unknown field; an expectation has only type, kwargs and meta; "
            rule += _suggestion(str(name), EXPECTATION_FIELDS, "field")
            if name == "expectation_type":
                rule += " (Great Expectations 0.x's expectation_type is type in 1.x)"
            checker.add(path + (name,), rule, at_key=True)
    type_ = None
    if "type" not in item:
        checker.add(path + ("type",), "is required, e.g. type: expect_column_values_to_not_be_null")
    else:
        try:
            type_ = _expectation_type(item["type"])
        except _Refused as refusal:
            checker.add(path + ("type",), str(refusal))
    kwargs = _string_keyed(checker, path + ("kwargs",), item.get("kwargs"))
    meta = _string_keyed(checker, path + ("meta",), item.get("meta"))
    if len(checker.problems) > before or type_ is None:
        return None
    return ExpectationSpec(type=type_, kwargs=kwargs, meta=meta, line=checker.marks.at(path)[0])


def _string_keyed(checker: _Checker, path: YamlPath, raw: Any) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        checker.add(path, f"must be a mapping, got {_shown(raw)}")
        return {}
    for name in raw:
        if not isinstance(name, str):
            checker.add(path + (name,), f"names must be strings, got {_shown(name)}", at_key=True)
    return dict(raw)


# --------------------------------------------------------------------------- the spec


def parse_spec(data: Any, source: str, marks: Marks | None = None) -> TopicSpec:
    """Validate an already-loaded spec mapping; raise SpecError listing every problem."""
    checker = _Checker(source, marks or Marks())
    if data is None:
        checker.add((), "the spec is empty; it needs at least topic and partitions")
        checker.raise_if_any()
    if not isinstance(data, Mapping):
        checker.add((), f"a spec must be a mapping with topic, partitions and config, got {_shown(data)}")
        checker.raise_if_any()
    if "spec" in data and "steps" in data and "topic" not in data:
        checker.add((), "this is a scenario file (it has spec and steps); run it with topiclake simulate")
        checker.raise_if_any()
    _check_fields(checker, data)
    topic = _parse_topic(checker, data)
    partitions = _parse_partitions(checker, data)
    key_type = _parse_record_type(checker, data, "key")
    value_type = _parse_record_type(checker, data, "value")
    config, ignored, warnings = _parse_config(checker, data.get("config"))
    expectations = _parse_expectations(checker, data.get("expectations"))
    kafka_source = _parse_source(checker, data.get("source"))
    checker.raise_if_any()
    return TopicSpec(
        topic=topic, partitions=partitions, key_type=key_type, value_type=value_type,
        config=config, expectations=expectations, ignored_configs=ignored,
        warnings=warnings, source=source, kafka_source=kafka_source,
    )


def _parse_source(checker: _Checker, raw: Any) -> KafkaSource | None:
    """``source: {kafka: {bootstrap.servers, topic, options}}``."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping) or not raw:
        checker.add(("source",), f"must be a mapping with kafka: {{bootstrap.servers, topic, options}}, got {_shown(raw)}")
        return None
    for name in raw:
        if name != "kafka":
            checker.add(("source", name), f"unknown source; {_suggestion(str(name), ('kafka',), 'source')} (the only "
                        "source is kafka; without a source, records come from produce)", at_key=True)
    if "kafka" not in raw:
        return None
    kafka = raw["kafka"]
    path: YamlPath = ("source", "kafka")
    if not isinstance(kafka, Mapping):
        checker.add(path, f"must be a mapping with bootstrap.servers, topic and options, got {_shown(kafka)}")
        return None
    before = len(checker.problems)
    for name in kafka:
        if name not in KAFKA_SOURCE_FIELDS:
            checker.add(path + (name,), f"unknown field; {_suggestion(str(name), KAFKA_SOURCE_FIELDS, 'field')}"
                        f" (source.kafka has {', '.join(KAFKA_SOURCE_FIELDS)})", at_key=True)
    servers = kafka.get("bootstrap.servers")
    if "bootstrap.servers" not in kafka:
        checker.add(path + ("bootstrap.servers",), "is required, e.g. bootstrap.servers: broker1:9092,broker2:9092"
                    " (or ${KAFKA_BOOTSTRAP_SERVERS})")
    elif not isinstance(servers, str) or not servers.strip():
        checker.add(path + ("bootstrap.servers",), f"must be host:port[,host:port...] or ${{ENV_VAR}}, got {_shown(servers)}")
    else:
        _check_env_references(checker, path + ("bootstrap.servers",), servers)
    kafka_topic = kafka.get("topic")
    if kafka_topic is not None:
        problem = topic_name_problem(kafka_topic)
        if problem is not None:
            checker.add(path + ("topic",), problem)
    options = _parse_kafka_options(checker, path + ("options",), kafka.get("options"))
    if len(checker.problems) > before:
        return None
    return KafkaSource(bootstrap_servers=servers.strip(), topic=kafka_topic, options=options)


def _parse_kafka_options(checker: _Checker, path: YamlPath, raw: Any) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        checker.add(path, f"must be a mapping of Spark Kafka source options (kafka.* settings), got {_shown(raw)}")
        return {}
    options: dict[str, str] = {}
    for name, value in raw.items():
        where = path + (name,)
        if not isinstance(name, str):
            checker.add(where, f"option names are strings, got {_shown(name)}", at_key=True)
            continue
        if name in KAFKA_OPTIONS_SET_BY_INGEST:
            checker.add(where, "is set by ingest itself (it reads each partition from the offsets already "
                        "ingested to Kafka's latest, exactly once)", at_key=True)
            continue
        if not name.startswith("kafka.") and name not in KAFKA_READER_OPTIONS:
            checker.add(where, "unknown option; Kafka client settings take the kafka. prefix (e.g. "
                        f"kafka.security.protocol); {_suggestion(name, KAFKA_READER_OPTIONS, 'reader option')}",
                        at_key=True)
            continue
        if isinstance(value, bool):
            value = "true" if value else "false"
        elif isinstance(value, (int, float)):
            value = str(value)
        if not isinstance(value, str):
            checker.add(where, f"must be a string, number or boolean, got {_shown(value)}")
            continue
        if _SECRET_SETTING.search(name) and not ENV_REFERENCE.search(value):
            checker.add(where, "holds a secret: write a ${ENV_VAR} reference, read when ingest runs "
                        "(secrets never live in a spec checked into git)")
            continue
        _check_env_references(checker, where, value)
        options[name] = value
    return options


def _check_env_references(checker: _Checker, path: YamlPath, value: str) -> None:
    """Every ``${`` opens a well-formed ``${NAME}`` reference."""
    if value.count("${") != len(ENV_REFERENCE.findall(value)):
        checker.add(path, f"a ${{...}} reference must be ${{NAME}} with NAME of letters, digits and _, got {_shown(value)}")


def _check_fields(checker: _Checker, data: Mapping[Any, Any]) -> None:
    for name in data:
        if name in SPEC_FIELDS:
            continue
        if not isinstance(name, str):
            checker.add((name,), f"field names must be strings, got {_shown(name)}", at_key=True)
        elif name in KNOWN_CONFIGS or name in IGNORED_CONFIGS:
            checker.add((name,), "is a Kafka topic config: put it under config:", at_key=True)
        else:
            checker.add((name,), f"unknown field; {_suggestion(name, SPEC_FIELDS, 'field')}"
                        f" (a spec has {', '.join(SPEC_FIELDS)})", at_key=True)
    for required, example in (("topic", "topic: orders"), ("partitions", "partitions: 3")):
        if required not in data:
            checker.add((required,), f"is required, e.g. {example}")


def topic_name_problem(topic: Any) -> str | None:
    """Why ``topic`` is not a legal topic name (Kafka's ``Topic.validate``), or None.

    The one rule: the YAML reader, :class:`TopicSpec` and the warehouse's paths all ask it,
    so no table path is ever built from a name that could leave the warehouse.
    """
    if not isinstance(topic, str):
        return f"must be a string (quote it if it looks like a number), got {_shown(topic)}"
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


def _parse_topic(checker: _Checker, data: Mapping[Any, Any]) -> str:
    topic = data.get("topic")
    if "topic" not in data:
        return ""
    problem = topic_name_problem(topic)
    if problem is not None:
        checker.add(("topic",), problem)
    return topic if isinstance(topic, str) else ""


def _parse_partitions(checker: _Checker, data: Mapping[Any, Any]) -> int:
    if "partitions" not in data:
        return 1
    partitions = data["partitions"]
    if isinstance(partitions, bool) or not isinstance(partitions, int):
        checker.add(("partitions",), f"must be an integer >= 1, got {_shown(partitions)}")
        return 1
    if partitions < 1:
        checker.add(("partitions",), f"must be >= 1 (partition p is table <topic>-p), got {partitions}")
    return partitions


def _parse_record_type(checker: _Checker, data: Mapping[Any, Any], part: str) -> str:
    """`key` or `value`: a mapping with only `type`, string or binary (default string)."""
    raw = data.get(part)
    if raw is None:
        return "string"
    if not isinstance(raw, Mapping):
        checker.add((part,), f"must be a mapping like {{type: string}} (string or binary), got {_shown(raw)}")
        return "string"
    for name in raw:
        if name != "type":
            checker.add((part, name), f"unknown field; {part} has only type (string or binary)", at_key=True)
    record_type = raw.get("type", "string")
    if record_type not in RECORD_TYPES:
        checker.add((part, "type"), f"must be string or binary, got {_shown(record_type)}")
        return "string"
    return record_type


# --------------------------------------------------------------------------- files and lint


def load_spec(path: str | os.PathLike[str]) -> TopicSpec:
    """Read one YAML spec file; raise SpecError with every problem, each at its line."""
    return _load(path)[0]


def _load(path: str | os.PathLike[str]) -> tuple[TopicSpec, Marks]:
    try:
        data, marks = load_yaml_file(path)
    except ProblemsError as error:  # unreadable or malformed YAML is a bad spec too
        raise SpecError(error.problems) from None
    return parse_spec(data, os.fspath(path), marks), marks


def load_specs(paths: Iterable[str | os.PathLike[str]]) -> list[TopicSpec]:
    """Every spec under `paths` (files, or folders of *.yaml / *.yml); one SpecError for all problems."""
    specs, problems = _collect(paths)
    if problems:
        raise SpecError(problems)
    return specs


@dataclass(frozen=True)
class LintReport:
    """What `lint` found: the good specs, and every problem of the others."""

    specs: tuple[TopicSpec, ...]
    problems: tuple[Problem, ...]

    def ok(self) -> bool:
        return not self.problems

    def lines(self) -> list[str]:
        out = []
        for spec in self.specs:
            policy = ",".join(p for p in CLEANUP_POLICIES if p in spec.config.cleanup_policy)
            plural = "" if spec.partitions == 1 else "s"
            out.append(f"ok   {spec.source}: topic {spec.topic}, {spec.partitions} partition{plural},"
                       f" cleanup.policy={policy}")
            if spec.ignored_configs:
                ignored = ", ".join(spec.ignored_configs)
                out.append(f"     ignored: {ignored} (they mean nothing for a Delta table)")
            out.extend(f"     warning: {warning}" for warning in spec.warnings)
        out.extend(str(problem) for problem in self.problems)
        return out


def lint(paths: Iterable[str | os.PathLike[str]]) -> LintReport:
    """Check every spec under `paths` without starting Spark; never raises SpecError."""
    specs, problems = _collect(paths)
    return LintReport(tuple(specs), tuple(problems))


def _collect(paths: Iterable[str | os.PathLike[str]]) -> tuple[list[TopicSpec], list[Problem]]:
    """The specs and problems of every file under `paths`, in the order given."""
    if isinstance(paths, (str, os.PathLike)):  # one path, not an iterable of characters
        paths = [paths]
    specs: list[TopicSpec] = []
    problems: list[Problem] = []
    first_of_topic: dict[str, TopicSpec] = {}  # by colliding_name
    seen: set[str] = set()
    for given in paths:
        try:
            files = _spec_files(os.fspath(given))
        except ProblemsError as error:
            problems.extend(error.problems)
            continue
        for path in files:
            if os.path.realpath(path) in seen:  # a file named and also inside a named folder
                continue
            seen.add(os.path.realpath(path))
            try:
                spec, marks = _load(path)
            except ProblemsError as error:
                problems.extend(error.problems)
                continue
            earlier = first_of_topic.setdefault(colliding_name(spec.topic), spec)
            if earlier is not spec:
                line, column = marks.at(("topic",))
                if earlier.topic == spec.topic:
                    rule = f"{spec.topic!r} is already the topic of {earlier.source}; one spec per topic"
                else:
                    rule = (f"{spec.topic!r} collides with topic {earlier.topic!r} of {earlier.source}: topics "
                            "that differ only by case or by '.' against '_' cannot share a warehouse")
                problems.append(Problem(spec.source, line, column, "topic", rule))
                continue
            specs.append(spec)
    return specs, problems


def _spec_files(path: str) -> list[str]:
    """A file as given, or a folder's *.yaml / *.yml files (sorted, not recursive)."""
    if os.path.isdir(path):
        try:
            names = sorted(os.listdir(path))
        except OSError as error:
            rule = f"cannot list the folder: {error.strerror or error}"
            raise SpecError([Problem(path, None, None, None, rule)]) from None
        found = [os.path.join(path, name) for name in names if name.endswith((".yaml", ".yml"))]
        return [file for file in found if os.path.isfile(file)]
    if os.path.exists(path):
        return [path]
    raise SpecError([Problem(path, None, None, None, "no such file or folder")])
