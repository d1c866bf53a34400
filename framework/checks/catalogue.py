"""The nine guarantees of CONTRACT section 5, by code, and which stage proves which.

Only data: the rules that judge them are in ``framework.checks.rules`` (Spark SQL) and
``framework.checks.scope`` (the pure numbers), and Great Expectations judges their counts
(``framework.checks.gx_suites``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

__all__ = ["GUARANTEES", "STAGE_GUARANTEES", "Guarantee"]


@dataclass(frozen=True)
class Guarantee:
    """One guarantee of CONTRACT section 5."""

    code: str
    title: str
    statement: str

    @property
    def name(self) -> str:
        """What a failure is called: ``"G3 unique keys below the checkpoint"``."""
        return f"{self.code} {self.title}"

    @property
    def description(self) -> str:
        """The expectation's description: ``"G3: <the guarantee in words>"``."""
        return f"{self.code}: {self.statement}"

    @property
    def column(self) -> str:
        """The metrics column that counts this guarantee's violations."""
        return f"{self.code.lower()}_violations"


GUARANTEES: tuple[Guarantee, ...] = (
    Guarantee("G1", "offsets never change or repeat",
              "offsets never change and never repeat; what survives is a subset of what was there "
              "(records appended above the earlier version's log end offset aside)"),
    Guarantee("G2", "head untouched",
              "compaction leaves the head (offsets at or above the first uncleanable offset U) exactly as it was"),
    Guarantee("G3", "unique keys below the checkpoint",
              "below the new checkpoint each key appears at most once"),
    Guarantee("G4", "survivors are their key's winner",
              "each survivor below the checkpoint is its key's winner under the compaction strategy"),
    Guarantee("G5", "final state unchanged",
              "compaction leaves the final state (key -> value by the strategy) unchanged, except keys "
              "whose tombstone passed its delete horizon"),
    Guarantee("G6", "max compaction lag honoured",
              "after a run at now, every record below U whose timestamp is older than "
              "now - max.compaction.lag.ms lies below the checkpoint"),
    Guarantee("G7", "tombstones kept for delete.retention.ms",
              "a tombstone stays at least delete.retention.ms after the run that first kept it"),
    Guarantee("G8", "retention removes only a prefix",
              "retention removed only a prefix of the log; consumed retention removed nothing at or above "
              "the smallest committed offset"),
    Guarantee("G9", "time-travel window readable",
              "the table versions inside the time-travel window are still readable"),
)

#: What each kind of check proves (CONTRACT section 5; ``validate`` is the verb).
STAGE_GUARANTEES: Mapping[str, tuple[str, ...]] = {
    "compact": ("G1", "G2", "G3", "G4", "G5", "G6", "G7"),
    "retain": ("G1", "G3", "G8"),
    "delete_records": ("G1", "G3", "G8"),
    "vacuum": ("G9",),
    "validate": ("G1", "G3", "G4", "G6", "G7"),
}

