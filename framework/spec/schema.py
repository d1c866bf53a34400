"""The spec's JSON Schema, generated from the pydantic model (``SpecDocument``), for
editors (yaml-language-server) and other tools; ``topiclake schema`` prints it.

It is stricter than lint where JSON Schema is simpler than Kafka: numbers are numbers
(lint also takes the digit strings a properties file has). Two rules compare two
settings, which JSON Schema cannot: max.compaction.lag.ms and time.travel.retention.ms
must be >= min.compaction.lag.ms; only lint checks them. Expectation types are the names
the installed great_expectations registers (a pattern where it is not installed).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from framework.spec.model import SpecDocument
from framework.spec.names import IGNORED_CONFIGS
from framework.spec.values import known_expectation_types

__all__ = ["SCHEMA_FILE", "spec_schema", "schema_text"]

#: The schema as shipped in the package (``tests/test_schema.py`` keeps it equal to the model's).
SCHEMA_FILE = Path(__file__).with_name("topic-spec.schema.json")
DIALECT = "https://json-schema.org/draft/2020-12/schema"

#: compaction.strategy header needs compaction.strategy.header (KIP-280), said in JSON Schema.
_HEADER_RULE = {
    "if": {"properties": {"compaction.strategy": {"const": "header"}}, "required": ["compaction.strategy"]},
    "then": {"required": ["compaction.strategy.header"],
             "properties": {"compaction.strategy.header": {"type": "string", "minLength": 1}}},
}


def spec_schema() -> dict[str, Any]:
    """The JSON Schema of a spec file (draft 2020-12), with Kafka's dotted config names."""
    schema = SpecDocument.model_json_schema(by_alias=True, mode="validation")
    config = schema["$defs"]["TopicConfig"]
    config.update(_HEADER_RULE)
    # Kafka's topic configs about segments, replicas and disks are accepted and ignored.
    config["patternProperties"] = {f"^{name.replace('.', '[.]')}$": {} for name in sorted(IGNORED_CONFIGS)}
    known = known_expectation_types()
    if known is not None:  # lint refuses the types the installed great_expectations lacks
        schema["$defs"]["ExpectationSpec"]["properties"]["type"]["enum"] = sorted(known)
    return {"$schema": DIALECT, **schema}


def schema_text() -> str:
    return json.dumps(spec_schema(), indent=2, sort_keys=True) + "\n"
