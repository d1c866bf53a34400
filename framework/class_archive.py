"""HotSpot's class-data sharing for the embedded session's JVM.

A ``topiclake create`` of the shipped specs loads some 17,000 classes, and a short command
is mostly that start. A dynamic class-data-sharing archive (JDK 13+) holds such classes
already parsed and verified; a JVM started with it maps them instead (12,000 of that
command's; README, "Performance"). ``jobs/class_archive.py`` builds it (the set-up runs
it) by running the main job once in a JVM that writes the classes it loaded at its exit;
:func:`java_options` gives later sessions the option that maps it.

The archive is only an optimisation: the JVM checks that its own build and class path are
the ones the archive was made with and, when they are not, starts without it (HotSpot's
default ``-Xshare:auto``). One archive per pyspark installation, delta-spark version and
Java runtime (:func:`archive_path`).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from framework import user_cache

#: Set to a path to use that archive, or to ``off`` for none.
ARCHIVE_ENV = "TOPICLAKE_CLASS_ARCHIVE"

#: JVM options with which the caller already chose what the JVM shares (or dumps).
_SHARING_OPTIONS = ("-XX:SharedArchiveFile", "-XX:ArchiveClassesAtExit", "-Xshare")


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    return os.path.realpath(java) if java else ""


def archive_path() -> Path:
    """Where the archive of this pyspark installation, delta-spark and Java runtime lives."""
    override = os.environ.get(ARCHIVE_ENV)
    if override and override != "off":
        return Path(override)
    from importlib.metadata import version

    import pyspark

    home = os.path.dirname(os.path.realpath(pyspark.__file__))
    # the JVM refuses an archive whose class path jars changed (a reinstall at the same path): a new key
    jars = os.stat(os.path.join(home, "jars")).st_mtime_ns
    key = [home, jars, pyspark.__version__, version("delta-spark"), _java()]
    return user_cache.keyed("spark-classes", key, ".jsa")


def java_options(driver_options: str) -> str:
    """``driver_options`` with the option that maps the archive, when there is one and neither
    they nor the JVM options in the environment already choose what to share."""
    chosen = " ".join((driver_options, os.environ.get("SPARK_SUBMIT_OPTS", ""), os.environ.get("JDK_JAVA_OPTIONS", "")))
    if os.environ.get(ARCHIVE_ENV) == "off" or any(name in chosen for name in _SHARING_OPTIONS):
        return driver_options
    path = archive_path()
    if not path.is_file():
        return driver_options
    return f"{driver_options} -XX:SharedArchiveFile={path}".strip()


def dump_option(path: Path) -> str:
    """The JVM option that writes the classes a JVM loaded to ``path`` when it exits."""
    return f"-XX:ArchiveClassesAtExit={path}"
