"""The JVM options the embedded session's JVM starts with, wherever they were chosen: the
session's own ``spark.driver.extraJavaOptions`` and the environment. Options topiclake
adds (the class archive, the time zone) give way to the same option chosen elsewhere.
Also the driver's class path, where topiclake's own jars go after the caller's entries."""

from __future__ import annotations

import os
from typing import Mapping

__all__ = ["DRIVER_CLASS_PATH", "ENVIRONMENT", "chosen", "with_class_path_entry"]

#: What the embedded JVM also gets from the environment: Spark's launch script passes
#: SPARK_SUBMIT_OPTS, the java launcher reads JDK_JAVA_OPTIONS, the JVM itself
#: JAVA_TOOL_OPTIONS.
ENVIRONMENT = ("SPARK_SUBMIT_OPTS", "JDK_JAVA_OPTIONS", "JAVA_TOOL_OPTIONS")


def chosen(driver_options: str) -> str:
    """``driver_options`` and the options in :data:`ENVIRONMENT`, as one string to look for
    an option in."""
    return " ".join((driver_options, *(os.environ.get(name, "") for name in ENVIRONMENT)))


#: The driver JVM's own class path: its entries come before Spark's jars, and the JVM has
#: them from its start (``spark.jars`` are added later, too late for ``file:`` or Hadoop's
#: defaults files).
DRIVER_CLASS_PATH = "spark.driver.extraClassPath"


def with_class_path_entry(settings: Mapping[str, str], entry: str) -> dict[str, str]:
    """The driver class path of ``settings`` with ``entry`` after the caller's own entries
    (theirs are found first)."""
    class_path = settings.get(DRIVER_CLASS_PATH)
    return {DRIVER_CLASS_PATH: f"{class_path}{os.pathsep}{entry}" if class_path else entry}
