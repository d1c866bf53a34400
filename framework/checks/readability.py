"""G9: can a version inside the time-travel window still be read? (Which versions must be
is the pure ``scope.versions_to_read``.) And the violations frame of what it found
(:data:`VIOLATIONS_SCHEMA`), which the vacuum's check counts as the others count theirs."""

from __future__ import annotations

from functools import reduce

from framework.errors import first_line
from framework.log.partition_log import PartitionLog

__all__ = ["VIOLATIONS_SCHEMA", "read_problem", "read_problems"]


def read_problem(log: PartitionLog, version: int) -> str | None:
    """Why ``version`` cannot be read in full, or None when it can.

    Every data file must be opened: the largest hash of one column cannot be answered
    from Delta's statistics, which a count (or a min or max of the column) could be.
    """
    from pyspark.sql import functions as F

    try:
        log.read(version).agg(F.max(F.xxhash64("offset"))).collect()
    except Exception as error:  # noqa: BLE001 - any failure to read is the finding
        return first_line(error)[:400]
    return None


def read_problems(log: PartitionLog, versions: list[int]) -> dict[int, str | None]:
    """:func:`read_problem` of each version. They are read in one Spark query (one job
    instead of one a version); only when that fails is each read alone, to say which."""
    from pyspark.sql import functions as F

    if len(versions) > 1:
        try:
            hashes = [log.read(v).select(F.xxhash64("offset").alias("h")) for v in versions]
            reduce(lambda left, right: left.unionAll(right), hashes).agg(F.max("h")).collect()
            return {v: None for v in versions}
        except Exception:  # noqa: BLE001 - some version cannot be read: find which, one by one
            pass
    return {v: read_problem(log, v) for v in versions}


#: The violations frame's schema (``rules.violations``'), for the rows G9's check finds.
VIOLATIONS_SCHEMA = "guarantee STRING, `offset` BIGINT, key STRING, detail STRING"
