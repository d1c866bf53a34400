"""A Delta table's data files as they lie on disk."""

from __future__ import annotations

import os


def data_files_on_disk(table_path: str) -> list[str]:
    """Every Parquet data file under ``table_path``, live or replaced and not yet vacuumed;
    the ``_delta_log`` folder is left out (Delta's checkpoints are Parquet too)."""
    return sorted(os.path.join(folder, name) for folder, _, names in os.walk(table_path)
                  if "_delta_log" not in os.path.relpath(folder, table_path).split(os.sep)
                  for name in names if name.endswith(".parquet"))


def live_physical_types(log, column: str) -> list[str]:
    """The Parquet physical type of ``column`` in each live data file of ``log``'s table
    (``INT96`` where Spark wrote a timestamp, ``INT64`` where Arrow did)."""
    return [chunk.physical_type for _, chunk in _live_chunks(log, column)]


def live_codecs(log, column: str) -> dict[str, str]:
    """Each live data file of ``log``'s table (its name) and the codec its first row group
    compresses ``column`` by, as Arrow names it (``SNAPPY``, ``ZSTD``)."""
    return {os.path.basename(path): chunk.compression for path, chunk in _live_chunks(log, column)}


def live_encodings(log, column: str) -> dict[str, tuple]:
    """Each live data file of ``log``'s table (its name) and the encodings of ``column`` in
    its first row group (``RLE_DICTIONARY`` when dictionary-encoded)."""
    return {os.path.basename(path): chunk.encodings for path, chunk in _live_chunks(log, column)}


def _live_chunks(log, column: str) -> list[tuple]:
    from urllib.parse import unquote, urlparse

    import pyarrow.parquet as pq

    found = []
    for uri in log.read().inputFiles():
        path = unquote(urlparse(uri).path)
        group = pq.ParquetFile(path).metadata.row_group(0)
        found.append((path, next(group.column(i) for i in range(group.num_columns)
                                 if group.column(i).path_in_schema == column)))
    return found
