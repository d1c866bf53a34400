"""Spark's settings for the queries of a small partition: interpreted expressions, one
shuffle partition, no adaptive plan.

Spark compiles generated Java for the expressions of every new query (whole-stage code
generation, and the projections, predicates and orderings of the expression factory).
The generated code holds the query's literals (offsets, versions, timestamps), so every
partition's queries compile afresh, and for a partition of a few thousand records the
compiling costs more than the rows. Below ``SMALL_PARTITION_RECORDS`` the work on a
partition therefore runs with Spark's interpreted expressions: the same results (Spark
itself falls back to them whenever code generation fails, and the test suite's sessions
run that way throughout), without the compile. Its shuffles go to one Spark partition,
planned up front: adaptive query execution runs each shuffle of a query as a job of its own
(a small compaction's totals were four jobs, its check's bounds four) to re-plan from
sizes that, at this scale, are known to be tiny. Above it, the session's own settings hold.

Measured (``jobs/benchmark.py --only partitions``; README, Performance).
"""

from __future__ import annotations

import contextlib
from typing import ContextManager

from framework.log.delta_commits import session_confs

__all__ = ["SMALL_PARTITION_RECORDS", "SMALL_PARTITION_SETTINGS", "is_small", "small_partition_settings"]

#: A partition whose offsets span fewer records than this is small (``LogState.offset_span``,
#: an upper bound of its records). At this size an interpreted projection of
#: every record takes well under a second, less than compiling a query's code.
SMALL_PARTITION_RECORDS = 100_000
#: Spark's settings for a small partition's queries.
SMALL_PARTITION_SETTINGS = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.shuffle.partitions": "1",
}


def is_small(records: int) -> bool:
    """Whether work over this many records runs with :data:`SMALL_PARTITION_SETTINGS`."""
    return records < SMALL_PARTITION_RECORDS


def small_partition_settings(spark, records: int) -> ContextManager[None]:
    """Run the block's queries on ``spark`` with :data:`SMALL_PARTITION_SETTINGS` when
    ``records`` is small; the session's settings come back after it (``session_confs`` sets
    only those that differ, so a block inside another, or two produce calls from threads
    that share a session, never take these settings for the session's own and leave them)."""
    if not is_small(records):
        return contextlib.nullcontext()
    return session_confs(spark, SMALL_PARTITION_SETTINGS)
