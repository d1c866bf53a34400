"""The checkpoint of a version topiclake committed itself, written by delta-rs, without a JVM.

Delta writes a checkpoint after every ``delta.checkpointInterval``-th commit (topiclake's
tables: every 100th), and cleans the log's expired files then. Until this module, an own
commit (``framework.log.own_commits``) refused such a version, so every hundredth produce
into a partition, history append or commit-offset of a command took Delta's transaction and
started the JVM for it (an idle ``maintain`` in a new process: about 15 s where 1 s).

Now the commit is made as any other, and then its checkpoint is written by delta-rs
(``deltalake.DeltaTable.create_checkpoint``), a reader and writer of the same protocol:
the same actions Delta's checkpoint holds (protocol, metadata, every live file, the
tombstones still inside ``delta.deletedFileRetentionDuration``, the claims), as one Parquet
file put in place whole, then ``_last_checkpoint``. ``tests/test_own_checkpoints.py`` pins
it to Delta's checkpoint of the same commits. What differs changes nothing a reader reads:
Delta writes ``add.stats_parsed`` beside the JSON ``stats`` (readers fall back to the JSON)
and marks every file ``dataChange: false`` where delta-rs keeps each commit's own (a
checkpoint is state, not a change); delta-rs keeps a ``remove``'s statistics; each writes
a null field the other's schema leaves out; ``_last_checkpoint`` names no schema or checksum
(both optional).

Then the log's expired files go, as Delta cleans a log after its checkpoints, by delta-rs's
rule: the commits and checkpoints older than ``delta.logRetentionDuration`` and below the
newest checkpoint that old (:func:`_clean_expired_log`; Delta's own rule differs, and
neither removes a commit younger than the retention: the README, "What is not there
yet"); this module removes the checksums of the versions it removed, which delta-rs
leaves; nothing where the table's owner set ``delta.enableExpiredLogCleanup`` to false, as
Delta keeps it.

A crash after the commit and before its checkpoint leaves a version without one, as a
crash of Delta's writer there does: readers replay the commits since the checkpoint before.
If delta-rs cannot write it (not installed, or it fails), the version stays without one and
the reason is logged; the commit stands.
"""

from __future__ import annotations

import logging
import os

from framework.log.commit_log import DELTA_LOG

__all__ = ["DEFAULT_CHECKPOINT_INTERVAL", "available", "due", "write"]

#: Delta's default ``delta.checkpointInterval``.
DEFAULT_CHECKPOINT_INTERVAL = 10

_log = logging.getLogger(__name__)


def due(configuration: dict, version: int) -> bool | None:
    """Whether Delta writes a checkpoint at ``version`` of a table with these properties;
    None if the interval is not a number Delta would take."""
    try:
        interval = int(configuration.get("delta.checkpointInterval", DEFAULT_CHECKPOINT_INTERVAL))
    except ValueError:
        return None
    return None if interval <= 0 else version > 0 and version % interval == 0


def available() -> bool:
    """Whether delta-rs is here to write checkpoints (the ``spark`` extra, the embedded engine, installs it)."""
    try:
        import deltalake  # noqa: F401
    except ImportError:
        return False
    return True


def write(folder: str, version: int) -> bool:
    """Write the checkpoint of ``version`` of the local table in ``folder``, then clean its
    expired log; whether the checkpoint was written."""
    try:
        from deltalake import DeltaTable

        table = DeltaTable(folder, version=version)
        table.create_checkpoint()
    except Exception as error:  # noqa: BLE001 - the commit stands; only the checkpoint is missing
        _log.warning("%s: no checkpoint written at version %d (%s); readers replay the commits instead",
                     folder, version, error)
        return False
    try:
        _clean_expired_log(table, folder)
    except Exception as error:  # noqa: BLE001 - the next checkpoint cleans again
        _log.warning("%s: the expired log was not cleaned at version %d (%s)", folder, version, error)
    return True


def _clean_expired_log(table, folder: str) -> None:
    """delta-rs's cleanup of the expired commits and checkpoints, then the checksums of the
    versions it removed (Delta's cleanup removes those too); none where the table's owner
    turned Delta's cleanup off (delta-rs 1.6.6's ``cleanup_metadata`` does not ask)."""
    if str(table.metadata().configuration.get("delta.enableExpiredLogCleanup", "true")).lower() == "false":
        return
    table.cleanup_metadata()
    log = os.path.join(folder, DELTA_LOG)
    names = os.listdir(log)
    kept = [int(name[:20]) for name in names if name.endswith(".json") and name[:20].isdigit()]
    if not kept:
        return
    oldest = min(kept)
    for name in names:
        if name.endswith(".crc") and name[:20].isdigit() and int(name[:20]) < oldest:
            try:
                os.unlink(os.path.join(log, name))
            except FileNotFoundError:
                pass
