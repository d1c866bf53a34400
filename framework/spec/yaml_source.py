"""Safe YAML with positions: the data as `yaml.SafeLoader` builds it, plus where each
value and mapping key was written, so a problem can say `orders.yaml:7:3`.

PyYAML keeps the last of two equal keys in a mapping without a word; a spec that sets
`min.compaction.lag.ms` twice would silently lose one of them. We walk the composed
node tree before building the data and report every duplicate key at its line.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

import yaml

from framework.errors import Problem, ProblemsError

__all__ = ["Marks", "YamlPath", "YamlSyntaxError", "load_yaml", "load_yaml_file"]

#: A place in loaded YAML data: mapping keys and list indexes from the root.
YamlPath = tuple[Any, ...]
Position = tuple[int | None, int | None]

_MERGE_TAG = "tag:yaml.org,2002:merge"
_NOWHERE: Position = (None, None)


class YamlSyntaxError(ProblemsError):
    """A YAML file could not be read: unreadable, malformed, or with a duplicate key."""


def _frozen(positions: Mapping[YamlPath, Position] | None = None) -> Mapping[YamlPath, Position]:
    return MappingProxyType(dict(positions or {}))


@dataclass(frozen=True)
class Marks:
    """1-based (line, column) of every value and every mapping key, by path."""

    values: Mapping[YamlPath, Position] = field(default_factory=_frozen)
    keys: Mapping[YamlPath, Position] = field(default_factory=_frozen)
    #: where to point when no path matches (set by `sub` to the prefix's position)
    fallback: Position = _NOWHERE

    def at(self, path: YamlPath) -> Position:
        """Where the value at `path` was written, else its nearest known ancestor."""
        path = tuple(path)
        for end in range(len(path), -1, -1):
            position = self.values.get(path[:end])
            if position is not None:
                return position
        return self.fallback

    def key(self, path: YamlPath) -> Position:
        """Where the mapping key naming `path` was written, else as `at(path)`."""
        return self.keys.get(tuple(path)) or self.at(path)

    def sub(self, prefix: YamlPath) -> Marks:
        """The marks of the value at `prefix`, re-rooted so that `prefix` becomes ()."""
        prefix = tuple(prefix)
        n = len(prefix)
        return Marks(
            values=_frozen({p[n:]: v for p, v in self.values.items() if p[:n] == prefix}),
            keys=_frozen({p[n:]: v for p, v in self.keys.items() if len(p) > n and p[:n] == prefix}),
            fallback=self.at(prefix),
        )


def _position(mark: yaml.Mark | None) -> Position:
    return (mark.line + 1, mark.column + 1) if mark is not None else _NOWHERE


class _Walker:
    """Records positions and finds duplicate keys in a composed node tree."""

    def __init__(self, loader: yaml.SafeLoader, source: str):
        self.loader = loader
        self.source = source
        self.values: dict[YamlPath, Position] = {}
        self.keys: dict[YamlPath, Position] = {}
        self.duplicates: list[Problem] = []
        # An alias is the very node of its anchor: walk each node once, which also
        # stops recursive aliases and "billion laughs" documents.
        self.seen: set[int] = set()

    def walk(self, node: yaml.Node, path: YamlPath) -> None:
        self.values.setdefault(path, _position(node.start_mark))
        if id(node) in self.seen:
            return
        self.seen.add(id(node))
        if isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                self.walk(item, path + (index,))
        elif isinstance(node, yaml.MappingNode):
            self._walk_mapping(node, path)

    def _walk_mapping(self, node: yaml.MappingNode, path: YamlPath) -> None:
        first_seen: dict[Any, yaml.Node] = {}
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                # `<<: *base` merges are allowed to be overridden; not duplicates.
                self.walk(value_node, path)
                continue
            key = self._key(key_node)
            if key in first_seen:
                self._duplicate(key, first_seen[key], key_node)
            else:
                first_seen[key] = key_node
            self.keys.setdefault(path + (key,), _position(key_node.start_mark))
            self.walk(value_node, path + (key,))

    def _key(self, key_node: yaml.Node) -> Any:
        if not isinstance(key_node, yaml.ScalarNode):
            return f"<{key_node.id} key at line {key_node.start_mark.line + 1}>"
        key = self.loader.construct_object(key_node)
        try:
            hash(key)
        except TypeError:
            return repr(key)
        return key

    def _duplicate(self, key: Any, first: yaml.Node, again: yaml.Node) -> None:
        line, column = _position(again.start_mark)
        self.duplicates.append(Problem(
            self.source, line, column, None,
            f"duplicate key {key!r} in one mapping (first written at line {first.start_mark.line + 1});"
            " YAML would silently keep only the last one, so write it once",
        ))


def load_yaml(text: str, source: str) -> tuple[Any, Marks]:
    """Parse one YAML document with `yaml.SafeLoader`; return the data and its marks.

    Raises `YamlSyntaxError` for a syntax error (one problem at PyYAML's position), for
    a tag the safe loader refuses, and for every duplicate mapping key.
    """
    try:
        loader = yaml.SafeLoader(text)
    except yaml.reader.ReaderError as error:  # a control character, refused before parsing
        line = text.count("\n", 0, error.position) + 1
        raise YamlSyntaxError([Problem(
            source, line, None, None, f"not valid YAML: character {error.character:#06x} is not allowed",
        )]) from None
    try:
        node = loader.get_single_node()
        if node is None:  # an empty file, or only comments
            return None, Marks()
        walker = _Walker(loader, source)
        walker.walk(node, ())
        if walker.duplicates:
            raise YamlSyntaxError(walker.duplicates)
        data = loader.construct_document(node)
    except yaml.MarkedYAMLError as error:
        raise YamlSyntaxError([_syntax_problem(error, source)]) from None
    except yaml.YAMLError as error:
        raise YamlSyntaxError([Problem(source, None, None, None, f"not valid YAML: {error}")]) from None
    except RecursionError:
        raise YamlSyntaxError([Problem(source, None, None, None, "not valid YAML: nested too deeply")]) from None
    finally:
        loader.dispose()
    return data, Marks(_frozen(walker.values), _frozen(walker.keys))


def _syntax_problem(error: yaml.MarkedYAMLError, source: str) -> Problem:
    line, column = _position(error.problem_mark or error.context_mark)
    what = "; ".join(part for part in (error.context, error.problem) if part)
    return Problem(source, line, column, None, f"not valid YAML: {what}")


def load_yaml_file(path: str | os.PathLike[str]) -> tuple[Any, Marks]:
    """Read a UTF-8 YAML file (a leading BOM is fine) and `load_yaml` it."""
    source = os.fspath(path)
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError as error:
        reason = error.strerror or str(error)
        raise YamlSyntaxError([Problem(source, None, None, None, f"cannot read the file: {reason}")]) from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise YamlSyntaxError([Problem(
            source, None, None, None,
            f"not UTF-8 text: byte {raw[error.start]:#04x} at offset {error.start} is not valid UTF-8",
        )]) from None
    return load_yaml(text, source)
