"""The offset bookkeeping folded from commit metadata (pure)."""

import json

import pytest

from framework.log.log_state import (
    NO_RECORD_YET,
    NO_TIMESTAMP,
    AppendedRecords,
    CleanSection,
    CommitEntry,
    LogState,
    appended_between,
    appends_reach,
    fold,
    merge_states,
    metadata_field,
    parse_metadata,
    size_after_cut,
    to_metadata,
)


def entry(version, read_version, state=None, based_on=None, **extra):
    return CommitEntry(version, read_version, to_metadata(state, "test", based_on, **extra) if state else None)


def test_metadata_round_trip_and_extras():
    state = LogState(3, 10, 7, 5, CleanSection(epoch=2, records=4, bytes=40, tombstones=1, min_delete_horizon_ms=99))
    text = to_metadata(state, "compact", 2, run_id="r1")
    assert parse_metadata(text) == state
    assert metadata_field(text, "operation") == "compact"
    assert metadata_field(text, "run_id") == "r1"
    assert metadata_field(text, "based_on") == 2


def test_foreign_or_broken_metadata_is_not_state():
    assert parse_metadata(None) is None
    assert parse_metadata("hello") is None
    assert parse_metadata('{"other": 1}') is None
    assert parse_metadata('{"topiclake": {"log_start_offset": 1}}') is None


def test_newest_commit_wins_when_nothing_raced():
    commits = [entry(1, 0, LogState(log_end_offset=3)), entry(2, 1, LogState(log_end_offset=5))]
    result = fold(commits)
    assert result.state.log_end_offset == 5 and result.complete


def test_racing_commits_are_merged_with_max():
    # A compaction (v5, read v3) and a producer (v4, read v3) raced: the producer's
    # metadata does not know the new checkpoint, the compaction's does not know the
    # producer's records. Folding both gives both.
    producer = entry(4, 3, LogState(log_end_offset=20, checkpoint=0))
    compaction = entry(5, 3, LogState(log_end_offset=15, checkpoint=15, clean=CleanSection(epoch=1, records=9)))
    older = entry(3, 2, LogState(log_end_offset=15))
    result = fold([compaction, producer, older])
    assert result.state.log_end_offset == 20
    assert result.state.checkpoint == 15
    assert result.state.clean.records == 9


def test_stale_clean_summary_loses_to_higher_epoch():
    a = LogState(clean=CleanSection(epoch=3, records=1))
    b = LogState(clean=CleanSection(epoch=4, records=7))
    assert merge_states([a, b]).clean.records == 7
    assert merge_states([b, a]).clean.records == 7


def test_fold_reports_when_it_needs_more_history():
    # The newest topiclake commit read version 7; commits 8..9 were not all given.
    newest = entry(10, 7, LogState(log_end_offset=3))
    assert not fold([newest]).complete
    assert fold([newest, entry(9, 8), entry(8, 7)]).complete


def test_no_topiclake_commit_at_all():
    result = fold([entry(3, 2), entry(2, 1)])
    assert result.state is None and not result.complete


def test_foreign_commits_after_the_newest_are_ignored():
    result = fold([entry(6, 5), entry(5, 4, LogState(log_end_offset=9))])
    assert result.state.log_end_offset == 9


def test_a_commit_that_landed_between_plan_and_commit_is_folded_in():
    # The compaction planned at v3 (end offset 34) but Delta's MERGE took its snapshot at
    # v4, after a producer's append of offset 34: its readVersion (4) hides the append,
    # its based_on (3) does not. (A CI run once saw the end offset go back to 34.)
    older = entry(3, 2, LogState(log_end_offset=34))
    producer = entry(4, 3, LogState(log_end_offset=35), based_on=3)
    compaction = entry(5, 4, LogState(log_end_offset=34, checkpoint=34, clean=CleanSection(epoch=1)), based_on=3)
    result = fold([compaction, producer, older])
    assert result.state.log_end_offset == 35 and result.state.checkpoint == 34 and result.complete
    # Without the history back to v4 the fold knows it is not complete.
    assert not fold([compaction]).complete


def test_the_newest_timestamp_only_grows_and_unknown_stays_unknown():
    empty = LogState(max_timestamp_ms=NO_TIMESTAMP)
    assert empty.with_appended(2, 50).max_timestamp_ms == 50
    assert empty.with_appended(2, 50).with_appended(1, 20).max_timestamp_ms == 50  # a bound, never lowered
    assert empty.with_appended(1, None).max_timestamp_ms is None
    assert LogState().with_appended(3, 70).max_timestamp_ms is None  # a state from before the bound
    # racing commits fold with max; one commit that does not know it makes the bound unknown
    producer = entry(4, 3, LogState(log_end_offset=20, max_timestamp_ms=900))
    compaction = entry(5, 3, LogState(log_end_offset=15, checkpoint=15, max_timestamp_ms=400))
    assert fold([compaction, producer]).state.max_timestamp_ms == 900
    legacy = entry(4, 3, LogState(log_end_offset=20))
    assert fold([compaction, legacy]).state.max_timestamp_ms is None


def test_commits_without_the_newest_timestamp_parse_as_unknown():
    text = to_metadata(LogState(log_end_offset=4, max_timestamp_ms=12), "produce", 3)
    assert parse_metadata(text).max_timestamp_ms == 12
    body = json.loads(text)
    del body["topiclake"]["max_timestamp_ms"]
    assert parse_metadata(json.dumps(body)) == LogState(log_end_offset=4)


def append(version, base, count, size, oldest, end=None, operation="produce", **drop):
    """An append commit of ``count`` records at ``[base, end)`` (end: base + count)."""
    body = json.loads(to_metadata(LogState(log_end_offset=base + count if end is None else end), operation,
                                  version - 1, base_offset=base, count=count, bytes=size, batch_min_timestamp_ms=oldest))
    for name in drop:
        del body["topiclake"][name]
    return CommitEntry(version, version - 1, json.dumps(body))


def test_the_append_commits_describe_the_records_past_the_checkpoint_when_they_tile_them():
    commits = [append(1, 0, 3, 30, 50), append(2, 3, 2, 25, 20), entry(3, 2, LogState(5, 5, 5)),
               append(4, 5, 4, 8, 70), append(5, 9, 1, 0, 90, operation="ingest", end=12)]  # Kafka's gap 10..11
    assert appended_between(commits, 0, 12) == AppendedRecords(10, 63, 20)
    assert appended_between(commits, 3, 12) == AppendedRecords(7, 33, 20)
    assert appended_between(commits, 5, 12) == AppendedRecords(5, 8, 70)
    assert appended_between(commits, 12, 12) == AppendedRecords()  # nothing past the checkpoint
    assert appended_between(commits, 4, 12) is None  # a cut inside the append at 3
    assert appended_between(commits[2:], 0, 12) is None  # the history given starts too late
    assert appended_between(commits, 0, 13) is None  # an append the commits do not show
    assert appended_between(commits[:-1] + [append(5, 9, 2, 0, 90, bytes=None)], 0, 11) is None  # older topiclake
    assert appended_between(list(reversed(commits)), 0, 12) == AppendedRecords(10, 63, 20)  # any order


def test_whether_the_appends_given_reach_back_to_an_offset():
    commits = [entry(3, 2, LogState(5, 5, 5)), append(4, 5, 4, 8, 70), append(5, 9, 1, 0, 90)]
    assert appends_reach(commits, 5) and appends_reach(commits, 7)  # the append at 5 starts there or before
    assert not appends_reach(commits, 4)  # older commits than these hold the appends below 5
    assert not appends_reach(commits[:1], 5)  # no append among them
    assert appends_reach([append(4, 5, 4, 8, 70, base_offset=None)], 0)  # an older topiclake: no further page


def cut(version, start, end, records, size, operation="retain", **fields):
    """A cut of the prefix to ``start`` that read the log up to ``end`` and kept ``records``."""
    kept = {"start": start, "end": end, "records": records, "bytes": size, **fields}
    return CommitEntry(version, version - 1, to_metadata(LogState(start, end, start), operation, version - 1,
                                                         removed=1, new_log_start=start, kept=kept))


def test_a_cut_counts_what_it_kept_and_the_appends_since_add_theirs():
    """The log's size after a cut inside an append (which the append commits alone cannot
    tile): the cut's own count plus the appends after the log end it read, while nothing
    after it removed records."""
    appends = [append(1, 0, 3, 30, 50), append(2, 3, 4, 40, 20)]
    since = [append(4, 7, 2, 9, 60), append(5, 9, 1, 5, 70, operation="ingest", end=12)]  # a gap 10..11
    optimize = CommitEntry(6, 5, to_metadata(LogState(5, 12, 5), "optimize", 5))
    foreign = CommitEntry(7, 6, None)  # ALTER TABLE: no topiclake metadata
    history = [*appends, cut(3, 5, 7, 2, 21), *since, optimize, foreign]
    assert appended_between(history, 5, 12) is None  # the cut at 5 is inside the append at 3
    assert size_after_cut(history, 5, 12) == AppendedRecords(2 + 3, 21 + 14)
    assert size_after_cut(list(reversed(history)), 5, 12) == AppendedRecords(5, 35)  # any order
    assert size_after_cut(history[:3], 5, 7) == AppendedRecords(2, 21)  # nothing appended since
    delete_records = cut(8, 6, 12, 4, 30, operation="delete_records")
    assert size_after_cut([*history, delete_records], 6, 12) == AppendedRecords(4, 30)  # the newest cut counts
    # what cannot say: a compaction after the cut, a cut that is not the log start's, an
    # append since that the commits do not show, a cut of an older topiclake (no count)
    compaction = CommitEntry(8, 7, to_metadata(LogState(5, 12, 12), "compact", 7))
    assert size_after_cut([*history, compaction], 5, 12) is None
    assert size_after_cut(history, 6, 12) is None
    assert size_after_cut([h for h in history if h.version != 4], 5, 12) is None
    assert size_after_cut(history, 5, 13) is None
    legacy = CommitEntry(3, 2, to_metadata(LogState(5, 7, 5), "retain", 2, removed=1, new_log_start=5))
    assert size_after_cut([*appends, legacy, *since], 5, 12) is None
    assert size_after_cut(appends, 0, 7) is None  # no cut at all: the append commits tile it


def test_the_oldest_timestamp_bound_only_falls_and_unknown_stays_unknown():
    empty = LogState(min_timestamp_ms=NO_RECORD_YET)
    assert empty.with_appended(2, 50, 30).min_timestamp_ms == 30
    assert empty.with_appended(2, 50, 30).with_appended(1, 90, 70).min_timestamp_ms == 30
    assert empty.with_appended(1, 50, None).min_timestamp_ms is None
    assert LogState().with_appended(3, 70, 10).min_timestamp_ms is None  # a state from before the bound
    # racing commits fold with min: a retention cut raised it, a producer that had not seen the cut did not
    producer = entry(4, 3, LogState(log_end_offset=20, min_timestamp_ms=100))
    cut = entry(5, 3, LogState(log_start_offset=10, log_end_offset=15, min_timestamp_ms=400))
    assert fold([cut, producer]).state.min_timestamp_ms == 100
    assert fold([cut]).state.min_timestamp_ms == 400


def test_an_extra_field_cannot_stand_in_for_the_states_own():
    with pytest.raises(ValueError, match="min_timestamp_ms"):
        to_metadata(LogState(), "produce", 0, min_timestamp_ms=5)
