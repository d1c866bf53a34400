"""G9: can a version inside the time-travel window still be read? (Which versions must be
is the pure ``scope.versions_to_read``.)"""

from __future__ import annotations

from framework.log.partition_log import PartitionLog

__all__ = ["read_problem"]


def read_problem(log: PartitionLog, version: int) -> str | None:
    """Why ``version`` cannot be read in full, or None when it can.

    Every data file must be opened: the largest hash of one column cannot be answered
    from Delta's statistics, which a count (or a min or max of the column) could be.
    """
    from pyspark.sql import functions as F

    try:
        log.read(version).agg(F.max(F.xxhash64("offset"))).collect()
    except Exception as error:  # noqa: BLE001 - any failure to read is the finding
        text = str(error).strip()
        first = text.splitlines()[0] if text else type(error).__name__
        return first[:400]
    return None
