"""The cleaner's pure decisions: due rule, ratios, KIP-280 ranks, retention thresholds."""

import pytest

from framework import cleaner
from framework.cleaner import PartitionMeasure, decide_compaction, header_version, winner_rank
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
