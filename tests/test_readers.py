"""Any Delta reader reads the partition tables exactly (CONTRACT section 11).

After each maintenance stage the table read with delta-rs (``deltalake``: its
``to_pyarrow_table`` and its query engine), with Polars' ``scan_delta`` and with DuckDB's
``delta_scan`` must hold exactly the records ``topiclake read`` prints, and delta-rs's and
Polars' time travel by version must match ``read --version``. topiclake's tables have
protocol 1/2 and no table features. A table whose owner turned deletion vectors on is read
exactly by DuckDB, Polars 2.1 and delta-rs 1.6.6's query engine (``QueryBuilder``), and
refused (not misread) by delta-rs's ``to_pyarrow_table``, which is why topiclake never
turns them on itself. The readers are test dependencies only.
"""

from __future__ import annotations

import deltalake
import pytest

from framework.clients.produce import produce
from framework.clients.records import parse_records
from framework.log.commit_log import read_commits
from framework.log.topic import Topic
from framework.log.warehouse import delta_table_sql
from framework.spec import parse_spec
from framework.stages.maintenance import Maintenance
from tests.support.delta_readers import delta_rs_query, duckdb_connection

pytestmark = pytest.mark.slow


def engine_rows(log, version=None):
    return sorted((r["offset"], r["key"], r["value"]) for r in log.records(version).collect())


def delta_rs_rows(path, version=None):
    table = deltalake.DeltaTable(path, version=version) if version is not None else deltalake.DeltaTable(path)
    data = table.to_pyarrow_table(columns=["offset", "key", "value"]).to_pylist()
    return sorted((r["offset"], r["key"], r["value"]) for r in data)


def delta_rs_query_rows(path):
    """The table through delta-rs's own query engine, which applies deletion vectors."""
    return sorted((r["offset"], r["key"], r["value"]) for r in delta_rs_query(path, '"offset", key, value'))


def polars_rows(path, version=None):
    """The table through Polars' own Delta scan (``scan_delta``)."""
    import polars

    frame = polars.scan_delta(path, version=version).select("offset", "key", "value").collect()
    return sorted(frame.iter_rows())


def duckdb_rows(connection, path):
    query = f"SELECT \"offset\", key, value FROM delta_scan('{path}')"
    return sorted(tuple(row) for row in connection.execute(query).fetchall())


@pytest.mark.parametrize("deletion_vectors", [False, True], ids=["default", "deletion-vectors"])
def test_delta_rs_and_duckdb_read_what_topiclake_reads(spark, warehouse, deletion_vectors):
    spec = parse_spec({"topic": f"readers-{int(deletion_vectors)}", "partitions": 1, "config": {
        "cleanup.policy": "compact,delete", "min.cleanable.dirty.ratio": 0.0, "delete.retention.ms": 1000,
        "retention.ms": 50_000}}, "test")
    topic = Topic(spark, warehouse, spec)
    topic.create()
    log = topic.partition(0)
    if deletion_vectors:  # the table's owner opts in; topiclake leaves the setting alone
        spark.sql(f"ALTER TABLE {delta_table_sql(log.path)} SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    connection = duckdb_connection()
    maintenance = Maintenance(spark, warehouse, [spec], record_history=False)
    checked_versions = []
    for cycle in range(4):
        now = cycle * 20_000
        raw = [(i, {"key": f"k{i % 5}", "value": None if i == 3 else f"{cycle}-{i}", "timestamp": now + i,
                    "headers": [["h", str(i)]]}) for i in range(8)]
        produce(topic, parse_records(raw, spec, "test"), now)
        # keys written once: compaction leaves their file alone, so bin-packing has work too
        once = [(i, {"key": f"once-{cycle}.{i}", "value": "x", "timestamp": now + 9}) for i in range(2)]
        produce(topic, parse_records(once, spec, "test"), now)
        assert not maintenance.run(now + 10_000, force=True).failed
        version = log.snapshot().version
        expected = engine_rows(log)
        assert duckdb_rows(connection, log.path) == expected, f"DuckDB differs after cycle {cycle}"
        if deletion_vectors:
            with pytest.raises(Exception, match="deletionVectors"):
                delta_rs_rows(log.path)  # refused, never misread
        else:
            assert delta_rs_rows(log.path) == expected, f"delta-rs differs after cycle {cycle}"
        assert delta_rs_query_rows(log.path) == expected, f"delta-rs's QueryBuilder differs after cycle {cycle}"
        assert polars_rows(log.path) == expected, f"Polars differs after cycle {cycle}"
        checked_versions.append((version, expected))
    operations = {commit.operation for commit in read_commits(spark, log.path)}
    assert {"MERGE", "DELETE", "OPTIMIZE"} <= operations, operations  # every kind of maintenance commit
    if not deletion_vectors:
        for version, expected in checked_versions:  # time travel inside the window
            assert delta_rs_rows(log.path, version) == expected == engine_rows(log, version)
            assert polars_rows(log.path, version) == expected
        # Reader version 1, no reader features: any Delta reader. The writer features are
        # Delta's two legacy ones and the change data feed the guarantee checks read.
        protocol = deltalake.DeltaTable(log.path).protocol()
        assert (protocol.min_reader_version, protocol.reader_features) == (1, None)
        assert set(protocol.writer_features or ()) <= {"invariants", "appendOnly", "changeDataFeed"}, protocol
