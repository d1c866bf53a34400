"""A compaction committed as deletion vectors, without the JVM and without rewriting a
file (merge-on-read), on a table whose owner turned them on (``delta.enableDeletionVectors``).

Copy-on-write rewrites every file that holds a record the run deletes. With random keys,
50k updates put a loser in nearly every file of the clean section, so a run writes the
whole table again and its cost grows with the clean section, not with the change. Delta's
DELETE and MERGE on a table with deletion vectors instead mark a file's deleted rows in a
vector. This does the same from Arrow's decision (``arrow_actions``, which names each
changed record's file and row), with no Spark job:

- one deletion-vector file, holding for each touched file the rows the run deletes or
  stamps together with those its old vector hid (``deletion_vectors.write``);
- each stamped tombstone (a first kept one gets its delete horizon) copied with its new
  horizon into a new file, as Delta's MERGE writes an updated row (only the row groups
  holding them are read);
- one commit: each touched file removed as it was and added back with its new vector and
  its statistics marked no longer tight (``tightBounds``), as Delta's DELETE writes them; a
  file every row of which is gone only removed; the copies added. It is a MERGE with the
  metrics Delta's MERGE of the same changes records (``numTargetDeletionVectorsAdded``
  among them, which the vacuum stage's purge reads).

No change data file is written: Delta's change data feed reads such a commit's deletes
from the difference between each file's old and new vectors and its inserts from the
added files (``CDCReader``), as after its own DELETE. A stamped tombstone so reads as a
``delete`` and an ``insert`` of its offset where Delta's MERGE writes an
``update_preimage`` and ``update_postimage``; topiclake's checks read the two alike.

Only where ``own_commits.committable`` takes the table with deletion vectors, every
touched file's vector at the newest version is the one the decision read (else its row
indexes may be stale), each is read here, and Arrow writes the table's files; anything
else gives :data:`NOT_LOCAL` with nothing committed, and Delta's MERGE runs.
``tests/test_deletion_vectors.py`` pins it to Delta's MERGE run after run.

A retention cut on such a table is committed the same way, as the DELETE Delta's own
DELETE with deletion vectors commits (``retention_rewrite.vector_cut``).
"""

from __future__ import annotations

import json

from framework.log import (
    commit_files,
    deletion_vectors,
    file_stats,
    local_records,
    own_commits,
    version_checksum,
)
from framework.log.delta_commits import USER_METADATA_CONF, block_conf
from framework.stages import arrow_rewrite
from framework.stages.compaction import STAMP
from framework.stages.compaction_rewrite import MERGE_RECORDED
from framework.stages.file_rewrite import NOT_LOCAL, recorded_metrics

__all__ = ["NOT_LOCAL", "commit_locally", "merge_recorded", "vectors_counted"]


def commit_locally(spark, path: str, app_id: str, epoch: int, read_version: int, changes,
                   recorded=None) -> int | None | str:
    """Commit ``changes`` (``arrow_actions.changes``: offset, _action, _horizon, _file, _row
    of each record the run deletes or stamps, decided from version ``read_version``) as
    deletion vectors, and each stamped record as a copy in a new file: the version
    committed; None when the table already holds maintenance epoch ``epoch`` (nothing is
    written); :data:`NOT_LOCAL` when this way does not apply or another writer took the
    version first (see the module's text). Run it inside the maintenance commit's
    ``session_confs`` block: its user metadata is the block's. ``recorded``: the commit's
    operation (a ``commit_files.Operation``) from (deleted, stamped, touched, emptied,
    copies), as :func:`merge_recorded` gives a MERGE's (a retention cut's is a DELETE:
    ``retention_rewrite.vector_cut``)."""
    from pyroaring import BitMap64

    user_metadata = block_conf(USER_METADATA_CONF)
    if (changes is None or user_metadata is None or not {"_file", "_row"} <= set(changes.column_names)
            or changes["_file"].null_count or changes["_row"].null_count):
        return NOT_LOCAL
    found = own_commits.newest(path)
    if found is None:
        return NOT_LOCAL
    folder, version = found
    checksum = version_checksum.checksum(path, version)
    if not own_commits.committable(checksum, version, new_files=0, deletion_vectors=True):
        return NOT_LOCAL
    files = version_checksum.plain_files(path, version, deletion_vectors=True)
    planned = files if read_version == version else version_checksum.plain_files(path, read_version, True)
    if (files is None or planned is None or not isinstance(checksum.get("setTransactions"), list)
            or "delta.setTransactionRetentionDuration" in files.configuration):
        return NOT_LOCAL  # (Delta drops expired claims as it reads them)
    if max((t["version"] for t in checksum["setTransactions"] if t.get("appId") == app_id), default=-1) >= epoch:
        return None
    now = {version_checksum.file_name(add["path"]): (local, add)
           for local, add in zip(files.paths, files.adds, strict=True)}
    then = {version_checksum.file_name(add["path"]): add for add in planned.adds}
    touched, vectors, emptied, stamps = [], [], [], []
    for name, rows, stamped in _by_file(changes):
        local, add = now.get(name, (None, None))
        if add is None or then.get(name, {}).get("deletionVector") != add.get("deletionVector"):
            return NOT_LOCAL  # gone, or its vector changed since the decision: the rows may not be these
        old = deletion_vectors.hidden_rows(folder, add.get("deletionVector"))
        new = BitMap64(rows)
        if old is None or len(new) != len(rows) or not old.isdisjoint(new):
            return NOT_LOCAL
        if stamped:
            stamps.append((local, add, stamped))
        hidden = old | new
        if len(hidden) == file_stats.of(add).records:
            emptied.append(add)  # every row gone: the file is removed, as Delta removes it
        else:
            touched.append(add)
            vectors.append(hidden)
    if not touched and not emptied:
        return NOT_LOCAL
    copies = _stamped_copies(spark, folder, checksum["metadata"], stamps)
    if copies is None or not own_commits.committable(checksum, version, len(copies) - len(emptied),
                                                     deletion_vectors=True):
        commit_files.remove_files(folder, copies or [])
        return NOT_LOCAL
    descriptors = deletion_vectors.write(folder, vectors) if vectors else []
    removes = commit_files.removes([*touched, *emptied])
    adds = [{**add, "dataChange": True, "stats": _wide_bounds(add.get("stats")), "deletionVector": descriptor}
            for add, descriptor in zip(touched, descriptors, strict=True)] + copies
    if "numDeletedRecordsOpt" not in checksum:  # (Delta counts them on a table with deletion vectors)
        checksum = {**checksum, **deletion_vectors.counted(checksum["allFiles"])}
    stamped_count = sum(len(rows) for _, _, rows in stamps)
    operation = (recorded or merge_recorded)(changes.num_rows - stamped_count, stamped_count, touched, emptied,
                                             copies)
    made = commit_files.commit(folder, version + 1, checksum, adds, removes, user_metadata=user_metadata,
                               claim=(app_id, epoch), operation=operation)
    if made:
        return version + 1
    commit_files.remove_files(folder, copies)
    if descriptors:
        deletion_vectors.remove_file(folder, descriptors[0])
    return NOT_LOCAL


def _by_file(changes):
    """Each file the ``changes`` touch: its name, the indexes of its changed rows (numpy),
    and its stamped ones' (row, new horizon) pairs."""
    import numpy as np
    import pyarrow.compute as pc

    ordered = changes.sort_by([("_file", "ascending"), ("_row", "ascending")])
    files = ordered["_file"].combine_chunks().dictionary_encode()
    codes = files.indices.to_numpy(zero_copy_only=False)
    rows = ordered["_row"].to_numpy(zero_copy_only=False).astype(np.uint64)
    stamped = np.flatnonzero(pc.equal(ordered["_action"], STAMP).to_numpy(zero_copy_only=False))
    horizons = ordered["_horizon"].take(stamped).to_pylist()
    bounds = [0, *(np.flatnonzero(np.diff(codes)) + 1).tolist(), len(codes)]
    for start, end in zip(bounds, bounds[1:], strict=False):
        if start == end:
            continue
        at = np.searchsorted(stamped, [start, end])
        yield (files.dictionary[codes[start]].as_py(), rows[start:end],
               [(int(rows[i]), horizons[j]) for j, i in enumerate(stamped[at[0]:at[1]], start=at[0])])


def _stamped_copies(spark, folder: str, metadata: dict, stamps: list) -> list[dict] | None:
    """Each file's stamped records (``stamps``: its local path, ``add`` and (row, new
    horizon) pairs) copied with their new delete horizon into a new file: their ``add``
    actions; None when Arrow does not write this table's files (nothing is left written).
    Only the row groups that hold them are read."""
    import numpy as np
    import pyarrow as pa

    codec = own_commits.session_codec(spark)
    copies = []
    for local, add, stamped in stamps:
        def read(schema, local=local, stamped=stamped):
            parquet = local_records.opened(local)
            groups, places = local_records.row_groups_holding(parquet, np.array([row for row, _ in stamped]))
            taken = parquet.read_row_groups(groups, columns=schema.names).cast(schema, safe=False).take(places)
            at = schema.get_field_index("_delete_horizon")
            horizons = pa.array([horizon for _, horizon in stamped], pa.timestamp("ms", "UTC"))
            return taken.set_column(at, schema.field(at), horizons.cast(schema.field(at).type)).sort_by("offset")

        written = arrow_rewrite.rows_written(metadata, codec, folder, add.get("partitionValues") or {}, read)
        if written is None:
            commit_files.remove_files(folder, copies)
            return None
        copies.append(written)
    return copies


def _wide_bounds(text):
    """A file's statistics once a deletion vector hides some of its rows: the same, with
    ``tightBounds`` false (its minimums and maximums may be of hidden rows now)."""
    try:
        stats = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        stats = None
    if not isinstance(stats, dict) or not stats:
        return text
    return json.dumps({**stats, "tightBounds": False}, separators=(",", ":"))


def vectors_counted(touched: list[dict], emptied: list[dict]) -> tuple[int, int, int]:
    """The deletion vectors Delta's DML with them counts (``DMLWithDeletionVectorsHelper``):
    added (one a touched file), removed and updated: a file's vector replaced is counted
    updated and also removed, and so is one removed with a file every row of which is gone."""
    updated = sum(1 for add in touched if add.get("deletionVector"))
    return len(touched), updated + sum(1 for add in emptied if add.get("deletionVector")), updated


def merge_recorded(deleted: int, stamped: int, touched: list[dict], emptied: list[dict],
                   copies: list[dict]) -> commit_files.Operation:
    """The operation Delta's MERGE of these changes with deletion vectors records: its
    vectors as :func:`vectors_counted` counts them; a stamped record is an updated row, its
    copy an added file."""
    name, parameters = MERGE_RECORDED
    added, removed, updated = vectors_counted(touched, emptied)
    metrics = {
        "numSourceRows": deleted + stamped, "numTargetRowsDeleted": deleted,
        "numTargetRowsMatchedDeleted": deleted, "numTargetRowsInserted": 0, "numTargetRowsUpdated": stamped,
        "numTargetRowsMatchedUpdated": stamped, "numTargetRowsNotMatchedBySourceUpdated": 0,
        "numTargetRowsNotMatchedBySourceDeleted": 0, "numTargetRowsCopied": 0,
        "numTargetFilesAdded": len(copies), "numTargetFilesRemoved": len(emptied),
        "numTargetChangeFilesAdded": 0, "numTargetBytesAdded": sum(a["size"] for a in copies),
        "numTargetBytesRemoved": sum(a["size"] for a in emptied),
        "numTargetDeletionVectorsAdded": added, "numTargetDeletionVectorsRemoved": removed,
        "numTargetDeletionVectorsUpdated": updated,
    }
    return commit_files.Operation(name, parameters, recorded_metrics(name, metrics))
