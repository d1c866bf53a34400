"""The guarantees of CONTRACT section 5: every check can fail, and healthy runs pass.

One module fixture builds a small warehouse with real Spark and Delta: a compacted topic
(``orders``) and a topic under consumed retention (``events``), produced and maintained
once with validation on. Each test copies that warehouse, corrupts a table behind
topiclake's back with raw Delta operations, and asserts that exactly the right guarantee
catches it, through ``check_stage``, ``validate`` or the command line.

The orders partition, maintained at now = 10000 (min lag 1000, so U = 6; max lag 4000):

======  ===  =====  =========  =========================================
offset  key  value  timestamp  after compaction
======  ===  =====  =========  =========================================
0       a    1      0          removed (superseded by 2)
1       b    1      0          removed (superseded by 5)
2       a    2      0          kept: a's winner below U
3       c    1      0          removed (superseded by 4)
4       c    null   0          kept: a tombstone, stamped 10000 + 1000
5       b    2      5000       kept
6       a    3      9500       head (>= U), untouched
7       d    1      9600       head
8       a    4      9700       head; a's final value
======  ===  =====  =========  =========================================

Two more topics, ``prices`` (the timestamp strategy) and ``versions`` (the header strategy,
header ``version``), hold six keys whose winner below U is never their highest offset: a
check or an engine that silently used "highest offset" (or the other strategy: versions'
timestamps all tie, prices has no headers) goes wrong on them. Maintained at now = 10000
(U = 12):

======  ===  =====  ==============  ================================  ===================
offset  key  value  prices: ts      versions: headers (ts 0)          after compaction
======  ===  =====  ==============  ================================  ===================
0       a    1      2000            version=2                         kept
1       a    2      1000            version=7, then version=1 (last)  removed
2       b    1      5000            version=9                         kept
3       b    2      4000            version=8                         removed
4       c    null   4000            version=5 (8 bytes, big-endian)   kept, stamped 11000
5       c    1      3000            no header                         removed
6       e    null   3000            version=-1                        kept, stamped 11000
7       e    1      2500            version=x (does not parse)        removed
8       f    1      3000            version=00012                     kept
9       f    2      2000            version=11                        removed
10      g    1      4500            version=3                         kept
11      g    2      3500            version=2                         removed
12      a    3      9500            version=50 (ts 9500)              head
13      a    4      9700            version=100 (ts 9700)             head; a's final
======  ===  =====  ==============  ================================  ===================
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from framework.checks.catalogue import GUARANTEES, STAGE_GUARANTEES
from framework.checks.guarantees import Guarantees
from framework.checks.scope import consumed_removals_explained, head_start, max_lag_end, versions_to_read
from framework.log.warehouse import delta_table_sql
from framework.stages.stage_check import StageCheck
from tests.support.delta_readers import delta_rs_offsets

NOW = 10_000

ORDERS_SPEC = """\
topic: orders
partitions: 1
config:
  cleanup.policy: compact
  min.compaction.lag.ms: 1000
  max.compaction.lag.ms: 4000
  delete.retention.ms: 1000
  min.cleanable.dirty.ratio: 0.0
expectations:
  - type: expect_column_values_to_match_regex
    kwargs: {column: value, regex: '^[0-9]+$'}
    meta: {notes: values are decimal counters}
"""

EVENTS_SPEC = """\
topic: events
partitions: 1
config:
  cleanup.policy: delete
  retention.ms: -1
  consumed.retention.ms: 0
  consumed.retention.groups: [billing]
"""

STRATEGY_SPEC = """\
topic: {topic}
partitions: 1
config:
  cleanup.policy: compact
  min.compaction.lag.ms: 1000
  max.compaction.lag.ms: 4000
  delete.retention.ms: 1000
  min.cleanable.dirty.ratio: 0.0
  compaction.strategy: {strategy}
"""
PRICES_SPEC = STRATEGY_SPEC.format(topic="prices", strategy="timestamp")
VERSIONS_SPEC = STRATEGY_SPEC.format(topic="versions", strategy="header") + "  compaction.strategy.header: version\n"

ORDERS = [("a", "1", 0), ("b", "1", 0), ("a", "2", 0), ("c", "1", 0), ("c", None, 0), ("b", "2", 5000),
          ("a", "3", 9500), ("d", "1", 9600), ("a", "4", 9700)]
EVENTS = [(f"e{i}", "1", 0) for i in range(5)]
#: key, value, prices' timestamp, versions' headers
STRATEGY_ROWS = [
    ("a", "1", 2000, {"version": "2"}), ("a", "2", 1000, [["version", "7"], ["version", "1"]]),
    ("b", "1", 5000, {"version": 9}), ("b", "2", 4000, {"version": "8"}),
    ("c", None, 4000, {"version": {"base64": "AAAAAAAAAAU="}}), ("c", "1", 3000, {}),
    ("e", None, 3000, {"version": "-1"}), ("e", "1", 2500, {"version": "x"}),
    ("f", "1", 3000, {"version": "00012"}), ("f", "2", 2000, {"version": "11"}),
    ("g", "1", 4500, {"version": "3"}), ("g", "2", 3500, {"version": "2"}),
    ("a", "3", 9500, {"version": "50"}), ("a", "4", 9700, {"version": "100"}),
]
PRICES = [(k, v, t) for k, v, t, _ in STRATEGY_ROWS]
VERSIONS = [(k, v, t if t > 9000 else 0, h) for k, v, t, h in STRATEGY_ROWS]
#: What compaction at NOW leaves of prices and versions
STRATEGY_SURVIVORS = [0, 2, 4, 6, 8, 10, 12, 13]


def name(code: str) -> str:
    return next(g.name for g in GUARANTEES if g.code == code)


# ------------------------------------------------------------------ pure rules
def test_every_guarantee_is_named_and_described():
    assert [g.code for g in GUARANTEES] == [f"G{n}" for n in range(1, 10)]
    assert name("G3") == "G3 unique keys below the checkpoint"
    for g in GUARANTEES:
        assert g.description.startswith(f"{g.code}: ") and len(g.description) > 30
    assert STAGE_GUARANTEES["compact"] == ("G1", "G2", "G3", "G4", "G5", "G6", "G7")
    assert STAGE_GUARANTEES["retain"] == ("G1", "G3", "G8")
    assert STAGE_GUARANTEES["vacuum"] == ("G9",)
    assert STAGE_GUARANTEES["validate"] == ("G1", "G3", "G4", "G6", "G7")


def test_the_head_starts_at_the_strictest_of_the_three_boundaries():
    assert head_start(6, 6, 6) == 6
    assert head_start(6, None, 6) == 6
    assert head_start(6, 4, 6) == 4       # a retry capped the run
    assert head_start(8, None, 6) == 6    # the stage misjudged U: its head starts at the true U
    assert max_lag_end(6, 6, 6) == 6
    assert max_lag_end(6, 6, 4) == 4      # a retry's cap: records above it were appended during the run
    assert max_lag_end(6, 5, 5) == 6      # no cap, the stage's own U was wrong: G6 looks up to the true U


@pytest.mark.parametrize("highest, smallest, time_boundary, max_bytes, suffix, explained", [
    (None, 3, None, None, 0, True),       # nothing removed
    (2, 3, None, None, 0, True),          # only below the committed offset
    (2, None, None, None, 0, True),       # consumed retention off
    (3, 3, None, None, 0, False),         # at the committed offset, nothing else explains it
    (5, 3, 6, None, 0, True),             # time retention removed everything below 6
    (5, 3, 5, None, 0, False),            # ... but not offset 5
    (5, 3, None, 100, 101, True),         # size: the records from 5 on held more than 100 bytes
    (5, 3, None, 100, 100, False),        # ... exactly 100 fit, so 5 had to stay
])
def test_consumed_retention_may_remove_past_a_commit_only_when_time_or_size_explains_it(
        highest, smallest, time_boundary, max_bytes, suffix, explained):
    assert consumed_removals_explained(highest, smallest, time_boundary, max_bytes, suffix) is explained


def test_a_stage_check_pairs_only_the_change_of_a_large_log_with_a_small_dirty_section():
    from framework.checks.changes import MAX_SCOPED_DIRTY, MIN_SCOPED_RECORDS, dirty_from, worth_scoping
    from framework.log.log_state import LogState

    large = LogState(log_start_offset=100, log_end_offset=100 + 10 * MIN_SCOPED_RECORDS, checkpoint=6 * MIN_SCOPED_RECORDS)
    # compaction pairs its dirty section and head whole; retention only what lies past the end
    assert dirty_from("compact", large) == 6 * MIN_SCOPED_RECORDS
    assert dirty_from("compact", LogState(log_start_offset=9, log_end_offset=20, checkpoint=3)) == 9
    assert dirty_from("retain", large) == dirty_from("delete_records", large) == large.log_end_offset
    assert worth_scoping(dirty_from("compact", large), large)  # 4 of 10 paired whole
    half = LogState(log_end_offset=large.log_end_offset, checkpoint=4 * MIN_SCOPED_RECORDS)
    assert not worth_scoping(dirty_from("compact", half), half)  # over half paired whole: scoping saves little
    assert worth_scoping(large.log_end_offset, large)
    assert not worth_scoping(large.log_start_offset, large)  # everything is dirty: pair whole versions
    small = LogState(log_end_offset=MIN_SCOPED_RECORDS - 1)
    assert not worth_scoping(small.log_end_offset, small)  # a few small jobs beat reading the feed
    huge = LogState(log_end_offset=10 * MAX_SCOPED_DIRTY, checkpoint=8 * MAX_SCOPED_DIRTY)
    assert not worth_scoping(huge.checkpoint, huge)  # too many dirty keys to broadcast


def test_a_vacuum_must_leave_the_oldest_version_of_the_window_and_the_one_before_it_readable():
    check = StageCheck(log=None, stage="vacuum", now_ms=0, version_before=7, version_after=8, before=None,
                       state_before=None, state_after=None, oldest_window_version=3)
    assert [v for v, _ in versions_to_read(check, oldest_still_inside=0)] == [3, 7, 8]
    # the window slid on while the check ran: versions 3..4 left it, and Delta may refuse them
    assert [v for v, _ in versions_to_read(check, oldest_still_inside=5)] == [5, 7, 8]
    assert [v for v, _ in versions_to_read(check, oldest_still_inside=8)] == [8]
    assert [v for v, _ in versions_to_read(check, oldest_still_inside=None)] == [8]
    outside = dataclasses.replace(check, oldest_window_version=None)  # a window of 0 (an unsafe vacuum)
    assert [v for v, _ in versions_to_read(outside, oldest_still_inside=0)] == [8]


def test_the_suites_follow_the_spec_and_rerunning_changes_nothing(tmp_path):
    """Suites are fetched or added by name, and rewritten only when the spec changed."""
    from framework.checks.gx_suites import Project, spec_expectations
    from framework.log.warehouse import Warehouse
    from framework.spec import parse_spec

    def spec(regex: str):
        return parse_spec({"topic": "t", "partitions": 1, "expectations": [
            {"type": "expect_column_values_to_match_regex", "kwargs": {"column": "value", "regex": regex}}]}, "t.yaml")

    project = Project(Warehouse.resolve(str(tmp_path / "warehouse")))
    first = project._suite("topiclake.t.expectations", spec_expectations(spec("^a$")))
    ids = [e.id for e in first.expectations]
    again = project._suite("topiclake.t.expectations", spec_expectations(spec("^a$")))
    assert [e.id for e in again.expectations] == ids
    changed = project._suite("topiclake.t.expectations", spec_expectations(spec("^b$")))
    stored = project.context.suites.get("topiclake.t.expectations")
    assert [e.regex for e in stored.expectations] == ["^b$"] == [e.regex for e in changed.expectations]


@pytest.mark.parametrize("strategy", ["offset", "timestamp", "header"])
def test_the_arrow_rank_orders_as_the_winner_rule(strategy):
    """The Arrow rank (``cleaner.arrow_ranks.dense_ranks``: the Arrow check's and the Arrow
    decider's) orders records as the pure ``cleaner.rules.winner_rank`` does, ties included
    (a record on both sides), on random records: offsets and timestamps that repeat, headers
    that parse and that do not; with the header pairs given and read by itself."""
    import random

    import pyarrow as pa

    from framework.cleaner.arrow_ranks import dense_ranks
    from framework.cleaner.rules import header_version, last_header, winner_rank
    from framework.spec import parse_spec

    config = {"cleanup.policy": "compact", "compaction.strategy": strategy}
    if strategy == "header":
        config["compaction.strategy.header"] = "v"
    config = parse_spec({"topic": "t", "partitions": 1, "config": config}, "test").config
    rng = random.Random(96)
    rows = []
    for _ in range(300):
        headers = rng.choice([None, (), (("v", str(rng.randint(-3, 3)).encode()),), (("v", b"x"),),
                              (("v", b"1"), ("v", (7).to_bytes(8, "big"))), (("w", b"5"),)])
        rows.append((rng.randint(0, 40), rng.randint(0, 5), headers))
    rows += [(41, 10, None), (41, 11, None)]  # one offset at two times, next to each other in time order
    every = pa.table({"offset": pa.array([o for o, _, _ in rows], pa.int64()),
                      "timestamp": pa.array([t for _, t, _ in rows], pa.int64()),
                      "headers": pa.array([None if h is None else [{"key": k, "value": v} for k, v in h]
                                           for _, _, h in rows],
                                          pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])))})
    rule = [winner_rank(strategy, o, t, header_version(last_header(h or (), "v"))) for o, t, h in rows]
    for pairs in ([h for _, _, h in rows], None):
        ranks = dense_ranks(every, config, pairs).to_pylist()
        for i in range(len(rows)):
            for j in range(len(rows)):
                assert (ranks[i] < ranks[j]) == (rule[i] < rule[j]) and (ranks[i] == ranks[j]) == (rule[i] == rule[j])


# --------------------------------------------------------------- the warehouse
@dataclass
class Base:
    root: Path
    specs_dir: Path
    specs: list
    #: produced, never maintained
    produced: Path
    #: produced and maintained once at NOW, validation on
    maintained: Path
    run: object

    def copy(self, source: Path, target: Path):
        from framework.log.warehouse import Warehouse

        shutil.copytree(source, target)
        return Warehouse.resolve(str(target))

    def spec(self, topic: str):
        return next(s for s in self.specs if s.topic == topic)

    def row(self, topic: str, stage: str):
        part = next(p for p in self.run.partitions if p.topic == topic)
        return next(r for r in part.rows if r.stage == stage)


def _produce(spark, warehouse, spec, rows, now):
    from framework.clients.produce import produce
    from framework.clients.records import parse_records
    from framework.log.topic import Topic

    raw = [{"partition": 0, "key": k, "value": v, "timestamp": t, "headers": h} for k, v, t, h in
           (row if len(row) == 4 else (*row, {}) for row in rows)]
    records = parse_records(list(enumerate(raw, start=1)), spec, "test")
    return produce(Topic(spark, warehouse, spec), records, now)


@pytest.fixture(scope="module")
def base(spark, tmp_path_factory) -> Base:
    from framework.log.consumer_offsets import ConsumerOffsets
    from framework.log.topic import Topic
    from framework.log.warehouse import Warehouse
    from framework.spec import load_specs
    from framework.stages.maintenance import Maintenance

    root = tmp_path_factory.mktemp("guarantees")
    specs_dir = root / "specs"
    specs_dir.mkdir()
    (specs_dir / "orders.yaml").write_text(ORDERS_SPEC)
    (specs_dir / "events.yaml").write_text(EVENTS_SPEC)
    (specs_dir / "prices.yaml").write_text(PRICES_SPEC)
    (specs_dir / "versions.yaml").write_text(VERSIONS_SPEC)
    specs = load_specs([str(specs_dir)])
    produced = root / "produced"
    warehouse = Warehouse.resolve(str(produced))
    by_topic = {s.topic: s for s in specs}
    for spec in specs:
        Topic(spark, warehouse, spec).create()
    _produce(spark, warehouse, by_topic["orders"], ORDERS, NOW)
    _produce(spark, warehouse, by_topic["events"], EVENTS, NOW)
    _produce(spark, warehouse, by_topic["prices"], PRICES, NOW)
    _produce(spark, warehouse, by_topic["versions"], VERSIONS, NOW)
    ConsumerOffsets(spark, warehouse).commit("billing", "events", 0, 3)

    maintained = root / "maintained"
    shutil.copytree(produced, maintained)
    after = Warehouse.resolve(str(maintained))
    run = Maintenance(spark, after, specs, validator=Guarantees(spark, after)).run(NOW)
    return Base(root, specs_dir, specs, produced, maintained, run)


@pytest.fixture
def orders(spark, base, tmp_path):
    """A fresh copy of the maintained warehouse, and its orders partition."""
    from framework.log.topic import Topic

    warehouse = base.copy(base.maintained, tmp_path / "warehouse")
    return warehouse, Topic(spark, warehouse, base.spec("orders")).partition(0)


def offsets(log, version=None):
    return delta_rs_offsets(log.path, version)


def latest(log) -> int:
    return log.commits(1)[0].version


def raw_delete(log, condition: str) -> int:
    log.delta_table().delete(condition)
    return latest(log)


def raw_update(log, condition: str, values: dict) -> int:
    log.delta_table().update(condition, values)
    return latest(log)


def raw_append(log, frame) -> int:
    frame.write.format("delta").mode("append").save(log.path)
    return latest(log)


def pinned(frame):
    """A ``StageCheck.before``: the version a stage started from, read before it committed."""
    return lambda: frame


def compact_check(base, log, version_after: int) -> StageCheck:
    """The StageCheck of the fixture's real compaction, pointed at another after version."""
    row = base.row(log.spec.topic, "compact")
    return StageCheck(
        log=log, stage="compact", now_ms=NOW, version_before=row.version_before, version_after=version_after,
        before=pinned(log.read(row.version_before)),
        state_before=log.states_at([row.version_before])[row.version_before],
        state_after=log.states_at([version_after])[version_after], first_uncleanable_offset=row.first_uncleanable_offset,
        cleaned_up_to=row.first_uncleanable_offset,
    )


def failed_codes(outcome) -> set[str]:
    return {f.split()[0] for f in outcome.failed_guarantees}


# ------------------------------------------------------------ healthy tables
def test_healthy_runs_pass_and_leave_their_results_in_the_ge_project(spark, base):
    assert not base.run.failed, [(p.error, p.failed_guarantees) for p in base.run.partitions]
    compact = base.row("orders", "compact")
    assert (compact.version_before, compact.version_after, compact.first_uncleanable_offset) == (1, 2, 6)
    assert compact.validation == "passed"
    assert base.row("events", "retain").validation == "passed"
    # Under the timestamp and header strategies too: a check that ranked by offset alone
    # would find their survivors (never their key's highest offset below U) wrong.
    for topic in ("prices", "versions"):
        assert base.row(topic, "compact").validation == "passed", topic

    import great_expectations as gx

    project = gx.get_context(mode="file", project_root_dir=str(base.maintained / "_topiclake"))
    suite = project.suites.get("topiclake.orders.guarantees")
    assert sorted(e.description for e in suite.expectations) == sorted(g.description for g in GUARANTEES)
    assert [e.expectation_type for e in project.suites.get("topiclake.orders.expectations").expectations] == [
        "expect_column_values_to_match_regex"]
    names = {d.name for d in project.validation_definitions.all()}
    # the guarantees: one validation a topic, over a row per check; the spec's own
    # expectations: per partition and stage, over its records
    assert {"topiclake.orders.guarantees", "topiclake.orders-0.compact.expectations",
            "topiclake.events.guarantees"} <= names
    results = Path(base.maintained, "_topiclake", "gx", "uncommitted", "validations")
    assert len(list((results / "topiclake" / "orders" / "guarantees").rglob("*.json"))) == 1


def test_validate_passes_on_a_healthy_table_and_rerunning_reuses_the_ge_objects(spark, base, orders):
    warehouse, log = orders
    assert offsets(log) == [2, 4, 5, 6, 7, 8]
    first = Guarantees(spark, warehouse).validate(log, NOW, None, None)
    assert first.passed, first.details
    # A range across the compaction: what survives is a subset, so G1 holds.
    again = Guarantees(spark, warehouse).validate(log, NOW, 1, 2)
    assert again.passed, again.details


def test_the_timestamp_and_header_strategies_keep_their_winners_not_the_highest_offsets(spark, base):
    """The engine itself, on the fixture's data: each key's winner below U, under its strategy."""
    from framework.log.topic import Topic
    from framework.log.warehouse import Warehouse

    warehouse = Warehouse.resolve(str(base.maintained))
    for topic in ("prices", "versions"):
        log = Topic(spark, warehouse, base.spec(topic)).partition(0)
        assert offsets(log) == STRATEGY_SURVIVORS, topic


def _counted(spark, warehouse, check, monkeypatch):
    """The check's outcome and how many times it counted violations; the outcome must be
    the one the check gives when it counts the data's bounds first, in a job of their own
    (as before stop 62)."""
    from framework.checks import bounds, guarantees, rules

    with monkeypatch.context() as patched:
        counts, shipped = [], rules.summary
        patched.setattr(rules, "summary", lambda *args, **kwargs: counts.append(1) or shipped(*args, **kwargs))
        patched.setattr(bounds, "bounds", lambda *args, **kwargs: pytest.fail("the bounds counted on their own"))
        outcome = Guarantees(spark, warehouse).check_stage(check)
    with monkeypatch.context() as patched:
        patched.setattr(guarantees, "expected_bounds", lambda check: None)
        assert Guarantees(spark, warehouse).check_stage(check) == outcome
    return outcome, len(counts)


def test_a_correct_stage_is_checked_in_one_spark_job_with_its_bounds(spark, base, orders, monkeypatch):
    """The check of a stage whose U the data confirms counts the violations and the data's
    bounds together: one summary, no job for the bounds alone (Spark's route, Arrow's count
    turned off)."""
    _spark_counts(monkeypatch)
    warehouse, log = orders
    check = compact_check(base, log, base.row("orders", "compact").version_after)
    outcome, counted = _counted(spark, warehouse, check, monkeypatch)
    assert outcome.passed and counted == 1, outcome.details
    # a corruption that does not move U or the retention bounds is still found that way
    version = CORRUPTIONS["final state changed"][0](log)
    outcome, counted = _counted(spark, warehouse, compact_check(base, log, version), monkeypatch)
    assert failed_codes(outcome) == {"G5"} and counted == 1, outcome.details


# -------------------------------------------------- corruptions of a stage
def _append_original(log, offset: int, version: int = 1) -> int:
    from pyspark.sql import functions as F

    return raw_append(log, log.read(version).where(F.col("offset") == offset))


CORRUPTIONS = {
    "head record removed": (lambda log: raw_delete(log, "offset = 6"), {"G2"}),  # superseded by 8: same final state
    "offset changed": (lambda log: raw_update(log, "offset = 5", {"offset": "1"}), {"G1", "G4"}),
    "tombstone removed before its horizon": (lambda log: raw_delete(log, "offset = 4"), {"G7"}),
    "tombstone horizon shortened": (
        lambda log: raw_update(log, "offset = 4", {"_delete_horizon": "timestamp_millis(10000)"}), {"G7"}),
    "survivor is not its key's winner": (
        lambda log: (raw_delete(log, "offset = 2"), _append_original(log, 0))[-1], {"G4"}),
    "final state changed": (lambda log: raw_delete(log, "offset = 5"), {"G5"}),
}


@pytest.mark.parametrize("corruption", sorted(CORRUPTIONS))
def test_each_corruption_of_a_compaction_is_caught_by_its_guarantee(spark, base, orders, corruption):
    warehouse, log = orders
    corrupt, expected = CORRUPTIONS[corruption]
    version = corrupt(log)
    outcome = Guarantees(spark, warehouse).check_stage(compact_check(base, log, version))
    assert not outcome.passed
    assert failed_codes(outcome) == expected, outcome.details
    text = "\n".join(outcome.details)
    for code in expected:
        assert f"{name(code)}: " in text
    assert "offset " in text


def _unpinned(check: StageCheck) -> StageCheck:
    """``check`` as a maintenance run hands a small partition's compaction over: the before
    version read from its files, and (for orders) without the spec's own expectations,
    which read every record: such a check may be counted in a batch."""
    return dataclasses.replace(_without_spec_expectations(check), before=None)


def _without_spec_expectations(check: StageCheck) -> StageCheck:
    """``check`` of its partition under a spec without its own expectations (a Great
    Expectations run over every record, which the guarantees' counts do not read)."""
    from framework.log.partition_log import PartitionLog

    log = check.log
    spec = log.spec.model_copy(update={"expectations": ()})
    return dataclasses.replace(check, log=PartitionLog(log.spark, log.warehouse, spec, log.partition))


@pytest.mark.parametrize("corruption", sorted(CORRUPTIONS))
def test_a_batch_of_checks_finds_what_each_check_alone_finds(spark, base, orders, corruption, monkeypatch):
    """Small partitions' compaction checks are counted together, one Spark job a topic
    (framework/checks/batched.py). In a batch with healthy checks of three topics, the
    corrupted check is the one the batch does not find clean, and it is measured on its own;
    every check's measure (counts, samples, context) is the one it gets alone. The healthy
    orders check reads the same table as the corrupted one: the batch keeps them apart.
    (Spark's batch, Arrow's count turned off; with it on, the healthy checks are counted by
    Arrow first, and every measure is again the one each gets alone.)"""
    from framework.checks import arrow_scope, batched
    from framework.log.topic import Topic

    shipped = arrow_scope.counted
    _spark_counts(monkeypatch)
    warehouse, log = orders
    corrupt, expected = CORRUPTIONS[corruption]
    healthy = [_unpinned(compact_check(base, log, base.row("orders", "compact").version_after))]
    for topic in ("prices", "versions"):
        other = Topic(spark, warehouse, base.spec(topic)).partition(0)
        healthy.append(_unpinned(compact_check(base, other, base.row(topic, "compact").version_after)))
    corrupted = _unpinned(compact_check(base, log, corrupt(log)))
    checks = [healthy[0], corrupted, *healthy[1:]]
    monkeypatch.setattr(batched, "MIN_BATCH", 1)  # the batch's workings, whatever its size
    assert all(batched.batchable(check) for check in checks)
    guarantees = Guarantees(spark, warehouse)
    alone = [guarantees.measure(check) for check in checks]
    measured_alone = []
    real = Guarantees.measure
    monkeypatch.setattr(Guarantees, "measure", lambda self, check: (measured_alone.append(check.version_after),
                                                                   real(self, check))[1])
    together = guarantees.measure_many(checks)
    assert measured_alone == [corrupted.version_after]
    assert together == alone
    outcomes = guarantees.judge(together)
    assert [outcome.passed for outcome in outcomes] == [True, False, True, True]
    assert failed_codes(outcomes[1]) == expected, outcomes[1].details
    by_arrow = []
    monkeypatch.setattr(arrow_scope, "counted", lambda *args: (by_arrow.append(shipped(*args)), by_arrow[-1])[1])
    measured_alone.clear()
    assert guarantees.measure_many(checks) == alone
    assert [found is not None and not found[0] for found in by_arrow[:len(checks)]] == [True, False, True, True]
    assert measured_alone == [corrupted.version_after]


def retain_check(base, log, version_after: int) -> StageCheck:
    """The StageCheck of the fixture's real retention of events (billing committed 3), pointed
    at another after version, as a maintenance run hands a small partition's over."""
    row = base.row(log.spec.topic, "retain")
    return StageCheck(
        log=log, stage="retain", now_ms=NOW, version_before=row.version_before, version_after=version_after,
        before=None, state_before=log.states_at([row.version_before])[row.version_before],
        state_after=log.states_at([version_after])[version_after], smallest_committed_offset=3, new_log_start=3)


#: Corruptions of events' retention (offsets 0-4, 0-2 removed, log start 3).
RETENTION_CORRUPTIONS = {
    "committed record removed": (lambda log: raw_delete(log, "offset = 3"), {"G8"}),
    "record left below the log start": (lambda log: _append_original(log, 1), {"G8"}),
    "delete horizon changed": (
        lambda log: raw_update(log, "offset = 4", {"_delete_horizon": "timestamp_millis(10000)"}), {"G1"}),
    "offset moved past the log end": (lambda log: raw_update(log, "offset = 4", {"offset": "7"}), {"G1", "G8"}),
}


@pytest.mark.parametrize("corruption", sorted(RETENTION_CORRUPTIONS))
def test_a_batch_of_retention_checks_finds_what_each_check_alone_finds(spark, base, tmp_path, corruption,
                                                                      monkeypatch):
    """Small partitions' retention checks are counted in batches too, one a topic and stage:
    with a healthy check of the same table and a healthy compaction of orders, the corrupted
    retention is the one measured on its own, and every measure is the one it gets alone.
    (Spark's batch for the compaction too, Arrow's count turned off.)"""
    from framework.checks import batched
    from framework.log.topic import Topic

    _spark_counts(monkeypatch)

    warehouse = base.copy(base.maintained, tmp_path / "warehouse")
    log = Topic(spark, warehouse, base.spec("events")).partition(0)
    orders = Topic(spark, warehouse, base.spec("orders")).partition(0)
    corrupt, expected = RETENTION_CORRUPTIONS[corruption]
    healthy = retain_check(base, log, base.row("events", "retain").version_after)
    corrupted = retain_check(base, log, corrupt(log))
    checks = [healthy, corrupted, _unpinned(compact_check(base, orders, base.row("orders", "compact").version_after))]
    monkeypatch.setattr(batched, "MIN_BATCH", 1)  # the batch's workings, whatever its size
    assert all(batched.batchable(check) for check in checks)
    guarantees = Guarantees(spark, warehouse)
    alone = [guarantees.measure(check) for check in checks]
    measured_alone, counted = [], []
    real, group = Guarantees.measure, batched._count_group
    monkeypatch.setattr(Guarantees, "measure", lambda self, check: (measured_alone.append(check.version_after),
                                                                   real(self, check))[1])
    monkeypatch.setattr(batched, "_count_group", lambda *args: (counted.append(args[4]), group(*args))[1])
    together = guarantees.measure_many(checks)
    assert measured_alone == [corrupted.version_after]
    assert sorted(counted) == ["compact", "retain"]
    assert together == alone
    outcomes = guarantees.judge(together)
    assert [outcome.passed for outcome in outcomes] == [True, False, True]
    assert failed_codes(outcomes[1]) == expected, outcomes[1].details


#: The kinds of corruption above, all at once on prices and versions, each on its own key
#: (a's head and a's survivor aside): what each corruption must be named by, at which
#: offsets. Their survivors below U are never their key's highest offset.
STRATEGY_CORRUPTIONS = [
    # (what, {"delete": offsets, "update": (condition, values), "append": offsets of version 1},
    #  {guarantee: the offsets it must name})
    ("head record removed", {"delete": [12]}, {"G2": {12}}),  # a's final value is 13's
    # By offset a's survivor would be right; a's final value is 13's either way.
    ("survivor is not its key's winner", {"delete": [0], "append": [1]}, {"G4": {1}}),
    ("offset changed", {"update": ("offset = 2", {"offset": "3"})}, {"G1": {3}, "G4": {3}}),
    # By offset the winner of c would be 5, and its removal no tombstone's business.
    ("tombstone removed before its horizon", {"delete": [4]}, {"G7": {4}}),
    ("tombstone horizon shortened", {"update": ("offset = 6", {"_delete_horizon": "timestamp_millis(10000)"})},
     {"G7": {6}}),
    ("final state changed", {"delete": [8]}, {"G5": {8}}),
    # g's final value goes from 1 to 2; by offset this is exactly right (G5 names the old winner).
    ("highest offset kept instead of the winner", {"delete": [10], "append": [11]}, {"G4": {11}, "G5": {10}}),
]


def corrupt_all(log, corruptions) -> int:
    """Every corruption at once, in three raw Delta commits (deletes, updates, appends)."""
    from pyspark.sql import functions as F

    deleted = [o for _, ops, _ in corruptions for o in ops.get("delete", [])]
    appended = [o for _, ops, _ in corruptions for o in ops.get("append", [])]
    raw_delete(log, f"offset IN ({', '.join(map(str, deleted))})")
    for _, ops, _ in corruptions:
        if "update" in ops:
            raw_update(log, *ops["update"])
    return raw_append(log, log.read(1).where(F.col("offset").isin(appended)))


def violations_by_guarantee(outcome) -> tuple[dict[str, int], dict[str, set[int]]]:
    """From a failed check's details: per guarantee, its count and the offsets it names."""
    counts: dict[str, int] = {}
    named: dict[str, set[int]] = {}
    code = None
    for line in outcome.details:
        head = re.match(r"(G\d) .*: (\d+) violation\(s\) in ", line)
        if head:
            code = head.group(1)
            counts[code] = int(head.group(2))
            named[code] = set()
            continue
        row = re.match(r"  offset (\d+)", line)
        if row and code is not None:
            named[code].add(int(row.group(1)))
    return counts, named


#: A second compaction of orders at 10900: a gets offset 9 and e offset 10, so the run
#: removes 2, 6 and 8 (a's winner is 9) and leaves the clean records of b (5) and of c (4,
#: a tombstone whose horizon 11000 has not passed) alone. A change-only check pairs the
#: dirty section [6, 11) and a's records, and leaves 4 and 5 out unless a change names them.
SECOND_ROUND_NOW = 10_900
SECOND_ROUND = [("a", "5", 9800), ("e", "1", 9800)]
#: Behind the second compaction's back, each on a record the change-only route leaves out
#: unless the change data feed names it.
SECOND_ROUND_CORRUPTIONS = {
    "an untouched clean record changed in place": lambda log: raw_update(log, "offset = 5", {"value": "'7'"}),
    "an untouched clean record duplicated": lambda log: _append_original(log, 5, version=2),
    "an untouched tombstone removed before its horizon": lambda log: raw_delete(log, "offset = 4"),
    "a removed record of a touched key restored": lambda log: _append_original(log, 2, version=1),
}


def _second_round(spark, base, tmp_path, feed: bool = True):
    """orders after the fixture's run, one more produce, and a second real compaction:
    the partition log and the StageCheck of that compaction (``feed``: with Delta's change
    data feed on, as topiclake creates its tables)."""
    from framework.log.topic import Topic
    from framework.stages import compaction

    warehouse = base.copy(base.maintained, tmp_path / "warehouse")
    spec = base.spec("orders")
    log = Topic(spark, warehouse, spec).partition(0)
    if not feed:
        spark.sql(f"ALTER TABLE {delta_table_sql(log.path)} SET TBLPROPERTIES ('delta.enableChangeDataFeed' = 'false')")
    _produce(spark, warehouse, spec, SECOND_ROUND, SECOND_ROUND_NOW)
    planned = compaction.plan(log, SECOND_ROUND_NOW)
    assert planned.decision.due and planned.measure.checkpoint == 6, planned
    done = compaction.execute(log, planned)
    assert offsets(log) == [4, 5, 7, 9, 10]
    return warehouse, log, StageCheck(
        log=log, stage="compact", now_ms=SECOND_ROUND_NOW, version_before=done.version_before,
        version_after=done.version_after, before=None, state_before=planned.snapshot.state,
        state_after=done.state_after, first_uncleanable_offset=planned.measure.first_uncleanable_offset,
        cleaned_up_to=done.cleaned_up_to)


def _spark_counts(monkeypatch) -> None:
    """Every scoped compaction check from here on is counted by Spark (not by Arrow in the
    driver first, which ``test_arrow_counts_a_scoped_compaction_check_as_spark_does`` pins
    to it): the tests of Spark's scoped route."""
    from framework.checks import arrow_scope

    monkeypatch.setattr(arrow_scope, "counted", lambda *args: None)


def _scoped_and_recorded(monkeypatch) -> list:
    """Every stage check from here on pairs only the change in Spark (the size floor
    lowered); the change scopes they find (None: Delta did not record the change)."""
    from framework.checks import changes, guarantees

    monkeypatch.setattr(changes, "MIN_SCOPED_RECORDS", 0)
    _spark_counts(monkeypatch)
    scopes = []

    def recorded(*args, **kwargs):
        scopes.append(changes.change_scope(*args, **kwargs))
        return scopes[-1]

    monkeypatch.setattr(guarantees, "change_scope", recorded)
    return scopes


@pytest.mark.parametrize("corrupted", [(), tuple(SECOND_ROUND_CORRUPTIONS), ("an untouched tombstone removed before "
                                                                          "its horizon",)],
                         ids=["healthy", "corrupted", "a removal only"])
def test_a_check_of_only_the_change_finds_what_pairing_whole_versions_finds(spark, base, tmp_path, monkeypatch,
                                                                               corrupted):
    """Route parity where the change-only route really leaves records out: the same
    verdict, the same guarantees, the same counts and offending rows (every corruption
    at once, in four raw commits; or a removal alone, which only the feed's delete rows
    bring back into the before version)."""
    warehouse, log, check = _second_round(spark, base, tmp_path)
    if corrupted:
        version = [SECOND_ROUND_CORRUPTIONS[name](log) for name in corrupted][-1]
        check = dataclasses.replace(check, version_after=version, state_after=log.states_at([version])[version])
    whole = Guarantees(spark, warehouse).check_stage(check)
    scopes = _scoped_and_recorded(monkeypatch)
    queried = _spy_on_u_queries(monkeypatch)
    only_the_change = Guarantees(spark, warehouse).check_stage(check)
    assert scopes and scopes[0] is not None and scopes[0].dirty_from == 6
    assert only_the_change == whole
    assert not queried, "no record below the clean end is young: U comes from the pairing"
    assert whole.passed == (not corrupted), whole.details
    if len(corrupted) > 1:  # each corruption is named: G1 (changed, duplicated), G3/G4 (restored), G7 (tombstone)
        assert failed_codes(whole) == {"G1", "G3", "G4", "G7"}, whole.details
    elif corrupted:
        assert failed_codes(whole) == {"G7"}, whole.details


def test_a_scoped_check_of_a_correct_stage_counts_its_violations_and_bounds_in_one_job(spark, base, tmp_path,
                                                                                       monkeypatch):
    """The change-only route too counts the violations under the stage's own bounds with the
    pairing's bounds riding along: one summary, no job for the bounds alone, and the verdict
    of counting the bounds first; a corruption the change-only route must find is found so."""
    warehouse, log, check = _second_round(spark, base, tmp_path)
    scopes = _scoped_and_recorded(monkeypatch)
    outcome, counted = _counted(spark, warehouse, check, monkeypatch)
    assert scopes and scopes[0] is not None, "the check paired only the change"
    assert outcome.passed and counted == 1, outcome.details
    version = SECOND_ROUND_CORRUPTIONS["an untouched tombstone removed before its horizon"](log)
    corrupted = dataclasses.replace(check, version_after=version, state_after=log.states_at([version])[version])
    outcome, counted = _counted(spark, warehouse, corrupted, monkeypatch)
    assert failed_codes(outcome) == {"G7"} and counted == 1, outcome.details


def test_a_scoped_check_plans_its_queries_up_front_and_gives_the_session_its_settings_back(
        spark, base, tmp_path, monkeypatch):
    """The change and its keys are small beside the table: the scoped check's queries run
    without adaptive execution (which made each shuffle and broadcast a job of its own),
    one shuffle partition per core, and the session's own settings come back after it."""
    from framework.checks import bounds, changes
    from framework.log.delta_commits import session_confs

    warehouse, log, check = _second_round(spark, base, tmp_path)
    monkeypatch.setattr(changes, "MIN_SCOPED_RECORDS", 0)
    _spark_counts(monkeypatch)
    keys = ("spark.sql.adaptive.enabled", "spark.sql.shuffle.partitions")
    seen, shipped = [], bounds.scoped_numbers

    def scoped_numbers(*args, **kwargs):
        seen.append(tuple(log.spark.conf.get(key) for key in keys))
        return shipped(*args, **kwargs)

    monkeypatch.setattr(bounds, "scoped_numbers", scoped_numbers)
    adaptive = ("true", "7")
    with session_confs(spark, dict(zip(keys, adaptive))):
        outcome = Guarantees(spark, warehouse).check_stage(check)
        assert tuple(spark.conf.get(key) for key in keys) == adaptive
    assert outcome.passed, outcome.details
    assert seen == [("false", str(spark.sparkContext.defaultParallelism))]


def test_a_change_delta_did_not_record_is_checked_by_pairing_whole_versions(spark, base, tmp_path, monkeypatch):
    """A table whose owner turned the change data feed off: the scoped check finds no
    record of the change and pairs whole versions instead, with the same verdict."""
    warehouse, log, check = _second_round(spark, base, tmp_path, feed=False)
    whole = Guarantees(spark, warehouse).check_stage(check)
    scopes = _scoped_and_recorded(monkeypatch)
    assert Guarantees(spark, warehouse).check_stage(check) == whole
    assert scopes == [None] and whole.passed, whole.details


def _spy_on_u_queries(monkeypatch) -> list:
    """The thresholds of the scoped check's reads of the before version for U (and time retention)."""
    from framework.checks import bounds

    queried, shipped = [], bounds._first_offset_from

    def first_offset_from(frame, ms):
        queried.append(ms)
        return shipped(frame, ms)

    monkeypatch.setattr(bounds, "_first_offset_from", first_offset_from)
    return queried


def test_a_young_record_below_the_clean_end_sends_the_scoped_check_to_the_before_versions_files(
        spark, base, tmp_path, monkeypatch):
    """A clock that went back makes a record below the clean end young again (offset 5, at
    5000, at now 5500 with a 1000 ms min lag). The before version's file statistics then
    cannot prove U lies in the pairing, so the scoped check reads the before version for it,
    and finds what pairing whole versions finds."""
    from framework.checks import changes

    warehouse, log, check = _second_round(spark, base, tmp_path)
    check = dataclasses.replace(check, now_ms=5_500)
    whole = Guarantees(spark, warehouse).check_stage(check)
    monkeypatch.setattr(changes, "MIN_SCOPED_RECORDS", 0)
    queried = _spy_on_u_queries(monkeypatch)
    assert Guarantees(spark, warehouse).check_stage(check) == whole
    assert queried == [5_500 - 1_000]


@pytest.mark.parametrize("topic", ["prices", "versions"])
def test_each_corruption_is_caught_under_the_timestamp_and_header_strategies(spark, base, tmp_path, monkeypatch,
                                                                            topic):
    """Every kind of corruption, each on its own key, in one corrupted version: the check
    fails and names each corruption by exactly its guarantees, at exactly its offsets. A
    small partition's versions are paired in one Spark task; paired through the session's
    shuffles they give the same outcome, to the offending rows."""
    from framework.checks import rules
    from framework.log.topic import Topic

    warehouse = base.copy(base.maintained, tmp_path / "warehouse")
    log = Topic(spark, warehouse, base.spec(topic)).partition(0)
    version = corrupt_all(log, STRATEGY_CORRUPTIONS)
    expected: dict[str, set[int]] = {}
    for _, _, named in STRATEGY_CORRUPTIONS:
        for code, at in named.items():
            expected.setdefault(code, set()).update(at)
    shipped, routes = rules.pairing, []

    def pairing(before, after, config, one_task=False, forced=None):
        routes.append(one_task if forced is None else forced)
        return shipped(before, after, config, one_task=routes[-1])

    monkeypatch.setattr(rules, "pairing", pairing)
    outcome = Guarantees(spark, warehouse).check_stage(compact_check(base, log, version))
    monkeypatch.setattr(rules, "pairing", lambda *args, **kwargs: pairing(*args, **kwargs, forced=False))
    assert Guarantees(spark, warehouse).check_stage(compact_check(base, log, version)) == outcome
    assert routes == [True, False]
    assert not outcome.passed
    assert failed_codes(outcome) == set(expected), outcome.details
    counts, named = violations_by_guarantee(outcome)
    assert named == expected, outcome.details
    assert counts == {code: len(at) for code, at in expected.items()}, outcome.details
    strategy = base.spec(topic).config.compaction_strategy
    assert f"not its key's winner under the {strategy} strategy" in "\n".join(outcome.details)


def test_a_second_record_for_a_key_below_the_checkpoint_is_caught_and_shown(spark, base, orders):
    """The loser at offset 0 comes back: G3 (key twice) and G4 (not the winner), with the rows."""
    warehouse, log = orders
    version = _append_original(log, 0)
    outcome = Guarantees(spark, warehouse).check_stage(compact_check(base, log, version))
    assert failed_codes(outcome) == {"G3", "G4"}
    details = list(outcome.details)
    g3 = details.index(next(line for line in details if line.startswith(name("G3"))))
    assert details[g3].startswith(f"{name('G3')}: 2 violation(s) in orders-0, versions 1 -> {version}")
    assert details[g3 + 1] == "  offset 0, key 'a': key appears 2 times below the checkpoint 6"
    assert details[g3 + 2] == "  offset 2, key 'a': key appears 2 times below the checkpoint 6"
    assert "  offset 0, key 'a': not its key's winner under the offset strategy: the winner is offset 2" in details


def _misjudged_run(spark, base, tmp_path):
    """orders compacted by an engine with a stale min.compaction.lag.ms (U = 5 instead of 6):
    its warehouse and the check of that run."""
    from framework.log.topic import Topic
    from framework.stages import compaction

    warehouse = base.copy(base.produced, tmp_path / "warehouse")
    spec = base.spec("orders")
    stale = spec.model_copy(update={"config": spec.config.model_copy(update={"min_compaction_lag_ms": 6000})})
    buggy = Topic(spark, warehouse, stale).partition(0)
    planned = compaction.plan(buggy, NOW, force=True)
    before = buggy.read(planned.snapshot.version)
    result = compaction.execute(buggy, planned)
    assert result.cleaned_up_to == 5
    log = Topic(spark, warehouse, spec).partition(0)
    return warehouse, StageCheck(
        log=log, stage="compact", now_ms=NOW, version_before=result.version_before,
        version_after=result.version_after, before=pinned(before), state_before=planned.snapshot.state,
        state_after=result.state_after, first_uncleanable_offset=planned.measure.first_uncleanable_offset,
        cleaned_up_to=result.cleaned_up_to,
    )


@pytest.mark.slow
def test_a_run_that_misjudged_the_first_uncleanable_offset_leaves_max_lag_records_behind(spark, base, tmp_path,
                                                                                        monkeypatch):
    """G6: the engine ran with a stale min.compaction.lag.ms (U = 5 instead of 6), so record 5,
    older than max lag, stayed above the checkpoint; the check recomputes U from the data."""
    warehouse, check = _misjudged_run(spark, base, tmp_path)
    # the stage's U (5) is not the data's (6): the violations are counted again under the data's scope
    outcome, counted = _counted(spark, warehouse, check, monkeypatch)
    assert failed_codes(outcome) == {"G6"} and counted == 2, outcome.details
    assert "  offset 5, key 'b': timestamp 5000 is older than now - max.compaction.lag.ms = 6000" in "\n".join(
        outcome.details)
    # the check of only the change recomputes U from its pairing (the file statistics
    # prove no young record lies below the clean end) and catches the same
    from framework.checks import changes, guarantees

    monkeypatch.setattr(changes, "MIN_SCOPED_RECORDS", 0)
    monkeypatch.setattr(changes, "MAX_WHOLE_SHARE", 1.0)  # the first compaction: all of it is dirty
    scoped = []
    monkeypatch.setattr(guarantees, "worth_scoping", lambda *args: scoped.append(changes.worth_scoping(*args))
                        or scoped[-1])
    queried = _spy_on_u_queries(monkeypatch)
    assert Guarantees(spark, warehouse).check_stage(check) == outcome
    assert scoped == [True] and not queried


def test_consumed_retention_that_removes_a_committed_record_is_caught(spark, base, tmp_path, monkeypatch):
    from framework.log.topic import Topic

    warehouse = base.copy(base.maintained, tmp_path / "warehouse")
    log = Topic(spark, warehouse, base.spec("events")).partition(0)
    assert offsets(log) == [3, 4]
    row = base.row("events", "retain")
    version = raw_delete(log, "offset = 3")
    # a removal retention does not explain: the violations are counted again under the data's scope
    outcome, counted = _counted(spark, warehouse, StageCheck(
        log=log, stage="retain", now_ms=NOW, version_before=row.version_before, version_after=version,
        before=pinned(log.read(row.version_before)),
        state_before=log.states_at([row.version_before])[row.version_before],
        state_after=log.states_at([version])[version], smallest_committed_offset=3, new_log_start=3,
    ), monkeypatch)
    assert failed_codes(outcome) == {"G8"} and counted == 2, outcome.details
    text = "\n".join(outcome.details)
    assert "offset 3, key 'e3': removed at or above the new log start 3" in text


def test_an_unreadable_version_inside_the_window_is_caught(spark, base, orders, monkeypatch):
    from framework.checks import readability

    warehouse, log = orders
    # the versions are read in one query; when it fails, each alone, to say which
    alone = []
    read_one = readability.read_problem
    monkeypatch.setattr(readability, "read_problem",
                        lambda log, version: alone.append(version) or read_one(log, version))
    # The compaction marked rows with deletion vectors; a purge rewrites the files, so
    # version 1's data files are no longer needed by the latest version.
    spark.sql(f"REORG TABLE {delta_table_sql(log.path)} APPLY (PURGE)").collect()
    latest = log.snapshot().version
    old = set(log.read(1).inputFiles())
    current = set(log.read(latest).inputFiles())
    gone = sorted(old - current)
    assert gone, "the purge rewrote the data file"
    path = gone[0]
    os.remove(path[len("file:"):] if path.startswith("file:") else path)
    check = StageCheck(log=log, stage="vacuum", now_ms=NOW, version_before=latest, version_after=latest, before=None,
                       state_before=None, state_after=None, oldest_window_version=1)
    outcome = Guarantees(spark, warehouse).check_stage(check)
    assert failed_codes(outcome) == {"G9"}
    text = "\n".join(outcome.details)
    assert "version 1 (the oldest version inside the time-travel window) cannot be read" in text
    assert f"version {latest} (" not in text, text  # the latest is readable: only version 1 is named
    assert sorted(alone) == [1, latest]
    healthy = dataclasses.replace(check, oldest_window_version=latest)
    assert Guarantees(spark, warehouse).check_stage(healthy).passed


def test_readable_versions_are_read_in_one_query(spark, orders, monkeypatch):
    from framework.checks import readability

    _, log = orders
    latest = log.snapshot().version
    versions = list(range(1, latest + 1))
    assert len(versions) >= 2
    alone = []
    read_one = readability.read_problem
    monkeypatch.setattr(readability, "read_problem",
                        lambda log, version: alone.append(version) or read_one(log, version))
    assert readability.read_problems(log, versions) == {v: None for v in versions}
    assert alone == []  # no version was read alone
    assert {v: read_one(log, v) for v in versions} == {v: None for v in versions}


def test_a_small_local_partition_s_versions_are_read_without_spark_as_spark_reads_them(spark, tmp_path):
    """G9 told without Spark (``readability.readable_here``: a vacuum made without the JVM
    checks without one) says readable exactly where Spark's read of the same versions
    finds nothing, and not readable where Spark finds a version's file gone; a version
    Delta cannot rebuild (a commit file gone, no checkpoint after it) is not read here."""
    from framework.checks import readability
    from framework.clients.produce import produce
    from framework.clients.records import parse_records
    from framework.log.topic import Topic
    from framework.log.warehouse import Warehouse
    from framework.spec import parse_spec

    spec = parse_spec({"topic": "t", "partitions": 1, "config": {"cleanup.policy": "delete"}}, "t.yaml")
    topic = Topic(spark, Warehouse.resolve(str(tmp_path)), spec)
    for batch in range(3):
        produce(topic, parse_records([(None, {"key": f"k{batch}.{i}", "value": "v", "timestamp": 1_000 + i})
                                      for i in range(3)], spec, "t"), NOW)
    log = topic.partition(0)
    spark.sql(f"DELETE FROM {delta_table_sql(log.path)} WHERE offset = 1")  # version 1's file rewritten
    latest = log.snapshot().version
    versions = list(range(0, latest + 1))
    assert readability.readable_here(log, versions)
    assert readability.read_problems(log, versions) == {v: None for v in versions}
    gone = sorted(set(log.read(1).inputFiles()) - set(log.read(latest).inputFiles()))
    assert gone, "the DELETE rewrote a file of version 1"
    os.remove(gone[0].removeprefix("file:"))
    assert not readability.readable_here(log, [1]) and readability.read_problems(log, [1])[1] is not None
    assert readability.readable_here(log, [latest]) and readability.read_problems(log, [latest]) == {latest: None}
    os.remove(os.path.join(log.path, "_delta_log", f"{latest - 1:020d}.json"))
    assert not readability.readable_here(log, [latest])


def test_a_small_partition_s_deletion_vectors_are_read_for_g9_as_spark_reads_them(spark, tmp_path):
    """A version whose file carries a deletion vector is read here with its vector: readable
    where Spark's read finds nothing, and not once the vector's file is gone, where Spark's
    read fails too."""
    from framework.checks import readability
    from framework.clients.produce import produce
    from framework.clients.records import parse_records
    from framework.log import version_checksum
    from framework.log.topic import Topic
    from framework.log.warehouse import Warehouse
    from framework.spec import parse_spec

    spec = parse_spec({"topic": "t", "partitions": 1, "config": {"cleanup.policy": "delete"}}, "t.yaml")
    topic = Topic(spark, Warehouse.resolve(str(tmp_path)), spec)
    produce(topic, parse_records([(None, {"key": f"k{i}", "value": "v", "timestamp": 1_000 + i}) for i in range(4)],
                                 spec, "t"), NOW)
    log = topic.partition(0)
    spark.sql(f"ALTER TABLE {delta_table_sql(log.path)} SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    spark.sql(f"DELETE FROM {delta_table_sql(log.path)} WHERE offset = 1")
    latest = log.snapshot().version
    assert version_checksum.plain_files(log.path, latest) is None, "the DELETE wrote no deletion vector"
    assert readability.readable_here(log, [latest]) and readability.read_problems(log, [latest]) == {latest: None}
    [vector] = [name for name in os.listdir(log.path) if name.startswith("deletion_vector_")]
    os.remove(os.path.join(log.path, vector))
    assert not readability.readable_here(log, [latest]) and readability.read_problems(log, [latest])[latest]


# ------------------------------------- a scoped compaction check counted by Arrow
def _counted_both_ways(spark, warehouse, check, monkeypatch):
    """``check`` counted by Arrow in the driver (``arrow_scope.counted``) and measured by
    Spark's scoped route (the size floor lowered, Arrow's count turned off), both without
    the spec's own expectations: the pin is on the guarantees' counts and context."""
    from framework.checks import arrow_scope, changes

    check = _without_spec_expectations(check)
    start = changes.dirty_from("compact", check.state_before)
    found = arrow_scope.counted(check, check.state_after, start)
    with monkeypatch.context() as patched:
        patched.setattr(changes, "MIN_SCOPED_RECORDS", 0)
        patched.setattr(changes, "MAX_WHOLE_SHARE", 1.0)  # a first compaction: all of it is dirty
        patched.setattr(arrow_scope, "counted", lambda *args: None)
        by_spark = Guarantees(spark, warehouse).measure(check)
    return found, by_spark


def _copy_of(spark, base, round_, target):
    """A copy of a second round's warehouse (``_second_round``'s answer), with its partition
    log and check pointed at the copy: its versions, without producing and compacting again."""
    from pathlib import Path

    from framework.log.partition_log import PartitionLog

    warehouse, log, check = round_
    copy = base.copy(Path(warehouse.root), target)
    copied = PartitionLog(spark, copy, log.spec, log.partition)
    return copy, copied, dataclasses.replace(check, log=copied)


def _second_round_corrupted(spark, base, tmp_path, round_, corruptions):
    """The second round's compaction check after each of ``corruptions`` alone (None: all of
    them at once), each on a copy: (what, warehouse, check)."""
    for index, corruption in enumerate(corruptions):
        warehouse, log, check = _copy_of(spark, base, round_, tmp_path / str(index))
        done = [SECOND_ROUND_CORRUPTIONS[c](log) for c in ([corruption] if corruption else SECOND_ROUND_CORRUPTIONS)]
        yield corruption or "all at once", warehouse, dataclasses.replace(
            check, version_after=done[-1], state_after=log.states_at([done[-1]])[done[-1]])


@pytest.mark.slow
def test_arrow_counts_a_scoped_compaction_check_as_spark_does(spark, base, tmp_path, monkeypatch):
    """The second expression of the compaction rules (``framework.checks.arrow_rules``, over the
    records ``framework.checks.arrow_scope`` reads) pinned to Spark's on every version the
    suite's compaction corruptions make: the orders compaction and each corruption of it,
    both strategies' compactions with every corruption at once, and the second round
    (records the scope leaves out), with the change data feed on and off; and four versions
    made for rules no corruption there reaches. On each, the same
    violations per guarantee, and the same bounds and scope (the check's metrics row)."""
    from framework.checks.guarantees import _context
    from framework.log.topic import Topic

    cases = []
    for corruption in [None, *sorted(CORRUPTIONS)]:
        warehouse = base.copy(base.maintained, tmp_path / f"orders-{len(cases)}")
        log = Topic(spark, warehouse, base.spec("orders")).partition(0)
        version = CORRUPTIONS[corruption][0](log) if corruption else base.row("orders", "compact").version_after
        cases.append((f"orders: {corruption or 'healthy'}", warehouse, compact_check(base, log, version)))
    for topic in ("prices", "versions"):
        for corrupted in (False, True):
            warehouse = base.copy(base.maintained, tmp_path / f"{topic}-{corrupted}")
            log = Topic(spark, warehouse, base.spec(topic)).partition(0)
            version = (corrupt_all(log, STRATEGY_CORRUPTIONS) if corrupted
                       else base.row(topic, "compact").version_after)
            cases.append((f"{topic}: {'corrupted' if corrupted else 'healthy'}", warehouse,
                          compact_check(base, log, version)))
    # without the feed, the change is the files the commits added and removed: one corruption
    # (a delete's rewrite) is enough to read it that way
    rounds = {feed: _second_round(spark, base, tmp_path / f"round-{feed}", feed) for feed in (True, False)}
    for feed, corruptions in ((True, [*sorted(SECOND_ROUND_CORRUPTIONS), None]),
                              (False, ["an untouched tombstone removed before its horizon"])):
        cases += [(f"second round, feed {feed}: {what}", warehouse, check) for what, warehouse, check
                  in _second_round_corrupted(spark, base, tmp_path / f"second-{feed}", rounds[feed], corruptions)]
    # the rounds themselves are corrupted below only on copies
    cases += [(f"second round, feed {feed}: healthy", rounds[feed][0], rounds[feed][2]) for feed in (True, False)]
    # Two more, for rules no corruption above reaches: a key only the after version holds
    # (the after version's record speaks for its final state), and a tombstone whose horizon
    # is exactly now (it has expired: its key's final state may change, and its removal is
    # no tombstone's business), checked at 11000.
    warehouse, log, check = _copy_of(spark, base, rounds[True], tmp_path / "new-key")
    version = raw_update(log, "offset = 5", {"key": "'z'"})
    cases.append(("a key only the after version holds", warehouse,
                  dataclasses.replace(check, version_after=version, state_after=log.states_at([version])[version])))
    warehouse, log, check = _copy_of(spark, base, rounds[True], tmp_path / "expired")
    raw_delete(log, "offset = 4")
    version = _append_original(log, 3, version=1)
    cases.append(("a tombstone at its horizon", warehouse, dataclasses.replace(
        check, now_ms=11_000, version_after=version, state_after=log.states_at([version])[version])))
    # a tombstone kept for the first time given a longer horizon than now + delete.retention.ms
    warehouse = base.copy(base.maintained, tmp_path / "lengthened")
    log = Topic(spark, warehouse, base.spec("orders")).partition(0)
    version = raw_update(log, "offset = 4", {"_delete_horizon": "timestamp_millis(20000)"})
    cases.append(("orders: tombstone horizon lengthened", warehouse, compact_check(base, log, version)))
    # a run that left record 5 (timestamp 5000) above the checkpoint, checked when that is
    # exactly now - max.compaction.lag.ms (the deadline is exclusive)
    warehouse, check = _misjudged_run(spark, base, tmp_path / "deadline")
    cases.append(("a record at the max-lag deadline", warehouse, dataclasses.replace(check, now_ms=9_000)))
    failing = 0
    for what, warehouse, check in cases:
        found, by_spark = _counted_both_ways(spark, warehouse, check, monkeypatch)
        if what.endswith("all at once"):
            # offset 5 changed in place and its original appended: two different records at
            # one offset, whose count in Spark hangs on its fingerprints' order; Spark counts
            assert found is None and by_spark.counts, what
            failing += 1
            continue
        assert found is not None, what
        counts, bounds, scope = found
        assert counts == by_spark.counts, what
        context = {"partition": check.log.partition, **_context("compact", scope, bounds, check.now_ms)}
        if "feed False" in what:
            # Spark pairs whole versions, counting a version's records by offset; the files'
            # statistics (Spark's scoped route, and Arrow's) count a duplicated offset twice
            records = ("records_before", "records_after")
            context = {k: v for k, v in context.items() if k not in records}
            by_spark = dataclasses.replace(by_spark, context={k: v for k, v in by_spark.context.items()
                                                              if k not in records})
        assert context == by_spark.context, what
        failing += bool(counts)
    healthy = [what for what, _, _ in cases if "healthy" in what]
    assert failing == len(cases) - len(healthy) and len(healthy) == 5, "every corrupted version fails, no healthy one"


@pytest.mark.parametrize("size", ["small", "scoped"])
def test_a_clean_compaction_check_is_counted_by_arrow_with_no_spark_job(spark, base, tmp_path, monkeypatch, size):
    """A compaction check that Arrow counts clean starts no Spark job and reads no change
    data feed through Delta, whether its partition is small (Spark would pair whole
    versions) or large enough for Spark to scope the check to the change (the size floor
    lowered); a corrupted one is measured by Spark, which shows the offending rows; a young
    record below the clean end leaves the count to Spark."""
    from framework.checks import arrow_scope, changes

    warehouse, log, check = _second_round(spark, base, tmp_path)
    check = _unpinned(check)  # without orders' own expectations, a Great Expectations run over its records
    if size == "scoped":
        monkeypatch.setattr(changes, "MIN_SCOPED_RECORDS", 0)
    assert changes.worth_scoping(changes.dirty_from("compact", check.state_before), check.state_before) == (
        size == "scoped")
    counted, shipped = [], arrow_scope.counted
    monkeypatch.setattr(arrow_scope, "counted", lambda *args: counted.append(shipped(*args)) or counted[-1])
    scopes = []
    monkeypatch.setattr(guarantees_module(), "change_scope", lambda *args: scopes.append(args))
    tracker = spark.sparkContext.statusTracker()
    jobs = set(tracker.getJobIdsForGroup())
    outcome = Guarantees(spark, warehouse).check_stage(check)
    assert outcome.passed and counted[-1] is not None and not counted[-1][0]
    assert not scopes and set(tracker.getJobIdsForGroup()) == jobs, "no Spark job, no feed read through Delta"
    monkeypatch.setattr(guarantees_module(), "change_scope", changes.change_scope)
    version = SECOND_ROUND_CORRUPTIONS["an untouched tombstone removed before its horizon"](log)
    corrupted = dataclasses.replace(check, version_after=version, state_after=log.states_at([version])[version])
    outcome = Guarantees(spark, warehouse).check_stage(corrupted)
    assert counted[-1][0] == {"G7": 1} and failed_codes(outcome) == {"G7"}, outcome.details
    assert "  offset 4, key 'c': tombstone removed while still its key's winner" in "\n".join(outcome.details)
    monkeypatch.undo()
    young = dataclasses.replace(check, now_ms=5_500)
    assert arrow_scope.counted(young, young.state_after, changes.dirty_from("compact", young.state_before)) is None


def test_a_file_across_the_clean_end_whose_young_records_lie_above_it_is_counted_by_arrow(spark, tmp_path,
                                                                                         monkeypatch):
    """A first compaction stops at the first young record and rewrites the one file, which
    then holds old records below the clean end and young ones above it. A second
    compaction, once some of those are old, is checked: the file's statistics cannot rule
    out a young record below the clean end, so Arrow reads its offsets and timestamps,
    finds none there, and counts the check as Spark does. With a young record below the
    clean end (the clock went back) it leaves the count to Spark."""
    from framework.checks import arrow_scope, changes
    from framework.checks.guarantees import _context
    from framework.log import file_stats, version_checksum
    from framework.log.topic import Topic
    from framework.log.warehouse import Warehouse
    from framework.spec import parse_spec
    from framework.stages import compaction

    spec = parse_spec({"topic": "lagged", "partitions": 1, "config": {
        "cleanup.policy": "compact", "min.cleanable.dirty.ratio": 0.0, "min.compaction.lag.ms": 1_000,
        "delete.retention.ms": 100_000}}, "test")
    warehouse = Warehouse.resolve(str(tmp_path / "w"))
    log = Topic(spark, warehouse, spec).partition(0)
    # old records 0 to 4, then 5 to 9 young at 10,000 and old at 10,600, then 10 to 14 young at both
    _produce(spark, warehouse, spec, [(f"k{i % 3}", f"v{i}", 0 if i < 5 else 9_500 if i < 10 else 20_000)
                                      for i in range(15)], 10_000)
    first = compaction.execute(log, compaction.plan(log, 10_000))
    assert first.committed and first.state_after.checkpoint == 5
    planned = compaction.plan(log, 10_600)
    done = compaction.execute(log, planned)
    assert done.committed and done.state_after.checkpoint == 10
    check = StageCheck(log=log, stage="compact", now_ms=10_600, version_before=done.version_before,
                       version_after=done.version_after, before=None, state_before=planned.snapshot.state,
                       state_after=done.state_after, first_uncleanable_offset=planned.measure.first_uncleanable_offset,
                       cleaned_up_to=done.cleaned_up_to)
    dirty_from = changes.dirty_from("compact", check.state_before)
    before = version_checksum.plain_files(log.path, check.version_before)
    assert file_stats.may_hold_newer([file_stats.of(add) for add in before.adds], dirty_from, 9_600)
    found, by_spark = _counted_both_ways(spark, warehouse, check, monkeypatch)
    assert found is not None and found[0] == by_spark.counts == {}
    assert {"partition": 0, **_context("compact", found[2], found[1], check.now_ms)} == by_spark.context
    went_back = dataclasses.replace(check, now_ms=900)  # the records below 5 (at 0) are young again
    assert arrow_scope.counted(went_back, went_back.state_after, dirty_from) is None


#: events' spec as shipped, and as other retention settings would judge the same versions:
#: (what, the config's fields changed). Timestamps are 0, now 10,000: retention.ms 20,000
#: keeps every record (time explains no removal), 5,000 none (it explains every one).
RETENTION_CONFIGS = [
    ("shipped", {}),
    ("compact,delete, time retention keeps all", {"cleanup_policy": frozenset({"compact", "delete"}),
                                                   "retention_ms": 20_000}),
    ("time retention keeps none", {"retention_ms": 5_000}),
    ("time retention's boundary at a record's timestamp", {"retention_ms": 10_000}),
    ("size retention", {"retention_bytes": 1}),
]
#: More of events' retention, for rules the corruptions above do not reach: two records of
#: one key below the checkpoint (G3), a record changed in place, a record inserted below
#: the log end, and the whole log removed.
RETENTION_PARITY_CORRUPTIONS = {
    "a key twice below the checkpoint": lambda log: raw_append(
        log, log.read(1).where("offset IN (1, 2)").selectExpr("* EXCEPT (key)", "'e1' AS key")),
    "a record changed in place": lambda log: raw_update(log, "offset = 4", {"value": "'9'"}),
    "a record inserted below the log end": lambda log: raw_append(
        log, log.read(1).where("offset = 4").selectExpr("* EXCEPT (`offset`)", "CAST(5 AS BIGINT) AS `offset`")),
    "every record removed": lambda log: raw_delete(log, "true"),
}


@pytest.mark.slow
def test_arrow_counts_a_retention_check_as_spark_does(spark, base, tmp_path, monkeypatch):
    """The second expression of the retention rules and bounds (``arrow_rules.counted_whole``,
    over both whole versions ``arrow_scope`` reads) pinned to Spark's pairing of a small
    partition's versions: events' retention, healthy and under every corruption the retention
    tests make, judged as a consumed retention (billing committed 3, as it did; and 2, so
    that removing offset 2 must be explained by time or size retention) and as a
    DeleteRecords; and, with billing at 2, under other retention settings. On each, the
    same violations per guarantee, and the same bounds and scope (the check's metrics row)."""
    from framework.checks import arrow_scope, changes
    from framework.checks.guarantees import _context
    from framework.log.partition_log import PartitionLog
    from framework.log.topic import Topic

    versions = []
    corruptions = {**{what: corrupt for what, (corrupt, _) in RETENTION_CORRUPTIONS.items()},
                   **RETENTION_PARITY_CORRUPTIONS}
    for corruption in [None, *sorted(corruptions)]:
        warehouse = base.copy(base.maintained, tmp_path / f"events-{len(versions)}")
        log = Topic(spark, warehouse, base.spec("events")).partition(0)
        version = corruptions[corruption](log) if corruption else base.row("events", "retain").version_after
        versions.append((corruption or "healthy", warehouse, log, version))
    # size retention on either side of what explains the removal of offset 2: the bytes of
    # offsets 2 to 4 (the highest removed record's and the bytes kept)
    sizes = {row["offset"]: row["_size"] for row in versions[0][2].read(1).select("offset", "_size").collect()}
    kept = sum(sizes[offset] for offset in (2, 3, 4))
    settings = [*RETENTION_CONFIGS, *((f"retention.bytes {name}", {"retention_bytes": kept - less})
                                      for name, less in (("explains", 1), ("does not explain", 0)))]
    healthy_when_committed_2 = {}
    for setting, changed in settings:
        spec = base.spec("events")
        spec = spec.model_copy(update={"config": spec.config.model_copy(update=changed)})
        for what, warehouse, shipped_log, version in versions:
            # (the settings tell apart only what a consumed retention must explain: the other
            # settings judge the versions whose removals they may explain)
            if changed and what not in ("healthy", "committed record removed", "every record removed"):
                continue
            log = PartitionLog(spark, warehouse, spec, shipped_log.partition)
            judged = [("retain", 2)] if changed else [("retain", 3), ("retain", 2), ("delete_records", None)]
            for stage, committed in judged:
                check = dataclasses.replace(retain_check(base, log, version), stage=stage,
                                            smallest_committed_offset=committed)
                case = f"{setting}, {stage} (committed {committed}): {what}"
                found = arrow_scope.counted(check, check.state_after, changes.dirty_from(stage, check.state_before))
                assert found is not None, case
                counts, bounds, scope = found
                with monkeypatch.context() as patched:
                    patched.setattr(arrow_scope, "counted", lambda *args: None)
                    by_spark = Guarantees(spark, warehouse).measure(check)
                assert counts == by_spark.counts, case
                assert {"partition": 0, **_context(stage, scope, bounds, check.now_ms)} == by_spark.context, case
                if committed == 2 and what == "healthy":
                    healthy_when_committed_2[setting] = counts
                else:
                    assert (what == "healthy") == (not counts), case
    # time or size retention explains removing offset 2 under some settings and not others
    assert healthy_when_committed_2 == {
        "shipped": {"G8": 1}, "compact,delete, time retention keeps all": {"G8": 1},
        "time retention keeps none": {}, "time retention's boundary at a record's timestamp": {"G8": 1},
        "size retention": {}, "retention.bytes explains": {}, "retention.bytes does not explain": {"G8": 1}}
    assert arrow_scope.counted(dataclasses.replace(check, stage="vacuum"), check.state_after, 0) is None


def guarantees_module():
    from framework.checks import guarantees

    return guarantees


# --------------------------------------------------------------- validate
def test_validate_catches_a_record_removed_between_runs(spark, orders):
    warehouse, log = orders
    raw_delete(log, "offset = 6")
    outcome = Guarantees(spark, warehouse).validate(log, NOW, None, None)
    assert failed_codes(outcome) == {"G1"}
    assert "  offset 6, key 'a': removed between versions 2 and 3: between maintenance runs only appends are legal" \
        in outcome.details


def test_validate_catches_a_record_left_past_max_lag(spark, orders):
    """Nobody ran maintenance for 10 s: records 6 and 7 are now older than max lag."""
    warehouse, log = orders
    outcome = Guarantees(spark, warehouse).validate(log, 20_000, None, None)
    assert failed_codes(outcome) == {"G6"}
    assert any(line.startswith("  offset 6, key 'a': timestamp 9500 is older") for line in outcome.details)


def test_validate_many_finds_what_each_validate_finds_and_judges_once_a_topic(spark, base, orders, monkeypatch):
    from framework.log.topic import Topic

    warehouse, log = orders
    raw_delete(log, "offset = 6")
    # every topic has one partition here: orders-0 twice stands for a topic of two
    logs = [Topic(spark, warehouse, spec).partition(0) for spec in base.specs] + [log]
    guarantees = Guarantees(spark, warehouse)
    alone = [guarantees.validate(each, NOW, None, None) for each in logs]
    judged, real_run = [], type(guarantees.project).run
    monkeypatch.setattr(type(guarantees.project), "run",
                        lambda self, **given: judged.append(given["suite_name"]) or real_run(self, **given))
    together = guarantees.validate_many(logs, NOW)
    assert together == alone
    assert [failed_codes(outcome) for outcome in together] == [
        {"G1"} if each.name == log.name else set() for each in logs]
    # one guarantees validation a topic (a spec's own expectations run per partition, as before)
    assert sorted(name for name in judged if name.endswith(".guarantees")) == sorted(
        f"topiclake.{spec.topic}.guarantees" for spec in base.specs)


@pytest.fixture(scope="module")
def wide(spark, tmp_path_factory):
    """A compacted topic of seven small partitions, orders' records and expectation (values
    are decimal) in each, maintained once at NOW (history on): what ``validate`` counts in
    a batch."""
    from framework.clients.produce import produce
    from framework.clients.records import parse_records
    from framework.log.topic import Topic
    from framework.log.warehouse import Warehouse
    from framework.spec import parse_spec
    from framework.stages.maintenance import Maintenance

    root = tmp_path_factory.mktemp("wide")
    spec = parse_spec(yaml.safe_load(ORDERS_SPEC.replace("orders", "wide").replace("partitions: 1", "partitions: 7")),
                      source="wide")
    warehouse = Warehouse.resolve(str(root / "maintained"))
    topic = Topic(spark, warehouse, spec)
    topic.create()
    raw = [{"partition": p, "key": k, "value": v, "timestamp": t} for p in range(7) for k, v, t in ORDERS]
    produce(topic, parse_records(list(enumerate(raw, start=1)), spec, "test"), NOW)
    run = Maintenance(spark, warehouse, [spec]).run(NOW)  # (the tests validate it)
    assert not run.failed
    return spec, root / "maintained"


def _produce_into(spark, log, rows) -> None:
    """Produce ``rows`` (key, value, timestamp) into ``log``'s own partition."""
    from framework.clients.produce import produce
    from framework.clients.records import parse_records
    from framework.log.topic import Topic

    raw = [{"partition": log.partition, "key": k, "value": v, "timestamp": t} for k, v, t in rows]
    produce(Topic(spark, log.warehouse, log.spec), parse_records(list(enumerate(raw, start=1)), log.spec, "test"), NOW)


#: Corruptions between maintenance runs, as ``validate`` meets them (each partition of
#: ``wide``: offsets 2, 4 (c's tombstone), 5, 6, 7, 8 left, the checkpoint at 6).
VALIDATE_CORRUPTIONS = {
    "record removed": (lambda log: raw_delete(log, "offset = 6"), {"G1"}),
    "record changed": (lambda log: raw_update(log, "offset = 7", {"value": "'9'"}), {"G1"}),
    "record made older than max lag": (
        lambda log: raw_update(log, "offset = 6", {"timestamp": "timestamp_millis(100)"}), {"G1", "G6"}),
    "tombstone lost its delete horizon": (
        lambda log: raw_update(log, "offset = 4", {"_delete_horizon": "NULL"}), {"G1", "G7"}),
    "key again below the checkpoint": (lambda log: _append_original(log, 0), {"G1", "G3", "G4"}),
}


def test_a_batch_of_validations_finds_what_each_validate_alone_finds(spark, wide, tmp_path, monkeypatch):
    """``validate`` counts a topic's small partitions together (batched.count_validations):
    with each corruption on a partition of its own (1 to 5) beside two whose guarantees
    hold (0, and 6 with an append the spec's own expectation refuses), the corrupted ones
    are measured again on their own (each names what it broke), and the others' measures
    (counts, the numbers their metrics rows carry, the spec expectation's verdict) and
    verdicts are the ones they get alone. (Arrow's count, which takes the clean ones first
    on a local warehouse, is off: the batch is what counts them elsewhere.)"""
    from framework.checks import arrow_whole
    from framework.log.topic import Topic
    from framework.log.warehouse import Warehouse

    monkeypatch.setattr(arrow_whole, "validated", lambda check: None)
    spec, maintained = wide
    shutil.copytree(maintained, tmp_path / "warehouse")
    warehouse = Warehouse.resolve(str(tmp_path / "warehouse"))
    logs = Topic(spark, warehouse, spec).partitions()
    corruptions = sorted(VALIDATE_CORRUPTIONS)
    for partition, corruption in enumerate(corruptions, start=1):
        VALIDATE_CORRUPTIONS[corruption][0](logs[partition])
    # a legal append of a value the spec's own expectation refuses: no guarantee is broken
    _produce_into(spark, logs[6], [("e", "x", 9700)])
    guarantees = Guarantees(spark, warehouse)
    judged, real_judge = [], Guarantees.judge
    monkeypatch.setattr(Guarantees, "judge", lambda self, measured: (judged.append(list(measured)),
                                                                   real_judge(self, measured))[1])
    # the healthy ones alone (a corrupted one is measured alone in the batch's run too)
    alone = {partition: guarantees.validate(logs[partition], NOW) for partition in (0, 6)}
    measured_alone, real_measure = [], Guarantees._measured_validation
    monkeypatch.setattr(Guarantees, "_measured_validation", lambda self, check: (
        measured_alone.append(check.log.partition), real_measure(self, check))[1])
    together = guarantees.validate_many(logs, NOW)
    assert measured_alone == [1, 2, 3, 4, 5]
    assert {partition: together[partition] for partition in alone} == alone
    assert [judged[-1][partition] for partition in alone] == [measured for one in judged[:-1] for measured in one]
    assert [outcome.passed for outcome in together] == [True, False, False, False, False, False, False]
    assert together[6].failed_guarantees == ("spec expectation expect_column_values_to_match_regex",)
    assert {corruption: failed_codes(together[partition])
            for partition, corruption in enumerate(corruptions, start=1)} == {
        corruption: codes for corruption, (_, codes) in VALIDATE_CORRUPTIONS.items()}


def test_a_batch_of_validations_judges_max_lag_below_each_partitions_own_u(spark, wide, monkeypatch):
    """Ten seconds on, with no maintenance run, each partition's records 6 and 7 are older
    than max lag and lie below U, which validate reads from the data: the batch finds no
    partition clean (the G6 it counts is the one each partition alone fails on). (Arrow's
    count, which takes the clean ones first on a local warehouse, is off.)"""
    from framework.checks import arrow_whole
    from framework.log.topic import Topic
    from framework.log.warehouse import Warehouse

    monkeypatch.setattr(arrow_whole, "validated", lambda check: None)
    spec, maintained = wide
    spec = spec.model_copy(update={"expectations": ()})  # the guarantees only, here
    logs = Topic(spark, Warehouse.resolve(str(maintained)), spec).partitions()[:3]  # a batch's fewest
    guarantees = Guarantees(spark, logs[0].warehouse)
    measured_alone, real_measure = [], Guarantees._measured_validation
    monkeypatch.setattr(Guarantees, "_measured_validation", lambda self, check: (
        measured_alone.append(check.log.partition), real_measure(self, check))[1])
    outcomes = guarantees.validate_many(logs, 20_000)
    assert measured_alone == [0, 1, 2]
    assert [failed_codes(outcome) for outcome in outcomes] == [{"G6"}] * 3
    # and at NOW the batch finds all three clean
    measured_alone.clear()
    assert [outcome.passed for outcome in guarantees.validate_many(logs, NOW)] == [True] * 3
    assert measured_alone == []


def test_arrow_counts_a_validation_as_spark_does(spark, base, wide, tmp_path):
    """``validate``'s rules and bounds by Arrow (``arrow_whole.validated``, both whole versions
    read from their files) pinned to Spark's pairing of a small partition's versions: wide's
    partitions after changes between runs (three of ``VALIDATE_CORRUPTIONS``, a survivor's
    headers, an offset duplicated, a record removed by a deletion vector), since the last
    run, and healthy also ten seconds on (max lag) and from version 0 (where more than
    appends is legal); prices and versions (the other strategies) healthy, now and ten
    seconds on, and with every strategy corruption at once. On each, the same violations per
    guarantee, and the same bounds and scope (the check's metrics row); Delta reads each
    compared version, as ``travels_here`` says."""
    from framework.checks import arrow_whole, validation_plan
    from framework.checks.guarantees import _context
    from framework.log.history import MaintenanceHistory
    from framework.log.topic import Topic

    def cases(warehouse, spec, changes):
        logs = Topic(spark, warehouse, spec.model_copy(update={"expectations": ()})).partitions()
        last = MaintenanceHistory(spark, warehouse).last_runs(spec.topic)
        for log, (what, change) in zip(logs, changes, strict=True):
            if change is not None:
                change(log)
            # (each Spark count costs about 0.6 s: the other clocks only where nothing changed)
            clocks = [(NOW, None), (20_000, None), (NOW, 0)] if what == "healthy" else [(NOW, None)]
            for now, start in clocks[:3 if spec.topic == "wide" else 2]:
                yield (f"{spec.topic}-{log.partition} {what}, at {now}, from {start}", warehouse,
                       validation_plan.planned(log, now, start, None, last[log.partition]["version_after"]))

    def deleted_by_a_vector(log):
        spark.sql(f"ALTER TABLE {delta_table_sql(log.path)} SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
        raw_delete(log, "offset = 7")

    spec, maintained = wide
    wide_changes = [("healthy", None), *((what, VALIDATE_CORRUPTIONS[what][0]) for what in (
        "key again below the checkpoint", "record made older than max lag", "tombstone lost its delete horizon")),
        *((what, IN_PLACE[what][0]) for what in ("survivor's headers updated", "offset duplicated")),
        ("removed by a deletion vector", deleted_by_a_vector)]
    checked = list(cases(base.copy(maintained, tmp_path / "wide"), spec, wide_changes))
    for topic in ("prices", "versions"):
        for corrupted in (False, True):
            warehouse = base.copy(base.maintained, tmp_path / f"{topic}-{corrupted}")
            checked += cases(warehouse, base.spec(topic), [
                ("corrupted", lambda log: corrupt_all(log, STRATEGY_CORRUPTIONS)) if corrupted else ("healthy", None)])
    verdicts = {}
    for what, warehouse, check in checked:
        found = arrow_whole.validated(check)
        assert found is not None, what
        counts, bounds, scope = found
        by_spark = Guarantees(spark, warehouse)._measured_validation(check)
        assert counts == by_spark.counts, what
        assert {"partition": check.log.partition, **_context("validate", scope, bounds, check.now_ms)} \
            == by_spark.context, what
        for version in {check.version_before, check.version_after}:
            latest = check.log.commits(1)[0].version
            assert validation_plan.travels_here(check.log, version, latest), what
            check.log.read(version)  # Delta reads it too
        verdicts[what] = sorted(counts)
    # healthy now, every change since the last run caught (the vector's removal by G1)
    assert all(not codes for what, codes in verdicts.items() if "healthy, at 10000" in what), verdicts
    assert all(codes for what, codes in verdicts.items() if "healthy" not in what and "from None" in what), verdicts
    assert verdicts["wide-6 removed by a deletion vector, at 10000, from None"] == ["G1"]


def test_validate_compares_with_nothing_once_the_last_runs_version_left_the_time_travel_window(
        spark, wide, tmp_path, monkeypatch):
    """A partition whose last run's version Delta no longer reads (its window shrank to
    nothing, and an append came after the run) is judged on the current version's
    invariants alone, with a note saying so, in a batch with others; asked for that
    version by name, validate refuses it as bad input."""
    from framework.errors import TimeTravelError
    from framework.log.topic import Topic
    from framework.log.warehouse import Warehouse

    spec, maintained = wide
    shutil.copytree(maintained, tmp_path / "warehouse")
    logs = Topic(spark, Warehouse.resolve(str(tmp_path / "warehouse")), spec).partitions()[:3]
    _produce_into(spark, logs[1], [("e", "1", 9700)])
    spark.sql(f"ALTER TABLE {delta_table_sql(logs[1].path)} "
              "SET TBLPROPERTIES ('delta.deletedFileRetentionDuration' = 'interval 0 hours')")
    guarantees = Guarantees(spark, logs[0].warehouse)
    measured_alone, real_measure = [], Guarantees._measured_validation
    monkeypatch.setattr(Guarantees, "_measured_validation", lambda self, check: (
        measured_alone.append(check.log.partition), real_measure(self, check))[1])
    outcomes = guarantees.validate_many(logs, NOW)
    assert measured_alone == []
    assert [outcome.passed for outcome in outcomes] == [True] * 3, outcomes
    assert [any(line.startswith("note: compared with nothing: ") for line in outcome.details)
            for outcome in outcomes] == [False, True, False]
    with pytest.raises(TimeTravelError):
        guarantees.validate(logs[1], NOW, from_version=2)
    # Where no session runs, that refusal is told without one, in the words Delta refuses it
    # in; not where the session it would start may have a Delta setting of its own (its
    # refusal may be turned off there): then Delta is asked
    from framework import deferred_session
    from framework.checks import validation_plan
    from framework.log.history import MaintenanceHistory

    last = MaintenanceHistory(spark, logs[1].warehouse).last_runs(spec.topic)[1]["version_after"]
    latest = logs[1].commits(1)[0].version
    with pytest.raises(TimeTravelError) as by_delta:
        validation_plan._delta_reads(logs[1], last, latest)  # (this process's session is up: Delta refuses)
    monkeypatch.setattr(deferred_session, "not_started", lambda spark: True)
    for name in ("PYSPARK_GATEWAY_PORT", "PYSPARK_SUBMIT_ARGS"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "conf").mkdir()
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path / "conf"))
    assert validation_plan.refused_here(logs[1], latest, latest) is None  # the latest version is always read
    refusal = validation_plan.refused_here(logs[1], last, latest)
    assert refusal is not None and str(by_delta.value).endswith(refusal), (refusal, by_delta.value)
    with pytest.raises(TimeTravelError) as told_here:
        validation_plan._delta_reads(logs[1], last, latest)
    assert str(told_here.value) == str(by_delta.value)
    (tmp_path / "conf" / "spark-defaults.conf").write_text(
        "spark.databricks.delta.vacuum.enforceTimeTravelWithinDeletedFileRetentionDuration false\n")
    assert validation_plan.refused_here(logs[1], last, latest) is None


def test_a_failing_spec_expectation_fails_validation(spark, base, orders):
    warehouse, log = orders
    _produce(spark, warehouse, base.spec("orders"), [("e", "x", 9700)], NOW)  # a legal append, a bad value
    outcome = Guarantees(spark, warehouse).validate(log, NOW, None, None)
    assert outcome.failed_guarantees == ("spec expectation expect_column_values_to_match_regex",)
    assert "1 unexpected value(s), e.g. ['x']" in outcome.details[0]


# ------------------------------------------------------------------ the CLI
def cli(base, warehouse, *args) -> int:
    from framework.cli.main import main

    return main(["--warehouse", warehouse.root, "--specs", str(base.specs_dir), *args])


def test_validate_through_the_cli(spark, base, orders, capsys):
    warehouse, log = orders
    assert cli(base, warehouse, "validate", "--topic", "orders", "--now", str(NOW)) == 0
    assert capsys.readouterr().out.strip() == "orders-0: passed"
    raw_delete(log, "offset = 6")
    _produce(spark, warehouse, base.spec("orders"), [("e", "x", 9700)], NOW)
    assert cli(base, warehouse, "validate", "--topic", "orders", "--now", str(NOW)) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"orders-0: FAILED {name('G1')}, spec expectation expect_column_values_to_match_regex\n")
    assert "    offset 6, key 'a': removed between versions 2 and 4" in out  # the delete, then an append
    assert "spec expectation expect_column_values_to_match_regex {'column': 'value', 'regex': '^[0-9]+$'}" in out


def _buggy(monkeypatch, module, attribute: str, corrupt):
    """Make a stage commit a corruption after its real work, as a buggy engine would."""
    real = getattr(module, attribute)

    def stage(log, *args, **kwargs):
        result = real(log, *args, **kwargs)
        return dataclasses.replace(result, version_after=corrupt(log))

    monkeypatch.setattr(module, attribute, stage)


@pytest.mark.slow
@pytest.mark.parametrize("args, target, corrupt, code", [
    (["compact", "--topic", "orders"], "framework.stages.compaction.execute", lambda log: raw_delete(log, "offset = 6"), "G2"),
    (["retain", "--topic", "events"], "framework.stages.retention.execute", lambda log: raw_delete(log, "offset = 4"), "G8"),
])
def test_a_stage_failure_exits_1_naming_the_guarantee(spark, base, tmp_path, monkeypatch, capsys,
                                                      args, target, corrupt, code):
    import importlib

    module_name, attribute = target.rsplit(".", 1)
    _buggy(monkeypatch, importlib.import_module(module_name), attribute, corrupt)
    warehouse = base.copy(base.produced, tmp_path / "warehouse")
    topic = args[2]
    assert cli(base, warehouse, *args, "--now", str(NOW)) == 1
    captured = capsys.readouterr()
    assert f"{topic}-0: FAILED ({name(code)})" in captured.out
    assert f"{name(code)}: 1 violation(s)" in captured.err


@pytest.mark.slow
def test_a_vacuum_that_breaks_time_travel_exits_1_naming_g9(spark, base, orders, monkeypatch, capsys):
    import framework.stages.maintenance

    warehouse, log = orders
    real = framework.stages.maintenance.vacuum

    def careless_vacuum(log, *args, **kwargs):
        result = real(log, *args, **kwargs)
        # a purge rewrites the files the compaction marked; then delete what only version 1 needs
        spark.sql(f"REORG TABLE {delta_table_sql(log.path)} APPLY (PURGE)").collect()
        gone = set(log.read(1).inputFiles()) - set(log.read(latest(log)).inputFiles())
        assert gone, "the purge rewrote no data file"
        for path in gone:
            os.remove(path[len("file:"):] if path.startswith("file:") else path)
        spark.sql(f"ALTER TABLE {delta_table_sql(log.path)} SET TBLPROPERTIES ('test.touched' = 'yes')")
        return dataclasses.replace(result, version_before=2, version_after=latest(log), oldest_readable_version=1)

    monkeypatch.setattr(framework.stages.maintenance, "vacuum", careless_vacuum)
    assert cli(base, warehouse, "vacuum", "--topic", "orders", "--now", str(NOW)) == 1
    captured = capsys.readouterr()
    assert f"orders-0: FAILED ({name('G9')})" in captured.out
    assert "version 1 (the oldest version inside the time-travel window) cannot be read" in captured.err


# ------------------------------------------- changes in place, through the CLI
#: Changes that keep every offset and every key where it was. During a compaction
#: (``compact``: a buggy engine's doing, landing between the run's before and after
#: versions) and between runs (``validate``: only appends are legal there).
IN_PLACE = {
    # a's survivor below U; a's final value is 8's, so only the record's own content shows it
    "survivor's value updated": (lambda log: raw_update(log, "offset = 2", {"value": "'9'"}),
                                 {"G1"}, {"G1"}),
    # headers do not rank under the offset strategy: only the record's content shows it
    "survivor's headers updated": (
        lambda log: raw_update(log, "offset = 2", {"headers": "array(named_struct('key', 'version', 'value', X'39'))"}),
        {"G1"}, {"G1"}),
    # an identical second copy of a head record: same content, same key, same final state
    "offset duplicated": (lambda log: _append_original(log, 7), {"G1"}, {"G1"}),
    # a head record (superseded by 8 in the final state) changed rather than removed
    "head record modified": (lambda log: raw_update(log, "offset = 6", {"value": "'9'"}),
                             {"G1", "G2"}, {"G1"}),
}


def _failed_names(out: str, prefix: str, closing: str = "") -> set[str]:
    line = next((line for line in out.splitlines() if line.startswith(prefix)), None)
    assert line is not None, out
    names = line[len(prefix):]
    if closing:
        assert names.endswith(closing), line
        names = names[:-len(closing)]
    return set(names.split(", "))


@pytest.mark.parametrize("change", sorted(IN_PLACE))
def test_a_compaction_that_changes_records_in_place_exits_1_naming_the_guarantee(spark, base, tmp_path, capsys,
                                                                                  change):
    """A buggy engine: the change lands just before compaction commits (the engine's fault
    point), so the stage check sees it between the run's before and after versions."""
    from framework import faults

    corrupt, expected, _ = IN_PLACE[change]
    done = []

    def buggy(point, context):
        if not done:  # once: a retry must not start from the corrupted version
            done.append(corrupt(context["log"]))

    warehouse = base.copy(base.produced, tmp_path / "warehouse")
    with faults.installed("compact.before_commit", buggy):
        code = cli(base, warehouse, "compact", "--topic", "orders", "--now", str(NOW))
    captured = capsys.readouterr()
    assert done, "the fault point was never reached"
    assert code == 1, captured.out + captured.err
    assert _failed_names(captured.out, "orders-0: FAILED (", ")") == {name(c) for c in expected}
    for code_ in expected:
        line = rf"{re.escape(name(code_))}: 1 violation\(s\) in orders-0, versions \d+ -> \d+\n"
        assert re.search(line, captured.err), captured.err


# (a duplicated offset and a changed head record fall to the same rules as at the compact stage)
@pytest.mark.parametrize("change", ["survivor's value updated", "survivor's headers updated"])
def test_validate_exits_1_for_a_record_changed_in_place_between_runs(spark, base, orders, capsys, change):
    warehouse, log = orders
    corrupt, _, expected = IN_PLACE[change]
    version = corrupt(log)
    assert cli(base, warehouse, "validate", "--topic", "orders", "--now", str(NOW)) == 1
    out = capsys.readouterr().out
    assert _failed_names(out, "orders-0: FAILED ") == {name(c) for c in expected}
    assert f"  {name('G1')}: 1 violation(s) in orders-0, versions 2 -> {version}" in out


def test_checks_judged_together_fail_only_the_check_whose_guarantee_broke(tmp_path, monkeypatch):
    """Great Expectations judges the checks of a batch in one validation a topic, one
    metrics row a check; each verdict is its own row's: a violation in one check fails
    that check only, on that guarantee, explained by its own violations."""
    from framework.checks import gx_suites
    from framework.log.warehouse import Warehouse
    from framework.stages.stage_check import MeasuredCheck

    validations = []
    shipped_run = gx_suites.Project.run

    def run_counted(self, *args, frame, **kwargs):
        validations.append(sorted(set(frame["table"])))
        return shipped_run(self, *args, frame=frame, **kwargs)

    monkeypatch.setattr(gx_suites.Project, "run", run_counted)

    def measured(topic: str, partition: int, stage: str, counts: dict, samples: dict | None = None) -> MeasuredCheck:
        table = f"{topic}-{partition}"
        return MeasuredCheck(topic=topic, table=table, stage=stage, version_before=1, version_after=2,
                             checked=tuple(STAGE_GUARANTEES[stage]), counts=counts, samples=samples or {},
                             context={"table": table, "stage": stage})

    broken = {"offset": 7, "key": "k", "detail": "a second record of key 'k' below the checkpoint"}
    batch = [measured("orders", 0, "compact", {}), measured("orders", 1, "compact", {"G3": 2}, {"G3": [broken]}),
             measured("events", 0, "retain", {}),
             # a count of a guarantee its stage is not judged on is not judged (vacuum: G9 only)
             measured("orders", 2, "vacuum", {"G3": 5})]
    outcomes = Guarantees(None, Warehouse.resolve(str(tmp_path / "warehouse"))).judge(batch)
    assert validations == [["orders-0", "orders-1", "orders-2"], ["events-0"]]
    assert [outcome.passed for outcome in outcomes] == [True, False, True, True]
    assert outcomes[1].failed_guarantees == (name("G3"),)
    assert outcomes[1].details == (f"{name('G3')}: 2 violation(s) in orders-1, versions 1 -> 2",
                                   "  offset 7, key 'k': a second record of key 'k' below the checkpoint")
