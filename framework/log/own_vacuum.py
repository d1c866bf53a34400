"""Delta's VACUUM of a local table, made by topiclake itself without a JVM.

A VACUUM in a new process started the JVM and a session for a handful of file deletions,
then ran Spark jobs to list the folder and join it with the snapshot's files: 4 to 5 s a
partition warm, about 10 s with the start (``tests/test_crashes.py``'s sweep steps,
docs/performance-log.md, stop 104). Here the same rule runs on the driver, as Delta
4.4's ``VacuumCommand.gc`` (a FULL vacuum with the table's window) states it:

* *valid*: every live file (the version's checksum lists them all) and every file a
  ``remove`` took out at or after ``now - delta.deletedFileRetentionDuration`` (a tombstone
  inside the window), with the folders that hold them, and the file of each one's
  deletion vector (that file alone, as Delta's ``getValidRelativePathsAndSubdirs``);
* *listed*: every file and folder under the table's, except hidden ones (a name starting
  with ``.`` or ``_``, unless a partition folder, ``_change_data`` or ``_delta_index``; and
  ``metadata``);
* *deleted*: each listed file older than the window's start, and each listed folder with no
  such file under it, that is not valid. A folder that still holds a newer file is not
  deleted (a non-recursive delete fails), as Delta's is not.

The commits are Delta's: ``VACUUM START`` (the files to delete and their bytes) before the
deletions and ``VACUUM END`` (the files and folders deleted, the folders listed) after,
each an empty commit at snapshot isolation with the open ``session_confs`` block's user
metadata, the checksum carried forward; then ``_last_vacuum_info`` as a FULL vacuum
leaves it. ``tests/test_own_vacuum.py`` pins the files left, both commits and the
checksums to Delta's VACUUM of a copy of the same table.

The tombstones are read from the commit files newest first, down to the first commit made
ten minutes or more before the window's start (:data:`CLOCK_MARGIN_MS`: a ``remove``'s time
is its writer's clock, which stamped the commit after it). Only a table this can read and commit to exactly as Delta
would takes this way: local, its newest checksum complete with every file listed
(``own_commits.rewritable``), its window in a form read here, no deletion vector stored
outside the table's folder, no absolute file paths, every commit file of the window still there and at most
:data:`MAX_COMMITS_READ` of them, and neither new version one at which Delta writes a
checkpoint. Anything else returns None before anything is written or deleted, and the
caller runs Delta's VACUUM.
"""

from __future__ import annotations

import collections
import os
import time
import urllib.parse
import uuid

from framework.log import commit_files, deletion_vectors, own_commits, version_checksum
from framework.log.commit_log import DELTA_LOG, commit_actions
from framework.log.delta_commits import USER_METADATA_CONF, block_conf
from framework.log.warehouse import deleted_file_window_of

__all__ = ["MAX_COMMITS_READ", "vacuumed"]

#: The most commit files read for the window's tombstones (more: Delta's VACUUM, which
#: reads them from its snapshot).
MAX_COMMITS_READ = 2_000
#: How much earlier than the window's start the newest commit not read may be: a commit's
#: time and its removes' times come from one writer's clock (a local table's writers share
#: one machine's), its commit stamped after its removes; the margin covers a commit whose
#: attempts took that long, stamped before an older version's.
CLOCK_MARGIN_MS = 600_000
#: What a FULL vacuum writes to ``_delta_log/_last_vacuum_info`` (no LITE boundary).
LAST_VACUUM_INFO = "_last_vacuum_info"


def vacuumed(path: str, spark=None) -> int | None:
    """The local Delta table at ``path`` vacuumed as Delta's ``VACUUM`` with the table's
    window (its ``delta.deletedFileRetentionDuration``): the files and folders deleted
    (``VACUUM END``'s ``numDeletedFiles``), or None when this way does not apply (nothing
    written, nothing deleted). ``spark``: the caller's session, for the rare ``VACUUM END``
    that another writer pushed to a version where Delta writes a checkpoint (committed
    through Delta's transaction then)."""
    base = own_commits.rewrite_base(path, deletion_vectors=True)
    if base is None or not own_commits.rewritable(base[2], base[1] + 1, 0, deletion_vectors=True):
        return None  # (a checkpoint due at either of the two versions: Delta writes it)
    folder, version, checksum = base
    window_ms = deleted_file_window_of(checksum["metadata"].get("configuration") or {})
    if window_ms is None:
        return None
    start = int(time.time() * 1000) - window_ms
    valid = _valid(path, folder, checksum, version, start)
    if valid is None:
        return None
    partition_columns = list(checksum["metadata"].get("partitionColumns") or [])
    files, folders = _listed(folder, partition_columns)
    doomed, size = _doomed(files, folders, valid, start)
    user_metadata = block_conf(USER_METADATA_CONF)
    began = commit_files.Operation("VACUUM START", {"retentionCheckEnabled": True, "defaultRetentionMillis": window_ms},
                                   {"numFilesToDelete": len(doomed), "sizeOfDataToDelete": size}, "SnapshotIsolation")
    if not commit_files.commit(folder, version + 1, checksum, [], user_metadata=user_metadata, operation=began):
        return None  # another writer took the version first: Delta's VACUUM reads it
    deleted = sum(_deleted(os.path.join(folder, *relative.split("/")), relative in folders) for relative in doomed)
    ended = commit_files.Operation("VACUUM END", {"status": "COMPLETED"},
                                   {"numDeletedFiles": deleted, "numVacuumedDirectories": len(folders) + 1},
                                   "SnapshotIsolation")
    _commit_end(path, folder, version + 2, ended, user_metadata, spark)
    _write_last_vacuum_info(folder)
    return deleted


def _valid(path: str, folder: str, checksum: dict, version: int, start: int) -> set[str] | None:
    """The relative paths VACUUM keeps at ``version`` (see the module's text), or None."""
    adds = checksum.get("allFiles")
    valid = set()
    for add in adds:
        if not _keep(valid, add["path"]) or not _keep_vector(valid, folder, add.get("deletionVector")):
            return None
    for read, at in enumerate(range(version, -1, -1)):
        actions = None if read >= MAX_COMMITS_READ else commit_actions(path, at)
        if actions is None:
            return None  # a commit of the window is gone (or too many): Delta's snapshot knows
        info = next((a["commitInfo"] for a in actions if "commitInfo" in a), {})
        for action in actions:
            removed = action.get("remove")
            if removed is None:
                continue
            if int(removed.get("deletionTimestamp") or 0) >= start and not (
                    _keep(valid, removed["path"]) and _keep_vector(valid, folder, removed.get("deletionVector"))):
                return None
        if int(info.get("timestamp") or 0) < start - CLOCK_MARGIN_MS:
            break
    return valid


def _keep(valid: set[str], action_path: str) -> bool:
    """Add a file action's path and its folders to ``valid``; False for an absolute path."""
    relative = urllib.parse.unquote(action_path)
    if "://" in action_path or relative.startswith("/"):
        return False
    parts = relative.split("/")
    valid.update("/".join(parts[:i]) for i in range(1, len(parts) + 1))
    return True


def _keep_vector(valid: set[str], folder: str, descriptor: dict | None) -> bool:
    """Add the file of a file action's deletion vector to ``valid``, as Delta's VACUUM keeps
    it (the file alone, not its folders); False for one not in the table's folder."""
    if descriptor is None or descriptor.get("storageType") == "i":  # none, or inline in the log
        return True
    found = deletion_vectors.file_of(folder, descriptor)
    if found is not None:
        valid.add(os.path.relpath(found, folder).replace(os.sep, "/"))
    return found is not None


def _hidden(name: str, partition_columns: list[str]) -> bool:
    """Delta's ``DeltaTableUtils.isHiddenDirectory``, for files and folders alike."""
    return name == "metadata" or (name.startswith((".", "_")) and not name.startswith(("_delta_index", "_change_data"))
                                  and not any(name.startswith(f"{column}=") for column in partition_columns))


def _listed(folder: str, partition_columns: list[str]) -> tuple[dict[str, tuple[int, int]], set[str]]:
    """Every file not hidden under ``folder`` (relative path: (size, modified ms)) and
    every folder not hidden, as Delta's recursive listing finds them."""
    files, folders = {}, set()
    for root, dirs, names in os.walk(folder):
        base = os.path.relpath(root, folder)
        prefix = "" if base == "." else base.replace(os.sep, "/") + "/"
        dirs[:] = [d for d in dirs if not _hidden(d, partition_columns)]
        folders.update(prefix + d for d in dirs)
        for name in names:
            if _hidden(name, partition_columns):
                continue
            try:
                stat = os.stat(os.path.join(root, name))
            except FileNotFoundError:
                continue  # deleted while listed
            files[prefix + name] = (stat.st_size, stat.st_mtime_ns // 1_000_000)
    return files, folders


def _doomed(files: dict[str, tuple[int, int]], folders: set[str], valid: set[str],
            start: int) -> tuple[list[str], int]:
    """What VACUUM deletes, and its files' bytes: Delta's count of each path (a folder
    once, plus once for each file older than ``start`` under it; such a file once), kept
    where the count is 1 and the path is not valid."""
    counts, sizes = collections.Counter(folders), {}
    for relative, (size, modified) in files.items():
        if modified >= start:
            continue
        counts[relative] += 1
        sizes[relative] = size
        parts = relative.split("/")
        counts.update("/".join(parts[:i]) for i in range(1, len(parts)))
    doomed = sorted(p for p, count in counts.items() if count == 1 and p not in valid)
    return doomed, sum(sizes.get(p, 0) for p in doomed)


def _deleted(absolute: str, is_folder: bool) -> bool:
    """Delete one file or empty folder, as Hadoop's non-recursive delete: whether it went."""
    try:
        if is_folder:
            os.rmdir(absolute)
        else:
            os.unlink(absolute)
            head, tail = os.path.split(absolute)
            checksum_file = os.path.join(head, f".{tail}.crc")  # Hadoop's local checksum, if any
            if os.path.exists(checksum_file):
                os.unlink(checksum_file)
        return True
    except OSError:
        return False


def _commit_end(path: str, folder: str, version: int, ended, user_metadata: str | None, spark) -> None:
    """``VACUUM END`` at ``version``, or after another writer's commits (an empty commit
    conflicts with nothing); through Delta's transaction where a checkpoint is due."""
    from framework.log.delta_commits import MAX_COMMIT_ATTEMPTS

    for _ in range(MAX_COMMIT_ATTEMPTS):
        checksum = version_checksum.checksum(path, version - 1)
        if not own_commits.rewritable(checksum, version - 1, 0, deletion_vectors=True):
            break
        if commit_files.commit(folder, version, checksum, [], user_metadata=user_metadata, operation=ended):
            return
        found = own_commits.newest(path)
        version = (found[1] if found else version) + 1
    _commit_end_through_delta(spark, path, ended)


def _commit_end_through_delta(spark, path: str, ended) -> None:
    from framework.log.delta_transactions import through_the_jvm

    def commit(delta):
        txn = delta.delta_log(path).startTransaction()
        delta.register_metrics(txn, ended.metrics)
        txn.commit(delta.seq([]), delta.operation("VacuumEnd", ended.parameters["status"]))

    through_the_jvm(spark, commit, lambda: None)


def _write_last_vacuum_info(folder: str) -> None:
    log = os.path.join(folder, DELTA_LOG)
    temporary = os.path.join(log, f".{LAST_VACUUM_INFO}.{uuid.uuid4()}.tmp")
    with open(temporary, "w", encoding="utf-8") as handle:
        handle.write("{}")
    os.replace(temporary, os.path.join(log, LAST_VACUUM_INFO))
