"""Side-by-side measurements in one process, reported as ratios (these machines are noisy).

1. ``compaction``, for each ``--clean`` size: a partition whose clean section holds one
   record per key (200-byte values), plus ``--updates`` fresh updates of existing keys.
   Its twin (a copy of the same table files) is compacted by the naive rewrite (a window
   dedupe of the whole table, then an overwrite). Timed: topiclake's compaction (plan +
   commit: the version read from the files its checksum lists, the touched files
   rewritten through Delta's transaction API), by Delta's MERGE (as before) and with the
   run's actions decided by Spark's query (as before; Arrow decides them from a local
   version's files since stop 95), on copies in the order A C B B C
   A; on copies whose owner turned deletion vectors on (a MERGE that marks the losers),
   D E G F G E D: committed by topiclake with the key indexes of the clean files built by
   an earlier run (D), by Delta's MERGE (E, as before stop 105), with every clean key read
   (G, as before stop 106), and the first run, which builds the indexes (F); on one without
   the change data feed, and on one with the session's Parquet codec set
   to ``lz4_raw`` (opt-in; its naive rewrite too, on a twin of its own), each copy made
   from one spare copy just before its run and deleted after; the guarantee checks (Great
   Expectations) as they run (only the
   change paired, counted by Arrow in the driver from the commits' change files and the
   after version's files, Spark measuring only a check that is not clean), counted by
   Spark's query over the same scope (as until stop 96) and with whole versions paired
   (each twice, A B C C B A; the faster kept); the naive rewrite (twice, n1 and n2; the
   mean is its figure, as the compaction's). All
   must keep the same key -> offset set, and every check route must pass with the same
   verdict.
2. ``partitions``: after a warm-up (a topic of 4 partitions produced and maintained), a
   topic of ``--partitions`` partitions: produce 5,000 JSON lines through the command
   line's code (its tables created on the way), the first maintain, then an idle maintain
   (nothing due), both without the guarantee checks or the history; a twin topic's first
   maintain with two cleaner threads, also without them (both must end with the same
   offsets); after a warm-up of the checks, seven more twins' first maintains as the command
   line runs them (every stage checked, the history recorded): two cleaner threads with
   the small partitions' compaction checks counted by Arrow in the driver and the rest in
   batches, one Spark job a topic (as shipped), against each measured at once (as before
   stop 64) and against the compaction checks counted in Spark's batches too (as before
   stop 101), A B C C B A, then one thread; the same six on a compact,delete topic; then
   5,000 more lines into the first topic's tables. Twin topics of a quarter of the partitions are
   created, A B B A, through Delta's transaction API (as shipped) and by Delta's table
   builder (as before); then the same lines, A B B A: the driver's rows written by Arrow
   against by Spark's ``writeFiles``, and Java lists read by index against iterated through
   py4j (each as shipped against as before). Then four twin topics of a quarter of the partitions,
   with the same records, get their first maintain in the order A B B A: A measures each
   partition from its commit metadata (the newest timestamp rules out young records, the
   append commits give the records past the checkpoint: as shipped), B scans the records
   past the checkpoint (as before); both must end with the same offsets. Four more twins,
   the same way, for each of: the compaction frame without the clean section's lookup when
   no record lies below the log start (as shipped) against with it (as before); for topics
   with ``cleanup.policy=delete`` and the history on, retention planned from the
   oldest-timestamp bound and the history's sizes from the metadata (as shipped) against
   read from the records (as before); one cleaner thread (the default) against two
   (``--cleaner-threads 2``); bin-packing planned from the files the version checksum lists
   (as shipped) against Delta's listing (as before); the history (on for this pair)
   appended once per run (as shipped) against after every partition that committed (as
   before); a small partition's compaction written through Delta's transaction API (as
   shipped) against Delta's MERGE (as before); a small partition's shuffles in one Spark
   partition planned up front (as shipped) against the session's adaptive plan over four
   (as before); for topics with ``cleanup.policy=delete`` whose retention cuts half of each
   partition, the cut written through Delta's transaction API (as shipped) against Delta's
   DELETE after a time-travel read (as before); the files a compaction rewrites named by
   its totals (as shipped) against found by a pass of their own over the offsets (as
   before); vacuum's check of the table properties against the spec, read from the version
   checksum (as shipped) against ``SHOW TBLPROPERTIES`` (as before); pyspark's DataFrame
   debugging (each function call's Python call site recorded in the JVM) off, as the
   embedded session sets it, against pyspark's default, on (as before), the produce timed
   too; the JVM in UTC, as the embedded session starts it, against Europe/Berlin, as on
   such a machine before (Delta then rebuilds the state after every commit), the produce
   timed too; a topic's small partitions' compactions decided in one Spark job (as shipped)
   against each alone (as before stop 75). Each twin then gets an idle maintain, in the same order. ``--twins`` runs
   only the named kinds (``measure``, ``debugging``, ...).
3. ``produce``: ``--produce`` records from a DataFrame into one partition (keys given, the
   partition from Kafka's partitioner), against a bare Delta append of the same frame
   (twice each, alternating; the faster kept, and the first produce reported too), and
   against produce holding the frame in Spark's cache compressed (as before). Then
   the same records into a topic of 12 partitions, Kafka's partitioner run on Arrow
   batches (as shipped) against once per record in a Python UDF with a window numbering
   each partition (as before), A B B A; both must put the same keys at the same offsets.
4. ``files``: 300 produce calls of 100 records (mostly new keys, a few updates and
   tombstones) into one partition, six ``maintain`` runs between them, then a last one;
   a twin partition gets the same calls and runs without the bin-packing stage. Counted:
   live data files; timed: a full scan of each against a fresh one-file copy of the same
   records, and the bin-packing stages themselves.
5. ``metadata``: ``--runs`` cycles of a produce call and a ``maintain`` (history on) on one
   partition; counted: the partition's ``_delta_log`` (commits, checkpoints, bytes), its
   live data files, and the history table's live files and log.
6. ``checks``: a small partition (500 records over 50 keys) compacted; then its guarantee
   checks run ``--check-runs`` times, each measured and judged alone (``check_stage``),
   with Great Expectations judging the metrics row on its pandas engine (how topiclake
   judges) against its Spark engine (how it judged before), alternating, in one process,
   against the compaction they check; then, on Spark's route, the same checks reading
   both versions from the files their checksums list (as shipped) against through Delta's
   time travel (as before), alternating; then the same checks, under a small partition's
   settings as maintenance runs them, pairing the versions in one Spark task (as shipped)
   against through a shuffle (as before), alternating; then, under those settings, the
   violations counted by Arrow in the driver (as shipped) against by Spark's queries (as
   before stop 101), alternating; then a vacuum's check (G9) of three versions, read in
   one Spark query (as shipped) against a query a version (as before), alternating.
7. ``heap``: ``maintain`` then ``validate`` (both versions read through Delta) of a topic of
   ``--heap-partitions`` partitions through the command line, and the driver's heap in use
   after a full collection before and after: with each partition's table forgotten from
   Delta's cache when done (as shipped) against kept there (as before), the before side
   first and its tables forgotten after it.
8. ``lint`` of the shipped specs in a fresh interpreter against a bare interpreter start:
   lint is for git hooks, so it must not start Spark.
9. ``start``: ``topiclake create`` of the shipped specs in new processes, A B C C B A twice:
   as shipped (the jars Ivy resolved handed to Spark by path, HotSpot's class archive
   mapped), without the archive, and with neither (as before).
10. ``file_system``: the ``partitions`` section (``--twins none``, ``--file-system-partitions``
   partitions) in new processes, A B B A: the embedded session's local file system as
   shipped (no forked chmod or readlink) against Hadoop's raw local one (as before).
11. ``yarn_defaults``: the same, the embedded session's Hadoop configuration without YARN's
   defaults (as shipped) against with them (as before, ``TOPICLAKE_YARN_DEFAULTS=keep``).
12. ``commands``: the ``partitions`` section's topic as a user runs it, each step a
   ``topiclake`` command in a new process (its JVM's JIT cold, unlike the sections above,
   whose figures come after the process's earlier work): produce 5,000 lines, the first
   maintain (checks and history) with one cleaner thread (the default) and, on a twin
   topic, with two, each followed by an idle maintain (mostly the command's start).
13. ``collector``: the same, the embedded session's JVM with the throughput collector (as
   shipped) against G1, HotSpot's pick on two cores (as before, ``JDK_JAVA_OPTIONS=-XX:+UseG1GC``).
14. ``collector_commands``: the commands' produce, first maintain (two cleaner threads) and
   idle maintain, new processes, A B B A, the same two collectors; every side's tables must
   hold the same records.
15. ``new_tables``: a first produce of 5,000 lines into new topics of ``--partitions``
   partitions, in this process, after a warm-up: twins A B B A, A with each table created
   by its first append's commit (as shipped), B with every table created before the
   appends (as before stop 68); each pair must hold the same offsets.
16. ``packing``: bin-packing of ``--partitions`` small partitions of six files each (six
   produce calls), in this process, after a warm-up: twins A B B A, A as shipped (a group's
   file written by Arrow, a small file at a time), B as before stop 94 (written by Spark's
   Parquet writer, Delta's ``writeFiles``; stop 69's figure, against ``allFiles`` and a
   shuffle, is in docs/performance-log.md); each partition must go from six files to one,
   and each pair hold the same records.
17. ``offsets``: ``--runs`` consumer-offset commits (three groups, two partitions), each
   followed by a read of a partition's committed offsets (as consumed retention reads them),
   in this process, after a warm-up: twins A B B A, A as shipped (the rows read and written
   by Arrow, no Spark job), B as before stop 72 (written by Spark's ``writeFiles``, read by
   a Spark query); each pair must hold the same committed offsets.
18. ``produce_commands``: ``topiclake produce`` of 5,000 lines into ``--partitions`` new
   partitions, each a new process, A B B A: the rows written by Arrow (as shipped) against
   by Spark's ``writeFiles`` (as before stop 74); every side's tables must hold the same records.
19. ``batch_commands``: the first ``topiclake maintain`` of ``--partitions`` small partitions
   (5,000 lines produced first), each a new process, A B B A: their compactions decided in one
   Spark job (as shipped, ``framework/stages/compaction_batch.py``) against each partition
   alone (as before stop 75); every side's tables must hold the same records after it.
20. ``checkpoints``: ``--checkpoint-calls`` produce calls of 5,000 lines into twin topics of
   ``--partitions`` partitions, a maintain of each after every fifth, in this process, the
   twins' calls interleaved A B B A each round: A's tables checkpoint every 100 commits (as
   shipped, ``framework/log/warehouse.py``), B's every 10 (Delta's default, as before stop
   76); each side's total and slowest produce call; each pair must hold the same offsets.
21. ``cuts``: ``--cut-runs`` minutes of a delete-only topic (five minutes' retention) on twin
   topics of one partition, 50,000 records produced a minute and a maintain (history on)
   half a minute on, so that each retention cut lands inside an append, A B B A: the log's
   size for the history counted by the cut and the appends since (as shipped,
   ``log_state.size_after_cut``) against scanned (as before stop 77); each side's maintain
   time, then that of five idle maintains at the last run's clock (nothing due; their sum
   and the median run, as the history's prune lands on one twin's run), then the median of
   five retention plans alone (no write) after one more minute's records; the twins
   must hold the same offsets, the history the same sizes, and the plans the same cuts.
22. ``pages``: twin compacted topics of one partition (100,000 keys compacted), then
   ``--page-rounds`` rounds of 30 produce calls of 100 records and a maintain (history on)
   that is never due, A B B A: the records past the checkpoint measured from the next
   page of the history when the first 16 commits do not reach back (as shipped) against
   scanned (as before stop 77); each side's maintain time; the twins must hold the same
   offsets and the history the same sizes.
23. ``size_retention``: twin delete-only topics of one partition under a ``retention.bytes``
   they never reach, 1,000,000 records produced, then ``--cut-runs`` idle maintains (history
   on), A B B A: the log's bytes from the commit metadata (as shipped) against summed by a
   scan in every run (as before stop 77); each side's time and median run; the twins must
   hold the same offsets.
24. ``time_boundary``: the ``cuts`` section's minutes with ``--time-boundary-records``
   records a minute (500,000), A B B A: time retention's boundary from the files'
   statistics, reading only the files that straddle it (as shipped,
   ``retention._first_kept``), against one pass over the whole log (as before stop 78);
   each side's maintain time, busy and idle; the same checks as ``cuts``.
25. ``retention_packing``: the same minutes and records, A B B A: bin-packing keeping a
   packed file within a tenth of what retention keeps (as shipped,
   ``optimize.packing_bounds``) against packing up to ``segment.bytes`` whatever its
   timestamps (as before stop 78), so that the cut rewrites one file packed from every
   append of the window; the same measures and checks.
26. ``consumed_retention``: the same minutes and records under consumed retention (KIP-68:
   ``consumed.retention.ms`` five minutes, no time retention), a group that has read the
   whole log committing its offset before each maintain, A B B A: the boundary from the
   files' statistics, reading only the files that straddle it, and no read while every
   record is young enough (as shipped, ``retention._first_kept``), against one pass over
   the whole log in every run (as before stop 79); the same measures and checks.
27. ``size_cuts``: the same minutes and records under size retention (``retention.bytes``
   about five minutes of records, no time retention), so that every busy run cuts inside
   an append, A B B A: the boundary from the oldest files only, the log's bytes known from
   the commits (as shipped, ``retention_size.boundary_from_oldest``), against one pass
   over the whole log's offsets and sizes (as before stop 80); the same measures and checks.
28. ``prunes``: ``--prunes`` prunes of the maintenance history (one every six appends of a
   run's rows, each append beside a consumer-offset commit; each prune deletes runs), A B B
   A: decided by Arrow and committed as one overwrite (as shipped,
   ``framework/log/history_prune.py``) against Spark's query and a MERGE (as before stop
   113); each pair must keep the same history rows. Then an idle ``topiclake maintain`` of
   ``--partitions`` partitions, each a new process, whose history append reaches a prune's
   multiple (nothing old enough to delete, as at every prune until a partition has 500
   runs), A B B A: as shipped (no JVM) against the prune by Spark's MERGE (as before stop
   113); every side's history the same after it.
29. ``report_commands``: ``topiclake report`` of a warehouse whose ``--partitions`` partitions
   had a first maintain, each report a new process, A B B A: the history and the dirty-ratio
   thresholds read by Arrow from the newest versions' checksums, with no JVM (as shipped,
   ``framework/report/data.py``), against by Spark (as before stop 85); every side's pages
   must say the same.
30. ``read_only_commands``: ``topiclake status``, ``plan``, ``create``, an idle ``maintain``
   (``--json``; as a user runs it, with the report; and of a twin topic whose records are
   all too young to compact) and a ``commit-offset`` of a
   warehouse whose ``--partitions`` partitions had a first maintain (nothing due), then a
   ``produce`` of the same lines into its tables and into a new topic's, and a first
   ``commit-offset`` (the committed offsets' table created too), a ``read`` of a
   partition, a ``validate`` of every partition after those produces (counted by Arrow in
   the driver, ``framework/checks/arrow_whole.py``; against in one Spark batch, as before stop
   108), and a ``create`` and a ``produce`` into a warehouse folder not there yet, each a new
   process, A B B A: the session deferred until something asks it a question, so no JVM
   starts (as shipped,
   ``framework/deferred_session.py``; a partition whose records are too young to compact,
   which its metadata cannot settle, scanned by Arrow, ``framework/stages/local_measure.py``;
   the idle maintain's history rows, the committed
   offset, the produced records and a new topic's tables are committed by topiclake itself,
   ``framework/log/own_commits.py``; the report keeps the Data Docs built from the same
   validations and draws many pages in worker processes), against the session started
   first, the Data Docs rebuilt, every page drawn in one process and a scan by Spark (as
   before stops 87 to 90); both sides must print the same JSON (a produce: the same counts
   per partition, each run's offsets from the log end the one before left).
31. ``young_heads``: a topic of ``--partitions`` partitions whose 5,000 records are all too
   young to compact, every partition's compaction planned in this process (the session
   up), A B B A: each measure that its commits cannot settle read by Arrow from its small
   local files (as shipped, ``framework/stages/local_measure.py``), against by Spark's
   query (as before stop 90); every side's measures the same. Then a first ``maintain`` of
   twin topics whose older four fifths are due and newest fifth too young, A B B A: their
   small partitions decided together, the plans read by Arrow (as shipped), against each
   alone (as before stop 90, when such a plan needed a Spark scan and kept its partition
   out of the batch); every twin the same offsets after it.
32. ``window_start``: the first version of a partition's time-travel window, which the
   vacuum stage, its check and ``plan`` ask for every run, over a ``_delta_log`` of
   ``--window-commits`` commits (60,000 by default: a week of produces every 10 s), each a
   copy of a real produce's commit, one every 10 s, for five window starts spread over the
   log, A B B A: a binary search over the commit files and the 100 commits before what it
   finds (as shipped, ``commit_log.first_version_since``), against every commit read (as
   before stop 93); then the newest commits as an idle run asks for them of a partition
   (the newest eight times, a page of 500 twice), each commit beside its checksum and a
   checkpoint every 100, A B B A: probed up from the checkpoint ``_last_checkpoint`` names
   (as shipped, ``commit_log._newest_version``), against a listing of ``_delta_log`` (as
   before stop 93); then ``--window-delta-commits`` produces into a real table (400:
   four checkpoints) and its five window starts by the route storage other than the local
   file system takes, A B B A: the commit Delta's time travel finds active
   (``getActiveCommitAtTime``, as shipped) against every commit from Delta's history (as
   before stop 93); every side must answer the same.
33. ``staged_commands``: the first ``topiclake maintain`` of ``--partitions`` small
   partitions, as in ``batch_commands`` (each a new process, A B B A): a batch's rewrites
   written by Arrow straight into each member's table (as shipped, since stop 94) against
   one ``writeFiles`` into a staging folder, then moved (as before); every side's tables
   must hold the same records.
34. ``huge_pages``: the ``compaction`` case of the largest ``--clean`` size compacted in a
   new process each, A B B A after a warm-up: Arrow's allocator without transparent huge
   pages (as shipped since stop 97, ``framework/__init__.py``) against with them
   (mimalloc's default, as before); timed from the plan's end to the commit, with the CPU
   the process spent in the kernel. Every side must remove the same records.
35. ``vector_commands``: a checked ``topiclake maintain`` of ``min(--partitions, 10)``
   small partitions with deletion vectors on and no time-travel window, whose last
   compaction marked rows and whose new records are due: it compacts, packs, purges the
   vectors and vacuums, each run a new process on its own copy of one warehouse, A B B A:
   the purge, the VACUUM and the packing made by topiclake and the version before read
   from its files and vectors, no JVM (as shipped, ``framework/stages/purge.py``), against
   Delta's REORG and VACUUM, the packing through Delta's transaction and the version
   before pinned through Delta (as before stop 109); every side must print the same
   decisions and leave the same records.
36. ``size_oldest``: the ``size_cuts`` section's minutes, A B B A: the oldest files of a
   local table read by Arrow in the driver (as shipped, ``retention_size._cut_locally``)
   against by Spark's scan (as before stop 112); the same measures and checks. Run it with
   a small ``--time-boundary-records`` for small partitions, whose fixed cost this is.
37. ``checkpoint_commands``: ``topiclake produce`` of 5,000 lines into ``--partitions``
   partitions whose next commit is a checkpoint's (as every hundredth produce meets it),
   each a new process, A B B A: committed by topiclake and checkpointed by delta-rs (as
   shipped, ``framework/log/own_checkpoints.py``) against committed and checkpointed
   through Delta's transaction, which starts the JVM (as before stop 114); every side's
   tables must hold the same records and a checkpoint of the new version.
38. ``vector_retention_commands``: a checked ``topiclake maintain`` of ``--partitions``
   compact,delete partitions with deletion vectors on, compacted into files with vectors
   by a first maintain, whose survivors are half past ``retention.ms``; each run a new
   process, A B B A: the retention plan's files and vectors read by Arrow and the cut
   committed as vectors by topiclake (as shipped, ``retention_rewrite.vector_cut``)
   against the records read by Delta and the cut by Delta's DELETE, which starts the JVM
   (as before stop 115); every side's tables must hold the same records, every partition
   cut.
39. ``vector_boundary``: retention's plan of one compact,delete partition of
   ``--vector-boundary-records`` records in 40 appends, compacted with deletion vectors on
   (so most files carry a vector and their statistics only bound their records), by time
   at a clock where its oldest 1 % have expired and by size with ``retention.bytes`` 99 %
   of its bytes: A B B A, repeated, each side's median; the files the bounds leave open
   read (as shipped, ``retention._first_kept``, ``retention_size.boundary_from_oldest``)
   against every file with a vector read, or every file (as before stop 116). Both sides
   must find the same boundary, and each plan must cut.

    python jobs/benchmark.py [--clean 500000,5000000] [--updates 50000] [--json out.json]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from framework import local_file_system, yarn_defaults  # noqa: E402
from framework.cli.main import guarded  # noqa: E402
from framework.log.warehouse import delta_table_sql  # noqa: E402

DAY_MS = 86_400_000
SECTIONS = ("compaction", "partitions", "commands", "produce", "new_tables", "files", "metadata", "checks", "heap",
            "lint", "start", "file_system", "yarn_defaults", "collector", "collector_commands", "packing", "offsets",
            "produce_commands", "batch_commands", "checkpoints", "cuts", "pages", "size_retention",
            "time_boundary", "retention_packing", "consumed_retention", "size_cuts", "prunes", "report_commands",
            "read_only_commands", "young_heads", "window_start", "staged_commands", "huge_pages",
            "vector_commands", "size_oldest", "checkpoint_commands", "vector_retention_commands",
            "vector_boundary")


def _timed(label, results, action):
    started = time.perf_counter()
    value = action()
    results[label] = round(time.perf_counter() - started, 3)
    print(f"  {label:<34} {results[label]:8.2f} s", file=sys.stderr, flush=True)
    return value


def _spec(topic: str, partitions: int = 1, policy: str = "compact", retention_ms: int | None = None, **more):
    from framework.spec import parse_spec

    config = {"cleanup.policy": policy, "min.cleanable.dirty.ratio": 0.0, "delete.retention.ms": DAY_MS, **more}
    if retention_ms is not None:
        config["retention.ms"] = retention_ms
    return parse_spec({"topic": topic, "partitions": partitions, "config": config}, "benchmark")


def _value(n):
    """About 200 bytes that compress like real payloads (hex digests), not like padding."""
    from pyspark.sql import functions as F

    text = F.concat(F.sha2(n.cast("string"), 512), F.sha2((n + 1).cast("string"), 512))
    return F.substring(text, 1, 200)


def _clean_records(spark, count: int, now: int):
    """``count`` distinct keys, old enough to compact."""
    from pyspark.sql import functions as F

    n = F.col("id")
    return spark.range(count).select(
        F.concat(F.lit("key-"), n.cast("string")).alias("key"), _value(n).alias("value"),
        (F.lit(now - 2 * DAY_MS) + n).alias("timestamp"))


def _updates(spark, count: int, keys: int, now: int):
    """``count`` updates of random existing keys (a few repeat), 1% of them tombstones."""
    from pyspark.sql import functions as F

    n = F.col("id")
    key = F.concat(F.lit("key-"), (F.abs(F.xxhash64(n, F.lit(7))) % keys).cast("string"))
    value = F.when(F.rand(3) < 0.01, F.lit(None).cast("string")).otherwise(_value(n + keys))
    return spark.range(count).select(key.alias("key"), value.alias("value"),
                                     (F.lit(now - DAY_MS) + n).alias("timestamp"))


def _naive_rewrite(spark, path: str) -> None:
    """The baseline: every key's winner by a window over the whole table, then an overwrite."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    table = spark.read.format("delta").load(path)
    best = F.max("offset").over(Window.partitionBy("key"))
    winners = table.withColumn("_best", best).where(F.col("offset") == F.col("_best")).drop("_best")
    winners.write.format("delta").mode("overwrite").save(path)


def _same_winners(spark, left: str, right: str) -> bool:
    """Both tables keep the same key -> offset set (a symmetric difference, in Spark)."""
    a = spark.read.format("delta").load(left).select("key", "offset")
    b = spark.read.format("delta").load(right).select("key", "offset")
    return a.exceptAll(b).limit(1).count() == 0 and b.exceptAll(a).limit(1).count() == 0


@contextlib.contextmanager
def _whole_versions_paired():
    """The checks as they were before the change data feed: whole versions paired."""
    from framework.checks import changes

    kept = changes.MIN_SCOPED_RECORDS
    changes.MIN_SCOPED_RECORDS = sys.maxsize
    try:
        yield
    finally:
        changes.MIN_SCOPED_RECORDS = kept


@contextlib.contextmanager
def _each_check_at_once():
    """The checks as they ran until stop 64: each small partition's compaction check
    measured at once, its own Spark queries (now: counted with the others waiting for
    their verdicts, one Spark job a topic; framework/checks/batched.py)."""
    from framework.checks.guarantees import Guarantees

    with mock.patch.object(Guarantees, "batchable", lambda self, check, peers: False):
        yield


@contextlib.contextmanager
def _counted_by_spark():
    """Every check counted by Spark, as a scoped compaction check was until stop 96 (its query
    over the change data feed and the after version), a small partition's compaction check
    until stop 101 and its retention check until stop 102 (now: by Arrow in the driver, when
    it is clean)."""
    from framework.checks import arrow_scope

    with mock.patch.object(arrow_scope, "counted", lambda *args: None):
        yield


@contextlib.contextmanager
def _retentions_counted_by_spark():
    """A small partition's retention check as it ran until stop 102: counted by Spark (in a
    batch, with others) where it is now counted by Arrow in the driver when it is clean."""
    from framework.checks import arrow_scope

    shipped = arrow_scope.counted
    with mock.patch.object(arrow_scope, "counted",
                           lambda check, *args: shipped(check, *args) if check.stage == "compact" else None):
        yield


def _tag(clean: int) -> str:
    """A compaction case's name in the results: 500k, 5M."""
    return f"{clean // 1000}k" if clean < 1_000_000 else f"{clean / 1e6:g}M"


def _session_codec(spark, codec: str):
    """Spark's writer, and so Arrow's rewrite (``arrow_files.session_codec``), compressing by ``codec``."""
    from framework.log.arrow_files import CODEC_SETTING
    from framework.log.delta_commits import session_confs

    return session_confs(spark, {CODEC_SETTING: codec})


def bench_compaction(spark, warehouse, clean: int, updates: int, now: int, results: dict) -> dict:
    from framework.checks.guarantees import Guarantees
    from framework.clients.produce import produce_frame
    from framework.log.topic import Topic
    from framework.stages import compaction
    from framework.stages.stage_check import StageCheck

    tag = _tag(clean)
    topic = Topic(spark, warehouse, _spec(f"bench-{tag}"))
    log = topic.partition(0)
    setup: dict = {}
    _timed(f"[{tag}] produce clean section", setup, lambda: produce_frame(topic, _clean_records(spark, clean, now), now))
    _timed(f"[{tag}] first compaction", setup, lambda: compaction.execute(log, compaction.plan(log, now)))
    _timed(f"[{tag}] produce {updates} updates", setup, lambda: produce_frame(topic, _updates(spark, updates, clean, now), now))
    # The case's one spare copy; each run's copy is made from it just before the run, and
    # deleted once its winners are compared. The copies all made first and kept (18 GB at
    # 5M, with what the runs wrote) filled the page cache, and the kernel reclaiming it
    # during the timed runs cost the first of them seconds (docs/performance-log.md, stop 99).
    source = os.path.join(warehouse.root, f"source-{tag}")
    shutil.copytree(log.path, source)
    os.sync()  # (its pages written back before a1, the first timed run, writes its own, as fresh() does)
    differing: list[str] = []

    def fresh(path: str, setting: str | None = None) -> str:
        """A copy of the case at ``path`` (``setting``: a table property its owner set), its
        pages written back before the timed run writes its own."""
        shutil.copytree(source, path)
        if setting:
            spark.sql(f"ALTER TABLE {delta_table_sql(path)} SET TBLPROPERTIES ({setting})")
        os.sync()
        return path

    def partition_copy(kind: str, setting: str | None):
        """A copy of the case as the partition of a topic of its own."""
        partition = Topic(spark, warehouse, _spec(f"bench-{tag}-{kind}")).partition(0)
        fresh(partition.path, setting)
        return partition

    def done(path: str) -> None:
        """The copy's winners against the first run's (``log``), then the copy deleted."""
        if not _same_winners(spark, path, log.path):
            differing.append(path)
        shutil.rmtree(path)

    def compact(partition_log):
        planned = compaction.plan(partition_log, now)
        assert planned.decision.due, planned.decision
        return planned, compaction.execute(partition_log, planned, run_id="benchmark")

    # as shipped (A) against Delta's MERGE (B) and against the run decided by Spark's query
    # (C; both as before), on copies in the order A C B B C A, so that no side alone pays
    # for the JVM's warm-up; each side's mean is its figure
    shipped, merge = "compaction (plan + commit)", "compaction, Delta's MERGE (as before)"
    by_spark = "compaction, decided by Spark (as before)"
    planned, outcome = _timed(f"[{tag}] {shipped} (a1)", results, lambda: compact(log))
    # then each on a copy of its own: C B B C A, one whose owner turned deletion vectors on,
    # one without the change data feed (how tables were before it), one compressed by LZ4_RAW
    plain = contextlib.nullcontext
    vectors, vectors_by_merge = "compaction, deletion vectors (opt-in)", "compaction, deletion vectors by Delta's MERGE"
    vectors_unindexed = "compaction, deletion vectors, no key index (as before)"
    vectors_first = "compaction, deletion vectors, first run (key indexes built)"
    guarantees = Guarantees(spark, warehouse)

    def stage_check(partition_log, planned, outcome):
        return StageCheck(log=partition_log, stage="compact", now_ms=now, version_before=outcome.version_before,
                          version_after=outcome.version_after, before=None, state_before=planned.snapshot.state,
                          state_after=outcome.state_after,
                          first_uncleanable_offset=planned.measure.first_uncleanable_offset,
                          cleaned_up_to=outcome.cleaned_up_to)

    # the deletion-vector copies as D E G F G E D: committed by topiclake with the clean
    # files' key indexes an earlier run built (D, as a run after the first finds them),
    # against Delta's MERGE (E, as before stop 105), against the keys read without the
    # index (G, as before stop 106), and the first run, which builds them (F); each D's
    # guarantee checks timed after it
    on = "'delta.enableDeletionVectors' = 'true'"
    for name, way, label, setting in (
            ("c1", _decided_by_spark, f"{by_spark} (c1)", None), ("b1", _committed_by_merge, f"{merge} (b1)", None),
            ("b2", _committed_by_merge, f"{merge} (b2)", None), ("c2", _decided_by_spark, f"{by_spark} (c2)", None),
            ("a2", plain, f"{shipped} (a2)", None),
            ("d1", plain, f"{vectors} (d1)", on), ("e1", _vectors_by_merge, f"{vectors_by_merge} (e1)", on),
            ("g1", _without_key_index, f"{vectors_unindexed} (g1)", on), ("f1", plain, vectors_first, on),
            ("g2", _without_key_index, f"{vectors_unindexed} (g2)", on),
            ("e2", _vectors_by_merge, f"{vectors_by_merge} (e2)", on), ("d2", plain, f"{vectors} (d2)", on),
            ("no-cdf", plain, "compaction, no change data feed", "'delta.enableChangeDataFeed' = 'false'"),
            ("lz4", lambda: _session_codec(spark, "lz4_raw"), "compaction, lz4_raw (opt-in)", None)):
        copy = partition_copy(name, setting)
        if name.startswith("d"):  # (untimed) the indexes a run before this one built
            _key_indexes_built(copy, now)
        with way():
            done_here = _timed(f"[{tag}] {label}", results, lambda copy=copy: compact(copy))
        if name.startswith("d"):
            verdict = _timed(f"[{tag}] guarantee checks, deletion vectors ({name})", results,
                             lambda copy=copy, done_here=done_here: guarantees.check_stage(stage_check(copy, *done_here)))
            if not verdict.passed:
                differing.append(f"{copy.path}: its checks failed")
        done(copy.path)
    for side, label in (("a", shipped), ("b", merge), ("c", by_spark), ("d", vectors), ("e", vectors_by_merge),
                        ("g", vectors_unindexed)):
        results[f"[{tag}] {label}"] = round(
            (results[f"[{tag}] {label} ({side}1)"] + results[f"[{tag}] {label} ({side}2)"]) / 2, 3)
    results[f"[{tag}] guarantee checks, deletion vectors"] = min(
        results[f"[{tag}] guarantee checks, deletion vectors (d{i})"] for i in (1, 2))
    check = stage_check(log, planned, outcome)
    # Each route twice, alternating, the faster of each kept: a route's first run pays for
    # the JVM compiling its code, and the later one is what every run after it costs.
    routes = {"scoped": contextlib.nullcontext, "by Spark": _counted_by_spark, "whole": _whole_versions_paired}
    verdicts, runs = {}, {route: [] for route in routes}
    for route in ("scoped", "by Spark", "whole", "whole", "by Spark", "scoped"):
        with routes[route]():
            started = time.perf_counter()
            verdicts[route] = guarantees.check_stage(check)
            runs[route].append(time.perf_counter() - started)
    for route, label in (("scoped", "guarantee checks"), ("by Spark", "guarantee checks, counted by Spark (as before)"),
                         ("whole", "guarantee checks, whole versions paired")):
        results[f"[{tag}] {label}"] = round(min(runs[route]), 3)
        print(f"  [{tag}] {label:<30} {min(runs[route]):8.2f} s (runs: "
              f"{', '.join(f'{r:.2f}' for r in runs[route])})", file=sys.stderr, flush=True)
    verdict, whole, before = verdicts["scoped"], verdicts["whole"], verdicts["by Spark"]
    # The naive rewrite twice on fresh twins (n1, n2), its mean the figure, as the
    # compaction's: one run of it took 18.6 s and another 25.6 s on the same machine
    # (stops 110 and 113), which moved target 1's ratio as much as the compaction did.
    for kind, way, runs in (("", contextlib.nullcontext, ("n1", "n2")),
                            (", lz4_raw", lambda: _session_codec(spark, "lz4_raw"), (None,))):
        for run in runs:
            label = f"[{tag}] naive rewrite{kind}" + (f" ({run})" if run else "")
            twin = fresh(os.path.join(warehouse.root, f"naive-{tag}{kind[2:]}"))
            with way():
                _timed(label, results, lambda twin=twin: _naive_rewrite(spark, twin))
            done(twin)
    results[f"[{tag}] naive rewrite"] = round(
        (results[f"[{tag}] naive rewrite (n1)"] + results[f"[{tag}] naive rewrite (n2)"]) / 2, 3)
    same = not differing
    for path in (log.path, source):  # (the next case's runs do not share the page cache with these)
        shutil.rmtree(path)
    return {"clean": clean, "updates": updates, "removed_records": outcome.removed_records,
            "checks_passed": verdict.passed and whole.passed and verdict == whole == before,
            "same_winners_as_naive": same, "setup_seconds": setup}


#: Arrow's allocator (mimalloc) without transparent huge pages, as ``framework/__init__.py``
#: ships it, and with them (mimalloc's default; as before).
HUGE_PAGES = ("no transparent huge pages", "transparent huge pages (as before)")


def bench_huge_pages(spark, warehouse, clean: int, updates: int, now: int, results: dict) -> dict:
    """The compaction section's case compacted in new processes, A B B A after a warm-up:
    Arrow's allocator as shipped against with transparent huge pages allowed (as before).
    Each process copies the case, starts its session, and is timed compacting it: a
    process's first large rewrite, as ``topiclake maintain`` makes it. The setting is read when pyarrow loads, so
    the sides cannot share a process."""
    from framework.clients.produce import produce_frame
    from framework.log.topic import Topic
    from framework.stages import compaction

    tag = _tag(clean)
    topic = Topic(spark, warehouse, _spec(f"pages-{tag}"))
    log = topic.partition(0)
    produce_frame(topic, _clean_records(spark, clean, now), now)
    compaction.execute(log, compaction.plan(log, now))
    produce_frame(topic, _updates(spark, updates, clean, now), now)
    runs: dict[str, list[dict]] = {side: [] for side in HUGE_PAGES}
    # a warm-up first, not counted: the first new process after the build spent 11 s of CPU
    # in the kernel, twice what the others did, whichever side it ran (2026-12-05; why, not known)
    for number, side in enumerate((HUGE_PAGES[0], *HUGE_PAGES, *reversed(HUGE_PAGES))):
        with tempfile.TemporaryDirectory(prefix="topiclake-huge-pages-") as scratch:
            out = os.path.join(scratch, "out.json")
            env = {**os.environ, "MIMALLOC_ALLOW_THP": "0" if side == HUGE_PAGES[0] else "1"}
            done = subprocess.run([sys.executable, os.path.abspath(__file__), "--compact-copy", log.path,
                                   "--compact-copy-topic", f"pages-{tag}", "--warehouse", os.path.join(scratch, "w"),
                                   "--json", out], env=env, capture_output=True, text=True)
            if done.returncode != 0 or not os.path.isfile(out):
                print(done.stderr[-3000:], file=sys.stderr)
                continue
            with open(out) as handle:
                runs[side].append(json.load(handle))
        last = runs[side].pop() if number == 0 else runs[side][-1] if runs[side] else {"seconds": -1, "system_cpu": -1}
        print(f"  [{tag}] compaction in a new process{', warm-up' if number == 0 else ''}, {side:<36} "
              f"{last['seconds']:8.2f} s"
              f" (CPU in the kernel {last['system_cpu']:.2f} s)", file=sys.stderr, flush=True)
    for side in HUGE_PAGES:
        if runs[side]:
            results[f"[{tag}] compaction in a new process, {side}"] = round(
                statistics.mean(run["seconds"] for run in runs[side]), 3)
            results[f"[{tag}] compaction in a new process, {side}: CPU in the kernel"] = round(
                statistics.mean(run["system_cpu"] for run in runs[side]), 3)
    removed = {run["removed_records"] for side in HUGE_PAGES for run in runs[side]}
    return {"clean": clean, "updates": updates, "runs_completed": {side: len(r) for side, r in runs.items()},
            "same_removed_records": len(removed) == 1}


def compact_copy(source: str, topic_name: str, folder: str, out: str) -> None:
    """The child of :func:`bench_huge_pages`: ``source`` copied as partition 0 of
    ``topic_name`` in a new warehouse at ``folder``, and compacted, timed."""
    import resource

    from framework.log.topic import Topic
    from framework.log.warehouse import Warehouse
    from framework.session import get_session
    from framework.stages import compaction

    spark = get_session("topiclake-benchmark-huge-pages")
    log = Topic(spark, Warehouse.resolve(folder), _spec(topic_name)).partition(0)
    shutil.copytree(source, log.path)
    os.sync()  # the copy's writeback is not the compaction's
    now = int(time.time() * 1000)
    planned = compaction.plan(log, now)
    before, started = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    outcome = compaction.execute(log, planned, run_id="benchmark")
    seconds, after = time.perf_counter() - started, resource.getrusage(resource.RUSAGE_SELF)
    with open(out, "w") as handle:
        json.dump({"seconds": round(seconds, 3), "system_cpu": round(after.ru_stime - before.ru_stime, 3),
                   "user_cpu": round(after.ru_utime - before.ru_utime, 3),
                   "removed_records": outcome.removed_records}, handle)


@dataclass(frozen=True)
class TwinKind:
    """A pair of ways the partitions section runs on twin topics, A (``sides[0]``, as shipped)
    against B (``sides[1]``, as before or the other setting), and the ratio reported."""

    name: str
    sides: tuple[str, str]
    #: the ratio's label; the ratio is A over B, or B over A when ``b_over_a``
    ratio: str
    #: what side B runs under (side A runs as shipped)
    other_way: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext
    #: each side's options of ``Maintenance.run``
    a_options: tuple[tuple[str, object], ...] = ()
    b_options: tuple[tuple[str, object], ...] = ()
    history: bool = False
    policy: str = "compact"
    #: the twins' produce is timed too (the way touches how records are written)
    produce_timed: bool = False
    b_over_a: bool = False
    #: the twins' ``time.travel.retention.ms`` (None: the spec's default)
    time_travel_ms: int | None = None

    def way(self, b: bool) -> contextlib.AbstractContextManager:
        return self.other_way() if b else contextlib.nullcontext()

    def options(self, b: bool) -> dict:
        return dict(self.b_options if b else self.a_options)

    def ratio_of(self, label: str, results: dict) -> float | None:
        """The ratio of the two sides' means of ``label`` (None if the kind did not run, or the
        side it divides by took no measurable time, as a plan with nothing to read may)."""
        a, b = (results.get(f"{label}, {side}") for side in self.sides)
        if a is None or b is None or (a if self.b_over_a else b) == 0:
            return None
        return round(b / a if self.b_over_a else a / b, 2)


#: The partitions section's twin kinds (``--twins`` names them).
TWIN_KINDS = (
    TwinKind("measure", ("measured from the commits", "measured by a scan"),
             "measured from the commits / by a scan", lambda: _measure_scanned()),
    TwinKind("clean", ("empty clean section skipped", "empty clean section joined"),
             "empty clean section skipped / joined", lambda: _empty_clean_section_joined()),
    TwinKind("retention", ("retention planned from the metadata", "retention planned by a scan"),
             "retention planned from the metadata / by a scan", lambda: _retention_scanned(),
             history=True, policy="delete"),
    TwinKind("threads", ("one cleaner thread", "two cleaner threads"), "two cleaner threads / one",
             a_options=(("cleaner_threads", 1),), b_options=(("cleaner_threads", 2),), b_over_a=True),
    TwinKind("files", ("files from the version checksum", "files listed by Delta"),
             "files from the version checksum / listed by Delta", lambda: _files_listed_by_delta()),
    TwinKind("history", ("history appended per run", "history appended per partition"),
             "history appended per run / per partition", lambda: _history_per_partition(), history=True),
    TwinKind("claims", ("claims through the transaction API", "claims by DataFrame writes"),
             "claims through the transaction API / by DataFrame writes", lambda: _claims_by_dataframe_writes(),
             produce_timed=True),
    TwinKind("codegen", ("interpreted when small", "compiled always"), "interpreted when small / compiled always",
             lambda: _compiled_always()),
    TwinKind("rewrite", ("compaction written through the transaction API", "compaction by Delta's MERGE"),
             "compaction through the transaction API / by MERGE", lambda: _committed_by_merge()),
    TwinKind("shuffle", ("one shuffle partition when small", "the session's shuffle settings"),
             "one shuffle partition when small / the session's shuffle settings", lambda: _sessions_shuffles()),
    TwinKind("cut", ("retention cut through the transaction API", "retention cut by Delta's DELETE"),
             "retention cut through the transaction API / by Delta's DELETE", lambda: _cut_by_delete(),
             policy="delete"),
    TwinKind("touched", ("touched files named by the totals", "touched files found by a pass"),
             "touched files named by the totals / found by a pass", lambda: _touched_found_by_a_pass()),
    TwinKind("properties", ("properties read from the version checksum", "properties by SHOW TBLPROPERTIES"),
             "properties read from the version checksum / by SHOW TBLPROPERTIES", lambda: _properties_shown()),
    TwinKind("debugging", ("DataFrame debugging off", "DataFrame debugging on"), "DataFrame debugging off / on",
             lambda: _dataframe_debugging_on(), produce_timed=True),
    TwinKind("zone", ("the JVM in UTC", "the JVM in Europe/Berlin"), "the JVM in UTC / in Europe/Berlin",
             lambda: _jvm_outside_utc(), produce_timed=True),
    TwinKind("batch", ("compactions decided together", "compactions decided alone"),
             "compactions decided together / alone", lambda: _decided_alone()),
    # a compaction and a retention cut a partition (the "cut" twins' retention), each rewrite
    # and bin-packing committed by topiclake itself against through Delta's transaction
    TwinKind("own_rewrite", ("rewrites committed without the JVM", "rewrites committed through Delta's transaction"),
             "rewrites committed without the JVM / through Delta's transaction", lambda: _rewrites_through_delta(),
             policy="compact,delete"),
    # the same, with no time-travel window: each first maintain also vacuums the files the
    # rewrites replaced, by topiclake itself against by Delta's VACUUM
    TwinKind("own_vacuum", ("vacuumed without the JVM", "vacuumed by Delta's VACUUM"),
             "vacuumed without the JVM / by Delta's VACUUM", lambda: _vacuumed_by_delta(),
             policy="compact,delete", time_travel_ms=0),
)

#: The ways ``_produce_twins`` writes the same lines into existing tables.
PRODUCE_TWINS = (
    TwinKind("writer", ("rows written by Arrow", "rows written by Spark"), "rows written by Arrow / by Spark",
             lambda: _rows_written_by_spark()),
    TwinKind("lists", ("Java lists read by index", "Java lists iterated"), "Java lists read by index / iterated",
             lambda: _java_lists_iterated()),
)
#: The ways a first produce makes its new partitions' tables (the ``new_tables`` section).
NEW_TABLE_TWINS = TwinKind("new_tables", ("tables created by the first appends", "tables created before the appends"),
                           "tables created by the first appends / before them", lambda: _created_before_the_appends())
#: The ways bin-packing finds and writes a group's files (the ``packing`` section).
PACKING_TWINS = TwinKind("packing", ("written by Arrow", "written by Spark's writer"),
                         "written by Arrow / by Spark's writer", lambda: _packed_by_spark())
#: The ways committed offsets are written and read (the ``offsets`` section).
OFFSETS_TWINS = TwinKind("offsets", ("read and written by Arrow", "written and read by Spark"),
                         "by Arrow / by Spark", lambda: _offsets_by_spark())
OFFSETS_LABEL = "offset commits and reads"
#: The ways a history prune vacuums topiclake's own tables (the ``prunes`` section).
PRUNE_TWINS = TwinKind("prunes", ("pruned by Arrow", "pruned by Spark's MERGE"),
                       "by Arrow / by Spark's MERGE", lambda: _pruned_by_spark())
PRUNES_LABEL = "history appends and prunes"
#: How an idle ``topiclake maintain`` in a new process prunes or packs the history (the
#: ``prunes`` section's commands).
HISTORY_COMMAND_TWINS = TwinKind("prunes", ("without the JVM", "through the JVM"), "without / through the JVM")
#: How a small partition's measure is scanned when its commits cannot settle it.
YOUNG_HEAD_TWINS = TwinKind("young_heads", ("read by Arrow", "scanned by Spark"), "read by Arrow / scanned by Spark",
                            lambda: _scanned_by_spark())
YOUNG_HEADS_LABEL = "compaction plans of partitions with young records"
YOUNG_HEADS_DUE_LABEL = "first maintain of partitions with young records and a due dirty section"
#: The way ``_produce_twins`` creates the tables of new twin topics.
CREATE_TWINS = TwinKind("create", ("through the transaction API", "by Delta's table builder"),
                        "through the transaction API / by Delta's table builder", lambda: _created_by_builder())


#: The partitions section's checked first maintains: the small partitions' checks counted in
#: batches (as shipped) against each measured at once (as before stop 64), and against the
#: compact topic's compaction checks counted by Spark's batch too (as before stop 101: now by
#: Arrow), the compact,delete topic's retention checks (as before stop 102: now by Arrow).
BATCHED, AT_ONCE = "two cleaner threads", "two cleaner threads, each check measured at once (as before)"
SPARK_COUNTED = "two cleaner threads, compaction checks counted by Spark (as before stop 101)"
RETENTIONS_BY_SPARK = "two cleaner threads, retention checks counted by Spark (as before stop 102)"
#: the label prefix of the checked first maintains of the partitions section's compact,delete topic
RETAINED = "compact,delete: "


def bench_partitions(spark, warehouse, partitions: int, now: int, results: dict,
                     twin_kinds: list[str] | None = None) -> dict:
    from framework.checks.guarantees import Guarantees
    from framework.clients.produce import produce
    from framework.clients.records import parse_records
    from framework.log.topic import Topic
    from framework.stages.maintenance import Maintenance

    topic = Topic(spark, warehouse, _spec("wide", partitions))
    lines = [(i, {"key": f"user-{i % 1000}", "value": f"v{i}", "timestamp": now - DAY_MS + i}) for i in range(5000)]
    # the process's first Spark work compiles most of what the rest runs: a small topic
    # takes it, so that the figures below are the session's once it is up (as the issue's are)
    warm = Topic(spark, warehouse, _spec("warm-up", 4))
    _timed("warm-up: produce 200 lines into 4 partitions and maintain them", results, lambda: (
        produce(warm, parse_records(lines[:200], warm.spec, "benchmark"), now),
        Maintenance(spark, warehouse, [warm.spec], record_history=False).run(now)))
    # and the checks' first run (Great Expectations' project, the checks' queries)
    warm_checked = Topic(spark, warehouse, _spec("warm-up-checked", 4))
    _timed("warm-up: the same with checks and history", results, lambda: (
        produce(warm_checked, parse_records(lines[:200], warm_checked.spec, "benchmark"), now),
        Maintenance(spark, warehouse, [warm_checked.spec], validator=Guarantees(spark, warehouse)
                    ).run(now, cleaner_threads=2)))
    _timed(f"produce 5000 lines into {partitions} partitions", results,
           lambda: produce(topic, parse_records(lines, topic.spec, "benchmark"), now))
    maintenance = Maintenance(spark, warehouse, [topic.spec], record_history=False)
    first = _timed(f"first maintain of {partitions} partitions", results, lambda: maintenance.run(now))
    idle = _timed(f"idle maintain of {partitions} partitions", results, lambda: maintenance.run(now))
    # the same topic's twin maintained as the quick start maintains (``--cleaner-threads 2``)
    threaded = Topic(spark, warehouse, _spec("wide-threads", partitions))
    produce(threaded, parse_records(lines, threaded.spec, "benchmark"), now)
    first_threaded = _timed(f"first maintain of {partitions} partitions, two cleaner threads", results,
                            lambda: Maintenance(spark, warehouse, [threaded.spec], record_history=False).run(
                                now, cleaner_threads=2))
    failed = first.failed or idle.failed or first_threaded.failed
    same = all(_offsets(topic.partition(p)) == _offsets(threaded.partition(p)) for p in range(partitions))
    # The same first maintain as the command line runs it: every stage checked by the
    # guarantees, the history recorded. With two cleaner threads, the checks counted in
    # batches (as shipped) against each measured at once (as before), A B B A (each side's
    # mean is its figure); then one thread.
    # Then the same A B B A on a compact,delete topic whose time retention removes the older
    # half of what the compaction keeps (its survivors' timestamps span the last 1,000 ms of
    # the 5 s from a day ago): a compaction and a retention checked a partition.
    checked = f"first maintain of {partitions} partitions with checks and history"
    for prefix, policy, retention_ms in (("", "compact", None), (RETAINED, "compact,delete", DAY_MS - 4_500)):
        before = (RETENTIONS_BY_SPARK, 2, _retentions_counted_by_spark) if prefix else (
            SPARK_COUNTED, 2, _counted_by_spark)
        runs = ((BATCHED, 2, contextlib.nullcontext), (AT_ONCE, 2, _each_check_at_once), before, before,
                (AT_ONCE, 2, _each_check_at_once), (BATCHED, 2, contextlib.nullcontext))
        sides = runs if prefix else (*runs, ("one cleaner thread", 1, contextlib.nullcontext))
        taken: dict[str, int] = {}
        for run, (name, threads, way) in enumerate(sides):
            twin = Topic(spark, warehouse, _spec(f"wide-checked-{policy.replace(',', '-')}-{run}", partitions,
                                                 policy, retention_ms))
            produce(twin, parse_records(lines, twin.spec, "benchmark"), now)
            taken[name] = taken.get(name, 0) + 1
            # a side run twice is labelled by its turn, and its figure is the mean of both
            label = f"{prefix}{checked}, {name}" + (f" ({taken[name]})" if name != "one cleaner thread" else "")
            with way():
                done = _timed(label, results, lambda: Maintenance(
                    spark, warehouse, [twin.spec], validator=Guarantees(spark, warehouse)
                ).run(now, cleaner_threads=threads))
            failed = failed or done.failed
            # the compact topic's twins hold what the first maintain left; the compact,delete
            # topic's, what its first twin holds: fewer records than the compaction left
            held = [_offsets(twin.partition(p)) for p in range(partitions)]
            compacted = [_offsets(topic.partition(p)) for p in range(partitions)]
            first = held if run == 0 else first
            same = same and held == first and (held == compacted if not prefix else all(
                set(kept) <= set(survivors) for kept, survivors in zip(held, compacted))
                and sum(map(len, held)) < sum(map(len, compacted)))
        for name in (BATCHED, AT_ONCE, before[0]):
            results[f"{prefix}{checked}, {name}"] = round(
                (results[f"{prefix}{checked}, {name} (1)"] + results[f"{prefix}{checked}, {name} (2)"]) / 2, 3)
    # Twin topics of a quarter of the partitions each, the same records, first maintains in
    # the order A B B A so that neither side gets the JVM's warm-up; both sides must end
    # with the same offsets. The measure from the commit metadata against a scan of the records
    # past the checkpoint (as before the append commits carried their bytes and oldest
    # timestamp); one cleaner thread against two; and so on.
    quarter = max(1, partitions // 4)
    more = [(i, {**line, "timestamp": now - DAY_MS + 5000 + i}) for i, line in lines]
    _timed(f"produce 5000 more lines into the {partitions} partitions", results,
           lambda: produce(topic, parse_records(more, topic.spec, "benchmark"), now))
    same = _produce_twins(spark, warehouse, quarter, lines[:5000 * quarter // partitions], now, results) and same
    for twin_kind in TWIN_KINDS:
        kind, sides, history, policy = twin_kind.name, twin_kind.sides, twin_kind.history, twin_kind.policy
        if twin_kinds is not None and kind not in twin_kinds:
            continue
        # the "cut" twins keep the newer half of each partition's records (their timestamps
        # span the 5 s from a day ago); the others' retention keeps every record
        retention_ms = DAY_MS - 2_500 if kind in ("cut", "own_rewrite", "own_vacuum") else None
        window = {} if twin_kind.time_travel_ms is None else {"time.travel.retention.ms": twin_kind.time_travel_ms}
        twins = {name: Topic(spark, warehouse, _spec(f"wide-{kind}-{name}", quarter, policy, retention_ms, **window))
                 for name in ("a1", "b1", "b2", "a2")}
        for name, twin in twins.items():
            records = parse_records(lines[:5000 * quarter // partitions], twin.spec, "benchmark")
            if not twin_kind.produce_timed:
                produce(twin, records, now)
                continue
            side = sides[name.startswith("b")]
            with twin_kind.way(name.startswith("b")):
                _timed(f"produce {len(records)} lines into {quarter} partitions, {side} ({name})", results,
                       lambda: produce(twin, records, now))
        if twin_kind.produce_timed:
            _mean_of_twins(results, f"produce {len(records)} lines into {quarter} partitions", sides)
        for run in ("first", "idle"):
            for name, twin in twins.items():
                other_way = name.startswith("b")
                with twin_kind.way(other_way):
                    failed = _timed(f"{run} maintain of {quarter} partitions, {sides[other_way]} ({name})", results,
                                    lambda: Maintenance(spark, warehouse, [twin.spec], record_history=history).run(
                                        now, **twin_kind.options(other_way))).failed or failed
            _mean_of_twins(results, f"{run} maintain of {quarter} partitions", sides)
        same = _same_offsets(twins, quarter) and same
    return {"partitions": partitions, "first_failed": failed or not same, "idle_failed": idle.failed,
            "same_records_either_way": same}


def _produce_twins(spark, warehouse, partitions: int, lines, now: int, results: dict) -> bool:
    """The same lines into twin topics whose tables exist, A B B A, for each pair of ways:
    the driver's rows written by Arrow against by Spark's ``writeFiles`` (as before stop
    74); Java lists read by index against iterated through py4j (as before: the iterator
    ends in a Java exception that pyspark converts). The creates' twins both go through
    Delta (``_created_through_delta``), the way they compare. The same offsets every way."""
    from framework.clients.produce import produce
    from framework.clients.records import parse_records
    from framework.log.topic import Topic

    create, sides = f"create {partitions} partition tables", CREATE_TWINS.sides
    for name in ("a1", "b1", "b2", "a2"):
        twin = Topic(spark, warehouse, _spec(f"wide-create-{name}", partitions))
        as_before = name.startswith("b")
        with _created_through_delta(), CREATE_TWINS.way(as_before):
            _timed(f"{create}, {sides[as_before]} ({name})", results, twin.ensure)
    _mean_of_twins(results, create, sides)
    label = f"produce {len(lines)} lines into {partitions} partitions"
    same = True
    for kind in PRODUCE_TWINS:
        twins = {name: Topic(spark, warehouse, _spec(f"wide-{kind.name}-{name}", partitions))
                 for name in ("a1", "b1", "b2", "a2")}
        for name, twin in twins.items():
            twin.ensure()
            records = parse_records(lines, twin.spec, "benchmark")
            as_before = name.startswith("b")
            with kind.way(as_before):
                _timed(f"{label}, {kind.sides[as_before]} ({name})", results, lambda: produce(twin, records, now))
        _mean_of_twins(results, label, kind.sides)
        same = _same_offsets(twins, partitions) and same
    return same


@contextlib.contextmanager
def _created_by_builder():
    """Create tables as topiclake did before: Delta's ``DeltaTable.createIfNotExists``."""
    from framework.log import delta_create

    def by_builder(delta, path, schema, properties, partition_columns=(), description=None):
        return delta_create._create_by_builder(delta.spark, path, schema, properties, partition_columns, description)

    with mock.patch.object(delta_create, "_create_in", by_builder):
        yield


@contextlib.contextmanager
def _created_through_delta():
    """A started session's create through Delta, as before stop 104 (since then topiclake
    commits it itself, the session up or not): both sides of ``CREATE_TWINS``, which compare
    Delta's transaction API with its table builder, run under it (from stop 104 to 110 both
    sides were topiclake's own commit, and their ratio measured nothing)."""
    from framework.log import own_commits

    with mock.patch.object(own_commits, "created", lambda *args, **options: None):
        yield


@contextlib.contextmanager
def _created_before_the_appends():
    """Create every table of a new topic before a produce appends, as topiclake did before
    stop 68 (a create commit, then the append's)."""
    from framework.log.topic import Topic

    ensure = Topic.ensure
    with mock.patch.object(Topic, "ensure", lambda self, appending_to=frozenset(): ensure(self)):
        yield


def bench_new_tables(spark, warehouse, partitions: int, now: int, results: dict) -> dict:
    """A first produce of 5,000 lines into new topics of ``partitions`` partitions, in this
    process: a warm-up, then twins A B B A, A with each table created by its first append's
    commit (as shipped), B with the tables created first (as before). Each pair of twins
    must hold the same offsets."""
    from framework.clients.produce import produce
    from framework.clients.records import parse_records
    from framework.log.topic import Topic

    lines = [(i, {"key": f"user-{i % 1000}", "value": f"v{i}", "timestamp": now - DAY_MS + i}) for i in range(5000)]
    label, kind = f"first produce of 5000 lines into {partitions} new partitions", NEW_TABLE_TWINS
    twins = {}
    for name in ("warm-up", "a1", "b1", "b2", "a2"):
        twin = twins[name] = Topic(spark, warehouse, _spec(f"new-tables-{name}", partitions))
        records = parse_records(lines, twin.spec, "benchmark")
        as_before = name.startswith("b")
        with kind.way(as_before):
            _timed(f"{label}, {kind.sides[as_before]} ({name})", results, lambda: produce(twin, records, now))
    _mean_of_twins(results, label, kind.sides)
    return {"same_offsets": _same_offsets(twins, partitions)}


def _packed_by_spark():
    """Bin-pack as topiclake did before stop 94: each group's file written by Spark's
    Parquet writer (Delta's ``writeFiles``), not by Arrow."""
    from framework.stages import arrow_rewrite

    return mock.patch.object(arrow_rewrite, "packed", lambda *args: None)


def bench_packing(spark, warehouse, partitions: int, now: int, results: dict) -> dict:
    """Bin-packing of ``partitions`` small partitions of six files each, in this process: a
    warm-up, then twins A B B A (``PACKING_TWINS``), one thread. Every partition must go from
    six files to one, and each pair of twins hold the same records."""
    from framework.clients.produce import produce
    from framework.clients.records import parse_records
    from framework.log import version_checksum
    from framework.log.topic import Topic
    from framework.stages import optimize

    label, kind = f"bin-packing of {partitions} partitions of six files", PACKING_TWINS
    twins, packed = {}, True
    for name in ("warm-up", "a1", "b1", "b2", "a2"):
        twin = twins[name] = Topic(spark, warehouse, _spec(f"packing-{name}", partitions, policy="delete",
                                                           retention_ms=-1))
        for call in range(6):  # a file per call in each partition
            lines = [(i, {"key": f"k{i}", "value": f"v{call}.{i}", "timestamp": now - DAY_MS + i})
                     for i in range(50 * partitions)]
            produce(twin, parse_records(lines, twin.spec, "benchmark"), now)
        logs = twin.partitions()
        plans = [optimize.plan(log) for log in logs]
        packed &= all(plan.due and plan.files_before == 6 for plan in plans)
        as_before = name.startswith("b")
        with kind.way(as_before):
            _timed(f"{label}, {kind.sides[as_before]} ({name})", results,
                   lambda: [optimize.execute(log, plan) for log, plan in zip(logs, plans)])
        packed &= all(version_checksum.file_count(log.path, log.snapshot().version) == 1 for log in logs)
    _mean_of_twins(results, label, kind.sides)
    return {"six_files_packed_into_one": packed, "same_records": all(
        sorted(twins[a].partition(p).read().collect()) == sorted(twins[b].partition(p).read().collect())
        for a, b in (("a1", "b1"), ("a2", "b2")) for p in range(partitions))}


#: The checkpoint intervals of the ``checkpoints`` section.
CHECKPOINT_TWINS = TwinKind("checkpoints", ("a checkpoint every 100 commits", "a checkpoint every 10 commits"),
                            "a checkpoint every 100 commits / every 10", lambda: _checkpoints_every_10())


@contextlib.contextmanager
def _checkpoints_every_10():
    """Partition tables checkpointing at Delta's default interval, as before stop 76 (in
    force at their creation and at every maintain, which brings the properties in line)."""
    from framework.log import warehouse

    with mock.patch.object(warehouse, "CHECKPOINT_INTERVAL", 10):
        yield


def bench_checkpoints(spark, warehouse, partitions: int, calls: int, now: int, results: dict) -> dict:
    """``calls`` produce calls of 5,000 lines into twin topics, a maintain after every fifth
    (its commits count towards the checkpoints too), the twins' calls interleaved A B B A in
    each round; each side's total, and its slowest produce call (the one whose commits
    checkpoint every partition)."""
    from framework.clients.produce import produce
    from framework.clients.records import parse_records
    from framework.log.topic import Topic
    from framework.stages.maintenance import Maintenance

    lines = [(i, {"key": f"user-{i % 1000}", "value": f"v{i}", "timestamp": now - DAY_MS + i}) for i in range(5000)]
    kind, label = CHECKPOINT_TWINS, f"{calls} produce calls into {partitions} partitions, a maintain every fifth"
    twins = {name: Topic(spark, warehouse, _spec(f"checkpoints-{name}", partitions))
             for name in ("a1", "b1", "b2", "a2")}
    spent = dict.fromkeys(twins, 0.0)
    slowest = dict.fromkeys(twins, 0.0)
    for call in range(calls):
        for name, twin in twins.items():
            with kind.way(name.startswith("b")):
                started = time.perf_counter()
                produce(twin, parse_records(lines, twin.spec, "benchmark"), now + call)
                took = time.perf_counter() - started
                if call % 5 == 4:
                    Maintenance(spark, warehouse, [twin.spec], record_history=False).run(now + call)
                spent[name] += time.perf_counter() - started
                slowest[name] = max(slowest[name], took)
    _twin_results(results, kind, {label: spent, "slowest produce call": slowest})
    intervals = {name: twin.partition(0).properties().get("delta.checkpointInterval") for name, twin in twins.items()}
    return {"label": label, "intervals": intervals, "same_offsets": _same_offsets(twins, partitions)}


#: How the history's size of a delete-only log is known after a cut inside an append (``cuts``).
CUT_TWINS = TwinKind("cuts", ("the size counted by the cut", "the size scanned"),
                     "the size counted by the cut / scanned", lambda: _size_scanned_after_cuts())


def _size_scanned_after_cuts():
    """The log's size as topiclake knew it before stop 77: a cut inside an append left only
    a scan to say it (the history's size columns), every run until the next cut."""
    from framework.log import log_state

    return mock.patch.object(log_state, "size_after_cut", lambda *args: None)


#: How a compacted log past its checkpoint is measured after more appends than the first
#: page of its history holds (``pages``).
PAGE_TWINS = TwinKind("pages", ("the next page read", "scanned"), "the next page read / scanned",
                      lambda: _no_next_page())


def _no_next_page():
    """Measure as topiclake did before stop 77: when the newest 16 commits did not reach back
    to the checkpoint, the records past it were scanned."""
    from framework.log import partition_log

    return mock.patch.object(partition_log, "appends_reach", lambda *args: True)


def bench_pages(spark, warehouse, rounds: int, now: int, results: dict) -> dict:
    """Twin compacted topics of one partition, a clean section of 100,000 keys, then
    ``rounds`` rounds of 30 produce calls of 100 records each and a maintain (history on):
    never due (the dirty ratio stays far below 0.5), so the maintain only measures. The
    twins interleaved A B B A each round; each side's maintain time. The twins must hold
    the same offsets and their history the same sizes."""
    from framework.clients.produce import produce, produce_frame
    from framework.clients.records import parse_records
    from framework.log.topic import Topic
    from framework.spec import parse_spec
    from framework.stages.maintenance import Maintenance

    config = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": 0.5, "delete.retention.ms": DAY_MS}
    kind, label = PAGE_TWINS, f"{rounds} maintain runs, each after 30 produce calls"
    twins = {name: Topic(spark, warehouse, parse_spec({"topic": f"pages-{name}", "partitions": 1, "config": config},
                                                      "benchmark")) for name in ("a1", "b1", "b2", "a2")}
    for twin in twins.values():
        produce_frame(twin, _clean_records(spark, 100_000, now), now)
        Maintenance(spark, warehouse, [twin.spec], record_history=False).run(now, force=True)
    spent = dict.fromkeys(twins, 0.0)
    for round_ in range(rounds):
        for call in range(30):
            lines = [(i, {"key": f"key-{(round_ * 3000 + call * 100 + i) * 7 % 100_000}", "value": f"v{round_}.{call}",
                          "timestamp": now - DAY_MS}) for i in range(100)]
            for twin in twins.values():
                produce(twin, parse_records(lines, twin.spec, "benchmark"), now)
        for name, twin in twins.items():
            with kind.way(name.startswith("b")):
                started = time.perf_counter()
                Maintenance(spark, warehouse, [twin.spec]).run(now + round_)
                spent[name] += time.perf_counter() - started
    _twin_results(results, kind, {label: spent})
    sizes = _history_sizes(spark, warehouse, twins, "compact", "due")
    return {"label": label, "same_offsets": _same_offsets(twins, 1),
            "same_sizes": len(set(sizes.values())) == 1 and len(sizes["a1"]) == rounds,
            "due_runs": sum(1 for r in sizes["a1"] if r[-1])}


IDLE_CUT_RUNS = 5

#: How size retention knows a log's bytes while it fits (``size_retention``).
SIZE_TWINS = TwinKind("size_retention", ("bytes from the metadata", "bytes scanned"),
                      "bytes from the metadata / scanned", lambda: _bytes_scanned())


def _bytes_scanned():
    """Size retention as topiclake planned it before stop 77: the log's bytes summed by a scan
    in every run, due or not."""
    from framework.stages import retention_size

    return mock.patch.object(retention_size, "bytes_from", lambda snap, records, start: records().where(
        f"`offset` >= {int(start)}").selectExpr("sum(_size) AS b").collect()[0]["b"] or 0)


def bench_size_retention(spark, warehouse, runs: int, now: int, results: dict) -> dict:
    """Twin delete-only topics of one partition with ``retention.bytes`` above what they hold,
    1,000,000 records produced in one call, then ``runs`` maintains (history on, nothing
    due) of each, A B B A each round; each side's time, and its median run (the history's
    prune, every 50th of its commits, lands on one twin's run). The twins must hold the same
    offsets."""
    from framework.clients.produce import produce_frame
    from framework.log.topic import Topic
    from framework.spec import parse_spec
    from framework.stages.maintenance import Maintenance

    config = {"cleanup.policy": "delete", "retention.ms": -1, "retention.bytes": 10 ** 12}
    kind, label = SIZE_TWINS, f"{runs} idle maintain runs of 1,000,000 records under retention.bytes"
    twins = {name: Topic(spark, warehouse, parse_spec({"topic": f"bytes-{name}", "partitions": 1, "config": config},
                                                      "benchmark")) for name in ("a1", "b1", "b2", "a2")}
    for twin in twins.values():
        produce_frame(twin, _clean_records(spark, 1_000_000, now), now)
        Maintenance(spark, warehouse, [twin.spec]).run(now)  # bin-packing and the like, once
    took: dict[str, list[float]] = {name: [] for name in twins}
    for run in range(runs):
        for name, twin in twins.items():
            with kind.way(name.startswith("b")):
                started = time.perf_counter()
                Maintenance(spark, warehouse, [twin.spec]).run(now + run + 1)
                took[name].append(time.perf_counter() - started)
    median_label = "the median idle maintain run under retention.bytes"
    _twin_results(results, kind, {label: {name: sum(times) for name, times in took.items()},
                                  median_label: {name: statistics.median(times) for name, times in took.items()}})
    return {"label": label, "median_label": median_label, "same_offsets": _same_offsets(twins, 1)}


#: About the bytes (``_size``: key and value) of a record ``bench_cuts`` produces.
CUT_RECORD_BYTES = 17


def bench_cuts(spark, warehouse, runs: int, now: int, results: dict, kind: TwinKind = CUT_TWINS,
               per_minute: int = 50_000, rule: str = "time") -> dict:
    """``runs`` minutes of a delete-only topic (five minutes' retention) on twin topics of one
    partition (after a warm-up topic's cut): a produce of ``per_minute`` records a minute,
    their timestamps spread over it, then a maintain (history on, as shipped) half a minute
    on, so that every retention cut lands inside an append; then idle maintains at the last
    run's clock. With ``rule`` "consumed", the five minutes are consumed retention's (KIP-68,
    no time retention), and a consumer group that has read the whole log commits its offset
    before each maintain; with "size", size retention keeps about five minutes' bytes (no
    time retention). The twins interleaved
    A B B A each round; each side's maintain time, busy and idle. The twins must hold the
    same offsets, and the history's size columns must agree."""
    from framework.clients.produce import produce
    from framework.clients.records import parse_records
    from framework.log.consumer_offsets import ConsumerOffsets
    from framework.log.topic import Topic
    from framework.stages import retention as retention_stage
    from framework.stages.maintenance import Maintenance

    minute = 60_000
    label = f"{runs} maintain runs of a delete-only topic, each cutting inside an append"
    consumed = rule == "consumed"
    retention = {"time": {"retention_ms": 5 * minute},
                 "consumed": {"retention_ms": -1, "consumed.retention.ms": 5 * minute,
                              "consumed.retention.groups": ["reader"]},
                 "size": {"retention_ms": -1, "retention.bytes": 5 * per_minute * CUT_RECORD_BYTES}}[rule]
    twins = {name: Topic(spark, warehouse, _spec(f"{kind.name}-{name}", 1, "delete", **retention))
             for name in ("a1", "b1", "b2", "a2")}
    offsets = ConsumerOffsets(spark, warehouse)

    def read_to_the_end(topic):  # the group has read every record produced so far
        if consumed:
            offsets.commit("reader", topic.spec.topic, 0, topic.partition(0).snapshot().state.log_end_offset)

    # a warm-up topic first, cut inside an append once: the process's first cut compiles
    # Spark's planner for every twin's path, and would land on the first twin's clock
    warm_up = Topic(spark, warehouse, _spec(f"{kind.name}-warm-up", 1, "delete", **retention))
    for minutes_ago in (7, 3):
        produce(warm_up, parse_records([(i, {"key": f"user-{i}", "value": "w", "timestamp": now - minutes_ago * minute
                                             + i * 10}) for i in range(1000)], warm_up.spec, "benchmark"), now)
    read_to_the_end(warm_up)
    Maintenance(spark, warehouse, [warm_up.spec]).run(now)
    spent = dict.fromkeys(twins, 0.0)
    for run in range(runs):
        start = now + run * minute
        lines = [(i, {"key": f"user-{i % 1000}", "value": f"v{run}.{i}",
                      "timestamp": start + i * minute // per_minute}) for i in range(per_minute)]
        for name, twin in twins.items():
            produce(twin, parse_records(lines, twin.spec, "benchmark"), start)
            read_to_the_end(twin)
            with kind.way(name.startswith("b")):
                started = time.perf_counter()
                Maintenance(spark, warehouse, [twin.spec]).run(start + minute // 2)
                spent[name] += time.perf_counter() - started
    # then idle runs at the last run's clock: nothing due, only the history's size to know
    idle_label, idle = f"{IDLE_CUT_RUNS} idle maintain runs after them", {name: [] for name in twins}
    for _ in range(IDLE_CUT_RUNS):
        for name, twin in twins.items():
            with kind.way(name.startswith("b")):
                started = time.perf_counter()
                Maintenance(spark, warehouse, [twin.spec]).run(now + (runs - 1) * minute + minute // 2)
                idle[name].append(time.perf_counter() - started)
    # then one more minute's records, and the retention plan alone (it writes nothing), timed
    # apart from the cut's rewrite: what the boundary's read costs
    plan_label, plans, planned = f"the median of {IDLE_CUT_RUNS} retention plans of one more minute", {}, {}
    clock = now + runs * minute + minute // 2
    for name, twin in twins.items():
        lines = [(i, {"key": f"user-{i % 1000}", "value": f"v{runs}.{i}",
                      "timestamp": clock - minute // 2 + i * minute // per_minute}) for i in range(per_minute)]
        produce(twin, parse_records(lines, twin.spec, "benchmark"), clock)
        plans[name] = []
    for _ in range(IDLE_CUT_RUNS):
        for name, twin in twins.items():
            log = twin.partition(0)
            committed = {"reader": log.snapshot().state.log_end_offset} if consumed else None
            with kind.way(name.startswith("b")):
                started = time.perf_counter()
                planned[name] = retention_stage.plan(log, clock, committed).boundaries
                plans[name].append(time.perf_counter() - started)
    # the median too: the history's prune (every 50th of its commits) lands on one twin's run
    median_label = "the median idle maintain run after them"
    _twin_results(results, kind, {label: spent, idle_label: {name: sum(times) for name, times in idle.items()},
                                  median_label: {name: statistics.median(times) for name, times in idle.items()},
                                  plan_label: {name: statistics.median(times) for name, times in plans.items()}})
    sizes = _history_sizes(spark, warehouse, twins, "retain", "removed_records")
    return {"label": label, "idle_label": idle_label, "median_label": median_label, "plan_label": plan_label,
            "same_plans": len({tuple(sorted(b.items())) for b in planned.values()}) == 1,
            "plan_cuts": bool(planned["a1"]), "same_offsets": _same_offsets(twins, 1),
            "same_sizes": len(set(sizes.values())) == 1 and len(sizes["a1"]) == runs + IDLE_CUT_RUNS,
            "cuts": sum(1 for r in sizes["a1"] if r[-1])}


#: How time retention finds its boundary (``time_boundary``).
TIME_BOUNDARY_TWINS = TwinKind("time_boundary", ("the boundary from the files' statistics", "the whole log read"),
                               "the time boundary from the statistics / the whole log read",
                               lambda: _time_boundary_by_a_whole_pass())


def _time_boundary_by_a_whole_pass():
    """Time retention's boundary as topiclake found it before stop 78: one pass over the whole log."""
    from framework.cleaner import spark_sql
    from framework.stages import retention

    return mock.patch.object(retention, "_first_kept", lambda log, snap, start, end, records, listing, since,
                             keep_from=None:
                             retention._boundary(records(), spark_sql.retention_keeps_sql(since, keep_from), start,
                                                 end, snap.state.log_end_offset))


#: How consumed retention (KIP-68) finds its boundary (``consumed_retention``).
CONSUMED_TWINS = TwinKind("consumed_retention", ("the boundary from the files' statistics", "the whole log read"),
                          "the consumed boundary from the statistics / the whole log read",
                          lambda: _consumed_boundary_by_a_whole_pass())


@contextlib.contextmanager
def _consumed_boundary_by_a_whole_pass():
    """Consumed retention as topiclake planned it before stop 79: one pass over the whole log
    in every run, even when every record was young enough to keep (the retention plan is
    the only reader of the oldest-timestamp shortcut, and this section has no time retention)."""
    from framework.cleaner import rules

    with _time_boundary_by_a_whole_pass(), mock.patch.object(rules, "all_kept_by_time", lambda bound, since: False):
        yield


#: How size retention finds its boundary over its limit (``size_cuts``).
SIZE_CUT_TWINS = TwinKind("size_cuts", ("the boundary from the oldest files", "the whole log read"),
                          "the size boundary from the oldest files / the whole log read",
                          lambda: _size_boundary_by_a_whole_pass())


#: How size retention reads a local table's oldest files (``size_oldest``).
SIZE_OLDEST_TWINS = TwinKind("size_oldest", ("the oldest files read by Arrow", "the oldest files read by Spark"),
                             "the oldest files read by Arrow / by Spark", lambda: _size_oldest_by_spark())


def _size_oldest_by_spark():
    """Size retention's oldest files read by Spark's scan, as before stop 112 (the cut's own
    counts are read as shipped)."""
    from framework.stages import retention_counts, retention_size

    shipped = retention_size.boundary_from_oldest

    def by_spark(*args):
        with mock.patch.object(retention_counts, "local_rows", lambda files: None):
            return shipped(*args)

    return mock.patch.object(retention_size, "boundary_from_oldest", by_spark)


def _size_boundary_by_a_whole_pass():
    """Size retention over its limit as topiclake planned it before stop 80: one pass over the
    whole log's offsets and sizes, then a window over the range the boundary falls in."""
    from framework.stages import retention_size

    return mock.patch.object(retention_size, "boundary_from_oldest", lambda *args: None)


#: How bin-packing lays out a log under retention (``retention_packing``).
RETENTION_PACKING_TWINS = TwinKind("retention_packing",
                                   ("packed within a tenth of retention", "packed to segment.bytes"),
                                   "packed within a tenth of retention / to segment.bytes",
                                   lambda: _packed_to_segment_bytes())


def _packed_to_segment_bytes():
    """Bin-packing as before stop 78: files up to ``segment.bytes`` whatever retention keeps."""
    from framework.stages import optimize

    return mock.patch.object(optimize, "packing_bounds", lambda config: (config.segment_bytes, None))


def _history_sizes(spark, warehouse, twins: dict, stage: str, *columns: str) -> dict[str, tuple]:
    """Each twin's history rows of ``stage``: clock, records and bytes before, ``columns``."""
    from framework.log.history import MaintenanceHistory

    rows = MaintenanceHistory(spark, warehouse).read().where(f"stage = '{stage}'").select(
        "topic", "now_ms", "records_before", "bytes_before", *columns).collect()
    return {name: tuple(sorted(tuple(r)[1:] for r in rows if r["topic"] == twin.spec.topic))
            for name, twin in twins.items()}


def bench_offsets(spark, warehouse, commits: int, results: dict) -> dict:
    """``commits`` consumer-offset commits, each followed by a read of a partition's committed
    offsets, in this process: a warm-up, then twins A B B A (``OFFSETS_TWINS``). Each pair
    of twins must hold the same committed offsets."""
    from framework.log.consumer_offsets import ConsumerOffsets
    from framework.log.warehouse import Warehouse

    label, kind = OFFSETS_LABEL, OFFSETS_TWINS
    twins = {}
    for name in ("warm-up", "a1", "b1", "b2", "a2"):
        folder = os.path.join(warehouse.root, f"offsets-{name}")
        offsets = twins[name] = ConsumerOffsets(spark, Warehouse.resolve(folder))
        offsets.commit("g0", "t", 0, 0)  # the table's create, outside the timing
        as_before = name.startswith("b")

        def commit_and_read():
            for n in range(commits):
                offsets.commit(f"g{n % 3}", "t", n % 2, n)
                offsets.committed("t", n % 2)

        with kind.way(as_before):
            _timed(f"{label}, {kind.sides[as_before]} ({name})", results, commit_and_read)
    _mean_of_twins(results, label, kind.sides)
    return {"commits": commits, "same_offsets": all(twins[a].committed("t", p) == twins[b].committed("t", p)
                                for a, b in (("a1", "b1"), ("a2", "b2")) for p in (0, 1))}


WINDOW_START_LABEL = "time-travel window starts"
WINDOW_START_SIDES = ("by a binary search", "every commit read (as before)")
NEWEST_COMMITS_LABEL = "newest commits"
NEWEST_COMMITS_SIDES = ("probed from the last checkpoint", "from a listing (as before)")
DELTA_WINDOW_START_LABEL = "time-travel window starts through Delta (other storage's route)"
DELTA_WINDOW_START_SIDES = ("by Delta's time travel", "every commit from Delta's history (as before)")


def _oldest_at_or_after(commits, since_ms: int) -> int | None:
    """The window's first version as it was found before stop 93: from every commit."""
    inside = [c.version for c in commits if c.timestamp_ms >= since_ms]
    return min(inside) if inside else None


def _window_start_by_reading_every_commit(path: str, since_ms: int) -> int | None:
    from framework.log.commit_log import local_commits

    return _oldest_at_or_after(local_commits(path), since_ms)


def _newest_version_listed():
    """The newest commit found by listing ``_delta_log`` (as before stop 93)."""
    from framework.log import commit_log

    def listed(log_folder):
        versions = commit_log._commit_versions(log_folder)
        return versions[-1] if versions else None

    return mock.patch.object(commit_log, "_newest_version", listed)


def _a_week_of_commits(spark, warehouse, commits: int, now: int) -> tuple[str, int]:
    """A table folder whose ``_delta_log`` holds ``commits`` copies of a real produce's
    commit, one every 10 s, each with its checksum, a checkpoint name every 100 and
    Delta's pointer to the newest; the folder and the first commit's time."""
    from framework.clients.produce import produce
    from framework.clients.records import parse_records
    from framework.log.commit_log import DELTA_LOG
    from framework.log.topic import Topic

    spec = _spec("window", policy="delete", retention_ms=-1)
    topic = Topic(spark, warehouse, spec)
    produce(topic, parse_records([(None, {"key": f"k{i}", "value": "v" * 200, "timestamp": now})
                                  for i in range(50)], spec, "window"), now)
    real = os.path.join(topic.partition(0).path, DELTA_LOG)
    bodies = {}
    for kind in ("json", "crc"):
        with open(os.path.join(real, max(n for n in os.listdir(real) if n.endswith("." + kind)))) as handle:
            bodies[kind] = handle.read()
    path = os.path.join(warehouse.root, "window-log")
    log = os.path.join(path, DELTA_LOG)
    os.makedirs(log)
    first_ms = now - commits * 10_000
    for version in range(commits):
        for kind, body in bodies.items():
            with open(os.path.join(log, f"{version:020d}.{kind}"), "w") as handle:
                handle.write(body)
        os.utime(os.path.join(log, f"{version:020d}.json"), ns=((first_ms + version * 10_000) * 1_000_000,) * 2)
        if version % 100 == 0:
            open(os.path.join(log, f"{version:020d}.checkpoint.parquet"), "w").close()
    with open(os.path.join(log, "_last_checkpoint"), "w") as handle:
        json.dump({"version": (commits - 1) // 100 * 100, "size": 1}, handle)
    return path, first_ms


def _window_start_from_delta_history(spark, path: str, since_ms: int) -> int | None:
    from framework.log.commit_log import _from_delta_history

    return _oldest_at_or_after(_from_delta_history(spark, path, None), since_ms)


def _a_real_log(spark, warehouse, commits: int, now: int) -> tuple[str, list[int]]:
    """A partition table of ``commits`` produces of one record (Delta checkpoints every
    100); its path and five times spread over its commits."""
    from framework.clients.produce import produce
    from framework.clients.records import parse_records
    from framework.log.commit_log import local_commits
    from framework.log.topic import Topic

    spec = _spec("window-delta", policy="delete", retention_ms=-1)
    topic = Topic(spark, warehouse, spec)
    for n in range(commits):
        produce(topic, parse_records([(None, {"key": f"k{n}", "value": "v", "timestamp": now})], spec, "w"), now)
    path = topic.partition(0).path
    times = sorted(c.timestamp_ms for c in local_commits(path))
    return path, [times[len(times) * share // 5] + 1 for share in range(5)]


def bench_window_start(spark, warehouse, commits: int, delta_commits: int, now: int, results: dict) -> dict:
    """Section 32: a ``_delta_log`` of ``commits`` copies of a real produce's commit, and
    the window's first version found for five starts spread over it, then the newest
    commits as a run asks for them; then a real table of ``delta_commits`` commits and its
    window starts by the route other storage takes; each A B B A."""
    from framework.log.commit_log import (
        HISTORY_PAGE,
        _first_version_since_by_delta,
        first_version_since,
        local_commits,
    )

    path, first_ms = _a_week_of_commits(spark, warehouse, commits, now)
    starts = [first_ms + commits * 10_000 * share // 5 + 3_000 for share in range(5)]
    real_path, real_starts = _a_real_log(spark, warehouse, delta_commits, now)

    def window_starts(as_before: bool):
        find = _window_start_by_reading_every_commit if as_before else \
            (lambda p, since: first_version_since(spark, p, since))
        return [find(path, since) for since in starts]

    def newest_commits(as_before: bool):
        # an idle run's asks of one partition: the newest commit eight times, a page twice
        with _newest_version_listed() if as_before else contextlib.nullcontext():
            return [[c.version for c in local_commits(path, limit)] for limit in [1] * 8 + [HISTORY_PAGE] * 2]

    def delta_window_starts(as_before: bool):
        find = _window_start_from_delta_history if as_before else _first_version_since_by_delta
        return [find(spark, real_path, since) for since in real_starts]

    answers: dict[str, dict] = {WINDOW_START_LABEL: {}, NEWEST_COMMITS_LABEL: {}, DELTA_WINDOW_START_LABEL: {}}
    for label, sides, measure in ((WINDOW_START_LABEL, WINDOW_START_SIDES, window_starts),
                                  (NEWEST_COMMITS_LABEL, NEWEST_COMMITS_SIDES, newest_commits),
                                  (DELTA_WINDOW_START_LABEL, DELTA_WINDOW_START_SIDES, delta_window_starts)):
        for name in ("a1", "b1", "b2", "a2"):
            as_before = name.startswith("b")
            answers[label][name] = _timed(f"{label}, {sides[as_before]} ({name})", results,
                                          lambda measure=measure, as_before=as_before: measure(as_before))
        for side, runs in zip(sides, (("a1", "a2"), ("b1", "b2")), strict=True):
            results[f"{label}, {side}"] = round(statistics.mean(results[f"{label}, {side} ({n})"] for n in runs), 3)
    return {"commits": commits, "delta_commits": delta_commits, "starts": answers[WINDOW_START_LABEL]["a1"],
            "delta_starts": answers[DELTA_WINDOW_START_LABEL]["a1"],
            "same_answers": all(answer == found["a1"] for found in answers.values() for answer in found.values())}


def bench_young_heads(spark, warehouse, partitions: int, now: int, results: dict) -> dict:
    """A topic of ``partitions`` partitions whose 5,000 records are all too young to
    compact: their commits cannot settle the measure (U may lie inside the records), so
    each partition's plan scans its version. Every partition planned in this process, the
    session up: a warm-up, then A B B A (``YOUNG_HEAD_TWINS``), each side's measures the same."""
    from framework.clients.produce import produce
    from framework.clients.records import parse_records
    from framework.log.topic import Topic
    from framework.stages import compaction

    topic = Topic(spark, warehouse, _spec("young-heads", partitions, **{"min.compaction.lag.ms": 2 * DAY_MS}))
    lines = [(i, {"key": f"user-{i % 1000}", "value": f"v{i}", "timestamp": now - DAY_MS + i}) for i in range(5000)]
    produce(topic, parse_records(lines, topic.spec, "benchmark"), now)
    logs, label, kind = topic.partitions(), YOUNG_HEADS_LABEL, YOUNG_HEAD_TWINS
    measured = {}
    for name in ("warm-up", "a1", "b1", "b2", "a2"):
        by_spark = name.startswith("b") or name == "warm-up"  # (the warm-up warms Spark's way)
        with kind.way(by_spark):
            measured[name] = _timed(f"{label}, {kind.sides[by_spark]} ({name})", results,
                                    lambda: [compaction.plan(log, now).measure for log in logs])
    _mean_of_twins(results, label, kind.sides)
    # a first maintain (no checks, no history) of twin topics whose older records are due and
    # whose newest fifth is too young: A decides their small partitions together, their plans
    # read by Arrow; B decides each alone, its plan scanned by Spark, as before stop 90
    from framework.stages.maintenance import Maintenance

    due, kept = YOUNG_HEADS_DUE_LABEL, {}
    for name in ("a1", "b1", "b2", "a2"):
        twin = Topic(spark, warehouse, _spec(f"young-due-{name}", partitions, **{"min.compaction.lag.ms": DAY_MS}))
        mixed = [(i, {**line, "timestamp": line["timestamp"] - (DAY_MS if i < 4000 else 0)}) for i, line in lines]
        produce(twin, parse_records(mixed, twin.spec, "benchmark"), now)
        as_before = name.startswith("b")
        with kind.way(as_before):  # (side B's plans, scanned by Spark, are not batched: each decides alone)
            run = _timed(f"{due}, {kind.sides[as_before]} ({name})", results,
                         lambda twin=twin: Maintenance(spark, warehouse, [twin.spec], record_history=False).run(now))
        assert not run.failed, [p.error for p in run.partitions]
        kept[name] = [sorted(r["offset"] for r in log.read().select("offset").collect()) for log in twin.partitions()]
    _mean_of_twins(results, due, kind.sides)
    return {"partitions": partitions, "heads": sum(m.head_records for m in measured["a1"]),
            "same_measures": measured["a1"] == measured["b1"] == measured["b2"] == measured["a2"],
            "same_offsets_after_first_maintain": kept["a1"] == kept["b1"] == kept["b2"] == kept["a2"]}


def bench_prunes(spark, warehouse, prunes: int, results: dict) -> dict:
    """``6 * prunes`` appends of a run's rows to the maintenance history, each beside a
    consumer-offset commit (as ``maintain`` and consumers make them), and a prune whenever
    one is due (every six history versions), in this process: a warm-up, then twins A B B A
    (``PRUNE_TWINS``). Each prune is followed by the vacuum of topiclake's own tables, which
    nothing could delete from yet here (their window is a week). Each pair of twins must
    keep the same history rows; each twin's prunes are counted."""
    from framework.log.consumer_offsets import ConsumerOffsets
    from framework.log.history import HistoryRow, MaintenanceHistory
    from framework.log.warehouse import Warehouse

    label, kind = PRUNES_LABEL, PRUNE_TWINS
    twins, pruned = {}, {}
    for name in ("warm-up", "a1", "b1", "b2", "a2"):
        place = Warehouse.resolve(os.path.join(warehouse.root, f"prunes-{name}"))
        history, offsets = twins[name] = MaintenanceHistory(spark, place), ConsumerOffsets(spark, place)
        offsets.commit("g", "t", 0, 0)  # the tables' creates, outside the timing
        history.append([HistoryRow(run_id="r0", run_started_ms=0, now_ms=0, topic="t", partition=0, stage="compact",
                                   committed=True, version_before=0, version_after=1)])
        as_before = name.startswith("b")

        def append_and_prune():
            for run in range(1, 6 * prunes + 1):
                history.append([HistoryRow(run_id=f"r{run}", run_started_ms=run, now_ms=run, topic="t", partition=0,
                                           stage="compact", committed=run % 5 == 0, version_before=run,
                                           version_after=run + 1)])
                offsets.commit("g", "t", 0, run)
                if history.prune_if_due(runs_kept=3, every=6) is not None:
                    pruned[name] = pruned.get(name, 0) + 1

        with kind.way(as_before):
            _timed(f"{label}, {kind.sides[as_before]} ({name})", results, append_and_prune)
    _mean_of_twins(results, label, kind.sides)
    kept = {name: sorted(r["run_id"] for r in history.read().collect()) for name, (history, _) in twins.items()}
    return {"appends": 6 * prunes, "prunes_done": pruned,
            "same_history": kept["a1"] == kept["b1"] == kept["b2"] == kept["a2"]}


@contextlib.contextmanager
def _pruned_by_spark():
    """The history pruned as until stop 113: the doomed runs found by Spark's query, their
    rows deleted by a MERGE."""
    from framework.log import history_prune

    with mock.patch.object(history_prune, "pruned_locally", lambda *args: None):
        yield


#: Side B of the ``prunes`` section's commands, by what the timed append reaches: the prune
#: by Spark's query and a MERGE, the pack through Delta's transaction (as before stop 113).
_HISTORY_AS_BEFORE_PRELUDES = {
    "prune": "from framework.log import history_prune\nhistory_prune.pruned_locally = lambda *a: None",
    "pack": "from framework.log import local_append\nlocal_append._packed_without_jvm = lambda path: None",
}


def bench_prune_commands(spark, results: dict, partitions: int, now: int) -> dict:
    """The ``prunes`` section's commands (the module's text), for a timed append that reaches
    a prune's multiple, then for one that makes the history's files ``PACK_AT`` (a pack):
    each twin a warehouse of one topic of ``partitions`` partitions, produced and maintained
    (untimed), its history appended to in this process until the next append reaches it."""
    from framework.log import version_checksum
    from framework.log.commit_log import read_commits
    from framework.log.history import PACK_AT, PRUNE_EVERY, HistoryRow, MaintenanceHistory
    from framework.log.warehouse import Warehouse

    kind, found, ok = HISTORY_COMMAND_TWINS, {}, True
    for reached, prelude in _HISTORY_AS_BEFORE_PRELUDES.items():
        label = f"idle topiclake maintain whose history append {reached}s, {partitions} partitions"
        kept = set()
        for name in ("a1", "b1", "b2", "a2"):
            as_before = name.startswith("b")
            with tempfile.TemporaryDirectory(prefix="topiclake-prunes-") as scratch:
                lines = _topic_spec_and_lines(scratch, ["fresh"], partitions, now)
                for args in (("produce", "--topic", "fresh", "--input", lines, "--now", str(now)),
                             ("maintain", "--topic", "fresh", "--now", str(now), "--no-report")):
                    ok &= _command({}, args[0], scratch, args)
                history = MaintenanceHistory(spark, Warehouse.resolve(os.path.join(scratch, "w")))

                def next_append_reaches(history=history, reached=reached):
                    version = read_commits(spark, history.path, 1)[0].version
                    prunes, packs = (version + 1) % PRUNE_EVERY == 0, version_checksum.file_count(
                        history.path, version) == PACK_AT - 1
                    return (prunes and not packs) if reached == "prune" else (packs and not prunes)

                for run in range(10 * PRUNE_EVERY):
                    if next_append_reaches():
                        break
                    history.append([HistoryRow(run_id=f"x{run}", run_started_ms=run, now_ms=run, topic="fresh",
                                               partition=0, stage="compact")])
                ok &= next_append_reaches()
                ok &= _command(results, f"{label}, {kind.sides[as_before]} ({name})", scratch,
                               ("maintain", "--topic", "fresh", "--now", str(now), "--no-report"),
                               prelude=prelude if as_before else None)
                # (a run's id is new each run: what every twin's history must hold is the same stages)
                kept.add(tuple(sorted((r["partition"], r["stage"], r["committed"]) for r in history.read().collect())))
        _mean_of_twins(results, label, kind.sides)
        found[reached] = {"label": label, "same_history_every_way": ok and len(kept) == 1}
    return {"partitions": partitions, "commands_succeeded": ok, **found,
            "same_history_every_way": ok and all(one["same_history_every_way"] for one in found.values())}


@contextlib.contextmanager
def _offsets_by_spark():
    """Committed offsets as topiclake wrote and read them before stop 72: the new rows written
    by Spark (``writeFiles``), the rows read by a Spark query."""
    from framework.log import consumer_offsets

    with mock.patch.object(consumer_offsets, "replaced_locally", lambda *args: None), \
            mock.patch.object(consumer_offsets, "read_locally", lambda *args: None):
        yield


@contextlib.contextmanager
def _java_lists_iterated():
    """Read Java lists as topiclake did before: iterated through py4j."""
    from framework.log.delta_transactions import DeltaJvm

    with mock.patch.object(DeltaJvm, "items", lambda self, scala_seq: list(self.scala.asJava(scala_seq))):
        yield


def _twin_results(results: dict, kind: TwinKind, measured: dict[str, dict[str, float]]) -> None:
    """Record and print each twin's seconds under each label of ``measured`` (label -> twin
    name -> seconds), then each side's mean (:func:`_mean_of_twins`)."""
    for name in ("a1", "b1", "b2", "a2"):
        side = kind.sides[name.startswith("b")]
        for label, seconds in measured.items():
            results[f"{label}, {side} ({name})"] = round(seconds[name], 3)
        print(f"  {side} ({name}): " + "; ".join(f"{label} {seconds[name]:.2f} s" for label, seconds in measured.items()),
              file=sys.stderr, flush=True)
    for label in measured:
        _mean_of_twins(results, label, kind.sides)


def _mean_of_twins(results: dict, label: str, sides: tuple[str, str]) -> None:
    """Each side's mean over its two twins (A: a1, a2; B: b1, b2)."""
    for letter, side in zip("ab", sides):
        results[f"{label}, {side}"] = sum(results[f"{label}, {side} ({letter}{n})"] for n in (1, 2)) / 2


def _same_offsets(twins: dict, partitions: int) -> bool:
    return all(_offsets(twins[a].partition(p)) == _offsets(twins[b].partition(p))
               for a, b in (("a1", "b1"), ("a2", "b2")) for p in range(partitions))


def _decided_alone():
    """Each small partition's compaction decided alone (as before stop 75): no batch forms."""
    from framework.stages import compaction_batch

    return mock.patch.object(compaction_batch, "MIN_BATCH", 10 ** 9)


@contextlib.contextmanager
def _rows_written_by_spark():
    """Produce as topiclake did before stop 74: the driver-side rows a DataFrame (an Arrow
    local relation) that Spark's ``writeFiles`` writes, a Spark job an append."""
    from framework.log import arrow_files

    with mock.patch.object(arrow_files, "data_files", lambda *args, **kwargs: None):
        yield


@contextlib.contextmanager
def _measure_scanned():
    """Measure a partition as topiclake did before its append commits carried their bytes and
    oldest timestamp: a scan of the records past the checkpoint (by Spark, as then)."""
    from framework.log import log_state

    with mock.patch.object(log_state, "appended_between", lambda commits, start, end: None), _scanned_by_spark():
        yield


@contextlib.contextmanager
def _scanned_by_spark():
    """A partition's measure scanned by Spark's query, as every one was before stop 90."""
    from framework.stages import local_measure

    with mock.patch.object(local_measure, "scanned", lambda *args: None):
        yield


@contextlib.contextmanager
def _empty_clean_section_joined():
    """Build the compaction frame as before: the clean section's lookup (a distinct and a
    join) even when no record lies below the log start."""
    from framework.stages import compaction

    real = compaction.compaction_actions
    with mock.patch.object(compaction, "compaction_actions",
                           lambda records, config, end, now_ms, checkpoint=0, log_start_offset=0, **rest:
                           real(records, config, end, now_ms, checkpoint, log_start_offset=-1, **rest)):
        yield


@contextlib.contextmanager
def _retention_scanned():
    """Plan retention as topiclake did before the state carried the oldest-timestamp bound:
    time retention reads the records, and the history's size columns come from a scan."""
    from framework.cleaner import rules
    from framework.log import partition_log

    with mock.patch.object(rules, "all_kept_by_time", lambda bound, threshold: False), \
            mock.patch.object(partition_log.Snapshot, "size_from_metadata", lambda self: None):
        yield


@contextlib.contextmanager
def _files_listed_by_delta():
    """Plan bin-packing as topiclake did before it read small tables' files from the version
    checksum: through Delta's snapshot (a state reconstruction and a collect)."""
    from framework.log import version_checksum

    with mock.patch.object(version_checksum, "live_adds", lambda path, version: None):
        yield


@contextlib.contextmanager
def _claims_by_dataframe_writes():
    """Commit appends and bookkeeping as topiclake did before it drove Delta's transaction API:
    DataFrame writes with ``txnAppId``, each of which reconstructs the snapshot's state first."""
    from framework.log import delta_transactions

    with mock.patch.object(delta_transactions, "jvm_of", lambda spark: None):
        yield


def _compiled_always():
    """Run every partition's queries with the session's code generation, as topiclake did
    before small partitions ran interpreted."""
    return _small_partitions_without("spark.sql.codegen.wholeStage", "spark.sql.codegen.factoryMode")


def _sessions_shuffles():
    """Run every partition's shuffles with the session's settings (adaptive, four shuffle
    partitions), as topiclake did before a small partition's went to one, planned up front."""
    return _small_partitions_without("spark.sql.adaptive.enabled", "spark.sql.shuffle.partitions")


@contextlib.contextmanager
def _small_partitions_without(*settings: str):
    from framework.log import small_partitions

    kept = {key: value for key, value in small_partitions.SMALL_PARTITION_SETTINGS.items() if key not in settings}
    with mock.patch.dict(small_partitions.SMALL_PARTITION_SETTINGS, kept, clear=True):
        yield


@contextlib.contextmanager
def _committed_by_merge():
    """Commit every compaction with Delta's MERGE, as topiclake did before it wrote them
    through the transaction API."""
    from framework.stages import compaction_rewrite

    with mock.patch.object(compaction_rewrite, "available", lambda spark, path, version, changes=0: False):
        yield


@contextlib.contextmanager
def _vectors_by_merge():
    """A compaction on a table with deletion vectors committed by Delta's MERGE, as before
    topiclake wrote the vectors itself (``compaction_vectors``)."""
    from framework.stages import compaction_vectors

    with mock.patch.object(compaction_vectors, "commit_locally", lambda *a, **k: compaction_vectors.NOT_LOCAL):
        yield


def _without_key_index():
    """A compaction's clean files read whole for their keys, as before stop 106 looked them
    up in the files' key indexes (``framework/log/key_index.py``)."""
    from framework.log import key_index

    return mock.patch.object(key_index, "MIN_ROWS", 2**62)


def _key_indexes_built(partition_log, now: int) -> None:
    """The key indexes of ``partition_log``'s large clean files, as its first compaction with
    deletion vectors on builds them (the decision only; nothing committed)."""
    from framework.stages import arrow_actions, compaction

    planned = compaction.plan(partition_log, now)
    arrow_actions.decided(partition_log, planned, planned.measure.first_uncleanable_offset, build_indexes=True)


def _decided_by_spark():
    """A compaction's actions decided by Spark's query (``compaction.compaction_actions``),
    as before stop 95, not by Arrow from the version's files."""
    from framework.stages import arrow_actions

    return mock.patch.object(arrow_actions, "decide", lambda *args: None)


@contextlib.contextmanager
def _cut_by_delete():
    """Cut retention as topiclake did before it wrote the cut through the transaction API:
    Delta's DELETE, after the plan read the version through Delta's time travel."""
    from framework.log import partition_log
    from framework.stages import retention_rewrite

    with mock.patch.object(retention_rewrite, "cut", lambda log, start, app, epoch, removed, delete: delete()), \
            mock.patch.object(partition_log.PartitionLog, "read_snapshot", lambda self, snap: self.read(snap.version)):
        yield


@contextlib.contextmanager
def _rewrites_through_delta():
    """Commit each compaction, retention cut and bin-packing through Delta's transaction API,
    as topiclake did before it made those commits itself on a local table (stop 103)."""
    from framework.stages import file_rewrite, optimize

    with mock.patch.object(file_rewrite, "commit_locally", lambda *args, **options: file_rewrite.NOT_LOCAL), \
            mock.patch.object(optimize, "_execute_locally", lambda *args: None):
        yield


@contextlib.contextmanager
def _vacuumed_by_delta():
    """Vacuum each partition by Delta's VACUUM, as topiclake did before it vacuumed a local
    table itself (stop 104)."""
    from framework.log import own_vacuum

    with mock.patch.object(own_vacuum, "vacuumed", lambda *args: None):
        yield


@contextlib.contextmanager
def _touched_found_by_a_pass():
    """Find the files a compaction rewrites as topiclake did before its totals named them: a
    pass of their own over the offsets, joined with the broadcast changes."""
    from framework.stages import compaction_rewrite

    real = compaction_rewrite.rewrite
    with mock.patch.object(compaction_rewrite, "rewrite",
                           lambda *args, planned_files=None, **options: real(*args, planned_files=None, **options)):
        yield


@contextlib.contextmanager
def _properties_shown():
    """Compare a partition's table properties with the spec's as topiclake did before it read
    them from the version checksum: ``SHOW TBLPROPERTIES``, a Spark command a partition."""
    from framework.log import version_checksum

    with mock.patch.object(version_checksum, "configuration", lambda path, version: None):
        yield


@contextlib.contextmanager
def _dataframe_debugging_on():
    """Build DataFrames as pyspark does by default: every function call records its call
    site in the JVM (a few py4j round trips each), which the embedded session turns off.
    pyspark reads the setting once per process, so the twin flips what it read."""
    from pyspark.errors import utils

    with mock.patch.object(utils, "_enable_debugging_cache", True):
        yield


@contextlib.contextmanager
def _jvm_outside_utc():
    """Commit as the embedded session did on a machine outside UTC before its JVM was put in
    UTC (``framework.session.in_utc``): Delta reads the JVM's default zone at every commit
    and, when it is not UTC, rebuilds the table's state to verify the commit's checksum."""
    from pyspark.sql import SparkSession

    jvm = SparkSession.getActiveSession()._jvm
    zones, system = jvm.java.util.TimeZone, jvm.java.lang.System
    zone, property_ = zones.getDefault(), system.getProperty("user.timezone")
    zones.setDefault(zones.getTimeZone("Europe/Berlin"))
    system.setProperty("user.timezone", "Europe/Berlin")
    try:
        yield
    finally:
        zones.setDefault(zone)
        system.setProperty("user.timezone", property_)


@contextlib.contextmanager
def _history_per_partition():
    """Append the history as topiclake did before it batched a run's rows: after every
    partition that committed something."""
    from framework.log import history

    with mock.patch.object(history, "FLUSH_AFTER_S", 0.0):
        yield


def _offsets(log) -> list[int]:
    return [r["offset"] for r in log.read().select("offset").orderBy("offset").collect()]


def bench_produce(spark, warehouse, count: int, now: int, results: dict) -> dict:
    """produce_frame into a new one-partition topic against a bare Delta append of the same
    frame (the floor: no checks, no numbering, no offsets claimed), twice each, alternating;
    the faster of each is kept, and the first produce (the JVM's code not yet compiled) too."""
    from pyspark.sql import functions as F

    from framework.clients.produce import produce_frame
    from framework.log.topic import Topic

    def frame():
        return spark.range(count).select(F.concat(F.lit("key-"), F.col("id").cast("string")).alias("key"),
                                         _value(F.col("id")).alias("value"), (F.lit(now) + F.col("id")).alias("timestamp"))

    produced, bare = f"produce {count} records (DataFrame)", "bare Delta append of the same frame"
    compressed = f"{produced}, held frame compressed (as before)"
    for attempt in range(2):
        topic = Topic(spark, warehouse, _spec(f"ingress{attempt}", 1))
        topic.ensure()
        _timed(f"{produced}, try {attempt + 1}", results, lambda: produce_frame(topic, frame(), now))
        path = os.path.join(warehouse.root, f"bare-append-{attempt}")
        _timed(f"{bare}, try {attempt + 1}", results, lambda: frame().write.format("delta").save(path))
        twin = Topic(spark, warehouse, _spec(f"ingress-compressed{attempt}", 1))
        twin.ensure()
        with _held_frame_compressed():
            _timed(f"{compressed}, try {attempt + 1}", results, lambda: produce_frame(twin, frame(), now))
    for label in (produced, bare, compressed):
        results[label] = min(results[f"{label}, try {n}"] for n in (1, 2))
    written = [Topic(spark, warehouse, _spec(f"ingress{side}{n}", 1)).partition(0).read().count()
               for side in ("", "-compressed") for n in range(2)]
    if written != [count] * 4:
        raise AssertionError(f"produce wrote {written} records, not {count} each time")
    # Into a topic of several partitions: Kafka's partitioner on Arrow batches and the records
    # numbered where they are (as shipped) against a Python call per record and a window over
    # the frame's order (as before), A B B A; the faster of each side is kept.
    label = f"produce {count} records (DataFrame) into {MANY_PARTITIONS} partitions"
    twins = []
    for side, attempt in (("vectorised partitioner", 1), ("row-at-a-time partitioner", 1),
                          ("row-at-a-time partitioner", 2), ("vectorised partitioner", 2)):
        topic = Topic(spark, warehouse, _spec(f"spread{len(twins)}", MANY_PARTITIONS))
        topic.ensure()
        twins.append(topic)
        with contextlib.nullcontext() if side.startswith("vectorised") else _partitioner_as_before():
            _timed(f"{label}, {side}, try {attempt}", results, lambda: produce_frame(topic, frame(), now))
    for side in ("vectorised partitioner", "row-at-a-time partitioner"):
        results[f"{label}, {side}"] = min(results[f"{label}, {side}, try {n}"] for n in (1, 2))
    first = _placed(twins[0])
    if any(_placed(twin).count() != count for twin in twins) or any(
            first.exceptAll(_placed(twin)).count() for twin in twins[1:]):
        raise AssertionError("the two partitioners put different records at different offsets")
    return {"records": count, "partitions of the spread topic": MANY_PARTITIONS}


#: Copies of the checks section's partition compacted warm (the first of them not counted).
WARM_COMPACTIONS = 6

#: The topic the partitioner is measured on: records spread by Kafka's partitioner.
MANY_PARTITIONS = 12


def _placed(topic):
    """(partition, offset, key) of every record of ``topic``, as a DataFrame."""
    from functools import reduce

    from pyspark.sql import functions as F

    return reduce(lambda a, b: a.unionByName(b), (
        log.read().select(F.lit(p).alias("partition"), "offset", "key") for p, log in enumerate(topic.partitions())))


@contextlib.contextmanager
def _held_frame_compressed():
    """Hold the produced frame in Spark's cache compressed, as produce_frame did before
    2026-11-29 (``HELD_FRAME_SETTINGS`` empty: the session's own setting)."""
    from framework.clients import produce

    with mock.patch.dict(produce.HELD_FRAME_SETTINGS, clear=True):
        yield


@contextlib.contextmanager
def _partitioner_as_before():
    """Partition and number records as produce_frame did before 2026-11-26: Kafka's
    partitioner as a Python UDF, called once per record, and each partition numbered by a
    window over the frame's order (a shuffle and a sort of the whole frame)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from framework.clients import produce
    from framework.clients.partitioner import default_partition

    def partitioned(shaped, partitions: int, given: bool):
        kafka_partition = F.udf(lambda key: None if key is None else default_partition(key, partitions), "int")
        partition = kafka_partition(F.col("key").cast("binary"))
        marked = shaped.withColumn("_partition", F.coalesce(F.col("_given"), partition) if given else partition)
        index = F.row_number().over(Window.partitionBy("_partition").orderBy("_order")) - 1
        return marked.select(*[c for c in marked.columns if c not in ("_order", "_given")],
                             F.lit(0).alias("_spark_partition"), index.cast("long").alias("_index")).persist()

    with mock.patch.object(produce, "_partitioned", partitioned):
        yield


def _full_scan(spark, path: str) -> float:
    """Best of three full scans of every column (the noop sink reads and drops each row)."""
    times = []
    for _ in range(3):
        started = time.perf_counter()
        spark.read.format("delta").load(path).write.format("noop").mode("overwrite").save()
        times.append(time.perf_counter() - started)
    return round(min(times), 3)


def bench_files(spark, warehouse, calls: int, now: int, results: dict) -> dict:
    from framework.clients.produce import produce
    from framework.clients.records import parse_records
    from framework.log.topic import Topic
    from framework.spec import parse_spec
    from framework.stages.maintenance import STAGES, Maintenance
    from framework.stages.optimize import plan

    # Kafka's default dirty ratio (0.5): between due runs, the dirty section's files pile up
    packed, unpacked = (Topic(spark, warehouse, parse_spec({"topic": name, "partitions": 1, "config": {
        "cleanup.policy": "compact", "delete.retention.ms": DAY_MS}}, "benchmark")) for name in ("packed", "unpacked"))
    runs = {"packed": Maintenance(spark, warehouse, [packed.spec], record_history=False),
            "unpacked": Maintenance(spark, warehouse, [unpacked.spec], record_history=False)}
    without = tuple(s for s in STAGES if s != "optimize")
    optimize_seconds = 0.0
    started = time.perf_counter()
    for call in range(calls):
        # nine new keys in ten; the tenth updates a key of the call before
        lines = [(i, {"key": f"k{call * 100 + i}" if i % 10 or call == 0 else f"k{(call - 1) * 100 + i + 1}",
                      "value": None if i == 55 else f"v{call}.{i}" + "x" * 150, "timestamp": now + call})
                 for i in range(100)]
        for topic in (packed, unpacked):
            produce(topic, parse_records(lines, topic.spec, "benchmark"), now + call)
        if (call + 1) % (calls // 7 + 1) == 0 or call == calls - 1:  # six runs between, one at the end
            runs["unpacked"].run(now + call + 1, stages=without)
            run = runs["packed"].run(now + call + 1)
            optimize_seconds += sum(r.duration_ms for p in run.partitions for r in p.rows if r.stage == "optimize") / 1000
    results[f"{calls} produce calls + 7 maintain runs, both partitions"] = round(time.perf_counter() - started, 3)
    results["bin-packing stages (all 7 runs)"] = round(optimize_seconds, 3)
    logs = {name: topic.partition(0) for name, topic in (("packed", packed), ("unpacked", unpacked))}
    fresh = os.path.join(warehouse.root, "one-file-copy")
    spark.read.format("delta").load(logs["packed"].path).coalesce(1).write.format("delta").save(fresh)
    for name, log in logs.items():
        results[f"full scan, {name}"] = _full_scan(spark, log.path)
    results["full scan, fresh one-file copy"] = _full_scan(spark, fresh)
    same = (spark.read.format("delta").load(logs["packed"].path).drop("_segment")
            .exceptAll(spark.read.format("delta").load(logs["unpacked"].path).drop("_segment")).count() == 0)
    return {"calls": calls, "files_packed": plan(logs["packed"]).files_before,
            "files_unpacked": plan(logs["unpacked"]).files_before, "same_records": same}


def _log_size(path: str) -> dict:
    folder = os.path.join(path, "_delta_log")
    names = os.listdir(folder)
    return {"commits": sum(n.endswith(".json") for n in names),
            "checkpoints": sum(".checkpoint" in n for n in names),
            "bytes": sum(os.path.getsize(os.path.join(folder, n)) for n in names
                         if os.path.isfile(os.path.join(folder, n)))}


def bench_metadata(spark, warehouse, runs: int, now: int, results: dict) -> dict:
    from framework.clients.produce import produce
    from framework.clients.records import parse_records
    from framework.log.history import MaintenanceHistory
    from framework.log.topic import Topic
    from framework.stages.maintenance import Maintenance
    from framework.stages.optimize import plan

    topic = Topic(spark, warehouse, _spec("long-run"))
    maintenance = Maintenance(spark, warehouse, [topic.spec])
    started = time.perf_counter()
    for run in range(runs):
        lines = [(i, {"key": f"k{(run * 100 + i) % 2000}", "value": f"v{run}.{i}", "timestamp": now + run})
                 for i in range(100)]
        produce(topic, parse_records(lines, topic.spec, "benchmark"), now + run)
        maintenance.run(now + run + 1)
    results[f"{runs} produce calls + maintain runs"] = round(time.perf_counter() - started, 3)
    log = topic.partition(0)
    history = MaintenanceHistory(spark, warehouse)
    detail = spark.sql(f"DESCRIBE DETAIL {delta_table_sql(history.path)}").collect()[0]
    return {"runs": runs, "partition_log": _log_size(log.path), "partition_data_files": plan(log).files_before,
            "history_rows": history.read().count(), "history_live_files": detail["numFiles"],
            "history_log": _log_size(history.path)}


@contextlib.contextmanager
def _judged_by_spark(spark, warehouse):
    """The guarantees judged on GE's Spark engine (how they were judged before) inside the
    block, for the side-by-side ``checks`` section."""
    from pyspark.sql import types as T

    from framework.checks import gx_project, gx_suites

    spark_source = "topiclake-metrics-on-spark"
    sources = gx_project.context(warehouse).data_sources
    try:
        sources.get(spark_source)
    except KeyError:
        sources.add_spark(spark_source, persist=False)

    pandas_metrics, pandas_source = gx_suites.metrics_frame, gx_suites.METRICS_DATASOURCE

    def spark_metrics(checks):
        rows = pandas_metrics(checks).to_dict("records")
        fields = [T.StructField(name, T.LongType() if name.startswith("g") or isinstance(value, int) else
                                T.StringType(), True) for name, value in rows[0].items()]
        return spark.createDataFrame(
            [tuple(None if value is None else value if isinstance(value, int) else str(value) for value in row.values())
             for row in rows], T.StructType(fields))

    gx_suites.metrics_frame, gx_suites.METRICS_DATASOURCE = spark_metrics, spark_source
    try:
        yield
    finally:
        gx_suites.metrics_frame, gx_suites.METRICS_DATASOURCE = pandas_metrics, pandas_source


def _read_through_delta():
    """The checks' pinned reads through Delta's snapshots (as before the version checksum's
    file list was read)."""
    from framework.log.partition_log import PartitionLog

    return mock.patch.object(PartitionLog, "read_files", PartitionLog.read)


@contextlib.contextmanager
def _read_by_spark(one_by_one: bool = False):
    """A vacuum's check (G9) reading the versions inside the window by Spark, as before stop
    104 read a small local partition's by Arrow: all of them in one query, or (``one_by_one``,
    as before that) each in a query of its own."""
    from framework.checks import readability

    read_one = readability.read_problem
    with mock.patch.object(readability, "readable_here", lambda *args: False), mock.patch.object(
            readability, "read_problems", lambda log, versions: {v: read_one(log, v) for v in versions}
    ) if one_by_one else contextlib.nullcontext():
        yield


@contextlib.contextmanager
def _paired_with_shuffles(spark):
    """A small partition's check under a small partition's settings (as maintenance runs
    it), its versions paired through a shuffle (as before), not in one Spark task."""
    from framework.checks import rules
    from framework.log.small_partitions import small_partition_settings

    shipped = rules.pairing
    with small_partition_settings(spark, 0), mock.patch.object(
            rules, "pairing", lambda before, after, config, one_task=False: shipped(before, after, config)):
        yield


def bench_checks(spark, warehouse, runs: int, now: int, results: dict) -> dict:
    from framework.checks.guarantees import Guarantees
    from framework.clients.produce import produce
    from framework.clients.records import parse_records
    from framework.log.small_partitions import small_partition_settings
    from framework.log.topic import Topic
    from framework.stages import compaction, retention
    from framework.stages.stage_check import StageCheck

    topic = Topic(spark, warehouse, _spec("checks"))
    lines = [(i, {"key": f"k{i % 50}", "value": f"v{i}", "timestamp": now - DAY_MS + i}) for i in range(500)]
    produce(topic, parse_records(lines, topic.spec, "benchmark"), now)
    log = topic.partition(0)
    planned = compaction.plan(log, now)
    outcome = _timed("checks: the compaction checked", results, lambda: compaction.execute(log, planned))
    check = StageCheck(log=log, stage="compact", now_ms=now, version_before=outcome.version_before,
                       version_after=outcome.version_after, before=None, state_before=planned.snapshot.state,
                       state_after=outcome.state_after, first_uncleanable_offset=planned.measure.first_uncleanable_offset,
                       cleaned_up_to=outcome.cleaned_up_to)
    guarantees = Guarantees(spark, warehouse)
    guarantees.check_stage(check)  # warm: the GE project, its suite and definitions exist
    # The same compaction on copies of the partition, warm and under a small partition's
    # settings, as maintenance runs it: what the checks below are a share of.
    warm = []
    for copy in range(WARM_COMPACTIONS):
        twin = Topic(spark, warehouse, _spec(f"checks-warm-{copy}"))
        produce(twin, parse_records(lines, twin.spec, "benchmark"), now)
        with small_partition_settings(spark, len(lines)):
            started = time.perf_counter()
            compaction.execute(twin.partition(0), compaction.plan(twin.partition(0), now))
            warm.append(time.perf_counter() - started)
    results["checks: the same compaction, warm (plan + commit)"] = round(statistics.median(warm[1:]), 3)
    # Each pair in blocks A B A B, each block warmed by one untimed check (switching re-binds
    # GE's definitions): GE judging on its pandas engine against its Spark engine; then, on
    # Spark's route (what they measure), the two versions read from the files their
    # checksums list (as shipped) against through Delta's snapshots (as before); then, under
    # a small partition's settings, the versions paired in one Spark task (as shipped)
    # against through a shuffle (as before); last, with the JVM warm, under a small
    # partition's settings, counted by Arrow in the driver (as shipped) against by Spark's
    # queries (as before stop 101).
    def on_spark(way):
        @contextlib.contextmanager
        def both():
            with _counted_by_spark(), way():
                yield
        return both

    sides = {"arrow": lambda: small_partition_settings(spark, 0),
             "by spark": on_spark(lambda: small_partition_settings(spark, 0)),
             "pandas": contextlib.nullcontext, "spark": lambda: _judged_by_spark(spark, warehouse),
             "files": on_spark(contextlib.nullcontext), "delta": on_spark(_read_through_delta),
             "one task": on_spark(lambda: small_partition_settings(spark, 0)),
             "shuffled": on_spark(lambda: _paired_with_shuffles(spark))}
    spent = dict.fromkeys(sides, 0.0)
    passed = True
    for side in ("pandas", "spark", "pandas", "spark", "files", "delta", "files", "delta",
                 "one task", "shuffled", "one task", "shuffled", "arrow", "by spark", "arrow", "by spark"):
        with sides[side]():
            guarantees.check_stage(check)
            for _ in range(runs // 2):
                started = time.perf_counter()
                passed = guarantees.check_stage(check).passed and passed
                spent[side] += time.perf_counter() - started
    # A retention's check: a 500-record partition of a compact,delete topic whose time
    # retention removes its older half, counted by Arrow in the driver (as shipped) against
    # by Spark's queries (as before stop 102), A B A B under a small partition's settings.
    retained = Topic(spark, warehouse, _spec("checks-retained", policy="compact,delete", retention_ms=DAY_MS - 250))
    produce(retained, parse_records(lines, retained.spec, "benchmark"), now)
    retained_plan = retention.plan(retained.partition(0), now, None)
    cut = retention.execute(retained.partition(0), retained_plan)
    assert cut.removed_records == 250, cut
    retained_check = StageCheck(
        log=retained.partition(0), stage="retain", now_ms=now, version_before=cut.version_before,
        version_after=cut.version_after, before=None, state_before=retained_plan.snapshot.state,
        state_after=cut.state_after, smallest_committed_offset=retained_plan.rules.smallest_committed_offset,
        new_log_start=retained_plan.new_log_start)
    for side in ("retention arrow", "retention by spark", "retention arrow", "retention by spark"):
        spent.setdefault(side, 0.0)
        with sides["arrow" if side == "retention arrow" else "by spark"]():
            guarantees.check_stage(retained_check)
            for _ in range(runs // 2):
                started = time.perf_counter()
                passed = guarantees.check_stage(retained_check).passed and passed
                spent[side] += time.perf_counter() - started
    # A vacuum's check (G9) of the same partition, three versions inside the window (the
    # table's first, the compaction's and a third): read by Arrow from their files (as
    # shipped) against in one Spark query (as before stop 104) and one query a version (as
    # before that), A B C C B A under a small partition's settings.
    produce(topic, parse_records(lines[:10], topic.spec, "benchmark"), now)
    latest = log.snapshot()
    swept = StageCheck(log=log, stage="vacuum", now_ms=now, version_before=outcome.version_after,
                       version_after=latest.version, before=None, state_before=latest.state,
                       state_after=latest.state, oldest_window_version=outcome.version_before,
                       window_ms=log.spec.config.time_travel_retention_ms)
    for side in ("read here", "one query", "one by one", "one by one", "one query", "read here"):
        spent.setdefault(side, 0.0)
        as_before = contextlib.nullcontext() if side == "read here" else _read_by_spark(side == "one by one")
        with small_partition_settings(spark, 0), as_before:
            guarantees.check_stage(swept)
            for _ in range(runs // 2):
                started = time.perf_counter()
                passed = guarantees.check_stage(swept).passed and passed
                spent[side] += time.perf_counter() - started
    runs = 2 * (runs // 2)
    for engine, label in (("arrow", "counted by Arrow"), ("by spark", "counted by Spark"),
                          ("pandas", "now: GE pandas engine"), ("spark", "before: GE Spark engine"),
                          ("files", "versions read from their files"), ("delta", "versions read through Delta"),
                          ("one task", "paired in one Spark task"), ("shuffled", "paired through shuffles")):
        results[f"checks of one compaction, {label}"] = round(spent[engine] / runs, 3)
        print(f"  checks of one compaction, {label:<32} {spent[engine] / runs:8.2f} s", file=sys.stderr, flush=True)
    for side, label in (("retention arrow", "counted by Arrow"), ("retention by spark", "counted by Spark")):
        results[f"checks of one retention, {label}"] = round(spent[side] / runs, 3)
        print(f"  checks of one retention, {label:<32} {spent[side] / runs:8.2f} s", file=sys.stderr, flush=True)
    for side, label in (("read here", "versions read by Arrow"), ("one query", "versions read in one query"),
                        ("one by one", "a query a version")):
        results[f"vacuum check, {label}"] = round(spent[side] / runs, 3)
        print(f"  vacuum check, {label:<32} {spent[side] / runs:8.2f} s", file=sys.stderr, flush=True)
    return {"runs": runs, "checks_passed": passed}


def _heap_mb(spark) -> float:
    """The driver JVM's heap in use after a full collection, in MB."""
    jvm = spark._jvm
    jvm.java.lang.System.gc()
    runtime = jvm.java.lang.Runtime.getRuntime()
    return (runtime.totalMemory() - runtime.freeMemory()) / 2**20


@contextlib.contextmanager
def _tables_kept_cached():
    """Leave every table in Delta's cache, as topiclake did before maintain and validate
    forgot each partition's table when done with it."""
    from framework.log import delta_transactions
    from framework.stages import maintenance

    # maintain holds the function it imported; validate (framework/cli/commands.py) imports it when it runs
    with mock.patch.object(maintenance, "forget_table", lambda spark, path: None), \
            mock.patch.object(delta_transactions, "forget_table", lambda spark, path: None):
        yield


def bench_heap(spark, warehouse, partitions: int, now: int, results: dict) -> dict:
    """The driver's heap a ``maintain`` and a ``validate`` (both versions read through Delta)
    of ``partitions`` partitions leave behind, through the command line: as shipped (each
    partition's table forgotten from Delta's cache when done) against as before (kept);
    the before side first, then its tables forgotten, so each side starts from a collected heap."""
    from framework.cli.main import main
    from framework.log.delta_transactions import forget_table

    specs = os.path.join(warehouse.root, "heap-specs")
    os.makedirs(specs, exist_ok=True)
    grown = {}
    for side, label in (("b", "tables kept in Delta's cache (as before)"), ("a", "tables forgotten when done")):
        topic = f"heap-{side}"
        with open(os.path.join(specs, f"{topic}.yaml"), "w") as handle:
            handle.write(f"topic: {topic}\npartitions: {partitions}\nconfig:\n  cleanup.policy: compact\n"
                         "  min.cleanable.dirty.ratio: 0.0\n")
        lines = os.path.join(specs, f"{topic}.jsonl")
        with open(lines, "w") as handle:
            handle.writelines(json.dumps({"key": f"k{i % 300}", "value": f"v{i}", "timestamp": now - DAY_MS + i}) + "\n"
                              for i in range(20 * partitions))
        common = ["--warehouse", warehouse.root, "--specs", os.path.join(specs, f"{topic}.yaml"), "--now", str(now)]
        said = io.StringIO()  # what the commands print is not the benchmark's output
        with contextlib.redirect_stdout(said):
            assert main(["produce", "--topic", topic, "--input", lines, *common]) == 0, said.getvalue()
        start = _heap_mb(spark)
        with _tables_kept_cached() if side == "b" else contextlib.nullcontext(), contextlib.redirect_stdout(said):
            started = time.perf_counter()
            assert main(["maintain", "--no-report", *common]) == 0, said.getvalue()
            assert main(["validate", *common]) == 0, said.getvalue()
            results[f"maintain and validate {partitions} partitions, {label}"] = round(time.perf_counter() - started, 3)
        grown[side] = _heap_mb(spark) - start
        results[f"heap kept after maintain and validate of {partitions} partitions, {label}, MB"] = round(grown[side], 1)
        print(f"  heap kept, {label}: {grown[side]:.1f} MB ({grown[side] / partitions:.2f} MB a partition)",
              file=sys.stderr, flush=True)
        for partition in range(partitions):  # the next side starts from the same heap
            forget_table(spark, os.path.join(warehouse.root, f"{topic}-{partition}"))
    return {"partitions": partitions, "mb_per_partition": {k: round(v / partitions, 3) for k, v in grown.items()}}


def bench_lint(results: dict) -> None:
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    lint = [sys.executable, "-c", "import sys; from framework.cli.main import main; sys.exit(main(['lint', 'table_specs']))"]
    _timed("bare interpreter", results, lambda: subprocess.run([sys.executable, "-c", "pass"], cwd=repo, check=True))
    _timed("lint", results, lambda: subprocess.run(lint, cwd=repo, check=True, capture_output=True))


START_SIDES = ("jars listed, classes archived", "jars listed, no class archive", "jars resolved by Ivy, no class archive")


def bench_start(results: dict, rounds: int = 2) -> dict:
    """``topiclake create`` of the shipped specs in a new process (a JVM start, a session and
    seven Delta creates), in the order A B C C B A per round: as shipped (the jars Ivy
    resolved handed to Spark by path, HotSpot's class archive mapped), the jar list
    without the archive, and neither (a fresh cache folder: Ivy resolves, as before)."""
    from framework import class_archive, user_cache
    from framework.session import embedded_master

    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    archived = class_archive.archive_path(embedded_master()).is_file()
    if not archived:
        print("  no class archive: run jobs/class_archive.py first (the set-up does)", file=sys.stderr)
    spent: dict[str, list[float]] = {side: [] for side in START_SIDES}
    created = set()
    for _ in range(rounds):
        for side in (*START_SIDES, *reversed(START_SIDES)):
            with tempfile.TemporaryDirectory(prefix="topiclake-start-") as scratch:
                env = dict(os.environ)
                if side == START_SIDES[1]:
                    env[class_archive.ARCHIVE_ENV] = "off"
                elif side == START_SIDES[2]:
                    env[user_cache.CACHE_ENV] = os.path.join(scratch, "cache")
                command = [sys.executable, "-m", "framework.cli", "--warehouse", os.path.join(scratch, "w"),
                           "--specs", "table_specs", "create"]
                started = time.perf_counter()
                done = subprocess.run(command, cwd=repo, env=env, capture_output=True, text=True)
                spent[side].append(round(time.perf_counter() - started, 2))
                created.add(done.stdout.count(": created") if done.returncode == 0 else -1)
                print(f"  topiclake create, {side:<40} {spent[side][-1]:8.2f} s", file=sys.stderr, flush=True)
    for side, times in spent.items():  # the median: a start beside other work can take twice as long
        results[f"topiclake create, {side}"] = round(statistics.median(times), 3)
    return {"class_archive": archived, "runs": spent, "same_tables_every_way": len(created) == 1 and -1 not in created}


def _topic_spec_and_lines(scratch: str, topics: list[str], partitions: int, now: int,
                          young: Sequence[str] = (), config: dict | None = None) -> str:
    """Specs of ``topics`` (the partitions section's config, and ``config`` over it; those in
    ``young`` with a minimum compaction lag that leaves every line too young to compact) and
    its 5,000 JSON lines in ``scratch``; the lines' path."""
    import yaml

    config = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": 0.0, "delete.retention.ms": DAY_MS,
              **(config or {})}
    for topic in topics:
        lag = {"min.compaction.lag.ms": 2 * DAY_MS} if topic in young else {}
        with open(os.path.join(scratch, f"{topic}.yaml"), "w") as handle:
            yaml.safe_dump({"topic": topic, "partitions": partitions, "config": {**config, **lag}}, handle)
    lines = os.path.join(scratch, "lines.jsonl")
    with open(lines, "w") as handle:
        for i in range(5000):
            handle.write(json.dumps({"key": f"user-{i % 1000}", "value": f"v{i}",
                                     "timestamp": now - DAY_MS + i}) + "\n")
    return lines


def _command(results: dict, label: str, scratch: str, args: tuple[str, ...], env: dict | None = None,
             prelude: str | None = None, printed: list | None = None, warehouse: str | None = None) -> bool:
    """One ``topiclake`` command in a new process on ``scratch``'s warehouse (or ``warehouse``)
    and specs, timed as ``label``; whether it succeeded. ``prelude``: Python the process
    runs first (a way as before, patched in); ``printed`` gets what it printed."""
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    start = ["-m", "framework.cli"] if prelude is None else [
        "-c", f"{prelude}\nfrom framework.cli.main import entry_point\nentry_point()"]
    argv = [sys.executable, *start, "--warehouse", warehouse or os.path.join(scratch, "w"), "--specs", scratch, *args]
    done = _timed(label, results, lambda: subprocess.run(argv, cwd=repo, env=env, capture_output=True, text=True))
    if done.returncode != 0:
        print(f"  {label}: exit {done.returncode}: {done.stderr.strip()[-400:]}", file=sys.stderr)
    if printed is not None:
        printed.append(done.stdout)
    return done.returncode == 0


def bench_commands(results: dict, partitions: int, now: int) -> dict:
    """The partitions section's topic as a user runs it: each step a ``topiclake`` command
    in a new process (a JVM start, a session, the JIT cold): produce 5,000 JSON lines, the
    first maintain (every stage checked, the history recorded; the default one cleaner
    thread, then a twin topic with ``--cleaner-threads 2``), then an idle maintain, whose
    time is mostly the start; then ``status`` and ``validate`` of the second topic."""
    ok = True
    with tempfile.TemporaryDirectory(prefix="topiclake-commands-") as scratch:
        topics = {1: "wide-cli", 2: "wide-cli-threads"}
        lines = _topic_spec_and_lines(scratch, list(topics.values()), partitions, now)
        for topic in topics.values():
            ok &= _command(results, f"topiclake produce of 5000 lines into {partitions} partitions ({topic})", scratch,
                           ("produce", "--topic", topic, "--input", lines, "--now", str(now)))
        for threads, topic in topics.items():
            suffix = "" if threads == 1 else f", --cleaner-threads {threads}"
            for run in ("first", "idle"):
                ok &= _command(results, f"topiclake maintain, {run}, {partitions} partitions{suffix}", scratch,
                               ("maintain", "--topic", topic, "--now", str(now), "--no-report",
                                "--cleaner-threads", str(threads)))
        for verb in ("status", "validate"):
            ok &= _command(results, f"topiclake {verb}, {partitions} partitions", scratch,
                           (verb, "--topic", topics[2], "--now", str(now)))
    return {"commands_succeeded": ok}


def bench_collector_commands(spark, results: dict, partitions: int, now: int) -> dict:
    """The commands section's produce, first maintain (two cleaner threads) and idle
    maintain, each a new process, A B B A: the embedded session's JVM with the throughput
    collector (as shipped) against G1 (as before, the ``collector`` switch's environment).
    Each figure is its side's mean; every side's tables must hold the same records."""
    switch = SESSION_SWITCHES["collector"]
    runs: dict[str, list[dict]] = {side: [] for side in switch.sides}
    contents, ok = set(), True

    def steps(lines: str) -> list[tuple[str, tuple[str, ...]]]:
        maintain = ("maintain", "--topic", "gc", "--now", str(now), "--no-report", "--cleaner-threads", "2")
        return [(f"topiclake produce of 5000 lines into {partitions} partitions",
                 ("produce", "--topic", "gc", "--input", lines, "--now", str(now))),
                *[(f"topiclake maintain, {run}, {partitions} partitions, --cleaner-threads 2", maintain)
                  for run in ("first", "idle")]]

    for side in (*switch.sides, *reversed(switch.sides)):
        env = switch.environment(side)
        with tempfile.TemporaryDirectory(prefix="topiclake-collector-") as scratch:
            lines = _topic_spec_and_lines(scratch, ["gc"], partitions, now)
            times: dict[str, float] = {}
            for label, args in steps(lines):
                ok &= _command(times, f"{label}, {side}", scratch, args, env)
            runs[side].append(times)
            contents.add(_warehouse_contents(spark, os.path.join(scratch, "w"), "gc", partitions))
    labels = [label for label, _ in steps("")]
    for label in labels:
        for side in switch.sides:
            results[f"{label}, {side}"] = round(statistics.mean(run[f"{label}, {side}"] for run in runs[side]), 3)
    return {"partitions": partitions, "labels": labels, "commands_succeeded": ok,
            "same_tables_every_way": ok and len(contents) == 1}


#: The ways ``topiclake produce`` writes a produce's rows (the ``produce_commands`` section).
PRODUCE_COMMAND_TWINS = TwinKind("produce_commands", ("rows written by Arrow", "rows written by Spark"),
                                 "rows written by Arrow / by Spark")
#: Side B's process refuses Arrow's files, so every append is Spark's ``writeFiles`` (as before stop 74).
_SPARK_WRITER_PRELUDE = ("from framework.log import arrow_files\n"
                         "arrow_files.data_files = lambda *args, **kwargs: None")


def bench_produce_commands(spark, results: dict, partitions: int, now: int) -> dict:
    """``topiclake produce`` of 5,000 lines into ``partitions`` new partitions, each a new
    process, A B B A: the rows written by Arrow (as shipped) against by Spark's
    ``writeFiles`` (as before stop 74). Each side's figure is its mean; every side's tables
    must hold the same records."""
    return _commands_a_b_b_a(spark, results, PRODUCE_COMMAND_TWINS, _SPARK_WRITER_PRELUDE, partitions, now,
                             f"topiclake produce of 5000 lines into {partitions} new partitions",
                             lambda lines: ("produce", "--topic", "fresh", "--input", lines, "--now", str(now)))


def _commands_a_b_b_a(spark, results: dict, kind: TwinKind, prelude: str, partitions: int, now: int, label: str,
                      measured: Callable[[str], tuple], produced_first: bool = False,
                      then: Callable[[str], None] | None = None, after: Callable[[str], None] | None = None,
                      config: dict | None = None) -> dict:
    """``measured(lines)``, a ``topiclake`` command on topic "fresh" of ``partitions`` new
    partitions and 5,000 lines (produced first, untimed, when ``produced_first``, and then
    ``then(warehouse)``), each a new process, A B B A: side B's process runs ``prelude``
    first (as before). Each side's figure is its mean; every side's tables must hold the
    same records after it (and ``after(warehouse)`` looks at them). ``config``: the topic's
    own over the partitions section's (``_topic_spec_and_lines``)."""
    contents, ok = set(), True
    for name in ("a1", "b1", "b2", "a2"):
        as_before = name.startswith("b")
        with tempfile.TemporaryDirectory(prefix=f"topiclake-{kind.name}-") as scratch:
            lines = _topic_spec_and_lines(scratch, ["fresh"], partitions, now, config=config)
            if produced_first:
                ok &= _command({}, "produce", scratch, ("produce", "--topic", "fresh", "--input", lines, "--now",
                                                        str(now)))
            if then is not None:
                then(os.path.join(scratch, "w"))
            ok &= _command(results, f"{label}, {kind.sides[as_before]} ({name})", scratch, measured(lines),
                           prelude=prelude if as_before else None)
            contents.add(_warehouse_contents(spark, os.path.join(scratch, "w"), "fresh", partitions))
            if after is not None:
                after(os.path.join(scratch, "w"))
    _mean_of_twins(results, label, kind.sides)
    return {"partitions": partitions, "label": label, "commands_succeeded": ok,
            "same_tables_every_way": ok and len(contents) == 1}


#: How a command's own commit at a checkpoint version is checkpointed (``checkpoint_commands``).
CHECKPOINT_COMMAND_TWINS = TwinKind("checkpoint_commands", ("checkpointed by delta-rs", "committed through Delta"),
                                    "checkpointed by delta-rs / committed through Delta")
#: Side B's process has no delta-rs to write checkpoints, so a commit at a checkpoint version
#: is Delta's transaction, which starts the JVM (as before stop 114).
_NO_OWN_CHECKPOINT_PRELUDE = "from framework.log import own_checkpoints\nown_checkpoints.available = lambda: False"


def bench_checkpoint_commands(spark, results: dict, partitions: int, now: int) -> dict:
    """``topiclake produce`` of 5,000 lines into ``partitions`` partitions whose next commit
    is a checkpoint's (each table's interval set to 2 after a first produce and the ALTER's
    commit, as every hundredth produce meets it as shipped), each a new process, A B B A:
    committed by topiclake and checkpointed by delta-rs (as shipped, stop 114) against
    committed and checkpointed through Delta's transaction (as before). Every side's tables
    must hold the same records, and each a checkpoint at version 2."""
    checkpointed = []

    def due_next(warehouse: str) -> None:
        for partition in range(partitions):
            spark.sql(f"ALTER TABLE delta.`{warehouse}/fresh-{partition}` "
                      "SET TBLPROPERTIES ('delta.checkpointInterval' = '2')")

    def measured(lines: str) -> tuple:
        return ("produce", "--topic", "fresh", "--input", lines, "--now", str(now + 1))

    def kept(warehouse: str) -> None:
        checkpointed.extend(os.path.exists(f"{warehouse}/fresh-{p}/_delta_log/{2:020d}.checkpoint.parquet")
                            for p in range(partitions))

    outcome = _commands_a_b_b_a(spark, results, CHECKPOINT_COMMAND_TWINS, _NO_OWN_CHECKPOINT_PRELUDE, partitions,
                                now, f"topiclake produce at a checkpoint version, {partitions} partitions", measured,
                                produced_first=True, then=due_next, after=kept)
    return {**outcome, "every_table_checkpointed": len(checkpointed) == 4 * partitions and all(checkpointed)}


#: How a retention cut over deletion vectors is planned and committed (``vector_retention_commands``).
VECTOR_RETENTION_TWINS = TwinKind("vector_retention_commands", ("by topiclake", "by Delta"), "by topiclake / by Delta")
#: Side B plans from no file list where a file has a vector (Delta reads the records) and
#: cuts by Delta's DELETE, which starts the JVM (as before stop 115).
_VECTOR_RETENTION_AS_BEFORE_PRELUDE = (
    "from framework.log import file_stats, version_checksum\n"
    "from framework.stages import retention, retention_rewrite\n"
    "def _listed(log, snap):\n"
    "    listed = version_checksum.plain_files(log.path, snap.version)\n"
    "    return (None, None) if listed is None else (listed, [file_stats.of(add) for add in listed.adds])\n"
    "retention._listed_with_stats = _listed\n"
    "retention_rewrite.vector_cut = lambda log, listed, version, start, app, epoch, delete: delete()")


def bench_vector_retention_commands(spark, results: dict, partitions: int, now: int) -> dict:
    """A checked ``topiclake maintain`` of ``partitions`` compact,delete partitions with
    deletion vectors on, whose first maintain (untimed, a new process) compacted them into
    files with vectors and whose survivors are half past ``retention.ms``: each partition
    cuts them. Each run a new process, A B B A: the plan's files and vectors read by Arrow
    and the cut committed as vectors by topiclake (as shipped, stop 115) against the
    records read by Delta and the cut by Delta's DELETE (as before). Every side's tables
    must hold the same records, and every partition's cut must have removed records."""
    cut_everywhere = []
    config = {"cleanup.policy": "compact,delete", "retention.ms": DAY_MS, "segment.ms": 1}

    def compacted(warehouse: str) -> None:
        for partition in range(partitions):
            spark.sql(f"ALTER TABLE delta.`{warehouse}/fresh-{partition}` "
                      "SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
        _command({}, "first maintain", os.path.dirname(warehouse),
                 ("maintain", "--topic", "fresh", "--now", str(now + 1), "--no-report"))

    def measured(lines: str) -> tuple:
        # the lines' survivors are the last 1,000 (timestamps now - 1 day + 4000 to 4999): half are past it
        return ("--json", "maintain", "--topic", "fresh", "--now", str(now + 4500), "--no-report")

    def cut(warehouse: str) -> None:
        for partition in range(partitions):
            log = f"{warehouse}/fresh-{partition}/_delta_log"
            operations = [json.loads(line)["commitInfo"]["operation"] for name in sorted(os.listdir(log))
                          if name.endswith(".json") for line in Path(log, name).read_text().splitlines()
                          if '"commitInfo"' in line]
            cut_everywhere.append("DELETE" in operations)  # (only a retention cut is one)

    outcome = _commands_a_b_b_a(spark, results, VECTOR_RETENTION_TWINS, _VECTOR_RETENTION_AS_BEFORE_PRELUDE,
                                partitions, now, f"topiclake maintain, a retention cut over deletion vectors, "
                                f"{partitions} partitions", measured, produced_first=True, then=compacted,
                                after=cut, config=config)
    return {**outcome, "every_partition_cut": len(cut_everywhere) == 4 * partitions and all(cut_everywhere)}


#: How retention's plan reads a partition whose files carry deletion vectors (``vector_boundary``).
VECTOR_BOUNDARY_SIDES = ("the files the bounds leave open read", "every file with a vector read")


def _every_vector_file_read():
    """Time and consumed retention's boundary as topiclake found it before stop 116: a file
    whose deletion vector hides rows (statistics that only bound) read whatever its bounds say."""
    from framework.stages import retention

    return mock.patch.object(retention, "_bounded", lambda stats: stats.tight and None not in (
        stats.min_offset, stats.max_offset, stats.min_timestamp_ms, stats.max_timestamp_ms))


def _every_file_read_by_size():
    """Size retention's boundary as topiclake found it before stop 116: once any file has a
    deletion vector, every file read."""
    from framework.stages import retention_counts, retention_size

    shipped = retention_size.boundary_from_oldest

    def as_before(log, snap, start, end, listing, max_bytes):
        size, (listed, stats) = snap.size_from_metadata(), listing()
        if size is None or size[1] <= max_bytes or not stats or all(s.tight for s in stats):
            return shipped(log, snap, start, end, listing, max_bytes)
        rows = retention_counts.local_rows(listed)
        return None if rows is None else retention_size._cut_locally(
            rows, start, snap.state.log_start_offset, None, size[1], max_bytes, end, snap.state.log_end_offset)

    return mock.patch.object(retention_size, "boundary_from_oldest", as_before)


def bench_vector_boundary(spark, warehouse, records: int, now: int, results: dict, rounds: int = 5) -> dict:
    """Retention's plan (it writes nothing) of one compact,delete partition of ``records``
    records in 40 appends, keys drawn over the whole key space, so that a later record
    supersedes from about two-thirds of the oldest file's to a few of the newest's,
    compacted by topiclake with deletion vectors on: by time, the clock putting the oldest
    1 % past ``retention.ms``, and by size, ``retention.bytes`` 99 % of the log's bytes. A B
    B A ``rounds`` times a rule, each side's median."""
    import random

    from framework.clients.produce import produce
    from framework.clients.records import parse_records
    from framework.log.topic import Topic
    from framework.stages import compaction, retention

    appends, span = 40, records  # one millisecond a record
    topic = Topic(spark, warehouse, _spec("vector-boundary", 1, "compact,delete", retention_ms=DAY_MS))
    log = topic.partition(0)
    topic.create()
    spark.sql(f"ALTER TABLE {delta_table_sql(log.path)} SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    draw = random.Random(116)
    oldest = now - DAY_MS - span // 100  # the first 1 % expired at ``now``
    for number in range(appends):
        first = number * records // appends
        lines = [(i, {"key": f"user-{draw.randrange(records)}", "value": "v" * 100, "timestamp": oldest + first + i})
                 for i in range(records // appends)]
        produce(topic, parse_records(lines, topic.spec, "benchmark"), oldest + first)
    planned = compaction.plan(log, oldest + span)
    assert planned.decision.due, planned.decision
    compaction.execute(log, planned, run_id="benchmark")
    stats = retention._listed_with_stats(log, log.snapshot())[1]
    files = f"{records:,} records in {len(stats)} files, {sum(not s.tight for s in stats)} with a vector"
    by_size = _spec("vector-boundary", 1, "compact,delete", retention_ms=-1,
                    **{"retention.bytes": log.snapshot().size_from_metadata()[1] * 99 // 100})
    outcome = {"labels": [], "same_plans": True, "plan_cuts": True}
    for rule, partition, before in (("time", log, _every_vector_file_read),
                                    ("size", Topic(spark, warehouse, by_size).partition(0), _every_file_read_by_size)):
        label = f"{rule} retention's plan of {files}"
        times, boundaries = {side: [] for side in VECTOR_BOUNDARY_SIDES}, set()
        for _ in range(rounds):
            for side in (*VECTOR_BOUNDARY_SIDES, *reversed(VECTOR_BOUNDARY_SIDES)):
                with before() if side == VECTOR_BOUNDARY_SIDES[1] else contextlib.nullcontext():
                    started = time.perf_counter()
                    boundaries.add(tuple(sorted(retention.plan(partition, now, None).boundaries.items())))
                    times[side].append(time.perf_counter() - started)
        for side in VECTOR_BOUNDARY_SIDES:
            results[f"{label}, {side}"] = round(statistics.median(times[side]), 4)
            print(f"  {label}, {side}: {results[f'{label}, {side}']:.4f} s (runs: "
                  f"{', '.join(f'{t:.3f}' for t in times[side])})", file=sys.stderr, flush=True)
        outcome["labels"].append(label)
        outcome["same_plans"] = outcome["same_plans"] and len(boundaries) == 1
        outcome["plan_cuts"] = outcome["plan_cuts"] and len(boundaries) == 1 and rule in dict(next(iter(boundaries)))
    return outcome


#: How a first maintain decides its small partitions' compactions (the ``batch_commands`` section).
BATCH_COMMAND_TWINS = TwinKind("batch_commands", ("decided together", "decided alone"),
                               "decided together / alone")
#: Side B's process forms no batch, so each partition decides alone (as before stop 75).
_DECIDED_ALONE_PRELUDE = "from framework.stages import compaction_batch\ncompaction_batch.MIN_BATCH = 10 ** 9"


def bench_batch_commands(spark, results: dict, partitions: int, now: int) -> dict:
    """The first ``topiclake maintain`` of ``partitions`` small partitions (every stage
    checked, the history recorded, one cleaner thread), each a new process, A B B A: their
    compactions decided in one Spark job against each alone. Each side's figure is its
    mean; every side's tables must hold the same records after it."""
    return _commands_a_b_b_a(spark, results, BATCH_COMMAND_TWINS, _DECIDED_ALONE_PRELUDE, partitions, now,
                             f"topiclake maintain, first, {partitions} partitions",
                             lambda lines: ("maintain", "--topic", "fresh", "--now", str(now), "--no-report",
                                            "--cleaner-threads", "1"), produced_first=True)


#: How a first maintain writes its batch's rewrites (the ``staged_commands`` section).
STAGED_COMMAND_TWINS = TwinKind("staged_commands", ("written by Arrow", "written by Spark's writer"),
                                "written by Arrow / by Spark's writer")
#: Side B's process writes a batch's rewrites with Spark's writer, into a staging folder (as before stop 94).
_STAGED_BY_SPARK_PRELUDE = "from framework.stages import arrow_rewrite\narrow_rewrite.staged = lambda *args: None"


def bench_staged_commands(spark, results: dict, partitions: int, now: int) -> dict:
    """The first ``topiclake maintain`` of ``partitions`` small partitions, as in
    ``batch_commands``, each a new process, A B B A: the batch's rewrites written by Arrow
    into each table against by one ``writeFiles`` into a staging folder."""
    return _commands_a_b_b_a(spark, results, STAGED_COMMAND_TWINS, _STAGED_BY_SPARK_PRELUDE, partitions, now,
                             f"topiclake maintain, first, {partitions} partitions, staged",
                             lambda lines: ("maintain", "--topic", "fresh", "--now", str(now), "--no-report",
                                            "--cleaner-threads", "1"), produced_first=True)


#: How ``topiclake report`` reads the history and the thresholds (the ``report_commands`` section).
REPORT_COMMAND_TWINS = TwinKind("report_commands", ("read by Arrow", "read by Spark"), "read by Arrow / by Spark")
#: Side B's process reads neither locally, so both go through its Spark session (as before stop 85).
_REPORT_BY_SPARK_PRELUDE = ("from framework.log import history\nfrom framework.report import data\n"
                            "history.local_rows = lambda warehouse: None\n"
                            "data._local_properties = lambda warehouse, path: None")


def bench_report_commands(results: dict, partitions: int, now: int) -> dict:
    """``topiclake report`` of ``partitions`` partitions after their first maintain (5,000
    lines produced, both untimed), each report a new process on the same warehouse, A B B A:
    the history and thresholds read by Arrow, no JVM started (as shipped), against by Spark
    (as before stop 85). Each side's figure is its mean; every report's pages must say the
    same (the time they were generated aside)."""
    import re

    label = f"topiclake report, {partitions} partitions"
    pages, ok = set(), True
    with tempfile.TemporaryDirectory(prefix="topiclake-report-") as scratch:
        lines = _topic_spec_and_lines(scratch, ["fresh"], partitions, now)
        for args in (("produce", "--topic", "fresh", "--input", lines, "--now", str(now)),
                     ("maintain", "--topic", "fresh", "--now", str(now), "--no-report")):
            ok &= _command({}, args[0], scratch, args)
        for name in ("a1", "b1", "b2", "a2"):
            as_before = name.startswith("b")
            out = os.path.join(scratch, f"report-{name}")
            ok &= _command(results, f"{label}, {REPORT_COMMAND_TWINS.sides[as_before]} ({name})", scratch,
                           ("report", "--output", out), prelude=_REPORT_BY_SPARK_PRELUDE if as_before else None)
            said = []
            for folder in (out, os.path.join(out, "partitions")):
                for page in sorted(f for f in os.listdir(folder) if f.endswith(".html")):
                    with open(os.path.join(folder, page), encoding="utf-8") as handle:
                        said.append(re.sub(r"Generated by topiclake at [^<]*", "", handle.read()))
            pages.add(hash(tuple(said)))
    _mean_of_twins(results, label, REPORT_COMMAND_TWINS.sides)
    return {"partitions": partitions, "label": label, "commands_succeeded": ok,
            "same_pages_every_way": ok and len(pages) == 1}


#: How ``status`` and ``plan`` get their session (the ``read_only_commands`` section).
READ_ONLY_COMMAND_TWINS = TwinKind("read_only_commands", ("session deferred", "session first"),
                                   "session deferred / started first")
#: Side B's process starts the session before the verb reads anything (as before stop 87),
#: its report rebuilds the Data Docs whatever they were built from (as before stop 88),
#: draws every page in this process (as before stop 89), a measure that needs a scan
#: scans by Spark (as before stop 90), ``read`` reads through Spark (as before stop 91), and
#: ``validate`` counts and reads every version by Spark (as before stop 108).
_SESSION_FIRST_PRELUDE = ("from framework.cli import context\n"
                          "context.Context.deferred_spark = property(lambda self: self.spark)\n"
                          "from framework.stages import local_measure\n"
                          "local_measure.scanned = lambda *args: None\n"
                          "from framework.log import local_records\n"
                          "local_records.records = lambda *args: None\n"
                          "from framework.report import site\n"
                          "site._read = lambda path: None\n"
                          "site.PAGES_FOR_WORKERS = 10 ** 9\n"
                          "from framework.checks import arrow_whole, validation_plan\n"
                          "arrow_whole.validated = lambda check: None\n"
                          "validation_plan.travels_here = lambda *args, **options: False")


def bench_read_only_commands(results: dict, partitions: int, now: int) -> dict:
    """``topiclake status``, ``plan``, ``create`` (every table there already), an idle
    ``maintain`` (``--json``; then with the report) and a ``commit-offset`` (its table there
    already) of ``partitions`` settled partitions (5,000 lines produced, a first maintain
    with its report and a first commit-offset, all untimed), each a new process on the same
    warehouse, A B B A: the session deferred until something asks it a question, so a local
    warehouse with nothing due is read from its Delta logs' files, the idle maintain's
    history rows and the committed offset are committed without a JVM, and no JVM starts
    (as shipped, ``framework/deferred_session.py``), and the report keeps the Data Docs
    built from the same validations, against the session started first and the Data Docs
    rebuilt (as before stops 87 and 88). Each side's figure is its mean; both sides must
    print the same JSON (a maintain's, but for its run's id and times)."""
    said, ok, labels = {}, True, []
    with tempfile.TemporaryDirectory(prefix="topiclake-read-only-") as scratch:
        runs = ("a1", "b1", "b2", "a2")
        lines = _topic_spec_and_lines(scratch, ["fresh", "young", *(f"new-{name}" for name in runs)], partitions,
                                      now, young=["young"])
        offset = ("commit-offset", "--group", "g", "--partition", "0", "--offset", "1")
        for args in (*(("produce", "--topic", t, "--input", lines, "--now", str(now)) for t in ("fresh", "young")),
                     *(("maintain", "--topic", t, "--now", str(now)) for t in ("fresh", "young")),
                     (*offset, "--topic", "fresh")):
            ok &= _command({}, args[0], scratch, args)
        for what, topic, (verb, *options) in (
                ("", "fresh", ("--json", "status", "--now", str(now))),
                ("", "fresh", ("--json", "plan", "--now", str(now))), ("", "fresh", ("--json", "create")),
                (", idle", "fresh", ("--json", "maintain", "--now", str(now))),
                ("", "fresh", ("--json", *offset)),
                (", idle, with the report", "fresh", ("maintain", "--now", str(now))),
                # every record too young to compact: the metadata cannot rule out a head, so each
                # partition's records are scanned (by Arrow with no JVM, stop 90; by Spark before)
                (", idle, young records in every head", "young", ("--json", "maintain", "--now", str(now))),
                # a partition's records printed: by Arrow from its files (stop 91), by Spark before
                (" of one partition", "fresh", ("read", "--partition", "0"))):
            command = verb if verb != "--json" else options[0]
            label = f"topiclake {command}{what}, {partitions} {'settled ' if topic == 'fresh' else ''}partitions"
            labels.append(label)
            for name in runs:
                printed: list[str] = []
                ok &= _read_only_run(results, label, name, scratch, (verb, *options, "--topic", topic), printed)
                if verb in ("--json", "read"):  # (the report's pages are compared by the report_commands section)
                    said.setdefault(label, set()).add(_decided(printed[0]) if command == "maintain" else printed[0])
            _mean_of_twins(results, label, READ_ONLY_COMMAND_TWINS.sides)
        # a first commit-offset of the warehouse: the committed offsets' table created too (its
        # folder removed before each run)
        label = f"topiclake commit-offset creating its table, {partitions} settled partitions"
        labels.append(label)
        for name in runs:
            shutil.rmtree(os.path.join(scratch, "w", "_topiclake", "consumer_offsets"))
            printed = []
            ok &= _read_only_run(results, label, name, scratch, ("--json", *offset, "--topic", "fresh"), printed)
            said.setdefault(label, set()).add(printed[0])
        _mean_of_twins(results, label, READ_ONLY_COMMAND_TWINS.sides)
        # last, a write: the same lines produced into the existing tables, each run's records
        # at the log end the one before left (so nothing lost or numbered twice)
        label = f"topiclake produce of the same lines, {partitions} existing partitions"
        labels.append(label)
        ends: dict[int, int] = {}
        for name in runs:
            printed = []
            ok &= _read_only_run(results, label, name, scratch,
                                 ("--json", "produce", "--topic", "fresh", "--input", lines, "--now", str(now)), printed)
            appended = json.loads(printed[0]) if printed else []
            ok &= all(ends.get(r["partition"], r["base_offset"]) == r["base_offset"] for r in appended)
            ends.update({r["partition"]: r["base_offset"] + r["count"] for r in appended})
            said.setdefault(label, set()).add(json.dumps(sorted((r["partition"], r["count"]) for r in appended)))
        _mean_of_twins(results, label, READ_ONLY_COMMAND_TWINS.sides)
        # validate of every partition, since its first maintain (four produces since): counted by
        # Arrow in the driver, no JVM (stop 108), against in one Spark batch, each version read
        # through Delta (as before)
        label = f"topiclake validate, {partitions} partitions appended to since their run"
        labels.append(label)
        for name in runs:
            printed = []
            ok &= _read_only_run(results, label, name, scratch, ("--json", "validate", "--topic", "fresh"), printed)
            said.setdefault(label, set()).add(printed[0] if printed else "")
            ok &= bool(printed) and all(p["passed"] for p in json.loads(printed[0]))
        _mean_of_twins(results, label, READ_ONLY_COMMAND_TWINS.sides)
        # and into a new topic in that warehouse (its own each run), whose tables the appends create
        label = f"topiclake produce of the same lines into a new topic of {partitions} partitions"
        labels.append(label)
        for name in runs:
            printed = []
            ok &= _read_only_run(results, label, name, scratch, ("--json", "produce", "--topic", f"new-{name}",
                                                                  "--input", lines, "--now", str(now)), printed)
            appended = json.loads(printed[0]) if printed else []
            said.setdefault(label, set()).add(json.dumps(sorted(
                (r["partition"], r["base_offset"], r["count"], r["version"]) for r in appended)))
        _mean_of_twins(results, label, READ_ONLY_COMMAND_TWINS.sides)
        # a first command into a warehouse folder not there yet (a new one each run): its tables
        # told missing from the local folders and made by topiclake's own commits, no JVM (stop
        # 91), against the session started first, which Spark then asked (a JVM as before)
        for verb, *options in (("create",), ("produce", "--input", lines, "--now", str(now))):
            label = f"topiclake {verb} into a new warehouse, {partitions} partitions"
            labels.append(label)
            for name in runs:
                printed = []
                ok &= _read_only_run(results, label, name, scratch, ("--json", verb, "--topic", "fresh", *options),
                                     printed, warehouse=os.path.join(scratch, f"new-{verb}-{name}", "w"))
                said.setdefault(label, set()).add(printed[0])
            _mean_of_twins(results, label, READ_ONLY_COMMAND_TWINS.sides)
    return {"partitions": partitions, "labels": labels, "commands_succeeded": ok,
            "same_output_every_way": ok and all(len(outputs) == 1 for outputs in said.values())}


#: ``vector_commands``: a maintain of small partitions with deletion vectors, by topiclake or by Delta.
VECTOR_COMMAND_TWINS = TwinKind("vector_commands", ("by topiclake", "by Delta"), "by topiclake / by Delta")
#: Side B (as before stop 109): Delta's REORG and VACUUM, bin-packing through Delta's
#: transaction, and the version a compaction starts from pinned through Delta.
_VECTORS_BY_DELTA_PRELUDE = ("from framework.log import own_vacuum\n"
                             "from framework.stages import maintenance, optimize, vacuum\n"
                             "vacuum.purged_locally = lambda log: None\n"
                             "own_vacuum.vacuumed = lambda *args: None\n"
                             "optimize._execute_locally = lambda *args: None\n"
                             "def _pinned(log, snapshot):\n"
                             "    frame = log.read(snapshot.version)\n"
                             "    return lambda: frame\n"
                             "maintenance.pinned_before = _pinned")


def bench_vector_commands(spark, results: dict, partitions: int, now: int) -> dict:
    """See the module's text, section 35."""
    import yaml

    partitions = min(partitions, 10)
    label = f"topiclake maintain, {partitions} small partitions with deletion vectors, no window"
    decided, contents, ok = set(), set(), True
    with tempfile.TemporaryDirectory(prefix="topiclake-vectors-") as scratch:
        with open(os.path.join(scratch, "marked.yaml"), "w") as handle:
            yaml.safe_dump({"topic": "marked", "partitions": partitions, "config": {
                "cleanup.policy": "compact", "min.cleanable.dirty.ratio": 0.0, "delete.retention.ms": DAY_MS,
                "time.travel.retention.ms": 0}}, handle)
        for call in range(4):  # every key again each call: losers in every file
            lines = os.path.join(scratch, f"lines-{call}.jsonl")
            with open(lines, "w") as handle:
                handle.writelines(json.dumps({"key": f"k{i % (20 * partitions)}", "value": f"{call}.{i}",
                                              "timestamp": now - DAY_MS + 1000 * call + i}) + "\n"
                                  for i in range(40 * partitions))
            ok &= _command({}, "produce", scratch,
                           ("produce", "--topic", "marked", "--input", lines, "--now", str(now)))
            if call == 0:
                for p in range(partitions):
                    spark.sql(f"ALTER TABLE {delta_table_sql(os.path.join(scratch, 'w', f'marked-{p}'))} "
                              "SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
            if call in (1, 2):
                ok &= _command({}, "compact", scratch, ("compact", "--topic", "marked", "--now", str(now)))
        for name in ("a1", "b1", "b2", "a2"):
            warehouse = os.path.join(scratch, name)
            shutil.copytree(os.path.join(scratch, "w"), warehouse)
            printed: list[str] = []
            as_before = name.startswith("b")
            ok &= _command(results, f"{label}, {VECTOR_COMMAND_TWINS.sides[as_before]} ({name})", scratch,
                           ("--json", "maintain", "--topic", "marked", "--now", str(now), "--no-report"),
                           prelude=_VECTORS_BY_DELTA_PRELUDE if as_before else None, printed=printed,
                           warehouse=warehouse)
            run = json.loads(printed[0]) if printed and printed[0] else {"partitions": []}
            ok &= all(s["validation"] in ("passed", "skipped") for p in run["partitions"] for s in p["stages"])
            decided.add(_decided(printed[0]) if printed and printed[0] else "")
            contents.add(json.dumps([sorted(map(repr, spark.read.format("delta").load(
                os.path.join(warehouse, f"marked-{p}")).collect())) for p in range(partitions)]))
            ok &= not any(f.startswith("deletion_vector_") for p in range(partitions)
                          for f in os.listdir(os.path.join(warehouse, f"marked-{p}")))
        _mean_of_twins(results, label, VECTOR_COMMAND_TWINS.sides)
    return {"partitions": partitions, "label": label, "commands_succeeded": ok,
            "same_decisions_every_way": len(decided) == 1, "same_records_every_way": len(contents) == 1}


def _read_only_run(results: dict, label: str, name: str, scratch: str, args: tuple[str, ...], printed: list,
                   warehouse: str | None = None) -> bool:
    """One run (``name``: a1, b1, b2 or a2) of a ``read_only_commands`` case, a new process:
    side B with the session started first and the ways as before (:data:`_SESSION_FIRST_PRELUDE`)."""
    as_before = name.startswith("b")
    return _command(results, f"{label}, {READ_ONLY_COMMAND_TWINS.sides[as_before]} ({name})", scratch, args,
                    prelude=_SESSION_FIRST_PRELUDE if as_before else None, printed=printed, warehouse=warehouse)


def _decided(printed: str) -> str:
    """A maintain's JSON without what tells two runs apart besides what they decided."""
    own = ("run_id", "run_started_ms", "duration_ms")
    run = json.loads(printed)
    for part in run["partitions"]:
        part["stages"] = [{k: v for k, v in stage.items() if k not in own} for stage in part["stages"]]
    return json.dumps({k: v for k, v in run.items() if k not in own}, sort_keys=True)


def _warehouse_contents(spark, folder: str, topic: str, partitions: int) -> tuple:
    """Every partition's (records, a hash of its offsets, keys, values and timestamps)."""
    from framework.log.warehouse import Warehouse

    warehouse = Warehouse.resolve(folder)
    frames = [spark.read.format("delta").load(warehouse.partition_path(topic, p))
              .selectExpr(f"{p} AS p", "CAST(xxhash64(`offset`, key, value, `timestamp`) AS DECIMAL(38, 0)) AS h")
              for p in range(partitions)]
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame)
    return tuple(tuple(row) for row in union.groupBy("p").agg({"*": "count", "h": "sum"}).orderBy("p").collect())


@dataclass(frozen=True)
class SessionSwitch:
    """A setting of the embedded session chosen by an environment variable, which the
    ``partitions`` section measures both ways in new processes: A as shipped, B with
    ``env`` set to ``value`` (as before)."""

    sides: tuple[str, str]
    env: str
    value: str

    def environment(self, side: str) -> dict[str, str]:
        """This process's environment for a new process of ``side``: no switch's variable
        but this one's, set on the "as before" side."""
        env = {name: value for name, value in os.environ.items()
               if name not in {s.env for s in SESSION_SWITCHES.values()}}
        if side == self.sides[1]:
            env[self.env] = self.value
        return env


#: The sections that measure a session switch, by name.
SESSION_SWITCHES = {
    "file_system": SessionSwitch(("topiclake's local file system", "Hadoop's (as before)"),
                                 local_file_system.LOCAL_FS_ENV, "hadoop"),
    "yarn_defaults": SessionSwitch(("without YARN's defaults", "with YARN's defaults (as before)"),
                                   yarn_defaults.YARN_DEFAULTS_ENV, "keep"),
    # the JVM's own way to choose: the session's collector option gives way to it
    "collector": SessionSwitch(("the throughput collector", "G1, HotSpot's pick (as before)"),
                               "JDK_JAVA_OPTIONS", "-XX:+UseG1GC"),
}


def bench_session_switch(results: dict, partitions: int, switch: SessionSwitch) -> dict:
    """The ``partitions`` section (``--twins none``) in new processes, A B B A: the embedded
    session as shipped against with ``switch`` set the other way (as before). Each figure is
    the mean of its side's two runs; the process is new, so its JVM's settings are the side's."""
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    runs: dict[str, list[dict]] = {side: [] for side in switch.sides}
    exact = True
    for side in (*switch.sides, *reversed(switch.sides)):
        with tempfile.TemporaryDirectory(prefix="topiclake-session-switch-") as scratch:
            env = switch.environment(side)
            out = os.path.join(scratch, "out.json")
            done = subprocess.run([sys.executable, os.path.join(repo, "jobs", "benchmark.py"), "--only", "partitions",
                                   "--twins", "none", "--partitions", str(partitions), "--json", out],
                                  cwd=repo, env=env, capture_output=True, text=True)
            if done.returncode != 0 or not os.path.isfile(out):
                print(done.stderr[-3000:], file=sys.stderr)
                exact = False
                continue
            with open(out) as handle:
                runs[side].append(json.load(handle)["seconds"])
        print(f"  partitions section, {side:<32} {sum(runs[side][-1].values()) if runs[side] else -1:8.2f} s",
              file=sys.stderr, flush=True)
    labels = [label for label in (runs[switch.sides[0]] or [{}])[0] if not label.startswith("warm-up")]
    for label in labels:
        for side in switch.sides:
            times = [run[label] for run in runs[side] if label in run]
            if times:
                results[f"{label}, {side}"] = round(statistics.mean(times), 3)
    return {"partitions": partitions, "labels": labels, "runs_completed": {s: len(r) for s, r in runs.items()},
            "first_failed": not exact or any(len(r) != 2 for r in runs.values())}


def _switch_ratios(results: dict, labels: list[str], switch: SessionSwitch) -> dict:
    shipped, before = switch.sides
    return {f"{label}, {shipped} / {before}": round(results[f"{label}, {shipped}"] / results[f"{label}, {before}"], 2)
            for label in labels if f"{label}, {shipped}" in results and f"{label}, {before}" in results}


def _ratios(results: dict, cases: list[dict], partitions: int, produce_count: int) -> dict:
    ratios = {}
    for case in cases:
        tag = _tag(case["clean"])
        run, checks, naive = (results[f"[{tag}] {x}"] for x in ("compaction (plan + commit)", "guarantee checks",
                                                                 "naive rewrite"))
        ratios[f"[{tag}] naive rewrite / compaction"] = round(naive / run, 2)
        ratios[f"[{tag}] compaction / Delta's MERGE (as before)"] = round(
            run / results[f"[{tag}] compaction, Delta's MERGE (as before)"], 2)
        ratios[f"[{tag}] compaction / decided by Spark (as before)"] = round(
            run / results[f"[{tag}] compaction, decided by Spark (as before)"], 2)
        with_vectors = results[f"[{tag}] compaction, deletion vectors (opt-in)"]
        ratios[f"[{tag}] naive rewrite / compaction with deletion vectors"] = round(naive / with_vectors, 2)
        ratios[f"[{tag}] compaction with deletion vectors / by Delta's MERGE (as before)"] = round(
            with_vectors / results[f"[{tag}] compaction, deletion vectors by Delta's MERGE"], 2)
        ratios[f"[{tag}] compaction with deletion vectors / without the key index (as before)"] = round(
            with_vectors / results[f"[{tag}] compaction, deletion vectors, no key index (as before)"], 2)
        ratios[f"[{tag}] first compaction with deletion vectors (key indexes built) / a later one"] = round(
            results[f"[{tag}] compaction, deletion vectors, first run (key indexes built)"] / with_vectors, 2)
        ratios[f"[{tag}] checks / compaction, with deletion vectors"] = round(
            results[f"[{tag}] guarantee checks, deletion vectors"] / with_vectors, 2)
        ratios[f"[{tag}] naive rewrite / compaction, both lz4_raw (opt-in)"] = round(
            results[f"[{tag}] naive rewrite, lz4_raw"] / results[f"[{tag}] compaction, lz4_raw (opt-in)"], 2)
        ratios[f"[{tag}] checks / compaction"] = round(checks / run, 2)
        ratios[f"[{tag}] checks / checks counted by Spark (as before)"] = round(
            checks / results[f"[{tag}] guarantee checks, counted by Spark (as before)"], 2)
        ratios[f"[{tag}] checks, whole versions paired / compaction"] = round(
            results[f"[{tag}] guarantee checks, whole versions paired"] / run, 2)
        ratios[f"[{tag}] compaction / compaction without the change data feed"] = round(
            run / results[f"[{tag}] compaction, no change data feed"], 2)
    if len(cases) >= 2:
        small, large = _tag(cases[0]["clean"]), _tag(cases[-1]["clean"])
        # the mean holds the smaller case's a1, the process's first compaction of a measured
        # copy (often the slowest run); its a2 against the larger case's is warm against warm
        for suffix, label in (("", "compaction (plan + commit)"),
                              (", a2 against a2", "compaction (plan + commit) (a2)"),
                              (", Delta's MERGE", "compaction, Delta's MERGE (as before)"),
                              (", deletion vectors", "compaction, deletion vectors (opt-in)"),
                              (", deletion vectors, d2 against d2", "compaction, deletion vectors (opt-in) (d2)"),
                              (", deletion vectors, no key index (as before)",
                               "compaction, deletion vectors, no key index (as before)"),
                              (", deletion vectors by Delta's MERGE", "compaction, deletion vectors by Delta's MERGE")):
            ratios[f"growth {small} -> {large}{suffix}"] = round(
                results[f"[{large}] {label}"] / results[f"[{small}] {label}"], 2)
    idle = results.get(f"idle maintain of {partitions} partitions")
    if idle is not None:
        ratios["idle maintain, s per partition"] = round(idle / partitions, 3)
        ratios["first maintain, s per partition"] = round(results[f"first maintain of {partitions} partitions"]
                                                          / partitions, 3)
        ratios["first maintain, two cleaner threads, s per partition"] = round(
            results[f"first maintain of {partitions} partitions, two cleaner threads"] / partitions, 3)
        checked = f"first maintain of {partitions} partitions with checks and history"
        for name in ("one cleaner thread", "two cleaner threads"):
            ratios[f"first maintain with checks and history, {name}, s per partition"] = round(
                results[f"{checked}, {name}"] / partitions, 3)
        ratios["first maintain with checks, two threads: checks counted in batches / each at once"] = round(
            results[f"{checked}, {BATCHED}"] / results[f"{checked}, {AT_ONCE}"], 2)
        ratios["compact,delete: first maintain with checks, two threads: checks counted in batches / each at once"] = (
            round(results[f"{RETAINED}{checked}, {BATCHED}"] / results[f"{RETAINED}{checked}, {AT_ONCE}"], 2))
        for prefix, stage, before in (("", "compaction", SPARK_COUNTED), (RETAINED, "retention", RETENTIONS_BY_SPARK)):
            ratios[f"{prefix}first maintain with checks, two threads: {stage} checks by Arrow / by Spark"] = round(
                results[f"{prefix}{checked}, {BATCHED}"] / results[f"{prefix}{checked}, {before}"], 2)
        quarter = max(1, partitions // 4)

        produced_lines = f"produce {5000 * quarter // partitions} lines into {quarter} partitions"
        # only the twin kinds that ran (--twins) have a ratio
        for prefix, kind, label in (*(("produce lines", k, produced_lines) for k in PRODUCE_TWINS),
                                    ("create tables", CREATE_TWINS, f"create {quarter} partition tables")):
            ratio = kind.ratio_of(label, results)
            if ratio is not None:
                ratios[f"{prefix}, {kind.ratio}"] = ratio
        for kind in TWIN_KINDS:
            measured = [(f"{run} maintain", f"{run} maintain of {quarter} partitions") for run in ("first", "idle")]
            if kind.produce_timed:
                measured.insert(0, ("produce lines", produced_lines))
            for prefix, label in measured:
                ratio = kind.ratio_of(label, results)
                if ratio is not None:
                    ratios[f"{prefix}, {kind.ratio}"] = ratio
    new_tables = NEW_TABLE_TWINS.ratio_of(f"first produce of 5000 lines into {partitions} new partitions", results)
    if new_tables is not None:
        ratios[f"first produce, {NEW_TABLE_TWINS.ratio}"] = new_tables
    packing = PACKING_TWINS.ratio_of(f"bin-packing of {partitions} partitions of six files", results)
    if packing is not None:
        ratios[f"bin-packing, {PACKING_TWINS.ratio}"] = packing
    offsets = OFFSETS_TWINS.ratio_of(OFFSETS_LABEL, results)
    if offsets is not None:
        ratios[f"offset commits and reads, {OFFSETS_TWINS.ratio}"] = offsets
    for label in [label for label in results if label.endswith(f"compaction in a new process, {HUGE_PAGES[0]}")]:
        before = results.get(label.replace(HUGE_PAGES[0], HUGE_PAGES[1]))
        if before:
            ratios[f"{label} / {HUGE_PAGES[1]}"] = round(results[label] / before, 2)
    young = YOUNG_HEAD_TWINS.ratio_of(YOUNG_HEADS_LABEL, results)
    if young is not None:
        ratios[f"plans of partitions with young records, {YOUNG_HEAD_TWINS.ratio}"] = young
        ratios["first maintain of partitions with young records, batched / each alone"] = (
            YOUNG_HEAD_TWINS.ratio_of(YOUNG_HEADS_DUE_LABEL, results))
    prunes = PRUNE_TWINS.ratio_of(PRUNES_LABEL, results)
    if prunes is not None:
        ratios[f"history appends and prunes, {PRUNE_TWINS.ratio}"] = prunes
        for reached in _HISTORY_AS_BEFORE_PRELUDES:
            commands = f"idle topiclake maintain whose history append {reached}s, {partitions} partitions"
            ratios[f"{commands}, {HISTORY_COMMAND_TWINS.ratio}"] = HISTORY_COMMAND_TWINS.ratio_of(commands, results)
    produced = results.get(f"produce {produce_count} records (DataFrame)")
    if produced:
        ratios["produce, records per s"] = round(produce_count / produced)
        ratios["produce, records per s, first in the process"] = round(
            produce_count / results[f"produce {produce_count} records (DataFrame), try 1"])
        ratios["produce / bare Delta append"] = round(produced / results["bare Delta append of the same frame"], 2)
        ratios["produce, held frame uncompressed / compressed (as before)"] = round(
            produced / results[f"produce {produce_count} records (DataFrame), held frame compressed (as before)"], 2)
        spread = f"produce {produce_count} records (DataFrame) into {MANY_PARTITIONS} partitions"
        ratios[f"produce into {MANY_PARTITIONS} partitions, records per s"] = round(
            produce_count / results[f"{spread}, vectorised partitioner"])
        ratios[f"produce into {MANY_PARTITIONS} partitions, vectorised / row-at-a-time partitioner"] = round(
            results[f"{spread}, vectorised partitioner"] / results[f"{spread}, row-at-a-time partitioner"], 2)
    fresh = results.get("full scan, fresh one-file copy")
    if fresh:
        for name in ("packed", "unpacked"):
            ratios[f"full scan {name} / one-file copy"] = round(results[f"full scan, {name}"] / fresh, 2)
    checked = results.get("checks: the compaction checked")
    if checked:
        for label in ("now: GE pandas engine", "before: GE Spark engine"):
            ratios[f"checks / compaction, {label}"] = round(results[f"checks of one compaction, {label}"] / checked, 2)
        one, warm = "checks of one compaction, ", "checks: the same compaction, warm (plan + commit)"
        for name, part, whole in (
                ("checks counted by Arrow / by Spark", one + "counted by Arrow", one + "counted by Spark"),
                ("checks counted by Arrow / the same compaction, warm", one + "counted by Arrow", warm),
                ("checks, versions read from their files / through Delta", one + "versions read from their files",
                 one + "versions read through Delta"),
                ("checks paired in one Spark task / the same compaction, warm", one + "paired in one Spark task", warm),
                ("checks, paired in one Spark task / through shuffles", one + "paired in one Spark task",
                 one + "paired through shuffles")):
            ratios[name] = round(results[part] / results[whole], 2)
        ratios["retention checks counted by Arrow / by Spark"] = round(
            results["checks of one retention, counted by Arrow"] / results["checks of one retention, counted by Spark"],
            2)
        ratios["vacuum check, versions read by Arrow / in one Spark query"] = round(
            results["vacuum check, versions read by Arrow"] / results["vacuum check, versions read in one query"], 2)
        ratios["vacuum check, versions read in one query / a query a version"] = round(
            results["vacuum check, versions read in one query"] / results["vacuum check, a query a version"], 2)
    listed_and_archived = results.get(f"topiclake create, {START_SIDES[0]}")
    if listed_and_archived:
        before = results[f"topiclake create, {START_SIDES[2]}"]
        ratios["topiclake create, jars listed and classes archived / as before"] = round(listed_and_archived / before, 2)
        ratios["topiclake create, jars listed / as before"] = round(results[f"topiclake create, {START_SIDES[1]}"]
                                                                   / before, 2)
    if "lint" in results:
        ratios["lint / bare interpreter"] = round(results["lint"] / results["bare interpreter"], 2)
    return ratios


def run(argv) -> int:
    parser = argparse.ArgumentParser(prog="jobs/benchmark.py", description=__doc__.splitlines()[0])
    parser.add_argument("--clean", default="500000,5000000", help="clean-section sizes, comma-separated")
    parser.add_argument("--updates", type=int, default=50_000)
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--produce", type=int, default=1_000_000)
    parser.add_argument("--calls", type=int, default=300, help="produce calls of the files section")
    parser.add_argument("--runs", type=int, default=200, help="maintain runs of the metadata section")
    parser.add_argument("--checkpoint-calls", type=int, default=20, help="produce calls of the checkpoints section")
    parser.add_argument("--page-rounds", type=int, default=5, help="maintain runs of the pages section")
    parser.add_argument("--cut-runs", type=int, default=16, help="maintain runs of the cuts section")
    parser.add_argument("--prunes", type=int, default=6, help="history prunes of the prunes section")
    parser.add_argument("--window-commits", type=int, default=60_000, help="commits of the window_start section")
    parser.add_argument("--window-delta-commits", type=int, default=400,
                        help="produces into the window_start section's real table")
    parser.add_argument("--time-boundary-records", type=int, default=500_000,
                        help="records a minute of the time_boundary, retention_packing, consumed_retention, "
                             "size_cuts and size_oldest sections")
    parser.add_argument("--vector-boundary-records", type=int, default=1_000_000,
                        help="records of the vector_boundary section's partition")
    parser.add_argument("--check-runs", type=int, default=10, help="check runs per engine of the checks section")
    parser.add_argument("--heap-partitions", type=int, default=60, help="partitions of the heap section")
    parser.add_argument("--file-system-partitions", type=int, default=40,
                        help="partitions of the file_system and yarn_defaults sections' runs of the partitions section")
    parser.add_argument("--twins", help="the partitions section's twin kinds to run, comma-separated, or none (default: all)")
    parser.add_argument("--only", default=",".join(SECTIONS), help=f"sections to run, of {', '.join(SECTIONS)}")
    parser.add_argument("--warehouse", help="where to build the tables (default: a temporary folder)")
    parser.add_argument("--json", help="also write the results to this file")
    # the huge_pages section's child process (bench_huge_pages)
    parser.add_argument("--compact-copy", help=argparse.SUPPRESS)
    parser.add_argument("--compact-copy-topic", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.compact_copy:
        compact_copy(args.compact_copy, args.compact_copy_topic, args.warehouse, args.json)
        return 0
    sections = set(args.only.split(","))
    twin_kinds = None if not args.twins else [] if args.twins == "none" else args.twins.split(",")
    unknown = sorted(set(twin_kinds or ()) - {kind.name for kind in TWIN_KINDS})
    if unknown:
        parser.error(f"--twins: no twin kind {', '.join(unknown)}; kinds: {', '.join(k.name for k in TWIN_KINDS)}")

    from framework.log.warehouse import Warehouse
    from framework.session import get_session

    folder = args.warehouse or tempfile.mkdtemp(prefix="topiclake-benchmark-")
    warehouse = Warehouse.resolve(folder)
    spark = get_session("topiclake-benchmark")
    now = int(time.time() * 1000)
    results: dict[str, float] = {}
    cases, others = [], {}
    print(f"benchmark in {warehouse.root}", file=sys.stderr)
    try:  # a temporary warehouse goes, however the run ends (a 5M run leaves 13 GB)
        if "compaction" in sections:
            for clean in (int(x) for x in args.clean.split(",")):
                cases.append(bench_compaction(spark, warehouse, clean, args.updates, now, results))
        if "huge_pages" in sections:
            others["huge_pages"] = bench_huge_pages(spark, warehouse, max(int(x) for x in args.clean.split(",")),
                                                    args.updates, now, results)
        if "partitions" in sections:
            others["partitions"] = bench_partitions(
                spark, warehouse, args.partitions, now, results, twin_kinds)
        if "commands" in sections:
            others["commands"] = bench_commands(results, args.partitions, now)
        if "collector_commands" in sections:
            others["collector_commands"] = bench_collector_commands(spark, results, args.partitions, now)
        if "produce_commands" in sections:
            others["produce_commands"] = bench_produce_commands(spark, results, args.partitions, now)
        if "batch_commands" in sections:
            others["batch_commands"] = bench_batch_commands(spark, results, args.partitions, now)
        if "checkpoint_commands" in sections:
            others["checkpoint_commands"] = bench_checkpoint_commands(spark, results, args.partitions, now)
        if "vector_retention_commands" in sections:
            others["vector_retention_commands"] = bench_vector_retention_commands(spark, results, args.partitions, now)
        if "vector_boundary" in sections:
            others["vector_boundary"] = bench_vector_boundary(spark, warehouse, args.vector_boundary_records, now,
                                                              results)
        if "staged_commands" in sections:
            others["staged_commands"] = bench_staged_commands(spark, results, args.partitions, now)
        if "report_commands" in sections:
            others["report_commands"] = bench_report_commands(results, args.partitions, now)
        if "read_only_commands" in sections:
            others["read_only_commands"] = bench_read_only_commands(results, args.partitions, now)
        if "vector_commands" in sections:
            others["vector_commands"] = bench_vector_commands(spark, results, args.partitions, now)
        if "young_heads" in sections:
            others["young_heads"] = bench_young_heads(spark, warehouse, args.partitions, now, results)
        if "produce" in sections:
            others["produce"] = bench_produce(spark, warehouse, args.produce, now, results)
        if "new_tables" in sections:
            others["new_tables"] = bench_new_tables(spark, warehouse, args.partitions, now, results)
        if "checkpoints" in sections:
            others["checkpoints"] = bench_checkpoints(spark, warehouse, args.partitions, args.checkpoint_calls, now,
                                                      results)
        if "cuts" in sections:
            others["cuts"] = bench_cuts(spark, warehouse, args.cut_runs, now, results)
        if "time_boundary" in sections:
            others["time_boundary"] = bench_cuts(spark, warehouse, args.cut_runs, now, results, TIME_BOUNDARY_TWINS,
                                                 args.time_boundary_records)
        if "retention_packing" in sections:
            others["retention_packing"] = bench_cuts(spark, warehouse, args.cut_runs, now, results,
                                                     RETENTION_PACKING_TWINS, args.time_boundary_records)
        if "consumed_retention" in sections:
            others["consumed_retention"] = bench_cuts(spark, warehouse, args.cut_runs, now, results, CONSUMED_TWINS,
                                                      args.time_boundary_records, rule="consumed")
        if "size_cuts" in sections:
            others["size_cuts"] = bench_cuts(spark, warehouse, args.cut_runs, now, results, SIZE_CUT_TWINS,
                                             args.time_boundary_records, rule="size")
        if "size_oldest" in sections:
            others["size_oldest"] = bench_cuts(spark, warehouse, args.cut_runs, now, results, SIZE_OLDEST_TWINS,
                                               args.time_boundary_records, rule="size")
        if "size_retention" in sections:
            others["size_retention"] = bench_size_retention(spark, warehouse, args.cut_runs, now, results)
        if "pages" in sections:
            others["pages"] = bench_pages(spark, warehouse, args.page_rounds, now, results)
        if "packing" in sections:
            others["packing"] = bench_packing(spark, warehouse, args.partitions, now, results)
        if "offsets" in sections:
            others["offsets"] = bench_offsets(spark, warehouse, args.runs, results)
        if "prunes" in sections:
            others["prunes"] = bench_prunes(spark, warehouse, args.prunes, results)
            others["prunes"]["commands"] = bench_prune_commands(spark, results, args.partitions, now)
        if "window_start" in sections:
            others["window_start"] = bench_window_start(spark, warehouse, args.window_commits,
                                                        args.window_delta_commits, now, results)
        if "files" in sections:
            others["files"] = bench_files(spark, warehouse, args.calls, now, results)
        if "metadata" in sections:
            others["metadata"] = bench_metadata(spark, warehouse, args.runs, now, results)
        if "checks" in sections:
            others["checks"] = bench_checks(spark, warehouse, args.check_runs, now, results)
        if "heap" in sections:
            others["heap"] = bench_heap(spark, warehouse, args.heap_partitions, now, results)
        if "lint" in sections:
            bench_lint(results)
        if "start" in sections:
            others["start"] = bench_start(results)
        for name, switch in SESSION_SWITCHES.items():
            if name in sections:
                others[name] = bench_session_switch(results, args.file_system_partitions, switch)
        ratios = _ratios(results, cases, args.partitions, args.produce)
        for name, switch in SESSION_SWITCHES.items():
            if name in others:
                ratios.update(_switch_ratios(results, others[name]["labels"], switch))
        if "collector_commands" in others:
            ratios.update(_switch_ratios(results, others["collector_commands"]["labels"],
                                         SESSION_SWITCHES["collector"]))
        if "produce_commands" in others:
            ratio = PRODUCE_COMMAND_TWINS.ratio_of(others["produce_commands"]["label"], results)
            ratios[f"topiclake produce into new partitions, {PRODUCE_COMMAND_TWINS.ratio}"] = ratio
        if "checkpoints" in others:
            ratios[f"produce and maintain, {CHECKPOINT_TWINS.ratio}"] = CHECKPOINT_TWINS.ratio_of(
                others["checkpoints"]["label"], results)
        if "cuts" in others:
            ratios[f"maintain after cuts, {CUT_TWINS.ratio}"] = CUT_TWINS.ratio_of(others["cuts"]["label"], results)
            ratios[f"idle maintain after cuts, {CUT_TWINS.ratio}"] = CUT_TWINS.ratio_of(
                others["cuts"]["idle_label"], results)
            ratios[f"median idle maintain after cuts, {CUT_TWINS.ratio}"] = CUT_TWINS.ratio_of(
                others["cuts"]["median_label"], results)
        for name, kind in (("time_boundary", TIME_BOUNDARY_TWINS), ("retention_packing", RETENTION_PACKING_TWINS),
                           ("consumed_retention", CONSUMED_TWINS), ("size_cuts", SIZE_CUT_TWINS),
                           ("size_oldest", SIZE_OLDEST_TWINS)):
            for key in ("label", "idle_label", "median_label", "plan_label") if name in others else ():
                ratios[f"{others[name][key]}, {kind.ratio}"] = kind.ratio_of(others[name][key], results)
        if "size_retention" in others:
            for key in ("label", "median_label"):
                ratios[f"{others['size_retention'][key]}, {SIZE_TWINS.ratio}"] = \
                    SIZE_TWINS.ratio_of(others["size_retention"][key], results)
        if "pages" in others:
            ratios[f"maintain after many appends, {PAGE_TWINS.ratio}"] = PAGE_TWINS.ratio_of(
                others["pages"]["label"], results)
        if "checkpoint_commands" in others:
            ratio = CHECKPOINT_COMMAND_TWINS.ratio_of(others["checkpoint_commands"]["label"], results)
            ratios[f"topiclake produce at a checkpoint version, {CHECKPOINT_COMMAND_TWINS.ratio}"] = ratio
        if "batch_commands" in others:
            ratio = BATCH_COMMAND_TWINS.ratio_of(others["batch_commands"]["label"], results)
            ratios[f"topiclake maintain, first, {BATCH_COMMAND_TWINS.ratio}"] = ratio
        if "staged_commands" in others:
            ratio = STAGED_COMMAND_TWINS.ratio_of(others["staged_commands"]["label"], results)
            ratios[f"topiclake maintain, first, batch {STAGED_COMMAND_TWINS.ratio}"] = ratio
        if "report_commands" in others:
            ratio = REPORT_COMMAND_TWINS.ratio_of(others["report_commands"]["label"], results)
            ratios[f"topiclake report, {REPORT_COMMAND_TWINS.ratio}"] = ratio
        for name, kind in (("vector_commands", VECTOR_COMMAND_TWINS),
                           ("vector_retention_commands", VECTOR_RETENTION_TWINS)):
            if name in others:  # (their labels name the command and its partitions)
                label = others[name]["label"]
                ratios[f"{label}, {kind.ratio}"] = kind.ratio_of(label, results)
        for label in others.get("vector_boundary", {}).get("labels", []):
            a, b = (results[f"{label}, {side}"] for side in VECTOR_BOUNDARY_SIDES)
            ratios[f"{label}, {VECTOR_BOUNDARY_SIDES[0]} / {VECTOR_BOUNDARY_SIDES[1]}"] = round(a / b, 4) if b else None
        for label in others.get("read_only_commands", {}).get("labels", []):
            ratios[f"{label}, {READ_ONLY_COMMAND_TWINS.ratio}"] = READ_ONLY_COMMAND_TWINS.ratio_of(label, results)
        for label, sides in ((WINDOW_START_LABEL, WINDOW_START_SIDES), (NEWEST_COMMITS_LABEL, NEWEST_COMMITS_SIDES),
                             (DELTA_WINDOW_START_LABEL, DELTA_WINDOW_START_SIDES)):
            if "window_start" in others:
                a, b = (results[f"{label}, {side}"] for side in sides)
                ratios[f"{label}, {sides[0]} / {sides[1]}"] = round(a / b, 4) if b else None
        summary = {"seconds": results, "ratios": ratios, "compaction": cases, **others}
        print(json.dumps(summary, indent=2))
        if args.json:
            with open(args.json, "w") as handle:
                json.dump(summary, handle, indent=2)
    finally:
        if not args.warehouse:
            shutil.rmtree(folder, ignore_errors=True)
    exact = all(c["checks_passed"] and c["same_winners_as_naive"] for c in cases)
    failed = any(v.get("first_failed") or v.get("idle_failed") for v in others.values() if isinstance(v, dict))
    failed = failed or not others.get("files", {}).get("same_records", True)
    failed = failed or not others.get("checks", {}).get("checks_passed", True)
    failed = failed or not others.get("start", {}).get("same_tables_every_way", True)
    failed = failed or not others.get("commands", {}).get("commands_succeeded", True)
    failed = failed or not others.get("new_tables", {}).get("same_offsets", True)
    failed = failed or not others.get("checkpoints", {}).get("same_offsets", True)
    for name in ("cuts", "pages", "size_retention", "time_boundary", "retention_packing", "consumed_retention",
                 "size_cuts", "size_oldest", "vector_boundary"):
        section = others.get(name, {})
        failed = failed or not all(section.get(same, True) for same in ("same_offsets", "same_sizes", "same_plans"))
    failed = failed or not others.get("collector_commands", {}).get("same_tables_every_way", True)
    failed = failed or not others.get("produce_commands", {}).get("same_tables_every_way", True)
    failed = failed or not others.get("batch_commands", {}).get("same_tables_every_way", True)
    failed = failed or not others.get("staged_commands", {}).get("same_tables_every_way", True)
    failed = failed or not others.get("report_commands", {}).get("same_pages_every_way", True)
    failed = failed or not others.get("read_only_commands", {}).get("same_output_every_way", True)
    vectors = others.get("vector_commands", {})
    failed = failed or not all(vectors.get(k, True) for k in ("commands_succeeded", "same_decisions_every_way",
                                                               "same_records_every_way"))
    failed = failed or not others.get("window_start", {}).get("same_answers", True)
    failed = failed or not others.get("vector_boundary", {}).get("plan_cuts", True)
    for name, kept in (("checkpoint_commands", "every_table_checkpointed"),
                       ("vector_retention_commands", "every_partition_cut")):
        section = others.get(name, {})
        failed = failed or not all(section.get(k, True) for k in ("commands_succeeded", "same_tables_every_way", kept))
    prunes = others.get("prunes", {})
    failed = failed or not (prunes.get("same_history", True)
                            and prunes.get("commands", {}).get("same_history_every_way", True))
    return 0 if exact and not failed else 1


def main(argv=None) -> int:
    return guarded(lambda: run(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
