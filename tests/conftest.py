"""Shared fixtures: one local Spark session with Delta and one real Kafka broker for the whole
run, and paths."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.acceptance_files import REPO
from tests.support.child_jvm import CHILD_JVM_OPTIONS, SUITE_SESSION_GC

#: Small, fast settings for tests on 2 cores.
TEST_CONF = {
    "spark.sql.shuffle.partitions": "1",
    "spark.default.parallelism": "2",
    "spark.databricks.delta.snapshotPartitions": "1",
    "spark.sql.adaptive.enabled": "false",
    # Tables here hold a few rows: compiling generated code for each new query costs more
    # than it saves (the interpreted path computes the same results).
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}

#: Child JVMs get CHILD_JVM_OPTIONS through the variables Spark's launch scripts read;
#: values set outside the run are left alone.
_OWN_CHILD_OPTIONS = [name for name in ("SPARK_SUBMIT_OPTS", "SPARK_DAEMON_JAVA_OPTS") if name not in os.environ]
os.environ.update(dict.fromkeys(_OWN_CHILD_OPTIONS, CHILD_JVM_OPTIONS))


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    from framework.session import local_session

    scratch = tmp_path_factory.mktemp("spark")
    conf = dict(TEST_CONF)
    conf["spark.sql.warehouse.dir"] = str(scratch / "spark-warehouse")
    conf["spark.driver.extraJavaOptions"] = f"-Dderby.system.home={scratch} {SUITE_SESSION_GC}"
    with pytest.MonkeyPatch.context() as patch:
        _default_jit(patch)
        session = local_session("topiclake-tests", conf=conf, kafka=True)
    yield session
    session.stop()


@pytest.fixture(autouse=True)
def suite_session_stays_active(request):
    """pyspark's active session is one per process, and a test's own threads on child
    sessions (concurrent producers, the property test's workers) leave one of them there;
    ``framework.session.get_session``, which the command line calls, would hand it out to
    the next test. (The engine's own threads put the caller's back: tests/test_cleaner_threads.py.)"""
    yield
    if "spark" in request.fixturenames:
        from pyspark.sql import SparkSession

        spark = request.getfixturevalue("spark")
        spark._jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)
        SparkSession._activeSession = spark


def _default_jit(patch: pytest.MonkeyPatch) -> None:
    """Take this run's :data:`CHILD_JVM_OPTIONS` out of the environment (until ``patch`` undoes it)."""
    for name in _OWN_CHILD_OPTIONS:
        patch.delenv(name, raising=False)


@pytest.fixture
def long_lived_child_jvm(monkeypatch):
    """For a test whose child JVM works for a minute or more (a notebook's kernel): the
    JIT's default, which is faster there than :data:`CHILD_JVM_OPTIONS`."""
    _default_jit(monkeypatch)


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory):
    """One real Kafka broker (KRaft, one node on 127.0.0.1) for the whole run: the jars are
    fetched from Maven Central on first use (scripts/fetch-kafka.sh), and the broker is
    stopped by its PID at the end, also when a test or start() itself failed."""
    from tests.support.kafka_broker import KafkaBroker, ensure_kafka_jars

    broker = KafkaBroker(ensure_kafka_jars())
    try:
        broker.start(tmp_path_factory.mktemp("kafka"))
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def warehouse(tmp_path):
    from framework.log.warehouse import Warehouse

    return Warehouse.resolve(str(tmp_path / "warehouse"))


@pytest.fixture(scope="session")
def built_wheel(tmp_path_factory) -> Path:
    """topiclake's wheel as ``python -m build --wheel`` makes it (as Databricks' bundle does)."""
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run([sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(REPO)],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    [wheel] = out.glob("topiclake-*-py3-none-any.whl")
    return wheel
