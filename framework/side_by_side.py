"""Work on many partitions side by side, one thread each, results in the partitions' order.

A small partition's work (a create, an append, a maintenance run) is mostly the driver
planning and committing small Spark queries while the executors wait, so a few threads
keep two cores busy; each partition is its own Delta table, so their commits never conflict.

- **Sessions**: work that sets session confs (a commit's metadata travels in them: creates,
  maintenance) gets a child session per thread (``newSession``: the same Spark, its own
  confs, starting as a copy of the caller's). Work that sets only writer options (appends)
  shares the caller's session. A caller's session not started yet
  (``framework.deferred_session``) gets children that start, with it, only when their
  thread first asks one a question: work that needs no Spark starts no JVM.
- **Order**: results come back in the items' order, whatever order they finish in.
- **One thread**, or a session kind without child sessions (Spark Connect), runs each item
  only when the caller asks for its result.
"""

from __future__ import annotations

import queue
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterator, Sequence, TypeVar

from framework.deferred_session import DeferredSession, not_started, started

Item = TypeVar("Item")
Result = TypeVar("Result")


def in_order(spark, items: Sequence[Item], work: Callable[[object, Item], Result], threads: int,
             name: str = "cleaner", own_sessions: bool = True) -> Iterator[Result]:
    """``work(session, item)`` for every item, up to ``threads`` at once; the results in the
    items' order. Closing the iterator early cancels the items not yet started and waits
    for the ones under way (a partition is never left half-done by the caller itself).
    Threads are named ``<name>_<n>``; with ``own_sessions`` false they share ``spark``."""
    threads = max(1, min(threads, len(items)))
    sessions = queue.SimpleQueue()
    try:
        for _ in range(threads if threads > 1 and own_sessions else 0):
            sessions.put(_deferred_child(spark) if not_started(spark) else child_session(spark))
    except Exception:  # noqa: BLE001 - a session kind without child sessions (Spark Connect): one at a time
        threads = 1
    if threads == 1:
        for item in items:
            yield work(spark, item)
        return
    local = threading.local()

    def in_thread(item: Item) -> Result:
        if not own_sessions:
            return work(spark, item)
        session = getattr(local, "session", None)
        if session is None:
            session = local.session = sessions.get_nowait()
            if not not_started(session):  # (a deferred child does this as it starts)
                _activate(session)
        return work(session, item)

    # pyspark keeps one process-wide "active session" in a class attribute, which work in any
    # thread overwrites (createDataFrame sets it): the caller's must be the active one after
    # (a session not started yet has none to keep).
    active = None if not_started(spark) else getattr(type(started(spark)), "_activeSession", None)
    pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=name)
    try:
        futures = [pool.submit(in_thread, item) for item in items]
        for future in futures:
            yield future.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        if active is not None:
            type(started(spark))._activeSession = active


def each(spark, items: Sequence[Item], work: Callable[[object, Item], Result], threads: int,
         name: str, own_sessions: bool = True) -> list[Result]:
    """:func:`in_order`, run to the end: every result, in the items' order."""
    return list(in_order(spark, items, work, threads, name, own_sessions))


def _activate(session) -> None:
    """Make ``session`` this thread's active one: the engine passes its session explicitly,
    and Spark's own code asks for the thread's active session."""
    getattr(session._jvm, "org.apache.spark.sql.SparkSession").setActiveSession(session._jsparkSession)


def _deferred_child(spark) -> DeferredSession:
    """A child session of ``spark`` (not started) made when its thread first asks it a
    question, the parent started then if it was not, and made that thread's active one."""
    def start():
        child = child_session(started(spark))
        _activate(child)
        return child

    return DeferredSession(start)


def child_session(spark):
    """A new session of the same Spark with the parent's session confs: ``newSession`` starts
    from the Spark conf alone, and a conf a notebook set with ``spark.conf.set`` must hold in
    every thread too. Confs that cannot change at run time are the same anyway."""
    child = spark.newSession()
    own = child.conf.getAll
    for key, value in spark.conf.getAll.items():
        if own.get(key) != value:
            try:
                child.conf.set(key, value)
            except Exception:  # noqa: BLE001 - a static or core conf: shared by every session already
                pass
    return child
