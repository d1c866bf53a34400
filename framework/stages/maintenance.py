"""Maintenance runs: compaction, retention and vacuum per partition, checked and recorded.

For each partition of each topic, in order (KIP-71: compaction before deletion):

1. ``compact``  when the policy includes compact and the cleaner says it is due (a topic's
   small partitions planned from metadata when the run starts, decided and rewritten
   together: ``compaction_batch``);
2. ``retain``   when the policy includes delete;
3. ``optimize`` bin-pack small data files into files near ``segment.bytes`` (no record changes);
4. ``vacuum``   purge deletion vectors and vacuum outside the time-travel window.

After each stage that committed, the guarantees are checked against the table before and
after: measured at once (a small partition's, with its topic's others, later), judged by
Great Expectations with the others when their history rows are recorded (``awaiting_verdicts``).
Every stage appends a row to the maintenance history. A failure in one partition is
reported and the others go on; the run then exits 1. With ``cleaner_threads`` above 1
(Kafka's ``log.cleaner.threads``), partitions are maintained side by side, their output and
history kept in order (``side_by_side``).

A stage that loses a commit race re-plans from the new table version and tries again. If
it lost to a producer appending into the segment it cleans, it first rolls the log to a
new segment, so that the producers' next appends cannot collide with it again, and the
retry never cleans past that roll.
"""

from __future__ import annotations

import contextlib
import time
import traceback
import uuid
from collections import Counter
from typing import Callable, Iterable, Sequence

from framework import faults
from framework.errors import ArgumentError, ConcurrentWriteError, TopiclakeError, first_line
from framework.log.consumer_offsets import ConsumerOffsets
from framework.log.delta_commits import (
    MAX_COMMIT_ATTEMPTS,
    StaleSnapshotError,
    backoff,
    is_concurrent_append,
    is_retryable_conflict,
)
from framework.log.delta_transactions import forget_table
from framework.log.history import RUNS_KEPT, HistoryBatch, HistoryRow, MaintenanceHistory
from framework.log.partition_log import PartitionLog
from framework.log.small_partitions import small_partition_settings
from framework.log.topic import Topic
from framework.log.warehouse import Warehouse
from framework.side_by_side import in_order
from framework.spec import TopicSpec
from framework.stages import compaction, optimize, retention
from framework.stages.awaiting_verdicts import AwaitingVerdicts, checks_may_wait
from framework.stages.cleaner_threads import DEFAULT_CLEANER_THREADS, HeldLines
from framework.stages.compaction_batch import CompactionBatches
from framework.stages.interrupted_runs import interrupted_rows
from framework.stages.maintenance_run import MaintenanceRun, PartitionRun
from framework.stages.stage_check import StageCheck, Validator, pinned_before
from framework.stages.vacuum import VacuumResult, check_window, vacuum

STAGES = ("compact", "retain", "optimize", "vacuum")


class Maintenance:
    """Runs the maintenance stages over topic specs in one warehouse."""

    def __init__(self, spark, warehouse: Warehouse, specs: Sequence[TopicSpec],
                 validator: Validator | None = None, progress: Callable[[str], None] | None = None,
                 record_history: bool = True, step: Callable[[int, int, str], None] | None = None,
                 history_runs_kept: int = RUNS_KEPT):
        self.spark = spark
        self.warehouse = warehouse
        self.specs = list(specs)
        self.validator = validator
        self.progress = HeldLines(progress or (lambda message: None))
        #: (partitions done, partitions in the run, the one under way): for a progress bar
        self.step = step or (lambda done, total, label: None)
        self.history = MaintenanceHistory(spark, warehouse) if record_history else None
        #: each partition's newest runs the history keeps (older ones are pruned now and then)
        self.history_runs_kept = history_runs_kept
        self.offsets = ConsumerOffsets(spark, warehouse)

    # ----------------------------------------------------------------- public
    def select(self, topic: str | None) -> list[TopicSpec]:
        if topic is None:
            return self.specs
        chosen = [s for s in self.specs if s.topic == topic]
        if not chosen:
            raise ArgumentError(f"--topic: no spec for topic {topic!r} (known: {', '.join(s.topic for s in self.specs) or 'none'})")
        return chosen

    def run(self, now_ms: int, topic: str | None = None, partition: int | None = None,
            stages: Iterable[str] = STAGES, force: bool = False,
            vacuum_retention_ms: int | None = None, unsafe_vacuum: bool = False,
            cleaner_threads: int = DEFAULT_CLEANER_THREADS) -> MaintenanceRun:
        stages = tuple(stages)
        unknown = [s for s in stages if s not in STAGES]
        if unknown:
            raise ArgumentError(f"unknown maintenance stage(s) {', '.join(unknown)}; stages: {', '.join(STAGES)}")
        if cleaner_threads < 1:
            raise ArgumentError(f"--cleaner-threads: {cleaner_threads} is not at least 1 (Kafka's log.cleaner.threads)")
        self._check_arguments(topic, partition, stages, vacuum_retention_ms, unsafe_vacuum)
        run = MaintenanceRun(run_id=uuid.uuid4().hex[:12], now_ms=now_ms)
        logs = self._logs(topic, partition)
        run.topic_partitions.update(Counter(log.spec.topic for log in logs))
        run.compactions = CompactionBatches(self.spark, logs if "compact" in stages else [], now_ms, force)
        verdicts = AwaitingVerdicts(self.validator, self.progress)
        pending = HistoryBatch(self.history, interrupted_rows(self.history, logs, run.run_id, now_ms, self.progress)
                               if self.history is not None else (), before_flush=verdicts.judge)

        def maintain(session, numbered: tuple[int, PartitionLog]):
            return self._partition(session, *numbered, len(logs), run, stages, force, vacuum_retention_ms, unsafe_vacuum)

        try:
            numbered = list(enumerate(logs, start=1))
            with contextlib.closing(in_order(self.spark, numbered, maintain, cleaner_threads)) as parts:
                for index, log in enumerate(logs, start=1):
                    self.step(index - 1, len(logs), log.name)
                    part, held, refused = next(parts)
                    for line in held or ():
                        self.progress(line)
                    run.partitions.append(part)
                    run.compactions.done(log)
                    verdicts.add(part)
                    faults.reached("maintain.before_history", log=log, run_id=run.run_id)
                    pending.add(part.rows, failed=part.failed)
                    if refused is not None:
                        raise refused
                    faults.reached("maintain.after_partition", log=log, run_id=run.run_id)
                    if part.error is not None:  # failed guarantees are said when judged
                        self.progress(f"      FAILED: {part.error}")
            self.step(len(logs), len(logs), "done")
        finally:
            run.compactions.close()
            pending.flush()
        pruned = self.history.prune_if_due(self.history_runs_kept) if self.history is not None else None
        if pruned is not None:
            self.progress(f"history pruned ({pruned} rows; {self.history_runs_kept} runs kept a partition), "
                          "own tables vacuumed")
        for spec in self.select(topic):  # the history table may be new: name it beside the tables
            Topic(self.spark, self.warehouse, spec).register()
        return run

    def _partition(self, session, index: int, log: PartitionLog, total: int, run: MaintenanceRun, stages,
                   force: bool, vacuum_retention_ms: int | None,
                   unsafe_vacuum: bool) -> tuple[PartitionRun, list[str] | None, Exception | None]:
        """One partition's stages, through ``session`` (a cleaner thread's own): its run, the
        progress lines held for their turn (None when said at once), and a refusal of the
        user's input to raise once its committed stages are recorded."""
        held = self.progress.hold() if session is not self.spark else None
        if session is not log.spark:
            log = PartitionLog(session, log.warehouse, log.spec, log.partition)
        part = PartitionRun(log.spec.topic, log.partition)
        try:
            self.progress(f"[{index}/{total}] {log.name}")
            with small_partition_settings(log.spark, log.snapshot().state.offset_span):
                self._maintain_partition(log, run, part, stages, force, vacuum_retention_ms, unsafe_vacuum)
        except TopiclakeError as error:
            if error.exit_code == 2:
                return part, held, error
            part.error = str(error)
        except Exception as error:  # noqa: BLE001 - one partition's failure must not stop the rest
            part.error = f"{type(error).__name__}: {str(error).strip().splitlines()[0] if str(error).strip() else ''}"
            part.rows.append(self._row(run, log, "error", message=traceback.format_exc(limit=3)[-2000:]))
        finally:
            forget_table(log.spark, log.path)  # the heap stays bounded however many partitions a run has
            if held is not None:
                self.progress.release()
        return part, held, None

    def _commit_run_id(self, run: MaintenanceRun) -> str:
        """The run id a commit carries: only a run that records history leaves one, so that a
        later run can tell a commit whose rows were lost (``interrupted_runs``)."""
        return run.run_id if self.history is not None else ""

    def _check_arguments(self, topic: str | None, partition: int | None, stages: tuple[str, ...],
                         vacuum_retention_ms: int | None, unsafe_vacuum: bool) -> None:
        """Every argument is checked against every selected spec before the first write."""
        for spec in self.select(topic):
            if partition is not None:
                try:
                    Topic(self.spark, self.warehouse, spec).partition(partition)  # refuses one out of range
                except ArgumentError as error:
                    raise ArgumentError(f"--partition: {error}") from None
            if "vacuum" in stages:
                check_window(spec.config.time_travel_retention_ms, vacuum_retention_ms, unsafe_vacuum)

    def _logs(self, topic: str | None, partition: int | None) -> list[PartitionLog]:
        logs = []
        for spec in self.select(topic):
            every = Topic(self.spark, self.warehouse, spec).ensure_partitions()
            logs.extend(every if partition is None else [every[partition]])
        return logs

    # -------------------------------------------------------------- per partition
    def _row(self, run: MaintenanceRun, log: PartitionLog, stage: str, **values) -> HistoryRow:
        return HistoryRow(run_id=run.run_id, run_started_ms=int(time.time() * 1000), now_ms=run.now_ms,
                          topic=log.spec.topic, partition=log.partition, stage=stage, **values)

    def _maintain_partition(self, log: PartitionLog, run: MaintenanceRun, part: PartitionRun, stages,
                            force: bool, vacuum_retention_ms: int | None, unsafe_vacuum: bool) -> None:
        config = log.spec.config
        waits = checks_may_wait(config.time_travel_retention_ms, stages, vacuum_retention_ms)
        peers = run.topic_partitions[log.spec.topic] if waits else 0  # the checks a stage's may wait with
        if "compact" in stages and config.compact:
            self._compact(log, run, part, force, peers)
        if "retain" in stages and config.delete:
            self._retain(log, run, part, peers)
        if "optimize" in stages:
            self._optimize(log, run, part)
        if "vacuum" in stages:
            self._vacuum(log, run, part, vacuum_retention_ms, unsafe_vacuum)

    def _validate(self, part: PartitionRun, row: HistoryRow, check: StageCheck, peers: int = 0) -> None:
        if self.validator is None:
            row.validation = "skipped"
            return
        if peers and self.validator.batchable(check, peers):  # measured with others when judged (awaiting_verdicts)
            part.measured.append((row, check))
            return
        try:
            # Side by side with other partitions' checks; judged with them when recorded
            measured = self.validator.measure(check)
        except Exception as error:  # noqa: BLE001 - the stage committed: its row must say so, not a refusal
            part.error = f"the check of {check.stage} could not run: {first_line(error)}"
            row.validation, row.message = "error", traceback.format_exc(limit=3)[-4000:]
            self.progress(f"      {part.error}")
            return
        part.measured.append((row, measured))

    def _compact(self, log: PartitionLog, run: MaintenanceRun, part: PartitionRun, force: bool, peers: int) -> None:
        started = time.monotonic()
        cap = None
        for attempt in range(1, MAX_COMMIT_ATTEMPTS + 1):
            first = run.compactions.plan(log) if attempt == 1 else None
            planned = first or compaction.plan(log, run.now_ms, force)
            decision, measure = planned.decision, planned.measure
            row = self._row(
                run, log, "compact", trigger=decision.trigger, reasons=list(decision.reasons), due=decision.due,
                version_before=planned.snapshot.version, records_before=measure.records, bytes_before=measure.bytes,
                log_start_before=measure.log_start_offset, log_end_offset=measure.log_end_offset,
                checkpoint_before=measure.checkpoint, first_uncleanable_offset=measure.first_uncleanable_offset,
                dirty_ratio=decision.dirty_ratio, oldest_dirty_age_ms=decision.oldest_dirty_age_ms,
                max_compaction_delay_ms=decision.max_compaction_delay_ms, max_lag_caused=decision.max_lag_caused,
                attempts=attempt,
            )
            if not decision.due:
                row.records_after, row.bytes_after = measure.records, measure.bytes
                row.checkpoint_after, row.log_start_after = measure.checkpoint, measure.log_start_offset
                row.message = "not due"
                row.duration_ms = int((time.monotonic() - started) * 1000)
                part.rows.append(row)
                self.progress(f"      compact: not due (dirty ratio {decision.dirty_ratio:.3f})")
                return
            before = pinned_before(log, planned.snapshot)
            try:
                result = compaction.execute(log, planned, cleanable_end=cap, run_id=self._commit_run_id(run),
                                            decided=run.compactions.decided(log, planned) if first else None)
            except Exception as error:  # noqa: BLE001
                cap = self._after_conflict(log, error, cap, attempt)
                continue
            row.committed = result.committed
            row.version_after = result.version_after
            row.removed_records, row.removed_bytes = result.removed_records, result.removed_bytes
            row.stamped_tombstones = result.stamped_tombstones
            row.records_after = measure.records - result.removed_records
            row.bytes_after = measure.bytes - result.removed_bytes
            row.checkpoint_after = result.state_after.checkpoint
            row.log_start_after = result.state_after.log_start_offset
            self.progress(
                f"      compact ({decision.trigger}): removed {result.removed_records} record(s), "
                f"stamped {result.stamped_tombstones} tombstone(s), checkpoint {measure.checkpoint} -> "
                f"{result.state_after.checkpoint}"
            )
            if result.committed:
                self._validate(part, row, StageCheck(
                    log=log, stage="compact", now_ms=run.now_ms, version_before=result.version_before,
                    version_after=result.version_after, before=before, state_before=planned.snapshot.state,
                    state_after=result.state_after, first_uncleanable_offset=measure.first_uncleanable_offset,
                    cleaned_up_to=result.cleaned_up_to), peers)
            row.duration_ms = int((time.monotonic() - started) * 1000)
            part.rows.append(row)
            return
        raise ConcurrentWriteError(f"{log.name}: compaction lost {MAX_COMMIT_ATTEMPTS} commit races; try again later")

    def _after_conflict(self, log: PartitionLog, error: Exception, cap: int | None, attempt: int) -> int | None:
        """Decide how to retry after a lost commit race; re-raise anything else.

        The first time a producer's append beats the run into a segment it cleans, roll
        the log: appends that read the log after the roll go to the new segment, and the
        retry never cleans past it. Later collisions can only come from appends already in
        flight before the roll; they are finite, so the run waits them out.
        """
        if isinstance(error, StaleSnapshotError):
            backoff(attempt)
            return cap
        if not is_retryable_conflict(error):
            raise error
        if is_concurrent_append(error) and cap is None:
            rolled = log.roll_segment(log.snapshot())
            self.progress(f"      lost a commit race to a producer; rolled to segment {rolled.active_segment}, retrying")
            return rolled.active_segment
        backoff(attempt)
        return cap

    def _retain(self, log: PartitionLog, run: MaintenanceRun, part: PartitionRun, peers: int) -> None:
        started = time.monotonic()
        cap = None
        committed, warning = self.offsets.for_retention(log.spec, log.partition)
        for attempt in range(1, MAX_COMMIT_ATTEMPTS + 1):
            planned = retention.plan(log, run.now_ms, committed, cap=cap)
            state = planned.snapshot.state
            reasons = sorted(planned.boundaries)
            # for the history's records/bytes columns only: the metadata's, else one aggregate pass
            records_before, bytes_before = (None, None) if self.history is None else (
                planned.snapshot.size_from_metadata() or log.size(planned.snapshot.version))
            row = self._row(
                run, log, "retain", reasons=reasons, due=planned.due, version_before=planned.snapshot.version,
                records_before=records_before, bytes_before=bytes_before, records_after=records_before,
                bytes_after=bytes_before, log_start_before=state.log_start_offset, log_end_offset=state.log_end_offset,
                checkpoint_before=state.checkpoint, attempts=attempt,
                message=warning or planned.rules.consumed_blocked_by,
            )
            if not planned.due:
                row.log_start_after, row.checkpoint_after = state.log_start_offset, state.checkpoint
                row.duration_ms = int((time.monotonic() - started) * 1000)
                part.rows.append(row)
                self.progress("      retain: nothing to remove")
                return
            before = pinned_before(log, planned.snapshot)
            try:
                result = retention.execute(log, planned, run_id=self._commit_run_id(run))
            except Exception as error:  # noqa: BLE001
                cap = self._after_conflict(log, error, cap, attempt)
                continue
            row.committed = result.committed
            row.version_after = result.version_after
            row.removed_records, row.removed_bytes = result.removed_records, result.removed_bytes
            if records_before is not None:
                row.records_after = records_before - result.removed_records
                row.bytes_after = bytes_before - result.removed_bytes
            row.log_start_after = result.state_after.log_start_offset
            row.checkpoint_after = result.state_after.checkpoint
            self.progress(f"      retain ({', '.join(reasons)}): removed {result.removed_records} record(s), "
                          f"log start {state.log_start_offset} -> {result.state_after.log_start_offset}")
            if result.committed:
                self._validate(part, row, StageCheck(
                    log=log, stage="retain", now_ms=run.now_ms, version_before=result.version_before,
                    version_after=result.version_after, before=before, state_before=state,
                    state_after=result.state_after, smallest_committed_offset=planned.rules.smallest_committed_offset,
                    new_log_start=planned.new_log_start), peers)
            row.duration_ms = int((time.monotonic() - started) * 1000)
            part.rows.append(row)
            return
        raise ConcurrentWriteError(f"{log.name}: retention lost {MAX_COMMIT_ATTEMPTS} commit races; try again later")

    def _optimize(self, log: PartitionLog, run: MaintenanceRun, part: PartitionRun) -> None:
        started = time.monotonic()
        packing = optimize.plan(log)
        row = self._row(run, log, "optimize", due=packing.due, version_before=packing.snapshot.version,
                        files_before=packing.files_before, file_bytes_before=packing.bytes_before,
                        files_after=packing.files_before, file_bytes_after=packing.bytes_before)
        try:
            result = optimize.execute(log, packing, run_id=self._commit_run_id(run))
        except Exception as error:  # noqa: BLE001 - a lost race leaves the packing to the next run
            if not is_retryable_conflict(error):
                raise
            result = None
            row.message = "lost a commit race to another maintenance run; left to the next run"
        if result is not None:
            row.committed, row.version_after = result.committed, result.version_after
            row.files_after, row.file_bytes_after = result.files_after, result.bytes_after
            # Records cannot change: the rewrite is checked against the files' record counts
            # before it commits (optimize.execute), and Delta marks it dataChange=false.
            row.message = packing.describe().replace("would bin-pack", "bin-packed") if result.committed else (
                packing.describe() if not packing.due else "the files moved since the plan; left to the next run")
        row.duration_ms = int((time.monotonic() - started) * 1000)
        part.rows.append(row)
        self.progress(f"      optimize: {row.message}")

    def _vacuum(self, log: PartitionLog, run: MaintenanceRun, part: PartitionRun,
                retention_ms: int | None, unsafe: bool) -> VacuumResult:
        started = time.monotonic()
        result = vacuum(log, retention_ms, unsafe)
        row = self._row(run, log, "vacuum", version_before=result.version_before, version_after=result.version_after,
                        committed=result.version_after != result.version_before,
                        message=f"window {result.window_ms} ms; purged={result.purged}; "
                                f"vacuumed: {result.vacuumed_because or 'not needed'}; files deleted "
                                f"{result.files_deleted}; oldest readable version {result.oldest_readable_version}; "
                                f"abandoned commit temporary files deleted {result.temporary_files_deleted}")
        if row.committed:
            state = log.snapshot().state
            self._validate(part, row, StageCheck(
                log=log, stage="vacuum", now_ms=run.now_ms, version_before=result.version_before,
                version_after=result.version_after, before=None, state_before=state, state_after=state,
                oldest_window_version=result.oldest_readable_version, window_ms=result.window_ms))
        row.duration_ms = int((time.monotonic() - started) * 1000)
        part.rows.append(row)
        self.progress(f"      vacuum: window {result.window_ms} ms, purged={result.purged}, "
                      f"vacuum {'ran (' + result.vacuumed_because + ')' if result.vacuumed_because else 'not needed'}, "
                      f"{result.files_deleted} file(s) deleted" + (
                          f", {result.temporary_files_deleted} abandoned commit temporary file(s) deleted"
                          if result.temporary_files_deleted else "") + (
                          f", {result.key_indexes_deleted} key index(es) of deleted files deleted"
                          if result.key_indexes_deleted else ""))
        return result
