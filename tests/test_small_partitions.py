"""Small partitions run their queries with interpreted expressions, one shuffle partition
and no adaptive plan (framework/log/small_partitions.py).

The suite's own session runs that way throughout (tests/conftest.py), so these tests give
the session the embedded session's defaults (code generation on, adaptive, four shuffle
partitions) for their duration: a maintain must then switch a small partition to the small
settings for its stages and checks (and a small produce and delete-records theirs), give
the session its settings back, leave a large partition to the session's settings, and
leave the same tables either way.
"""

from __future__ import annotations

import pytest

from framework.clients.produce import produce
from framework.clients.records import parse_records
from framework.log import small_partitions
from framework.log.delta_commits import session_confs
from framework.log.topic import Topic
from framework.log.warehouse import Warehouse
from framework.spec import parse_spec
from framework.stages.maintenance import Maintenance
from framework.stages.stage_check import ValidationOutcome

#: The embedded session's defaults: generated code (interpreted expressions only when it
#: fails), adaptive query execution, four shuffle partitions (framework/session.py)
COMPILED = {"spark.sql.codegen.wholeStage": "true", "spark.sql.codegen.factoryMode": "FALLBACK",
            "spark.sql.adaptive.enabled": "true", "spark.sql.shuffle.partitions": "4"}
SMALL = tuple(small_partitions.SMALL_PARTITION_SETTINGS[key] for key in COMPILED)
NOW = 1_767_225_600_000


def _topic(spark, warehouse: Warehouse, name: str) -> Topic:
    spec = parse_spec({"topic": name, "partitions": 2, "config": {
        "cleanup.policy": "compact,delete", "min.cleanable.dirty.ratio": 0.0, "retention.ms": 3_600_000,
        "delete.retention.ms": 1000}}, source="test")
    topic = Topic(spark, warehouse, spec)
    # keys repeat (compaction removes), some values are tombstones (stamped), the oldest
    # records are older than retention.ms, every record has a header
    lines = [(i, {"key": f"k{i % 7}", "value": None if i % 5 == 4 else f"v{i}",
                  "timestamp": NOW - 7_200_000 + i * 60_000, "headers": {"n": str(i)}}) for i in range(90)]
    produce(topic, parse_records(lines, spec, "test"), NOW)
    return topic


def _settings(spark) -> tuple[str, ...]:
    return tuple(spark.conf.get(key) for key in COMPILED)


def _seen_settings(spark, seen: list):
    """A validator that writes down the settings its check's queries run with."""
    class Validator:
        def measure(self, check) -> str:
            seen.append((check.stage, _settings(check.log.spark)))
            return check.stage

        def judge(self, measured) -> list[ValidationOutcome]:
            return [ValidationOutcome(True)] * len(measured)

        def batchable(self, check, peers) -> bool:
            return False  # measured at once, inside the partition's settings

        def measure_many(self, checks) -> list[str]:
            return [self.measure(check) for check in checks]
    return Validator()


def _tables(spark, topic: Topic) -> list[list[tuple]]:
    return [[tuple(row) for row in spark.read.format("delta").load(log.path).orderBy("offset").collect()]
            for log in topic.partitions()]


def test_a_small_partition_runs_with_the_small_settings_and_the_session_gets_its_settings_back(spark, tmp_path):
    warehouse = Warehouse.resolve(str(tmp_path / "warehouse"))
    topic = _topic(spark, warehouse, "small")
    seen: list = []
    with session_confs(spark, COMPILED):
        run = Maintenance(spark, warehouse, [topic.spec], validator=_seen_settings(spark, seen),
                          record_history=False).run(NOW, stages=("compact",))
        assert _settings(spark) == tuple(COMPILED.values())
    assert not run.failed
    assert seen == [("compact", SMALL)] * 2  # both partitions' checks


def test_a_large_partition_keeps_the_sessions_settings(spark, tmp_path, monkeypatch):
    warehouse = Warehouse.resolve(str(tmp_path / "warehouse"))
    topic = _topic(spark, warehouse, "large")
    monkeypatch.setattr(small_partitions, "SMALL_PARTITION_RECORDS", 10)  # each partition holds more
    seen: list = []
    # the stages themselves are not run: what matters is the settings they would run with
    monkeypatch.setattr(Maintenance, "_maintain_partition", lambda self, log, *rest: seen.append(
        (log.name, _settings(log.spark))))
    with session_confs(spark, COMPILED):
        Maintenance(spark, warehouse, [topic.spec], record_history=False).run(NOW)
    assert seen == [("large-0", tuple(COMPILED.values())), ("large-1", tuple(COMPILED.values()))]


def test_a_small_produce_and_delete_records_run_with_the_small_settings(spark, tmp_path, monkeypatch):
    from framework.clients import produce as producing
    from framework.stages import retention

    seen: list = []

    def settings(what):
        seen.append((what, _settings(spark)))

    real_append_all = producing._append_all
    monkeypatch.setattr(producing, "_append_all", lambda topic, batches: (settings("produce"),
                                                                          real_append_all(topic, batches))[1])
    # the cut itself is not made: what matters is the settings it would run with
    monkeypatch.setattr(retention, "_cut", lambda log, snap, *rest, **options: (settings("delete_records"),
                                                                               (None, snap.state, 0, 0))[1])
    with session_confs(spark, COMPILED):
        topic = _topic(spark, Warehouse.resolve(str(tmp_path / "warehouse")), "cut")
        retention.delete_records(topic.partition(0), 3)
        assert _settings(spark) == tuple(COMPILED.values())
    assert seen == [("produce", SMALL), ("delete_records", SMALL)]


def test_two_blocks_on_one_session_leave_it_its_own_settings(spark):
    """A produce call that starts while another on the same session is inside its block, and
    ends after it: the session must end with its own settings, not the small ones."""
    with session_confs(spark, COMPILED):
        first = small_partitions.small_partition_settings(spark, 10)
        first.__enter__()
        second = small_partitions.small_partition_settings(spark, 10)
        second.__enter__()
        first.__exit__(None, None, None)
        second.__exit__(None, None, None)
        assert _settings(spark) == tuple(COMPILED.values())


@pytest.mark.slow
def test_small_and_session_settings_leave_the_same_tables(spark, tmp_path, monkeypatch):
    """Twins: the same records, maintained with the small settings (as a small partition is)
    and with the session's (as a large one is); every column of every partition must be equal."""
    warehouse = Warehouse.resolve(str(tmp_path / "warehouse"))
    interpreted, compiled = _topic(spark, warehouse, "interpreted"), _topic(spark, warehouse, "compiled")
    with session_confs(spark, COMPILED):
        Maintenance(spark, warehouse, [interpreted.spec], record_history=False).run(NOW)
        with monkeypatch.context() as patch:
            patch.setattr(small_partitions, "SMALL_PARTITION_RECORDS", 0)
            Maintenance(spark, warehouse, [compiled.spec], record_history=False).run(NOW)
    left, right = _tables(spark, interpreted), _tables(spark, compiled)
    assert all(left), "the twins must keep records for the comparison to mean something"
    assert len(sum(left, [])) < 90, "maintenance must have removed records"
    assert left == right
