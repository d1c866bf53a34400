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
