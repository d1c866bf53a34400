"""Temporary files a killed commit left in a table's ``_delta_log``.

A commit file is written under a temporary name and then linked (topiclake's own commits,
``commit_files.put_if_absent``) or renamed (Delta's log store) to its version's name; the
version's checksum likewise. A process killed between the write and the link leaves the
temporary file behind (``.<version>.json.<uuid>.tmp``, ``.<version>.crc.<uuid>.tmp``,
Delta's ``.<version>.checkpoint.parquet.<uuid>.tmp``; delta-rs, which writes the checkpoints
of topiclake's own commits, stages ``<version>.checkpoint.parquet#<n>`` and
``_last_checkpoint#<n>``). No reader looks at it, and Delta's log cleanup lists only
versions and checkpoints, so nothing else ever removes it.

A commit holds its temporary file for milliseconds; one older than
:data:`ABANDONED_AFTER_MS` belongs to a process that is gone. The vacuum stage deletes
those: of a local table through the OS (topiclake's own commits and Delta's local log
store), of a table elsewhere through Hadoop's file system (Delta's rename-based log
stores, HDFS's and Azure's, write the same names; S3's write in place and leave none).
The hour also covers a remote store's clock running ahead of this machine's.
"""

from __future__ import annotations

import os
import re

from framework.log.commit_log import local_folder

__all__ = ["ABANDONED_AFTER_MS", "abandoned", "delete_abandoned", "delete_abandoned_through_hadoop"]

#: How old a temporary file must be before it counts as abandoned (an hour).
ABANDONED_AFTER_MS = 3_600_000
#: ``.<20-digit version>.<kind>.<uuid>.tmp``, the way Delta's log stores and topiclake's own
#: commits name a file on its way to ``<version>.<kind>``.
_TEMPORARY = re.compile(r"\.\d{20}\.[a-z.]+\.[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.tmp"
                        # delta-rs's staging file (a local put writes it, then renames it into place)
                        r"|(\d{20}\.checkpoint\.parquet|_last_checkpoint)#\d+")
#: The Hadoop glob of the names that may be one (the rule still judges each match).
_TEMPORARY_GLOB = ".*.tmp"


def abandoned(name: str, modified_ms: int, now_ms: int) -> bool:
    """Whether ``name`` in a ``_delta_log`` folder, last modified at ``modified_ms``, is a
    commit's temporary file whose writer is gone."""
    return _TEMPORARY.fullmatch(name) is not None and now_ms - modified_ms >= ABANDONED_AFTER_MS


def delete_abandoned(path: str, now_ms: int, spark=None) -> int:
    """Delete the abandoned temporary files of the table at ``path``; how many. A table that
    is not on the local file system goes through ``spark``'s Hadoop file system (none
    deleted without one)."""
    folder = local_folder(path)
    if folder is None:
        return delete_abandoned_through_hadoop(spark, path, now_ms) if spark is not None else 0
    deleted = 0
    try:
        entries = list(os.scandir(os.path.join(folder, "_delta_log")))
    except FileNotFoundError:
        return 0
    for entry in entries:
        # every name the rule takes starts with "." or holds "#": a test a third of the
        # rule's cost, before each entry's stat (a long log lists 120,000 commits and checksums)
        if not entry.name.startswith(".") and "#" not in entry.name:
            continue
        try:
            if abandoned(entry.name, int(entry.stat().st_mtime * 1000), now_ms):
                os.unlink(entry.path)
                deleted += 1
        except FileNotFoundError:  # another maintain deleted it first
            continue
    return deleted


def delete_abandoned_through_hadoop(spark, path: str, now_ms: int) -> int:
    """:func:`delete_abandoned` of a table on any storage Spark's Hadoop file systems reach.
    One glob returns only the dot-named ``.tmp`` entries, so a long log costs no py4j call
    per entry. A Spark Connect session has no JVM to reach: 0."""
    from framework.log.delta_transactions import jvm_of

    jvm = jvm_of(spark)
    if jvm is None:
        return 0
    pattern = getattr(jvm, "org.apache.hadoop.fs.Path")(f"{path.rstrip('/')}/_delta_log/{_TEMPORARY_GLOB}")
    files = pattern.getFileSystem(spark._jsparkSession.sessionState().newHadoopConf())
    deleted = 0
    for status in files.globStatus(pattern) or []:  # None when ``_delta_log`` is not there
        # a delete that finds nothing (another maintain's) answers False and counts nothing
        if abandoned(status.getPath().getName(), status.getModificationTime(), now_ms) \
                and files.delete(status.getPath(), False):
            deleted += 1
    return deleted
