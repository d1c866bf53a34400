"""The spec's JSON Schema (``topiclake schema``): generated from the pydantic model, shipped
in the package, valid for every shipped and acceptance spec, and never looser than lint.
No Spark."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import jsonschema
import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from framework.errors import SpecError
from framework.spec import parse_spec
from framework.spec.schema import SCHEMA_FILE, schema_text, spec_schema
from tests.support.acceptance_files import acceptance_files

REPO = Path(__file__).resolve().parent.parent
SCHEMA_LINE = "# yaml-language-server: $schema=../framework/spec/topic-spec.schema.json"


@cache  # checking the schema against its meta-schema is most of a generated example's cost
def _validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(SCHEMA_FILE.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_the_shipped_schema_is_the_one_the_model_generates():
    """Regenerate with `topiclake schema --output framework/spec/topic-spec.schema.json`."""
    assert SCHEMA_FILE.read_text() == schema_text()
    printed = subprocess.run([sys.executable, "-m", "framework.cli", "schema"], cwd=REPO, capture_output=True,
                             text=True, timeout=60)
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout == schema_text() and printed.stderr == ""


def test_the_schema_uses_kafkas_names_and_says_their_rules():
    config = spec_schema()["$defs"]["TopicConfig"]
    assert {"cleanup.policy", "max.compaction.lag.ms", "compaction.strategy.header"} <= set(config["properties"])
    assert config["properties"]["max.compaction.lag.ms"]["minimum"] == 1
    assert config["properties"]["segment.bytes"]["minimum"] == 1 << 20
    assert config["additionalProperties"] is False
    assert "^segment[.]ms$" in config["patternProperties"]  # a pasted broker setting is accepted and ignored


@pytest.mark.parametrize("path", sorted((REPO / "table_specs").glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_spec_validates_and_names_the_schema_for_editors(path):
    assert path.read_text().splitlines()[0] == SCHEMA_LINE
    errors = list(_validator().iter_errors(yaml.safe_load(path.read_text())))
    assert not errors, [e.message for e in errors]


@pytest.mark.parametrize("path", acceptance_files(), ids=lambda p: p.name)
def test_every_acceptance_spec_validates(path):
    scenario = yaml.safe_load(path.read_text())
    errors = list(_validator().iter_errors(scenario["spec"]))
    assert not errors, [e.message for e in errors]


def test_the_schema_refuses_what_lint_refuses_in_the_common_cases():
    validator = _validator()
    good = {"topic": "orders", "partitions": 3, "config": {"cleanup.policy": "compact"}}
    assert validator.is_valid(good)
    for bad in ({**good, "topic": ".."}, {**good, "partitions": 0}, {**good, "retention.ms": 5},
                {**good, "config": {"cleanup.policy": "compact", "compaction.strategy": "header"}},
                {**good, "source": {"kafka": {"bootstrap.servers": "b:9092",
                                               "options": {"kafka.sasl.jaas.config": "secret"}}}},
                {**good, "expectations": [{"type": "expect_something_made_up"}]}):
        assert not validator.is_valid(bad), bad
        with pytest.raises(SpecError):
            parse_spec(bad, "test.yaml")


def _compares_settings(spec: dict) -> bool:
    """The two rules JSON Schema cannot say (they compare two settings); lint checks them."""
    config = spec.get("config") or {}
    min_lag = config.get("min.compaction.lag.ms", 0)
    return config.get("max.compaction.lag.ms", 2**63 - 1) < min_lag or \
        config.get("time.travel.retention.ms", max(min_lag, 7 * 24 * 3600 * 1000)) < min_lag


def _instances(node: dict, defs: dict) -> st.SearchStrategy:
    """Documents a schema node accepts, for the subset of JSON Schema the spec's uses.
    (hypothesis-jsonschema would do this, but its 0.23 does not run on today's hypothesis.)
    What this draws too loosely (if/then, not) the test filters with the validator."""
    if "$ref" in node:
        return _instances(defs[node["$ref"].rsplit("/", 1)[1]], defs)
    if "anyOf" in node:
        return st.one_of([_instances(option, defs)
                          for option in node["anyOf"]])
    if "enum" in node:
        return st.sampled_from(node["enum"])
    kind = node.get("type")
    if isinstance(kind, list):
        return st.one_of([_instances({**node, "type": k}, defs) for k in kind])
    if kind == "integer":
        return st.integers(node.get("minimum"), node.get("maximum"))
    if kind == "number":
        return st.floats(node.get("minimum"), node.get("maximum"), allow_nan=False, allow_infinity=False)
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "string":
        text = st.from_regex(node["pattern"]) if "pattern" in node else st.text()
        low, high = node.get("minLength", 0), node.get("maxLength", 300)
        return text.filter(lambda s: low <= len(s) <= high)
    if kind == "array":
        return st.lists(_instances(node["items"], defs), max_size=4, unique=node.get("uniqueItems", False),
                        min_size=node.get("minItems", 0))
    if kind == "object" or "properties" in node:
        required = set(node.get("required", ()))
        fields = {name: _instances(schema, defs) for name, schema in node.get("properties", {}).items()}
        base = st.fixed_dictionaries({k: v for k, v in fields.items() if k in required},
                                     optional={k: v for k, v in fields.items() if k not in required})
        if "propertyNames" not in node:
            return base
        names = st.one_of([st.from_regex(r"\Akafka\.[a-z.]{1,12}\Z"),
                           st.sampled_from(node["propertyNames"]["anyOf"][1]["enum"])])
        secret = re.compile(next(iter(node["patternProperties"])))

        def value_for(name: str) -> st.SearchStrategy:
            schema = node["patternProperties"][secret.pattern] if secret.search(name) else \
                node["additionalProperties"]
            return _instances(schema, defs)

        extra = st.lists(names, max_size=3, unique=True).flatmap(
            lambda keys: st.fixed_dictionaries({k: value_for(k) for k in keys}))
        return st.tuples(base, extra).map(lambda pair: {**pair[0], **pair[1]})
    return st.just({})


_SCHEMA = json.loads(SCHEMA_FILE.read_text())


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(_instances(_SCHEMA, _SCHEMA["$defs"]))
def test_every_spec_the_schema_accepts_lint_accepts(spec):
    assume(_validator().is_valid(spec))
    assume(not _compares_settings(spec))
    parse_spec(spec, "generated.yaml")  # raises SpecError on any problem
