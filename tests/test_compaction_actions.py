"""A compaction decided by Arrow is the compaction Spark decides.

``framework.stages.arrow_actions`` reads a local version's files and decides each record's
fate in the driver; ``compaction.compaction_actions`` decides in Spark SQL. For each
KIP-280 strategy, through a partition's life (superseded records, tombstones kept for the
first time, waiting and expired, header versions that parse and ones that do not, records
too young to compact), both deciders must give the same actions (offset, size, file,
action, reason, horizon) and the same totals at every run, and twin partitions compacted
one way and the other must hold the same records.
"""

from __future__ import annotations

import pytest

from framework.clients.produce import produce
from framework.clients.records import parse_records
from framework.log.topic import Topic
from framework.log.warehouse import Warehouse
from framework.spec import parse_spec
from framework.stages import arrow_actions, compaction
from tests.support.strategies import STRATEGIES

NOW = 1_767_225_600_000
DAY_MS = 86_400_000


def _topic(spark, root, name: str, strategy: str) -> Topic:
    config = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": 0.0, "delete.retention.ms": DAY_MS,
              "min.compaction.lag.ms": 60_000, **STRATEGIES[strategy]}
    return Topic(spark, Warehouse.resolve(str(root)), parse_spec({"topic": name, "partitions": 1, "config": config},
                                                                 f"{name}.yaml"))


def _produce(topic: Topic, first: int, count: int, now: int, keys: int = 7) -> None:
    """Records over ``keys`` keys: every fifth a tombstone, timestamps out of offset order,
    and header versions as decimal text, as text that does not parse, or missing; the last
    three too young to compact at ``now``, of keys k0 to k2."""
    raw = []
    for i in range(first, first + count):
        headers = {"v": str((i * 7) % 11)} if i % 3 else ({"v": "not a number"} if i % 2 else {})
        young = i >= first + count - 3  # (of the keys every batch writes, k0 to k2)
        raw.append((i, {"key": f"k{i % 3 if young else (i * 5) % keys}", "value": None if i % 5 == 0 else f"v{i}",
                        "timestamp": now - (1_000 if young else DAY_MS + (i * 37) % 1_000), "headers": headers}))
    produce(topic, parse_records(raw, topic.spec, "test"), now)


def _rows(log) -> list[tuple]:
    return sorted(tuple(row) for row in log.read().collect())


def _marked(changes) -> list[tuple]:
    """(offset, action, new horizon in epoch ms) of each change, in offset order."""
    import pyarrow as pa

    horizons = changes["_horizon"].cast(pa.timestamp("ms", "UTC")).cast(pa.int64())
    return sorted(zip(changes["offset"].to_pylist(), changes["_action"].to_pylist(), horizons.to_pylist(),
                      strict=True))


def _decided_both_ways(log, now: int) -> set[str]:
    """The plan's actions by Arrow and by Spark, required equal; the reasons they give."""
    planned = compaction.plan(log, now, force=True)
    measured = planned.measure
    end = measured.first_uncleanable_offset
    by_spark = compaction.version_actions(log, planned.snapshot, end, now, measured.checkpoint,
                                          measured.log_start_offset, carried=("_file",))
    by_arrow = arrow_actions.decide(log, planned, end)
    assert by_arrow is not None, "a local plain version is decided by Arrow"
    assert sorted(tuple(r) for r in by_arrow.actions().collect()) == sorted(tuple(r) for r in by_spark.collect())
    # the changes Arrow's rewrite marks by are those Spark's frame gives it
    assert _marked(by_arrow.changes) == _marked(by_spark.where(compaction.CHANGED).toArrow())
    totals = by_spark.selectExpr(*compaction.TOTALS).collect()[0].asDict()
    assert by_arrow.totals == {**totals, "touched_files": sorted(totals["touched_files"])}
    # what ``plan`` reports a run would do, by reason
    reasons: dict[str, dict[str, int]] = {}
    for row in by_spark.collect():
        counted = reasons.setdefault(row["_reason"], {"records": 0, "bytes": 0})
        counted["records"] += 1
        counted["bytes"] += row["_size"] or 0
    assert arrow_actions.by_reason(arrow_actions.decided(log, planned, end)) == reasons
    return set(reasons)


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_arrow_decides_what_spark_decides_through_a_partitions_life(spark, tmp_path, monkeypatch, strategy):
    by_arrow, by_spark = (_topic(spark, tmp_path, f"{side}-{strategy}", strategy) for side in ("arrow", "spark"))
    reasons: set[str] = set()
    # each run after the last one's young records came of age; the later ones touch three of
    # the seven keys, so the others' tombstones wait; the last run is at the very horizon of
    # the first run's tombstones (now + delete.retention.ms: they expire), not yet the second's
    steps = [(0, 40, NOW, 7), (40, 30, NOW + 120_000, 3), (70, 20, NOW + DAY_MS, 3)]
    for first, count, now, keys in steps:
        for topic in (by_arrow, by_spark):
            _produce(topic, first, count, now, keys)
        reasons |= _decided_both_ways(by_arrow.partition(0), now)
        done = compaction.execute(by_arrow.partition(0), compaction.plan(by_arrow.partition(0), now, force=True))
        with monkeypatch.context() as patch:
            patch.setattr(arrow_actions, "decide", lambda *args: None)
            twin = compaction.execute(by_spark.partition(0), compaction.plan(by_spark.partition(0), now, force=True))
        assert done.committed and twin.committed
        assert (done.removed_records, done.stamped_tombstones) == (twin.removed_records, twin.stamped_tombstones)
        assert _rows(by_arrow.partition(0)) == _rows(by_spark.partition(0))
    # the life reached every fate (records too young stay out of every run: U is below the log end)
    assert reasons == {"superseded", "tombstone_kept", "tombstone_waiting", "tombstone_expired"}, reasons
    assert done.cleaned_up_to < by_arrow.partition(0).snapshot().state.log_end_offset


def test_spark_decides_a_dirty_section_over_the_bound(spark, tmp_path, monkeypatch):
    topic = _topic(spark, tmp_path, "bound", "offset")
    _produce(topic, 0, 20, NOW)
    log = topic.partition(0)
    planned = compaction.plan(log, NOW, force=True)
    end = planned.measure.first_uncleanable_offset
    assert arrow_actions.decide(log, planned, end) is not None
    monkeypatch.setattr(arrow_actions, "MAX_DIRTY", planned.measure.dirty_records - 1)
    assert arrow_actions.decide(log, planned, end) is None
