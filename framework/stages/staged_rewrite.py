"""A batch's compaction rewrites written at once: by Arrow into each table's folder, or in
one Spark job, then moved into each table.

Where Arrow writes the tables' files (``arrow_rewrite``; a local warehouse), the batch's
decided changes are brought to the driver in one Spark job and each member's rewrite is
written straight into its own table's folder, a touched file per core: no staging folder
and no write job. Otherwise:

Each small partition's rewrite was a ``writeFiles`` of its own: a Spark job and Delta's
planning of the write, about 0.1 s warm and up to 1 s in a new process, 100 times for a
first maintain of 100 partitions. A batch (:mod:`framework.stages.compaction_batch`)
writes every member's rewrite with one ``writeFiles``, on a transaction of a staging
folder in the warehouse's ``_topiclake`` that is never committed (no Delta log is made
there): its metadata is the members' own with ``_member`` as the first partition column,
so Delta's writer makes exactly the files each member's ``writeFiles`` would make (one a
segment in offset order, the change data feed's rows in ``_change_data``, each data file's
statistics), in a folder per member. Each member's files are then moved into its table's
folder (a rename on the local file system) and their actions given paths relative to it;
the member's commit takes them when the version it reads still holds every file they
replace (``file_rewrite.commit``), else deletes them and writes its rewrite itself.

A killed run can leave a staging folder behind, or moved files no version lists (as a
killed ``writeFiles`` leaves files): a staging folder older than
:data:`ABANDONED_AFTER_S` is deleted by the next batch, and VACUUM deletes the others.
Only a local warehouse stages (a rename elsewhere is a copy).
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from typing import Sequence
from urllib.parse import unquote

from framework import faults
from framework.local_rows import local_frame
from framework.log import version_checksum
from framework.log.commit_log import local_folder
from framework.log.delta_transactions import DeltaJvm, forget_table
from framework.stages import arrow_rewrite, file_rewrite
from framework.stages.file_rewrite import Staged

__all__ = ["ABANDONED_AFTER_S", "MEMBER", "stage"]

MEMBER = "_member"
#: A staging folder this old was left by a killed run (a batch is written in seconds).
ABANDONED_AFTER_S = 3600


def stage(spark, internal_root: str, members: Sequence[tuple[str, version_checksum.PlainFiles, frozenset[str]]],
          changes) -> list[Staged | None]:
    """Each member's rewrite written (None for a member that touches no file): ``members``
    are (table path, the planned version's files, the names of the files it touches);
    ``changes`` (``_member``, offset, _action, _horizon) what the batch does to the records.
    Empty when the batch cannot stage (a remote warehouse, members of different Delta
    properties, more than one task's worth of touched files)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    root = local_folder(internal_root)
    touching = [(place, path, files, touched) for place, (path, files, touched) in enumerate(members) if touched]
    if root is None or not touching or len({_writer_properties(files) for _, _, files, _ in touching}) != 1:
        return []
    # each touched file's add action, with its member
    adds = [(place, add) for place, _, files, touched in touching for add in files.adds
            if version_checksum.file_name(add["path"]) in touched]
    if sum(int(add["size"]) for _, add in adds) > file_rewrite.ONE_TASK_BYTES:
        return []
    _delete_abandoned(os.path.join(root, "staged_rewrites"))  # what a killed Spark staging left
    delta = DeltaJvm(spark)
    first_path, first_files = touching[0][1], touching[0][2]
    by_arrow = _staged_by_arrow(delta, len(members), touching, changes)
    if by_arrow is not None:
        return by_arrow
    folder = os.path.join(root, "staged_rewrites", uuid.uuid4().hex)
    try:
        txn = delta.delta_log(folder).startTransaction()
        txn.updateMetadata(_staging_metadata(delta, first_path), False)
        schema = StructType.fromJson(json.loads(first_files.schema_json))
        # each touched file's member and partition values (a read of many tables' files cannot
        # take them from the folders, as one table's read does with its ``basePath``)
        partitioning = sorted(adds[0][1].get("partitionValues") or {})
        placed = local_frame(spark, [(version_checksum.file_name(add["path"]), place,
                                      *(add["partitionValues"][c] for c in partitioning)) for place, add in adds],
                             ", ".join(["_file STRING", f"{MEMBER} INT", *(f"`{c}` STRING" for c in partitioning)]))
        types = {field.name: field.dataType.simpleString() for field in schema.fields}
        paths = [p for _, _, files, touched in touching for p in files.paths
                 if version_checksum.file_name(p) in touched]
        rows = (spark.read.schema(schema).parquet(*paths)
                .selectExpr(*(f"`{c}`" for c in schema.fieldNames() if c not in partitioning),
                            "_metadata.file_name AS _file")
                .join(F.broadcast(placed.selectExpr("_file", MEMBER, *(f"CAST(`{c}` AS {types[c]}) AS `{c}`"
                                                                        for c in partitioning))), "_file")
                .join(F.broadcast(changes.selectExpr(MEMBER, "`offset`", "_action", "_horizon")), [MEMBER, "offset"],
                      "left"))
        feed = file_rewrite.change_feed(first_files.configuration)
        out = file_rewrite.rewritten_rows(rows, schema.fieldNames(), feed, carried=(MEMBER,))
        out = out.coalesce(1).sortWithinPartitions(MEMBER, "_segment", "offset")
        with delta.active():
            written = [json.loads(action.json()) for action in delta.items(
                txn.writeFiles(out._jdf, delta.none(), False, delta.seq([])))]
        staged: list[Staged | None] = [None] * len(members)
        for place, path, _, touched in touching:
            staged[place] = _moved(folder, local_folder(path), place, touched, written)
        faults.reached("compact.after_staging", members=len(touching))
        return staged
    finally:
        forget_table(spark, folder)
        shutil.rmtree(folder, ignore_errors=True)


def _staged_by_arrow(delta: DeltaJvm, count: int, touching: list, changes) -> list[Staged | None] | None:
    """Each member's rewrite written by Arrow straight into its own table's folder (no
    staging folder, no Spark job; ``arrow_rewrite.staged``), or None when Arrow does not
    write these tables' files (nothing is written)."""
    import pyarrow.compute as pc

    def marks():
        decided = changes.selectExpr(MEMBER, "`offset`", "_action", "_horizon").toArrow()  # one Spark job
        return [arrow_rewrite.marks_of(decided.filter(pc.equal(decided.column(MEMBER), place)))
                for place, _, _, _ in touching]

    feed = file_rewrite.change_feed(touching[0][2].configuration)
    written = arrow_rewrite.staged(delta, delta.delta_log(touching[0][1]).startTransaction(),
                                   [(files, touched) for _, _, files, touched in touching], marks, feed,
                                   file_rewrite.ONE_TASK_BYTES)
    if written is None:
        return None
    staged: list[Staged | None] = [None] * count
    for (place, _, _, touched), (actions, paths) in zip(touching, written, strict=True):
        staged[place] = Staged(touched=touched, actions=tuple(actions), files=tuple(paths))
    faults.reached("compact.after_staging", members=len(touching))
    return staged


def _writer_properties(files: version_checksum.PlainFiles) -> str:
    """A table's Delta properties (they shape what Delta's writer writes; topiclake's own,
    such as the partition's number, differ from member to member)."""
    return json.dumps({k: v for k, v in files.configuration.items() if k.startswith("delta.")}, sort_keys=True)


def _staging_metadata(delta: DeltaJvm, path: str):
    """The table's metadata with ``_member`` (an integer) as its first partition column."""
    metadata = json.loads(delta.delta_log(path).startTransaction().metadata().json())["metaData"]
    schema = json.loads(metadata["schemaString"])
    schema["fields"].insert(0, {"name": MEMBER, "type": "integer", "nullable": False, "metadata": {}})
    staging = {**metadata, "id": str(uuid.uuid4()), "schemaString": json.dumps(schema),
               "partitionColumns": [MEMBER, *metadata["partitionColumns"]]}
    return delta.cls("org.apache.spark.sql.delta.actions.Action").fromJson(json.dumps({"metaData": staging}))


def _moved(folder: str, table: str, place: int, touched: frozenset[str], written: list[dict]) -> Staged:
    """Member ``place``'s files moved from the staging ``folder`` into its ``table`` folder,
    and their actions with paths relative to it."""
    actions, moved = [], []
    marker = f"{MEMBER}={place}/"
    for one in written:
        kind, action = next(iter(one.items()))
        values = dict(action["partitionValues"])
        if values.pop(MEMBER) != str(place):
            continue
        target = action["path"].replace(marker, "", 1)  # (as Delta encodes a path in an action)
        source, moved_to = os.path.join(folder, unquote(action["path"])), os.path.join(table, unquote(target))
        os.makedirs(os.path.dirname(moved_to), exist_ok=True)
        os.replace(source, moved_to)
        moved.append(moved_to)
        actions.append({kind: {**action, "path": target, "partitionValues": values}})
    return Staged(touched=touched, actions=tuple(actions), files=tuple(moved))


def _delete_abandoned(parent: str) -> None:
    """Staging folders a killed run left (older than :data:`ABANDONED_AFTER_S`)."""
    try:
        names = os.listdir(parent)
    except FileNotFoundError:
        return
    for name in names:
        path = os.path.join(parent, name)
        try:
            if time.time() - os.stat(path).st_mtime > ABANDONED_AFTER_S:
                shutil.rmtree(path, ignore_errors=True)
        except FileNotFoundError:
            pass
