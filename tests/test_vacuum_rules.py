"""The vacuum stage's pure decisions (no Spark): when deletion vectors are purged."""

from framework.log.commit_log import Commit
from framework.stages.vacuum import purge_due

WINDOW = 1_000
NOW = 10_000


def commit(version, timestamp_ms, operation="MERGE", **metrics):
    return Commit(version, timestamp_ms, operation, {k: str(v) for k, v in metrics.items()})


def test_deletion_vectors_are_purged_once_half_a_window_old():
    marked = commit(5, NOW - WINDOW // 2, numTargetDeletionVectorsAdded=2)
    assert purge_due([marked], WINDOW, NOW)
    younger = commit(5, NOW - WINDOW // 2 + 1, numTargetDeletionVectorsAdded=2)
    assert not purge_due([younger], WINDOW, NOW)  # waits, so a run does not rewrite the table every time
    assert purge_due([younger, commit(4, NOW - WINDOW, numDeletionVectorsAdded=1)], WINDOW, NOW)


def test_nothing_to_purge_after_a_purge_or_without_vectors():
    old = commit(3, 0, numTargetDeletionVectorsAdded=1)
    assert not purge_due([commit(4, 1, "REORG TABLE"), old], WINDOW, NOW)
    # bin-packing rewrites only the small files it packs: the old deletion vector may remain
    assert purge_due([commit(4, 1, "OPTIMIZE"), old], WINDOW, NOW)
    assert not purge_due([commit(3, 0, numTargetDeletionVectorsAdded=0)], WINDOW, NOW)
    assert purge_due([old], 0, 0)  # no window: at once
