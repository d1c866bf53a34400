"""The embedded session's jars (Delta Lake's, and Spark's Kafka source for ``ingest``): resolved
through Ivy once, then handed to Spark by path.

Spark resolves ``spark.jars.packages`` through Ivy at every start, even when every jar is in
Ivy's cache (1.5 to 3 s here). For a Python application spark-submit also lists the
resolved jars as Python files, so every start copies them all (99 MB for Delta's) into the
session's scratch folder and puts each on ``sys.path``. So the first start resolves as Spark
always does, the jars it resolved are written down, and a later start with the same
pyspark, delta-spark and packages gives Spark those paths (``spark.jars``) instead. A list
with a jar missing is not used (Ivy resolves again and the list is written anew), and
settings that steer the resolution themselves (:data:`RESOLUTION_SETTINGS`) turn the list off.
A start that resolves holds a lock in the cache folder while it does: two processes that
resolve into one Ivy cache at once spoil each other's downloads (a fresh machine's set-up
beside a test run, 2026-11-26: "Downloaded file size (0) doesn't match expected Content
Length"), so the second waits and then starts from the first one's list.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from typing import Iterable, Iterator, Mapping
from urllib.parse import urlparse

from framework import user_cache

#: A session given any of these resolves its jars as Spark does, every time.
RESOLUTION_SETTINGS = frozenset({
    "spark.jars", "spark.jars.packages", "spark.jars.ivy", "spark.jars.ivySettings",
    "spark.jars.repositories", "spark.jars.excludes",
})


def _list_path(extra_packages: Iterable[str]) -> Path:
    """One list per pyspark version, delta-spark version and set of extra packages."""
    from importlib.metadata import version

    import pyspark

    return user_cache.keyed("spark-jars", [pyspark.__version__, version("delta-spark"), sorted(extra_packages)], ".txt")


def _local_file(jar: str) -> str:
    return urlparse(jar).path if jar.startswith("file:") else jar


def resolved_jars(extra_packages: Iterable[str], settings: Mapping[str, str]) -> str | None:
    """The ``spark.jars`` value an earlier start resolved for these packages, or None
    (nothing written down, a jar gone, or ``settings`` steer the resolution)."""
    if RESOLUTION_SETTINGS & set(settings):
        return None
    try:
        jars = _list_path(extra_packages).read_text().strip()
    except (OSError, ValueError):
        return None
    if not jars or not all(os.path.isfile(_local_file(jar)) for jar in jars.split(",")):
        return None
    return jars


def remember(extra_packages: Iterable[str], spark_conf) -> None:
    """Write down, in topiclake's cache folder, the jars Ivy resolved at this start
    (``spark_conf``: the started context's SparkConf). Nothing is written when no resolution
    happened, or where the folder cannot be written: the next start then resolves again."""
    if not spark_conf.get("spark.jars.packages", ""):
        return
    jars = spark_conf.get("spark.jars", "")
    if not jars:
        return
    user_cache.write_whole(_list_path(extra_packages), jars)  # several processes may start at once


@contextlib.contextmanager
def resolution(extra_packages: Iterable[str], settings: Mapping[str, str]) -> Iterator[str | None]:
    """:func:`resolved_jars`, and when there are none (Ivy is to resolve them), an exclusive
    lock on the cache folder held until the block ends; the list is looked up again once the
    lock is held, since the process that held it before may have just written it. Where the
    lock cannot be taken (a folder that cannot be written), Ivy resolves without it."""
    extra_packages = list(extra_packages)
    jars = resolved_jars(extra_packages, settings)
    if jars is not None or RESOLUTION_SETTINGS & set(settings):
        yield jars
        return
    try:
        user_cache.folder().mkdir(parents=True, exist_ok=True)
        lock = open(user_cache.folder() / "spark-jars.lock", "a")
    except OSError:
        yield None
        return
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, by a killed process too
        yield resolved_jars(extra_packages, settings)
