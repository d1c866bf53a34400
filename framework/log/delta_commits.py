"""Delta commits as topiclake makes them: with its bookkeeping in the commit metadata, with
session confs that DML has no writer options for, and retried on the conflicts Delta
reports (nothing was written, so trying again is safe).
"""

from __future__ import annotations

import contextlib
import contextvars
import random
import time
from typing import Callable, Iterator, TypeVar

from framework.deferred_session import not_started

USER_METADATA_CONF = "spark.databricks.delta.commitInfo.userMetadata"
TXN_APP_ID_CONF = "spark.databricks.delta.write.txnAppId"
TXN_VERSION_CONF = "spark.databricks.delta.write.txnVersion"
MAX_COMMIT_ATTEMPTS = 20

T = TypeVar("T")

#: The confs of the :func:`session_confs` blocks open in this thread, innermost last: what a
#: commit made without the JVM inside them carries (``block_conf``), as Delta's would.
_BLOCK_CONFS: contextvars.ContextVar[tuple[tuple[str, str], ...]] = contextvars.ContextVar(
    "topiclake_block_confs", default=())


def block_conf(key: str) -> str | None:
    """The value the innermost open :func:`session_confs` block of this thread gives
    ``key``, or None."""
    return dict(_BLOCK_CONFS.get()).get(key)


@contextlib.contextmanager
def session_confs(spark, confs: dict[str, str]) -> Iterator[None]:
    """Set Spark session confs for the block, then restore them (DML has no writer options);
    :func:`block_conf` answers them inside it."""
    token = _BLOCK_CONFS.set((*_BLOCK_CONFS.get(), *confs.items()))
    try:
        with _session_confs(spark, confs):
            yield
    finally:
        _BLOCK_CONFS.reset(token)


@contextlib.contextmanager
def _session_confs(spark, confs: dict[str, str]) -> Iterator[None]:
    """:func:`session_confs`' settings of the session.

    Only confs that differ are set (and put back), so a block inside another, or two
    threads that share a session and ask for the same value, never take it for the
    session's own and leave it. Still not thread-safe within one session for different
    values: give each thread its own ``spark.newSession()``. A session not started yet gets
    them if it starts inside the block (nothing runs on it before).
    """
    if not_started(spark):
        with contextlib.ExitStack() as applied:
            with spark.when_started(lambda session: applied.enter_context(_session_confs(session, confs))):
                yield
        return
    previous = {key: spark.conf.get(key, None) for key in confs}
    previous = {key: value for key, value in previous.items() if value != confs[key]}
    for key in previous:
        spark.conf.set(key, confs[key])
    try:
        yield
    finally:
        for key, value in previous.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def commit_metadata(spark, metadata: str):
    """Attach ``metadata`` to the Delta commits made inside the block."""
    return session_confs(spark, {USER_METADATA_CONF: metadata})


class StaleSnapshotError(Exception):
    """Delta skipped a commit because another writer claimed its place; re-plan and retry."""


class LostCommitRace(Exception):
    """A commit topiclake made itself (``framework.log.own_commits``) found its version taken
    by another writer: nothing was committed, and planning again is safe, as after Delta's
    own conflict."""


def is_retryable_conflict(error: BaseException) -> bool:
    """A Delta commit conflict: nothing was written, and trying again is safe."""
    from delta.exceptions.base import (
        ConcurrentAppendException,
        ConcurrentDeleteDeleteException,
        ConcurrentDeleteReadException,
        ConcurrentTransactionException,
        ConcurrentWriteException,
        DeltaConcurrentModificationException,
        MetadataChangedException,
        ProtocolChangedException,
    )

    kinds = (
        DeltaConcurrentModificationException,
        ConcurrentWriteException,
        ConcurrentAppendException,
        ConcurrentDeleteDeleteException,
        ConcurrentDeleteReadException,
        ConcurrentTransactionException,
        MetadataChangedException,
        ProtocolChangedException,
    )
    if isinstance(error, (*kinds, LostCommitRace)):
        return True
    # Older converters leave some conflicts as plain captured exceptions; the class name tells.
    text = str(error)
    return "DELTA_CONCURRENT" in text or "DELTA_METADATA_CHANGED" in text


def is_concurrent_append(error: BaseException) -> bool:
    from delta.exceptions.base import ConcurrentAppendException

    return isinstance(error, ConcurrentAppendException) or "DELTA_CONCURRENT_APPEND" in str(error)


def backoff(attempt: int) -> None:
    """Jittered exponential backoff between commit attempts."""
    time.sleep(min(2.0, 0.05 * (2**attempt)) * (0.5 + random.random()))


def unless_conflicted(work: Callable[[], T]) -> T | None:
    """``work()``, or None when its commit met a concurrent one (:func:`is_retryable_conflict`):
    for optional upkeep (bin-packing or pruning a small table) that the next run does
    anyway, where a retry would only race the same writers again."""
    try:
        return work()
    except Exception as error:  # noqa: BLE001 - only a conflict is expected; anything else is raised
        if is_retryable_conflict(error):
            return None
        raise
