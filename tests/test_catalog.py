"""Catalog tables (a spec's ``table:``) in Spark's own Hive metastore (embedded Derby, Hive
support on), across two sessions: the first creates, produces, ingests from a real Kafka
broker, maintains (compaction, vacuum, the guarantees) and writes the report; the second,
a new JVM on the same metastore, finds every table by name and reads it, time travel
included. A second warehouse that would reuse the names, and a topic name the Hive
metastore cannot take, are refused before anything is written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow

ORDERS = """\
topic: orders
partitions: 2
config:
  cleanup.policy: compact
  min.cleanable.dirty.ratio: 0.01
table:
  catalog: spark_catalog
  schema: kafka
"""
EVENTS = """\
topic: events
partitions: 1
config:
  cleanup.policy: compact
source:
  kafka:
    bootstrap.servers: {servers}
table:
  schema: kafka
"""

FIRST_SESSION = """\
import json, sys
sys.path.insert(0, {repo!r})
from framework.cli.main import main
from framework.session import local_session

local_session("catalog-first", kafka=True, metastore={metastore!r})
common = ["--warehouse", {warehouse!r}, "--specs", {specs!r}]
steps = [
    ["create"],
    ["produce", "--topic", "orders", "--input", {records!r}, "--now", "1000"],
    ["ingest"],
    ["commit-offset", "--group", "g", "--topic", "orders", "--partition", "0", "--offset", "1"],
    ["maintain", "--force", "--now", "2000"],
    ["report"],
]
print(json.dumps([main(common + step) for step in steps]))
"""

SECOND_SESSION = """\
import io, json, sys, contextlib
sys.path.insert(0, {repo!r})
from framework.cli.main import main
from framework.session import local_session

spark = local_session("catalog-second", metastore={metastore!r})
name = "spark_catalog.kafka.`orders_0`"
out = {{
    "tables": sorted(r["tableName"] for r in spark.sql("SHOW TABLES IN spark_catalog.kafka").collect()),
    "records": [[r["offset"], r["key"], r["value"]] for r in spark.sql(f"SELECT * FROM {{name}} ORDER BY offset").collect()],
    "version_1": spark.sql(f"SELECT count(*) AS n FROM {{name}} VERSION AS OF 1").collect()[0]["n"],
    "operations": [r["operation"] for r in spark.sql(f"DESCRIBE HISTORY {{name}}").collect()],
    "events": [[r["offset"], r["key"]] for r in spark.table("kafka.events_0").orderBy("offset").collect()],
    "history_rows": spark.table("spark_catalog.kafka.topiclake_maintenance_history").count(),
    "offsets": [[r["group"], r["offset"]] for r in spark.table("`kafka`.`topiclake_committed_offsets`").collect()],
}}
printed = io.StringIO()
with contextlib.redirect_stdout(printed):
    main(["--warehouse", {warehouse!r}, "--specs", {specs!r}, "read", "--topic", "orders", "--partition", "0"])
out["read"] = [[r["offset"], r["key"], r["value"]] for r in map(json.loads, printed.getvalue().splitlines())]
out["refused"] = [
    main(["--warehouse", {other!r}, "--specs", {specs!r}, "produce", "--topic", "orders", "--input", {records!r}]),
    main(["--warehouse", {warehouse!r}, "--specs", {dotted!r}, "produce", "--topic", "orders.v2", "--input",
          {records!r}]),
]
print(json.dumps(out))
"""


def _session(script: str, tmp_path: Path, name: str) -> tuple[dict | list, str]:
    """Run ``script`` in a new Python (a new JVM); its last line of output, and what it said on stderr."""
    path = tmp_path / f"{name}.py"
    path.write_text(script)
    started = time.monotonic()
    done = subprocess.run([sys.executable, str(path)], cwd=tmp_path, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    print(f"{name} session: {time.monotonic() - started:.1f} s")
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr[-4000:]


def test_catalog_tables_across_two_sessions(kafka_broker, tmp_path):
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "orders.yaml").write_text(ORDERS)
    (specs / "events.yaml").write_text(EVENTS.format(servers=kafka_broker.bootstrap_servers))
    kafka_broker.create_topic("events", partitions=1)
    kafka_broker.produce("events", [{"key": f"e{i}", "value": str(i), "partition": 0} for i in range(4)])
    records = tmp_path / "orders.jsonl"
    records.write_text("".join(json.dumps({"key": k, "value": v, "timestamp": t, "partition": 0}) + "\n"
                               for k, v, t in [("a", "1", 100), ("a", "2", 200), ("b", "1", 300)]))
    dotted = tmp_path / "dotted"
    dotted.mkdir()
    (dotted / "orders.yaml").write_text(ORDERS.replace("topic: orders", "topic: orders.v2"))
    names = dict(repo=str(REPO), metastore=str(tmp_path / "metastore"), warehouse=str(tmp_path / "warehouse"),
                 specs=str(specs), records=str(records), other=str(tmp_path / "other"), dotted=str(dotted))

    statuses, said = _session(FIRST_SESSION.format(**names), tmp_path, "first")
    assert statuses == [0, 0, 0, 0, 0, 0], said
    seen, _ = _session(SECOND_SESSION.format(**names), tmp_path, "second")
    assert seen["tables"] == ["events_0", "orders_0", "orders_1", "topiclake_committed_offsets",
                              "topiclake_maintenance_history"]
    assert seen["records"] == [[1, "a", "2"], [2, "b", "1"]]  # compacted: a's older value is gone
    assert seen["read"] == seen["records"]  # `topiclake read` and the catalog name read one table
    assert seen["version_1"] == 3  # time travel by name: the version before compaction
    assert "MERGE" in seen["operations"] or "DELETE" in seen["operations"]
    assert seen["events"] == [[i, f"e{i}"] for i in range(4)]
    assert seen["history_rows"] > 0 and seen["offsets"] == [["g", 1]]
    assert (tmp_path / "warehouse" / "_topiclake" / "report" / "index.html").exists()

    # refused before anything is written: another warehouse that would reuse the names, and a
    # topic name Spark's Hive metastore cannot take
    assert seen["refused"] == [2, 2]
    assert not (tmp_path / "other" / "orders-0").exists()
    assert not (tmp_path / "warehouse" / "orders.v2-0").exists()
