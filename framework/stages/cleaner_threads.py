"""Partitions maintained side by side: Kafka's ``log.cleaner.threads``.

A small partition's maintenance is mostly the driver planning and committing many small
Spark queries, one after another, while the executors wait; two partitions at a time
keep both cores busy. Each partition is its own Delta table, so their commits never
conflict.

- **Sessions**: each thread works through its own child session (``newSession``: the same
  Spark, its own confs, starting as a copy of the caller's), because a commit carries its
  metadata in session confs.
- **Order**: results come back in the partitions' order, and each partition's progress
  lines are held until then, so a run's output and history read as with one thread.
- **One thread** (Kafka's default), or a session kind without child sessions (Spark
  Connect), runs each partition only when the caller asks for its result: the next
  partition starts after the previous one's history is written, as before threads existed.
"""

from __future__ import annotations

import queue
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterator, Sequence, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")

#: Kafka's default for ``log.cleaner.threads``.
DEFAULT_CLEANER_THREADS = 1


def in_order(spark, items: Sequence[Item], work: Callable[[object, Item], Result],
             threads: int) -> Iterator[Result]:
    """``work(session, item)`` for every item, up to ``threads`` at once; the results in the
    items' order. Closing the iterator early cancels the items not yet started and waits
    for the ones under way (a partition is never left half-maintained by the run itself)."""
    threads = max(1, min(threads, len(items)))
    try:
        sessions = queue.SimpleQueue()
        for _ in range(threads if threads > 1 else 0):
            sessions.put(child_session(spark))
    except Exception:  # noqa: BLE001 - a session kind without child sessions (Spark Connect): one at a time
        threads = 1
    if threads == 1:
        for item in items:
            yield work(spark, item)
        return
    local = threading.local()

    def with_own_session(item: Item) -> Result:
        session = getattr(local, "session", None)
        if session is None:
            session = local.session = sessions.get_nowait()
            # the engine passes its session explicitly; make it the thread's active one too
            session._jvm.org.apache.spark.sql.SparkSession.setActiveSession(session._jsparkSession)
        return work(session, item)

    pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="cleaner")
    try:
        futures = [pool.submit(with_own_session, item) for item in items]
        for future in futures:
            yield future.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def child_session(spark):
    """A new session of the same Spark with the parent's session confs: ``newSession`` starts
    from the Spark conf alone, and a conf a notebook set with ``spark.conf.set`` must hold in
    every cleaner thread too. Confs that cannot change at run time are the same anyway."""
    child = spark.newSession()
    own = child.conf.getAll
    for key, value in spark.conf.getAll.items():
        if own.get(key) != value:
            try:
                child.conf.set(key, value)
            except Exception:  # noqa: BLE001 - a static or core conf: shared by every session already
                pass
    return child


class HeldLines:
    """Progress lines: said at once by the calling thread, held by a cleaner thread until
    its partition's turn (:meth:`hold`, :meth:`release`)."""

    def __init__(self, say: Callable[[str], None]):
        self.say = say
        self._local = threading.local()

    def __call__(self, message: str) -> None:
        held = getattr(self._local, "lines", None)
        if held is None:
            self.say(message)
        else:
            held.append(message)

    def hold(self) -> list[str]:
        """From now on this thread's lines go into the returned list."""
        self._local.lines = []
        return self._local.lines

    def release(self) -> None:
        """This thread's lines are said at once again."""
        self._local.lines = None
