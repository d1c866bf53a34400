"""What a maintenance run did: each partition's history rows, errors and checks waiting
for their verdicts (:mod:`framework.stages.maintenance` fills them in)."""

from __future__ import annotations

from dataclasses import dataclass, field

from framework.log.history import HistoryRow
from framework.stages.compaction_batch import CompactionBatches
from framework.stages.stage_check import MeasuredCheck, StageCheck


@dataclass
class PartitionRun:
    topic: str
    partition: int
    rows: list[HistoryRow] = field(default_factory=list)
    error: str | None = None
    failed_guarantees: list[str] = field(default_factory=list)
    #: checks measured (or a StageCheck left to measure) and not yet judged, with their rows
    measured: list[tuple[HistoryRow, MeasuredCheck | StageCheck]] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return self.error is not None or bool(self.failed_guarantees)


@dataclass
class MaintenanceRun:
    run_id: str
    now_ms: int
    partitions: list[PartitionRun] = field(default_factory=list)
    topic_partitions: dict[str, int] = field(default_factory=dict)  # how many of each topic's it maintains
    compactions: CompactionBatches | None = None  # its plans from metadata; small ones decided together

    @property
    def failed(self) -> bool:
        return any(p.failed for p in self.partitions)
