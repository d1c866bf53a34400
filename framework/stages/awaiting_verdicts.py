"""Stage checks measured and waiting for their verdict.

A maintenance run measures each committed stage's check at once, in the cleaner thread
that committed it (the Spark work), and has them judged together when their history rows
are recorded: Great Expectations judges every waiting check in one validation a topic
(``Validator.judge``), where it took one validation a check before, about 0.1 s each, as
much as a small partition's whole check. A small partition's compaction or retention check waits to be
measured then too, with the others waiting, in one Spark job (``Validator.measure_many``).
The verdicts are written into the rows, the partitions they fail are marked failed, and
their details are said then.
"""

from __future__ import annotations

import traceback
from typing import TYPE_CHECKING, Callable

from framework.errors import first_line

if TYPE_CHECKING:
    from framework.log.history import HistoryRow
    from framework.stages.maintenance_run import PartitionRun
    from framework.stages.stage_check import MeasuredCheck, Validator

__all__ = ["CHECKS_WAIT_MIN_WINDOW_MS", "AwaitingVerdicts", "checks_may_wait"]

#: A small partition's compaction or retention check may wait to be measured only if the
#: partition's vacuum, which runs before that, keeps the files the stage just removed:
#: its window is at least this long.
CHECKS_WAIT_MIN_WINDOW_MS = 3_600_000


def checks_may_wait(time_travel_retention_ms: int, stages, vacuum_retention_ms: int | None) -> bool:
    """Whether a run of ``stages`` (the vacuum's window forced to ``vacuum_retention_ms``, else
    the spec's) leaves a partition's compaction and retention checks free to wait for their verdicts."""
    window = time_travel_retention_ms if vacuum_retention_ms is None else vacuum_retention_ms
    return "vacuum" not in stages or window >= CHECKS_WAIT_MIN_WINDOW_MS


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
        waiting = self._measured(waiting)
        if not waiting:
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

    def _measured(self, waiting: list) -> list:
        """``waiting`` with the checks left to measure (a :class:`StageCheck` in place of its
        measure: ``Maintenance`` defers a small partition's compaction or retention check) measured
        together; if that fails, their rows say so and they are not judged."""
        from framework.stages.stage_check import StageCheck

        deferred = [index for index, (_, _, item) in enumerate(waiting) if isinstance(item, StageCheck)]
        if not deferred:
            return waiting
        try:
            measured = self.validator.measure_many([waiting[index][2] for index in deferred])
        except Exception:  # noqa: BLE001 - one check that cannot run must not fail the others
            measured = [self._measured_alone(*waiting[index]) for index in deferred]
        waiting = list(waiting)
        for index, item in zip(deferred, measured):
            part, row, _ = waiting[index]
            waiting[index] = (part, row, item)
        return [item for item in waiting if item[2] is not None]

    def _measured_alone(self, part: PartitionRun, row: HistoryRow, check):
        """One deferred check measured on its own; None, its row and partition saying why,
        when it cannot run (as when a check measured at once cannot: ``Maintenance._validate``)."""
        try:
            return self.validator.measure_many([check])[0]
        except Exception as error:  # noqa: BLE001 - the stage committed: its row must say so, not a refusal
            part.error = part.error or f"the check of {row.stage} could not run: {first_line(error)}"
            row.validation, row.message = "error", traceback.format_exc(limit=3)[-4000:]
            self.progress(f"      {part.error}")
            return None
