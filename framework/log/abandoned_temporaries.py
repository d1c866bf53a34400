"""Temporary files a killed commit left in a local table's ``_delta_log``.

A commit file is written under a temporary name and then linked (topiclake's own commits,
``commit_files.put_if_absent``) or renamed (Delta's log store) to its version's name; the
version's checksum likewise. A process killed between the write and the link leaves the
temporary file behind (``.<version>.json.<uuid>.tmp``, ``.<version>.crc.<uuid>.tmp``,
Delta's ``.<version>.checkpoint.parquet.<uuid>.tmp``). No reader looks at it, and Delta's
log cleanup lists only versions and checkpoints, so nothing else ever removes it.

A commit holds its temporary file for milliseconds; one older than
:data:`ABANDONED_AFTER_MS` belongs to a process that is gone. The vacuum stage deletes
those of a table on the local file system, where topiclake's own commits are made; a
table elsewhere is left as Delta leaves it.
"""

from __future__ import annotations

import os
import re

from framework.log.commit_log import local_folder

__all__ = ["ABANDONED_AFTER_MS", "abandoned", "delete_abandoned"]

#: How old a temporary file must be before it counts as abandoned (an hour).
ABANDONED_AFTER_MS = 3_600_000
#: ``.<20-digit version>.<kind>.<uuid>.tmp``, the way Delta's log stores and topiclake's own
#: commits name a file on its way to ``<version>.<kind>``.
_TEMPORARY = re.compile(r"\.\d{20}\.[a-z.]+\.[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.tmp")


def abandoned(name: str, modified_ms: int, now_ms: int) -> bool:
    """Whether ``name`` in a ``_delta_log`` folder, last modified at ``modified_ms``, is a
    commit's temporary file whose writer is gone."""
    return _TEMPORARY.fullmatch(name) is not None and now_ms - modified_ms >= ABANDONED_AFTER_MS


def delete_abandoned(path: str, now_ms: int) -> int:
    """Delete the abandoned temporary files of the table at ``path``; how many (0 for a table
    that is not on the local file system)."""
    folder = local_folder(path)
    if folder is None:
        return 0
    deleted = 0
    try:
        entries = list(os.scandir(os.path.join(folder, "_delta_log")))
    except FileNotFoundError:
        return 0
    for entry in entries:
        if not entry.name.startswith("."):
            continue
        try:
            if abandoned(entry.name, int(entry.stat().st_mtime * 1000), now_ms):
                os.unlink(entry.path)
                deleted += 1
        except FileNotFoundError:  # another maintain deleted it first
            continue
    return deleted
