"""A spec document, parsed: the top-level fields, the topic name, partitions and record
types, and the sections each module above checks; every problem of a file at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from framework.spec.configs import parse_config
from framework.spec.expectations import parse_expectations
from framework.spec.model import (
    IGNORED_CONFIGS, KNOWN_CONFIGS, RECORD_TYPES, SPEC_FIELDS, TopicSpec, topic_name_problem,
)
from framework.spec.problems import Checker, shown, suggestion
from framework.spec.source import parse_source
from framework.spec.yaml_source import Marks


def parse_spec(data: Any, source: str, marks: Marks | None = None) -> TopicSpec:
    """Validate an already-loaded spec mapping; raise SpecError listing every problem."""
    checker = Checker(source, marks or Marks())
    if data is None:
        checker.add((), "the spec is empty; it needs at least topic and partitions")
        checker.raise_if_any()
    if not isinstance(data, Mapping):
        checker.add((), f"a spec must be a mapping with topic, partitions and config, got {shown(data)}")
        checker.raise_if_any()
    if "spec" in data and "steps" in data and "topic" not in data:
        checker.add((), "this is a scenario file (it has spec and steps); run it with topiclake simulate")
        checker.raise_if_any()
    _check_fields(checker, data)
    topic = _parse_topic(checker, data)
    partitions = _parse_partitions(checker, data)
    key_type = _parse_record_type(checker, data, "key")
    value_type = _parse_record_type(checker, data, "value")
    config, ignored, warnings = parse_config(checker, data.get("config"))
    expectations = parse_expectations(checker, data.get("expectations"))
    kafka_source = parse_source(checker, data.get("source"))
    checker.raise_if_any()
    return TopicSpec(
        topic=topic, partitions=partitions, key_type=key_type, value_type=value_type,
        config=config, expectations=expectations, ignored_configs=ignored,
        warnings=warnings, source=source, kafka_source=kafka_source,
    )


def _check_fields(checker: Checker, data: Mapping[Any, Any]) -> None:
    for name in data:
        if name in SPEC_FIELDS:
            continue
        if not isinstance(name, str):
            checker.add((name,), f"field names must be strings, got {shown(name)}", at_key=True)
        elif name in KNOWN_CONFIGS or name in IGNORED_CONFIGS:
            checker.add((name,), "is a Kafka topic config: put it under config:", at_key=True)
        else:
            checker.add((name,), f"unknown field; {suggestion(name, SPEC_FIELDS, 'field')}"
                        f" (a spec has {', '.join(SPEC_FIELDS)})", at_key=True)
    for required, example in (("topic", "topic: orders"), ("partitions", "partitions: 3")):
        if required not in data:
            checker.add((required,), f"is required, e.g. {example}")


def _parse_topic(checker: Checker, data: Mapping[Any, Any]) -> str:
    topic = data.get("topic")
    if "topic" not in data:
        return ""
    problem = topic_name_problem(topic)
    if problem is not None:
        checker.add(("topic",), problem)
    return topic if isinstance(topic, str) else ""


def _parse_partitions(checker: Checker, data: Mapping[Any, Any]) -> int:
    if "partitions" not in data:
        return 1
    partitions = data["partitions"]
    if isinstance(partitions, bool) or not isinstance(partitions, int):
        checker.add(("partitions",), f"must be an integer >= 1, got {shown(partitions)}")
        return 1
    if partitions < 1:
        checker.add(("partitions",), f"must be >= 1 (partition p is table <topic>-p), got {partitions}")
    return partitions


def _parse_record_type(checker: Checker, data: Mapping[Any, Any], part: str) -> str:
    """`key` or `value`: a mapping with only `type`, string or binary (default string)."""
    raw = data.get(part)
    if raw is None:
        return "string"
    if not isinstance(raw, Mapping):
        checker.add((part,), f"must be a mapping like {{type: string}} (string or binary), got {shown(raw)}")
        return "string"
    for name in raw:
        if name != "type":
            checker.add((part, name), f"unknown field; {part} has only type (string or binary)", at_key=True)
    record_type = raw.get("type", "string")
    if record_type not in RECORD_TYPES:
        checker.add((part, "type"), f"must be string or binary, got {shown(record_type)}")
        return "string"
    return record_type
