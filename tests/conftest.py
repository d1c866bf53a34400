"""Shared fixtures: one local Spark session with Delta and one real Kafka broker for the whole
run of each pytest-xdist worker, and paths; how the files are shared out between the workers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.acceptance_files import REPO
from tests.support.child_jvm import CHILD_JVM_OPTIONS

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
#: values set outside the run are left alone (a pytest-xdist worker inherits the ones its
#: controller set: those are this run's own too).
_OWN_CHILD_OPTIONS = [name for name in ("SPARK_SUBMIT_OPTS", "SPARK_DAEMON_JAVA_OPTS")
                      if os.environ.get(name, CHILD_JVM_OPTIONS) == CHILD_JVM_OPTIONS]
os.environ.update(dict.fromkeys(_OWN_CHILD_OPTIONS, CHILD_JVM_OPTIONS))


#: Files whose tests share a session-wide server run on the same pytest-xdist worker, so
#: that a run starts the Kafka broker once and builds the wheel (into the repo's
#: ``build/`` folder) from one process only. The collection hook below refuses a file that
#: uses one of these fixtures and is not listed with it.
SHARED_SERVER_FILES = {
    "test_catalog.py": "kafka_broker", "test_ingest.py": "kafka_broker", "test_kafka_broker.py": "kafka_broker",
    "test_kafka_configs.py": "kafka_broker", "test_kafka_referee.py": "kafka_broker",
    "test_cluster.py": "built_wheel", "test_wheel.py": "built_wheel",
}

#: The longest files first (seconds alone or in the fresh-clone run at 16061c8): a worker
#: that drew one of them last would run it alone at the end. The rest follow in collection
#: order.
LONGEST_FIRST = (
    "test_crashes.py",      # 282 alone, the whole matrix
    "test_properties.py",   # 188
    "test_catalog.py",      # 71, with the ingest tests' 65 and the referee's 36
    "test_long_run.py",     # 130 alone, 200 runs
    "test_cluster.py",      # 93, with test_wheel.py's 42
    "test_notebooks.py",    # 58
    "test_maintenance_runs.py",
    "test_consume.py",
    "test_acceptance.py",
)


def _group(file_name: str) -> str:
    return SHARED_SERVER_FILES.get(file_name, file_name)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Order the run for :func:`pytest_xdist_make_scheduler`: each group's files together,
    the longest groups first. Refuse a file that shares a server without being grouped."""
    by_file: dict[str, list] = {}
    for item in items:
        by_file.setdefault(item.path.name, []).append(item)
    for name, file_items in by_file.items():
        used = {fixture for item in file_items for fixture in item.fixturenames}
        for fixture in sorted(used & set(SHARED_SERVER_FILES.values())):
            if SHARED_SERVER_FILES.get(name) != fixture:
                raise pytest.UsageError(f"{name} uses {fixture}: list it in SHARED_SERVER_FILES (tests/conftest.py)")
    rank: dict[str, int] = {}
    for name in (*LONGEST_FIRST, *by_file):
        rank.setdefault(_group(name), len(rank))
    order = {name: position for position, name in enumerate(by_file)}
    items.sort(key=lambda item: (rank[_group(item.path.name)], order[item.path.name]))


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist's, which the test extra installs
def pytest_xdist_make_scheduler(config, log):
    """``make test`` runs on two pytest-xdist workers (``-n 2 --dist loadfile``): a test
    mostly keeps one core busy (one Spark task at a time on these tables, a child JVM
    starting), so two processes, each with its own Spark session, use both cores. Each
    file goes to one worker whole (its module fixtures run once), the files of a
    :data:`SHARED_SERVER_FILES` group together, in the collection's order
    (``--no-loadscope-reorder``). pytest-xdist's own ``loadgroup`` would take marks, but
    it renames the items' node ids in a way pytest 9 no longer reads."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class FileGroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            file = nodeid.split("::", 1)[0]
            return SHARED_SERVER_FILES.get(file.rsplit("/", 1)[-1], file)

    return FileGroupScheduling(config, log)


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    from framework.session import local_session

    scratch = tmp_path_factory.mktemp("spark")
    conf = dict(TEST_CONF)
    conf["spark.sql.warehouse.dir"] = str(scratch / "spark-warehouse")
    conf["spark.driver.extraJavaOptions"] = f"-Dderby.system.home={scratch}"
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
        getattr(spark._jvm, "org.apache.spark.sql.SparkSession").setActiveSession(spark._jsparkSession)
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
