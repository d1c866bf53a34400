"""Each value a spec may hold, read as Kafka reads it and checked against its rule.

Every function takes the value as written in YAML and returns it typed, or raises
:class:`Refused` with the rule said to the user; the pydantic models of ``model.py`` run
them as their fields' validators, so each rule is written once.
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
import math
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Callable

from framework import user_cache
from framework.spec.names import (
    CLEANUP_POLICIES,
    COMPACTION_STRATEGIES,
    ENV_REFERENCE,
    KAFKA_OPTIONS_SET_BY_INGEST,
    KAFKA_READER_OPTIONS,
    LONG_MAX,
    LONG_MIN,
    MIB,
    RECORD_TYPES,
    TIMESTAMP_TYPES,
    TOPIC_MAX_LENGTH,
    TOPIC_NAME,
)
from framework.spec.problems import Refused, shown, suggestion

_DECIMAL_INTEGER = re.compile(r"[+-]?[0-9]+")
_DECIMAL_NUMBER = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")


def is_list(value: Any) -> bool:
    return isinstance(value, (list, tuple))


def long_value(value: Any) -> int:
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


def long_at_least(minimum: int, meaning: str = "") -> Callable[[Any], int]:
    def parse(value: Any) -> int:
        number = long_value(value)
        if number < minimum:
            note = f" ({meaning})" if meaning else ""
            raise Refused(f"must be >= {minimum}{note}, got {number}")
        return number
    return parse


def ratio(value: Any) -> float:
    """Kafka's DOUBLE in [0, 1]: a YAML number or a numeric string."""
    if isinstance(value, str) and _DECIMAL_NUMBER.fullmatch(value.strip()):
        value = float(value.strip())
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise Refused(f"must be a number from 0 to 1, got {shown(value)}")
    if not 0 <= value <= 1:
        raise Refused(f"must be from 0 to 1 (a fraction of the partition's bytes), got {value}")
    return float(value)


def one_of(*allowed: str) -> Callable[[Any], str]:
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


def cleanup_policy(value: Any) -> frozenset[str]:
    """"compact", "delete", "compact,delete" (any order, Kafka's "[...]" too) or a YAML list."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("[") and text.endswith("]"):
            text = text[1:-1]
        words = [word.strip() for word in text.split(",")] if text.strip() else []
    elif is_list(value) or isinstance(value, (set, frozenset)):
        words = sorted(value, key=str)
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


def header_name(value: Any) -> str | None:
    """The header that holds a record's version under compaction.strategy=header."""
    if value is None:  # written but empty: as if not set
        return None
    if not isinstance(value, str) or not value.strip():
        raise Refused(f"must be a non-empty header name, got {shown(value)}")
    return value.strip()


def group_list(value: Any) -> tuple[str, ...]:
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


#: How each known config is read; the rules between settings are ``TopicConfig.together``.
SETTINGS: Mapping[str, Callable[[Any], Any]] = MappingProxyType({
    "cleanup.policy": cleanup_policy,
    "min.compaction.lag.ms": long_at_least(0),
    "max.compaction.lag.ms": long_at_least(1),
    "min.cleanable.dirty.ratio": ratio,
    "delete.retention.ms": long_at_least(0),
    "retention.ms": long_at_least(-1, "-1 means unlimited"),
    "retention.bytes": long_at_least(-1, "-1 means unlimited"),
    "message.timestamp.type": one_of(*TIMESTAMP_TYPES),
    "compaction.strategy": one_of(*COMPACTION_STRATEGIES),
    "compaction.strategy.header": header_name,
    "consumed.retention.ms": long_at_least(-1, "-1 means off"),
    "consumed.retention.groups": group_list,
    "time.travel.retention.ms": long_at_least(0),
    # Kafka 4 refuses segments under 1 MiB; a data file that small would not pay either
    "segment.bytes": long_at_least(MIB, "Kafka's minimum, 1 MiB"),
})


def topic_name_problem(topic: Any) -> str | None:
    """Why ``topic`` is not a legal topic name (Kafka's ``Topic.validate``), or None.

    The one rule: the YAML reader, :class:`TopicSpec` and the warehouse's paths all ask it,
    so no table path is ever built from a name that could leave the warehouse.
    """
    if not isinstance(topic, str):
        return f"must be a string (quote it if it looks like a number), got {shown(topic)}"
    if topic in (".", ".."):
        return f"cannot be {topic!r} (Kafka refuses it)"
    if not 1 <= len(topic) <= TOPIC_MAX_LENGTH:
        return f"must be 1 to {TOPIC_MAX_LENGTH} characters long, got {len(topic)}"
    if not TOPIC_NAME.fullmatch(topic):
        return f"may use only A-Z, a-z, 0-9, '.', '_' and '-' (Kafka's legal topic names), got {topic!r}"
    return None


def topic_name(value: Any) -> str:
    """A legal Kafka topic name (:func:`topic_name_problem`)."""
    problem = topic_name_problem(value)
    if problem is not None:
        raise Refused(problem)
    return value


def catalog_name(value: Any) -> str:
    """A catalog or schema name: any text (it is always quoted), but not blank."""
    if not isinstance(value, str) or not value.strip():
        raise Refused(f"must be a non-empty name, got {shown(value)}")
    return value


def partition_count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise Refused(f"must be an integer >= 1, got {shown(value)}")
    if value < 1:
        raise Refused(f"must be >= 1 (partition p is table <topic>-p), got {value}")
    return value


def record_type(value: Any) -> str:
    if value not in RECORD_TYPES:
        raise Refused(f"must be string or binary, got {shown(value)}")
    return value


_SNAKE_CASE = re.compile(r"[a-z][a-z0-9_]*")
_UNEXPECTED_ROWS = "unexpected_rows_expectation"


@functools.lru_cache(maxsize=1)
def known_expectation_types() -> frozenset[str] | None:
    """The expectation types the installed great_expectations registers (its public
    registry), or None if it is not installed.

    Importing great_expectations takes seconds, too long for a git hook's lint, so the
    list is kept per installed version in topiclake's cache folder (:mod:`framework.user_cache`).
    """
    version = _installed_gx_version()
    if version is None:
        return None
    cache = user_cache.folder() / f"gx-expectation-types-{version}.json"
    try:
        return frozenset(json.loads(cache.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        pass
    names = _registered_expectation_types()
    user_cache.write_whole(cache, json.dumps(sorted(names)))  # a read-only home: ask the registry each time
    return names


def _installed_gx_version() -> str | None:
    try:
        return importlib.metadata.version("great_expectations")
    except importlib.metadata.PackageNotFoundError:
        return None


def _registered_expectation_types() -> frozenset[str]:
    import great_expectations.expectations  # noqa: F401 - importing it registers the core expectations
    from great_expectations.expectations.registry import list_registered_expectation_implementations

    return frozenset(name for name in list_registered_expectation_implementations() if _is_expectation_name(name))


def _is_expectation_name(name: str) -> bool:
    return name.startswith("expect_") or name == _UNEXPECTED_ROWS


def _snake_case(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def expectation_type(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise Refused(f"must name an expectation, e.g. expect_column_values_to_not_be_null, got {shown(value)}")
    if not _SNAKE_CASE.fullmatch(value):
        raise Refused(f"must be the snake_case name, e.g. {_snake_case(value)}, got {shown(value)}")
    if not _is_expectation_name(value):
        raise Refused(f"must start with expect_ (or be {_UNEXPECTED_ROWS}), got {shown(value)}")
    known = known_expectation_types()
    if known is not None and value not in known:
        raise Refused(
            f"is not an expectation the installed great_expectations has, got {shown(value)};"
            f" {suggestion(value, known, 'one')}"
        )
    return value


def string_keyed(value: Any) -> dict[str, Any]:
    """An expectation's kwargs or meta: a mapping with string names (None: empty)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise Refused(f"must be a mapping, got {shown(value)}")
    return dict(value)


#: Client settings that hold secrets: only ``${ENV}`` references are accepted for them.
SECRET_SETTING = re.compile(r"password|secret|jaas\.config|token|credential", re.IGNORECASE)


def bootstrap_servers(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise Refused(f"must be host:port[,host:port...] or ${{ENV_VAR}}, got {shown(value)}")
    env_references(value)
    return value.strip()


def option_name_problem(name: Any) -> str | None:
    """Why ``name`` may not be a ``source.kafka.options`` name, or None."""
    if not isinstance(name, str):
        return f"option names are strings, got {shown(name)}"
    if name in KAFKA_OPTIONS_SET_BY_INGEST:
        return ("is set by ingest itself (it reads each partition from the offsets already "
                "ingested to Kafka's latest, exactly once)")
    if not name.startswith("kafka.") and name not in KAFKA_READER_OPTIONS:
        return ("unknown option; Kafka client settings take the kafka. prefix (e.g. "
                f"kafka.security.protocol); {suggestion(name, KAFKA_READER_OPTIONS, 'reader option')}")
    return None


def option_value(name: str, value: Any) -> str:
    """A Spark Kafka source option's value, as text; a secret only as a ``${ENV}`` reference."""
    if isinstance(value, bool):
        value = "true" if value else "false"
    elif isinstance(value, (int, float)):
        value = str(value)
    if not isinstance(value, str):
        raise Refused(f"must be a string, number or boolean, got {shown(value)}")
    if SECRET_SETTING.search(name) and not ENV_REFERENCE.search(value):
        raise Refused("holds a secret: write a ${ENV_VAR} reference, read when ingest runs "
                      "(secrets never live in a spec checked into git)")
    env_references(value)
    return value


def env_references(value: str) -> None:
    """Every ``${`` opens a well-formed ``${NAME}`` reference."""
    if value.count("${") != len(ENV_REFERENCE.findall(value)):
        raise Refused(f"a ${{...}} reference must be ${{NAME}} with NAME of letters, digits and _, got {shown(value)}")
