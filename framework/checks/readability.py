"""G9: can a version inside the time-travel window still be read? (Which versions must be
is the pure ``scope.versions_to_read``.) And the violations frame of what it found
(:func:`literal_violations`), which the vacuum's check counts as the others count theirs."""

from __future__ import annotations

from functools import reduce
from typing import Sequence

from framework.cleaner.spark_sql import sql_string
from framework.errors import first_line
from framework.log.partition_log import PartitionLog

__all__ = ["VIOLATION_COLUMNS", "literal_violations", "read_problem", "read_problems"]


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


VIOLATION_COLUMNS = ("guarantee", "offset", "key", "detail")


def literal_violations(spark, rows: Sequence[tuple]):
    """A violations frame from a few driver-side rows, built in the JVM (no Python worker)."""
    def literal(value) -> str:
        return "NULL" if value is None else str(int(value)) if isinstance(value, int) else sql_string(str(value))

    structs = [
        "named_struct(" + ", ".join(f"'{name}', {literal(value)}" for name, value in zip(VIOLATION_COLUMNS, row)) + ")"
        for row in rows
    ]
    if not structs:
        return spark.range(0).selectExpr("CAST(NULL AS STRING) AS guarantee", "CAST(NULL AS BIGINT) AS `offset`",
                                         "CAST(NULL AS STRING) AS key", "CAST(NULL AS STRING) AS detail")
    return spark.range(1).selectExpr(f"explode(array({', '.join(structs)})) AS v").selectExpr(
        "CAST(v.guarantee AS STRING) AS guarantee", "CAST(v.offset AS BIGINT) AS `offset`",
        "CAST(v.key AS STRING) AS key", "CAST(v.detail AS STRING) AS detail")
