"""A table version's live files from Delta's version checksum, without a Spark job.

After each commit Delta writes ``_delta_log/<version, 20 digits>.crc``: the version's
size and file count and, while the table has at most
``spark.databricks.delta.allFilesInCrc.thresholdNumFiles`` live files (50 by default,
on by default in Delta 4), every live file's ``add`` action with its statistics. A
partition's file listing through Delta's snapshot costs a state reconstruction and a
collect, about 0.5 s; the checksum is one small local file. So a small partition is
listed from here, and anything else (no checksum written yet, more files than the
threshold, a session that turned it off, storage that is not local) goes the JVM way.
``tests/test_optimize.py`` pins the two listings together.
"""

from __future__ import annotations

import json
import os

from framework.log.commit_log import DELTA_LOG, local_folder


def live_adds(path: str, version: int) -> list[dict] | None:
    """The ``add`` actions of the files live at ``version`` (dicts as in the Delta log), or
    None when the checksum does not list them."""
    folder = local_folder(path)
    if folder is None:
        return None
    try:
        with open(os.path.join(folder, DELTA_LOG, f"{version:020d}.crc"), encoding="utf-8") as handle:
            checksum = json.load(handle)
    except (OSError, ValueError):  # not written (yet), or not ours to read
        return None
    adds = checksum.get("allFiles")
    if not isinstance(adds, list) or len(adds) != checksum.get("numFiles"):
        return None
    return adds
