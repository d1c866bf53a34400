"""Producers and the cleaner at the same time: nothing lost, nothing duplicated, no producer fails.

The producer runs in another process with its own JVM, as a real producer would.
"""

import subprocess
import sys
import threading
from contextlib import contextmanager
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from framework import faults
from framework.clients.produce import produce
from framework.clients.records import parse_records
from framework.log.delta_commits import is_concurrent_append
from framework.log.topic import Topic
from framework.spec import load_spec
from framework.stages import compaction, compaction_rewrite
from framework.stages.maintenance import Maintenance

REPO = Path(__file__).resolve().parents[1]
SPEC = """\
topic: busy
partitions: 1
config:
  cleanup.policy: compact
  min.cleanable.dirty.ratio: 0.0
"""

pytestmark = pytest.mark.slow


class ProducerProcess:
    def __init__(self, spec_path, warehouse):
        self.process = subprocess.Popen(
            [sys.executable, str(REPO / "tests" / "support" / "producer_process.py"), str(REPO), str(spec_path),
             warehouse.root],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )
        assert self.ask(None) == "ready"

    def send(self, command):
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()

    def answer(self):
        line = self.process.stdout.readline().strip()
        assert not line.startswith("error"), line
        return line

    def ask(self, command):
        if command is not None:
            self.send(command)
        return self.answer()

    def close(self):
        try:
            self.process.stdin.write("quit\n")
            self.process.stdin.flush()
            self.process.wait(timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()  # stuck waiting for a signal a failed test never gave
            self.process.wait()


@pytest.fixture
def busy_topic(spark, warehouse, tmp_path):
    path = tmp_path / "busy.yaml"
    path.write_text(SPEC)
    topic = Topic(spark, warehouse, load_spec(path))
    topic.create()
    # Dirty keys for the cleaner: k0..k9, each written three times.
    raw = [(i, {"key": f"k{i % 10}", "value": str(i), "timestamp": 0}) for i in range(30)]
    produce(topic, parse_records(raw, topic.spec, "test"), 0)
    producer = ProducerProcess(path, warehouse)
    yield topic, producer
    producer.close()


def surviving(topic):
    rows = topic.partition(0).read().select("offset", "key", "value").collect()
    return rows


def assert_log_is_sound(topic, produced_keys):
    rows = surviving(topic)
    offsets = [r["offset"] for r in rows]
    assert len(offsets) == len(set(offsets)), "an offset repeats"
    keys = [r["key"] for r in rows]
    for key in produced_keys:
        assert keys.count(key) == 1, f"{key} was lost or duplicated"
    # The cleaner's keys: one survivor each, the last written.
    winners = {r["key"]: r["value"] for r in rows if r["key"].startswith("k")}
    assert winners == {f"k{i}": str(20 + i) for i in range(10)}


@contextmanager
def append_inside_the_commit(producer, signal: Path, count: int, tag: str):
    """Make the other process's append commit while the cleaner's transaction is open.

    The engine's ``compact.during_commit`` fault point is reached inside the compaction's
    Delta transaction (its snapshot taken, nothing committed). The hook creates ``signal``
    and waits until the producer process has committed its append. That is a real race,
    pinned, whatever DML the engine uses. A hook that is never reached fails the test.
    """
    producer.send(f"produce-when {signal} {count} {tag}")
    path = str(signal)

    def gate(_point, _context):
        import os
        import time

        if not os.path.exists(path + ".done"):
            open(path, "w").close()
            deadline = time.monotonic() + 120
            while not os.path.exists(path + ".done") and time.monotonic() < deadline:
                time.sleep(0.05)

    with faults.installed("compact.during_commit", gate):
        yield
    assert signal.exists(), "the engine never reached its compact.during_commit fault point"


def compact_while_five_racers_append(spark, topic, producer, signal: Path):
    """A maintain (compaction only) whose transaction an append of five records commits inside;
    the run and its progress lines."""
    messages = []
    with append_inside_the_commit(producer, signal, 5, "racer"):
        run = Maintenance(spark, topic.warehouse, [topic.spec], progress=messages.append,
                          record_history=False).run(1000, stages=("compact",))
    return run, messages


@pytest.fixture
def merged(monkeypatch):
    """Compaction by Delta's MERGE, as a large partition's is. The MERGE reads the segments
    it cleans, so an append into them that commits first is a conflict; a small partition's
    rewrite reads no segment and has none (test_an_append_during_a_rewrite_is_no_conflict)."""
    monkeypatch.setattr(compaction_rewrite, "available", lambda *args: False)


def test_an_append_during_compaction_makes_the_cleaner_roll_and_retry(spark, busy_topic, tmp_path, merged):
    topic, producer = busy_topic
    log = topic.partition(0)
    run, messages = compact_while_five_racers_append(spark, topic, producer, tmp_path / "race")
    assert producer.answer() == "ok 30 5"  # the producer did not fail
    assert not run.failed, run.partitions[0].error
    assert any("rolled to segment 35" in m for m in messages), messages
    # The retry never cleaned past the roll, and the racer's records are in the old segment.
    state = log.snapshot().state
    assert state.active_segment == 35 and state.checkpoint == 35
    segments = {r["key"]: r["_segment"] for r in log.read().select("key", "_segment").collect()}
    assert {segments[f"racer-{i}"] for i in range(5)} == {0}  # written before the roll
    assert_log_is_sound(topic, [f"racer-{i}" for i in range(5)])
    # Appends after the roll go to the new segment, which a compaction capped at U <= 35 never reads.
    assert producer.ask("produce 2 after") == "ok 35 2"
    assert {r["_segment"] for r in log.read().where(F.col("key").startswith("after")).collect()} == {35}


def test_a_direct_conflict_is_a_concurrent_append(spark, busy_topic, tmp_path, merged):
    topic, producer = busy_topic
    log = topic.partition(0)
    plan = compaction.plan(log, 1000)
    assert plan.decision.due
    with append_inside_the_commit(producer, tmp_path / "race", 1, "racer"), pytest.raises(Exception) as caught:
        compaction.execute(log, plan)
    assert producer.answer() == "ok 30 1"
    assert is_concurrent_append(caught.value), caught.value
    assert log.snapshot().state.checkpoint == 0  # nothing of the failed attempt landed
    assert log.read().count() == 31


def test_an_append_during_a_rewrite_is_no_conflict(spark, busy_topic, tmp_path):
    """A small partition's compaction rewrites only the files holding records it removes or
    stamps; an append commits files of its own, so it lands inside the rewrite's
    transaction without a conflict: no roll, no retry, and its records stay dirty."""
    topic, producer = busy_topic
    log = topic.partition(0)
    run, messages = compact_while_five_racers_append(spark, topic, producer, tmp_path / "race")
    assert producer.answer() == "ok 30 5"
    assert not run.failed, run.partitions[0].error
    assert not any("rolled" in m for m in messages), messages
    compacted = next(row for row in run.partitions[0].rows if row.stage == "compact")
    assert compacted.attempts == 1 and compacted.removed_records == 20
    state = log.snapshot().state
    assert state.active_segment == 0 and state.checkpoint == 30 and state.log_end_offset == 35
    assert_log_is_sound(topic, [f"racer-{i}" for i in range(5)])


def test_an_append_before_the_merge_starts_is_no_conflict(spark, busy_topic):
    """Delta's MERGE takes its snapshot when it starts: an append committed before then is
    simply part of the table it reads (above U, so untouched), and nothing is retried."""
    topic, producer = busy_topic
    log = topic.partition(0)
    plan = compaction.plan(log, 1000)
    assert producer.ask("produce 1 early") == "ok 30 1"
    result = compaction.execute(log, plan)
    assert result.committed and result.removed_records == 20
    assert_log_is_sound(topic, ["early-0"])


def test_producer_loop_while_the_cleaner_runs(spark, busy_topic):
    topic, producer = busy_topic
    result = {}

    def loop():
        try:
            result["loop"] = producer.ask("loop 15 stream")
        except AssertionError as error:  # the producer's "error ..." line, for the assertion below
            result["error"] = str(error)

    thread = threading.Thread(target=loop)
    thread.start()
    runs = []
    maintenance = Maintenance(spark, topic.warehouse, [topic.spec], record_history=False)
    while thread.is_alive():
        runs.append(maintenance.run(1000, stages=("compact",), force=True))
    thread.join()
    assert "error" not in result, f"{result['error']} (while {len(runs)} compaction runs committed beside it)"
    assert all(not run.failed for run in runs), [r.partitions[0].error for r in runs if r.failed]
    batches = int(result["loop"].split()[1])
    assert batches > 0 and len(runs) > 0
    assert_log_is_sound(topic, [f"stream-{i}" for i in range(batches)])
    state = topic.partition(0).snapshot().state
    assert state.log_end_offset == 30 + batches
