"""Crash anywhere, lose nothing: real ``topiclake`` processes SIGKILLed at every named point.

One chain of steps runs on two warehouses that start equal. On the *crashed* one each
step's command runs as a real process (``python -m framework.cli.main``) with
``TOPICLAKE_FAULTS`` naming one fault point (framework/faults.py), so the process kills
itself with SIGKILL there, as a power cut would; two more steps kill ``maintain`` at a
random moment from outside. On the *twin* the same command runs to completion. After
every kill:

* the process must have died by SIGKILL (so the point was reached: the check is not vacuous);
* every partition table is readable and consistent: offsets unique, inside
  [log start, log end), the bookkeeping readable from the commits;
* then the command runs again (a producer's append only when it did not land, as a
  Kafka producer resends what was not acknowledged), and every partition's records, every
  column, and the committed offsets must equal the twin's: nothing lost, nothing
  duplicated, no offset reused, and the next run converges.

Between steps, both warehouses get the same new records (in this process), so that each
step's stage has work to do. ``make test`` runs the whole chain; ``make test-crashes`` runs
this file alone.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from framework import faults
from framework.cli.main import main
from framework.log.abandoned_temporaries import ABANDONED_AFTER_MS
from framework.log.warehouse import delta_table_sql
from tests.support.delta_readers import delta_rs_query

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
NOW = 10_000_000
#: The whole matrix runs in ``make test``: 25 named points, one of them again with two
#: cleaner threads and two again into a new table, and two random moments, the second with
#: two cleaner threads; each a real process killed (250 s alone on 2 cores, 2026-12-04).
SPECS = {
    # plain tables: compaction's own rewrite through Delta's transaction API, as topiclake ships
    "cdc.yaml": "topic: cdc\npartitions: 2\nconfig:\n  cleanup.policy: compact\n  min.cleanable.dirty.ratio: 0.0\n",
    # deletion vectors turned on (below): a compaction marks rows, and with no time-travel
    # window each maintain purges them (as Delta's REORG ... APPLY (PURGE) does; topiclake's
    # own commits, stages/purge.py) and sweeps the old files
    "dv.yaml": "topic: dv\npartitions: 1\nconfig:\n  cleanup.policy: compact\n  min.cleanable.dirty.ratio: 0.0\n"
               "  time.travel.retention.ms: 0\n",
    "log.yaml": "topic: log\npartitions: 1\nconfig:\n  cleanup.policy: delete\n  retention.ms: 1000000\n"
                "  time.travel.retention.ms: 0\n",
    # three partitions, small and due together: maintain decides and stages their rewrites as
    # one batch (framework/stages/compaction_batch.py), then commits each; one of them has
    # records too young to compact (min.compaction.lag.ms), so its U lies below its log end
    "batch.yaml": "topic: batch\npartitions: 3\nconfig:\n  cleanup.policy: compact\n  min.cleanable.dirty.ratio: 0.0\n"
                  "  min.compaction.lag.ms: 2000\n",
    "fresh.yaml": "topic: fresh\npartitions: 1\nconfig:\n  cleanup.policy: delete\n  retention.ms: -1\n",
    "fresh2.yaml": "topic: fresh2\npartitions: 1\nconfig:\n  cleanup.policy: delete\n  retention.ms: -1\n",
    "fresh3.yaml": "topic: fresh3\npartitions: 1\nconfig:\n  cleanup.policy: delete\n  retention.ms: -1\n",
    "fresh4.yaml": "topic: fresh4\npartitions: 1\nconfig:\n  cleanup.policy: delete\n  retention.ms: -1\n",
}


#: ``topiclake`` in a process where Spark runs before the command does: a local warehouse's
#: small partitions then decide and stage their compactions as one batch (on a JVM that
#: runs anyway), where a new process decides and commits each without one.
SPARK_FIRST = ("import sys; from framework.session import get_session; get_session(); "
               "from framework.cli.main import main; sys.exit(main(sys.argv[1:]))")


class Chain:
    """The two warehouses, and how to run a command on each."""

    def __init__(self, root: Path):
        self.root = root
        self.specs = root / "specs"
        self.crashed = root / "crashed"
        self.twin = root / "twin"
        self.batches = 0
        self.kills: list[str] = []

    def args(self, warehouse: Path, *command: str) -> list[str]:
        return ["--warehouse", str(warehouse), "--specs", str(self.specs), *command]

    def records_file(self, topic: str, count: int, timestamp: int, keys: int = 3) -> str:
        self.batches += 1
        path = self.root / f"batch-{self.batches}.jsonl"
        path.write_text("".join(json.dumps({"key": f"{topic}-k{(self.batches + i) % keys}",
                                            "value": f"{self.batches}.{i}", "timestamp": timestamp + i}) + "\n"
                                for i in range(count)))
        return str(path)

    def both(self, *command: str) -> None:
        """Run a command to completion on both warehouses (in this process)."""
        for warehouse in (self.crashed, self.twin):
            assert main(self.args(warehouse, *command)) == 0, command

    def produce_both(self, topic: str, count: int, timestamp: int, calls: int = 1,
                     partition: int | None = None) -> None:
        into = [] if partition is None else ["--partition", str(partition)]
        for _ in range(calls):
            self.both("produce", "--topic", topic, *into, "--input", self.records_file(topic, count, timestamp),
                      "--now", str(NOW))

    def kill(self, command: list[str], point: str | None = None, after_s: float | None = None,
             spark_running: bool = False) -> int:
        """Run ``command`` on the crashed warehouse as a real process and kill it; its exit
        status. ``spark_running``: in a process where Spark runs already (a notebook, a
        Databricks job), as :data:`SPARK_FIRST` starts it."""
        env = dict(os.environ)
        env.pop(faults.ENVIRONMENT, None)
        if point:
            env[faults.ENVIRONMENT] = point
        entry = ["-c", SPARK_FIRST] if spark_running else ["-m", "framework.cli"]
        process = subprocess.Popen([sys.executable, *entry, *self.args(self.crashed, *command)],
                                   cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   start_new_session=True)
        try:
            if after_s is not None:
                try:
                    process.wait(timeout=after_s)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)  # the JVM too, as a power cut would
            _, err = process.communicate(timeout=300)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
        if point:
            assert process.returncode == -signal.SIGKILL, f"{point} was never reached: {err[-2000:]}"
            self.kills.append(point)
        return process.returncode


def _partition_tables(warehouse: Path) -> list[Path]:
    return sorted(p for p in warehouse.iterdir() if (p / "_delta_log").is_dir() and p.name != "_topiclake")


def _consistent(spark, warehouse: Path) -> None:
    """Every partition table readable, its offsets unique and inside [log start, log end).
    The records are read by delta-rs (an independent reader, which also applies deletion
    vectors; milliseconds a table where a Spark query costs two jobs), the bounds from the
    engine's bookkeeping."""
    from framework.log.topic import Topic
    from framework.log.warehouse import Warehouse
    from framework.spec import load_specs

    for spec in load_specs([warehouse.parent / "specs"]):
        for log in Topic(spark, Warehouse.resolve(str(warehouse)), spec).partitions():
            if not log.exists():
                continue
            state = log.snapshot().state
            offsets = [row["offset"] for row in delta_rs_query(log.path, '"offset"')]
            assert len(offsets) == len(set(offsets)), f"{log.name}: duplicated offsets"
            outside = [o for o in offsets if not state.log_start_offset <= o < state.log_end_offset]
            assert not outside, f"{log.name}: offset(s) {outside[:5]} outside [log start, log end)"


def _same(spark, chain: Chain, step: str) -> None:
    """Every partition's records, every column, and the committed offsets of the crashed
    warehouse equal the twin's (read by delta-rs, as in :func:`_consistent`)."""
    crashed, twin = _partition_tables(chain.crashed), _partition_tables(chain.twin)
    assert [p.name for p in crashed] == [p.name for p in twin], step
    compared = 0
    for left, right in zip(crashed, twin):
        records = delta_rs_query(str(left))
        assert records == delta_rs_query(str(right)), f"{step}: {left.name} differs from the twin"
        compared += len(records)
    assert compared > 0, f"{step}: no records compared"  # the chain's first produce wrote some
    offsets = [sorted((r["group"], r["topic"], r["partition"], r["offset"])
                      for r in delta_rs_query(str(w / "_topiclake" / "consumer_offsets")))
               if (w / "_topiclake" / "consumer_offsets").exists() else [] for w in (chain.crashed, chain.twin)]
    assert offsets[0] == offsets[1], f"{step}: committed offsets differ"


def _log_end(spark, chain: Chain, topic: str, partition: int) -> int:
    from framework.log.topic import Topic
    from framework.log.warehouse import Warehouse
    from framework.spec import load_specs

    spec = next(s for s in load_specs([chain.specs]) if s.topic == topic)
    log = Topic(spark, Warehouse.resolve(str(chain.crashed)), spec).partition(partition)
    return log.snapshot().state.log_end_offset if log.exists() else -1


@pytest.mark.timeout(1200)
def test_kills_at_every_point_and_at_random_moments_lose_nothing(spark, tmp_path):
    chain = Chain(tmp_path)
    chain.specs.mkdir()
    for name, text in SPECS.items():
        (chain.specs / name).write_text(text)
    chain.produce_both("cdc", 6, NOW - 5000)
    chain.produce_both("dv", 6, NOW - 5000)
    chain.produce_both("log", 6, 0)

    def step(name: str, command: list[str], point: str | None = None, after_s: float | None = None,
             resend_if_not_landed: tuple[str, int] | None = None, spark_running: bool = False) -> tuple[bool, float]:
        """Kill ``command`` (at ``point``, or ``after_s`` seconds in), check, converge: whether
        it was killed, and the seconds until it died or finished."""
        before = _log_end(spark, chain, *resend_if_not_landed) if resend_if_not_landed else None
        started = time.monotonic()
        status = chain.kill(command, point, after_s, spark_running)
        killed = time.monotonic()
        _consistent(spark, chain.crashed)
        # the append landed when the log end moved (a table created but empty is not a landing)
        landed = resend_if_not_landed and _log_end(spark, chain, *resend_if_not_landed) > max(before, 0)
        if not landed:
            assert main(chain.args(chain.crashed, *command)) == 0, f"{name}: the run after the kill failed"
        assert main(chain.args(chain.twin, *command)) == 0, name
        _same(spark, chain, name)
        ended = f"killed after {killed - started:.1f} s" if status == -signal.SIGKILL else (
            f"finished (exit {status}) before its moment, {killed - started:.1f} s")
        print(f"  {name}: {ended}, converged in {time.monotonic() - killed:.1f} s", flush=True)
        return status == -signal.SIGKILL, killed - started

    now = ["--now", str(NOW)]
    # a maintain whose point is not in the report skips writing it (report.* and the random
    # moments write it); each stage's points are reached through that stage's own verb
    # where the stage is all the step needs
    quiet = [*now, "--no-report"]

    def fresh(topic):
        return lambda: ["produce", "--topic", topic, "--input", chain.records_file(topic, 3, 0), *now]

    def produce_into(partition):
        return lambda: ["produce", "--topic", "cdc", "--partition", str(partition), "--input",
                        chain.records_file("cdc", 4, NOW - 4000), *now]

    def delete_records():
        chain.produce_both("log", 3, NOW)
        return ["delete-records", "--topic", "log", "--partition", "0", "--before-offset",
                str(_log_end(spark, chain, "log", 0) - 2)]

    def after(prepare, command):
        return lambda: (prepare(), command)[1]

    moments = random.Random(20261124)
    # (name, the command (built when the step runs, after its own new records), fault point, options)
    steps = [
        # a producer's first append creates its table in its own commit (produce's points);
        # a create commits an empty table: `topiclake create`, then a produce into it
        ("create.before_commit", lambda: ["create", "--topic", "fresh"], {}),
        ("create.after_commit", lambda: ["create", "--topic", "fresh2"], {}),
        ("produce.after_commit, into a new table", fresh("fresh3"), {"resend_if_not_landed": ("fresh3", 0)}),
        # a new table's data files in its folder, and no commit (no log either): not a table yet
        ("produce.files_written, into a new table", fresh("fresh4"), {"resend_if_not_landed": ("fresh4", 0)}),
        ("produce.before_commit", produce_into(0), {"resend_if_not_landed": ("cdc", 0)}),
        # data files no version lists (vacuum removes them once outside the window)
        ("produce.files_written", produce_into(0), {"resend_if_not_landed": ("cdc", 0)}),
        ("produce.after_commit", produce_into(1), {"resend_if_not_landed": ("cdc", 1)}),
        # an own commit's file written under its temporary name, never linked: no append (checked below)
        ("own_commit.temporary_written", produce_into(1), {"resend_if_not_landed": ("cdc", 1)}),
        ("commit_offset.before_commit", lambda: ["commit-offset", "--group", "g", "--topic", "log", "--partition",
                                                 "0", "--offset", "2"], {}),
        ("commit_offset.after_commit", lambda: ["commit-offset", "--group", "g", "--topic", "log", "--partition",
                                                "0", "--offset", "3"], {}),
        *[(point, after(lambda: chain.produce_both("cdc", 4, NOW - 3000), ["compact", "--topic", "cdc", *now]), {})
          for point in ("compact.before_commit", "compact.after_commit")],
        # a batch's rewrites moved into its three tables, none committed: the next run must
        # compact as if they were not there (vacuum deletes them once outside the window);
        # batch-2's two newest records are too young, its U below its log end (a batch is
        # made where Spark runs already)
        ("compact.after_staging", after(lambda: ([chain.produce_both("batch", 4, NOW - 3000, partition=p)
                                                  for p in range(3)],
                                                 chain.produce_both("batch", 2, NOW - 500, partition=2)),
                                        ["maintain", "--topic", "batch", *quiet]), {"spark_running": True}),
        *[(point, after(lambda: chain.produce_both("log", 3, 0), ["retain", "--topic", "log", *now]), {})
          for point in ("retain.before_commit", "retain.after_commit")],
        *[(point, after(lambda: chain.produce_both("log", 2, NOW, calls=3), ["optimize", "--topic", "log", *now]), {})
          for point in ("optimize.before_commit", "optimize.after_commit")],
        *[(point, after(lambda: chain.produce_both("log", 2, NOW, calls=3), ["maintain", "--topic", "log", *quiet]), {})
          for point in ("vacuum.before_sweep", "vacuum.after_sweep")],
        # dv's table has deletion vectors: its compaction marks rows, the same run's vacuum purges them
        *[(point, after(lambda: chain.produce_both("dv", 4, NOW - 2500), ["maintain", "--topic", "dv", *quiet]), {})
          for point in ("vacuum.before_purge", "vacuum.after_purge")],
        ("delete_records.before_commit", delete_records, {}),
        ("delete_records.after_commit", delete_records, {}),
        *[(point, after(lambda: chain.produce_both("cdc", 4, NOW - 2000), ["maintain", "--topic", "cdc", *quiet]), {})
          for point in ("maintain.before_history", "maintain.after_partition")],
        # both of cdc's partitions in flight at once, one of them killed as it finishes
        ("maintain.after_partition, two cleaner threads",
         after(lambda: chain.produce_both("cdc", 4, NOW - 1500), ["maintain", "--topic", "cdc", "--cleaner-threads",
                                                                  "2", *quiet]), {}),
        ("report.before_write", lambda: ["report"], {}),
        ("report.after_write", lambda: ["report"], {}),
        # the second with partitions maintained two at a time; a whole maintain as a new
        # process takes about 5 s here since its vectors' purge and vacuum start no JVM
        # (stop 109; 10 to 12 s at stop 107), so a moment drawn later than that comes after
        # it finished, and the step runs twice (6 to 14 s until stop 107, 3 to 8 s until 109)
        *[(f"random moment {i + 1}", after(lambda: (chain.produce_both("cdc", 4, NOW - 1000),
                                                   chain.produce_both("dv", 4, NOW - 1000),
                                                   chain.produce_both("log", 2, 0)),
                                           ["maintain", *now, "--cleaner-threads", str(i + 1)]),
           {"after_s": moments.uniform(2.0, 4.5)}) for i in range(2)],
    ]
    for warehouse in (chain.crashed, chain.twin):
        spark.sql(f"ALTER TABLE {delta_table_sql(str(warehouse / 'dv-0'))} "
                  "SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    random_kills = 0
    for name, command, options in steps:
        point = None if name.startswith("random") else name.split(",")[0]
        killed, seconds = step(name, command(), point, **options)
        if point is None:
            # A command that finished before its moment was no crash (a fast machine): the
            # step converged all the same; run it again with new records, killed sooner.
            for _ in range(2):
                if killed:
                    break
                killed, seconds = step(f"{name}, again", command(), None, after_s=seconds / 2)
            assert killed, f"{name}: the command finished before each of its moments"
            random_kills += 1

    # The commit's temporary file own_commit.temporary_written left is still there (every read
    # above ignored it; a vacuum keeps it while a writer may still hold it), and a vacuum
    # deletes it once it is an hour old, with the records as they were.
    delta_log = chain.crashed / "cdc-1" / "_delta_log"
    left = [p for p in delta_log.iterdir() if p.name.endswith(".tmp")]
    assert left, "the killed own commit left no temporary file"
    hour_ago = time.time() - ABANDONED_AFTER_MS / 1000
    for path in left:
        os.utime(path, (hour_ago, hour_ago))
    assert main(chain.args(chain.crashed, "vacuum", "--topic", "cdc", *now)) == 0
    assert not [p for p in delta_log.iterdir() if p.name.endswith(".tmp")]
    _same(spark, chain, "a vacuum of the abandoned temporary file")

    # ingest's points need a Kafka broker: tests/test_ingest.py kills ingest there.
    named = {p for p in faults.POINTS if p != "compact.during_commit" and not p.startswith("ingest.")}
    assert set(chain.kills) == named, f"points never killed at: {sorted(named - set(chain.kills))}"
    print(f"\n{len(chain.kills)} kill(s) at named points and {random_kills} at random moments: "
          "every table converged to its twin")
