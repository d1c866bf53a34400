"""The embedded session's Hadoop configuration without YARN's defaults.

Every Hadoop ``Configuration`` of a JVM holds the default resources some class registered:
Hadoop's ``core-default.xml``, and, once MapReduce's ``JobConf`` is loaded (Spark and
Parquet load it), ``mapred-default.xml`` and ``yarn-default.xml``. YARN's are 545 of the
embedded session's 1,078 properties, and a local session never talks to YARN. Spark and
Delta copy the session's configuration for each table access and serialize it into every
write task and Parquet scan (each property with its source, compressed one by one), so the
size is paid at every Spark job and Delta commit: a first maintain of 100 small
partitions took 36.3 s without them against 42.3 s with them, a produce into them 20.7
against 22.0 s (``jobs/benchmark.py --only yarn_defaults``; docs/performance-log.md).

The embedded session's class path therefore holds, before Spark's jars, a small jar with an
empty ``yarn-default.xml``, which Hadoop finds first and loads instead of YARN's. It is built
here (no JDK needed) into topiclake's cache folder. Only a local master gets it, so a YARN
client never sees it; ``TOPICLAKE_YARN_DEFAULTS=keep`` keeps YARN's, and a caller whose own
class path entries hold a ``yarn-default.xml`` gets theirs. A cluster's session
(spark-submit, Databricks) is never touched.
"""

from __future__ import annotations

import hashlib
import os
import zipfile
from pathlib import Path
from typing import Mapping

from framework import jvm_options, user_cache

#: ``keep`` keeps YARN's defaults in the embedded session's Hadoop configuration.
YARN_DEFAULTS_ENV = "TOPICLAKE_YARN_DEFAULTS"
RESOURCE = "yarn-default.xml"
#: What the jar's ``yarn-default.xml`` says: no property.
EMPTY_DEFAULTS = ('<?xml version="1.0"?>\n'
                  "<!-- topiclake's embedded session: YARN's defaults left out (framework/yarn_defaults.py) -->\n"
                  "<configuration/>\n")


def jar_path() -> Path:
    digest = hashlib.sha256(EMPTY_DEFAULTS.encode()).hexdigest()
    return user_cache.keyed("yarn-defaults", [digest], ".jar")


def _holds_empty_defaults(jar: Path) -> bool:
    try:
        with zipfile.ZipFile(jar) as archive:
            return archive.read(RESOURCE).decode("utf-8") == EMPTY_DEFAULTS
    except (OSError, KeyError, UnicodeDecodeError, zipfile.BadZipFile):
        return False


def _build(jar: Path) -> bool:
    """Write the jar whole or not at all (several processes may start at once)."""
    def fill(partial: Path) -> None:
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
            archive.writestr(RESOURCE, EMPTY_DEFAULTS)

    return user_cache.replace_whole(jar, fill)


def class_path_entry(build_missing: bool = True) -> str | None:
    """The jar the embedded session puts on its class path (built here when missing or not
    what it should be, unless ``build_missing`` is False), or None when it keeps YARN's defaults."""
    if os.environ.get(YARN_DEFAULTS_ENV) == "keep":
        return None
    return user_cache.ensured(jar_path(), _holds_empty_defaults, _build, build_missing)


def applies_to(master: str) -> bool:
    """Whether a session of ``master`` leaves YARN's defaults out (a local one only)."""
    return master.startswith("local")


def session_settings(settings: Mapping[str, str], master: str) -> dict[str, str]:
    """What to add to an embedded session's ``settings``, for a local ``master`` only: the jar
    on the driver's class path, which puts it before Spark's own jars, after the caller's
    entries (Hadoop loads the first ``yarn-default.xml`` it finds: one of theirs wins)."""
    if not applies_to(master):
        return {}
    jar = class_path_entry()
    if jar is None:
        return {}
    return jvm_options.with_class_path_entry(settings, jar)
