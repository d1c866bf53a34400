"""The spec model: pydantic v2 models, frozen, that refuse unknown names.

``SpecDocument`` is the YAML file's shape (the JSON Schema of ``topiclake schema`` is
generated from it), built from its sections: ``TopicConfig`` (``topic_config.py``, Kafka's
dotted names as aliases), ``ExpectationSpec``, ``SourceDocument`` (``sources.py``),
``RecordFormat`` and ``TableLocation``. ``TopicSpec`` is what the engine reads. Each
field's rule is a value parser of ``values.py``; rules between fields are each section's
:meth:`~framework.spec.problems.Section.together`.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    WithJsonSchema,
    model_validator,
)
from pydantic.json_schema import SkipJsonSchema

from framework.errors import ArgumentError, Problem, SpecError
from framework.spec import values
from framework.spec.fragments import NOT_BLANK, TOPIC_NAME_SCHEMA
from framework.spec.names import (
    EXPECTATION_FIELDS,
    IGNORED_CONFIGS,
    KNOWN_CONFIGS,
    RECORD_TYPES,
    SPEC_FIELDS,
)
from framework.spec.problems import Section, broken, checked, detail, rule, shown, suggestion
from framework.spec.sources import KafkaSource, SourceDocument
from framework.spec.topic_config import TopicConfig

__all__ = ["ExpectationSpec", "KafkaSource", "SpecDocument", "TopicConfig", "TopicSpec", "colliding_name"]



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


def _string_keyed(value: Any) -> Mapping[str, Any]:
    """kwargs and meta: a mapping with string names, frozen; each name problem reported."""
    mapping = checked(values.string_keyed)(value)
    names = [detail((name,), rule(f"names must be strings, got {shown(name)}", at_key=True), name)
             for name in mapping if not isinstance(name, str)]
    if names:
        raise broken("mapping", names)
    return _freeze(mapping)


_EXPECTATION_TYPE_SCHEMA = {"type": "string", "pattern": "^(expect_[a-z0-9_]+|unexpected_rows_expectation)$",
                            "examples": ["expect_column_values_to_not_be_null"]}
_MAPPING_SCHEMA = {"type": "object"}


class ExpectationSpec(Section):
    """One extra Great Expectations check on the partition tables, as written in the spec."""

    REQUIRED: ClassVar[Mapping[str, str]] = MappingProxyType({"type": "type: expect_column_values_to_not_be_null"})

    type: Annotated[str, BeforeValidator(checked(values.expectation_type)), WithJsonSchema(_EXPECTATION_TYPE_SCHEMA)]
    kwargs: Annotated[Mapping[str, Any], BeforeValidator(_string_keyed), AfterValidator(_freeze),
                      WithJsonSchema(_MAPPING_SCHEMA)] = Field(
        default_factory=lambda: MappingProxyType({}))
    meta: Annotated[Mapping[str, Any], BeforeValidator(_string_keyed), AfterValidator(_freeze),
                      WithJsonSchema(_MAPPING_SCHEMA)] = Field(
        default_factory=lambda: MappingProxyType({}))
    #: where it was written (not part of what it means)
    line: SkipJsonSchema[int | None] = Field(default=None, exclude=True)

    MAPPING: ClassVar[str] = " with type, kwargs and meta"

    @classmethod
    def unknown_field(cls, name: str) -> str | None:
        said = f"unknown field; an expectation has only type, kwargs and meta; {suggestion(name, EXPECTATION_FIELDS, 'field')}"
        if name == "expectation_type":
            said += " (Great Expectations 0.x's expectation_type is type in 1.x)"
        return said

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ExpectationSpec):
            return NotImplemented
        return (self.type, _thaw(self.kwargs), _thaw(self.meta)) == (other.type, _thaw(other.kwargs), _thaw(other.meta))

    __hash__ = None  # type: ignore[assignment]  # kwargs and meta are mappings

    def to_dict(self) -> dict[str, Any]:
        """Plain dicts and lists, as Great Expectations' ExpectationConfiguration takes them."""
        written: dict[str, Any] = {"type": self.type, "kwargs": _thaw(self.kwargs)}
        if self.meta:
            written["meta"] = _thaw(self.meta)
        return written




class RecordFormat(Section):
    """``key:`` or ``value:``: the record part's type."""

    PART: ClassVar[str] = "key"
    type: Annotated[Literal[RECORD_TYPES], BeforeValidator(checked(values.record_type))] = "string"

    MAPPING: ClassVar[str] = " like {type: string} (string or binary)"

    @classmethod
    def unknown_field(cls, name: str) -> str | None:
        return f"unknown field; {cls.PART} has only type (string or binary)"


class ValueFormat(RecordFormat):
    PART: ClassVar[str] = "value"


def _expectations(value: Any) -> Any:
    if value is None:
        return ()
    if not values.is_list(value):
        raise rule(f"must be a list of {{type, kwargs, meta}} mappings, got {shown(value)}")
    return value


def quoted(*parts: str) -> str:
    """A multi-part table name as Spark SQL takes it: each part in backticks (doubled inside)."""
    return ".".join("`" + part.replace("`", "``") + "`" for part in parts)


class TableLocation(Section):
    """``table:``: the partition tables are also catalog tables, named
    ``<catalog>.<schema>.`<topic>_<p>` `` (CONTRACT section 2)."""

    REQUIRED: ClassVar[Mapping[str, str]] = MappingProxyType({"schema": "schema: kafka"})

    catalog: Annotated[str | None, BeforeValidator(checked(values.catalog_name, optional=True)),
                       WithJsonSchema({"anyOf": [{"type": "string", "pattern": NOT_BLANK}, {"type": "null"}]})] = Field(
        None, description="the catalog (default: the session's current one)")
    schema_name: Annotated[str, BeforeValidator(checked(values.catalog_name)),
                           WithJsonSchema({"type": "string", "pattern": NOT_BLANK})] = Field(
        alias="schema", description="the schema (database) that holds the tables")

    MAPPING: ClassVar[str] = " with schema (and catalog)"

    @classmethod
    def unknown_field(cls, name: str) -> str | None:
        return f"unknown field; {suggestion(name, ('catalog', 'schema'), 'field')} (table has catalog and schema)"

    @property
    def namespace(self) -> str:
        """``catalog.schema`` (or ``schema``), quoted."""
        return quoted(*([self.catalog] if self.catalog else []), self.schema_name)

    def table(self, name: str) -> str:
        """A table of this schema, its name quoted."""
        return f"{self.namespace}.{quoted(name)}"

    def to_dict(self) -> dict[str, Any]:
        return {**({"catalog": self.catalog} if self.catalog else {}), "schema": self.schema_name}


class SpecDocument(Section):
    """A spec file: one topic, its partitions, record types, configs, checks and source."""

    model_config = ConfigDict(title="topiclake topic spec")
    REQUIRED: ClassVar[Mapping[str, str]] = MappingProxyType({"topic": "topic: orders", "partitions": "partitions: 3"})

    topic: Annotated[str, BeforeValidator(checked(values.topic_name)),
                     WithJsonSchema({**TOPIC_NAME_SCHEMA, "description": "Kafka's topic name"})]
    partitions: Annotated[int, Field(ge=1, description="partition p is its own Delta table <topic>-p"),
                          BeforeValidator(checked(values.partition_count))]
    key: RecordFormat = RecordFormat()
    value: ValueFormat = ValueFormat()
    config: TopicConfig = TopicConfig()
    expectations: Annotated[tuple[ExpectationSpec, ...], BeforeValidator(_expectations)] = ()
    source: SourceDocument | None = None
    table: TableLocation | None = None

    @classmethod
    def unknown_field(cls, name: str) -> str | None:
        if name in KNOWN_CONFIGS or name in IGNORED_CONFIGS:
            return "is a Kafka topic config: put it under config:"
        return f"unknown field; {suggestion(name, SPEC_FIELDS, 'field')} (a spec has {', '.join(SPEC_FIELDS)})"


class TopicSpec(BaseModel):
    """One topic as the engine reads it: partitions, record types, configs, expectations.

    Equality compares what the spec means: not `source` (the file it came from), and not
    `ignored_configs`, which name settings that mean nothing for a table.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    topic: str
    partitions: int
    key_type: Literal[RECORD_TYPES] = "string"
    value_type: Literal[RECORD_TYPES] = "string"
    config: TopicConfig = TopicConfig()
    expectations: tuple[ExpectationSpec, ...] = ()
    ignored_configs: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    source: str = "<spec>"
    #: where the records come from when not from ``produce`` (CONTRACT section 3)
    kafka_source: KafkaSource | None = None
    #: the catalog schema that names the partition tables too, if any
    table: TableLocation | None = None

    @model_validator(mode="before")
    @classmethod
    def _legal_topic(cls, data: Any) -> Any:
        problem = values.topic_name_problem(data.get("topic")) if isinstance(data, Mapping) else None
        if problem is not None:  # a spec built in Python gets the rule the YAML reader applies
            raise SpecError([Problem(data.get("source", "<spec>"), None, None, "topic", problem)])
        return data

    def _meaning(self) -> tuple:
        return (self.topic, self.partitions, self.key_type, self.value_type, self.config, self.expectations,
                self.warnings, self.kafka_source, self.table)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TopicSpec):
            return NotImplemented
        return self._meaning() == other._meaning()

    __hash__ = None  # type: ignore[assignment]  # expectations hold mappings

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
        if self.table is not None:
            written["table"] = self.table.to_dict()
        return written

    def catalog_table(self, partition: int) -> str | None:
        """Partition ``partition``'s catalog table, ``<catalog>.<schema>.`<topic>_<p>` ``, quoted;
        None without ``table:``."""
        self.table_name(partition)  # the range check
        return None if self.table is None else self.table.table(f"{self.topic}_{partition}")


def colliding_name(topic: str) -> str:
    """What two topic names must not share in one warehouse: Kafka refuses topics that differ
    only by '.' against '_' (their metric names collide), and a case-insensitive file system
    (macOS, Windows, some object-store gateways) would give topics that differ only by case
    one folder."""
    return topic.lower().replace(".", "_")
