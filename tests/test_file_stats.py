"""A file's statistics, read once for every reader of them (a version's record count,
bin-packing, a retention cut, a compaction's read, a rewrite's metrics), and what each does where they
are missing."""

import dataclasses
import json

import pytest

from framework.log import file_stats, version_checksum
from framework.log.file_stats import FileStats
from framework.stages import file_rewrite, optimize, retention_rewrite

WHOLE = json.dumps({"numRecords": 3, "minValues": {"offset": 4, "key": "a"},
                    "maxValues": {"offset": 9, "timestamp": "2026-11-28T21:49:36.123Z"}})
#: 2026-11-28T21:49:36.123Z in epoch milliseconds
NEWEST_MS = 1_795_902_576_123


@pytest.mark.parametrize("stats, expected", [
    (WHOLE, FileStats(records=3, min_offset=4, max_offset=9, max_timestamp_ms=NEWEST_MS)),
    (json.dumps({"maxValues": {"timestamp": "2026-11-28T22:49:36.123+01:00"}}), FileStats(max_timestamp_ms=NEWEST_MS)),
    (json.dumps({"minValues": {"timestamp": "2026-11-28T21:49:36.123Z"}}), FileStats(min_timestamp_ms=NEWEST_MS)),
    (json.dumps({"maxValues": {"timestamp": "1969-12-31T23:59:59.999Z"}}), FileStats(max_timestamp_ms=-1)),
    (json.dumps({"maxValues": {"timestamp": "2026-11-28T21:49:36.123"}}), FileStats()),  # no offset: unknown
    (json.dumps({"maxValues": {"timestamp": "yesterday"}}), FileStats()),
    (None, FileStats()),
    ("", FileStats()),
    ("{", FileStats()),                                                     # malformed
    ("[1]", FileStats()),                                                   # not an object
    (json.dumps({"numRecords": 3}), FileStats(records=3)),                  # no column statistics
    (json.dumps({"numRecords": "3", "minValues": {"offset": 4.5}}), FileStats()),  # not whole numbers
    (json.dumps({"numRecords": True, "minValues": [4], "maxValues": {"offset": 0}}), FileStats(max_offset=0)),
])
def test_statistics_are_whole_numbers_or_nothing(stats, expected):
    assert file_stats.parse(stats) == expected
    assert file_stats.of({"stats": stats} if stats is not None else {}) == expected


@pytest.mark.parametrize("add, tight", [
    ({"stats": WHOLE}, True),
    ({"stats": json.dumps({**json.loads(WHOLE), "tightBounds": True})}, True),
    ({"stats": json.dumps({**json.loads(WHOLE), "tightBounds": False})}, False),  # as Delta's DELETE writes them
    ({"stats": WHOLE, "deletionVector": {"cardinality": 1}}, False),  # a vector hides rows, whatever the string says
])
def test_bounds_are_tight_unless_a_deletion_vector_may_hide_the_records_they_came_from(add, tight):
    stats = file_stats.of(add)
    assert stats.tight is tight
    assert (stats.min_offset, stats.max_offset, stats.records) == (4, 9, 3)  # still bounds, and the rows written


@pytest.mark.parametrize("ms, text", [
    (NEWEST_MS, "2026-11-28T21:49:36.123Z"), (-1, "1969-12-31T23:59:59.999Z"), (0, "1970-01-01T00:00:00.000Z"),
    (-62_135_596_800_000, "0001-01-01T00:00:00.000Z"),
])
def test_a_timestamp_statistic_is_written_as_delta_writes_it_and_read_back(ms, text):
    """The writer (Arrow's files, ``framework/log/arrow_files.py``) beside the reader."""
    assert file_stats.timestamp_statistic(ms) == text
    assert file_stats.parse(json.dumps({"maxValues": {"timestamp": text}})) == FileStats(max_timestamp_ms=ms)


def test_a_timestamp_out_of_python_s_years_has_no_statistic():
    assert file_stats.timestamp_statistic(-62_135_596_800_001) is None


def test_a_record_newer_than_a_moment_may_lie_below_an_offset_unless_every_file_rules_it_out():
    old = FileStats(records=5, min_offset=0, max_offset=4, max_timestamp_ms=1_000)
    young = FileStats(records=5, min_offset=5, max_offset=9, max_timestamp_ms=9_000)
    assert not file_stats.may_hold_newer([old, young], below_offset=5, ms=1_001)
    assert file_stats.may_hold_newer([old, young], below_offset=5, ms=1_000)   # its newest is not older
    assert file_stats.may_hold_newer([old, young], below_offset=6, ms=1_001)   # the young file starts below 6
    assert not file_stats.may_hold_newer([], below_offset=5, ms=0)
    for unknown in (FileStats(min_offset=7), FileStats(max_timestamp_ms=0)):  # says nothing: it may
        assert file_stats.may_hold_newer([old, unknown], below_offset=5, ms=1_001)


def test_a_file_may_hold_an_offset_range_unless_its_offset_statistics_rule_it_out(tmp_path):
    four_to_nine = FileStats(records=6, min_offset=4, max_offset=9)
    assert file_stats.may_hold_offsets(four_to_nine, 9, 10) and file_stats.may_hold_offsets(four_to_nine, 0, 5)
    assert not file_stats.may_hold_offsets(four_to_nine, 10, None)  # every offset below the range
    assert not file_stats.may_hold_offsets(four_to_nine, None, 4)   # every offset at or past its end
    assert not file_stats.may_hold_offsets(four_to_nine, 6, 6)      # an empty range
    assert file_stats.may_hold_offsets(four_to_nine, None, None)
    for unknown in (FileStats(), FileStats(min_offset=0), FileStats(max_offset=20)):  # says nothing: it may
        assert file_stats.may_hold_offsets(unknown, 10, 12) and not file_stats.may_hold_offsets(unknown, 12, 12)
    # a bound the statistics give rules out what it can
    assert not file_stats.may_hold_offsets(FileStats(min_offset=20), 10, 12)
    assert not file_stats.may_hold_offsets(FileStats(max_offset=5), 10, None)
    # the compaction's read of a version: the files its checksum lists, less those ruled out
    adds = tuple({"path": f"{name}.parquet", "stats": json.dumps(stats)} for name, stats in (
        ("low", {"minValues": {"offset": 0}, "maxValues": {"offset": 4}}),
        ("high", {"minValues": {"offset": 5}, "maxValues": {"offset": 9}}),
        ("bare", {"numRecords": 3})))
    files = version_checksum.PlainFiles(schema_json="{}", folder=str(tmp_path),
                                        paths=tuple(str(tmp_path / a["path"]) for a in adds), adds=adds)
    for (start, end), kept in (((5, 10), ["high", "bare"]), ((None, 5), ["low", "bare"]),
                               ((None, None), ["low", "high", "bare"]), ((10, 12), ["bare"]), ((5, 5), [])):
        pruned = version_checksum.holding_offsets(files, start, end)
        assert [a["path"] for a in pruned.adds] == [f"{name}.parquet" for name in kept]
        assert pruned.paths == tuple(str(tmp_path / f"{name}.parquet") for name in kept)


def test_each_reader_decides_what_missing_statistics_mean(tmp_path):
    counted = {"path": "a.parquet", "size": 10, "partitionValues": {"_segment": "0"}, "stats": WHOLE}
    bare = {"path": "b.parquet", "size": 10, "partitionValues": {"_segment": "0"}}
    files = version_checksum.PlainFiles(schema_json="{}", folder=str(tmp_path), paths=(), adds=(counted, counted))
    # a version's record count: known only when every file says it
    assert version_checksum.record_count(files) == 6
    assert version_checksum.record_count(dataclasses.replace(files, adds=(counted, bare))) is None
    # bin-packing: a file without statistics is left alone (its rewrite could not be checked)
    assert optimize._data_file_of_add(counted).packable and optimize._data_file_of_add(counted).records == 3
    assert not optimize._data_file_of_add(bare).packable
    hidden = {**counted, "deletionVector": {"cardinality": 2}}
    assert optimize._data_file_of_add(hidden).records == 1
    # a retention cut: a file without statistics may hold a record below the cut, so it is read
    assert not retention_rewrite.may_hold_below(counted, 4) and retention_rewrite.may_hold_below(counted, 5)
    assert retention_rewrite.may_hold_below(bare, 4)
    # a rewrite's metrics: a file without statistics adds no counted records
    summary = file_rewrite.written_summary([{"add": counted}, {"add": bare}], [])
    assert summary["rows_written"] == 3 and summary["files_added"] == 2 and summary["bytes_added"] == 20


@pytest.mark.parametrize("add, shown", [
    ({"stats": WHOLE}, 3),
    ({"stats": WHOLE, "deletionVector": {"cardinality": 1}}, 2),  # the rows its vector does not hide
    ({"stats": WHOLE, "deletionVector": {"cardinality": 3}}, 0),
    ({"stats": json.dumps({"minValues": {"offset": 4}}), "deletionVector": {"cardinality": 1}}, None),  # uncounted
])
def test_a_file_shows_its_rows_less_those_its_deletion_vector_hides(add, shown):
    assert file_stats.shown_records(add, file_stats.of(add)) == shown
