"""A spec's own expectations judged in pandas (framework/checks/pandas_expectations.py),
pinned to Great Expectations' Spark answer on a shared corpus: each type judged there, its
answer and unexpected count over the same records through both datasources; the patterns
taken as portable and those refused; why a pattern's column must hold only plain ASCII
(Python's ``\\s`` matches characters Java's does not); and ``validate`` of a topic with
expectations in a new process, which starts no JVM and prints what Spark's route prints."""

from __future__ import annotations

import json

import pytest

from framework.checks import gx_suites, pandas_expectations
from framework.log.table_layout import RECORD_COLUMNS
from framework.log.warehouse import Warehouse
from framework.spec import parse_spec
from tests.support.cli_process import in_a_new_cli_process

#: Plain ASCII (and the five controls Python's and Java's ``\s`` share), as a pattern's column must hold.
VALUES = ['{"id": 1}', '  {"id": 2}', "", "abc", "ABC_123", "a-b", "tab\there", "line\nbreak", "{", "x{2}",
          "   ", "\r\n{", "\x0b{", "\x0c{", "ab", "aab", "b", "a.b", "under_score", "1234", None, None]
PATTERNS = [r"^\s*\{", r"^[A-Z]+_\d+", r"\w+", r"b|c", r"(?:ab)+c?", r"x\{2\}", r"[^a-z ]", r"\d{1,3}",
            r"[\s-]", r"a*?b", r"^(a|b)+", r"\S\s\S", r"[A-Za-z0-9_]{4}", r"\W", r"\D+", r'"id"', r"\.", r"a\-b"]
EXPECTATIONS = [
    {"type": "expect_column_to_exist", "kwargs": {"column": "headers"}},
    {"type": "expect_column_to_exist", "kwargs": {"column": "absent"}},
    {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "value"}},
    {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "value", "mostly": 0.5}},
    {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "key"}},
    {"type": "expect_column_values_to_be_null", "kwargs": {"column": "value"}},
    {"type": "expect_column_values_to_be_in_set", "kwargs": {"column": "value", "value_set": ["abc", "{", ""]}},
    {"type": "expect_column_values_to_be_in_set", "kwargs": {"column": "value", "value_set": []}},
    {"type": "expect_column_values_to_not_be_in_set", "kwargs": {"column": "value", "value_set": ["abc"]}},
    {"type": "expect_column_values_to_be_in_set", "kwargs": {"column": "offset", "value_set": [0, 3, 99]}},
    {"type": "expect_column_values_to_be_in_set", "kwargs": {"column": "offset",
                                                             "value_set": list(range(len(VALUES)))}},
    {"type": "expect_column_value_lengths_to_be_between", "kwargs": {"column": "value", "min_value": 1,
                                                                     "max_value": 5}},
    {"type": "expect_column_value_lengths_to_be_between", "kwargs": {"column": "value", "min_value": 1,
                                                                     "max_value": 5, "strict_min": True,
                                                                     "strict_max": True, "mostly": 0.3}},
    {"type": "expect_column_value_lengths_to_be_between", "kwargs": {"column": "key", "max_value": 3}},
    {"type": "expect_column_value_lengths_to_equal", "kwargs": {"column": "value", "value": 3}},
    {"type": "expect_column_value_lengths_to_equal", "kwargs": {"column": "key", "value": 2}},
    {"type": "expect_column_values_to_be_null", "kwargs": {"column": "value", "mostly": 0.05}},
    {"type": "expect_column_values_to_not_be_in_set", "kwargs": {"column": "value", "value_set": ["absent"]}},
    {"type": "expect_column_values_to_match_regex", "kwargs": {"column": "value", "regex": r"\d{1,3}", "mostly": 0.1}},
    {"type": "expect_column_values_to_not_match_regex", "kwargs": {"column": "value", "regex": r"[\s-]",
                                                                   "mostly": 0.5}},
    *[{"type": kind, "kwargs": {"column": "value", "regex": pattern}}
      for pattern in PATTERNS for kind in ("expect_column_values_to_match_regex",
                                           "expect_column_values_to_not_match_regex")],
    {"type": "expect_table_row_count_to_be_between", "kwargs": {"min_value": 1, "max_value": 100}},
    {"type": "expect_table_row_count_to_be_between", "kwargs": {"min_value": 30}},
    {"type": "expect_table_row_count_to_equal", "kwargs": {"value": len(VALUES)}},
    {"type": "expect_table_row_count_to_equal", "kwargs": {"value": 5}},
]


def _spec(expectations, **extra):
    return parse_spec({"topic": "judged", "partitions": 1, "expectations": expectations, **extra}, "test")


def _frames(spark, values):
    """The same records as a pandas frame (offset order, as ``records`` gives them) and as
    Spark's frame of a partition table's record columns."""
    import pandas as pd
    from pyspark.sql import types as T

    rows = [(i, 1_000 + i, f"k{i % 7}" if i % 9 else None, value, []) for i, value in enumerate(values)]
    header = T.StructType([T.StructField("key", T.StringType()), T.StructField("value", T.BinaryType())])
    schema = T.StructType([T.StructField("offset", T.LongType(), False), T.StructField("timestamp", T.LongType()),
                           T.StructField("key", T.StringType()), T.StructField("value", T.StringType()),
                           T.StructField("headers", T.ArrayType(header), False)])
    return pd.DataFrame(rows, columns=list(RECORD_COLUMNS)), spark.createDataFrame(rows, schema)


def _answers(tmp_path, spec, pandas_frame, spark_frame) -> dict:
    """Each expectation's (success, unexpected count or observed value), by datasource."""
    project = gx_suites.Project(Warehouse.resolve(str(tmp_path / "w")))
    answers = {}
    for name, frame, datasource in (("pandas", pandas_frame, gx_suites.METRICS_DATASOURCE),
                                    ("spark", spark_frame, gx_suites.DATASOURCE)):
        result = project.run(definition=f"parity.{name}", suite_name="parity", asset="judged.records",
                             expectations=gx_suites.spec_expectations(spec), frame=frame,
                             result_format="SUMMARY", datasource=datasource)
        answers[name] = {_key(item.expectation_config.type, item.expectation_config.kwargs):
                         (item.success, (item.result or {}).get("unexpected_count",
                                                                (item.result or {}).get("observed_value")))
                         for item in result.results}
    return answers


def _key(kind: str, kwargs) -> str:
    """An expectation as a result names it (GE orders a suite's results its own way, and
    may hold a whole number as a float)."""
    def plain(value):
        if isinstance(value, (list, tuple)):
            return [plain(v) for v in value]
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value

    return json.dumps([kind, {k: plain(v) for k, v in dict(kwargs).items() if k != "batch_id"}], sort_keys=True)


def test_each_type_judged_in_pandas_answers_as_spark_does(spark, tmp_path):
    spec = _spec(EXPECTATIONS)
    assert pandas_expectations.judged_here(spec)
    answers = _answers(tmp_path, spec, *_frames(spark, VALUES))
    assert len(answers["spark"]) == len(EXPECTATIONS)
    assert answers["pandas"] == answers["spark"]
    # the corpus tells the answers apart: each type passes somewhere and fails somewhere
    outcomes = {}
    for expectation in EXPECTATIONS:
        success, _ = answers["spark"][_key(expectation["type"], expectation["kwargs"])]
        outcomes.setdefault(expectation["type"], set()).add(success)
    assert {kind: seen for kind, seen in outcomes.items() if seen != {True, False}} == {}
    assert len(outcomes) == len(pandas_expectations.KWARGS)


def test_outside_plain_ascii_python_s_whitespace_is_not_java_s(spark, tmp_path):
    r"""Why a pattern's column must hold plain ASCII: a file separator (``\x1c``) and a
    no-break space are whitespace to Python's ``\s`` and not to Java's, so the same
    pattern finds different strings; a partition holding one is judged by Spark."""
    spec = _spec([{"type": "expect_column_values_to_match_regex", "kwargs": {"column": "value", "regex": r"^\s*\{"}}])
    answers = _answers(tmp_path, spec, *_frames(spark, ['{"a": 1}', "\x1c{", "\u00a0{"]))
    assert [list(answers[way].values()) for way in ("pandas", "spark")] == [[(True, 0)], [(False, 2)]]


@pytest.mark.parametrize("pattern, portable", [
    *[(pattern, True) for pattern in PATTERNS],
    ("", True), ("()", True), ("a|", True),
    (".", False), ("a$", False), (r"\b", False), ("(?i)a", False), ("(?=a)", False), (r"(a)\1", False),
    ("[a&&b]", False), (r"\p{L}", False), ("a{,2}", False), ("a*+", False), (r"\Q.\E", False), ("[[a]]", False),
    (r"\x41", False), ("é", False), ("*a", False), ("a**", False), ("(a", False), ("a)", False), ("{", False),
    ("a{2,1}", False), ("]", False), ("[a-]", True), ("[-a]", False), (r"\z", False), ("a\tb", False), (None, False),
])
def test_a_pattern_is_portable_only_in_the_syntax_both_read_alike(pattern, portable):
    assert pandas_expectations.portable_regex(pattern) is portable


@pytest.mark.parametrize("expectation, extra, here", [
    ({"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "key"}}, {}, True),
    ({"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "key"}}, {"key": {"type": "binary"}}, False),
    ({"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "timestamp"}}, {}, False),
    ({"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "key", "row_condition": 'key=="a"',
                                                                "condition_parser": "pandas"}}, {}, False),
    ({"type": "expect_column_values_to_be_in_set", "kwargs": {"column": "key", "value_set": ["a", 1]}}, {}, False),
    ({"type": "expect_column_values_to_be_in_set", "kwargs": {"column": "offset", "value_set": [1, True]}}, {}, False),
    ({"type": "expect_column_values_to_match_regex", "kwargs": {"column": "offset", "regex": "1"}}, {}, False),
    ({"type": "expect_column_values_to_match_regex", "kwargs": {"column": "value", "regex": "a.c"}}, {}, False),
    ({"type": "expect_column_values_to_be_unique", "kwargs": {"column": "key"}}, {}, False),
    ({"type": "unexpected_rows_expectation", "kwargs": {"unexpected_rows_query": "SELECT * FROM {batch}"}}, {},
     False),
])
def test_only_types_columns_and_arguments_pinned_here_are_judged_in_pandas(expectation, extra, here):
    assert pandas_expectations.judged_here(_spec([expectation], **extra)) is here


def test_validate_of_a_topic_with_expectations_starts_no_jvm_and_prints_what_spark_s_route_prints(
        spark, tmp_path, capsys, monkeypatch):
    """A small local partition whose spec's expectations are judged in pandas: ``validate``
    in a new process starts no JVM, and prints what the same command prints with them
    judged over Spark's frame: one expectation failing (its unexpected values named), the
    others passing. A partition holding a value outside plain ASCII is read for them by
    Spark."""
    from framework.cli.main import main

    folder = tmp_path / "specs"
    folder.mkdir()
    (folder / "judged.yaml").write_text(
        "topic: judged\npartitions: 1\nconfig:\n  cleanup.policy: compact\n  min.cleanable.dirty.ratio: 0.0\n"
        "expectations:\n"
        "  - type: expect_column_values_to_not_be_null\n    kwargs: {column: key}\n"
        "  - type: expect_column_values_to_match_regex\n    kwargs: {column: value, regex: '^\\s*\\{'}\n"
        "  - type: expect_column_value_lengths_to_be_between\n    kwargs: {column: value, max_value: 40}\n")
    lines = tmp_path / "in.jsonl"
    lines.write_text("".join(json.dumps({"key": f"k{i}", "value": '{"n": %d}' % i if i % 4 else f"plain {i}",
                                         "timestamp": i}) + "\n" for i in range(12)))
    common = ["--warehouse", str(tmp_path / "w"), "--specs", str(folder)]
    assert main([*common, "produce", "--topic", "judged", "--input", str(lines), "--now", "100"]) == 0
    capsys.readouterr()
    command = [*common, "--json", "validate", "--topic", "judged", "--now", "100"]
    printed, jvm_started = in_a_new_cli_process(*command, timeout=300, statuses=("1",))
    assert not jvm_started, printed[-2000:]
    with monkeypatch.context() as patch:
        patch.setattr(pandas_expectations, "records", lambda *args: None)
        assert main(command) == 1
    by_spark = capsys.readouterr().out
    assert json.loads(printed) == json.loads(by_spark)
    [partition] = json.loads(printed)
    assert partition["failed_guarantees"] == ["spec expectation expect_column_values_to_match_regex"]
    assert "3 unexpected value(s), e.g. ['plain 0', 'plain 4', 'plain 8']" in " ".join(partition["details"])

    from framework.log.topic import Topic
    from framework.spec import load_specs

    log = Topic(spark, Warehouse.resolve(str(tmp_path / "w")), load_specs([folder])[0]).partition(0)
    version = log.snapshot().version
    assert pandas_expectations.records(log.spec, log.path, version) is not None
    lines.write_text(json.dumps({"key": "k0", "value": "\u00a0{}", "timestamp": 20}) + "\n")
    assert main([*common, "produce", "--topic", "judged", "--input", str(lines), "--now", "100"]) == 0
    assert pandas_expectations.records(log.spec, log.path, log.snapshot().version) is None
