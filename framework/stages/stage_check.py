"""What a maintenance stage hands to the guarantee checks, and what they answer.

Maintenance runs the stages and hands each commit to a validator in two steps: ``measure``
(the Spark work: the violations counted, right after the commit, in the cleaner thread
that made it; or, for a small partition's compaction or retention, ``measure_many``, with others in
one Spark job, when their verdicts are due) and ``judge`` (Great Expectations' verdict, once for every check measured
since the last judgment: one validation a batch costs what one of a single check does).
Both import these types from here, so neither imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Mapping, Protocol, Sequence

if TYPE_CHECKING:
    from framework.log.log_state import LogState, Snapshot
    from framework.log.partition_log import PartitionLog

__all__ = ["CHECK_WITHIN_MS", "MeasuredCheck", "StageCheck", "ValidateCheck", "ValidationOutcome", "Validator",
           "pinned_before", "readable_later", "refused_now", "version_readable_later", "version_refused_now"]


@dataclass(frozen=True)
class StageCheck:
    """What the guarantees need to judge one committed stage of one partition."""

    log: PartitionLog
    stage: str
    now_ms: int
    version_before: int
    version_after: int
    #: a reader of the table at ``version_before`` (:func:`pinned_before`); or None, and the
    #: check reads it (a small partition's, from the files its checksum lists)
    before: Callable[[], object] | None
    state_before: LogState
    state_after: LogState
    first_uncleanable_offset: int | None = None
    cleaned_up_to: int | None = None
    smallest_committed_offset: int | None = None
    new_log_start: int | None = None
    #: vacuum: the oldest version committed inside the time-travel window (G9 reads it)
    oldest_window_version: int | None = None
    #: vacuum: the window it kept (the spec's, or an explicitly forced shorter one)
    window_ms: int | None = None


@dataclass(frozen=True)
class ValidateCheck:
    """What ``topiclake validate`` compares in one partition: the version the last
    maintenance run left (or the one asked for) and the current one, with their states."""

    log: PartitionLog
    now_ms: int
    version_before: int
    version_after: int
    state_before: LogState
    state_after: LogState
    #: since the last maintenance run, where only appends are legal (no ``--from-version``)
    appends_only: bool
    #: what the verdict says beside the guarantees (why nothing was compared, ...)
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class ValidationOutcome:
    """A check's verdict: the failed guarantees by name, and what explains them."""

    passed: bool
    failed_guarantees: tuple[str, ...] = ()
    details: tuple[str, ...] = ()

    def merged(self, other: ValidationOutcome) -> ValidationOutcome:
        """Both verdicts in one: passed only if both passed."""
        return ValidationOutcome(self.passed and other.passed, self.failed_guarantees + other.failed_guarantees,
                                 self.details + other.details)


@dataclass(frozen=True)
class MeasuredCheck:
    """One check's Spark side, waiting for its verdict: the violations counted per
    guarantee, a few of them to show, and the numbers the check read."""

    topic: str
    #: the partition's table name (``<topic>-<partition>``)
    table: str
    stage: str
    version_before: int
    version_after: int
    #: the guarantees this stage is judged on (codes, e.g. ``"G3"``)
    checked: tuple[str, ...]
    #: violations per guarantee code (absent: none)
    counts: Mapping[str, int]
    #: up to a few violation rows per guarantee code, lowest offsets first
    samples: Mapping[str, list]
    #: what the metrics row carries beside the counts (stage, versions, record counts, ...)
    context: Mapping[str, object]
    #: the spec's own expectations, judged already (they read the after version's records)
    spec_outcome: ValidationOutcome | None = None
    #: said before the verdict's own details (e.g. what the check could not compare)
    notes: tuple[str, ...] = ()


class Validator(Protocol):
    """What Maintenance checks its commits with (``framework.checks.guarantees.Guarantees``)."""

    def measure(self, check: StageCheck) -> MeasuredCheck:
        """The Spark work of one committed stage's check."""

    def judge(self, measured: Sequence[MeasuredCheck]) -> list[ValidationOutcome]:
        """The verdicts of checks measured, in their order."""

    def batchable(self, check: StageCheck, peers: int) -> bool:
        """Whether ``check`` may wait to be measured with others (:meth:`measure_many`);
        ``peers``: how many checks of its topic and stage the run may hand over with it."""

    def measure_many(self, checks: Sequence[StageCheck]) -> list[MeasuredCheck]:
        """:meth:`measure` of each of ``checks``, in their order (together where that is cheaper)."""


#: How long after a stage's start its check may still read the version it started from:
#: the check of a partition with deletion vectors runs right after its commit (never
#: batched with others: ``checks.batched.batchable``), within seconds.
CHECK_WITHIN_MS = 3_600_000


def pinned_before(log: PartitionLog, snapshot: Snapshot, wall_now_ms: int | None = None
                  ) -> Callable[[], object] | None:
    """A reader of the version a stage starts from, for its check (``StageCheck.before``),
    when the check could not read it later through Delta; else None, and the check reads
    it then.

    The check runs after the stage commits, and Delta refuses time travel to a version
    whose commit is older than the time-travel window once a newer one exists (a window of
    0 refuses every version but the latest). A small partition's check reads the version
    from the files its checksum lists, with no time travel; a large partition's reads
    through Delta (its bounds skip files by their statistics): it is pinned while the
    latest (a pin starts the JVM in a new process). A small one whose files carry deletion
    vectors is counted by Arrow from its files and vectors, or else read through Delta;
    where Delta could refuse that read within :data:`CHECK_WITHIN_MS`, Spark reads its
    files less the rows their vectors hide instead (``version_checksum.frame_of``; the
    check runs before the run's vacuum, which alone may delete them).
    """
    from framework.log import version_checksum
    from framework.log.small_partitions import is_small

    if is_small(snapshot.state.offset_span):
        # (the checksum read once: its files are the version's records when no vector hides a row)
        files = version_checksum.plain_files(log.path, snapshot.version, deletion_vectors=True)
        if files is not None and (not any(add.get("deletionVector") for add in files.adds)
                                  or version_readable_later(log.path, snapshot.version, files.configuration,
                                                            wall_now_ms)):
            return None
        if files is not None:
            return lambda: version_checksum.frame_of(log.spark, files)
    frame = log.read(snapshot.version)
    return lambda: frame


def version_readable_later(path: str, version: int, configuration: dict, wall_now_ms: int | None = None) -> bool:
    """:func:`readable_later` of ``version`` of the local table at ``path`` (:func:`_as_delta_judges`)."""
    return readable_later(*_as_delta_judges(path, version, configuration, wall_now_ms))


def version_refused_now(path: str, version: int, configuration: dict, wall_now_ms: int | None = None) -> bool:
    """:func:`refused_now` of ``version`` of the local table at ``path`` (:func:`_as_delta_judges`)."""
    return refused_now(*_as_delta_judges(path, version, configuration, wall_now_ms))


def _as_delta_judges(path: str, version: int, configuration: dict, wall_now_ms: int | None):
    """What Delta judges time travel to ``version`` by: its commit's own time
    (``commit_log.commit_time``), the window the latest version's properties
    ``configuration`` give, and the wall clock (``wall_now_ms``, else now)."""
    import time

    from framework.log.commit_log import commit_time
    from framework.log.warehouse import deleted_file_window_of

    return (commit_time(path, version), deleted_file_window_of(configuration),
            int(time.time() * 1000) if wall_now_ms is None else wall_now_ms)


def refused_now(committed_ms: int | None, window_ms: int | None, wall_now_ms: int) -> bool:
    """Whether Delta refuses time travel to a version other than the latest committed at
    ``committed_ms`` now (:func:`readable_later`'s rule), and so ever after. Unknown is no."""
    return committed_ms is not None and window_ms is not None and committed_ms < wall_now_ms - window_ms


def readable_later(committed_ms: int | None, window_ms: int | None, wall_now_ms: int) -> bool:
    """Whether Delta still time-travels to a version committed at ``committed_ms`` for
    :data:`CHECK_WITHIN_MS` after ``wall_now_ms``, with its table's window ``window_ms``
    (Delta's rule: a version other than the latest whose commit is older than the window is
    refused, ``SnapshotManagement.enforceTimeTravelWithinDeletedFileRetentionDuration``). Unknown
    (None) is no."""
    return committed_ms is not None and window_ms is not None and (
        committed_ms >= wall_now_ms + CHECK_WITHIN_MS - window_ms)
