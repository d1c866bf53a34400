"""Named fault points: the places where the engine commits, where a test may step in.

The engine calls :func:`reached` at each point below, and passes the source of each
maintenance DML through :func:`inside`, so that a test can inject a race or a failure
without knowing how the engine issues its commits (DataFrame API, SQL MERGE or DELETE).
Nothing happens unless a test installed a hook for the point (:func:`installed`), or the
environment variable ``TOPICLAKE_FAULTS`` names it: then the process kills itself with
SIGKILL there, as a crash would (the switch the crash tests use; read here and only here).
"""

from __future__ import annotations

import os
import signal
import threading
from contextlib import contextmanager
from typing import Callable, Iterator

ENVIRONMENT = "TOPICLAKE_FAULTS"

#: Every point the engine reaches, with what it is just before or after.
POINTS = {
    "create.before_commit": "a partition table is about to be created",
    "create.after_commit": "a partition table has been created",
    "produce.before_commit": "a producer is about to commit its append",
    "produce.files_written": "a producer's data files are written, its commit not made yet",
    "produce.after_commit": "a producer's append has committed",
    "own_commit.temporary_written": "a commit topiclake makes itself is written under a temporary name, not yet "
                                    "linked to its version's",
    "ingest.before_commit": "ingest has read a Kafka partition's new records and is about to append them",
    "ingest.files_written": "ingest's data files are written, its commit not made yet",
    "ingest.after_commit": "ingest's append of a Kafka partition has committed",
    "compact.before_commit": "a compaction run is about to commit",
    "compact.during_commit": "inside a compaction's Delta transaction (its snapshot taken, not committed)",
    "compact.after_commit": "a compaction run has committed",
    "compact.after_staging": "a batch of small partitions' rewrites is in their tables' folders, none committed",
    "retain.before_commit": "a retention cut is about to commit",
    "retain.after_commit": "a retention cut has committed",
    "delete_records.before_commit": "delete-records (KIP-107) is about to commit its cut",
    "delete_records.after_commit": "delete-records has committed its cut",
    "commit_offset.before_commit": "a consumer group's offset is about to be committed",
    "commit_offset.after_commit": "a consumer group's offset has been committed",
    "optimize.before_commit": "bin-packing has written its files and is about to commit",
    "optimize.after_commit": "bin-packing has committed",
    "vacuum.before_purge": "vacuum is about to purge deletion vectors (REORG ... APPLY (PURGE))",
    "vacuum.after_purge": "the purge has committed",
    "vacuum.before_sweep": "vacuum is about to delete files outside the time-travel window",
    "vacuum.after_sweep": "vacuum has deleted them",
    "maintain.before_history": "a partition's stages are done; its history rows are not yet written",
    "maintain.after_partition": "a partition is done, history included; the next has not started",
    "report.before_write": "the report's pages are built, none written yet",
    "report.after_write": "the report has been written",
}

Hook = Callable[[str, dict], None]
_hooks: dict[str, list[Hook]] = {}
_lock = threading.Lock()


def _check(point: str) -> None:
    if point not in POINTS:
        raise ValueError(f"unknown fault point {point!r}; known: {', '.join(POINTS)}")


def _killed_at(point: str) -> bool:
    wanted = os.environ.get(ENVIRONMENT, "")
    return point in {name.strip() for name in wanted.split(",") if name.strip()}


def reached(point: str, **context) -> None:
    """The engine is at ``point``; run the hooks installed for it (they may raise)."""
    _check(point)
    for hook in list(_hooks.get(point, ())):
        hook(point, context)
    if _killed_at(point):
        os.kill(os.getpid(), signal.SIGKILL)


def inside(point: str, frame):
    """``frame``, the source of a DML, made to call ``point``'s hooks the first time Spark
    evaluates a row of it inside the transaction (after Delta took its snapshot, before it
    commits). Without hooks the frame is returned unchanged and costs nothing.

    The hooks run in a Python worker process: they must be picklable and can only reach
    the driver through the file system or the network.
    """
    _check(point)
    hooks = list(_hooks.get(point, ()))
    if not hooks:
        return frame
    from pyspark.sql import functions as F
    from pyspark.sql.types import BooleanType

    def gate(_):
        for hook in hooks:
            hook(point, {})
        return True

    first_column = frame.columns[0]
    return frame.where(F.udf(gate, BooleanType()).asNondeterministic()(F.col(first_column)))


def hooked(point: str) -> bool:
    """Whether a hook is installed for ``point`` (then only a frame :func:`inside` made reaches it)."""
    _check(point)
    return bool(_hooks.get(point))


@contextmanager
def installed(point: str, hook: Hook) -> Iterator[None]:
    """Run ``hook(point, context)`` whenever the engine reaches ``point``, inside the block."""
    _check(point)
    with _lock:
        _hooks.setdefault(point, []).append(hook)
    try:
        yield
    finally:
        with _lock:
            _hooks[point].remove(hook)
            if not _hooks[point]:
                del _hooks[point]
