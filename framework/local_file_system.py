"""Hadoop's local file system without a process forked per file, for the embedded session.

Without Hadoop's native library (pyspark ships none), Hadoop's local file system forks a
process for two things every Delta commit and every written file ask for: ``chmod``, to set
the permissions of each file and folder it creates, and ``readlink``, for each link status
it is asked (Delta's log store renames a commit through Hadoop's FileContext, which asks
for the source's and the target's: four per commit file). A fork from the engine's JVM
costs about 4.5 ms on these machines; a partition table's create made 13 of them, and a
small partition's create, produce and first maintenance some 40 (docs/performance-log.md).

The classes in ``framework/java`` set permissions through java.nio and answer the link
question with java.nio; everything else is Hadoop's own code, and their answers are
Hadoop's (``tests/test_local_file_system.py`` pins them to Hadoop's side by side). One
answer differs on purpose: FileContext's rename of a file (where Delta's log store puts a
commit into place, after checking its version is free) is a hard link under the new name,
refused when the name is taken, where Hadoop's replaced a commit another process made in
between (``framework.log.own_commits`` makes its commits with such a link).
:func:`session_settings` puts them on the embedded session's class path and names them for
``file:`` (``fs.file.impl``, and ``fs.AbstractFileSystem.file.impl`` for FileContext) in place
of Hadoop's raw local classes (the session's default: no checksum side files). They
are compiled with ``javac`` against the installation's Hadoop into topiclake's cache folder
the first time a session needs them (about two seconds, once). Without a JDK, with
``TOPICLAKE_LOCAL_FS=hadoop``, or when the caller's settings name a ``file:`` file system of
their own, the session keeps Hadoop's. A cluster's session (spark-submit, Databricks) is
never touched: this is the embedded session's local disk only.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
import zipfile
from pathlib import Path
from typing import Mapping

from framework import jdk, jvm_options, user_cache

#: ``hadoop`` keeps Hadoop's own local file system.
LOCAL_FS_ENV = "TOPICLAKE_LOCAL_FS"
#: The Java sources, in the package (the wheel carries them).
SOURCES = Path(__file__).resolve().parent / "java"
#: What the session's Hadoop configuration names for ``file:``.
HADOOP_SETTINGS = {
    "spark.hadoop.fs.file.impl": "topiclake.hadoop.NioRawLocalFileSystem",
    "spark.hadoop.fs.AbstractFileSystem.file.impl": "topiclake.hadoop.NioRawLocalFs",
}


def _sources() -> list[Path]:
    return sorted(SOURCES.rglob("*.java"))


def _hadoop_api_jar() -> Path | None:
    """The Hadoop client API jar of the pyspark installation, which the classes compile against."""
    try:
        import pyspark
    except ImportError:  # topiclake's core alone (a git hook's install): no session to give it to
        return None

    found = sorted((Path(pyspark.__file__).resolve().parent / "jars").glob("hadoop-client-api-*.jar"))
    return found[-1] if found else None


def jar_path() -> Path | None:
    """Where the compiled classes for this installation's Hadoop live (built or not), or None
    when the installation has no Hadoop client jar to compile against."""
    hadoop = _hadoop_api_jar()
    if hadoop is None:
        return None
    digest = hashlib.sha256(b"".join(path.read_bytes() for path in _sources())).hexdigest()
    return user_cache.keyed("local-fs", [hadoop.name, digest], ".jar")


def build(jar: Path) -> bool:
    """Compile the classes into ``jar`` (whole or not at all, as several processes may start at
    once); False when they cannot be (no JDK, no Hadoop jar, a folder that cannot be written)."""
    javac, hadoop = jdk.tool("javac"), _hadoop_api_jar()
    if javac is None or hadoop is None:
        return False
    try:
        with tempfile.TemporaryDirectory(prefix="topiclake-local-fs-") as scratch:
            classes = Path(scratch) / "classes"
            done = subprocess.run([javac, "--release", "17", "-nowarn", "-cp", str(hadoop), "-d", str(classes),
                                   *map(str, _sources())], capture_output=True, text=True, timeout=300)
            if done.returncode != 0:
                return False

            def fill(partial: Path) -> None:
                with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
                    for path in sorted(classes.rglob("*.class")):
                        archive.write(path, path.relative_to(classes).as_posix())

            return user_cache.replace_whole(jar, fill)
    except (OSError, subprocess.SubprocessError):
        return False


def _holds_every_class(jar: Path) -> bool:
    """Whether ``jar`` is a readable jar with every class compiled from the sources: a session
    named classes that are not on its class path would not start at all."""
    wanted = {path.relative_to(SOURCES).with_suffix(".class").as_posix() for path in _sources()}
    try:
        with zipfile.ZipFile(jar) as archive:
            return wanted <= set(archive.namelist()) and archive.testzip() is None
    except (OSError, zipfile.BadZipFile):
        return False


def class_path_entry(build_missing: bool = True) -> str | None:
    """The jar the embedded session puts on its class path (built here when missing or
    unreadable, unless ``build_missing`` is False), or None when it keeps Hadoop's own local
    file system."""
    if os.environ.get(LOCAL_FS_ENV) == "hadoop":
        return None
    jar = jar_path()
    if jar is None:
        return None
    return user_cache.ensured(jar, _holds_every_class, build, build_missing)


def session_settings(settings: Mapping[str, str], chosen: Mapping[str, str]) -> dict[str, str]:
    """What to add to an embedded session's ``settings`` for these classes: the class path
    entry (spark-submit looks at ``file:`` before it loads ``spark.jars``, so the JVM must have
    them from its start) and the file system names; nothing when the caller's own settings
    (``chosen``) name a ``file:`` file system."""
    if any(key in chosen for key in HADOOP_SETTINGS):
        return {}
    jar = class_path_entry()
    if jar is None:
        return {}
    return {**HADOOP_SETTINGS, **jvm_options.with_class_path_entry(settings, jar)}
