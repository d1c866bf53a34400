"""A Delta table's data files as they lie on disk."""

from __future__ import annotations

import os


def data_files_on_disk(table_path: str) -> list[str]:
    """Every Parquet data file under ``table_path``, live or replaced and not yet vacuumed;
    the ``_delta_log`` folder is left out (Delta's checkpoints are Parquet too)."""
    return sorted(os.path.join(folder, name) for folder, _, names in os.walk(table_path)
                  if "_delta_log" not in os.path.relpath(folder, table_path).split(os.sep)
                  for name in names if name.endswith(".parquet"))
