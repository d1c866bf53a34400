"""Other Delta readers the tests read tables with (test dependencies only)."""

from __future__ import annotations

import glob
import os


def duckdb_connection():
    """A DuckDB connection with the delta extension loaded from its wheel (``INSTALL delta``
    would need the network)."""
    import duckdb
    import duckdb_extension_delta

    root = os.path.dirname(duckdb_extension_delta.__file__)
    [extension] = glob.glob(os.path.join(root, "extensions", "*", "delta.duckdb_extension"))
    connection = duckdb.connect()
    connection.execute(f"LOAD '{extension}'")
    return connection


def delta_rs_query(path: str, columns: str = "*", version: int | None = None) -> list[dict]:
    """A table's rows (at ``version``, else the latest) through delta-rs's own query engine
    (``QueryBuilder``, DataFusion), which applies deletion vectors where
    ``to_pyarrow_table`` refuses them, in offset order when the table has offsets. A read of
    a small table costs milliseconds, where a Spark query costs two jobs."""
    import deltalake
    import pyarrow as pa

    table = deltalake.DeltaTable(path, version=version)
    order = ' ORDER BY "offset"' if "offset" in table.schema().to_arrow().names else ""
    result = deltalake.QueryBuilder().register("t", table).execute(f"SELECT {columns} FROM t{order}").read_all()
    return pa.table(result).to_pylist()


def delta_rs_offsets(path: str, version: int | None = None) -> list[int]:
    """A partition table's offsets in order (at ``version``, else the latest), read by
    delta-rs: plain Delta, not through the engine."""
    return [row["offset"] for row in delta_rs_query(path, '"offset"', version)]
