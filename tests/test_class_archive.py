"""HotSpot's class archive for the embedded session's JVM: built once, mapped by later starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from framework import class_archive, jvm_options, user_cache, yarn_defaults
from tests.support.acceptance_files import REPO

LOCAL = "local[*]"


@pytest.fixture
def archive(tmp_path, monkeypatch):
    path = tmp_path / "classes.jsa"
    monkeypatch.setenv(class_archive.ARCHIVE_ENV, str(path))
    for name in jvm_options.ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    return path


def test_a_session_maps_the_archive_once_it_exists(archive):
    assert class_archive.java_options("-Dx=1", LOCAL) == "-Dx=1"
    archive.write_bytes(b"")
    assert class_archive.java_options("-Dx=1", LOCAL) == f"-Dx=1 -XX:SharedArchiveFile={archive}"
    assert class_archive.java_options("", LOCAL) == f"-XX:SharedArchiveFile={archive}"


@pytest.mark.parametrize("chosen", ["-Xshare:off", "-XX:SharedArchiveFile=/elsewhere.jsa",
                                    "-XX:ArchiveClassesAtExit=/new.jsa"])
def test_options_that_choose_what_to_share_are_left_alone(archive, monkeypatch, chosen):
    archive.write_bytes(b"")
    assert class_archive.java_options(f"-Dx=1 {chosen}", LOCAL) == f"-Dx=1 {chosen}"
    for name in jvm_options.ENVIRONMENT:
        monkeypatch.setenv(name, chosen)
        assert class_archive.java_options("-Dx=1", LOCAL) == "-Dx=1", name
        monkeypatch.delenv(name)


def test_a_cluster_masters_archive_is_keyed_without_the_local_sessions_yarn_jar(monkeypatch, tmp_path):
    """Only a local session puts the jar without YARN's defaults first on its class path, and
    the JVM maps an archive only for the class path it was built with: a session of another
    master must not be handed the local session's archive."""
    monkeypatch.setenv(user_cache.CACHE_ENV, str(tmp_path))
    monkeypatch.delenv(class_archive.ARCHIVE_ENV, raising=False)
    monkeypatch.delenv(yarn_defaults.YARN_DEFAULTS_ENV, raising=False)
    for name in jvm_options.ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    yarn_jar = yarn_defaults.class_path_entry()
    local, cluster = class_archive.archive_path(LOCAL), class_archive.archive_path("spark://127.0.0.1:7077")
    assert local != cluster
    local.write_bytes(b"")
    assert class_archive.java_options("", "spark://127.0.0.1:7077") == ""
    assert class_archive.java_options("", "local[2]") == f"-XX:SharedArchiveFile={local}"
    class_archive.record_installation(cluster, "spark://127.0.0.1:7077")
    assert yarn_jar not in json.loads(class_archive.made_for(cluster).read_text())["key"]
    class_archive.record_installation(local, LOCAL)
    assert yarn_jar in json.loads(class_archive.made_for(local).read_text())["key"]


def test_a_spark_conf_dir_has_its_own_archive(monkeypatch, tmp_path):
    """Spark's launcher puts SPARK_CONF_DIR on the class path before the jars, and the JVM
    refuses an archive built for another class path ("The top archive failed to load"; a
    command then starts about 3 s slower, stop 83): a session started with a configuration
    folder must not be handed the archive built without one, nor one built for another folder."""
    monkeypatch.setenv(user_cache.CACHE_ENV, str(tmp_path))
    monkeypatch.delenv(class_archive.ARCHIVE_ENV, raising=False)
    monkeypatch.delenv(class_archive.SPARK_CONF_DIR_ENV, raising=False)
    for name in jvm_options.ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    without = class_archive.archive_path(LOCAL)
    without.write_bytes(b"")
    monkeypatch.setenv(class_archive.SPARK_CONF_DIR_ENV, str(tmp_path / "conf"))
    first = class_archive.archive_path(LOCAL)
    assert first != without
    assert class_archive.java_options("", LOCAL) == ""
    first.write_bytes(b"")
    assert class_archive.java_options("", LOCAL) == f"-XX:SharedArchiveFile={first}"
    monkeypatch.setenv(class_archive.SPARK_CONF_DIR_ENV, str(tmp_path / "other"))
    assert class_archive.archive_path(LOCAL) not in (first, without)
    monkeypatch.delenv(class_archive.SPARK_CONF_DIR_ENV)
    assert class_archive.java_options("", LOCAL) == f"-XX:SharedArchiveFile={without}"


def test_off_turns_the_archive_off(monkeypatch, tmp_path):
    monkeypatch.setenv(class_archive.ARCHIVE_ENV, "off")
    monkeypatch.setenv(user_cache.CACHE_ENV, str(tmp_path))
    class_archive.archive_path(LOCAL).write_bytes(b"")
    assert class_archive.java_options("-Dx=1", LOCAL) == "-Dx=1"


def test_a_build_removes_the_archives_no_installation_can_map_again(monkeypatch, tmp_path):
    cache = tmp_path / "cache"
    monkeypatch.setenv(user_cache.CACHE_ENV, str(cache))
    monkeypatch.delenv(class_archive.ARCHIVE_ENV, raising=False)
    current = class_archive.archive_path(LOCAL)
    assert current.parent == cache
    cache.mkdir()
    current.write_bytes(b"x" * 10)
    class_archive.record_installation(current, LOCAL)
    ours = json.loads(class_archive.made_for(current).read_text())["key"]
    other = tmp_path / "other-venv" / "pyspark"
    (other / "jars").mkdir(parents=True)
    stamp = os.stat(other / "jars").st_mtime_ns

    def archive(name: str, key=None, note: str | None = None, size: int = 100):
        path = cache / f"spark-classes-{name}.jsa"
        path.write_bytes(b"x" * size)
        if key is not None or note is not None:
            class_archive.made_for(path).write_text(note if note is not None else json.dumps({"key": key}))
        return path

    kept = archive("another-installation", [str(other), stamp, "4.1.1", "4.1.0", "/usr/bin/java"])
    removed = [
        archive("this-installation-upgraded", [ours[0], ours[1], "4.0.0", "4.0.0", ours[4]]),
        archive("a-deleted-venv", [str(tmp_path / "gone" / "pyspark"), stamp, "4.1.1", "4.1.0", "/usr/bin/java"]),
        archive("reinstalled-since", [str(other), stamp - 1, "4.1.1", "4.1.0", "/usr/bin/java"]),
        archive("before-the-notes"),
        archive("an-unreadable-note", note="{not json"),
    ]
    unrelated = cache / "gx-expectation-types-1.24.1.json"
    unrelated.write_text("{}")
    assert class_archive.stale_archives(current) == sorted(removed)
    assert class_archive.remove_stale(current) == 500
    left = sorted(path.name for path in cache.iterdir())
    assert left == sorted([current.name, class_archive.made_for(current).name, kept.name,
                           class_archive.made_for(kept).name, unrelated.name])
    # an archive the user put elsewhere: its folder is theirs
    elsewhere = tmp_path / "mine" / "classes.jsa"
    elsewhere.parent.mkdir()
    elsewhere.write_bytes(b"x")
    (elsewhere.parent / "spark-classes-old.jsa").write_bytes(b"x")
    assert class_archive.remove_stale(elsewhere) == 0
    assert (elsewhere.parent / "spark-classes-old.jsa").exists()


CHILD = """
import json, sys
from framework.session import local_session
spark = local_session("class-archive-test")
spark.range(3).write.format("delta").save(sys.argv[1])
print(json.dumps({"rows": spark.read.format("delta").load(sys.argv[1]).count(),
                  "options": spark.sparkContext.getConf().get("spark.driver.extraJavaOptions")}))
"""


@pytest.mark.slow
def test_a_started_session_loads_most_of_its_classes_from_the_archive(tmp_path):
    """The set-up's archive (built here when it is missing) maps into a new session: its JVM
    loads Spark's and Delta's classes from it ("shared objects file (top)", the dynamic
    layer), and the session writes and reads a Delta table."""
    env = {key: value for key, value in os.environ.items() if key != class_archive.ARCHIVE_ENV}
    built = subprocess.run([sys.executable, str(REPO / "jobs" / "class_archive.py"), "--if-missing"], env=env,
                           capture_output=True, text=True, timeout=900)
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-3000:]
    # the note of what it was built for, which a later build elsewhere reads before removing it
    note = json.loads(class_archive.made_for(class_archive.archive_path(LOCAL)).read_text())
    assert note["key"][0] == os.path.dirname(os.path.realpath(__import__("pyspark").__file__))
    loads = tmp_path / "class-load.log"
    env["SPARK_SUBMIT_OPTS"] = f"{env.get('SPARK_SUBMIT_OPTS', '')} -Xlog:class+load=info:file={loads}"
    env["PYTHONPATH"] = str(REPO)
    done = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path / "table")], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["rows"] == 3
    assert f"-XX:SharedArchiveFile={class_archive.archive_path(LOCAL)}" in seen["options"]
    lines = loads.read_text().splitlines()
    from_archive = sum("shared objects file (top)" in line for line in lines)
    assert from_archive > len(lines) // 2, f"{from_archive} of {len(lines)} classes from the archive"
