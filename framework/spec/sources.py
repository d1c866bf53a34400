"""``source:``: where a topic's records come from when not from ``produce`` (Kafka)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Annotated, Any, ClassVar

from pydantic import AfterValidator, BeforeValidator, Field, WithJsonSchema

from framework.spec import values
from framework.spec.fragments import ENV_SAFE, SERVERS_SCHEMA, TOPIC_NAME_SCHEMA
from framework.spec.names import KAFKA_OPTIONS_SET_BY_INGEST, KAFKA_READER_OPTIONS, KAFKA_SOURCE_FIELDS
from framework.spec.problems import Section, broken, checked, detail, rule, shown, suggestion

__all__ = ["KafkaSource", "SourceDocument"]


def _options(value: Any) -> Mapping[str, str]:
    """``source.kafka.options``: each name and value checked, every problem reported."""
    if value is None:
        return MappingProxyType({})
    if not isinstance(value, Mapping):
        raise rule(f"must be a mapping of Spark Kafka source options (kafka.* settings), got {shown(value)}")
    options, problems = {}, []
    for name, option in value.items():
        problem = values.option_name_problem(name)
        if problem is not None:
            problems.append(detail((name,), rule(problem, at_key=True), name))
            continue
        try:
            options[name] = values.option_value(name, option)
        except values.Refused as refusal:
            problems.append(detail((name,), rule(str(refusal)), option))
    if problems:
        raise broken("options", problems)
    return MappingProxyType(options)


def _options_schema() -> dict[str, Any]:
    """Spark Kafka source options: kafka.* client settings or the reader's own, never one
    ingest sets; a secret only as a ${NAME} reference."""
    secret = "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else c for c in values.SECRET_SETTING.pattern)
    plain = {"type": "string", "pattern": f"^{ENV_SAFE}$"}
    return {
        "type": "object",
        "propertyNames": {"anyOf": [{"pattern": "^kafka[.]"}, {"enum": sorted(KAFKA_READER_OPTIONS)}],
                          "not": {"enum": sorted(KAFKA_OPTIONS_SET_BY_INGEST)}},
        "patternProperties": {secret: {**plain, "pattern": f"^{ENV_SAFE}\\$\\{{[A-Za-z_][A-Za-z0-9_]*\\}}{ENV_SAFE}$"}},
        "additionalProperties": {"anyOf": [plain, {"type": ["number", "boolean"]}]},
    }


class KafkaSource(Section):
    """``source.kafka``: the Kafka topic whose records ``ingest`` appends, with Kafka's offsets.

    Values may hold ``${ENV}`` references, read when ingest runs: secrets never live in a spec.
    """

    REQUIRED: ClassVar[Mapping[str, str]] = MappingProxyType({"bootstrap.servers": "bootstrap.servers: broker1:9092,broker2:9092"
                                                      " (or ${KAFKA_BOOTSTRAP_SERVERS})"})

    bootstrap_servers: Annotated[str, BeforeValidator(checked(values.bootstrap_servers)),
                                 WithJsonSchema(SERVERS_SCHEMA)] = Field(
        alias="bootstrap.servers", description="host:port[,host:port...] or ${ENV_VAR}")
    #: the Kafka topic; None means the spec's own topic name
    topic: Annotated[str | None, BeforeValidator(checked(values.topic_name, optional=True)),
                     WithJsonSchema({"anyOf": [TOPIC_NAME_SCHEMA, {"type": "null"}]})] = None
    #: passed to Spark's Kafka source (``kafka.*`` are the Kafka client's settings)
    options: Annotated[Mapping[str, str], BeforeValidator(_options), AfterValidator(MappingProxyType),
                       WithJsonSchema(_options_schema())] = Field(
        default_factory=lambda: MappingProxyType({}))

    MAPPING: ClassVar[str] = " with bootstrap.servers, topic and options"

    @classmethod
    def unknown_field(cls, name: str) -> str | None:
        return (f"unknown field; {suggestion(name, KAFKA_SOURCE_FIELDS, 'field')}"
                f" (source.kafka has {', '.join(KAFKA_SOURCE_FIELDS)})")

    def __hash__(self) -> int:
        return hash((self.bootstrap_servers, self.topic, tuple(sorted(self.options.items()))))

    def to_dict(self) -> dict[str, Any]:
        written: dict[str, Any] = {"bootstrap.servers": self.bootstrap_servers}
        if self.topic is not None:
            written["topic"] = self.topic
        if self.options:
            written["options"] = dict(self.options)
        return written


class SourceDocument(Section):
    """``source:``: where the records come from when not from ``produce``."""

    kafka: KafkaSource | None = None

    MAPPING: ClassVar[str] = " with kafka: {bootstrap.servers, topic, options}"

    @classmethod
    def unknown_field(cls, name: str) -> str | None:
        return (f"unknown source; {suggestion(name, ('kafka',), 'source')} (the only "
                "source is kafka; without a source, records come from produce)")

