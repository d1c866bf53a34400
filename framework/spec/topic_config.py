"""``config:``: a topic's Kafka configs as a pydantic model, under Kafka's dotted names
(aliases), each value checked by its rule in ``values.py``, and the rules between them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BeforeValidator, Field, ValidationError, WithJsonSchema

from framework.spec import values
from framework.spec.fragments import NOT_BLANK
from framework.spec.names import (
    CLEANUP_POLICIES,
    COMPACTION_STRATEGIES,
    IGNORED_CONFIGS,
    KAFKA_DEFAULTS,
    KNOWN_CONFIGS,
    LONG_MAX,
    MIB,
    SPEC_FIELDS,
    TIMESTAMP_TYPES,
    WEEK_MS,
)
from framework.spec.problems import Checker, Section, checked, rule, shown, suggestion
from framework.spec.yaml_source import Marks

__all__ = ["TopicConfig"]


def _long(minimum: int, meaning: str = "", **schema: Any) -> Any:
    """Kafka's LONG from ``minimum`` up: a YAML integer, or digits as in a properties file."""
    return Annotated[int, Field(ge=minimum, le=LONG_MAX, **schema), BeforeValidator(checked(
        values.long_at_least(minimum, meaning)))]


def _config(name: str, description: str) -> Any:
    return Field(default=KAFKA_DEFAULTS[name], alias=name, description=description)


_POLICY_SCHEMA = {"anyOf": [
    {"type": "string", "enum": ["compact", "delete", "compact,delete", "delete,compact"]},
    {"type": "array", "items": {"enum": list(CLEANUP_POLICIES)}, "minItems": 1, "uniqueItems": True}]}
_GROUPS_SCHEMA = {"type": "array", "items": {"type": "string", "pattern": NOT_BLANK}, "uniqueItems": True}


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
    compaction_strategy_header: Annotated[str | None, Field(pattern=NOT_BLANK), BeforeValidator(checked(
        values.header_name))] = _config("compaction.strategy.header", "KIP-280: the header holding the version")
    consumed_retention_ms: _long(-1, "-1 means off") = _config("consumed.retention.ms", "KIP-68: remove what every group consumed this long ago; -1: off")
    consumed_retention_groups: Annotated[tuple[str, ...], BeforeValidator(checked(values.group_list)),
                                         WithJsonSchema(_GROUPS_SCHEMA)] = _config("consumed.retention.groups", "KIP-68: the consumer groups that must have consumed a record")
    time_travel_retention_ms: _long(0) = Field(
        WEEK_MS, alias="time.travel.retention.ms",
        description="Delta time travel kept (default: a week, or min.compaction.lag.ms when longer)")
    # Kafka 4 refuses segments under 1 MiB; a data file that small would not pay either
    segment_bytes: _long(MIB, "Kafka's minimum, 1 MiB") = _config("segment.bytes", "the target data-file size of bin-packing")

    MAPPING: ClassVar[str] = " of Kafka topic configs"

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
