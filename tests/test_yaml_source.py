"""Safe YAML with positions: typed data, line/column marks, duplicate keys, refusals."""

from __future__ import annotations

import datetime
import textwrap

import pytest

from framework.errors import ExitCode, ProblemsError
from framework.spec.yaml_source import Marks, YamlSyntaxError, load_yaml, load_yaml_file


def load(text: str):
    return load_yaml(textwrap.dedent(text), "test.yaml")


def refusal(text: str) -> list:
    with pytest.raises(YamlSyntaxError) as caught:
        load(text)
    return list(caught.value.problems)


# ---------------------------------------------------------------- data as SafeLoader types it


def test_scalars_are_typed_as_the_safe_loader_types_them():
    data, _ = load("""\
        int: 42
        float: 0.5
        bool: true
        none: null
        text: compact,delete
        quoted: "123"
        binary: !!binary aGVsbG8=
        date: 2024-01-02
    """)
    assert data == {
        "int": 42, "float": 0.5, "bool": True, "none": None, "text": "compact,delete",
        "quoted": "123", "binary": b"hello", "date": datetime.date(2024, 1, 2),
    }


@pytest.mark.parametrize("text", ["", "# only a comment\n", "\n\n"])
def test_an_empty_document_is_none_with_no_marks(text):
    data, marks = load_yaml(text, "empty.yaml")
    assert data is None
    assert marks.at(()) == (None, None)


def test_merge_keys_work_and_may_be_overridden():
    data, _ = load("""\
        base: &base {cleanup.policy: compact, retention.ms: 1}
        topic:
          <<: *base
          retention.ms: 2
    """)
    assert data["topic"] == {"cleanup.policy": "compact", "retention.ms": 2}


def test_a_recursive_alias_does_not_hang():
    data, marks = load("loop: &a [*a]\n")
    assert data["loop"][0] is data["loop"]
    assert marks.at(("loop",)) == (1, 7)


# ---------------------------------------------------------------- marks


MARKED = """\
    topic: orders
    config:
      cleanup.policy: compact
    expectations:
      - type: expect_column_values_to_not_be_null
        kwargs: {column: key}
"""


def test_marks_give_1_based_line_and_column_of_values():
    _, marks = load(MARKED)
    assert marks.at(()) == (1, 1)
    assert marks.at(("topic",)) == (1, 8)
    assert marks.at(("config", "cleanup.policy")) == (3, 19)
    assert marks.at(("expectations", 0)) == (5, 5)
    assert marks.at(("expectations", 0, "kwargs", "column")) == (6, 22)


def test_marks_give_positions_of_mapping_keys():
    _, marks = load(MARKED)
    assert marks.key(("config", "cleanup.policy")) == (3, 3)
    assert marks.key(("expectations", 0, "kwargs")) == (6, 5)
    # a list item has no key: its value's position
    assert marks.key(("expectations", 0)) == (5, 5)


def test_an_unknown_path_falls_back_to_its_nearest_ancestor():
    _, marks = load(MARKED)
    assert marks.at(("config", "retention.ms")) == marks.at(("config",)) == (3, 3)
    assert marks.at(("expectations", 7, "type")) == marks.at(("expectations",))
    assert marks.at(("nowhere", "at", "all")) == (1, 1)
    assert Marks().at(("topic",)) == (None, None)


def test_sub_re_roots_positions_under_a_prefix():
    _, marks = load("""\
        name: a scenario
        spec:
          topic: users
          config: {cleanup.policy: compact}
        steps: []
    """)
    spec_marks = marks.sub(("spec",))
    assert spec_marks.at(()) == (3, 3)
    assert spec_marks.at(("topic",)) == (3, 10)
    assert spec_marks.key(("config",)) == (4, 3)
    assert spec_marks.at(("config", "cleanup.policy")) == (4, 28)
    assert spec_marks.at(("steps",)) == (3, 3)  # not under spec: falls back to the spec


def test_sub_of_a_missing_prefix_falls_back_to_the_nearest_ancestor():
    _, marks = load("a:\n  b: 1\n")
    assert marks.sub(("a", "missing")).at(("x",)) == (2, 3)


# ---------------------------------------------------------------- refusals


def test_a_duplicate_key_is_a_problem_at_its_line():
    [problem] = refusal("""\
        topic: a
        config:
          retention.ms: 1
          retention.ms: 2
    """)
    assert (problem.line, problem.column) == (4, 3)
    assert "duplicate key 'retention.ms'" in problem.rule
    assert "first written at line 3" in problem.rule


def test_every_duplicate_key_is_reported_at_once_even_inside_lists():
    problems = refusal("""\
        topic: a
        topic: b
        expectations:
          - {type: x, type: y}
    """)
    assert [(p.line, p.column) for p in problems] == [(2, 1), (4, 15)]


def test_equal_keys_in_different_mappings_are_fine():
    data, _ = load("a: {x: 1}\nb: {x: 2}\n")
    assert data == {"a": {"x": 1}, "b": {"x": 2}}


def test_a_syntax_error_is_one_problem_at_pyyaml_position():
    [problem] = refusal("""\
        topic: orders
        config: {cleanup.policy: compact
        partitions: 1
    """)
    assert problem.source == "test.yaml"
    assert problem.line == 3
    assert problem.column is not None
    assert problem.field is None
    assert problem.rule.startswith("not valid YAML: ")


def test_a_bad_indentation_is_refused_with_its_line():
    [problem] = refusal("topic: a\n  partitions: 1\n")
    assert problem.line == 2


@pytest.mark.parametrize("tag", ["!!python/object/apply:os.system ['true']", "!!python/name:os.system ''"])
def test_python_tags_are_refused_by_the_safe_loader(tag):
    [problem] = refusal(f"topic: {tag}\n")
    assert "could not determine a constructor" in problem.rule
    assert problem.line == 1


def test_two_documents_in_one_file_are_refused():
    [problem] = refusal("topic: a\n---\ntopic: b\n")
    assert "single document" in problem.rule
    assert problem.line == 2


def test_a_control_character_is_refused_with_its_line():
    [problem] = refusal("topic: a\npartitions: \x07\n")
    assert problem.line == 2
    assert "0x0007" in problem.rule


def test_yaml_syntax_error_is_bad_input():
    assert issubclass(YamlSyntaxError, ProblemsError)
    assert YamlSyntaxError.exit_code == ExitCode.BAD_INPUT


# ---------------------------------------------------------------- files


def test_load_yaml_file_reads_utf8_and_names_the_path_as_given(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text("\ufefftopic: caf\u00e9s\n", encoding="utf-8")
    data, marks = load_yaml_file(path)
    assert data == {"topic": "caf\u00e9s"}
    assert marks.at(("topic",)) == (1, 8)
    path.write_text("a: 1\na: 2\n", encoding="utf-8")
    with pytest.raises(YamlSyntaxError) as caught:
        load_yaml_file(str(path))
    assert caught.value.problems[0].source == str(path)


def test_a_missing_file_is_a_problem(tmp_path):
    with pytest.raises(YamlSyntaxError) as caught:
        load_yaml_file(tmp_path / "missing.yaml")
    [problem] = caught.value.problems
    assert problem.source.endswith("missing.yaml")
    assert "cannot read the file" in problem.rule


def test_a_file_that_is_not_utf8_is_a_problem(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes("topic: caf\u00e9\n".encode("latin-1"))
    with pytest.raises(YamlSyntaxError) as caught:
        load_yaml_file(path)
    assert "not UTF-8" in caught.value.problems[0].rule
