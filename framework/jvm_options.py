"""The JVM options the embedded session's JVM starts with, wherever they were chosen: the
session's own ``spark.driver.extraJavaOptions`` and the environment. Options topiclake
adds (the class archive, the time zone, the collector) give way to the same option chosen
elsewhere.
Also the driver's class path, where topiclake's own jars go after the caller's entries."""

from __future__ import annotations

import os
import re
from typing import Mapping

__all__ = ["DRIVER_CLASS_PATH", "ENVIRONMENT", "THROUGHPUT_COLLECTOR", "chosen", "with_class_path_entry",
           "with_collector"]

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


#: The embedded session's garbage collector. On two cores HotSpot picks G1, whose
#: concurrent refinement threads and write barriers compete with the engine's own work for
#: the cores; its short pauses buy nothing in a batch job. With the throughput collector a
#: first maintain of 100 small partitions in a new process took 0.82 x the time (49.1 s
#: against 59.7 s, A B B A; docs/performance-log.md, stop 63), the serial collector 0.92 x;
#: the test suite's sessions ran 48 property-test scenarios in 0.90 x the time (2026-11-25).
THROUGHPUT_COLLECTOR = "-XX:+UseParallelGC"
#: Any ``-XX:+UseXGC`` or ``-XX:-UseXGC``: the caller chose the collector.
_COLLECTOR_CHOICE = re.compile(r"-XX:[+-]Use\w*GC\b")


def with_collector(driver_options: str) -> str:
    """``driver_options`` with :data:`THROUGHPUT_COLLECTOR`, unless they or the JVM options
    in the environment already choose a collector."""
    if _COLLECTOR_CHOICE.search(chosen(driver_options)):
        return driver_options
    return f"{driver_options} {THROUGHPUT_COLLECTOR}".strip()
