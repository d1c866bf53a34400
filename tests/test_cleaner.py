"""The cleaner's pure decisions: due rule, ratios, KIP-280 ranks, retention thresholds."""

import pytest

from framework.cleaner import rules as cleaner
from framework.cleaner.rules import PartitionMeasure, decide_compaction, header_version, winner_rank
from framework.spec import TopicConfig


def config(**settings):
    base = {"cleanup.policy": "compact"}
    base.update(settings)
    return TopicConfig.from_kafka(base)


def measure(clean_bytes=0, dirty_bytes=0, dirty_records=None, oldest=None, horizon=None, u=10, c=0):
    dirty_records = (1 if dirty_bytes else 0) if dirty_records is None else dirty_records
    return PartitionMeasure(
        log_start_offset=0, log_end_offset=10, checkpoint=c, first_uncleanable_offset=u,
        clean_records=1 if clean_bytes else 0, clean_bytes=clean_bytes, dirty_records=dirty_records,
        dirty_bytes=dirty_bytes, oldest_dirty_timestamp_ms=oldest, head_records=0, head_bytes=0,
        clean_tombstones=0 if horizon is None else 1, min_delete_horizon_ms=horizon,
    )


def test_dirty_ratio_is_kafkas():
    assert cleaner.dirty_ratio(0, 0) == 0.0
    assert cleaner.dirty_ratio(8, 2) == pytest.approx(0.2)
    assert cleaner.dirty_ratio(0, 5) == 1.0


def test_ratio_must_be_strictly_greater():
    cfg = config(**{"min.cleanable.dirty.ratio": 0.5})
    assert not decide_compaction(cfg, measure(clean_bytes=5, dirty_bytes=5, oldest=0), 10).due
    d = decide_compaction(cfg, measure(clean_bytes=4, dirty_bytes=6, oldest=0), 10)
    assert d.due and d.reasons == ("dirty_ratio",) and d.trigger == "dirty_ratio"


def test_empty_dirty_section_is_never_due_by_ratio():
    cfg = config(**{"min.cleanable.dirty.ratio": 0.0})
    assert not decide_compaction(cfg, measure(clean_bytes=5, dirty_bytes=0, dirty_records=0), 10).due
    # zero-byte dirty records: the ratio is 0.0, not above 0.0 (Kafka's arithmetic)
    assert not decide_compaction(cfg, measure(dirty_bytes=0, dirty_records=2, oldest=0), 10).due


def test_max_lag_overrides_the_ratio_and_is_strict():
    cfg = config(**{"min.cleanable.dirty.ratio": 0.9, "max.compaction.lag.ms": 10_000})
    m = measure(clean_bytes=8, dirty_bytes=2, oldest=2000)
    assert not decide_compaction(cfg, m, 12_000).due  # 2000 < 2000 is false
    d = decide_compaction(cfg, m, 12_001)
    assert d.due and d.reasons == ("max_lag",) and d.max_lag_caused
    assert d.max_compaction_delay_ms == 1


def test_max_lag_did_not_cause_a_run_the_ratio_caused_anyway():
    cfg = config(**{"min.cleanable.dirty.ratio": 0.1, "max.compaction.lag.ms": 10})
    d = decide_compaction(cfg, measure(clean_bytes=1, dirty_bytes=9, oldest=0), 1000)
    assert d.reasons == ("dirty_ratio", "max_lag") and not d.max_lag_caused


def test_tombstone_horizon_is_due_at_the_horizon():
    cfg = config(**{"min.cleanable.dirty.ratio": 1.0})
    assert not decide_compaction(cfg, measure(clean_bytes=3, horizon=1001), 1000).due
    assert decide_compaction(cfg, measure(clean_bytes=3, horizon=1000), 1000).reasons == ("tombstone_horizon",)


def test_forced_and_delete_only():
    cfg = config(**{"min.cleanable.dirty.ratio": 1.0})
    assert decide_compaction(cfg, measure(), 0, force=True).reasons == ("forced",)
    delete_only = config(**{"cleanup.policy": "delete"})
    d = decide_compaction(delete_only, measure(dirty_bytes=5, oldest=0), 10, force=True)
    assert not d.due and "compact" in d.skipped_because


def test_checkpoint_never_moves_back():
    d = decide_compaction(config(), measure(u=3, c=7), 0, force=True)
    assert d.new_checkpoint == 7
    assert decide_compaction(config(), measure(u=9, c=7), 0, force=True).new_checkpoint == 9


@pytest.mark.parametrize("raw,expected", [
    (b"5", 5), (b"-12", -12), (b"007", 7), (b"9223372036854775807", 2**63 - 1),
    (b"9223372036854775808", None), (b"-9223372036854775809", None),
    (b"12345678", 12345678),                      # 8 bytes of digits: decimal first
    ((5).to_bytes(8, "big"), 5), ((-2).to_bytes(8, "big", signed=True), -2),
    (b"+5", None), (b"", None), (b" 5", None), (b"-", None), (b"abc", None), (None, None),
    (b"\x00" * 7, None), (b"\x00" * 9, None),
])
def test_header_version_kip280(raw, expected):
    assert header_version(raw) == expected


def test_last_header_counts():
    headers = [("version", b"1"), ("other", b"9"), ("version", b"3")]
    assert cleaner.last_header(headers, "version") == b"3"
    assert cleaner.last_header(headers, "missing") is None


def test_winner_ranks():
    assert max([(0, 5), (1, 3)], key=lambda r: winner_rank("offset", r[0], r[1], None))[0] == 1
    # timestamp: highest timestamp, ties to the highest offset
    records = [(0, 5000), (1, 3000), (2, 5000)]
    assert max(records, key=lambda r: winner_rank("timestamp", r[0], r[1], None))[0] == 2
    # header: having it beats not having it; then the value; then the offset
    ranked = [(0, 0, 5), (1, 0, 3), (2, 0, None)]
    assert max(ranked, key=lambda r: winner_rank("header", r[0], r[1], r[2]))[0] == 0
    assert max([(0, 0, None), (1, 0, None)], key=lambda r: winner_rank("header", *r))[0] == 1
    assert max([(0, 0, -1), (1, 0, None)], key=lambda r: winner_rank("header", *r))[0] == 0
    with pytest.raises(ValueError):
        winner_rank("size", 0, 0, None)


def test_retention_rules_thresholds():
    cfg = config(**{"cleanup.policy": "delete", "retention.ms": 1000, "retention.bytes": 50})
    rules = cleaner.retention_rules(cfg, 5000, {})
    assert rules.keep_since_ms == 4000 and rules.max_bytes == 50
    assert rules.smallest_committed_offset is None
    unlimited = cleaner.retention_rules(config(**{"cleanup.policy": "delete", "retention.ms": -1}), 5000, {})
    assert unlimited.keep_since_ms is None and unlimited.max_bytes is None


def test_consumed_retention_needs_every_listed_group():
    cfg = config(**{"cleanup.policy": "delete", "consumed.retention.ms": 0,
                    "consumed.retention.groups": ["billing", "audit"]})
    blocked = cleaner.retention_rules(cfg, 1000, {"billing": 5})
    assert blocked.smallest_committed_offset is None and "audit" in blocked.consumed_blocked_by
    unreadable = cleaner.retention_rules(cfg, 1000, None)
    assert unreadable.smallest_committed_offset is None and "could not be read" in unreadable.consumed_blocked_by
    on = cleaner.retention_rules(cfg, 1000, {"billing": 5, "audit": 3, "other": 0})
    assert on.smallest_committed_offset == 3 and on.consumed_keep_since_ms == 1000


def test_size_boundary_reference():
    sizes = [(0, 10), (1, 10), (3, 10)]
    assert cleaner.size_boundary(sizes, 30, 4) == 0
    assert cleaner.size_boundary(sizes, 25, 4) == 1
    assert cleaner.size_boundary(sizes, 10, 4) == 3
    assert cleaner.size_boundary(sizes, 5, 4) == 4


# ------------------------------------------------------------------------------------
# Boundaries found by mutation testing (`make mutation`). Every expected value below is
# worked out by hand from CONTRACT section 4, never computed by the code under test.


def test_the_ranges_are_now_minus_the_lags():
    # U's cut: a record is too young to compact when timestamp > now - min.compaction.lag.ms
    cfg = config(**{"min.compaction.lag.ms": 3000, "max.compaction.lag.ms": 10_000})
    assert cleaner.uncleanable_after_ms(10_000, cfg) == 7000
    assert cleaner.uncleanable_after_ms(10_000, config()) == 10_000  # min lag 0: only the future is young
    # KIP-354's deadline: a dirty record older than now - max.compaction.lag.ms is overdue
    assert cleaner.max_lag_deadline_ms(12_000, cfg) == 2000


def test_a_kept_tombstones_first_horizon_is_now_plus_delete_retention():
    # KIP-534: the first run that keeps a winning tombstone stamps now + delete.retention.ms;
    # the compaction stamps it and G7 judges by it (neither has a formula of its own)
    assert cleaner.delete_horizon_ms(10_000, config(**{"delete.retention.ms": 2500})) == 12_500
    assert cleaner.delete_horizon_ms(10_000, config()) == 10_000 + 86_400_000  # Kafka's default: a day


def test_dirty_ratio_of_a_single_byte():
    # one dirty byte and nothing clean: 1 / (0 + 1); the 0.0 rule is only for an empty log
    assert cleaner.dirty_ratio(0, 1) == 1.0
    assert cleaner.dirty_ratio(1, 0) == 0.0
    assert cleaner.dirty_ratio(1, 1) == 0.5
    cfg = config(**{"min.cleanable.dirty.ratio": 0.99})
    d = decide_compaction(cfg, measure(dirty_bytes=1, oldest=0), 10)
    assert d.dirty_ratio == 1.0 and d.reasons == ("dirty_ratio",)


def test_decision_reports_the_numbers_behind_it():
    cfg = config(**{"min.cleanable.dirty.ratio": 0.9, "max.compaction.lag.ms": 10_000})
    d = decide_compaction(cfg, measure(clean_bytes=4, dirty_bytes=6, oldest=2000, u=8, c=3), 12_001)
    assert d.dirty_ratio == pytest.approx(0.6)  # 6 / (4 + 6)
    assert d.oldest_dirty_age_ms == 10_001  # 12_001 - 2000
    assert d.max_compaction_delay_ms == 1  # 10_001 - 10_000
    assert d.checkpoint == 3 and d.first_uncleanable_offset == 8 and d.new_checkpoint == 8
    # nothing dirty: no age and no delay, not a made-up one
    quiet = decide_compaction(cfg, measure(clean_bytes=4), 12_001)
    assert quiet.oldest_dirty_age_ms is None and quiet.max_compaction_delay_ms == 0
    assert quiet.dirty_ratio == 0.0 and quiet.due is False and quiet.reasons == () and quiet.trigger is None


def test_max_compaction_delay_is_zero_until_the_lag_is_passed():
    cfg = config(**{"max.compaction.lag.ms": 10_000})
    assert cleaner.max_compaction_delay_ms(1000, None, cfg) == 0
    assert cleaner.max_compaction_delay_ms(11_000, 2000, cfg) == 0  # 9000 old: within the lag
    assert cleaner.max_compaction_delay_ms(12_000, 2000, cfg) == 0  # exactly the lag: not past it
    assert cleaner.max_compaction_delay_ms(12_500, 2000, cfg) == 500
    # a dirty record "from the future" (clock set back) is not overdue at all
    assert cleaner.max_compaction_delay_ms(1000, 5000, cfg) == 0


def test_delete_only_topic_is_skipped_with_plain_values():
    delete_only = config(**{"cleanup.policy": "delete"})
    d = decide_compaction(delete_only, measure(clean_bytes=1, dirty_bytes=9, oldest=0, horizon=0), 10**9, force=True)
    assert d.due is False and d.reasons == () and d.trigger is None and not d.max_lag_caused
    assert d.skipped_because == "cleanup.policy has no compact"
    # compact,delete is compacted like compact
    both = config(**{"cleanup.policy": "compact,delete"})
    assert decide_compaction(both, measure(dirty_bytes=1, oldest=0), 10).reasons == ("dirty_ratio",)
    assert decide_compaction(config(), measure(dirty_bytes=1, oldest=0), 10).skipped_because is None


def test_triggers_are_named_in_contract_order():
    cfg = config(**{"min.cleanable.dirty.ratio": 0.1, "max.compaction.lag.ms": 10})
    m = measure(clean_bytes=1, dirty_bytes=9, oldest=0, horizon=500)
    d = decide_compaction(cfg, m, 1000, force=True)
    assert d.reasons == ("dirty_ratio", "max_lag", "tombstone_horizon", "forced") == cleaner.TRIGGERS
    assert d.trigger == "dirty_ratio" and not d.max_lag_caused
    # without the ratio, max lag comes first and caused the run
    slow_ratio = config(**{"min.cleanable.dirty.ratio": 0.95, "max.compaction.lag.ms": 10})
    lagging = decide_compaction(slow_ratio, m, 1000, force=True)
    assert lagging.reasons == ("max_lag", "tombstone_horizon", "forced") and lagging.trigger == "max_lag"
    assert lagging.max_lag_caused


def test_max_lag_caused_only_when_max_lag_is_a_reason():
    cfg = config(**{"min.cleanable.dirty.ratio": 1.0})
    tombstone = decide_compaction(cfg, measure(clean_bytes=3, horizon=0), 1000)
    assert tombstone.reasons == ("tombstone_horizon",) and not tombstone.max_lag_caused
    forced = decide_compaction(cfg, measure(clean_bytes=3), 1000, force=True)
    assert forced.reasons == ("forced",) and not forced.max_lag_caused
    assert forced.trigger == "forced"


def test_max_lag_needs_a_dirty_record():
    # an old clean section is not overdue: max lag is about the dirty section's oldest record
    cfg = config(**{"min.cleanable.dirty.ratio": 1.0, "max.compaction.lag.ms": 1})
    assert not decide_compaction(cfg, measure(clean_bytes=5, dirty_records=0), 10**9).due
    # a dirty section of zero-byte records still has an oldest record, and max lag sees it
    d = decide_compaction(cfg, measure(dirty_bytes=0, dirty_records=1, oldest=0), 10)
    assert d.reasons == ("max_lag",) and d.dirty_ratio == 0.0


def test_tombstone_horizon_without_dirty_records_and_clock_edges():
    cfg = config(**{"min.cleanable.dirty.ratio": 1.0})
    assert decide_compaction(cfg, measure(clean_bytes=3, horizon=999), 1000).reasons == ("tombstone_horizon",)
    assert decide_compaction(cfg, measure(clean_bytes=3, horizon=None), 10**12).reasons == ()


def test_checkpoint_stays_when_u_equals_c():
    assert decide_compaction(config(), measure(u=7, c=7), 0).new_checkpoint == 7
    assert decide_compaction(config(), measure(u=0, c=0), 0).new_checkpoint == 0


@pytest.mark.parametrize("raw,expected", [
    (b"-9223372036854775808", -(2**63)),          # LONG_MIN itself is in range
    (b"-0", 0), (b"0", 0),
    (b"-1234567", -1234567),                      # 8 bytes that are decimal text: decimal first
    (b"00000000", 0),
    (b"\x80" + b"\x00" * 7, -(2**63)),            # big-endian two's complement
    (b"\x7f" + b"\xff" * 7, 2**63 - 1),
    (b"\xff" * 8, -1),
    (b"\x00" * 7 + b"\x01", 1),                   # big-endian, not little-endian (would be 2**56)
    (b"\x01" + b"\x00" * 7, 2**56),
    (b"1_000", None),                             # Python's int() would take it; KIP-280 does not
    (b"5\n", None), (b"\xd9\xa5", None),          # no trailing newline, no non-ASCII digits
    (b"--5", None), (b"5-", None),
])
def test_header_version_edges(raw, expected):
    assert header_version(raw) == expected


def test_last_header_is_the_last_even_when_it_is_null():
    assert cleaner.last_header([("version", b"1"), ("version", None)], "version") is None
    assert cleaner.last_header([("Version", b"1"), ("version", b"2"), ("VERSION", b"3")], "version") == b"2"
    assert cleaner.last_header([], "version") is None


def test_winner_rank_per_strategy():
    def winner(strategy, records):
        return max(records, key=lambda r: winner_rank(strategy, *r))[0]

    # records are (offset, timestamp, header version)
    records = [(0, 9000, 7), (1, 1000, 2), (2, 5000, None)]
    assert winner("offset", records) == 2          # timestamps and headers do not matter
    assert winner("timestamp", records) == 0       # the highest timestamp, though its offset is lowest
    assert winner("header", records) == 0          # the highest version, though an older record
    assert winner("header", [(0, 0, -5), (1, 0, -7), (2, 0, None)]) == 0   # -5 > -7 > missing
    assert winner("header", [(0, 0, 3), (1, 0, 3), (2, 0, None)]) == 1     # ties: highest offset
    assert winner("header", [(4, 0, None), (9, 0, None), (6, 0, None)]) == 9
    assert winner("timestamp", [(3, 100, None), (8, 100, None), (5, 100, None)]) == 8
    with pytest.raises(ValueError, match="'size'"):
        winner_rank("size", 0, 0, None)


def test_retention_thresholds_with_minus_one_and_zero():
    zero = config(**{"cleanup.policy": "delete", "retention.ms": 0, "retention.bytes": 0})
    rules = cleaner.retention_rules(zero, 5000, None)
    assert rules.keep_since_ms == 5000 and rules.max_bytes == 0  # 0 is a limit, only -1 means none
    defaults = cleaner.retention_rules(config(**{"cleanup.policy": "delete"}), 10**12, {})
    assert defaults.keep_since_ms == 10**12 - 604_800_000 and defaults.max_bytes is None
    # consumed retention off (the default -1): nothing about it, whatever the commits say
    assert defaults.consumed_keep_since_ms is None and defaults.smallest_committed_offset is None
    assert defaults.consumed_blocked_by is None
    off = cleaner.retention_rules(config(**{"cleanup.policy": "delete", "consumed.retention.groups": ["billing"]}),
                                  1000, {"billing": 5})
    assert off == cleaner.RetentionRules(1000 - 604_800_000, None, None, None, None)


def test_consumed_retention_blocked_reasons_and_threshold():
    base = {"cleanup.policy": "delete", "consumed.retention.ms": 300}
    no_groups = cleaner.retention_rules(config(**base), 1000, {"billing": 5})
    assert no_groups.consumed_blocked_by == "consumed.retention.groups is empty"
    assert no_groups.smallest_committed_offset is None and no_groups.consumed_keep_since_ms is None
    cfg = config(**base, **{"consumed.retention.groups": ["billing", "audit"]})
    unreadable = cleaner.retention_rules(cfg, 1000, None)
    assert unreadable.consumed_blocked_by == "the committed offsets could not be read"
    assert unreadable.consumed_keep_since_ms is None
    missing = cleaner.retention_rules(cfg, 1000, {"audit": 2})
    assert missing.consumed_blocked_by == "group billing has not committed an offset"
    on = cleaner.retention_rules(cfg, 1000, {"billing": 5, "audit": 3})
    assert on.consumed_keep_since_ms == 700  # now - consumed.retention.ms
    assert on.smallest_committed_offset == 3 and on.consumed_blocked_by is None
    # consumed.retention.ms = 0 is on, not off
    zero = cleaner.retention_rules(config(**{**base, "consumed.retention.ms": 0, "consumed.retention.groups": ["a"]}),
                                   1000, {"a": 0})
    assert zero.consumed_keep_since_ms == 1000 and zero.smallest_committed_offset == 0


def test_size_boundary_edges():
    assert cleaner.size_boundary([], 0, 7) == 7                       # empty log: cut at the log end
    assert cleaner.size_boundary([(2, 5), (4, 5)], 0, 5) == 5          # nothing may stay
    assert cleaner.size_boundary([(2, 5), (4, 5)], 10, 5) == 2         # exactly at the limit: keep all
    assert cleaner.size_boundary([(2, 5), (4, 5)], 9, 5) == 4
    assert cleaner.size_boundary([(2, 0), (4, 5)], 5, 5) == 2          # already within: remove nothing
    assert cleaner.size_boundary([(2, 6), (4, 0), (6, 4)], 4, 7) == 4  # the cut lands on a 0-byte record


def test_partition_measure_totals_count_the_head_too():
    m = PartitionMeasure(
        log_start_offset=0, log_end_offset=9, checkpoint=2, first_uncleanable_offset=5,
        clean_records=2, clean_bytes=10, dirty_records=3, dirty_bytes=20, oldest_dirty_timestamp_ms=0,
        head_records=4, head_bytes=30, clean_tombstones=0, min_delete_horizon_ms=None,
    )
    assert m.records == 9 and m.bytes == 60
