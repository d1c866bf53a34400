"""Vacuum's pure decisions (no Spark): when deletion vectors are purged, when a VACUUM could
delete anything, and the window an own table's property states."""

import pytest

from framework.cleaner.rules import purge_due, vacuum_due
from framework.log.abandoned_temporaries import ABANDONED_AFTER_MS, abandoned
from framework.log.commit_log import Commit
from framework.log.warehouse import interval_ms

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


def test_a_vacuum_is_due_once_removed_files_or_untracked_ones_can_have_left_the_window():
    created = commit(0, 100, "CREATE TABLE")
    appended = commit(1, 200, "WRITE")
    deleted = commit(2, 300, "DELETE")
    # a young table that only appended: nothing to delete until its creation is a window old
    assert vacuum_due([appended, created], WINDOW, 100 + WINDOW - 1, complete=True) is None
    assert vacuum_due([appended, created], WINDOW, 100 + WINDOW, complete=True)  # untracked files may go
    # files a commit removed become deletable a window after it
    vacuumed = commit(3, 250 + WINDOW, "VACUUM END")
    assert vacuum_due([vacuumed, deleted, appended, created], WINDOW, 300 + WINDOW - 1, complete=True) is None
    assert "version 2" in vacuum_due([vacuumed, deleted, appended, created], WINDOW, 300 + WINDOW, complete=True)
    # a WRITE that overwrote files removed them too; an append did not
    overwrote = commit(2, 300, "WRITE", numRemovedFiles=2)
    assert vacuum_due([vacuumed, overwrote, appended, created], WINDOW, 300 + WINDOW, complete=True)
    # the newest page alone, with no VACUUM in it: the commits before it may have removed files
    assert vacuum_due([deleted, appended], WINDOW, 301, complete=False)
    assert vacuum_due([created], 0, 100, complete=True)  # no window: at once


@pytest.mark.parametrize("text, ms", [
    ("interval 7 days", 7 * 86_400_000), ("interval 1 week", 604_800_000), ("INTERVAL 2 Hours", 7_200_000),
    ("interval 3600000 milliseconds", 3_600_000), ("interval 0 hours", 0), ("1 day 30 minutes", 88_200_000),
    ("interval 1 second", 1_000),
    # forms read elsewhere as Delta reads them, not here: the caller then vacuums anyway
    ("interval 1 month", None), ("interval 1.5 days", None), ("interval -1 days", None), ("interval", None),
    ("interval 7", None), ("interval \u00b2 days", None), ("", None),
])
def test_an_interval_property_in_milliseconds_or_none(text, ms):
    assert interval_ms(text.encode().decode("unicode_escape")) == ms


UUID = "182a3ba1-e791-47f2-a19a-6373013651dc"


@pytest.mark.parametrize("name, is_temporary", [
    (f".00000000000000000002.json.{UUID}.tmp", True),  # a commit on its way (own commits, Delta's log store)
    (f".00000000000000000002.crc.{UUID}.tmp", True),
    (f".00000000000000000010.checkpoint.parquet.{UUID}.tmp", True),
    ("00000000000000000100.checkpoint.parquet#1", True),  # delta-rs's (framework/log/own_checkpoints.py)
    ("_last_checkpoint#12", True),
    ("00000000000000000100.checkpoint.parquet#", False),
    ("00000000000000000100.json#1", False),
    ("00000000000000000002.json", False),  # a version
    (f".00000000000000000002.json.{UUID}", False),
    (f".0002.json.{UUID}.tmp", False),  # not a version's 20 digits
    (f".00000000000000000002.json.{UUID[:-1]}.tmp", False),
    (".notes.tmp", False),
])
def test_a_commits_temporary_file_is_abandoned_once_an_hour_old(name, is_temporary):
    assert abandoned(name, NOW - ABANDONED_AFTER_MS, NOW) is is_temporary
    assert not abandoned(name, NOW - ABANDONED_AFTER_MS + 1, NOW)  # a commit may still be under way
