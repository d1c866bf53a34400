"""The commit reader (framework/log/commit_log.py) against Delta's own history.

Maintenance reads a table's newest commits from the ``_delta_log`` files directly; this
pins that reading to ``DeltaTable.history()`` on a table with every kind of commit
topiclake makes (create, append, MERGE, DELETE, OPTIMIZE, property changes, VACUUM), with
its files' times moved so that Delta has to make them increasing, as it does.
"""

from __future__ import annotations

import glob
import os

import pytest

from framework.clients.produce import produce
from framework.clients.records import parse_records
from framework.log import commit_log
from framework.log.commit_log import (
    _from_delta_history,
    first_version_since,
    local_commits,
    local_folder,
    read_commits,
)
from framework.log.topic import Topic
from framework.spec import parse_spec
from framework.stages.maintenance import Maintenance

SPEC = {"topic": "commits", "partitions": 1,
        "config": {"cleanup.policy": "compact,delete", "min.cleanable.dirty.ratio": 0.0, "retention.ms": 10_000,
                   "time.travel.retention.ms": 0}}


@pytest.fixture(scope="module")
def table(spark, tmp_path_factory):
    from framework.log.warehouse import Warehouse

    warehouse = Warehouse.resolve(str(tmp_path_factory.mktemp("commit-log")))
    spec = parse_spec(SPEC, source="test")
    topic = Topic(spark, warehouse, spec)
    topic.create()
    for round_ in range(3):
        for call in range(3):  # small appends, for bin-packing to pack
            lines = [(i, {"key": f"k{i % 3}", "value": f"v{round_}.{call}.{i}", "timestamp": round_ * 10_000 + i})
                     for i in range(4)]
            produce(topic, parse_records(lines, spec, "test"), round_ * 10_000)
        Maintenance(spark, warehouse, [spec], record_history=False).run(round_ * 10_000 + 100)
    for call in range(3):
        produce(topic, parse_records([(0, {"key": "k", "value": str(call), "timestamp": 30_000})], spec, "test"), 30_000)
    Maintenance(spark, warehouse, [spec], record_history=False).run(30_000, stages=("optimize",))
    log = topic.partition(0)
    # Two commit files get the same old time: Delta reports them one millisecond apart.
    for name in sorted(glob.glob(os.path.join(log.path, "_delta_log", "*.json")))[1:3]:
        os.utime(name, (1_000_000, 1_000_000))
    return log


def test_the_files_say_what_delta_history_says(spark, table):
    ours = read_commits(spark, table.path)
    delta = _from_delta_history(spark, table.path, None)
    assert [c.version for c in ours] == list(range(ours[0].version, -1, -1))
    assert {c.operation for c in ours} >= {"CREATE TABLE", "WRITE", "MERGE", "OPTIMIZE", "VACUUM END"}
    assert ours == delta


@pytest.mark.parametrize("limit", [1, 3, 5])
def test_a_limit_reads_the_newest_commits(spark, table, limit):
    ours = read_commits(spark, table.path, limit)
    assert ours == _from_delta_history(spark, table.path, limit)
    assert len(ours) == limit and ours[0].version == read_commits(spark, table.path)[0].version


def test_only_local_paths_are_read_directly():
    assert local_folder("/tmp/w/t-0") == "/tmp/w/t-0"
    assert local_folder("file:/tmp/w/t-0") == "/tmp/w/t-0"
    assert local_folder("file:///tmp/w/t-0") == "/tmp/w/t-0"
    assert local_folder("s3a://bucket/w/t-0") is None
    assert local_folder("dbfs:/w/t-0") is None


def _first_by_reading_all(commits, since_ms: int) -> int | None:
    """The window's first version by its definition: every commit read, the oldest at or after."""
    inside = [c.version for c in commits if c.timestamp_ms >= since_ms]
    return min(inside) if inside else None


def _probes(commits) -> list[int]:
    """Times around every commit's: at it, a millisecond either side, and beyond both ends."""
    times = sorted({c.timestamp_ms for c in commits})
    return [times[0] - 10_000, *[t + d for t in times for d in (-1, 0, 1)], times[-1] + 10_000]


def test_the_windows_first_version_is_found_as_delta_history_finds_it(spark, table):
    """Here (the commit files) and on other storage (Delta's time travel, asked of this
    local table), as Delta's whole history answers."""
    delta = _from_delta_history(spark, table.path, None)
    for since in _probes(delta):
        expected = _first_by_reading_all(delta, since)
        assert first_version_since(spark, table.path, since) == expected, since
        assert commit_log._first_version_since_by_delta(spark, table.path, since) == expected, since


def _write_log(folder, times: list[tuple[int, int | None]], last_checkpoint: str | None = None) -> str:
    """A ``_delta_log`` whose commit ``v`` has file time ``times[v][0]`` (ms) and, when given,
    the in-commit timestamp ``times[v][1]``; ``last_checkpoint``: the text of Delta's pointer
    to its newest checkpoint."""
    import json

    log = folder / "_delta_log"
    log.mkdir(parents=True)
    if last_checkpoint is not None:
        (log / "_last_checkpoint").write_text(last_checkpoint)
    for version, (mtime_ms, in_commit) in enumerate(times):
        info = {"operation": "WRITE", "readVersion": version - 1}
        if in_commit is not None:
            info["inCommitTimestamp"] = in_commit
        path = log / f"{version:020d}.json"
        path.write_text(json.dumps({"commitInfo": info}) + "\n" + json.dumps({"add": {"path": "x"}}) + "\n")
        os.utime(path, ns=(mtime_ms * 1_000_000, mtime_ms * 1_000_000))
    return str(folder)


BASE = 1_700_000_000_000
LOGS = {
    "a commit a second": [(BASE + 1000 * v, None) for v in range(400)],
    # a burst of commits in the same millisecond: each is made a millisecond later than the last
    "bursts in one millisecond": [(BASE + 1000 * (v // 7), None) for v in range(400)],
    "in-commit timestamps on some": [(BASE + 1000 * v, BASE + 1000 * v + 500 if v % 3 == 0 else None)
                                     for v in range(400)],
    # the clock stepped back for 40 commits: made increasing, they follow the commit before them
    "a clock step back": [(BASE + 1000 * v - (30_000 if 200 <= v < 240 else 0), None) for v in range(400)],
}


def _counted(reads: list, read):
    def counted(file_name):
        reads.append(file_name)
        return read(file_name)
    return counted


@pytest.mark.parametrize("name", LOGS)
def test_the_windows_first_version_reads_a_few_commits_and_finds_what_reading_all_finds(tmp_path, monkeypatch,
                                                                                       name):
    """A week of produces every 10 s is 60,000 commits: the search reads about log2(n) + 100
    of them (reading every one of a produce's commits took 1.6 s a call), and answers as
    reading every one does, also where times tie, where in-commit timestamps decide, after a
    clock's step back and once log cleanup expired the oldest commits."""
    path = _write_log(tmp_path, LOGS[name], last_checkpoint='{"version": 300, "size": 3}')
    for expired in (0, 50):
        for version in range(expired):
            os.remove(os.path.join(path, "_delta_log", f"{version:020d}.json"))
        every = local_commits(path)
        assert len(every) == len(LOGS[name]) - expired
        reads: list[str] = []
        monkeypatch.setattr(commit_log, "_commit_info", _counted(reads, commit_log._commit_info))
        for since in _probes(every)[::4]:  # 300 of the 1,200: each search reads about 110 files
            reads.clear()
            assert first_version_since(None, path, since) == _first_by_reading_all(every, since), (name, since)
            assert len(reads) <= 10 + commit_log._TIME_STRETCH + 1, len(reads)  # log2(400) < 10
        monkeypatch.undo()


@pytest.mark.parametrize("pointer,probed", [
    ('{"version": 300, "size": 3}', True),  # the newest checkpoint: the newest commits without a listing
    ('{"version": 100, "size": 3}', True),  # a checkpoint written since, the pointer not yet moved
    ('{"version": 10, "size": 3}', False),  # a version log cleanup has expired: the listing answers
    ("not JSON", False), (None, False)])
def test_the_newest_commits_are_found_from_the_last_checkpoint_as_a_listing_finds_them(tmp_path, monkeypatch,
                                                                                      pointer, probed):
    """The newest commits, which every command asks for, are found by probing up from the
    checkpoint Delta's ``_last_checkpoint`` names (commits go on without a gap from it), not
    by listing a folder that holds every commit and checksum the window keeps; a pointer that
    is missing, unreadable or names an expired commit falls back to the listing. The same
    commits either way, and the same window starts."""
    path = _write_log(tmp_path, LOGS["bursts in one millisecond"], pointer)
    log_folder = os.path.join(path, "_delta_log")
    for version in range(50):  # log cleanup expired the oldest
        os.remove(os.path.join(log_folder, f"{version:020d}.json"))
    listed = commit_log._commit_versions(log_folder)
    listings: list[str] = []
    monkeypatch.setattr(commit_log, "_commit_versions", _counted(listings, commit_log._commit_versions))
    for limit in (1, 3, 100, 350, 500):
        assert local_commits(path, limit) == commit_log._commits_of(log_folder, listed[-limit:])[::-1], limit
    every = commit_log._commits_of(log_folder, listed)
    for since in _probes(every)[::7]:
        assert first_version_since(None, path, since) == _first_by_reading_all(every, since), since
    assert (listings == []) == probed, listings
