"""Which runs a prune of the maintenance history deletes, and the prune of a local history
without a Spark job.

The rule (:func:`doomed_runs`): of each partition's runs, those older than its newest
``runs_kept`` (by start, then run id), except its latest committed run, whatever its age
(``validate`` starts from it, and a killed run is found by the newest version recorded).
Spark's expression of it (:func:`doomed_frame`) decides a prune of a history Arrow cannot
read, and a MERGE deletes its rows; ``tests/test_metadata_bounds.py`` pins the two
together, SQL's NULLs included.

On a local history whose newest version is files its checksum lists, the prune reads its
runs' five columns by Arrow and decides there (:func:`pruned_locally`). With nothing
doomed, as at every prune until a partition has more than ``runs_kept`` runs, it commits
nothing, as Delta's MERGE of no rows commits nothing. Else every row but the doomed runs'
is written again as one file, in one overwrite commit (``local_append.replaced_locally``:
without the JVM while no session has started, else through Delta's transaction API, which
reads the whole table, so that an append in between makes it conflict as the MERGE did).
The prune was a shuffle and a MERGE every ``PRUNE_EVERY`` history commits: an idle
``maintain`` in a new process that fell on one started the JVM for it.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from typing import Iterable

__all__ = ["RUN_COLUMNS", "doomed_frame", "doomed_runs", "pruned_locally"]

#: The history columns the rule reads: a run's partition, its id, its start and whether it committed.
RUN_COLUMNS = ["topic", "partition", "run_id", "run_started_ms", "committed"]


def doomed_runs(rows: Iterable[tuple], runs_kept: int) -> set[tuple]:
    """The (topic, partition, run id) of each run a prune keeping ``runs_kept`` deletes, of
    the history ``rows`` (tuples of :data:`RUN_COLUMNS`, a run's stages one row each). A
    run's start is its rows' latest, and it committed if any row did (NULL if none says);
    runs are ranked newest first as Spark orders them descending (NULLs last). A
    partition's first run by (committed, start, run id), its latest committed run, is kept
    unless it committed nothing (as SQL's ``NOT (committed = 1 AND ...)`` reads, where
    NULL keeps it)."""
    runs: dict[tuple, list] = {}
    for topic, partition, run_id, started, committed in rows:
        run = runs.setdefault((topic, partition, run_id), [None, None])
        if started is not None and (run[0] is None or started > run[0]):
            run[0] = started
        if committed is not None and (run[1] is None or int(committed) > run[1]):
            run[1] = int(committed)
    by_partition: dict[tuple, list] = defaultdict(list)
    for (topic, partition, run_id), (started, committed) in runs.items():
        by_partition[(topic, partition)].append((run_id, started, committed))
    doomed = set()
    for (topic, partition), members in by_partition.items():
        newest = sorted(members, key=_descending(lambda m: (m[1], m[0])))
        latest_committed = min(members, key=_descending(lambda m: (m[2], m[1], m[0])))
        for run in newest[runs_kept:]:
            if not (run is latest_committed and run[2] != 0):
                doomed.add((topic, partition, run[0]))
    return doomed


def _descending(values):
    """A sort key ordering by ``values(item)`` (a tuple) descending, NULLs last in each place."""

    def compare(a, b) -> int:
        for x, y in zip(values(a), values(b), strict=True):
            if x == y:
                continue
            if x is None or y is None:
                return 1 if x is None else -1
            return -1 if x > y else 1
        return 0

    return functools.cmp_to_key(compare)


def doomed_frame(history, runs_kept: int):
    """:func:`doomed_runs` of the ``history`` DataFrame, in Spark: its doomed runs' topic,
    partition and run id."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    runs = history.groupBy("topic", "partition", "run_id").agg(
        F.max("run_started_ms").alias("started"), F.max(F.col("committed").cast("int")).alias("committed"))
    partition = Window.partitionBy("topic", "partition")
    ranked = runs.select(
        "*", F.row_number().over(partition.orderBy(F.desc("started"), F.desc("run_id"))).alias("newest"),
        F.row_number().over(partition.orderBy(F.desc("committed"), F.desc("started"), F.desc("run_id")))
        .alias("newest_committed"))
    return ranked.where(f"newest > {int(runs_kept)} AND NOT (committed = 1 AND newest_committed = 1)").select(
        "topic", "partition", "run_id")


def pruned_locally(spark, path: str, runs_kept: int, schema) -> int | None:
    """Prune the local history at ``path`` (its table schema ``schema``) as the module's text
    says: the rows deleted, or None when its newest version is not files its checksum lists,
    or the replace does not apply (nothing is written)."""
    import pyarrow as pa

    from framework.log.local_append import read_locally, replaced_locally

    runs = read_locally(path, schema, RUN_COLUMNS)
    if runs is None:
        return None
    if not doomed_runs(_tuples(runs, RUN_COLUMNS), runs_kept):
        return 0
    deleted = []

    def replace(rows):
        # decided again from the rows the commit replaces (another writer's append may be among them)
        doomed = doomed_runs(_tuples(rows, RUN_COLUMNS), runs_kept)
        kept = pa.array([key not in doomed for key in _tuples(rows, RUN_COLUMNS[:3])], pa.bool_())
        deleted.append(rows.num_rows - kept.true_count)
        return rows.filter(kept)

    if not replaced_locally(spark, path, replace, schema):
        return None
    return deleted[-1]


def _tuples(table, names: list[str]):
    """The rows of an Arrow ``table`` as tuples of its ``names`` columns."""
    return zip(*(table[name].to_pylist() for name in names), strict=True)
