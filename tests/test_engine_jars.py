"""The embedded session's jars: resolved by Ivy once, written down, then handed to Spark by path."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from framework import engine_jars, user_cache
from framework.session import SPARK_KAFKA_PACKAGE
from tests.support.acceptance_files import REPO


class Conf(dict):
    """What :func:`engine_jars.remember` reads of a SparkConf."""

    def get(self, key, default=None):
        return super().get(key, default)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv(user_cache.CACHE_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache"


def _jars(tmp_path, *names):
    for name in names:
        (tmp_path / name).write_bytes(b"PK")
    return ",".join(f"file://{tmp_path / name}" for name in names)


def test_what_a_resolving_start_wrote_down_is_handed_to_the_next(cache, tmp_path):
    jars = _jars(tmp_path, "delta.jar", "storage.jar")
    assert engine_jars.resolved_jars([], {}) is None
    engine_jars.remember([], Conf({"spark.jars.packages": "io.delta:delta-spark_4.1_2.13:4.4.0", "spark.jars": jars}))
    assert engine_jars.resolved_jars([], {}) == jars
    # another set of packages is another list
    assert engine_jars.resolved_jars([SPARK_KAFKA_PACKAGE], {}) is None


def test_a_list_with_a_jar_gone_is_not_used(cache, tmp_path):
    jars = _jars(tmp_path, "delta.jar", "storage.jar")
    engine_jars.remember([], Conf({"spark.jars.packages": "p", "spark.jars": jars}))
    (tmp_path / "storage.jar").unlink()
    assert engine_jars.resolved_jars([], {}) is None


@pytest.mark.parametrize("setting", sorted(engine_jars.RESOLUTION_SETTINGS))
def test_settings_that_steer_the_resolution_turn_the_list_off(cache, tmp_path, setting):
    jars = _jars(tmp_path, "delta.jar")
    engine_jars.remember([], Conf({"spark.jars.packages": "p", "spark.jars": jars}))
    assert engine_jars.resolved_jars([], {setting: "x"}) is None


def test_a_start_that_resolved_nothing_writes_nothing(cache, tmp_path):
    engine_jars.remember([], Conf({"spark.jars": _jars(tmp_path, "delta.jar")}))
    assert not cache.exists()


def test_an_unwritable_cache_folder_is_no_error(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv(user_cache.CACHE_ENV, str(blocker / "cache"))
    engine_jars.remember([], Conf({"spark.jars.packages": "p", "spark.jars": _jars(tmp_path, "delta.jar")}))
    assert engine_jars.resolved_jars([], {}) is None


def test_a_second_start_waits_for_the_first_resolution_and_takes_its_list(cache, tmp_path):
    # Two processes resolving into one Ivy cache at once spoil each other's downloads. The
    # first start holds the lock while it resolves; the second waits, then gets its list.
    # (flock conflicts between two open files of one process too, so threads stand in for
    # processes here.)
    import threading

    jars = _jars(tmp_path, "delta.jar")
    second: list = []
    with engine_jars.resolution([], {}) as first:
        assert first is None  # nothing written down: Ivy resolves, under the lock
        def start():
            with engine_jars.resolution([], {}) as jars:
                second.append(jars)

        waiter = threading.Thread(target=start)
        waiter.start()
        waiter.join(0.5)
        assert waiter.is_alive() and not second  # still waiting for the lock
        engine_jars.remember([], Conf({"spark.jars.packages": "io.delta:delta-spark_4.1_2.13:4.4.0", "spark.jars": jars}))
    waiter.join(10)
    assert second == [jars]


def test_steering_settings_and_a_written_list_take_no_lock(cache, tmp_path):
    import fcntl

    engine_jars.remember([], Conf({"spark.jars.packages": "p", "spark.jars": _jars(tmp_path, "delta.jar")}))
    cache.mkdir(exist_ok=True)
    with open(cache / "spark-jars.lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with engine_jars.resolution([], {}) as jars:  # would block if it took the lock
            assert jars
        with engine_jars.resolution([SPARK_KAFKA_PACKAGE], {"spark.jars.ivy": "/x"}) as jars:
            assert jars is None


CHILD = """
import json, sys
from framework.session import local_session
spark = local_session("jars-test")
spark.range(3).write.format("delta").save(sys.argv[1])
conf = spark.sparkContext.getConf()
print(json.dumps({"packages": conf.get("spark.jars.packages"), "jars": conf.get("spark.jars"),
                  "jars_on_sys_path": [p for p in sys.path if p.endswith(".jar")],
                  "rows": spark.read.format("delta").load(sys.argv[1]).count()}))
"""


@pytest.mark.slow
def test_a_start_with_the_list_resolves_nothing_and_reads_and_writes_delta(spark, tmp_path, monkeypatch):
    """The suite's own session resolved (or was handed the list); a child process handed the
    same jars by path starts without Ivy, copies no jar onto its ``sys.path``, and writes and
    reads a Delta table."""
    jars = spark.sparkContext.getConf().get("spark.jars")
    assert "delta-spark" in jars
    cache = tmp_path / "cache"
    env = {**os.environ, user_cache.CACHE_ENV: str(cache), "PYTHONPATH": str(REPO)}
    with monkeypatch.context() as patch:
        patch.setenv(user_cache.CACHE_ENV, str(cache))
        engine_jars.remember([], Conf({"spark.jars.packages": "written by this test", "spark.jars": jars}))
        assert engine_jars.resolved_jars([], {}) == jars
    done = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path / "table")], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen == {"packages": None, "jars": jars, "jars_on_sys_path": [], "rows": 3}
