"""A Spark session that starts when something first asks it a question.

A verb in a new process pays 4 to 6 s for the JVM and the session before its first
answer. On a local warehouse many answers need neither: a partition's state, its files and
the history are read from the Delta logs' files, and a run with nothing due writes only
its history rows (``framework.log.own_commits``). The verbs that can get by without a JVM
hand their code a :class:`DeferredSession`; the first attribute anything reads from it
starts the real session, so whatever does need Spark gets it as before.

Two things are asked of a session that a session not started can answer by itself: a
block's session confs (``framework.log.delta_commits.session_confs`` waits with them until
the session starts inside the block, :meth:`DeferredSession.when_started`), and whether
there is a Delta log cache to forget (none yet, :func:`not_started`).
"""

from __future__ import annotations

import contextlib
import threading
from typing import Callable, Iterator

__all__ = ["DeferredSession", "jvm_running", "not_started", "started"]


class DeferredSession:
    """Stands for a Spark session that starts on its first attribute access (``start``
    makes it); until then nothing has started."""

    def __init__(self, start: Callable[[], object]):
        self._start = start
        self._session = None
        self._starting = threading.Lock()  # threads that ask at once start one session
        #: what the blocks open now want done to the session once it starts, outermost first
        self._on_start: list[Callable[[object], None]] = []

    @property
    def started(self) -> bool:
        return self._session is not None

    @contextlib.contextmanager
    def when_started(self, callback: Callable[[object], None]) -> Iterator[None]:
        """Inside the block, ``callback(session)`` runs as the session starts (if it does)."""
        self._on_start.append(callback)
        try:
            yield
        finally:
            self._on_start.remove(callback)

    def __getattr__(self, name: str):
        # only names not set above reach here: everything the session itself answers
        if self._session is None:
            with self._starting:
                if self._session is None:
                    session = self._start()
                    for callback in list(self._on_start):
                        callback(session)
                    self._session = session
        return getattr(self._session, name)


def not_started(spark) -> bool:
    """Whether ``spark`` is a :class:`DeferredSession` whose session has not started (so no
    JVM has either; ``isinstance`` does not ask the session anything)."""
    return isinstance(spark, DeferredSession) and not spark.started


def jvm_running(spark) -> bool:
    """Whether ``spark`` has a JVM to ask without starting one: a started session, or a
    deferred one in a process where Spark runs already (a notebook, a Databricks job, a
    test), whose start only picks up that session (``isinstance`` and pyspark's class
    attribute ask no JVM anything)."""
    if not not_started(spark):
        return True
    from pyspark import SparkContext

    return SparkContext._active_spark_context is not None


def started(spark):
    """The session ``spark`` stands for, started if it was not: the object itself, where code
    reads the session's class (pyspark's active session is a class attribute)."""
    if isinstance(spark, DeferredSession):
        spark.version  # noqa: B018 - a question: it starts the session
        return spark._session
    return spark
