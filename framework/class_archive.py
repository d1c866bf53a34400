"""HotSpot's class-data sharing for the embedded session's JVM.

A ``topiclake create`` of the shipped specs loads some 17,000 classes, and a short command
is mostly that start. A dynamic class-data-sharing archive (JDK 13+) holds such classes
already parsed and verified; a JVM started with it maps them instead (12,000 of that
command's; docs/performance-log.md). ``jobs/class_archive.py`` builds it (the set-up runs
it) by running the main job once in a JVM that writes the classes it loaded at its exit;
:func:`java_options` gives later sessions the option that maps it.

The archive is only an optimisation: the JVM checks that its own build and class path are
the ones the archive was made with and, when they are not, starts without it (HotSpot's
default ``-Xshare:auto``). One archive per pyspark installation, delta-spark version,
Java runtime and Spark configuration folder (:func:`archive_path`): Spark's launcher puts
``SPARK_CONF_DIR`` first on the class path, so an archive built without it is refused by a
session started with it, and the reverse. An archive is about 200 MB, so a build removes the ones
no installation can map again (:func:`stale_archives`): a reinstall or an upgrade at the
same place, or a virtual environment since deleted, would otherwise leave one each.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from framework import jdk, jvm_options, local_file_system, user_cache, yarn_defaults

#: Set to a path to use that archive, or to ``off`` for none.
ARCHIVE_ENV = "TOPICLAKE_CLASS_ARCHIVE"
#: Spark's configuration folder, which its launcher puts on the class path before the jars.
SPARK_CONF_DIR_ENV = "SPARK_CONF_DIR"

#: JVM options with which the caller already chose what the JVM shares (or dumps).
_SHARING_OPTIONS = ("-XX:SharedArchiveFile", "-XX:ArchiveClassesAtExit", "-Xshare")


def _java_runtime() -> str:
    """The Java runtime the session starts (its real path: an archive is one runtime's)."""
    java = jdk.tool("java")
    return os.path.realpath(java) if java else ""


#: The archives' names in the cache folder: ``spark-classes-<hash of the key>.jsa``.
ARCHIVE_NAME = "spark-classes"


def _pyspark_home() -> str:
    import pyspark

    return os.path.dirname(os.path.realpath(pyspark.__file__))


def _jars_stamp(home: str) -> int | None:
    """When the installation's jars folder last changed (None: the installation is gone)."""
    try:
        return os.stat(os.path.join(home, "jars")).st_mtime_ns
    except OSError:
        return None


def _key(master: str) -> list:
    from importlib.metadata import version

    import pyspark

    home = _pyspark_home()
    # the JVM refuses an archive whose class path jars changed (a reinstall at the same path),
    # or whose class path is not the start of its own (the local file system's jar and the one
    # without YARN's defaults come first; a session builds them before it asks for the archive,
    # and so does the archive's build): a new key
    # (the jar without YARN's defaults only for a local master: others do not get it);
    # Spark's launcher puts the configuration folder next, so a SPARK_CONF_DIR has its own
    # archive (a key as before when it is not set, so existing archives stay valid)
    key = [home, _jars_stamp(home), pyspark.__version__, version("delta-spark"), _java_runtime(),
           local_file_system.class_path_entry(build_missing=False),
           yarn_defaults.class_path_entry(build_missing=False) if yarn_defaults.applies_to(master) else None]
    conf_dir = os.environ.get(SPARK_CONF_DIR_ENV)
    return [*key, os.path.realpath(conf_dir)] if conf_dir else key


def archive_path(master: str) -> Path:
    """Where the archive of this pyspark installation, delta-spark and Java runtime lives,
    for a session of ``master`` (its class path depends on it)."""
    override = os.environ.get(ARCHIVE_ENV)
    if override and override != "off":
        return Path(override)
    return user_cache.keyed(ARCHIVE_NAME, _key(master), ".jsa")


def made_for(archive: Path) -> Path:
    """The note beside an archive that says which installation it was built for."""
    return archive.with_suffix(".json")


def record_installation(archive: Path, master: str) -> None:
    """Write :func:`made_for` of a newly built archive: this installation's key."""
    user_cache.write_whole(made_for(archive), json.dumps({"key": _key(master)}))


def stale_archives(current: Path) -> list[Path]:
    """The other archives in ``current``'s folder that no installation can map again:

    * built for an installation that is gone, or whose jars changed since (a reinstall);
    * built for this installation under another key (this build replaces it: an upgrade
      of pyspark or delta-spark in place, or another Java runtime or ``SPARK_CONF_DIR``
      for it, which would build its own again);
    * without a note of what they were built for (an archive of a topiclake before the
      notes: unknown, so not worth 200 MB; an installation that still wanted it only
      starts more slowly, and its set-up builds it again).
    """
    home = _pyspark_home()
    stale = []
    for archive in sorted(current.parent.glob(f"{ARCHIVE_NAME}-*.jsa")):
        if archive == current:
            continue
        try:
            key = json.loads(made_for(archive).read_text(encoding="utf-8"))["key"]
            built_home, built_jars = key[0], key[1]
        except (OSError, ValueError, KeyError, IndexError, TypeError):
            stale.append(archive)
            continue
        if built_home == home or _jars_stamp(built_home) != built_jars:
            stale.append(archive)
    return stale


def remove_stale(current: Path) -> int:
    """Remove :func:`stale_archives` (and their notes); the bytes freed. A JVM that maps
    one keeps it until it exits (the file system frees it then). Only in topiclake's cache
    folder: an archive put elsewhere (``TOPICLAKE_CLASS_ARCHIVE``) is the user's to keep."""
    if current.parent != user_cache.folder():
        return 0
    freed = 0
    for archive in stale_archives(current):
        try:
            size = archive.stat().st_size
            archive.unlink()
            freed += size
        except OSError:
            continue
        made_for(archive).unlink(missing_ok=True)
    return freed


def java_options(driver_options: str, master: str) -> str:
    """``driver_options`` of a session of ``master`` with the option that maps the archive,
    when there is one and neither they nor the JVM options in the environment already
    choose what to share."""
    chosen = jvm_options.chosen(driver_options)
    if os.environ.get(ARCHIVE_ENV) == "off" or any(name in chosen for name in _SHARING_OPTIONS):
        return driver_options
    path = archive_path(master)
    if not path.is_file():
        return driver_options
    return f"{driver_options} -XX:SharedArchiveFile={path}".strip()


def dump_option(path: Path) -> str:
    """The JVM option that writes the classes a JVM loaded to ``path`` when it exits."""
    return f"-XX:ArchiveClassesAtExit={path}"
