"""A spec document, parsed: validated against :class:`SpecDocument`, every problem of a
file at once, each placed at its file, line and column; then the engine's ``TopicSpec``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from framework.spec.model import SpecDocument, TopicSpec
from framework.spec.names import IGNORED_CONFIGS
from framework.spec.problems import Checker, shown
from framework.spec.yaml_source import Marks

__all__ = ["parse_spec"]


def parse_spec(data: Any, source: str, marks: Marks | None = None) -> TopicSpec:
    """Validate an already-loaded spec mapping; raise SpecError listing every problem."""
    checker = Checker(source, marks or Marks())
    if data is None:
        checker.add((), "the spec is empty; it needs at least topic and partitions")
    elif not isinstance(data, Mapping):
        checker.add((), f"a spec must be a mapping with topic, partitions and config, got {shown(data)}")
    elif "spec" in data and "steps" in data and "topic" not in data:
        checker.add((), "this is a scenario file (it has spec and steps); run it with topiclake simulate")
    checker.raise_if_any()
    try:
        document = SpecDocument.model_validate(data)
    except ValidationError as error:
        checker.add_errors(error)
    checker.raise_if_any()
    config = data.get("config")
    ignored = tuple(name for name in config if name in IGNORED_CONFIGS) if isinstance(config, Mapping) else ()
    expectations = tuple(e.model_copy(update={"line": checker.marks.at(("expectations", index))[0]})
                         for index, e in enumerate(document.expectations))
    return TopicSpec(
        topic=document.topic, partitions=document.partitions, key_type=document.key.type,
        value_type=document.value.type, config=document.config, expectations=expectations,
        ignored_configs=ignored, warnings=tuple(document.config.warnings()), source=source,
        kafka_source=None if document.source is None else document.source.kafka, table=document.table,
    )
