"""Catalog tables (a spec's ``table:``): the partition tables, and topiclake's own tables
beside them, named in the session's metastore.

Each is an external Delta table over the warehouse path topiclake writes, so the engine
works on the same Delta log either way, and a reader (SQL, a BI tool, a notebook, another
session) names ``<catalog>.<schema>.`<topic>_<p>` `` instead of a path: time travel
(``VERSION AS OF``), ``DESCRIBE HISTORY`` and every other Delta command work by name.
Registering is idempotent and runs wherever tables appear (create, produce, ingest, the
end of a maintenance run), so a crash between a table's first commit and its registration
is mended by the next command.
"""

from __future__ import annotations

import re

from framework.errors import TableMismatchError
from framework.log.delta_create import is_delta_table
from framework.log.warehouse import Warehouse
from framework.spec import TopicSpec

__all__ = ["HISTORY_TABLE", "OFFSETS_TABLE", "check_names", "register"]

#: topiclake's own tables, as their catalog tables are named beside the partition tables.
HISTORY_TABLE = "topiclake_maintenance_history"
OFFSETS_TABLE = "topiclake_committed_offsets"


def _wanted(warehouse: Warehouse, spec: TopicSpec) -> list[tuple[str, str]]:
    """(catalog name, warehouse path) of every table ``spec`` names."""
    wanted = [(spec.catalog_table(p), warehouse.partition_path(spec.topic, p)) for p in range(spec.partitions)]
    return wanted + [(spec.table.table(HISTORY_TABLE), warehouse.maintenance_history_path),
                     (spec.table.table(OFFSETS_TABLE), warehouse.consumer_offsets_path)]


def check_names(spark, warehouse: Warehouse, spec: TopicSpec) -> None:
    """Refuse, before anything is written, a name that already names another table: two
    warehouses must not share one schema's names."""
    if spec.table is None:
        return
    _check_hive_names(spark, spec)
    for name, path in _wanted(warehouse, spec):
        if _exists(spark, name):
            found = spark.sql(f"DESCRIBE DETAIL {name}").collect()[0]["location"]
            if _normal(found) != _normal(path):
                raise TableMismatchError(
                    f"{spec.source}: table: {name} already names the Delta table at {found}, not {path}; "
                    "give this warehouse its own schema")


def register(spark, warehouse: Warehouse, spec: TopicSpec) -> list[str]:
    """Name every existing partition table of ``spec`` (and the own tables) in its catalog
    schema; returns the names this call registered."""
    if spec.table is None:
        return []
    spark.sql(f"CREATE SCHEMA IF NOT EXISTS {spec.table.namespace}")
    registered = []
    for name, path in _wanted(warehouse, spec):
        if is_delta_table(spark, path) and not _exists(spark, name):
            spark.sql(f"CREATE TABLE IF NOT EXISTS {name} USING DELTA LOCATION '{_sql_literal(path)}'")
            registered.append(name)
    return registered


#: Spark's own Hive metastore takes only these characters in schema and table names.
_HIVE_NAME = re.compile(r"[A-Za-z0-9_]+")


def _check_hive_names(spark, spec: TopicSpec) -> None:
    """Spark's Hive metastore refuses the '.' and '-' Kafka topic names may have (Unity Catalog
    takes them, quoted): say so before anything is written."""
    hive = spark.conf.get("spark.sql.catalogImplementation", "in-memory") == "hive"
    if not hive or spec.table.catalog not in (None, "spark_catalog"):
        return
    for kind, name in (("schema", spec.table.schema_name), ("table", f"{spec.topic}_0")):
        if not _HIVE_NAME.fullmatch(name):
            raise TableMismatchError(
                f"{spec.source}: table: Spark's Hive metastore takes only letters, digits and _ in a {kind} name, "
                f"and this spec makes {name!r}; name the topic (or the schema) without '.', '-' or spaces, or use "
                "a catalog that takes quoted names (Unity Catalog)")


def _exists(spark, name: str) -> bool:
    return spark.catalog.tableExists(name)  # a quoted multi-part name; no error logged when absent


def _normal(location: str) -> str:
    location = location[len("file:"):] if location.startswith("file:") else location
    return location.rstrip("/")


def _sql_literal(text: str) -> str:
    return text.replace("\\", "\\\\").replace("'", "\\'")
