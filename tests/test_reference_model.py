"""Tests of the reference model itself: the acceptance scenarios, one test per rule, and
internal invariants over generated scenarios."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings

sys.path.insert(0, str(Path(__file__).resolve().parent))

from reference_model import (  # noqa: E402
    INT64_MAX,
    INT64_MIN,
    ModelRecord,
    ModelRejected,
    ModelTopic,
    header_value,
    parse_policy,
    record_size,
)
from strategies import scenarios  # noqa: E402

from tests.support.acceptance_files import acceptance_files  # noqa: E402

SCENARIO_FILES = acceptance_files()


# ---------------------------------------------------------------------------------------
# A tiny scenario runner (contract section 7)
# ---------------------------------------------------------------------------------------


def run_scenario(scenario: dict, after_step=None) -> ModelTopic:
    """Run a scenario through the model; AssertionError on the first mismatch.

    `after_step(topic, step, before)` is called after every step, with `before` the
    end offsets of every partition before the step.
    """
    spec = scenario["spec"]
    topic = ModelTopic(spec.get("partitions", 1), spec.get("config") or {})
    clock = 0
    for number, step in enumerate(scenario.get("steps") or [], start=1):
        where = f"step {number} {step!r}"
        before = [topic.end_offset(p) for p in range(topic.partitions)]
        (kind, body), = step.items()
        if kind == "produce":
            if isinstance(body, list):
                body = {"records": body}
            clock = body.get("now", clock)
            if body.get("expect_error"):
                snapshot = [topic.records(p) for p in range(topic.partitions)]
                with pytest.raises(ModelRejected):
                    topic.produce(body["records"], clock)
                after = [topic.records(p) for p in range(topic.partitions)]
                assert after == snapshot, f"{where}: a refused batch changed the log"
            else:
                topic.produce(body["records"], clock)
        elif kind == "commit_offset":
            topic.commit_offset(body["group"], body["partition"], body["offset"])
        elif kind == "delete_records":
            if body.get("expect_error"):
                snapshot = [topic.records(p) for p in range(topic.partitions)]
                with pytest.raises(ModelRejected):
                    topic.delete_records(body["partition"], body["before_offset"])
                after = [topic.records(p) for p in range(topic.partitions)]
                assert after == snapshot, f"{where}: a refused delete_records changed the log"
            else:
                topic.delete_records(body["partition"], body["before_offset"])
        elif kind == "maintain":
            body = body or {}
            clock = body.get("now", clock)
            topic.maintain(clock, force=bool(body.get("force", False)))
        elif kind == "expect":
            offsets = body.get("offsets")
            if isinstance(offsets, list):
                offsets = {0: offsets}
            for partition, expected in (offsets or {}).items():
                got = topic.offsets(int(partition))
                assert got == expected, f"{where}: partition {partition} offsets {got}, expected {expected}"
            end = body.get("end_offset")
            if end is not None:
                ends = end if isinstance(end, dict) else {0: end}
                for partition, expected in ends.items():
                    got = topic.end_offset(int(partition))
                    assert got == expected, f"{where}: partition {partition} end offset {got}, expected {expected}"
        else:
            raise AssertionError(f"{where}: unknown step {kind!r}")
        if after_step is not None:
            after_step(topic, step, before)
    return topic


#: Scenarios about data; the ones that expect a refused spec test framework/spec/,
#: not the model (tests/test_spec.py and the acceptance run cover them).
MODEL_SCENARIOS = [p for p in SCENARIO_FILES if not (yaml.safe_load(p.read_text()) or {}).get("expect_spec_error")]


@pytest.mark.parametrize("path", MODEL_SCENARIOS, ids=[p.name for p in MODEL_SCENARIOS])
def test_acceptance_scenario(path: Path) -> None:
    run_scenario(yaml.safe_load(path.read_text()))


def test_acceptance_scenarios_are_there() -> None:
    assert len(SCENARIO_FILES) >= 12


# ---------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------


def rec(key, value="v", timestamp=0, headers=None, partition=0) -> dict:
    record = {"partition": partition, "key": key, "value": value, "timestamp": timestamp}
    if headers is not None:
        record["headers"] = headers
    return record


def compact_topic(**config) -> ModelTopic:
    base = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": 0.0}
    base.update(config)
    return ModelTopic(1, base)


def with_header(*values) -> ModelRecord:
    return ModelRecord(0, 0, "k", "v", tuple(("v", value) for value in values))


# ---------------------------------------------------------------------------------------
# size and header parsing
# ---------------------------------------------------------------------------------------


def test_record_size_counts_key_value_and_headers_in_utf8() -> None:
    record = ModelRecord(0, 0, "é", b"\x00\x01\x02", (("ab", b"xyz"), ("n", None)))
    assert record_size(record) == 2 + 3 + (2 + 3) + (1 + 0)
    assert record_size(ModelRecord(0, 0, "k", None)) == 1
    assert record_size(ModelRecord(0, 0, None, None)) == 0


@pytest.mark.parametrize(
    "raw, expected",
    [
        (b"5", 5),
        (b"-42", -42),
        (b"-0", 0),
        (b"007", 7),
        (b"12345678", 12345678),  # 8 digits: decimal, not big-endian
        (str(INT64_MAX).encode(), INT64_MAX),
        (str(INT64_MIN).encode(), INT64_MIN),
        (str(INT64_MAX + 1).encode(), None),  # overflow: missing
        (str(INT64_MIN - 1).encode(), None),
        (b"99999999999999999999", None),
        ((258).to_bytes(8, "big"), 258),
        ((-2).to_bytes(8, "big", signed=True), -2),
        (b"\xff" * 8, -1),
        (b"\x80" + b"\x00" * 7, INT64_MIN),
        (b"+1234567", int.from_bytes(b"+1234567", "big")),  # not decimal, 8 bytes
        (b"+5", None),
        (b"-", None),
        (b"", None),
        (b"1.5", None),
        (b" 2", None),
        (b"\x00\x01", None),
        (b"\x00" * 9, None),
        (None, None),
    ],
)
def test_header_value_parsing(raw, expected) -> None:
    assert header_value(with_header(raw), "v") == expected


def test_header_value_last_header_counts() -> None:
    assert header_value(with_header(b"5", b"9"), "v") == 9
    assert header_value(with_header(b"9", b"5"), "v") == 5
    assert header_value(with_header(b"5", b"garbage"), "v") is None
    assert header_value(with_header(b"5", None), "v") is None
    assert header_value(with_header(None, b"3"), "v") == 3


def test_header_value_other_names_and_no_headers() -> None:
    record = ModelRecord(0, 0, "k", "v", (("version", b"3"), ("V", b"4")))
    assert header_value(record, "v") is None
    assert header_value(record, "version") == 3
    assert header_value(ModelRecord(0, 0, "k", "v"), "v") is None


def test_produce_converts_headers() -> None:
    topic = ModelTopic(1, {})
    topic.produce([rec("k", headers={"a": "é", "b": b"\x00", "c": None})], 0)
    topic.produce([rec("k", headers=[["v", "1"], ["v", "2"]])], 0)
    first, second = topic.records(0)
    assert first.headers == (("a", "é".encode()), ("b", b"\x00"), ("c", None))
    assert second.headers == (("v", b"1"), ("v", b"2"))


def test_parse_policy() -> None:
    assert parse_policy("compact,delete") == {"compact", "delete"}
    assert parse_policy(" delete , compact ") == {"compact", "delete"}
    assert parse_policy(["compact"]) == {"compact"}
    with pytest.raises(ValueError):
        parse_policy("compacted")


# ---------------------------------------------------------------------------------------
# produce
# ---------------------------------------------------------------------------------------


def test_offsets_are_per_partition_in_batch_order() -> None:
    topic = ModelTopic(2, {})
    topic.produce([rec("a", partition=1), rec("b", partition=0), rec("c", partition=1)], 0)
    assert topic.offsets(0) == [0]
    assert topic.offsets(1) == [0, 1]
    assert [r.key for r in topic.records(1)] == ["a", "c"]


def test_default_partitioner_is_used_without_partition() -> None:
    from framework.clients.partitioner import default_partition

    topic = ModelTopic(5, {})
    topic.produce([{"key": "order-42", "value": "x", "timestamp": 0}], 0)
    topic.produce([{"key": b"\x01\x02", "value": "x", "timestamp": 0}], 0)
    assert topic.end_offset(default_partition(b"order-42", 5)) >= 1
    assert topic.end_offset(default_partition(b"\x01\x02", 5)) >= 1
    assert sum(topic.end_offset(p) for p in range(5)) == 2


@pytest.mark.parametrize(
    "config, bad",
    [
        ({"cleanup.policy": "compact"}, rec(None)),
        ({"cleanup.policy": "compact,delete"}, rec(None)),
        ({}, {"partition": 0, "key": "k", "value": "v"}),  # no timestamp under CreateTime
        ({}, rec("k", timestamp=-1)),
        ({}, rec("k", timestamp="yesterday")),
        ({}, rec("k", partition=1)),
        ({}, rec("k", partition=-1)),
        ({}, {"key": None, "value": "v", "timestamp": 0}),  # no key and no partition
    ],
)
def test_bad_record_rejects_the_whole_batch(config, bad) -> None:
    topic = ModelTopic(1, config)
    topic.produce([rec("x")], 0)
    with pytest.raises(ModelRejected):
        topic.produce([rec("y"), bad, rec("z")], 0)
    assert topic.offsets(0) == [0]
    assert topic.end_offset(0) == 1


def test_null_key_is_fine_on_a_delete_only_topic_with_a_partition() -> None:
    topic = ModelTopic(1, {"cleanup.policy": "delete"})
    topic.produce([rec(None)], 0)
    assert topic.offsets(0) == [0]


def test_log_append_time_stamps_the_batch_with_now() -> None:
    topic = ModelTopic(1, {"message.timestamp.type": "LogAppendTime"})
    topic.produce([rec("a", timestamp=5), {"partition": 0, "key": "b", "value": "v"}, rec("c", timestamp=-7)], 1234)
    assert [r.timestamp for r in topic.records(0)] == [1234, 1234, 1234]


# ---------------------------------------------------------------------------------------
# compaction: winners
# ---------------------------------------------------------------------------------------


def test_offset_strategy_keeps_the_highest_offset() -> None:
    topic = compact_topic()
    topic.produce([rec("a", timestamp=9), rec("a", timestamp=1), rec("b")], 0)
    topic.maintain(100)
    assert topic.offsets(0) == [1, 2]


def test_timestamp_strategy_ties_go_to_the_highest_offset() -> None:
    topic = compact_topic(**{"compaction.strategy": "timestamp"})
    topic.produce([rec("a", "x", 50), rec("a", "y", 70), rec("a", "z", 70), rec("a", "w", 60)], 0)
    topic.produce([rec("b", "x", 80), rec("b", "y", 10)], 0)
    topic.maintain(1000)
    assert topic.offsets(0) == [2, 4]


def test_header_strategy_winners() -> None:
    topic = compact_topic(**{"compaction.strategy": "header", "compaction.strategy.header": "v"})
    topic.produce(
        [
            rec("a", headers=[["v", "-5"]]),  # 0: has the header, beats the later ones without
            rec("a"),  # 1
            rec("a", headers=[["v", "junk"]]),  # 2: unparsable = missing
            rec("b", headers=[["v", (7).to_bytes(8, "big")]]),  # 3: 7
            rec("b", headers=[["v", "7"]]),  # 4: tie -> highest offset
            rec("b", headers=[["v", "3"]]),  # 5
            rec("c", headers=[["v", "9"], ["v", "1"]]),  # 6: last header counts: 1
            rec("c", headers=[["v", "2"]]),  # 7: 2 wins
            rec("d"),  # 8
            rec("d", headers=[["v", None]]),  # 9: nobody has it -> highest offset
            rec("e", headers=[["v", "99999999999999999999"]]),  # 10: overflow = missing
            rec("e", headers=[["v", "-1"]]),  # 11
            rec("e"),  # 12
        ],
        0,
    )
    topic.maintain(1000)
    assert topic.offsets(0) == [0, 4, 7, 9, 11]


def test_header_strategy_tombstone_without_header_loses() -> None:
    topic = compact_topic(**{"compaction.strategy": "header", "compaction.strategy.header": "v"})
    topic.produce([rec("a", "1", headers={"v": "1"}), rec("a", None)], 0)
    topic.maintain(1000)
    assert topic.offsets(0) == [0]


def test_keyless_records_below_u_are_removed_by_compaction() -> None:
    # produce refuses null keys on compacted topics; keyless records can only be there
    # from before the policy included compact, so they are put in directly.
    topic = compact_topic(**{"min.compaction.lag.ms": 100})
    log = topic._logs[0]
    for offset, (key, timestamp) in enumerate([(None, 0), ("a", 0), (None, 950), ("a", 960)]):
        log.records.append(ModelRecord(offset, timestamp, key, "v"))
    log.end_offset = 4
    topic.maintain(1000)  # U = 2: offset 2 is younger than the lag
    assert topic.offsets(0) == [1, 2, 3]
    assert topic.last_decision(0)["removed_by_compaction"] == [0]


# ---------------------------------------------------------------------------------------
# compaction: U, C, due
# ---------------------------------------------------------------------------------------


def test_u_is_the_first_young_record_even_if_older_ones_follow() -> None:
    topic = compact_topic(**{"min.compaction.lag.ms": 1000})
    topic.produce([rec("a", timestamp=0), rec("a", timestamp=5000), rec("a", timestamp=0), rec("b", timestamp=0)], 0)
    topic.maintain(3000)  # cutoff 2000: offset 1 is the first younger record
    decision = topic.last_decision(0)
    assert decision["U"] == 1
    assert topic.offsets(0) == [0, 1, 2, 3]
    assert topic.checkpoint(0) == 1


def test_a_record_exactly_min_lag_old_is_cleanable() -> None:
    topic = compact_topic(**{"min.compaction.lag.ms": 1000})
    topic.produce([rec("a", timestamp=2000), rec("a", timestamp=2001), rec("a", timestamp=0)], 0)
    topic.maintain(3000)  # cutoff 2000: offset 0 (t=2000) is not > cutoff, offset 1 is
    assert topic.last_decision(0)["U"] == 1
    assert topic.checkpoint(0) == 1


def test_dirty_ratio_is_zero_without_bytes_and_threshold_is_strict() -> None:
    topic = compact_topic(**{"min.cleanable.dirty.ratio": 1.0})
    topic.produce([rec("a"), rec("a")], 0)
    topic.maintain(10)
    decision = topic.last_decision(0)
    assert decision["dirty_ratio"] == 1.0
    assert decision["due_reasons"] == []  # 1.0 is not > 1.0
    assert topic.offsets(0) == [0, 1]

    empty = compact_topic()
    empty.maintain(10)
    assert empty.last_decision(0)["dirty_ratio"] == 0.0
    assert empty.last_decision(0)["due_reasons"] == []


def test_max_lag_uses_the_oldest_dirty_timestamp_strictly() -> None:
    topic = compact_topic(**{"min.cleanable.dirty.ratio": 1.0, "max.compaction.lag.ms": 1000})
    topic.produce([rec("a", timestamp=500), rec("a", timestamp=100)], 0)
    topic.maintain(1100)  # oldest 100 is not < 100
    assert topic.last_decision(0)["due_reasons"] == []
    topic.maintain(1101)
    assert topic.last_decision(0)["due_reasons"] == ["max_lag"]
    assert topic.offsets(0) == [1]


def test_delete_only_topic_is_never_compacted_even_forced() -> None:
    topic = ModelTopic(1, {"cleanup.policy": "delete", "retention.ms": -1})
    topic.produce([rec("a"), rec("a")], 0)
    topic.maintain(10, force=True)
    assert topic.offsets(0) == [0, 1]
    assert topic.last_decision(0)["due_reasons"] == []
    assert topic.checkpoint(0) == 0


def test_forced_run_compacts_below_threshold() -> None:
    topic = compact_topic(**{"min.cleanable.dirty.ratio": 1.0})
    topic.produce([rec("a"), rec("a")], 0)
    topic.maintain(10, force=True)
    assert topic.last_decision(0)["due_reasons"] == ["forced"]
    assert topic.offsets(0) == [1]


def test_compact_only_topic_never_deletes_by_time_or_size() -> None:
    topic = compact_topic(**{"retention.ms": 1, "retention.bytes": 1})
    topic.produce([rec("a"), rec("b")], 0)
    topic.maintain(10**9)
    assert topic.offsets(0) == [0, 1]
    assert topic.log_start(0) == 0


# ---------------------------------------------------------------------------------------
# tombstones
# ---------------------------------------------------------------------------------------


def test_tombstone_two_passes() -> None:
    topic = compact_topic(**{"delete.retention.ms": 1000})
    topic.produce([rec("a", "1"), rec("a", None)], 0)
    topic.maintain(100)
    assert topic.offsets(0) == [1]
    assert topic.records(0)[0].delete_horizon == 1100
    topic.maintain(1099)
    assert topic.offsets(0) == [1]
    assert topic.last_decision(0)["due_reasons"] == []
    topic.maintain(1100)
    assert topic.last_decision(0)["due_reasons"] == ["tombstone_horizon"]
    assert topic.offsets(0) == []
    assert topic.end_offset(0) == 2


def test_tombstone_is_never_removed_by_the_run_that_first_keeps_it() -> None:
    topic = compact_topic(**{"delete.retention.ms": 0})
    topic.produce([rec("a", None)], 0)
    topic.maintain(100)
    assert topic.offsets(0) == [0]
    assert topic.records(0)[0].delete_horizon == 100
    topic.maintain(100)  # horizon 100 <= now 100: due, and removed
    assert topic.offsets(0) == []


def test_tombstone_horizon_is_not_reset_and_clock_going_backwards() -> None:
    topic = compact_topic(**{"delete.retention.ms": 1000})
    topic.produce([rec("a", None, timestamp=0), rec("b", "1", timestamp=0)], 0)
    topic.maintain(5000)
    assert topic.records(0)[0].delete_horizon == 6000
    assert topic.checkpoint(0) == 2
    topic.maintain(2000, force=True)  # the clock went back: horizon kept, not reached
    assert topic.offsets(0) == [0, 1]
    assert topic.records(0)[0].delete_horizon == 6000
    assert topic.checkpoint(0) == 2
    topic.maintain(6000)
    assert topic.offsets(0) == [1]


def test_checkpoint_never_moves_back_when_the_clock_does() -> None:
    topic = compact_topic(**{"min.compaction.lag.ms": 1000})
    topic.produce([rec("a", timestamp=0), rec("a", timestamp=1000), rec("a", timestamp=2000)], 0)
    topic.maintain(10_000)
    assert topic.offsets(0) == [2]
    assert topic.checkpoint(0) == 3
    topic.produce([rec("a", timestamp=3000)], 0)
    topic.maintain(1000, force=True)  # cutoff 0: U = 2 < C
    decision = topic.last_decision(0)
    assert decision["U"] == 2
    assert decision["checkpoint_after"] == 3
    assert topic.offsets(0) == [2, 3]


def test_tombstone_superseded_by_a_later_record() -> None:
    topic = compact_topic()
    topic.produce([rec("a", None)], 0)
    topic.maintain(10)
    topic.produce([rec("a", "back")], 0)
    topic.maintain(20)
    assert topic.offsets(0) == [1]


# ---------------------------------------------------------------------------------------
# retention
# ---------------------------------------------------------------------------------------


def test_time_retention_removes_only_a_prefix() -> None:
    topic = ModelTopic(1, {"cleanup.policy": "delete", "retention.ms": 1000})
    topic.produce([rec("a", timestamp=0), rec("b", timestamp=9500), rec("c", timestamp=0), rec("d", timestamp=9000)], 0)
    topic.maintain(10_000)
    assert topic.offsets(0) == [1, 2, 3]  # offset 2 is old but lies after a young record
    assert topic.log_start(0) == 1
    assert topic.last_decision(0)["removed_by_retention"]["time"] == [0]


def test_time_retention_boundary_is_inclusive() -> None:
    topic = ModelTopic(1, {"cleanup.policy": "delete", "retention.ms": 1000})
    topic.produce([rec("a", timestamp=8999), rec("b", timestamp=9000)], 0)
    topic.maintain(10_000)
    assert topic.offsets(0) == [1]


def test_size_retention_removes_the_oldest_until_it_fits() -> None:
    topic = ModelTopic(1, {"cleanup.policy": "delete", "retention.ms": -1, "retention.bytes": 5})
    topic.produce([rec("a", "1"), rec("b", "22"), rec("c", "3"), rec("d", "4")], 0)  # 2, 3, 2, 2 bytes
    topic.maintain(0)
    assert topic.offsets(0) == [2, 3]
    assert topic.log_start(0) == 2
    topic.maintain(0)
    assert topic.offsets(0) == [2, 3]


def test_size_retention_can_empty_the_partition() -> None:
    topic = ModelTopic(1, {"cleanup.policy": "delete", "retention.ms": -1, "retention.bytes": 0})
    topic.produce([rec("a", "1"), rec("b", "2")], 0)
    topic.maintain(0)
    assert topic.offsets(0) == []
    assert topic.log_start(0) == 2
    assert topic.end_offset(0) == 2


def test_retention_runs_after_compaction_and_time_before_size() -> None:
    config = {"cleanup.policy": "compact,delete", "min.cleanable.dirty.ratio": 0.0,
              "retention.ms": 5000, "retention.bytes": 4}
    topic = ModelTopic(1, config)
    topic.produce([rec("a", "1", 0), rec("b", "1", 8000), rec("a", "2", 9000), rec("c", "1", 9500), rec("d", "1", 9600)], 0)
    topic.maintain(10_000)
    decision = topic.last_decision(0)
    assert decision["removed_by_compaction"] == [0]
    assert decision["removed_by_retention"] == {"time": [], "size": [1, 2], "consumed": []}
    assert topic.offsets(0) == [3, 4]
    assert topic.log_start(0) == 3


def test_consumed_retention_needs_every_group() -> None:
    config = {"cleanup.policy": "delete", "retention.ms": -1,
              "consumed.retention.ms": 0, "consumed.retention.groups": ["g1", "g2"]}
    topic = ModelTopic(1, config)
    topic.produce([rec("k", str(i)) for i in range(5)], 0)
    topic.commit_offset("g1", 0, 4)
    topic.commit_offset("other", 0, 0)  # not listed: ignored
    topic.maintain(100)
    assert topic.offsets(0) == [0, 1, 2, 3, 4]
    topic.commit_offset("g2", 0, 2)
    topic.maintain(100)
    assert topic.offsets(0) == [2, 3, 4]
    topic.commit_offset("g2", 0, 1)  # the latest commit wins, even a lower one
    topic.commit_offset("g1", 0, 5)
    topic.maintain(100)
    assert topic.offsets(0) == [2, 3, 4]
    topic.commit_offset("g2", 0, 4)
    topic.maintain(100)
    assert topic.offsets(0) == [4]


def test_consumed_retention_commit_on_another_partition_does_not_count() -> None:
    config = {"cleanup.policy": "delete", "retention.ms": -1,
              "consumed.retention.ms": 0, "consumed.retention.groups": ["g1"]}
    topic = ModelTopic(2, config)
    topic.produce([rec("k", partition=0), rec("k", partition=0)], 0)
    topic.commit_offset("g1", 1, 2)
    topic.maintain(100)
    assert topic.offsets(0) == [0, 1]
    topic.commit_offset("g1", 0, 2)
    topic.maintain(100)
    assert topic.offsets(0) == []
    assert topic.log_start(0) == 2


def test_consumed_retention_keeps_young_records_and_the_prefix_rule() -> None:
    config = {"cleanup.policy": "delete", "retention.ms": -1,
              "consumed.retention.ms": 1000, "consumed.retention.groups": ["g1"]}
    topic = ModelTopic(1, config)
    topic.produce([rec("k", timestamp=0), rec("k", timestamp=9500), rec("k", timestamp=0), rec("k", timestamp=0)], 0)
    topic.commit_offset("g1", 0, 4)
    topic.maintain(10_000)
    assert topic.offsets(0) == [1, 2, 3]


def test_consumed_retention_off_when_ms_is_negative_or_no_groups() -> None:
    for config in (
        {"consumed.retention.ms": -1, "consumed.retention.groups": ["g1"]},
        {"consumed.retention.ms": 0, "consumed.retention.groups": []},
        {"consumed.retention.ms": 0},
    ):
        topic = ModelTopic(1, {"cleanup.policy": "delete", "retention.ms": -1, **config})
        topic.produce([rec("k"), rec("k")], 0)
        topic.commit_offset("g1", 0, 2)
        topic.maintain(100)
        assert topic.offsets(0) == [0, 1], config


def test_retention_on_an_empty_partition_does_not_move_the_log_start() -> None:
    topic = ModelTopic(1, {"cleanup.policy": "delete", "retention.ms": 0})
    topic.maintain(100)
    assert topic.log_start(0) == 0
    topic.produce([rec("a", timestamp=0)], 100)
    topic.maintain(200)
    assert topic.log_start(0) == 1
    topic.maintain(300)
    assert topic.log_start(0) == 1


def test_retention_moves_the_log_start_only_when_it_removes_a_record() -> None:
    config = {"cleanup.policy": "compact,delete", "min.cleanable.dirty.ratio": 0.0, "retention.ms": 1000}
    topic = ModelTopic(1, config)
    topic.produce([rec("a", "1", 0), rec("a", "2", 9500)], 0)
    topic.maintain(10_000)  # compaction removes offset 0; time retention's B is 1
    assert topic.offsets(0) == [1]
    assert topic.log_start(0) == 0
    assert topic.last_decision(0)["removed_by_retention"]["time"] == []


def test_offsets_continue_after_everything_is_deleted() -> None:
    topic = compact_topic(**{"delete.retention.ms": 0})
    topic.produce([rec("a", "1"), rec("a", None)], 0)
    topic.maintain(10)
    topic.maintain(10)
    assert topic.offsets(0) == []
    assert topic.end_offset(0) == 2
    topic.produce([rec("b")], 20)
    assert topic.offsets(0) == [2]

    deleted = ModelTopic(1, {"cleanup.policy": "delete", "retention.ms": 0})
    deleted.produce([rec("a"), rec("b")], 0)
    deleted.maintain(1)
    assert (deleted.offsets(0), deleted.log_start(0), deleted.end_offset(0)) == ([], 2, 2)
    deleted.produce([rec("c", timestamp=5)], 5)
    assert deleted.offsets(0) == [2]


# ---------------------------------------------------------------------------------------
# delete_records (KIP-107) and commits
# ---------------------------------------------------------------------------------------


def test_delete_records() -> None:
    topic = ModelTopic(1, {"cleanup.policy": "compact,delete", "retention.ms": -1})
    topic.produce([rec("a"), rec("b"), rec("c"), rec("d")], 0)
    topic.delete_records(0, 2)
    assert (topic.offsets(0), topic.log_start(0)) == ([2, 3], 2)
    topic.delete_records(0, 1)  # below the log start: nothing
    assert (topic.offsets(0), topic.log_start(0)) == ([2, 3], 2)
    topic.delete_records(0, 4)  # up to the log end offset
    assert (topic.offsets(0), topic.log_start(0), topic.end_offset(0)) == ([], 4, 4)
    with pytest.raises(ModelRejected):
        topic.delete_records(0, 5)
    assert topic.log_start(0) == 4


def test_delete_records_moves_log_start_even_without_records_below() -> None:
    topic = ModelTopic(1, {"cleanup.policy": "compact,delete", "retention.ms": -1, "min.cleanable.dirty.ratio": 0.0})
    topic.produce([rec("a"), rec("a"), rec("a")], 0)
    topic.maintain(10)
    assert topic.offsets(0) == [2]
    topic.delete_records(0, 2)
    assert (topic.offsets(0), topic.log_start(0)) == ([2], 2)


def test_delete_records_refused_on_compact_only_topic() -> None:
    topic = compact_topic()
    topic.produce([rec("a")], 0)
    with pytest.raises(ModelRejected):
        topic.delete_records(0, 1)
    assert topic.offsets(0) == [0]


def test_delete_records_allowed_on_delete_only_topic() -> None:
    topic = ModelTopic(1, {"cleanup.policy": "delete"})
    topic.produce([rec("a"), rec("b")], 0)
    topic.delete_records(0, 1)
    assert topic.offsets(0) == [1]


def test_maintain_never_changes_the_end_offset_or_the_records() -> None:
    topic = ModelTopic(1, {"cleanup.policy": "compact,delete", "min.cleanable.dirty.ratio": 0.0, "retention.ms": 50})
    topic.produce([rec("a", "1", 0), rec("a", "2", 100), rec("b", "3", 100)], 0)
    before = {r.offset: r for r in topic.records(0)}
    topic.maintain(120)
    assert topic.end_offset(0) == 3
    for record in topic.records(0):
        kept = before[record.offset]
        assert (record.timestamp, record.key, record.value, record.headers) == (
            kept.timestamp, kept.key, kept.value, kept.headers)


# ---------------------------------------------------------------------------------------
# generated scenarios, model only: internal invariants
# ---------------------------------------------------------------------------------------


def check_invariants(topic: ModelTopic, step: dict, end_offsets_before: list[int]) -> None:
    for partition in range(topic.partitions):
        offsets = topic.offsets(partition)
        end = topic.end_offset(partition)
        assert offsets == sorted(set(offsets)), "offsets strictly increasing and unique"
        assert all(0 <= o < end for o in offsets)
        assert topic.log_start(partition) <= (offsets[0] if offsets else end)
        assert topic.log_start(partition) <= end
        assert topic.checkpoint(partition) <= end
        if "maintain" in step:
            assert end == end_offsets_before[partition], "maintain changed the log end offset"
            if "compact" in topic.policy:
                below = [r.key for r in topic.records(partition) if r.offset < topic.checkpoint(partition)]
                assert len(below) == len(set(below)), "a key twice below the checkpoint"
            decision = topic.last_decision(partition)
            removed = decision["removed_by_compaction"]
            assert all(o < decision["U"] for o in removed), "compaction touched the head"


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_generated_scenarios_keep_the_model_invariants(scenario) -> None:
    topic = run_scenario(scenario, after_step=check_invariants)
    spec_config = scenario["spec"]["config"]
    # the generated config is always one the model (and the contract) accepts
    assert topic.partitions in (1, 2, 3)
    if spec_config.get("compaction.strategy") == "header":
        assert spec_config["compaction.strategy.header"] == "v"
