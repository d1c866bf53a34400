"""framework.stages.cleaner_threads: partitions side by side, results and lines in order.

The maintenance runs themselves (the same records, history and output as one thread; a
failure in one partition; kills with partitions in flight) are tested through the command
line in tests/test_maintenance_runs.py and tests/test_crashes.py. Here: the order, the
laziness of one thread, early closing, the sessions, and the fallback for a session kind
without child sessions.
"""

from __future__ import annotations

import threading
import time

from framework.side_by_side import child_session, in_order
from framework.stages.cleaner_threads import HeldLines


def test_results_come_back_in_order_each_thread_with_its_own_session(spark):
    def work(session, item):
        time.sleep(0.05 * (4 - item))  # later items finish first
        return item, session, threading.current_thread().name

    results = list(in_order(spark, [0, 1, 2, 3], work, threads=2))
    assert [item for item, _, _ in results] == [0, 1, 2, 3]
    sessions = {id(session) for _, session, _ in results}
    assert len(sessions) == 2 and id(spark) not in sessions
    assert {name for _, _, name in results} <= {"cleaner_0", "cleaner_1"}


def test_one_thread_runs_each_item_only_when_its_result_is_asked_for(spark):
    started = []

    def work(session, item):
        started.append(item)
        return session

    results = in_order(spark, ["a", "b", "c"], work, threads=1)
    assert next(results) is spark and started == ["a"]
    assert next(results) is spark and started == ["a", "b"]


def test_closing_early_waits_for_the_items_under_way_and_starts_no_other(spark):
    started, finished = [], []
    gate = threading.Event()

    def work(session, item):
        started.append(item)
        if item > 0:  # every other item holds its thread until the gate opens
            gate.wait(30)
        finished.append(item)
        return item

    results = in_order(spark, list(range(8)), work, threads=2)
    assert next(results) == 0
    waited = time.monotonic()
    while 1 not in started and time.monotonic() - waited < 30:
        time.sleep(0.01)
    threading.Timer(0.5, gate.set).start()
    results.close()  # with items 1 (and perhaps 2) under way, held at the gate
    assert gate.is_set(), "close returned before the items under way finished"
    assert sorted(finished) == sorted(started) and set(started) <= {0, 1, 2}, started


def test_without_child_sessions_the_items_run_one_at_a_time_on_the_callers_session():
    class ConnectLike:
        """What a Spark Connect session answers to ``newSession``."""

        def newSession(self):
            raise NotImplementedError("newSession is not supported in Spark Connect")

    caller = ConnectLike()
    assert [s is caller for s in in_order(caller, [1, 2, 3], lambda s, i: s, threads=4)] == [True] * 3


def test_a_child_session_keeps_the_confs_the_caller_set_at_run_time(spark):
    key = "spark.sql.shuffle.partitions"
    before = spark.conf.get(key)
    spark.conf.set(key, str(int(before) + 7))
    try:
        child = child_session(spark)
    finally:
        spark.conf.set(key, before)
    assert child is not spark and child.conf.get(key) == str(int(before) + 7)
    assert spark.conf.get(key) == before  # and the caller's own stays its own


def test_held_lines_wait_for_their_turn_and_the_callers_are_said_at_once():
    said = []
    lines = HeldLines(said.append)
    lines("main")
    held = []

    def worker():
        held.append(lines.hold())
        lines("in a thread")
        lines.release()
        lines("after release")

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert said == ["main", "after release"] and held == [["in a thread"]]


def test_the_callers_session_is_the_active_one_after_the_threads(spark):
    """pyspark's active session is one per process, and a thread's createDataFrame on its
    child session makes that child the active one; a job (or a notebook) that looks the
    active session up afterwards must get its own back, not a thread's leftover."""
    from pyspark.sql import SparkSession

    assert SparkSession.getActiveSession() is spark
    children = list(in_order(spark, [1, 2], lambda session, item: session.createDataFrame([(item,)], "n int")
                             .sparkSession, threads=2))
    assert all(child is not spark for child in children)
    assert SparkSession.getActiveSession() is spark


def test_a_session_not_started_gets_children_that_start_only_when_their_work_asks(spark):
    """A verb's deferred session (framework/deferred_session.py): work that needs no Spark
    (a local table's create or append) starts nothing; work that asks gets a child of the
    then-started session, its own per thread and its thread's active session in the JVM."""
    from framework.deferred_session import DeferredSession, not_started

    deferred = DeferredSession(lambda: spark)
    quiet = list(in_order(deferred, [1, 2, 3], lambda session, item: (not_started(session), item), threads=2))
    assert quiet == [(True, 1), (True, 2), (True, 3)] and not deferred.started

    def asks(session, item):
        time.sleep(0.05)  # both threads take an item
        active = getattr(session._jvm, "org.apache.spark.sql.SparkSession").getActiveSession().get()
        return session._session, bool(active.equals(session._session._jsparkSession))

    children = list(in_order(deferred, [1, 2, 3, 4], asks, threads=2))
    assert deferred.started and all(active for _, active in children)
    assert len({id(child) for child, _ in children}) == 2 and all(child is not spark for child, _ in children)
