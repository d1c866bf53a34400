"""Stage checks measured and waiting for their verdict.

A maintenance run measures each committed stage's check at once, in the cleaner thread
that committed it (the Spark work), and has them judged together when their history rows
are recorded: Great Expectations judges every waiting check in one validation a topic
(``Validator.judge``), where it took one validation a check before, about 0.1 s each, as
much as a small partition's whole check. The verdicts are written into the rows, the
partitions they fail are marked failed, and their details are said then.
"""

from __future__ import annotations

import traceback
from typing import TYPE_CHECKING, Callable

from framework.errors import first_line

if TYPE_CHECKING:
    from framework.log.history import HistoryRow
    from framework.stages.maintenance import PartitionRun
    from framework.stages.stage_check import MeasuredCheck, Validator

__all__ = ["AwaitingVerdicts"]


class AwaitingVerdicts:
    """The checks a run measured since its last judgment."""

    def __init__(self, validator: Validator | None, progress: Callable[[str], None]):
        self.validator = validator
        self.progress = progress
        self._waiting: list[tuple[PartitionRun, HistoryRow, MeasuredCheck]] = []

    def add(self, part: PartitionRun) -> None:
        """Take the checks ``part`` measured (the run's thread, once the partition is done)."""
        self._waiting.extend((part, row, measured) for row, measured in part.measured)
        part.measured.clear()

    def judge(self) -> None:
        """Judge every waiting check and write the verdicts into their rows."""
        waiting, self._waiting = self._waiting, []
        if not waiting or self.validator is None:
            return
        try:
            outcomes = self.validator.judge([measured for _, _, measured in waiting])
        except Exception as error:  # noqa: BLE001 - the stages committed: their rows must say so
            why = first_line(error)
            message = traceback.format_exc(limit=3)[-4000:]
            for part, row, _ in waiting:
                part.error = part.error or f"the check of {row.stage} could not be judged: {why}"
                row.validation, row.message = "error", message
            self.progress(f"      the checks could not be judged: {why}")
            return
        for (part, row, measured), outcome in zip(waiting, outcomes):
            row.validation = "passed" if outcome.passed else "failed"
            row.failed_guarantees = list(outcome.failed_guarantees)
            if outcome.passed:
                continue
            part.failed_guarantees.extend(outcome.failed_guarantees)
            row.message = "\n".join(outcome.details)[:4000]
            self.progress(f"      {measured.table} {measured.stage}: FAILED {', '.join(outcome.failed_guarantees)}")
            for line in outcome.details:
                self.progress(f"      {line}")
