"""``config:``: Kafka's topic configs, each value checked against Kafka's own rules, the
combinations checked together, and the warnings about settings the policy ignores.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Callable

from framework.spec.model import (
    CLEANUP_POLICIES, COMPACTION_STRATEGIES, IGNORED_CONFIGS, KAFKA_DEFAULTS, KNOWN_CONFIGS, LONG_MAX, LONG_MIN,
    MIB, SPEC_FIELDS, TIMESTAMP_TYPES, TopicConfig, WEEK_MS,
)
from framework.spec.problems import Checker, Refused, shown, suggestion


_DECIMAL_INTEGER = re.compile(r"[+-]?[0-9]+")
_DECIMAL_NUMBER = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")


def is_list(value: Any) -> bool:
    return isinstance(value, (list, tuple))


def _long(value: Any) -> int:
    """Kafka's LONG: a YAML integer, or a string of decimal digits as in a properties file."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        hint = f"; write {int(value)}" if isinstance(value, float) and value.is_integer() else ""
        raise Refused(f"must be an integer, got {shown(value)}{hint}")
    if isinstance(value, str):
        if not _DECIMAL_INTEGER.fullmatch(value.strip()):
            raise Refused(f"must be an integer, got {shown(value)}")
        value = int(value.strip())
    if not LONG_MIN <= value <= LONG_MAX:
        raise Refused(f"must fit a signed 64-bit long ({LONG_MIN} to {LONG_MAX}), got {value}")
    return value


def _long_at_least(minimum: int, meaning: str = "") -> Callable[[Any], int]:
    def parse(value: Any) -> int:
        number = _long(value)
        if number < minimum:
            note = f" ({meaning})" if meaning else ""
            raise Refused(f"must be >= {minimum}{note}, got {number}")
        return number
    return parse


def _ratio(value: Any) -> float:
    """Kafka's DOUBLE in [0, 1]: a YAML number or a numeric string."""
    if isinstance(value, str) and _DECIMAL_NUMBER.fullmatch(value.strip()):
        value = float(value.strip())
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise Refused(f"must be a number from 0 to 1, got {shown(value)}")
    if not 0 <= value <= 1:
        raise Refused(f"must be from 0 to 1 (a fraction of the partition's bytes), got {value}")
    return float(value)


def _one_of(*allowed: str) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        if isinstance(value, str) and value.strip() in allowed:
            return value.strip()  # Kafka trims string configs
        words = ", ".join(allowed)
        if isinstance(value, str):
            same_but_case = [a for a in allowed if a.lower() == value.strip().lower()]
            if same_but_case:
                raise Refused(
                    f"must be one of {words} (case matters; did you mean {same_but_case[0]}?), got {shown(value)}"
                )
        raise Refused(f"must be one of {words}, got {shown(value)}")
    return parse


def _cleanup_policy(value: Any) -> frozenset[str]:
    """"compact", "delete", "compact,delete" (any order, Kafka's "[...]" too) or a YAML list."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("[") and text.endswith("]"):
            text = text[1:-1]
        words = [word.strip() for word in text.split(",")] if text.strip() else []
    elif is_list(value):
        words = list(value)
    else:
        raise Refused(f"must be compact, delete or compact,delete (a string or a list), got {shown(value)}")
    if not words:
        raise Refused("must not be empty: write compact, delete or compact,delete")
    for word in words:
        if word not in CLEANUP_POLICIES:
            raise Refused(
                f"allows only compact and delete (e.g. compact,delete or [compact, delete]), got {shown(word)}"
            )
    return frozenset(words)


def _header_name(value: Any) -> str | None:
    """The header that holds a record's version under compaction.strategy=header."""
    if value is None:  # written but empty: as if not set
        return None
    if not isinstance(value, str) or not value.strip():
        raise Refused(f"must be a non-empty header name, got {shown(value)}")
    return value.strip()


def _group_list(value: Any) -> tuple[str, ...]:
    """Consumer group ids: a YAML list, or a comma-separated string as in Kafka's lists."""
    if isinstance(value, str):
        groups = [group.strip() for group in value.split(",")] if value.strip() else []
    elif is_list(value):
        groups = list(value)
    else:
        raise Refused(f"must be a list of consumer group ids, got {shown(value)}")
    for group in groups:
        if not isinstance(group, str) or not group.strip():
            raise Refused(f"must be a list of non-empty consumer group ids, got {shown(group)} in it")
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


def parse_config(checker: Checker, raw: Any) -> tuple[TopicConfig | None, tuple[str, ...], tuple[str, ...]]:
    """The config (None if not even a mapping), the ignored names in file order, and warnings."""
    if raw is None:  # `config:` written with nothing under it
        raw = {}
    if not isinstance(raw, Mapping):
        checker.add(("config",), f"must be a mapping of Kafka topic configs, got {shown(raw)}")
        return None, (), ()
    given: dict[str, Any] = {}
    refused: set[str] = set()
    ignored: list[str] = []
    for name, value in raw.items():
        path = ("config", name)
        if not isinstance(name, str):
            checker.add(path, f"config names are Kafka's (strings), got {shown(name)}", at_key=True)
        elif name in IGNORED_CONFIGS:
            ignored.append(name)
        elif name in _SETTINGS:
            try:
                given[name] = _SETTINGS[name](value)
            except Refused as refusal:
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
    return "unknown config; " + suggestion(name, KNOWN_CONFIGS | IGNORED_CONFIGS, "known config")


def _check_together(checker: Checker, settings: Mapping[str, Any], refused: set[str]) -> None:
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
