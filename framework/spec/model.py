"""The spec model: pydantic v2 models, frozen, that refuse unknown names.

``TopicConfig`` holds Kafka's topic configs under their Python names with Kafka's dotted
names as aliases; ``SpecDocument`` is the YAML file's shape (the JSON Schema of
``topiclake schema`` is generated from it); ``TopicSpec`` is what the engine reads. Each
field's rule is a value parser of ``values.py``; rules between fields are each section's
:meth:`~framework.spec.problems.Section.together`.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Annotated, Any, ClassVar, Literal

from pydantic.json_schema import SkipJsonSchema
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, WithJsonSchema, model_validator

from framework.errors import ArgumentError, Problem, SpecError
from framework.spec import values
from framework.spec.names import (
    CLEANUP_POLICIES, COMPACTION_STRATEGIES, EXPECTATION_FIELDS, IGNORED_CONFIGS, KAFKA_DEFAULTS, KAFKA_OPTIONS_SET_BY_INGEST,
    KAFKA_READER_OPTIONS, KAFKA_SOURCE_FIELDS, KNOWN_CONFIGS, LONG_MAX, MIB, RECORD_TYPES, SPEC_FIELDS, TIMESTAMP_TYPES, TOPIC_MAX_LENGTH, WEEK_MS,
)
from framework.spec.problems import Checker, Section, broken, checked, detail, rule, shown, suggestion
from framework.spec.yaml_source import Marks

__all__ = ["ExpectationSpec", "KafkaSource", "SpecDocument", "TopicConfig", "TopicSpec", "colliding_name"]


def _long(minimum: int, meaning: str = "", **schema: Any) -> Any:
    """Kafka's LONG from ``minimum`` up: a YAML integer, or digits as in a properties file."""
    return Annotated[int, Field(ge=minimum, le=LONG_MAX, **schema), BeforeValidator(checked(
        values.long_at_least(minimum, meaning)))]


def _config(name: str, description: str) -> Any:
    return Field(default=KAFKA_DEFAULTS[name], alias=name, description=description)


_POLICY_SCHEMA = {"anyOf": [
    {"type": "string", "enum": ["compact", "delete", "compact,delete", "delete,compact"]},
    {"type": "array", "items": {"enum": list(CLEANUP_POLICIES)}, "minItems": 1, "uniqueItems": True}]}
#: Where the schema is stricter than lint (a schema-valid spec always lints clean): group
#: lists as YAML lists, names and servers with something besides spaces, ${NAME} references.
_NOT_BLANK = r"\S"
_GROUPS_SCHEMA = {"type": "array", "items": {"type": "string", "pattern": _NOT_BLANK}, "uniqueItems": True}
_ENV_SAFE = r"(?:[^$]|\$\{[A-Za-z_][A-Za-z0-9_]*\})*"
_SERVERS_SCHEMA = {"type": "string", "pattern": "^\\s*(?:[^\\s$]|\\$\\{[A-Za-z_][A-Za-z0-9_]*\\})" + _ENV_SAFE + "$",
                   "examples": ["broker1:9092,broker2:9092", "${KAFKA_BOOTSTRAP_SERVERS}"]}
_TOPIC_NAME_SCHEMA = {"type": "string", "minLength": 1, "maxLength": TOPIC_MAX_LENGTH, "pattern": "^[A-Za-z0-9._-]+$",
                      # "\n": a regex's $ also matches before a final newline in some engines (Python's)
                      "not": {"anyOf": [{"enum": [".", ".."]}, {"pattern": "\n"}]}}


class TopicConfig(Section):
    """A topic's Kafka configs (``config:``), validated, with every default filled in."""

    cleanup_policy: Annotated[frozenset[str], BeforeValidator(checked(values.cleanup_policy)),
                              WithJsonSchema(_POLICY_SCHEMA)] = Field(
        frozenset({"delete"}), alias="cleanup.policy", description="compact, delete or both (Kafka's cleanup.policy)")
    min_compaction_lag_ms: _long(0) = _config("min.compaction.lag.ms", "KIP-58: records younger stay dirty")
    max_compaction_lag_ms: _long(1) = _config("max.compaction.lag.ms", "KIP-354: compaction is due this late")
    min_cleanable_dirty_ratio: Annotated[float, Field(ge=0, le=1), BeforeValidator(checked(values.ratio))] = _config("min.cleanable.dirty.ratio", "compaction is due when this fraction of the bytes is dirty")
    delete_retention_ms: _long(0) = _config("delete.retention.ms", "how long a tombstone stays readable")
    retention_ms: _long(-1, "-1 means unlimited") = _config("retention.ms", "time retention; -1: unlimited")
    retention_bytes: _long(-1, "-1 means unlimited") = _config("retention.bytes", "size retention; -1: unlimited")
    message_timestamp_type: Annotated[Literal[TIMESTAMP_TYPES], BeforeValidator(checked(values.one_of(
        *TIMESTAMP_TYPES)))] = _config("message.timestamp.type", "CreateTime or LogAppendTime")
    compaction_strategy: Annotated[Literal[COMPACTION_STRATEGIES], BeforeValidator(checked(values.one_of(
        *COMPACTION_STRATEGIES)))] = _config("compaction.strategy", "KIP-280: who wins: offset, timestamp or header")
    compaction_strategy_header: Annotated[str | None, Field(pattern=_NOT_BLANK), BeforeValidator(checked(
        values.header_name))] = _config("compaction.strategy.header", "KIP-280: the header holding the version")
    consumed_retention_ms: _long(-1, "-1 means off") = _config("consumed.retention.ms", "KIP-68: remove what every group consumed this long ago; -1: off")
    consumed_retention_groups: Annotated[tuple[str, ...], BeforeValidator(checked(values.group_list)),
                                         WithJsonSchema(_GROUPS_SCHEMA)] = _config("consumed.retention.groups", "KIP-68: the consumer groups that must have consumed a record")
    time_travel_retention_ms: _long(0) = Field(
        WEEK_MS, alias="time.travel.retention.ms",
        description="Delta time travel kept (default: a week, or min.compaction.lag.ms when longer)")
    # Kafka 4 refuses segments under 1 MiB; a data file that small would not pay either
    segment_bytes: _long(MIB, "Kafka's minimum, 1 MiB") = _config("segment.bytes", "the target data-file size of bin-packing")

    @classmethod
    def not_a_mapping(cls, value: Any) -> str:
        return f"must be a mapping of Kafka topic configs, got {shown(value)}"

    @classmethod
    def not_a_string(cls, name: Any) -> str:
        return f"config names are Kafka's (strings), got {shown(name)}"

    @classmethod
    def unknown_field(cls, name: str) -> str | None:
        if name in IGNORED_CONFIGS:
            return None  # a real topic's config pasted in: accepted, and listed by lint
        if name in SPEC_FIELDS:
            return f"{name} is a top-level field of the spec, not a config"
        return "unknown config; " + suggestion(name, KNOWN_CONFIGS | IGNORED_CONFIGS, "known config")

    @classmethod
    def prepare(cls, data: dict[str, Any]) -> dict[str, Any]:
        names = {"time.travel.retention.ms", "time_travel_retention_ms"}
        if names.isdisjoint(data):  # the window protects what min.compaction.lag.ms keeps dirty
            raw = data.get("min.compaction.lag.ms", data.get("min_compaction_lag_ms", 0))
            try:
                min_lag = values.long_at_least(0)(raw)
            except values.Refused:
                min_lag = 0
            data = {**data, "time.travel.retention.ms": max(WEEK_MS, min_lag)}
        return data

    def together(self, refused: frozenset[str]) -> list[tuple[str, Any]]:
        def valid(*names: str) -> bool:
            return refused.isdisjoint(names)

        broken_rules = []
        min_lag, max_lag = self.min_compaction_lag_ms, self.max_compaction_lag_ms
        if valid("min.compaction.lag.ms", "max.compaction.lag.ms") and max_lag < min_lag:
            # As Kafka refuses at topic creation (KIP-354).
            broken_rules.append(("max.compaction.lag.ms", rule(
                f"must be >= min.compaction.lag.ms ({min_lag}), got {max_lag}")))
        if valid("min.compaction.lag.ms", "time.travel.retention.ms") and self.time_travel_retention_ms < min_lag:
            broken_rules.append(("time.travel.retention.ms", rule(
                f"must be >= min.compaction.lag.ms ({min_lag}), got {self.time_travel_retention_ms}:"
                " older table versions would otherwise be vacuumed while min.compaction.lag.ms still protects them")))
        if (valid("compaction.strategy", "compaction.strategy.header") and self.compaction_strategy == "header"
                and self.compaction_strategy_header is None):
            broken_rules.append(("compaction.strategy.header", rule(
                "is required when compaction.strategy is header: name the record header that holds"
                " the version, e.g. compaction.strategy.header: version (KIP-280)", place="compaction.strategy")))
        return broken_rules

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
        settings = self.model_dump(by_alias=True, exclude={"compaction_strategy_header"} if
                                   self.compaction_strategy_header is None else set())
        settings["cleanup.policy"] = ",".join(p for p in CLEANUP_POLICIES if p in self.cleanup_policy)
        settings["consumed.retention.groups"] = list(self.consumed_retention_groups)
        return settings

    @classmethod
    def from_kafka(cls, settings: Mapping[str, Any] | None = None, source: str = "<config>") -> TopicConfig:
        """Validate Kafka-named settings (the `config:` of a spec); raise SpecError."""
        checker = Checker(source, Marks())
        try:
            return cls.model_validate(settings)
        except ValidationError as error:
            checker.add_errors(error, ("config",))
        checker.raise_if_any()
        raise AssertionError("unreachable")

    def warnings(self) -> list[str]:
        """Settings that are valid but do nothing, which is most likely not what was meant."""
        notes = []
        if self.compaction_strategy_header is not None and self.compaction_strategy != "header":
            notes.append(f"compaction.strategy.header ({self.compaction_strategy_header}) does nothing:"
                         f" compaction.strategy is {self.compaction_strategy}, not header")
        if self.compaction_strategy == "timestamp" and self.message_timestamp_type == "LogAppendTime":
            notes.append("compaction.strategy timestamp with message.timestamp.type LogAppendTime keeps the"
                         " same records as offset: append times only grow")
        if self.consumed_retention_ms >= 0 and not self.consumed_retention_groups:
            notes.append(f"consumed.retention.ms is {self.consumed_retention_ms} but consumed.retention.groups"
                         " is empty, which means no consumed retention (as -1)")
        if self.consumed_retention_ms < 0 and self.consumed_retention_groups:
            notes.append("consumed.retention.groups does nothing while consumed.retention.ms is -1 (off)")
        kafka = self.to_kafka()
        for names, needs, has in ((_DELETE_ONLY, "delete", self.delete), (_COMPACT_ONLY, "compact", self.compact)):
            unused = [name for name in names if kafka[name] != KAFKA_DEFAULTS[name]]
            if unused and not has:  # CONTRACT section 4: settings of a policy the topic does not have
                notes.append(f"{', '.join(unused)} {'does' if len(unused) == 1 else 'do'} nothing:"
                             f" cleanup.policy does not include {needs}")
        return notes


_DELETE_ONLY = ("retention.ms", "retention.bytes", "consumed.retention.ms")
_COMPACT_ONLY = ("min.compaction.lag.ms", "max.compaction.lag.ms", "min.cleanable.dirty.ratio",
                 "delete.retention.ms", "compaction.strategy")


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

    @classmethod
    def not_a_mapping(cls, value: Any) -> str:
        return f"must be a mapping with type, kwargs and meta, got {shown(value)}"

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
    plain = {"type": "string", "pattern": f"^{_ENV_SAFE}$"}
    return {
        "type": "object",
        "propertyNames": {"anyOf": [{"pattern": "^kafka[.]"}, {"enum": sorted(KAFKA_READER_OPTIONS)}],
                          "not": {"enum": sorted(KAFKA_OPTIONS_SET_BY_INGEST)}},
        "patternProperties": {secret: {**plain, "pattern": f"^{_ENV_SAFE}\\$\\{{[A-Za-z_][A-Za-z0-9_]*\\}}{_ENV_SAFE}$"}},
        "additionalProperties": {"anyOf": [plain, {"type": ["number", "boolean"]}]},
    }


class KafkaSource(Section):
    """``source.kafka``: the Kafka topic whose records ``ingest`` appends, with Kafka's offsets.

    Values may hold ``${ENV}`` references, read when ingest runs: secrets never live in a spec.
    """

    REQUIRED: ClassVar[Mapping[str, str]] = MappingProxyType({"bootstrap.servers": "bootstrap.servers: broker1:9092,broker2:9092"
                                                      " (or ${KAFKA_BOOTSTRAP_SERVERS})"})

    bootstrap_servers: Annotated[str, BeforeValidator(checked(values.bootstrap_servers)),
                                 WithJsonSchema(_SERVERS_SCHEMA)] = Field(
        alias="bootstrap.servers", description="host:port[,host:port...] or ${ENV_VAR}")
    #: the Kafka topic; None means the spec's own topic name
    topic: Annotated[str | None, BeforeValidator(lambda v: None if v is None else checked(values.topic_name)(v)),
                     WithJsonSchema({"anyOf": [_TOPIC_NAME_SCHEMA, {"type": "null"}]})] = None
    #: passed to Spark's Kafka source (``kafka.*`` are the Kafka client's settings)
    options: Annotated[Mapping[str, str], BeforeValidator(_options), AfterValidator(MappingProxyType),
                       WithJsonSchema(_options_schema())] = Field(
        default_factory=lambda: MappingProxyType({}))

    @classmethod
    def not_a_mapping(cls, value: Any) -> str:
        return f"must be a mapping with bootstrap.servers, topic and options, got {shown(value)}"

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

    @classmethod
    def not_a_mapping(cls, value: Any) -> str:
        return f"must be a mapping with kafka: {{bootstrap.servers, topic, options}}, got {shown(value)}"

    @classmethod
    def unknown_field(cls, name: str) -> str | None:
        return (f"unknown source; {suggestion(name, ('kafka',), 'source')} (the only "
                "source is kafka; without a source, records come from produce)")


class RecordFormat(Section):
    """``key:`` or ``value:``: the record part's type."""

    PART: ClassVar[str] = "key"
    type: Annotated[Literal[RECORD_TYPES], BeforeValidator(checked(values.record_type))] = "string"

    @classmethod
    def not_a_mapping(cls, value: Any) -> str:
        return f"must be a mapping like {{type: string}} (string or binary), got {shown(value)}"

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


class SpecDocument(Section):
    """A spec file: one topic, its partitions, record types, configs, checks and source."""

    model_config = ConfigDict(title="topiclake topic spec")
    REQUIRED: ClassVar[Mapping[str, str]] = MappingProxyType({"topic": "topic: orders", "partitions": "partitions: 3"})

    topic: Annotated[str, BeforeValidator(checked(values.topic_name)),
                     WithJsonSchema({**_TOPIC_NAME_SCHEMA, "description": "Kafka's topic name"})]
    partitions: Annotated[int, Field(ge=1, description="partition p is its own Delta table <topic>-p"),
                          BeforeValidator(checked(values.partition_count))]
    key: RecordFormat = RecordFormat()
    value: ValueFormat = ValueFormat()
    config: TopicConfig = TopicConfig()
    expectations: Annotated[tuple[ExpectationSpec, ...], BeforeValidator(_expectations)] = ()
    source: SourceDocument | None = None

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

    @model_validator(mode="before")
    @classmethod
    def _legal_topic(cls, data: Any) -> Any:
        problem = values.topic_name_problem(data.get("topic")) if isinstance(data, Mapping) else None
        if problem is not None:  # a spec built in Python gets the rule the YAML reader applies
            raise SpecError([Problem(data.get("source", "<spec>"), None, None, "topic", problem)])
        return data

    def _meaning(self) -> tuple:
        return (self.topic, self.partitions, self.key_type, self.value_type, self.config, self.expectations,
                self.warnings, self.kafka_source)

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
        return written


def colliding_name(topic: str) -> str:
    """What two topic names must not share in one warehouse: Kafka refuses topics that differ
    only by '.' against '_' (their metric names collide), and a case-insensitive file system
    (macOS, Windows, some object-store gateways) would give topics that differ only by case
    one folder."""
    return topic.lower().replace(".", "_")
