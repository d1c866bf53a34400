"""Topic specs (CONTRACT section 2): every rule's failure path, defaults, round trips, lint."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from framework.errors import ArgumentError, ExitCode, Problem, SpecError
from framework.spec import (
    EXPECTATION_FIELDS,
    IGNORED_CONFIGS,
    KAFKA_DEFAULTS,
    KNOWN_CONFIGS,
    SPEC_FIELDS,
    ExpectationSpec,
    TopicConfig,
    TopicSpec,
    known_expectation_types,
    lint,
    load_spec,
    load_specs,
    parse_spec,
)
from framework.spec import names as spec_names
from framework.spec import values as spec_values
from framework.spec.yaml_source import load_yaml, load_yaml_file
from tests.support.acceptance_files import acceptance_files

REPO = Path(__file__).resolve().parents[1]
TABLE_SPECS = REPO / "table_specs"
LONG_MAX = 2**63 - 1
DAY_MS = 86_400_000
WEEK_MS = 7 * DAY_MS


# ---------------------------------------------------------------- helpers


def write(folder: Path, text: str, name: str = "spec.yaml") -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def problems_in(folder: Path, text: str) -> list[Problem]:
    """The problems of a spec file, in the order they are reported."""
    with pytest.raises(SpecError) as caught:
        load_spec(write(folder, text))
    return list(caught.value.problems)


def spec_of(config=None, **fields) -> TopicSpec:
    data = {"topic": "t", "partitions": 1, **fields}
    if config is not None:
        data["config"] = config
    return parse_spec(data, "test")


def refused(config=None, **fields) -> list[Problem]:
    data = {"topic": "t", "partitions": 1, **fields}
    if config is not None:
        data["config"] = config
    with pytest.raises(SpecError) as caught:
        parse_spec(data, "test")
    return list(caught.value.problems)


def the_problem(config=None, **fields) -> Problem:
    problems = refused(config, **fields)
    assert len(problems) == 1, problems
    return problems[0]


def meaning(spec: TopicSpec) -> TopicSpec:
    """The spec with source and lines that equality ignores made explicit, for clear diffs."""
    return spec.model_copy(update={"source": "-", "ignored_configs": ()})


# ---------------------------------------------------------------- user-facing names (pinned)


def test_the_yaml_names_users_write_are_pinned():
    # A rename here breaks users' checked-in spec files: change only on purpose.
    assert SPEC_FIELDS == ("topic", "partitions", "key", "value", "config", "expectations", "source", "table")
    assert EXPECTATION_FIELDS == ("type", "kwargs", "meta")
    assert spec_names.KAFKA_SOURCE_FIELDS == ("bootstrap.servers", "topic", "options")
    assert KNOWN_CONFIGS == {
        "cleanup.policy", "min.compaction.lag.ms", "max.compaction.lag.ms",
        "min.cleanable.dirty.ratio", "delete.retention.ms", "retention.ms", "retention.bytes",
        "message.timestamp.type", "compaction.strategy", "compaction.strategy.header",
        "consumed.retention.ms", "consumed.retention.groups", "time.travel.retention.ms",
        "segment.bytes",
    }
    assert IGNORED_CONFIGS == {
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
    }
    assert not KNOWN_CONFIGS & IGNORED_CONFIGS


def test_every_known_config_is_read_and_written():
    assert set(spec_values.SETTINGS) == KNOWN_CONFIGS == set(KAFKA_DEFAULTS)
    config = spec_of({"compaction.strategy": "header", "compaction.strategy.header": "v"}).config
    assert set(config.to_kafka()) == KNOWN_CONFIGS


# ---------------------------------------------------------------- defaults


def test_defaults_are_kafkas():
    config = spec_of().config
    assert config.model_dump() == dict(
        cleanup_policy=frozenset({"delete"}),
        min_compaction_lag_ms=0,
        max_compaction_lag_ms=LONG_MAX,
        min_cleanable_dirty_ratio=0.5,
        delete_retention_ms=86_400_000,
        retention_ms=604_800_000,
        retention_bytes=-1,
        message_timestamp_type="CreateTime",
        compaction_strategy="offset",
        compaction_strategy_header=None,
        consumed_retention_ms=-1,
        consumed_retention_groups=(),
        time_travel_retention_ms=604_800_000,
        segment_bytes=1 << 30,
    )
    kafka = config.to_kafka()
    assert {k: kafka.get(k) for k in KAFKA_DEFAULTS} == {
        **KAFKA_DEFAULTS, "consumed.retention.groups": [], "compaction.strategy.header": None,
    }


def test_key_and_value_default_to_string():
    spec = spec_of()
    assert (spec.key_type, spec.value_type) == ("string", "string")
    assert spec.expectations == () and spec.ignored_configs == () and spec.warnings == ()


@pytest.mark.parametrize(("min_lag", "time_travel"), [
    (0, WEEK_MS),
    (DAY_MS, WEEK_MS),
    (WEEK_MS, WEEK_MS),
    (10 * DAY_MS, 10 * DAY_MS),
])
def test_time_travel_default_follows_min_compaction_lag(min_lag, time_travel):
    config = spec_of({"min.compaction.lag.ms": min_lag}).config
    assert config.time_travel_retention_ms == time_travel


def test_time_travel_may_be_set_between_min_lag_and_seven_days():
    config = spec_of({"min.compaction.lag.ms": 1000, "time.travel.retention.ms": 1000}).config
    assert config.time_travel_retention_ms == 1000


def test_empty_optional_sections_are_as_if_absent():
    assert spec_of(None, key=None, value=None, expectations=None) == spec_of()
    assert parse_spec({"topic": "t", "partitions": 1, "config": None}, "x") == spec_of()


# ---------------------------------------------------------------- the model


def test_policy_properties_and_kafka_order():
    config = spec_of({"cleanup.policy": "delete,compact"}).config
    assert config.compact and config.delete
    assert config.to_kafka()["cleanup.policy"] == "compact,delete"
    compact_only = spec_of({"cleanup.policy": "compact"}).config
    assert compact_only.compact and not compact_only.delete


def test_specs_are_immutable():
    spec = load_spec(TABLE_SPECS / "customers-cdc.yaml")
    with pytest.raises(ValidationError, match="frozen"):
        spec.partitions = 4
    with pytest.raises(ValidationError, match="frozen"):
        spec.config.retention_ms = 1
    with pytest.raises(TypeError):
        spec.expectations[0].kwargs["column"] = "value"
    assert isinstance(spec.config.cleanup_policy, frozenset)


def test_expectation_kwargs_are_read_only_all_the_way_down():
    expectation = ExpectationSpec(type="expect_column_values_to_be_in_set", kwargs={"column": "key", "value_set": ["a"]})
    assert expectation.kwargs["value_set"] == ("a",)
    with pytest.raises(TypeError):
        expectation.kwargs["value_set"] += ("b",)
    assert expectation.to_dict() == {
        "type": "expect_column_values_to_be_in_set", "kwargs": {"column": "key", "value_set": ["a"]},
    }


def test_table_name_is_kafkas_log_dir_name():
    spec = spec_of(partitions=3)
    assert [spec.table_name(p) for p in range(3)] == ["t-0", "t-1", "t-2"]


@pytest.mark.parametrize("partition", [-1, 3, True, "0", 1.0])
def test_table_name_of_a_partition_out_of_range_is_an_argument_error(partition):
    with pytest.raises(ArgumentError, match="from 0 to 2"):
        spec_of(partitions=3).table_name(partition)


def test_from_kafka_validates_like_a_spec():
    assert TopicConfig.from_kafka({"cleanup.policy": "compact"}) == spec_of({"cleanup.policy": "compact"}).config
    with pytest.raises(SpecError, match="must be >= 1"):
        TopicConfig.from_kafka({"max.compaction.lag.ms": 0})


def test_spec_error_is_bad_input():
    assert SpecError.exit_code == ExitCode.BAD_INPUT


# ---------------------------------------------------------------- all problems at once


def test_a_file_with_three_mistakes_gives_three_problems_in_file_order(tmp_path):
    problems = problems_in(tmp_path, """\
        topic: orders
        partitions: 0
        config:
          cleanup.policy: compact
          min.cleanable.dirty.ratio: 1.5
          retension.ms: 1000
    """)
    assert [(p.line, p.field) for p in problems] == [
        (2, "partitions"),
        (5, "config.min.cleanable.dirty.ratio"),
        (6, "config.retension.ms"),
    ]
    assert all(p.source.endswith("spec.yaml") for p in problems)


# ---------------------------------------------------------------- top level


def test_a_spec_must_be_a_mapping(tmp_path):
    [problem] = problems_in(tmp_path, "- topic: a\n")
    assert problem.field is None
    assert "must be a mapping" in problem.rule and "got a list" in problem.rule


def test_an_empty_spec_file_says_so(tmp_path):
    [problem] = problems_in(tmp_path, "# nothing yet\n")
    assert "the spec is empty" in problem.rule


def test_topic_and_partitions_are_required():
    problems = refused_raw({})
    assert {(p.field, p.rule.split(",")[0]) for p in problems} == {
        ("topic", "is required"), ("partitions", "is required"),
    }


def refused_raw(data) -> list[Problem]:
    with pytest.raises(SpecError) as caught:
        parse_spec(data, "raw")
    return list(caught.value.problems)


def test_an_unknown_field_names_the_closest_allowed_one(tmp_path):
    problems = problems_in(tmp_path, """\
        topic: a
        partitons: 3
    """)
    unknown = next(p for p in problems if p.field == "partitons")
    assert unknown.line == 2
    assert "unknown field; did you mean 'partitions'?" in unknown.rule
    assert any(p.field == "partitions" and "is required" in p.rule for p in problems)


def test_an_unknown_field_far_from_any_still_names_the_closest():
    problem = the_problem(owner="team-a")
    assert problem.field == "owner"
    assert "the closest field is" in problem.rule
    assert "topic, partitions, key, value, config, expectations" in problem.rule


def test_a_kafka_config_at_the_top_level_belongs_under_config():
    problem = the_problem(**{"retention.ms": 1000})
    assert problem.field == "retention.ms"
    assert "put it under config" in problem.rule


def test_a_field_name_must_be_a_string():
    [problem] = refused_raw({"topic": "a", "partitions": 1, 7: "x"})
    assert "must be strings, got 7" in problem.rule


def test_a_scenario_file_is_not_a_spec():
    [problem] = refused_raw({"name": "x", "spec": {}, "steps": []})
    assert "scenario file" in problem.rule


# ---------------------------------------------------------------- topic


@pytest.mark.parametrize("topic", ["orders", "a.b_c-D9", "x" * 249, "..."])
def test_legal_topic_names(topic):
    assert spec_of(topic=topic).topic == topic


@pytest.mark.parametrize(("topic", "rule"), [
    ("bad topic", "may use only A-Z, a-z, 0-9, '.', '_' and '-'"),
    ("a/b", "got 'a/b'"),
    ("caf\u00e9", "Kafka's legal topic names"),
    ("", "must be 1 to 249 characters long, got 0"),
    ("x" * 250, "must be 1 to 249 characters long, got 250"),
    (".", "cannot be '.'"),
    ("..", "cannot be '..'"),
    (123, "must be a string (quote it if it looks like a number), got 123"),
    (None, "got null"),
])
def test_illegal_topic_names(topic, rule):
    problem = the_problem(topic=topic)
    assert problem.field == "topic"
    assert rule in problem.rule


def test_a_topic_problem_is_at_its_line(tmp_path):
    [problem] = problems_in(tmp_path, "partitions: 1\ntopic: 'no spaces'\n")
    assert (problem.line, problem.column, problem.field) == (2, 8, "topic")


# ---------------------------------------------------------------- partitions


@pytest.mark.parametrize(("partitions", "rule"), [
    (0, "must be >= 1 (partition p is table <topic>-p), got 0"),
    (-2, "got -2"),
    (True, "must be an integer >= 1, got true"),
    ("3", "got '3'"),
    (1.0, "got 1.0"),
    (None, "got null"),
])
def test_partitions_must_be_an_integer_of_at_least_one(partitions, rule):
    problem = the_problem(partitions=partitions)
    assert problem.field == "partitions"
    assert rule in problem.rule


# ---------------------------------------------------------------- key and value


def test_key_and_value_may_be_binary():
    spec = spec_of(key={"type": "binary"}, value={"type": "binary"})
    assert (spec.key_type, spec.value_type) == ("binary", "binary")


@pytest.mark.parametrize("part", ["key", "value"])
def test_key_and_value_type_must_be_string_or_binary(part):
    problem = the_problem(**{part: {"type": "json"}})
    assert problem.field == f"{part}.type"
    assert "must be string or binary, got 'json'" in problem.rule


@pytest.mark.parametrize("part", ["key", "value"])
def test_key_and_value_must_be_mappings(part):
    problem = the_problem(**{part: "string"})
    assert problem.field == part
    assert "must be a mapping like {type: string}" in problem.rule


def test_key_has_only_type(tmp_path):
    [problem] = problems_in(tmp_path, """\
        topic: a
        partitions: 1
        key:
          type: string
          format: json
    """)
    assert (problem.field, problem.line, problem.column) == ("key.format", 5, 3)
    assert "key has only type" in problem.rule


# ---------------------------------------------------------------- config: shape and names


def test_config_must_be_a_mapping():
    problem = the_problem(["cleanup.policy=compact"])
    assert problem.field == "config"
    assert "must be a mapping of Kafka topic configs, got a list" in problem.rule


def test_config_names_must_be_strings():
    problem = the_problem({1: "x"})
    assert "config names are Kafka's (strings), got 1" in problem.rule


def test_an_unknown_config_names_the_closest_known_one(tmp_path):
    [problem] = problems_in(tmp_path, """\
        topic: a
        partitions: 1
        config:
          cleanup.policy: compact
          min.compaction.lag: 1000
    """)
    assert (problem.field, problem.line, problem.column) == ("config.min.compaction.lag", 5, 3)
    assert problem.rule == "unknown config; did you mean 'min.compaction.lag.ms'?"


@pytest.mark.parametrize(("name", "closest"), [
    ("retention_ms", "retention.ms"),
    ("Cleanup.Policy", "cleanup.policy"),
    ("segment.byte", "segment.bytes"),
    ("segment.m", "segment.ms"),  # ignored configs are suggested too
])
def test_unknown_config_suggestions(name, closest):
    problem = the_problem({name: 1})
    assert f"did you mean {closest!r}?" in problem.rule


def test_an_unknown_config_far_from_any_still_names_the_closest():
    problem = the_problem({"zzz": 1})
    assert problem.rule.startswith("unknown config; the closest known config is '")


def test_a_top_level_field_under_config_is_named_as_such():
    problem = the_problem({"partitions": 3})
    assert problem.field == "config.partitions"
    assert "is a top-level field of the spec" in problem.rule


def test_ignored_configs_are_listed_in_file_order_without_value_checks(tmp_path):
    spec = load_spec(write(tmp_path, """\
        topic: t
        partitions: 1
        config:
          segment.ms: 604800000
          cleanup.policy: compact
          min.insync.replicas: two
          compression.type: [anything, at, all]
    """))
    assert spec.ignored_configs == ("segment.ms", "min.insync.replicas", "compression.type")
    assert "segment.ms" not in spec.to_dict()["config"]
    # they mean nothing for the table, so they are not part of what the spec means
    assert spec == spec_of({"cleanup.policy": "compact"})


# ---------------------------------------------------------------- config: integers


INTEGER_SETTINGS = [
    "min.compaction.lag.ms", "max.compaction.lag.ms", "delete.retention.ms", "retention.ms",
    "retention.bytes", "consumed.retention.ms", "time.travel.retention.ms",
]


@pytest.mark.parametrize("name", INTEGER_SETTINGS)
@pytest.mark.parametrize(("value", "rule"), [
    (1.5, "must be an integer, got 1.5"),
    (3600000.0, "must be an integer, got 3600000.0; write 3600000"),
    (True, "must be an integer, got true"),
    ("an hour", "must be an integer, got 'an hour'"),
    ("1_000", "must be an integer, got '1_000'"),
    ("1e3", "must be an integer, got '1e3'"),
    (None, "must be an integer, got null"),
    ([1], "must be an integer, got a list"),
    (2**63, "must fit a signed 64-bit long"),
    (str(-(2**63) - 1), "must fit a signed 64-bit long"),
])
def test_integer_settings_refuse_other_types(name, value, rule):
    problem = the_problem({name: value})
    assert problem.field == f"config.{name}"
    assert rule in problem.rule


@pytest.mark.parametrize(("value", "parsed"), [
    (3600000, 3600000), ("3600000", 3600000), (" 42 ", 42), ("+5", 5), (str(LONG_MAX), LONG_MAX),
])
def test_integer_settings_accept_kafka_strings(value, parsed):
    assert spec_of({"delete.retention.ms": value}).config.delete_retention_ms == parsed


@pytest.mark.parametrize(("name", "value", "rule"), [
    ("min.compaction.lag.ms", -1, "must be >= 0, got -1"),
    ("max.compaction.lag.ms", 0, "must be >= 1, got 0"),
    ("delete.retention.ms", -1, "must be >= 0, got -1"),
    ("retention.ms", -2, "must be >= -1 (-1 means unlimited), got -2"),
    ("retention.bytes", -2, "must be >= -1 (-1 means unlimited), got -2"),
    ("consumed.retention.ms", -2, "must be >= -1 (-1 means off), got -2"),
    ("time.travel.retention.ms", -1, "must be >= 0, got -1"),
])
def test_integer_ranges(name, value, rule):
    problem = the_problem({name: value})
    assert problem.field == f"config.{name}"
    assert problem.rule == rule


def test_minus_one_means_unlimited_or_off():
    config = spec_of({"retention.ms": -1, "retention.bytes": -1, "consumed.retention.ms": -1}).config
    assert (config.retention_ms, config.retention_bytes, config.consumed_retention_ms) == (-1, -1, -1)


def test_max_lag_below_min_lag_is_refused_at_its_line(tmp_path):
    [problem] = problems_in(tmp_path, """\
        topic: a
        partitions: 1
        config:
          min.compaction.lag.ms: 60000
          max.compaction.lag.ms: 1000
    """)
    assert (problem.field, problem.line, problem.column) == ("config.max.compaction.lag.ms", 5, 26)
    assert problem.rule == "must be >= min.compaction.lag.ms (60000), got 1000"


def test_max_lag_equal_to_min_lag_is_fine():
    config = spec_of({"min.compaction.lag.ms": 5000, "max.compaction.lag.ms": 5000}).config
    assert config.max_compaction_lag_ms == config.min_compaction_lag_ms == 5000


def test_an_invalid_min_lag_does_not_cascade_into_other_rules():
    [problem] = refused({"min.compaction.lag.ms": "soon", "max.compaction.lag.ms": 1})
    assert problem.field == "config.min.compaction.lag.ms"


def test_time_travel_below_min_lag_is_refused_with_the_reason(tmp_path):
    [problem] = problems_in(tmp_path, """\
        topic: a
        partitions: 1
        config:
          min.compaction.lag.ms: 864000000
          time.travel.retention.ms: 604800000
    """)
    assert (problem.field, problem.line) == ("config.time.travel.retention.ms", 5)
    assert problem.rule.startswith("must be >= min.compaction.lag.ms (864000000), got 604800000")
    assert "older table versions would otherwise be vacuumed while min.compaction.lag.ms still protects them" in problem.rule


# ---------------------------------------------------------------- config: ratio


@pytest.mark.parametrize(("value", "parsed"), [(0, 0.0), (1, 1.0), (0.3, 0.3), ("0.25", 0.25), (" .5 ", 0.5)])
def test_dirty_ratio_accepts_numbers_from_0_to_1(value, parsed):
    ratio = spec_of({"min.cleanable.dirty.ratio": value}).config.min_cleanable_dirty_ratio
    assert ratio == parsed and isinstance(ratio, float)


@pytest.mark.parametrize(("value", "rule"), [
    (1.5, "must be from 0 to 1 (a fraction of the partition's bytes), got 1.5"),
    (-0.1, "must be from 0 to 1 (a fraction of the partition's bytes), got -0.1"),
    ("half", "must be a number from 0 to 1, got 'half'"),
    (True, "must be a number from 0 to 1, got true"),
    (float("nan"), "must be a number from 0 to 1, got nan"),
    (None, "must be a number from 0 to 1, got null"),
])
def test_dirty_ratio_refusals(value, rule):
    problem = the_problem({"min.cleanable.dirty.ratio": value})
    assert problem.field == "config.min.cleanable.dirty.ratio"
    assert problem.rule == rule


# ---------------------------------------------------------------- config: cleanup.policy


@pytest.mark.parametrize(("value", "policy"), [
    ("compact", {"compact"}),
    ("delete", {"delete"}),
    ("compact,delete", {"compact", "delete"}),
    ("delete,compact", {"compact", "delete"}),
    (" compact , delete ", {"compact", "delete"}),
    ("[compact,delete]", {"compact", "delete"}),
    (["delete", "compact"], {"compact", "delete"}),
    (["compact"], {"compact"}),
])
def test_cleanup_policy_forms(value, policy):
    assert spec_of({"cleanup.policy": value}).config.cleanup_policy == policy


@pytest.mark.parametrize(("value", "rule"), [
    ("", "must not be empty"),
    ("[]", "must not be empty"),
    ([], "must not be empty"),
    ("compact,remove", "allows only compact and delete (e.g. compact,delete or [compact, delete]), got 'remove'"),
    ("Compact", "got 'Compact'"),
    ("compact,,delete", "got ''"),
    (["compact", 1], "got 1"),
    (5, "must be compact, delete or compact,delete (a string or a list), got 5"),
    (None, "got null"),
])
def test_cleanup_policy_refusals(value, rule):
    problem = the_problem({"cleanup.policy": value})
    assert problem.field == "config.cleanup.policy"
    assert rule in problem.rule


# ---------------------------------------------------------------- config: words


def test_message_timestamp_type_allows_log_append_time():
    assert spec_of({"message.timestamp.type": "LogAppendTime"}).config.message_timestamp_type == "LogAppendTime"


@pytest.mark.parametrize(("value", "rule"), [
    ("createtime", "must be one of CreateTime, LogAppendTime (case matters; did you mean CreateTime?), got 'createtime'"),
    ("Now", "must be one of CreateTime, LogAppendTime, got 'Now'"),
    (1, "must be one of CreateTime, LogAppendTime, got 1"),
])
def test_message_timestamp_type_refusals(value, rule):
    problem = the_problem({"message.timestamp.type": value})
    assert (problem.field, problem.rule) == ("config.message.timestamp.type", rule)


@pytest.mark.parametrize("strategy", ["offset", "timestamp"])
def test_compaction_strategies_without_a_header(strategy):
    assert spec_of({"compaction.strategy": strategy}).config.compaction_strategy == strategy


def test_compaction_strategy_refuses_other_words():
    problem = the_problem({"compaction.strategy": "latest"})
    assert problem.field == "config.compaction.strategy"
    assert problem.rule == "must be one of offset, timestamp, header, got 'latest'"


def test_header_strategy_takes_its_header_name():
    config = spec_of({"compaction.strategy": "header", "compaction.strategy.header": " version "}).config
    assert (config.compaction_strategy, config.compaction_strategy_header) == ("header", "version")


def test_header_strategy_without_a_header_is_refused_at_the_strategy(tmp_path):
    [problem] = problems_in(tmp_path, """\
        topic: a
        partitions: 1
        config:
          cleanup.policy: compact
          compaction.strategy: header
    """)
    assert (problem.field, problem.line) == ("config.compaction.strategy.header", 5)
    assert problem.rule.startswith("is required when compaction.strategy is header")


@pytest.mark.parametrize("header", ["", "  ", 7, ["v"]])
def test_a_header_name_must_be_a_non_empty_string(header):
    problem = the_problem({"compaction.strategy": "header", "compaction.strategy.header": header})
    assert problem.field == "config.compaction.strategy.header"
    assert problem.rule.startswith("must be a non-empty header name")


# ---------------------------------------------------------------- config: consumed retention


@pytest.mark.parametrize(("value", "groups"), [
    (["billing", "audit"], ("billing", "audit")),
    ("billing, audit", ("billing", "audit")),
    ("billing", ("billing",)),
    ("", ()),
    ([], ()),
    (["billing", "billing"], ("billing",)),
])
def test_consumed_retention_groups_forms(value, groups):
    config = spec_of({"consumed.retention.ms": 0, "consumed.retention.groups": value}).config
    assert config.consumed_retention_groups == groups


@pytest.mark.parametrize(("value", "rule"), [
    (["billing", ""], "must be a list of non-empty consumer group ids, got '' in it"),
    ("billing,,audit", "got '' in it"),
    ([1], "got 1 in it"),
    (5, "must be a list of consumer group ids, got 5"),
    ({"billing": 1}, "got a mapping"),
])
def test_consumed_retention_groups_refusals(value, rule):
    problem = the_problem({"consumed.retention.ms": 0, "consumed.retention.groups": value})
    assert problem.field == "config.consumed.retention.groups"
    assert rule in problem.rule


# ---------------------------------------------------------------- warnings


@pytest.mark.parametrize(("config", "warning"), [
    ({"compaction.strategy.header": "v"}, "compaction.strategy.header (v) does nothing: compaction.strategy is offset"),
    ({"cleanup.policy": "delete", "consumed.retention.ms": 0},
     "consumed.retention.ms is 0 but consumed.retention.groups is empty, which means no consumed retention"),
    ({"cleanup.policy": "delete", "consumed.retention.groups": ["billing"]},
     "consumed.retention.groups does nothing while consumed.retention.ms is -1"),
    ({"cleanup.policy": "compact", "retention.ms": 1000, "retention.bytes": 10},
     "retention.ms, retention.bytes do nothing: cleanup.policy does not include delete"),
    ({"cleanup.policy": "delete", "min.cleanable.dirty.ratio": 0.1},
     "min.cleanable.dirty.ratio does nothing: cleanup.policy does not include compact"),
    ({"cleanup.policy": "compact", "compaction.strategy": "timestamp", "message.timestamp.type": "LogAppendTime"},
     "keeps the same records as offset"),
])
def test_valid_settings_that_do_nothing_are_warned_about(config, warning):
    spec = spec_of(config)
    assert len(spec.warnings) == 1
    assert warning in spec.warnings[0]


def test_default_values_of_the_other_policy_are_not_warned_about():
    assert spec_of({"cleanup.policy": "compact", "retention.ms": 604800000}).warnings == ()


# ---------------------------------------------------------------- expectations


def test_expectations_are_parsed_with_their_lines(tmp_path):
    spec = load_spec(write(tmp_path, """\
        topic: a
        partitions: 1
        expectations:
          - type: expect_column_values_to_not_be_null
            kwargs: {column: key}
          - type: unexpected_rows_expectation
            kwargs: {unexpected_rows_query: "select * from {batch} where offset < 0"}
            meta: {owner: team-a}
    """))
    first, second = spec.expectations
    assert (first.type, dict(first.kwargs), dict(first.meta), first.line) == (
        "expect_column_values_to_not_be_null", {"column": "key"}, {}, 4)
    assert (second.type, dict(second.meta), second.line) == ("unexpected_rows_expectation", {"owner": "team-a"}, 6)


def test_expectations_must_be_a_list():
    problem = the_problem(expectations={"type": "expect_column_to_exist"})
    assert problem.field == "expectations"
    assert "must be a list of {type, kwargs, meta} mappings, got a mapping" in problem.rule


def test_an_expectation_must_be_a_mapping():
    problem = the_problem(expectations=["expect_column_to_exist"])
    assert problem.field == "expectations[0]"
    assert "must be a mapping with type, kwargs and meta" in problem.rule


def test_an_expectation_needs_a_type(tmp_path):
    [problem] = problems_in(tmp_path, """\
        topic: a
        partitions: 1
        expectations:
          - kwargs: {column: key}
    """)
    assert (problem.field, problem.line) == ("expectations[0].type", 4)
    assert problem.rule.startswith("is required")


@pytest.mark.parametrize(("type_", "rule"), [
    (7, "must name an expectation, e.g. expect_column_values_to_not_be_null, got 7"),
    ("ExpectColumnValuesToNotBeNull", "must be the snake_case name, e.g. expect_column_values_to_not_be_null"),
    ("column_values_not_null", "must start with expect_ (or be unexpected_rows_expectation), got 'column_values_not_null'"),
])
def test_expectation_type_refusals(type_, rule):
    problem = the_problem(expectations=[{"type": "expect_column_to_exist", "kwargs": {"column": "key"}},
                                        {"type": type_}])
    assert problem.field == "expectations[1].type"
    assert rule in problem.rule


def test_an_unknown_expectation_names_the_closest_one(tmp_path):
    [problem] = problems_in(tmp_path, """\
        topic: a
        partitions: 1
        expectations:
          - type: expect_column_to_exist
            kwargs: {column: key}
          - type: expect_column_values_to_not_be_nul
    """)
    assert (problem.field, problem.line, problem.column) == ("expectations[1].type", 6, 11)
    assert "is not an expectation the installed great_expectations has" in problem.rule
    assert "did you mean 'expect_column_values_to_not_be_null'?" in problem.rule


def test_expectation_names_come_from_great_expectations_registry_once_per_version(tmp_path, monkeypatch):
    from great_expectations.expectations.registry import list_registered_expectation_implementations

    monkeypatch.setenv("TOPICLAKE_CACHE", str(tmp_path))
    known_expectation_types.cache_clear()
    try:
        names = known_expectation_types()
        assert {"expect_column_values_to_not_be_null", "expect_column_values_to_match_regex",
                "unexpected_rows_expectation"} <= names
        assert names <= set(list_registered_expectation_implementations())  # the public registry's names
        cached = list(tmp_path.glob("gx-expectation-types-*.json"))
        assert len(cached) == 1 and set(json.loads(cached[0].read_text())) == names
        # the next process reads the cache, not the registry (importing GE takes seconds)
        known_expectation_types.cache_clear()
        monkeypatch.setattr(spec_values, "_registered_expectation_types", lambda: pytest.fail("registry read again"))
        assert known_expectation_types() == names
    finally:
        known_expectation_types.cache_clear()


def test_without_great_expectations_the_name_check_is_skipped(monkeypatch):
    known_expectation_types.cache_clear()
    monkeypatch.setattr(spec_values, "_installed_gx_version", lambda: None)
    try:
        assert known_expectation_types() is None
        spec = spec_of(expectations=[{"type": "expect_something_new"}])
        assert spec.expectations[0].type == "expect_something_new"
    finally:
        monkeypatch.undo()
        known_expectation_types.cache_clear()


def test_an_expectation_has_only_type_kwargs_and_meta():
    problems = refused(expectations=[{"type": "expect_column_to_exist", "kwarg": {}, "expectation_type": "x"}])
    by_field = {p.field: p.rule for p in problems}
    assert "did you mean 'kwargs'?" in by_field["expectations[0].kwarg"]
    assert "expectation_type is type in 1.x" in by_field["expectations[0].expectation_type"]
    assert all("an expectation has only type, kwargs and meta" in rule for rule in by_field.values())


@pytest.mark.parametrize("part", ["kwargs", "meta"])
def test_kwargs_and_meta_must_be_mappings_with_string_keys(part):
    problem = the_problem(expectations=[{"type": "expect_column_to_exist", part: ["column", "key"]}])
    assert (problem.field, problem.rule) == (f"expectations[0].{part}", "must be a mapping, got a list")
    problem = the_problem(expectations=[{"type": "expect_column_to_exist", part: {1: "key"}}])
    assert problem.field == f"expectations[0].{part}[1]"
    assert problem.rule == "names must be strings, got 1"


# ---------------------------------------------------------------- YAML problems through load_spec


def test_yaml_problems_of_a_spec_file_are_spec_errors(tmp_path):
    problems = problems_in(tmp_path, """\
        topic: a
        partitions: 1
        partitions: 2
    """)
    assert [(p.line, p.field) for p in problems] == [(3, None)]
    assert "duplicate key 'partitions'" in problems[0].rule
    [problem] = problems_in(tmp_path, "topic: [a\n")
    assert problem.rule.startswith("not valid YAML")


# ---------------------------------------------------------------- round trips


def shipped_specs() -> list[Path]:
    return sorted(TABLE_SPECS.glob("*.yaml"))


def acceptance_scenarios() -> list[Path]:
    return acceptance_files()  # a missing shared folder is an error, never a skip


def assert_round_trips(spec: TopicSpec) -> None:
    again = parse_spec(spec.to_dict(), "round trip")
    assert again == spec
    assert meaning(again) == meaning(spec)
    dumped = yaml.safe_dump(spec.to_dict(), sort_keys=False)
    reloaded, marks = load_yaml(dumped, "dumped")
    assert parse_spec(reloaded, "dumped", marks) == spec


def test_the_three_example_specs_ship():
    assert [p.name for p in shipped_specs()] == ["customers-cdc.yaml", "orders-changelog.yaml", "prices-feed.yaml"]


@pytest.mark.parametrize("path", shipped_specs(), ids=lambda p: p.name)
def test_shipped_specs_round_trip(path):
    assert_round_trips(load_spec(path))


@pytest.mark.parametrize("path", acceptance_scenarios(), ids=lambda p: p.name)
def test_acceptance_scenario_specs_round_trip_or_are_refused(path):
    scenario, marks = load_yaml_file(path)
    if scenario.get("expect_spec_error"):
        with pytest.raises(SpecError) as caught:
            parse_spec(scenario["spec"], f"scenario {path.name}", marks.sub(("spec",)))
        [problem] = caught.value.problems
        assert problem.field == "config.max.compaction.lag.ms"
        assert "must be >= min.compaction.lag.ms (60000), got 1000" in problem.rule
        assert problem.line == marks.at(("spec", "config", "max.compaction.lag.ms"))[0]
        assert problem.source == f"scenario {path.name}"
    else:
        assert_round_trips(parse_spec(scenario["spec"], path.name, marks.sub(("spec",))))


def test_the_refused_acceptance_scenario_exists():
    assert any(load_yaml_file(p)[0].get("expect_spec_error") for p in acceptance_scenarios())


@st.composite
def valid_spec_data(draw) -> dict:
    """Any valid spec, written in any of the forms users may write it in."""
    long = st.integers(0, 2**63 - 1)
    min_lag = draw(st.integers(0, 10**12))
    config = {
        "cleanup.policy": draw(st.sampled_from(
            ["compact", "delete", "compact,delete", "delete, compact", "[compact,delete]", ["delete", "compact"]])),
        "min.compaction.lag.ms": draw(st.sampled_from([min_lag, str(min_lag)])),
        "max.compaction.lag.ms": draw(st.integers(max(min_lag, 1), 2**63 - 1)),
        "min.cleanable.dirty.ratio": draw(st.floats(0, 1) | st.sampled_from([0, 1, "0.5"])),
        "delete.retention.ms": draw(long),
        "retention.ms": draw(st.integers(-1, 2**63 - 1)),
        "retention.bytes": draw(st.integers(-1, 2**63 - 1)),
        "message.timestamp.type": draw(st.sampled_from(["CreateTime", "LogAppendTime"])),
        "compaction.strategy": draw(st.sampled_from(["offset", "timestamp", "header"])),
        "consumed.retention.ms": draw(st.integers(-1, 10**12)),
        "consumed.retention.groups": draw(st.lists(st.sampled_from(["billing", "audit", "search"]))),
        "time.travel.retention.ms": draw(st.integers(min_lag, 2**63 - 1)),
    }
    if config["compaction.strategy"] == "header" or draw(st.booleans()):
        config["compaction.strategy.header"] = draw(st.sampled_from(["version", "v", "x-seq"]))
    config = {k: v for k, v in config.items() if k == "compaction.strategy.header" or draw(st.booleans())
              or (k == "time.travel.retention.ms" and min_lag > WEEK_MS)}
    if "min.compaction.lag.ms" not in config:  # max and time travel were drawn against min_lag
        config["min.compaction.lag.ms"] = min_lag
    scalar = st.integers() | st.text(max_size=5) | st.booleans() | st.none()
    kwargs = st.dictionaries(st.sampled_from(["column", "value_set", "mostly"]),
                             scalar | st.lists(scalar, max_size=3), max_size=3)
    expectations = draw(st.lists(st.fixed_dictionaries(
        {"type": st.sampled_from(["expect_column_values_to_not_be_null", "expect_column_values_to_be_in_set"]),
         "kwargs": kwargs},
        optional={"meta": st.dictionaries(st.sampled_from(["notes", "owner"]), st.text(max_size=5), max_size=2)},
    ), max_size=2))
    return {
        "topic": draw(st.from_regex(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,20}", fullmatch=True)),
        "partitions": draw(st.integers(1, 1000)),
        "key": {"type": draw(st.sampled_from(["string", "binary"]))},
        "value": {"type": draw(st.sampled_from(["string", "binary"]))},
        "config": config,
        "expectations": expectations,
    }


@settings(max_examples=150, deadline=None)
@given(valid_spec_data())
def test_any_valid_spec_round_trips(data):
    assert_round_trips(parse_spec(data, "generated"))


# ---------------------------------------------------------------- load_specs


def test_load_specs_reads_folders_sorted_and_not_recursively(tmp_path):
    write(tmp_path, "topic: b\npartitions: 1\n", "b.yml")
    write(tmp_path, "topic: a\npartitions: 1\n", "a.yaml")
    write(tmp_path, "not: a spec\n", "notes.txt")
    (tmp_path / "nested").mkdir()
    write(tmp_path / "nested", "topic: c\npartitions: 1\n", "c.yaml")
    assert [s.topic for s in load_specs([tmp_path])] == ["a", "b"]
    assert [s.source for s in load_specs([tmp_path])] == [str(tmp_path / "a.yaml"), str(tmp_path / "b.yml")]


def test_load_specs_takes_files_and_reads_each_file_once(tmp_path):
    path = write(tmp_path, "topic: a\npartitions: 1\n", "a.yaml")
    assert [s.topic for s in load_specs([path, tmp_path, str(path)])] == ["a"]


def test_an_empty_folder_has_no_specs(tmp_path):
    assert load_specs([tmp_path]) == []


def test_load_specs_collects_the_problems_of_every_file(tmp_path):
    write(tmp_path, "topic: a\npartitions: 0\n", "a.yaml")
    write(tmp_path, "topic: b\npartitions: 1\nconfig: {retention.ms: soon}\n", "b.yaml")
    with pytest.raises(SpecError) as caught:
        load_specs([tmp_path, tmp_path / "missing"])
    assert [(Path(p.source).name, p.field) for p in caught.value.problems] == [
        ("a.yaml", "partitions"), ("b.yaml", "config.retention.ms"), ("missing", None),
    ]
    assert caught.value.problems[-1].rule == "no such file or folder"


def test_two_specs_of_one_topic_are_a_problem(tmp_path):
    write(tmp_path, "topic: orders\npartitions: 1\n", "a.yaml")
    write(tmp_path, "partitions: 2\ntopic: orders\n", "b.yaml")
    with pytest.raises(SpecError) as caught:
        load_specs([tmp_path])
    [problem] = caught.value.problems
    assert (Path(problem.source).name, problem.line, problem.field) == ("b.yaml", 2, "topic")
    assert f"'orders' is already the topic of {tmp_path / 'a.yaml'}" in problem.rule


# ---------------------------------------------------------------- lint


def test_lint_of_the_shipped_specs_is_ok():
    report = lint([TABLE_SPECS])
    assert report.ok(), report.lines()
    assert [s.topic for s in report.specs] == ["customers-cdc", "orders-changelog", "prices-feed"]


def test_lint_lines_of_the_shipped_specs():
    lines = lint([os.path.relpath(TABLE_SPECS)]).lines()
    folder = os.path.relpath(TABLE_SPECS)
    assert lines == [
        f"ok   {os.path.join(folder, 'customers-cdc.yaml')}: topic customers-cdc, 3 partitions, cleanup.policy=compact",
        "     ignored: min.insync.replicas, compression.type (they mean nothing for a Delta table)",
        f"ok   {os.path.join(folder, 'orders-changelog.yaml')}: topic orders-changelog, 2 partitions,"
        " cleanup.policy=compact,delete",
        f"ok   {os.path.join(folder, 'prices-feed.yaml')}: topic prices-feed, 2 partitions, cleanup.policy=compact",
    ]


def test_lint_never_raises_and_reports_good_and_bad_files(tmp_path):
    write(tmp_path, "topic: a\npartitions: 1\nconfig: {compaction.strategy.header: v, segment.ms: 1}\n", "a.yaml")
    write(tmp_path, "topic: b\npartitions: [\n", "b.yaml")
    write(tmp_path, "topic: c\npartitions: 1\nconfig: {retension.ms: 1}\n", "c.yaml")
    report = lint([tmp_path, tmp_path / "missing.yaml"])
    assert not report.ok()
    assert [s.topic for s in report.specs] == ["a"]
    assert report.lines() == [
        f"ok   {tmp_path / 'a.yaml'}: topic a, 1 partition, cleanup.policy=delete",
        "     ignored: segment.ms (they mean nothing for a Delta table)",
        "     warning: compaction.strategy.header (v) does nothing: compaction.strategy is offset, not header",
        *[str(p) for p in report.problems],
    ]
    assert [Path(p.source).name for p in report.problems] == ["b.yaml", "c.yaml", "missing.yaml"]
    assert str(report.problems[1]) == f"{tmp_path / 'c.yaml'}:3:10: config.retension.ms: unknown config; did you mean 'retention.ms'?"


def test_lint_takes_a_single_path_too():
    assert lint(TABLE_SPECS / "prices-feed.yaml").ok()


def test_lint_starts_neither_spark_nor_great_expectations():
    # A fresh interpreter, so other tests' imports cannot hide one.
    code = (
        "import sys; from framework.spec import lint; "
        "r = lint(['table_specs']); assert r.ok(), r.lines(); "
        "assert not {'pyspark', 'great_expectations'} & set(sys.modules), sorted(sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


# ------------------------------------------------------------------ names and paths
def test_a_spec_built_in_python_gets_the_topic_name_rule():
    good = parse_spec({"topic": "orders", "partitions": 1}, source="test")
    for name in ("../x", "a/b", "", ".", "x" * 250):
        with pytest.raises(SpecError) as refused:
            TopicSpec(**{**dict(good), "topic": name})
        assert refused.value.problems[0].field == "topic"


def test_the_warehouse_builds_no_path_from_an_illegal_name():
    from framework.log.warehouse import Warehouse, delta_table_sql

    warehouse = Warehouse("/tmp/w")
    assert warehouse.partition_path("orders.v1", 3) == "/tmp/w/orders.v1-3"
    for topic, partition in (("../etc", 0), ("a/b", 0), ("..", 0), ("ok", -1), ("ok", True)):
        with pytest.raises(ArgumentError):
            warehouse.partition_path(topic, partition)
    assert delta_table_sql("/tmp/a`b") == "delta.`/tmp/a``b`"


@pytest.mark.parametrize("first, second", [("users", "Users"), ("a.b", "a_b"), ("Orders.EU", "orders_eu")])
def test_topics_that_would_share_a_folder_or_a_metric_are_refused(tmp_path, first, second):
    (tmp_path / "1.yaml").write_text(f"topic: {first}\npartitions: 1\n")
    (tmp_path / "2.yaml").write_text(f"topic: {second}\npartitions: 1\n")
    with pytest.raises(SpecError) as refused:
        load_specs([tmp_path])
    [problem] = refused.value.problems
    assert problem.source == str(tmp_path / "2.yaml") and problem.line == 1 and problem.field == "topic"
    assert f"collides with topic {first!r}" in problem.rule


def test_table_names_the_partition_tables_in_a_catalog_schema():
    spec = parse_spec({"topic": "orders.v1", "partitions": 2, "table": {"catalog": "main", "schema": "kafka"}}, "t.yaml")
    assert spec.catalog_table(1) == "`main`.`kafka`.`orders.v1_1`"  # Kafka's names, quoted
    assert parse_spec(spec.to_dict(), "again.yaml") == spec
    no_catalog = parse_spec({"topic": "o", "partitions": 1, "table": {"schema": "we`ird"}}, "t.yaml")
    assert no_catalog.catalog_table(0) == "`we``ird`.`o_0`"
    assert parse_spec({"topic": "o", "partitions": 1}, "t.yaml").catalog_table(0) is None
    for table, said in (({"catalog": "main"}, "table.schema: is required, e.g. schema: kafka"),
                        ({"schema": " "}, "table.schema: must be a non-empty name, got ' '"),
                        ({"schema": "k", "database": "x"}, "table.database: unknown field;"),
                        ("kafka", "table: must be a mapping with schema (and catalog), got 'kafka'")):
        with pytest.raises(SpecError) as refused:
            parse_spec({"topic": "o", "partitions": 1, "table": table}, "t.yaml")
        assert said in refused.value.lines()[0]
