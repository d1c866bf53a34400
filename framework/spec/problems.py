"""How a spec's problems are collected and said: each with its file, line, column and
field, the rule it breaks and, for a misspelt name, the closest known one.

The spec model is pydantic (``model.py``); :class:`Section` is its base. A rule broken
inside it is a ``PydanticCustomError`` of type ``spec`` carrying the sentence to say, so
pydantic's own wording never reaches a user, and :meth:`Checker.add_errors` places each
one where the YAML marks say it was written.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from framework.errors import Problem, SpecError
from framework.spec.yaml_source import Marks, YamlPath

#: The pydantic error type of a broken spec rule.
RULE = "spec"


class Checker:
    """Collects the problems of one spec, each placed where the marks say it was written."""

    def __init__(self, source: str, marks: Marks):
        self.source = source
        self.marks = marks
        self.problems: list[Problem] = []

    def add(self, path: YamlPath, rule: str, *, at_key: bool = False, place: YamlPath | None = None) -> None:
        """A problem with the field at `path`, placed at `place` if given (another setting)."""
        where = path if place is None else place
        line, column = self.marks.key(where) if at_key else self.marks.at(where)
        self.problems.append(Problem(self.source, line, column, _dotted(path), rule))

    def add_errors(self, error: ValidationError, prefix: YamlPath = ()) -> None:
        """Every error pydantic collected, each at its field (``prefix`` + its location)."""
        for detail in error.errors(include_url=False):
            path = prefix + tuple(detail["loc"])
            ctx = detail.get("ctx") or {}
            if detail["type"] != RULE:  # a rule without a sentence of ours: a gap, said plainly
                self.add(path, detail["msg"])
                continue
            place = ctx.get("place")
            self.add(path, ctx["rule"], at_key=bool(ctx.get("at_key")),
                     place=None if place is None else path[:-1] + (place,))

    def raise_if_any(self) -> None:
        if self.problems:
            # In file order, so a reader can walk down the file.
            ordered = sorted(self.problems, key=lambda p: (p.line is None, p.line or 0, p.column or 0))
            raise SpecError(ordered)


class Refused(Exception):
    """A value breaks a rule; the message is the rule, said to the user."""


def _dotted(path: YamlPath) -> str | None:
    """("expectations", 2, "type") -> "expectations[2].type"."""
    text = ""
    for part in path:
        if isinstance(part, int) and not isinstance(part, bool):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text or None


def shown(value: Any) -> str:
    """A value as the user wrote it in YAML, short."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return repr(value if len(value) <= 60 else value[:57] + "...")
    if isinstance(value, bytes):
        return "binary data"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    return f"a {type(value).__name__}"


def _closest(name: str, candidates: Iterable[str]) -> tuple[str, bool]:
    """The candidate closest to `name`, and whether it is close enough to be a likely typo."""
    ordered = sorted(candidates)
    likely = difflib.get_close_matches(name.lower(), ordered, n=1, cutoff=0.6)
    if likely:
        return likely[0], True
    return difflib.get_close_matches(name.lower(), ordered, n=1, cutoff=0.0)[0], False


def suggestion(name: str, candidates: Iterable[str], kind: str) -> str:
    best, likely = _closest(name, candidates)
    return f"did you mean {best!r}?" if likely else f"the closest {kind} is {best!r}"


def rule(text: str, *, at_key: bool = False, place: str | None = None) -> PydanticCustomError:
    """A broken rule, said as ``text``; ``at_key``: point at the name, not the value;
    ``place``: point at this sibling setting instead (the one to change)."""
    ctx: dict[str, Any] = {"rule": text}
    if at_key:
        ctx["at_key"] = True
    if place is not None:
        ctx["place"] = place
    return PydanticCustomError(RULE, "{rule}", ctx)


def checked(parse: Callable[[Any], Any], optional: bool = False) -> Callable[[Any], Any]:
    """A value parser of ``values.py`` as a pydantic validator: its refusal becomes a rule.
    With ``optional``, None (written but empty) passes as None."""
    def validate(value: Any) -> Any:
        if optional and value is None:
            return None
        try:
            return parse(value)
        except Refused as refusal:
            raise rule(str(refusal)) from None
    validate.__name__ = getattr(parse, "__name__", "validate")
    return validate


def broken(title: str, details: Iterable[InitErrorDetails]) -> ValidationError:
    return ValidationError.from_exception_data(title, list(details))


def detail(loc: tuple, error: PydanticCustomError, value: Any = None) -> InitErrorDetails:
    return InitErrorDetails(type=error, loc=loc, input=value)


class Section(BaseModel):
    """A mapping of a spec (the spec itself, ``config:``, an expectation, ``source.kafka``...).

    Beyond pydantic's field validation it says what a value that is not a mapping, an
    unknown name or a missing field breaks, in the section's own words, and checks the
    rules between fields (:meth:`together`) on the fields that are valid themselves: so a
    file's problems are all reported at once, as Kafka's own tools would list them.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, validate_by_name=False, validate_by_alias=True,
                              arbitrary_types_allowed=True,
                              field_title_generator=lambda name, field: field.alias or name)

    #: required field -> an example, for "is required, e.g. ..."
    REQUIRED: ClassVar[Mapping[str, str]] = {}
    #: what the mapping holds, as "must be a mapping<MAPPING>, got ..." says it
    MAPPING: ClassVar[str] = ""

    @classmethod
    def not_a_mapping(cls, value: Any) -> str:
        return f"must be a mapping{cls.MAPPING}, got {shown(value)}"

    @classmethod
    def unknown_field(cls, name: str) -> str | None:
        """What an unknown name breaks; None: accepted and ignored."""
        return f"unknown field; {suggestion(name, cls.names(), 'field')}"

    @classmethod
    def not_a_string(cls, name: Any) -> str:
        return f"field names must be strings, got {shown(name)}"

    @classmethod
    def prepare(cls, data: dict[str, Any]) -> dict[str, Any]:
        """Defaults that depend on other fields, filled in before validation."""
        return data

    def together(self, refused: frozenset[str]) -> list[tuple[str, PydanticCustomError]]:
        """Rules between fields, each checked only when every field it involves is valid
        itself (none is in ``refused``): (field, error) for each one broken."""
        return []

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The names a YAML document uses (Kafka's, where they have one)."""
        return tuple(field.alias or name for name, field in cls.model_fields.items() if not field.exclude)

    @model_validator(mode="wrap")
    @classmethod
    def _section(cls, data: Any, handler: Any) -> Any:
        if isinstance(data, cls):
            return data
        if data is None:
            data = {}
        if not isinstance(data, Mapping):
            raise rule(cls.not_a_mapping(data))
        known = set(cls.names())  # a document's names: Kafka's dotted ones, never Python's
        errors: list[InitErrorDetails] = []
        given: dict[str, Any] = {}
        for name, value in data.items():
            if not isinstance(name, str):
                errors.append(detail((name,), rule(cls.not_a_string(name), at_key=True), name))
            elif name in known:
                given[name] = value
            elif (said := cls.unknown_field(name)) is not None:
                errors.append(detail((name,), rule(said, at_key=True), name))
        for name, example in cls.REQUIRED.items():
            if name not in given:
                errors.append(detail((name,), rule(f"is required, e.g. {example}")))
        refused: set[str] = set()
        try:
            model = handler(cls.prepare(given))
        except ValidationError as error:
            model = None
            for found in error.errors(include_url=False):
                refused.add(found["loc"][0] if found["loc"] else "")
                if found["type"] == "missing" and found["loc"] and found["loc"][0] in cls.REQUIRED:
                    continue  # said above, with an example
                errors.append(_again(found))
            try:  # the fields that are valid on their own, for the rules between them
                model = handler(cls.prepare({name: v for name, v in given.items() if name not in refused}))
            except ValidationError:
                model = None
        if model is not None:
            for name, error in model.together(frozenset(refused)):
                errors.append(detail((name,), error))
        if errors:
            raise broken(cls.__name__, errors)
        return model


def _again(found: Mapping[str, Any]) -> InitErrorDetails:
    """A collected error, to be raised again with others."""
    if found["type"] == RULE:
        return InitErrorDetails(type=PydanticCustomError(RULE, "{rule}", found["ctx"]), loc=found["loc"],
                                input=found.get("input"))
    return InitErrorDetails(type=PydanticCustomError(RULE, "{rule}", {"rule": found["msg"]}), loc=found["loc"],
                            input=found.get("input"))
