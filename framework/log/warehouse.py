"""Where a topic's tables and topiclake's own tables live.

Partition ``p`` of topic ``T`` is the Delta table at ``<warehouse>/<T>-<p>``, Kafka's
own log directory naming. topiclake's own tables live under ``<warehouse>/_topiclake/``;
no topic partition can be named that (it has no ``-<partition>`` suffix).
The warehouse may be a local folder or any URI Spark's Hadoop file systems read
(``s3a://``, ``abfss://``, ``dbfs:/``...).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

#: Every table topiclake writes checkpoints every this many commits, not Delta's 10. Its
#: commits are many and small (an append a produce call, a partition and a stage), and a
#: checkpoint of a small table costs three Spark jobs (its state rebuilt from the log,
#: then written as Parquet), about 0.5 s against 0.01 s for the commit: every tenth
#: produce of 5,000 lines into 100 partitions took 47 s against 1.5 s. A table read from
#: 99 commits took the same as from a checkpoint and 9, within 0.1 s (docs/
#: performance-log.md, stop 76). Delta cleans a log at its checkpoints, so a log holds up
#: to this many commits more.
CHECKPOINT_INTERVAL = 100

#: topiclake's own tables take one small append or MERGE per run, partition or commit-offset:
#: Delta's auto compaction keeps their files few (it packs them once 50 are small), and
#: their logs keep a week, cleaned at each checkpoint.
OWN_TABLE_PROPERTIES = {
    "delta.autoOptimize.autoCompact": "true",
    "delta.checkpointInterval": str(CHECKPOINT_INTERVAL),
    "delta.logRetentionDuration": "interval 7 days",
    "delta.deletedFileRetentionDuration": "interval 7 days",
}


def create_own_table(spark, path: str, schema) -> None:
    """Create one of topiclake's own tables (if absent) with OWN_TABLE_PROPERTIES."""
    from framework.log.delta_create import create_table

    create_table(spark, path, schema, OWN_TABLE_PROPERTIES)


def vacuum_own_tables(spark, warehouse: "Warehouse") -> None:
    """VACUUM each of topiclake's own tables that exists, with its own window
    (``delta.deletedFileRetentionDuration``: a week), so the files their prunes, upserts and
    auto compaction replace leave the disk. A table whose commits show nothing a VACUUM
    could delete yet (``cleaner.vacuum_due``, the partition tables' rule) is left alone: a
    VACUUM lists the table's whole folder and runs a Spark job to find nothing."""
    import time

    from framework.cleaner.rules import vacuum_due
    from framework.log import own_vacuum
    from framework.log.abandoned_temporaries import delete_abandoned
    from framework.log.commit_log import HISTORY_PAGE, read_commits

    wall_now = int(time.time() * 1000)  # Delta's commit times are wall-clock
    for path in (warehouse.maintenance_history_path, warehouse.consumer_offsets_path):
        if not warehouse.table_exists(spark, path):  # (read from a local warehouse's folders: no JVM)
            continue
        delete_abandoned(path, wall_now, spark)  # what killed commits left (committed offsets are topiclake's own)
        commits = read_commits(spark, path, HISTORY_PAGE)
        window = deleted_file_window_ms(path, commits[0].version) if commits else None
        if window is not None and vacuum_due(commits, window, wall_now, len(commits) < HISTORY_PAGE) is None:
            continue
        if own_vacuum.vacuumed(path, spark) is None:
            spark.sql(f"VACUUM {delta_table_sql(path)}").collect()


#: Delta's default ``delta.deletedFileRetentionDuration``.
_DELTA_DEFAULT_WINDOW = "interval 1 week"
_INTERVAL_UNIT_MS = {"week": 604_800_000, "day": 86_400_000, "hour": 3_600_000, "minute": 60_000, "second": 1_000,
                     "millisecond": 1}


def deleted_file_window_ms(path: str, version: int) -> int | None:
    """A table's VACUUM window at ``version`` from its checksum's properties, or None when
    the checksum does not say or the interval is in a form this does not read."""
    from framework.log import version_checksum

    properties = version_checksum.configuration(path, version)
    return None if properties is None else deleted_file_window_of(properties)


def deleted_file_window_of(properties: dict) -> int | None:
    """The VACUUM window a table's properties give (Delta's default when they name none),
    or None when it is in a form this does not read."""
    text = properties.get("delta.deletedFileRetentionDuration", _DELTA_DEFAULT_WINDOW)
    return interval_ms(text) if isinstance(text, str) else None


def interval_ms(text: str) -> int | None:
    """A Delta interval property ("interval 7 days", "interval 1 week 2 hours",
    "interval 3600000 milliseconds") in milliseconds, or None for any other form (months,
    fractions, signs: the caller then does not rely on it)."""
    words = text.lower().split()
    if words[:1] == ["interval"]:
        words = words[1:]
    if not words or len(words) % 2:
        return None
    total = 0
    for number, unit in zip(words[::2], words[1::2]):
        unit_ms = _INTERVAL_UNIT_MS.get(unit[:-1] if unit.endswith("s") else unit)
        if not (number.isascii() and number.isdigit()) or unit_ms is None:
            return None
        total += int(number) * unit_ms
    return total


def delta_table_sql(path: str) -> str:
    """A Delta table path as Spark SQL names it: ``delta.`path` ``, backticks doubled.

    Every SQL statement topiclake runs on a table by path goes through here.
    """
    return "delta.`" + path.replace("`", "``") + "`"


DEFAULT_WAREHOUSE = "warehouse"
ENV_WAREHOUSE = "TOPICLAKE_WAREHOUSE"


def _is_uri(location: str) -> bool:
    scheme, sep, _ = location.partition(":")
    # "C:/..." is a Windows path, not a URI; real schemes are longer than one letter.
    return bool(sep) and len(scheme) > 1 and scheme.replace("+", "").isalnum()


@dataclass(frozen=True)
class Warehouse:
    """The root under which every table of a topiclake installation lives."""

    root: str

    @classmethod
    def resolve(cls, location: str | None = None) -> "Warehouse":
        """``location``, else ``$TOPICLAKE_WAREHOUSE``, else ``./warehouse``."""
        chosen = location or os.environ.get(ENV_WAREHOUSE) or DEFAULT_WAREHOUSE
        if not _is_uri(chosen):
            chosen = os.path.abspath(chosen)
        return cls(chosen.rstrip("/") or "/")

    def _join(self, *parts: str) -> str:
        return "/".join([self.root, *parts])

    def partition_path(self, topic: str, partition: int) -> str:
        from framework.errors import ArgumentError
        from framework.spec import topic_name_problem

        problem = topic_name_problem(topic)
        if problem is not None:  # never a path from a name that could climb out of the warehouse
            raise ArgumentError(f"topic {topic!r}: {problem}")
        if isinstance(partition, bool) or not isinstance(partition, int) or partition < 0:
            raise ArgumentError(f"partition must be a non-negative integer, got {partition!r}")
        return self._join(f"{topic}-{partition}")

    @property
    def internal_root(self) -> str:
        return self._join("_topiclake")

    @property
    def consumer_offsets_path(self) -> str:
        """Committed consumer-group offsets (Kafka's ``__consumer_offsets``)."""
        return self._join("_topiclake", "consumer_offsets")

    @property
    def maintenance_history_path(self) -> str:
        return self._join("_topiclake", "maintenance_history")

    @property
    def report_root(self) -> str:
        return self._join("_topiclake", "report")

    @property
    def is_local(self) -> bool:
        return not _is_uri(self.root) or self.root.startswith("file:")

    def has_table(self, path: str) -> bool | None:
        """Whether the table at ``path``, under this warehouse, has a commit, read from the
        local file system (``delta_create.has_a_commit``). A path with no scheme may name a
        cluster's default file system, so a table folder missing here is a missing table
        only when the warehouse's own folder is here, or the warehouse is local by its
        scheme or by the default of the session this process would start (no session runs
        yet: ``session.paths_without_scheme_are_local``), so that a first command into a new
        warehouse starts no JVM to be told so; None when this cannot be told here."""
        from framework.log.commit_log import local_folder
        from framework.log.delta_create import has_a_commit

        present = has_a_commit(path)
        if present is None:
            folder = local_folder(self.root)
            return False if folder is not None and (os.path.isdir(folder) or self._local_by_default()) else None
        return present

    def _local_by_default(self) -> bool:
        from framework import session

        return self.root.startswith("file:") or (session.no_session_here() and session.paths_without_scheme_are_local())

    def table_exists(self, spark, path: str) -> bool:
        """Whether the Delta table at ``path``, under this warehouse, exists: from the local
        folders (:meth:`has_table`), else Delta's answer through ``spark``, which is then the
        only thing asked of it (so `status`, `plan` and `create` start no JVM locally)."""
        from framework.log.delta_create import is_delta_table

        present = self.has_table(path)
        return is_delta_table(spark, path) if present is None else present
