"""Spark sessions: the embedded local one, or the one a cluster already runs.

On Databricks, or under ``spark-submit``, the active session is used exactly as it is:
its Delta configuration, its storage credentials, its resources. Only when no Spark
is running does topiclake start its own ``local[*]`` session with Delta, whose jars
Spark resolves from Maven Central through Ivy on first use and caches under
``~/.ivy2*``. The session is then passed into every framework object; nothing in the
package looks one up behind the caller's back.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from typing import Iterator, Mapping

from framework import class_archive, engine_jars, jvm_options, local_file_system, yarn_defaults
from framework.errors import EngineNotInstalledError

#: Settings for the embedded session, sized for a small (2-core) machine.
LOCAL_CONF: Mapping[str, str] = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "2",
    # Delta rebuilds table state with 50 tasks by default; tiny on one machine.
    "spark.databricks.delta.snapshotPartitions": "2",
    # VACUUM lists files with this many tasks (default 10000: 30 s for an empty table).
    "spark.sql.sources.parallelPartitionDiscovery.parallelism": "4",
    "spark.databricks.delta.stateReconstructionValidation.enabled": "false",
    # Delta keeps every table it touched in a cache of up to 10,000 (its default), each with
    # its snapshot: 0.1 MB for a small partition, about 3 MB once read through Delta, so a
    # long-lived process could fill a 2 GB driver. maintain and validate forget each
    # partition's table when done with it (delta_transactions.forget_table); a hundred
    # bounds whatever else is left, far more than a run's tables in use at once.
    "spark.databricks.delta.delta.log.cacheSize": "100",
    # Every query, Delta's internal ones too, renders its plan for the SQL UI's start event,
    # even with the UI off: the default "formatted" rendering was 3.5 % of the JVM's samples
    # in the property test (JFR, 2026-11-26). "simple" is one tree string (README, Performance).
    "spark.sql.ui.explainMode": "simple",
    # pyspark records the Python call site of every DataFrame function call in the JVM, for
    # error messages (a few py4j round trips each: it doubled the cost of building a query's
    # columns); the engine builds many small queries, and its errors name their partition.
    "spark.python.sql.dataFrameDebugging.enabled": "false",
    # The local file system without Hadoop's checksum side files (".<name>.crc" beside every
    # data file and every Delta log file): without Hadoop's native library each file it
    # creates or renames costs forked chmod and readlink processes, and the side files
    # double them (a bookkeeping commit: 20 forks with them, 8 without). Delta's own
    # version checksums (_delta_log/<version>.crc) are not these and stay. Where javac can
    # build them, framework/local_file_system.py's classes take these places: no forks.
    "spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",
    "spark.hadoop.fs.AbstractFileSystem.file.impl": "org.apache.hadoop.fs.local.RawLocalFs",
}


#: Spark's Kafka source, for ``ingest`` (FIELD_NOTES: the newest connector that resolves fully
#: from Maven Central for pyspark 4.1). The embedded session adds it only when asked.
SPARK_KAFKA_PACKAGE = "org.apache.spark:spark-sql-kafka-0-10_2.13:4.1.1"


#: Set (to anything) to let Spark's start-up output through: Ivy's resolution report,
#: the JVM's warnings. ``topiclake --verbose`` sets it.
VERBOSE_ENV = "TOPICLAKE_VERBOSE"


def show_spark_output() -> None:
    """Let the embedded session's start-up output through (``--verbose``); call before it starts."""
    os.environ[VERBOSE_ENV] = "1"


def spark_log_path() -> str:
    """Where the embedded session's JVM writes its output (Ivy, log4j) unless verbose."""
    return os.path.join(tempfile.gettempdir(), "topiclake-spark", f"spark-{os.getpid()}.log")


@contextlib.contextmanager
def _jvm_output_to_log() -> Iterator[None]:
    """While the JVM starts, point this process's stdout and stderr (fds 1 and 2) away from
    the terminal: both at :func:`spark_log_path`, or, when verbose, stdout at stderr.

    The JVM inherits the descriptors, so Ivy's report and every later JVM line go to the
    file; Python's own are restored as soon as the session is up. A new user's first
    command then prints what topiclake says, not 150 lines of dependency resolution, and
    what Delta prints on the JVM's stdout (VACUUM's "Deleted 0 files ...") never lands in
    the middle of ``--json`` output.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    try:
        if os.environ.get(VERBOSE_ENV):
            os.dup2(2, 1)
        else:
            path = spark_log_path()
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "ab") as log:
                os.dup2(log.fileno(), 1)
                os.dup2(log.fileno(), 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, copy in saved.items():
            os.dup2(copy, fd)
            os.close(copy)


def embedded_master() -> str:
    """The master of the embedded session: ``local[*]``, or ``$TOPICLAKE_SPARK_MASTER``."""
    return os.environ.get("TOPICLAKE_SPARK_MASTER", "local[*]")


def local_session(app_name: str = "topiclake", conf: Mapping[str, str] | None = None, kafka: bool = False,
                  metastore: str | None = None):
    """Start (or return) the embedded ``local[*]`` Spark session with Delta Lake (and, with
    ``kafka``, Spark's Kafka source).

    ``conf`` overrides :data:`LOCAL_CONF`; ``TOPICLAKE_DRIVER_MEMORY`` (default 2g) sets
    the driver's heap, which in local mode is the whole engine's memory.
    """
    from delta import configure_spark_with_delta_pip
    from pyspark.sql import SparkSession

    # Python workers must run the interpreter that has our package and its
    # dependencies, not whatever `python3` is first on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    settings = dict(LOCAL_CONF)
    settings.setdefault("spark.driver.memory", os.environ.get("TOPICLAKE_DRIVER_MEMORY", "2g"))
    # Path-based tables only: keep Spark's own catalog folders out of the user's cwd.
    scratch = os.path.join(tempfile.gettempdir(), "topiclake-spark")
    settings.setdefault("spark.sql.warehouse.dir", os.path.join(scratch, "spark-warehouse"))
    settings.setdefault("spark.driver.extraJavaOptions", f"-Dderby.system.home={scratch}")
    if metastore is not None:
        settings.update(hive_metastore_conf(metastore))
    settings.update(conf or {})
    # Hadoop's file: without a forked chmod or readlink per file (framework/local_file_system.py)
    settings.update(local_file_system.session_settings(settings, conf or {}))
    master = embedded_master()
    # a Hadoop configuration without YARN's 545 defaults, copied at every job (framework/yarn_defaults.py)
    settings.update(yarn_defaults.session_settings(settings, master))
    # HotSpot maps the classes a set-up run archived instead of loading them (framework/class_archive.py);
    # the JVM keeps UTC, as the session's SQL does (in_utc), and collects garbage for throughput
    options = class_archive.java_options(settings["spark.driver.extraJavaOptions"], master)
    settings["spark.driver.extraJavaOptions"] = jvm_options.with_collector(in_utc(options))
    builder = SparkSession.builder.master(master)
    builder = builder.appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    packages = [SPARK_KAFKA_PACKAGE] if kafka else []
    with engine_jars.resolution(packages, settings) as jars, _jvm_output_to_log():
        if jars is None:
            spark = configure_spark_with_delta_pip(builder, extra_packages=packages).getOrCreate()
            engine_jars.remember(packages, spark.sparkContext.getConf())
        else:
            # the jars an earlier start resolved: no Ivy resolution, no copies (framework/engine_jars.py)
            spark = builder.config("spark.jars", jars).getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("TOPICLAKE_SPARK_LOG_LEVEL", "ERROR"))
    return spark


#: The embedded JVM's own time zone. topiclake's SQL runs in UTC already
#: (``spark.sql.session.timeZone``), but Delta also looks at the JVM's default zone and
#: ``user.timezone``: when either is not UTC, it rebuilds the table's state after every
#: commit to verify the version checksum it computed incrementally (its internal
#: ``allFilesInCrc.verificationMode.forceOnNonUTC``), one more Spark job per commit. On a
#: machine set to Europe/Berlin a produce into 30 new partitions took 14.1 s against 8.8 s
#: with this option, and their first maintain 21.4 s against 15.9 s (docs/performance-log.md).
UTC_JVM_OPTION = "-Duser.timezone=UTC"


def in_utc(driver_options: str) -> str:
    """``driver_options`` with :data:`UTC_JVM_OPTION`, unless they or the JVM options in the
    environment already choose the JVM's time zone."""
    if "-Duser.timezone=" in jvm_options.chosen(driver_options):
        return driver_options
    return f"{driver_options} {UTC_JVM_OPTION}".strip()


def running_under_spark_submit() -> bool:
    """True when a JVM started this Python process (spark-submit, a Databricks task)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def may_launch_with(name: str) -> bool:
    """Whether the session this process would start may have a setting whose name holds
    ``name`` before topiclake sets anything: always under spark-submit (its JVM was
    configured elsewhere), else when PySpark's submit arguments or Spark's
    ``spark-defaults.conf`` name it."""
    if running_under_spark_submit() or name in os.environ.get("PYSPARK_SUBMIT_ARGS", ""):
        return True
    return name in _read(os.path.join(_spark_conf_dir(), "spark-defaults.conf"))


#: Hadoop's default file system setting, by its name and its deprecated one.
DEFAULT_FILE_SYSTEM_SETTINGS = ("fs.defaultFS", "fs.default.name")


def paths_without_scheme_are_local() -> bool:
    """Whether a path with no scheme names the local file system in the session this
    process would start: Hadoop's default unless ``fs.defaultFS`` is set, in Spark's launch
    settings (``spark.hadoop.fs.defaultFS``) or in a ``core-site.xml`` of the folders
    Spark's launcher puts on the class path (Spark's configuration folder,
    ``HADOOP_CONF_DIR``, ``YARN_CONF_DIR``). Under spark-submit it is not known here."""
    folders = [_spark_conf_dir(), *(os.environ[name] for name in ("HADOOP_CONF_DIR", "YARN_CONF_DIR")
                                    if os.environ.get(name))]
    sites = "\n".join(_read(os.path.join(folder, "core-site.xml")) for folder in folders)
    return not any(setting in sites or may_launch_with(setting) for setting in DEFAULT_FILE_SYSTEM_SETTINGS)


def no_session_here() -> bool:
    """Whether this process runs no Spark session yet and would start the embedded one: a
    session that runs (its JVM serves every thread), a Spark Connect one or spark-submit's
    answers for its own settings, which may have been given in code."""
    if running_under_spark_submit() or any(os.environ.get(name) for name in ("SPARK_REMOTE",
                                                                              "SPARK_CONNECT_MODE_ENABLED")):
        return False
    # read from the module that defines it, without importing: another thread (Great
    # Expectations' background import) may be importing pyspark, part of it not defined yet,
    # and a class not yet defined has no context running
    context = getattr(sys.modules.get("pyspark.context"), "SparkContext", None)
    return getattr(context, "_active_spark_context", None) is None


def _spark_conf_dir() -> str:
    """The configuration folder Spark's launcher reads (and puts first on the class path)."""
    import importlib.util

    if os.environ.get("SPARK_CONF_DIR"):
        return os.environ["SPARK_CONF_DIR"]
    home = os.environ.get("SPARK_HOME") or (importlib.util.find_spec("pyspark").submodule_search_locations or [""])[0]
    return os.path.join(home, "conf")


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except OSError:
        return ""


def get_session(app_name: str = "topiclake", kafka: bool = False, metastore: str | None = None):
    """The session a job should use: the active one, spark-submit's, or the embedded one
    (with Spark's Kafka source when ``kafka``; on a cluster, its job settings provide it)."""
    require_engine()
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    if running_under_spark_submit():
        # spark-submit (or a Databricks Python task) configured the JVM; use it unchanged.
        return SparkSession.builder.appName(app_name).getOrCreate()
    return local_session(app_name, kafka=kafka, metastore=metastore)


def hive_metastore_conf(folder: str) -> dict[str, str]:
    """Spark's own Hive metastore in ``folder`` (embedded Derby), for catalog tables when no
    cluster provides a metastore. One process at a time may open it (Derby's rule)."""
    folder = os.path.abspath(folder)
    return {
        "spark.sql.catalogImplementation": "hive",
        "spark.hadoop.javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={folder}/metastore_db;create=true",
        "spark.sql.warehouse.dir": os.path.join(folder, "managed"),
    }


def require_engine() -> None:
    """Say which extra to install when only topiclake's core is (a git hook's install)."""
    import importlib.util

    missing = [name for name in ("pyspark", "delta", "great_expectations") if importlib.util.find_spec(name) is None]
    if missing:
        raise EngineNotInstalledError(
            f"this command needs {', '.join(missing)}, which topiclake's core install leaves out: "
            "pip install 'topiclake[spark]' (or 'topiclake[engine]' where the cluster brings Spark and Delta)")
