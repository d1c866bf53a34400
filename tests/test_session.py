"""The embedded session's settings that only change what a query costs, not what it does."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest

REPO = Path(__file__).resolve().parents[1]


def _py4j_commands(spark, build) -> int:
    """How many commands the Python side sends to the JVM while ``build()`` runs."""
    client = spark.sparkContext._gateway._gateway_client
    real = client.send_command
    sent = []

    def counted(command, *args, **kwargs):
        sent.append(command)
        return real(command, *args, **kwargs)

    with mock.patch.object(client, "send_command", counted):
        build()
    return len(sent)


def test_queries_are_built_without_pysparks_dataframe_debugging(spark):
    """pyspark records the Python call site of every DataFrame function call in the JVM
    unless ``spark.python.sql.dataFrameDebugging.enabled`` is false (LOCAL_CONF): a few
    round trips to the JVM for each ``col``, ``lit`` or ``select``; the engine builds many
    small queries a partition. The same query, built both ways, gives the same rows."""
    from pyspark.errors import utils
    from pyspark.sql import functions as F

    frame = spark.range(5)

    def build():
        return frame.select((F.col("id") + F.lit(1)).alias("next"), F.when(F.col("id") > 2, F.lit("late")))

    assert spark.conf.get("spark.python.sql.dataFrameDebugging.enabled") == "false"
    assert not utils.is_debugging_enabled()
    shipped = _py4j_commands(spark, build)
    with mock.patch.object(utils, "_enable_debugging_cache", True):
        pysparks_default = _py4j_commands(spark, build)
        rows_with_debugging = build().collect()
    assert shipped * 2 <= pysparks_default, (shipped, pysparks_default)
    assert build().collect() == rows_with_debugging


def _delta_verifies_every_commit(spark) -> bool:
    """Delta's own decision to rebuild a table's state after every commit, to verify the
    version checksum it computed incrementally (it does when the JVM is not in UTC)."""
    snapshot = getattr(getattr(spark._jvm, "org.apache.spark.sql.delta.Snapshot$"), "MODULE$")
    return bool(snapshot.allFilesInCrcVerificationForceEnabled(spark._jsparkSession))


def test_the_embedded_jvm_keeps_utc_so_delta_rebuilds_no_state_after_a_commit(spark):
    """The suite's session is the embedded one (``local_session``): its JVM runs in UTC, as
    its SQL does, whatever zone the machine is in (this machine's own is ``Etc/UTC``)."""
    assert spark._jvm.java.util.TimeZone.getDefault().getID() == "UTC"
    assert not _delta_verifies_every_commit(spark)


def test_a_time_zone_chosen_for_the_jvm_is_kept(monkeypatch):
    from framework.session import UTC_JVM_OPTION, in_utc

    for name in ("SPARK_SUBMIT_OPTS", "JDK_JAVA_OPTIONS", "JAVA_TOOL_OPTIONS"):
        monkeypatch.delenv(name, raising=False)
    assert in_utc("-Dderby.system.home=/tmp/x") == f"-Dderby.system.home=/tmp/x {UTC_JVM_OPTION}"
    assert in_utc("") == UTC_JVM_OPTION
    assert in_utc("-Duser.timezone=Asia/Tokyo") == "-Duser.timezone=Asia/Tokyo"
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", "-Duser.timezone=America/New_York")
    assert in_utc("-Dx=1") == "-Dx=1"


def test_the_embedded_jvm_collects_garbage_for_throughput(spark):
    """The suite's session is the embedded one: its JVM runs the throughput collector (its
    two collectors are Parallel's), not the G1 HotSpot picks on two cores."""
    beans = spark._jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
    names = {beans.get(i).getName() for i in range(beans.size())}
    assert names == {"PS Scavenge", "PS MarkSweep"}, names


@pytest.mark.parametrize("chosen", ["-XX:+UseG1GC", "-XX:+UseSerialGC", "-XX:-UseParallelGC", "-XX:+UseZGC"])
def test_a_collector_chosen_for_the_jvm_is_kept(monkeypatch, chosen):
    from framework.jvm_options import ENVIRONMENT, THROUGHPUT_COLLECTOR, with_collector

    for name in ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    assert with_collector("-Dx=1") == f"-Dx=1 {THROUGHPUT_COLLECTOR}"
    assert with_collector("") == THROUGHPUT_COLLECTOR
    # options that only name a collector's tuning are no choice of one
    assert with_collector("-XX:+UseGCOverheadLimit -XX:+UseStringDeduplication").endswith(THROUGHPUT_COLLECTOR)
    assert with_collector(f"-Dx=1 {chosen}") == f"-Dx=1 {chosen}"
    monkeypatch.setenv("JDK_JAVA_OPTIONS", chosen)
    assert with_collector("-Dx=1") == "-Dx=1"


_CHILD = """
from framework.session import local_session
from tests.test_session import _delta_verifies_every_commit
spark = local_session("time-zone")
print("jvm", spark._jvm.java.util.TimeZone.getDefault().getID(), _delta_verifies_every_commit(spark))
"""


@pytest.mark.slow
def test_on_a_machine_outside_utc_the_embedded_jvm_still_keeps_utc(tmp_path):
    """A process whose machine is in Europe/Berlin (``TZ``): without the option its JVM
    takes that zone and Delta verifies every commit by rebuilding the table's state, one
    more Spark job a commit (docs/performance-log.md)."""
    env = {**os.environ, "TZ": "Europe/Berlin"}
    done = subprocess.run([sys.executable, "-c", _CHILD], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    [line] = [line for line in done.stdout.splitlines() if line.startswith("jvm ")]
    assert line == "jvm UTC False", line
