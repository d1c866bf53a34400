"""The errors topiclake raises, and the exit status each one means.

A flat hierarchy: `BadInput` (exit 2) is the user's mistake and is reported as one
line per problem, never as a traceback; `GuaranteeViolation` (exit 1) is a guarantee
or expectation that failed; `ConcurrentWriteError` (exit 1) is a run that lost to
other writers more often than it retries.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


class ExitCode(IntEnum):
    """Exit status of every `topiclake` command."""

    OK = 0
    #: a guarantee or expectation failed, or a partition could not be maintained
    FAILED = 1
    #: bad input: spec, records, arguments or scenario; nothing was written
    BAD_INPUT = 2


class TopiclakeError(Exception):
    """Base of every error topiclake raises on purpose."""

    exit_code: ExitCode = ExitCode.FAILED

    def lines(self) -> list[str]:
        """The lines to print for this error, one problem a line."""
        return [_one_line(str(self))]


class BadInput(TopiclakeError):
    """The user's input is wrong; nothing was written."""

    exit_code = ExitCode.BAD_INPUT


@dataclass(frozen=True)
class Problem:
    """One problem found in a file: where it is, which field, and the rule it breaks."""

    source: str
    line: int | None
    column: int | None
    field: str | None
    rule: str

    def __str__(self) -> str:
        where = self.source
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        text = f"{where}: {self.field}: {self.rule}" if self.field else f"{where}: {self.rule}"
        return _one_line(text)


def _one_line(text: str) -> str:
    """A problem is one line: control characters from the input (a key named "\n") are escaped."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


class ProblemsError(BadInput):
    """Bad input with every problem of a file listed, each with its place."""

    def __init__(self, problems: list[Problem] | tuple[Problem, ...]):
        if not problems:
            raise ValueError("ProblemsError needs at least one problem")
        self.problems = tuple(problems)
        super().__init__("\n".join(str(p) for p in self.problems))

    def lines(self) -> list[str]:
        return [str(p) for p in self.problems]


class SpecError(ProblemsError):
    """A topic spec breaks a rule of CONTRACT section 2."""


class RecordError(ProblemsError):
    """Produced records are malformed or break the topic's rules."""


class ScenarioError(ProblemsError):
    """A scenario file is malformed."""


class ArgumentError(BadInput):
    """A command-line or API argument is missing or out of range."""


class TableMismatchError(BadInput):
    """A spec no longer fits the tables already in the warehouse."""


class PolicyViolationError(BadInput):
    """A request the topic's cleanup policy forbids (as Kafka's POLICY_VIOLATION)."""


class OffsetOutOfRangeError(BadInput):
    """An offset outside the partition's log (as Kafka's OFFSET_OUT_OF_RANGE)."""


class TimeTravelError(BadInput):
    """A version or time outside the table's time-travel window."""


class GuaranteeViolation(TopiclakeError):
    """A guarantee of CONTRACT section 5, or a spec expectation, failed."""


class ConcurrentWriteError(TopiclakeError):
    """Other writers kept winning the Delta commit race; the run gave up for now."""


class EngineNotInstalledError(TopiclakeError):
    """A verb needs Spark (or Great Expectations) and only topiclake's core is installed."""


class DeltaNotConfiguredError(TopiclakeError):
    """The Spark session has no Delta Lake support."""


def first_line(error: BaseException) -> str:
    """An unexpected error said in one line: its message's first line, or its type's name."""
    said = str(error).strip()
    return said.splitlines()[0] if said else type(error).__name__
