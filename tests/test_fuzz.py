"""Fuzzing the readers of user input: specs (YAML text and data), scenario files and JSON
lines. Whatever the input, each reader returns a result or raises topiclake's bad-input
error (exit 2, one line per problem); never another exception, never a hang. No Spark.

Hypothesis generates three kinds of input: arbitrary text (mostly not YAML at all),
YAML-shaped text built from the spec's own vocabulary (known keys, near-miss keys, wrong
types, tags, anchors and aliases), and arbitrary JSON values as records. Each example
runs under a deadline, so a reader that expands an alias bomb or loops fails the test.
"""

from __future__ import annotations

import json
import string

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from framework.cli.simulate import load_scenario
from framework.clients.records import parse_records, read_json_lines
from framework.errors import BadInput
from framework.spec import KNOWN_CONFIGS, load_spec, parse_spec
from framework.spec.yaml_source import load_yaml

FUZZ = settings(max_examples=300, deadline=2000, suppress_health_check=[HealthCheck.function_scoped_fixture])
COMPACTED = parse_spec({"topic": "fuzz", "partitions": 3, "config": {"cleanup.policy": "compact"}}, "fuzz")
BINARY = parse_spec({"topic": "fuzz", "partitions": 1, "key": {"type": "binary"}, "value": {"type": "binary"},
                     "config": {"cleanup.policy": "delete"}}, "fuzz")

SPEC_WORDS = ["topic", "partitions", "key", "value", "config", "expectations", "type", "kwargs", "string",
              "binary", "compact", "delete", "compact,delete", "CreateTime", "LogAppendTime", "offset",
              "timestamp", "header", *sorted(KNOWN_CONFIGS), "cleanup.polcy", "retention.bytes.x"]
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(SPEC_WORDS),
    st.text(alphabet=string.printable, max_size=12), st.sampled_from(["0x1F", "1e3", "010", "-1", "  7 ", "7\n"]),
)
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4),
    st.dictionaries(st.one_of(st.sampled_from(SPEC_WORDS), scalars), inner, max_size=5)), max_leaves=25)
spec_shaped = st.fixed_dictionaries({}, optional={
    "topic": values, "partitions": values, "key": values, "value": values,
    "config": st.dictionaries(st.sampled_from(SPEC_WORDS), values, max_size=6), "expectations": values,
})
YAML_TRICKS = ["!!python/object:os.system x", "!!binary aGk=", "&a [1, *a]", "*nowhere", "<<: {a: 1}", "? [a]\n: b",
               "!custom 1", "%YAML 1.1\n---", "--- a\n--- b", "\t", "\x00", "key: value: other", "[", "{a: 1, a: 2}"]


def _refuses_cleanly(action) -> None:
    try:
        action()
    except BadInput as error:
        lines = error.lines()
        assert lines and all(line and "\n" not in line for line in lines)


@FUZZ
@given(st.text(max_size=300))
def test_any_text_as_a_spec(text):
    _refuses_cleanly(lambda: parse_spec(*load_yaml(text, "fuzz.yaml")[:1], source="fuzz.yaml"))


@FUZZ
@given(spec_shaped, st.lists(st.sampled_from(YAML_TRICKS), max_size=2))
def test_spec_shaped_yaml(data, tricks):
    try:
        text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
    except (yaml.YAMLError, ValueError):
        return
    text = "\n".join([text, *tricks])

    def load():
        loaded, marks = load_yaml(text, "fuzz.yaml")
        parse_spec(loaded, "fuzz.yaml", marks)

    _refuses_cleanly(load)


@FUZZ
@given(spec_shaped)
def test_spec_data_from_python(data):
    _refuses_cleanly(lambda: parse_spec(data, "python"))


@FUZZ
@given(st.binary(max_size=200))
def test_any_bytes_as_a_spec_file(tmp_path_factory, raw):
    path = tmp_path_factory.mktemp("fuzz") / "spec.yaml"
    path.write_bytes(raw)
    _refuses_cleanly(lambda: load_spec(path))


@FUZZ
@given(st.binary(max_size=200))
def test_any_bytes_as_a_scenario_file(tmp_path_factory, raw):
    path = tmp_path_factory.mktemp("fuzz") / "scenario.yaml"
    path.write_bytes(raw)
    _refuses_cleanly(lambda: load_scenario(str(path)))


#: JSON's escapes can spell lone surrogates, which no UTF-8 text holds.
record_values = st.one_of(values, st.sampled_from(["a\ud800", "\udfff"]),
                          st.lists(st.tuples(st.sampled_from(["h", "\ud83d"]), st.sampled_from(["x", "\udc00"]))))
records = st.one_of(values, st.fixed_dictionaries({}, optional={
    "key": record_values, "value": record_values, "timestamp": values, "partition": values,
    "headers": record_values}), st.fixed_dictionaries(  # well-formed but for the text itself
    {"key": record_values, "value": record_values, "timestamp": st.integers(0, 2**42)},
    optional={"headers": record_values}))


def _parses_to_storable_records(action) -> None:
    """Refused cleanly, or records whose every byte produce can encode (size, partitioner)."""
    try:
        parsed = action()
    except BadInput as error:
        lines = error.lines()
        assert lines and all(line and "\n" not in line for line in lines)
        return
    for record in parsed:
        record.size()
        record.key_bytes()


@FUZZ
@given(st.lists(records, max_size=5))
def test_any_json_values_as_records(items):
    for spec in (COMPACTED, BINARY):
        _parses_to_storable_records(lambda: parse_records(list(enumerate(items, start=1)), spec, "fuzz.jsonl"))


@FUZZ
@given(st.lists(st.one_of(st.text(max_size=60), records.map(lambda r: json.dumps(r, default=str))), max_size=6))
def test_any_lines_as_a_json_lines_file(tmp_path_factory, lines):
    path = tmp_path_factory.mktemp("fuzz") / "in.jsonl"
    path.write_text("\n".join(line.replace("\n", " ") for line in lines), encoding="utf-8")
    _parses_to_storable_records(lambda: read_json_lines(str(path), COMPACTED))
