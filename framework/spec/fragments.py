"""JSON Schema fragments the spec model's fields declare where the schema is stricter than
lint, so that a schema-valid spec always lints clean."""

from __future__ import annotations

from framework.spec.names import TOPIC_MAX_LENGTH

__all__ = ["ENV_SAFE", "NOT_BLANK", "SERVERS_SCHEMA", "TOPIC_NAME_SCHEMA"]

#: Where the schema is stricter than lint (a schema-valid spec always lints clean): group
#: lists as YAML lists, names and servers with something besides spaces, ${NAME} references.
NOT_BLANK = r"\S"
ENV_SAFE = r"(?:[^$]|\$\{[A-Za-z_][A-Za-z0-9_]*\})*"
SERVERS_SCHEMA = {"type": "string", "pattern": "^\\s*(?:[^\\s$]|\\$\\{[A-Za-z_][A-Za-z0-9_]*\\})" + ENV_SAFE + "$",
                   "examples": ["broker1:9092,broker2:9092", "${KAFKA_BOOTSTRAP_SERVERS}"]}
TOPIC_NAME_SCHEMA = {"type": "string", "minLength": 1, "maxLength": TOPIC_MAX_LENGTH, "pattern": "^[A-Za-z0-9._-]+$",
                      # "\n": a regex's $ also matches before a final newline in some engines (Python's)
                      "not": {"anyOf": [{"enum": [".", ".."]}, {"pattern": "\n"}]}}

