"""A small partition's check over both whole versions, counted in the driver: each version's
records read by Arrow from the files its checksum lists (less the rows their deletion vectors
hide), paired and judged by ``framework.checks.arrow_rules.counted_whole``, with no Spark job.
Spark pairs a small partition's versions the same way, whole, in one task.

Two checks go this way: a retention's (``arrow_scope.counted`` hands it here) and
``validate``'s (:func:`validated`). A version of more than :data:`MAX_WHOLE_ROWS` records, one
whose files are not local or not all there, a vector not read here, or columns of types no
partition table writes leave the count to Spark (None), which then also says what it found.
So does a count that is not clean: Spark shows the offending rows.
"""

from __future__ import annotations

import os

from framework.checks import arrow_rules
from framework.checks.scope import stage_scope, validate_scope
from framework.log import deletion_vectors, local_records, version_checksum

__all__ = ["MAX_WHOLE_ROWS", "retention_counted", "validated"]

#: A check is counted here only when both versions are at most this large: it reads them
#: whole, as Spark pairs a partition below the scoped check's size
#: (``changes.MIN_SCOPED_RECORDS``); above it, Spark's scoped check reads only the change.
MAX_WHOLE_ROWS = 100_000
_NAMES = arrow_rules.RECORD_COLUMNS


def retention_counted(check, state_after):
    """A retention (or DeleteRecords) check's violations per guarantee, its data's bounds and
    scope, over both whole versions; None where Spark counts (the module's text)."""
    return _counted(check.log, check.version_before, check.version_after, check.now_ms, state_after,
                    lambda bounds: stage_scope(check, check.state_before, state_after, bounds))


def validated(check):
    """``validate``'s violations per guarantee (a ``ValidateCheck``), its data's bounds and
    scope, over both whole versions; None where Spark counts (the module's text)."""
    return _counted(check.log, check.version_before, check.version_after, check.now_ms, check.state_after,
                    lambda bounds: validate_scope(check.now_ms, check.version_before, check.version_after,
                                                  check.state_before, check.state_after, bounds,
                                                  appends_only=check.appends_only))


def _counted(log, version_before: int, version_after: int, now_ms: int, state_after, scope_of):
    import pyarrow as pa

    versions = [_whole_version(log.path, version) for version in dict.fromkeys((version_before, version_after))]
    if None in versions or len({schema for schema, _ in versions}) > 1:
        return None
    try:
        tables = [local_records.each_file([(files.folder, path, add) for path, add in zip(files.paths, files.adds,
                                                                                            strict=True)], _records)
                  for _, files in versions]
        if None in tables or not any(tables):
            return None
        schema = next(each for each in tables if each)[0].select(_NAMES).schema
        whole = [pa.concat_tables([schema.empty_table(), *each], promote_options="permissive") for each in tables]
        before, after = whole[0], whole[-1]
        return arrow_rules.counted_whole(before, after, log.spec.config, now_ms, state_after.log_start_offset,
                                         scope_of)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, KeyError, TypeError, OSError):
        return None  # columns of types no partition table writes, or a file gone: Spark says what


def _records(item):
    """A file's records (``item``: its table's folder, its path, its add action): its rows less
    those its deletion vector hides; None when either is not read here."""
    folder, path, add = item
    return local_records.visible_rows(local_records.file_columns(path, _NAMES, whole_ms=True),
                                      deletion_vectors.hidden_rows(folder, add.get("deletionVector")))


def _whole_version(path: str, version: int):
    """(its schema, its files) of a version read whole here, or None."""
    files = version_checksum.plain_files(path, version, deletion_vectors=True)
    records = version_checksum.record_count(files)
    if records is None or records > MAX_WHOLE_ROWS or not all(os.path.isfile(p) for p in files.paths):
        return None
    return files.schema_json, files
