"""Which records a stage check must look at: what Delta's change data feed says the stage
changed, the keys those records belong to, and the offset ranges the rules judge whole.

A check pairs two versions of a partition record by record. Most of a large partition is
the same file in both versions, and a Delta data file never changes, so pairing it proves
nothing. What can break a guarantee is the commits between the two versions, and Delta
records exactly what each of them removed, inserted or updated: its change data feed
(``delta.enableChangeDataFeed``, on for every table topiclake creates). The check pairs:

* every record at an offset the changes name (a duplicate, an insertion, a changed or
  removed record; every record at that offset, in either version),
* every record of a key the changes or the dirty section name (unique keys, winners,
  final state and tombstones are rules over a key's records),
* every record at or above the before version's clean end (the dirty section and the
  head: what the run may compact, and what max lag judges) or below the after version's
  log start (what retention removed, and anything it left behind).

The before version's records in scope are not read at all: they are the after version's,
minus what the feed says the commits inserted or updated to, plus what they deleted or
updated from.

What is left out are records of untouched keys in untouched offsets below the clean end:
the same records, with the same neighbours, as in the version the previous run's check
passed. ``topiclake validate`` still pairs whole versions, for changes made behind
topiclake's back between runs. The cost is one read of the after version, the change and
its keys (broadcast, by their 64-bit hash, so the table itself is never shuffled; the
records in scope are, once, by offset), and the bounds where file statistics point
(``framework.checks.bounds.scoped_numbers``). The first uncleanable offset is a bound the
pairing itself gives when the before version's file statistics show that every young
record lies at or above the clean end, as it does unless the clock went back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ContextManager

from framework.checks.scope import clean_end
from framework.log import file_stats, version_checksum
from framework.log.delta_commits import session_confs
from framework.log.log_state import LogState

__all__ = ["ChangeScope", "change_scope", "changed_offsets", "dirty_from", "planned_up_front", "touched_keys",
           "worth_scoping"]

#: Below this many records a pairing of whole versions is a few small Spark jobs, fewer
#: than reading the changes costs (tests lower it to check both routes).
MIN_SCOPED_RECORDS = 100_000
#: Scoping pays while the part paired whole is at most this share of the log.
MAX_WHOLE_SHARE = 0.5
#: Above this many dirty offsets the key set stops being small enough to broadcast, and
#: the dirty section is most of what a pairing reads anyway: pair whole versions.
MAX_SCOPED_DIRTY = 2_000_000
#: The touched keys are joined by a 64-bit hash (a long join, not a string one, over every
#: record of the after version). A hash shared with an untouched key brings all of that
#: key's records into scope, since they share the key: a larger scope, never a partial key.
KEY_HASH = "_key_hash"
KEY_HASH_SQL = "CASE WHEN key IS NOT NULL THEN xxhash64(key) END"
#: Delta's error for a version range whose changes were not recorded (the feed was off).
_NOT_RECORDED = "DELTA_MISSING_CHANGE_DATA"


@dataclass(frozen=True)
class ChangeScope:
    """The records of a before/after pair the rules must see (see the module's text)."""

    #: the before version's clean end: every record at or above it is in scope
    dirty_from: int
    #: the after version's log start: every record below it is in scope
    log_start_after: int
    #: (_key_hash, _touched_key) rows, broadcast: the touched keys by their 64-bit hash
    keys: object
    #: (offset, _changed_offset) rows, broadcast
    offsets: object
    #: every row the feed reports for the range, with ``_change_type`` (persisted)
    feed: object
    #: the records of the before and after versions by Delta's file statistics (None:
    #: not listed by the version's checksum; the check counts them)
    records: tuple = (None, None)
    #: the before version's files' statistics (None: not listed by its checksum)
    before_files: tuple | None = None

    def of(self, frame):
        """The records of one version that are in scope."""
        from pyspark.sql import functions as F

        hashed = frame.withColumn(KEY_HASH, F.expr(KEY_HASH_SQL))
        marked = (hashed.join(F.broadcast(self.keys), KEY_HASH, "left")
                  .join(F.broadcast(self.offsets), "offset", "left"))
        return marked.where(
            (F.col("offset") >= self.dirty_from) | (F.col("offset") < self.log_start_after)
            | F.coalesce(F.col("_changed_offset"), F.lit(False)) | F.coalesce(F.col("_touched_key"), F.lit(False))
        ).drop("_changed_offset", "_touched_key", KEY_HASH)

    def holds_every_record_newer_than(self, ms: int) -> bool:
        """Whether every record of the before version newer than ``ms`` is in scope: all
        at or above ``dirty_from`` are, and the before version's file statistics show that
        no file starting below it holds one (a clock that went back could leave one there)."""
        return self.before_files is not None and not file_stats.may_hold_newer(self.before_files, self.dirty_from, ms)

    def sides(self, after, project):
        """Both versions' records in scope as ``project(records, side)`` rows, each with the
        number of records it stands for (``_n``), from one read of the after version: its
        rows count once for each side, and the before side then loses what the commits
        inserted or updated to and gains what they deleted or updated from. The rows are
        netted per offset (one shuffle, which the pairing's grouping by offset reuses), so
        the before side is that multiset difference of whole records (the module's text):
        ``project`` keeps what a record says, and drops the feed's own columns."""
        from pyspark.sql import functions as F

        rows = project(self.of(after), "a")
        narrow = [name for name in rows.columns if name != "side"]
        both = rows.select(*narrow, F.explode(F.array(F.lit("a"), F.lit("b"))).alias("side"), F.lit(1).alias("_n"))
        made = project(self.feed.where("_change_type IN ('insert', 'update_postimage')"), "b")
        undone = project(self.feed.where("_change_type IN ('delete', 'update_preimage')"), "b")
        netted = (both.unionByName(made.withColumn("_n", F.lit(-1))).unionByName(undone.withColumn("_n", F.lit(1)))
                  .repartition("offset").groupBy(*narrow, "side").agg(F.sum("_n").alias("_n")))
        return netted.where("_n > 0")

    def release(self) -> None:
        self.feed.unpersist()


def planned_up_front(spark) -> ContextManager[None]:
    """Run a scoped check's queries with their plan made up front: no adaptive query
    execution, one shuffle partition per core.

    What a scoped check shuffles is the change and its keys, small beside the table and
    bounded (``MAX_SCOPED_DIRTY``); adaptive execution runs each of its shuffles and
    broadcasts as a Spark job of its own to re-plan from their sizes (16 jobs at 500k
    records, against 5), which costs more than any re-plan saves here (README, Performance).
    """
    cores = max(1, spark.sparkContext.defaultParallelism)
    return session_confs(spark, {"spark.sql.adaptive.enabled": "false", "spark.sql.shuffle.partitions": str(cores)})


def dirty_from(stage: str, before: LogState) -> int:
    """Where the records a stage check pairs whole begin: a compaction's dirty section and
    head (the before version's clean end); for retention, only what lies past the log end
    (retention removes a prefix, which is in scope anyway, and inserts nothing)."""
    return clean_end(before) if stage == "compact" else before.log_end_offset


def worth_scoping(dirty_from: int, before: LogState) -> bool:
    """Pair only the change when the log is large, the part paired whole is a small share
    of it (else scoping saves little) and its keys fit a broadcast."""
    span = before.offset_span
    whole = max(0, before.log_end_offset - dirty_from)
    return span >= MIN_SCOPED_RECORDS and whole <= MAX_SCOPED_DIRTY and whole <= MAX_WHOLE_SHARE * span


def touched_keys(keys):
    """The ``keys`` rows of a :class:`ChangeScope` from a frame of keys (any repeats, nulls)."""
    from pyspark.sql import functions as F

    return (keys.select(F.expr(KEY_HASH_SQL).alias(KEY_HASH)).where(F.col(KEY_HASH).isNotNull()).distinct()
            .withColumn("_touched_key", F.lit(True)))


def changed_offsets(changed):
    """The ``offsets`` rows of a :class:`ChangeScope` from the feed's rows."""
    from pyspark.sql import functions as F

    return changed.select("offset").distinct().withColumn("_changed_offset", F.lit(True))


def change_scope(log, before, version_before: int, version_after: int, dirty_from: int,
                 log_start_after: int) -> ChangeScope | None:
    """What the commits after ``version_before`` up to ``version_after`` changed, or None
    when Delta did not record it (a table made before the feed was turned on)."""
    from pyspark.sql import functions as F
    from pyspark.sql.utils import AnalysisException

    try:
        # A range the feed did not record is refused here, before any rule runs: Delta
        # checks each version's commit when the read is planned (``tests/test_guarantees.py``).
        feed = (log.spark.read.format("delta").option("readChangeFeed", "true")
                .option("startingVersion", version_before + 1).option("endingVersion", version_after)
                .load(log.path)).persist()
    except AnalysisException as error:
        if _NOT_RECORDED in str(error):
            return None
        raise
    # Below the new log start everything is in scope already. The keys and the offsets are
    # computed in the check's one query, as its broadcasts (the keys counted in a job of their
    # own and both persisted cost 0.6 s of a 3.5 s check at 500k records); the feed is
    # persisted, as the keys, the offsets and both sides read it.
    changed = feed.where(F.col("offset") >= log_start_after)
    keys = touched_keys(changed.select("key").unionByName(before.where(F.col("offset") >= dirty_from).select("key")))
    offsets = changed_offsets(changed)
    files = [version_checksum.plain_files(log.path, version) for version in (version_before, version_after)]
    records = tuple(version_checksum.record_count(listed) for listed in files)
    before_files = None if files[0] is None else tuple(file_stats.of(add) for add in files[0].adds)
    return ChangeScope(dirty_from, log_start_after, keys, offsets, feed, records, before_files)
