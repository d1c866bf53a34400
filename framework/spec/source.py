"""``source.kafka``: the Kafka topic ``ingest`` reads; secrets only as ``${ENV}`` references,
and no option ingest sets itself.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from framework.spec.model import (
    ENV_REFERENCE, KAFKA_OPTIONS_SET_BY_INGEST, KAFKA_READER_OPTIONS, KAFKA_SOURCE_FIELDS, KafkaSource,
    topic_name_problem,
)
from framework.spec.problems import Checker, shown, suggestion
from framework.spec.yaml_source import YamlPath


#: Client settings that hold secrets: only ``${ENV}`` references are accepted for them.
_SECRET_SETTING = re.compile(r"password|secret|jaas\.config|token|credential", re.IGNORECASE)


def parse_source(checker: Checker, raw: Any) -> KafkaSource | None:
    """``source: {kafka: {bootstrap.servers, topic, options}}``."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping) or not raw:
        checker.add(("source",), f"must be a mapping with kafka: {{bootstrap.servers, topic, options}}, got {shown(raw)}")
        return None
    for name in raw:
        if name != "kafka":
            checker.add(("source", name), f"unknown source; {suggestion(str(name), ('kafka',), 'source')} (the only "
                        "source is kafka; without a source, records come from produce)", at_key=True)
    if "kafka" not in raw:
        return None
    kafka = raw["kafka"]
    path: YamlPath = ("source", "kafka")
    if not isinstance(kafka, Mapping):
        checker.add(path, f"must be a mapping with bootstrap.servers, topic and options, got {shown(kafka)}")
        return None
    before = len(checker.problems)
    for name in kafka:
        if name not in KAFKA_SOURCE_FIELDS:
            checker.add(path + (name,), f"unknown field; {suggestion(str(name), KAFKA_SOURCE_FIELDS, 'field')}"
                        f" (source.kafka has {', '.join(KAFKA_SOURCE_FIELDS)})", at_key=True)
    servers = kafka.get("bootstrap.servers")
    if "bootstrap.servers" not in kafka:
        checker.add(path + ("bootstrap.servers",), "is required, e.g. bootstrap.servers: broker1:9092,broker2:9092"
                    " (or ${KAFKA_BOOTSTRAP_SERVERS})")
    elif not isinstance(servers, str) or not servers.strip():
        checker.add(path + ("bootstrap.servers",), f"must be host:port[,host:port...] or ${{ENV_VAR}}, got {shown(servers)}")
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


def _parse_kafka_options(checker: Checker, path: YamlPath, raw: Any) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        checker.add(path, f"must be a mapping of Spark Kafka source options (kafka.* settings), got {shown(raw)}")
        return {}
    options: dict[str, str] = {}
    for name, value in raw.items():
        where = path + (name,)
        if not isinstance(name, str):
            checker.add(where, f"option names are strings, got {shown(name)}", at_key=True)
            continue
        if name in KAFKA_OPTIONS_SET_BY_INGEST:
            checker.add(where, "is set by ingest itself (it reads each partition from the offsets already "
                        "ingested to Kafka's latest, exactly once)", at_key=True)
            continue
        if not name.startswith("kafka.") and name not in KAFKA_READER_OPTIONS:
            checker.add(where, "unknown option; Kafka client settings take the kafka. prefix (e.g. "
                        f"kafka.security.protocol); {suggestion(name, KAFKA_READER_OPTIONS, 'reader option')}",
                        at_key=True)
            continue
        if isinstance(value, bool):
            value = "true" if value else "false"
        elif isinstance(value, (int, float)):
            value = str(value)
        if not isinstance(value, str):
            checker.add(where, f"must be a string, number or boolean, got {shown(value)}")
            continue
        if _SECRET_SETTING.search(name) and not ENV_REFERENCE.search(value):
            checker.add(where, "holds a secret: write a ${ENV_VAR} reference, read when ingest runs "
                        "(secrets never live in a spec checked into git)")
            continue
        _check_env_references(checker, where, value)
        options[name] = value
    return options


def _check_env_references(checker: Checker, path: YamlPath, value: str) -> None:
    """Every ``${`` opens a well-formed ``${NAME}`` reference."""
    if value.count("${") != len(ENV_REFERENCE.findall(value)):
        checker.add(path, f"a ${{...}} reference must be ${{NAME}} with NAME of letters, digits and _, got {shown(value)}")
