"""Topic specs (CONTRACT section 2): typed, immutable, loaded from YAML with line numbers.

A spec names a topic, its partitions, the key and value types, Kafka's own topic configs
and optional Great Expectations checks. The model is pydantic (``model``); each value's
rule is a function of ``values``, said in Kafka's words. Parsing reports every problem of a
file at once, each with its file, line, field and the rule it breaks, and never starts
Spark, so `lint` answers in a fraction of a second (for git hooks and CI).
"""

from framework.spec.lint import LintReport, lint, load_spec, load_specs
from framework.spec.model import ExpectationSpec, TopicSpec
from framework.spec.names import EXPECTATION_FIELDS, IGNORED_CONFIGS, KAFKA_DEFAULTS, KNOWN_CONFIGS, MIB, SPEC_FIELDS
from framework.spec.parse import parse_spec
from framework.spec.sources import KafkaSource
from framework.spec.topic_config import TopicConfig
from framework.spec.values import known_expectation_types, topic_name_problem

__all__ = [
    "EXPECTATION_FIELDS",
    "IGNORED_CONFIGS",
    "KAFKA_DEFAULTS",
    "KNOWN_CONFIGS",
    "MIB",
    "SPEC_FIELDS",
    "ExpectationSpec",
    "KafkaSource",
    "LintReport",
    "TopicConfig",
    "TopicSpec",
    "known_expectation_types",
    "lint",
    "load_spec",
    "load_specs",
    "parse_spec",
    "topic_name_problem",
]
