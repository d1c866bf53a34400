"""The JVM options the embedded session's JVM starts with, wherever they were chosen: the
session's own ``spark.driver.extraJavaOptions`` and the environment. Options topiclake
adds (the class archive, the time zone) give way to the same option chosen elsewhere."""

from __future__ import annotations

import os

__all__ = ["ENVIRONMENT", "chosen"]

#: What the embedded JVM also gets from the environment: Spark's launch script passes
#: SPARK_SUBMIT_OPTS, the java launcher reads JDK_JAVA_OPTIONS, the JVM itself
#: JAVA_TOOL_OPTIONS.
ENVIRONMENT = ("SPARK_SUBMIT_OPTS", "JDK_JAVA_OPTIONS", "JAVA_TOOL_OPTIONS")


def chosen(driver_options: str) -> str:
    """``driver_options`` and the options in :data:`ENVIRONMENT`, as one string to look for
    an option in."""
    return " ".join((driver_options, *(os.environ.get(name, "") for name in ENVIRONMENT)))
