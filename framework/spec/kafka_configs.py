"""A topic spec from a Kafka topic's configs, as Kafka's own tools print them.

Two inputs, told apart by their text:

- a Java properties file (``name=value`` or ``name: value`` lines, ``#`` and ``!``
  comments), such as a team keeps next to ``kafka-topics --create --config``;
- what ``kafka-configs --describe --entity-type topics`` prints: a heading per topic
  (``Dynamic configs for topic orders are:``, or ``All configs ...`` with ``--all``), then
  ``name=value sensitive=... synonyms={SOURCE:name=value, ...}`` lines.

The spec keeps every setting topiclake knows whose value differs from its default (so an
``--all`` describe gives the same spec as the topic's overrides), leaves out what means
nothing for a Delta table (reported as ignored), what topiclake does not know (reported),
and sensitive values Kafka does not print. Pure: text in, a spec mapping and notes out;
the result is checked by :func:`framework.spec.parse_spec` before anyone sees it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from framework.errors import ArgumentError, Problem, SpecError
from framework.spec import IGNORED_CONFIGS, KNOWN_CONFIGS, TopicConfig, parse_spec

_HEADING = re.compile(r"^(?:Dynamic|All|Static)?\s*configs for topic (?P<topic>\S+) are:\s*$", re.IGNORECASE)
_DESCRIBED = re.compile(r"^\s+(?P<name>[A-Za-z0-9._-]+)=(?P<value>.*?) sensitive=(?P<sensitive>true|false)"
                        r" synonyms=\{(?P<synonyms>.*)\}\s*$")
#: Where a setting comes from when the topic itself sets it (a properties file is the topic's).
TOPIC_ORIGINS = frozenset({"DYNAMIC_TOPIC_CONFIG", "file"})
_PROPERTY = re.compile(r"^\s*(?P<name>[^=:\s]+)\s*[=:]\s*(?P<value>.*?)\s*$")


@dataclass(frozen=True)
class KafkaSetting:
    name: str
    value: str | None
    #: where Kafka took it from (DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG, ...), or "file"
    origin: str


@dataclass
class ImportedSpec:
    """A spec mapping (YAML-able) and what was left out of it, and why."""

    spec: dict[str, Any]
    ignored: list[str] = field(default_factory=list)
    #: ignored settings the topic does not set itself (Kafka's or the broker's defaults)
    ignored_defaults: int = 0
    unknown: list[str] = field(default_factory=list)
    hidden: list[str] = field(default_factory=list)

    def notes(self) -> list[str]:
        out = []
        if self.ignored or self.ignored_defaults:
            named = ", ".join(self.ignored) or "none the topic sets"
            more = f", and {self.ignored_defaults} broker or default setting(s)" if self.ignored_defaults else ""
            out.append(f"ignored (they mean nothing for a Delta table): {named}{more}")
        if self.unknown:
            out.append(f"left out (not Kafka topic configs topiclake knows): {', '.join(self.unknown)}")
        if self.hidden:
            out.append(f"left out (sensitive; Kafka does not print their values): {', '.join(self.hidden)}")
        return out


def read_settings(text: str, source: str) -> dict[str, list[KafkaSetting]]:
    """Settings per topic name ("" for a properties file, which names no topic)."""
    lines = text.splitlines()
    described = any(_HEADING.match(line) for line in lines)
    topics: dict[str, list[KafkaSetting]] = {}
    current: str | None = None if described else ""
    if not described:
        topics[""] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip() or line.lstrip().startswith(("#", "!")):
            continue
        if described:
            heading = _HEADING.match(line)
            if heading:
                current = heading.group("topic")
                topics.setdefault(current, [])
                continue
            match = _DESCRIBED.match(line)
            if match is None or current is None:
                raise SpecError([Problem(source, number, None, None, "not a line of `kafka-configs --describe` "
                                         f"(name=value sensitive=... synonyms={{...}}): {line.strip()[:80]!r}")])
            synonyms = match.group("synonyms")
            origin = synonyms.split(":", 1)[0].strip() if ":" in synonyms else "UNKNOWN"
            hidden = match.group("sensitive") == "true" and match.group("value") == "null"
            topics[current].append(KafkaSetting(match.group("name"), None if hidden else match.group("value"), origin))
        else:
            match = _PROPERTY.match(line)
            if match is None:
                raise SpecError([Problem(source, number, None, None,
                                         f"not a properties line (name=value): {line.strip()[:80]!r}")])
            topics[""].append(KafkaSetting(match.group("name"), match.group("value"), "file"))
    return topics


def import_spec(text: str, source: str, partitions: int, topic: str | None = None,
                bootstrap_servers: str | None = None) -> ImportedSpec:
    """The spec of one topic whose configs ``text`` holds; refuses (exit 2) what it cannot place."""
    topics = read_settings(text, source)
    if "" in topics:
        if topic is None:
            raise ArgumentError(f"--topic: {source} is a properties file, which names no topic; say which")
        settings = topics[""]
    else:
        if topic is None:
            if len(topics) != 1:
                raise ArgumentError(f"--topic: {source} describes {len(topics)} topics "
                                    f"({', '.join(sorted(topics))}); say which")
            topic = next(iter(topics))
        if topic not in topics:
            raise ArgumentError(f"--topic: {source} does not describe topic {topic!r} "
                                f"(it describes {', '.join(sorted(topics)) or 'none'})")
        settings = topics[topic]
    imported = ImportedSpec(spec={})
    given: dict[str, str] = {}
    for setting in settings:
        if setting.name in KNOWN_CONFIGS:
            if setting.value is None:
                imported.hidden.append(setting.name)
            else:
                given[setting.name] = setting.value
        elif setting.name in IGNORED_CONFIGS:
            if setting.origin in TOPIC_ORIGINS:
                imported.ignored.append(setting.name)
            else:
                imported.ignored_defaults += 1
        else:
            imported.unknown.append(setting.name)
    config = TopicConfig.from_kafka(given, source=source).to_kafka()
    defaults = TopicConfig.from_kafka({}).to_kafka()
    # Only what the topic sets, and only where it differs from the default (an `--all`
    # describe lists every default too).
    kept = {name: config[name] for name in config if name in given and config[name] != defaults[name]}
    spec: dict[str, Any] = {"topic": topic, "partitions": partitions, "config": kept}
    if bootstrap_servers:
        spec["source"] = {"kafka": {"bootstrap.servers": bootstrap_servers, "topic": topic}}
    parse_spec(spec, source)  # what is written lints
    imported.spec = spec
    return imported
