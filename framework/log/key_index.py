"""A large data file's keys and offsets, kept beside the table, so that a compaction finds
the clean records of its dirty keys without reading the file's key column.

On a table whose owner turned deletion vectors on, a compaction leaves its clean files in
place, and every run after it reads each of them again for the few records of the run's
dirty keys. Decoding and hashing every clean key was most of such a run (0.17 of 0.23 s
at 5M clean records), and the part that grew with the clean section. Kafka's cleaner
streams its whole log too; a file that never changes can be looked up instead.

The index of a data file is built the first time the compaction reads the file whole
(:func:`build`, 0.3 to 0.4 s for 2.5M records), only for files of :data:`MIN_ROWS`
records or more, and is read after that by memory map (:func:`load`): finding the rows of
50k keys among 2.5M is a binary search over the keys' hashes and a comparison of the
proposed rows' key bytes, about 15 ms. A hash only proposes a row; the key's bytes decide,
so a lookup is exact.

Layout: ``<table>/_topiclake_key_index/<the data file's path in the table>.keys``, an Arrow
IPC file, uncompressed (read in place):

- ``key``: each row's key (fixed-size binary), zero-padded, its byte length in the last
  byte (so two keys that differ only by trailing zero bytes stay apart);
- ``offset``: each row's offset;
- ``hash``: the keys' hashes (:func:`_hashes`), ascending, and ``row``: the row of each.

Its metadata names the data file's size and record count: an index never answers for a
file it was not built from. The folder starts with ``_``, so Delta's VACUUM and readers
pass it by (``DeltaTableUtils.isHiddenDirectory``); the vacuum stage deletes the indexes of
data files gone (:func:`sweep`). An index that is missing, torn or stale is not used:
the file's columns are read as before.

An index costs disk (about a quarter of its data file's size with 11-byte keys). A table's
owner who would rather pay the reads turns them off as deletion vectors are turned on, by a
table property: ``ALTER TABLE ... SET TBLPROPERTIES ('topiclake.keyIndexes' = 'false')``.
Then none is built or read, and the next vacuum deletes those there are.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass

from framework.log import file_stats, version_checksum

__all__ = ["FOLDER", "MIN_ROWS", "PROPERTY", "KeyIndex", "build", "large", "load", "of_file", "path_of", "sweep",
           "turned_on"]

#: Where a table's key indexes live (hidden from Delta's listing, as ``_delta_log`` is).
FOLDER = "_topiclake_key_index"
#: The table property that turns a table's key indexes off (``'false'``; the module's text).
PROPERTY = "topiclake.keyIndexes"
#: Smaller files are read whole: below about a million records, reading and hashing their
#: keys costs about what looking 50k keys up does (20 ms at 500k records, either way).
MIN_ROWS = 1_048_576
#: Longer keys are not indexed: the index holds every key at the longest one's width.
MAX_KEY_BYTES = 247
_SUFFIX = ".keys"
_TEMPORARY = ".tmp"
#: A temporary older than this was left by a crash, not a build under way.
_ABANDONED_MS = 3_600_000
_FORMAT = b"1"


def path_of(table: str, data_file: str) -> str:
    """Where the index of ``data_file`` (an absolute path inside ``table``) lives."""
    return os.path.join(table, FOLDER, os.path.relpath(data_file, table) + _SUFFIX)


def _padded(keys, width: int):
    """Each of ``keys`` (an Arrow binary or string array without nulls, none longer than
    ``width - 1`` bytes) as ``width`` bytes: zero-padded, its byte length last; a numpy
    ``(len(keys), width)`` uint8 matrix."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    data = keys.cast(pa.binary())
    lengths = pc.binary_length(data)
    pads = pc.binary_repeat(pa.scalar(b"\x00", pa.binary()), pc.subtract(width - 1, lengths))
    last = pa.array([bytes([n]) for n in range(256)], pa.binary()).take(lengths)
    joined = pc.binary_join_element_wise(data, pads, last, pa.scalar(b"", pa.binary()))
    if len(joined) == 0:
        return np.zeros((0, width), np.uint8)
    start = int(np.frombuffer(joined.buffers()[1], np.int32, 1, joined.offset * 4)[0])
    return np.frombuffer(joined.buffers()[2], np.uint8, len(joined) * width, start).reshape(-1, width)


def _hashes(padded):
    """A 64-bit hash of each row of ``padded`` (its width a multiple of 8): its words mixed
    as splitmix64 mixes (any well-spread function serves: a hash only proposes rows)."""
    import numpy as np

    words = np.ascontiguousarray(padded).view(np.uint64)
    hashed = np.full(len(padded), 0x9E3779B97F4A7C15, np.uint64)
    for column in range(words.shape[1]):
        hashed ^= words[:, column]
        hashed *= np.uint64(0xBF58476D1CE4E5B9)
        hashed ^= hashed >> np.uint64(31)
    return hashed


def build(table: str, data_file: str, size: int, keys, offsets) -> bool:
    """Write the index of ``data_file`` (``size`` bytes) from its rows' ``keys`` and
    ``offsets`` (Arrow arrays, in row order), replacing any; False, with nothing written,
    when a key is null or longer than :data:`MAX_KEY_BYTES`, or the keys are neither
    STRING nor BINARY as a partition table's files hold them."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.ipc as ipc

    keys = keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys
    offsets = offsets.combine_chunks() if isinstance(offsets, pa.ChunkedArray) else offsets
    if (not isinstance(size, int) or not (pa.types.is_string(keys.type) or pa.types.is_binary(keys.type))
            or keys.null_count or offsets.null_count or len(keys) != len(offsets) or len(keys) >= 2**31):
        return False
    longest = pc.max(pc.binary_length(keys.cast(pa.binary()))).as_py() or 0
    if longest > MAX_KEY_BYTES:
        return False
    width = (longest + 1 + 7) // 8 * 8
    padded = _padded(keys, width)
    hashed = _hashes(padded)
    order = np.argsort(hashed)
    table_of_keys = pa.table({
        "key": pa.FixedSizeBinaryArray.from_buffers(pa.binary(width), len(keys), [None, pa.py_buffer(padded)]),
        "offset": offsets.cast(pa.int64()),
        "hash": pa.array(hashed[order]),
        "row": pa.array(order.astype(np.int32)),
    }).replace_schema_metadata({b"topiclake.key_index": _FORMAT, b"topiclake.data_size": str(size).encode(),
                                b"topiclake.data_rows": str(len(keys)).encode(),
                                b"topiclake.key_type": b"binary" if pa.types.is_binary(keys.type) else b"string"})
    target = path_of(table, data_file)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    temporary = f"{target}.{uuid.uuid4().hex}{_TEMPORARY}"
    try:
        with ipc.new_file(temporary, table_of_keys.schema) as writer:
            writer.write_table(table_of_keys)
        os.replace(temporary, target)  # whole or not there: a reader never sees a torn index
    except OSError:
        return False  # (a full disk, the folder swept away): the file is read whole next time
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)
    return True


@dataclass(frozen=True)
class KeyIndex:
    """One data file's index, read in place (:func:`load`)."""

    keys: object  # numpy (rows, width) uint8: each row's padded key
    offsets: object  # numpy int64, each row's offset
    hashes: object  # numpy uint64, ascending
    rows: object  # numpy int32, the row of each hash
    binary: bool = False  # the keys are BINARY (else STRING)

    def rows_of(self, wanted):
        """The rows (sorted numpy int64) whose key is one of ``wanted`` (an Arrow string or
        binary array without nulls or repeats)."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        width = self.keys.shape[1]
        wanted = wanted.combine_chunks() if isinstance(wanted, pa.ChunkedArray) else wanted
        wanted = wanted.filter(pc.less_equal(pc.binary_length(wanted.cast(pa.binary())), width - 1))
        padded = _padded(wanted, width)
        hashed = _hashes(padded)
        order = np.argsort(hashed)  # (a search of sorted needles walks the index once: 4 x faster)
        hashed, padded = hashed[order], padded[order]
        low = np.searchsorted(self.hashes, hashed, side="left")
        counts = np.searchsorted(self.hashes, hashed, side="right") - low
        which = np.repeat(np.arange(len(hashed)), counts)
        places = np.repeat(low - np.cumsum(counts) + counts, counts) + np.arange(int(counts.sum()))
        proposed = self.rows[places].astype(np.int64)
        # the key's bytes decide, compared a word at a time
        words = width // 8
        same = (self.keys.view(np.uint64).reshape(-1, words)[proposed]
                == np.ascontiguousarray(padded).view(np.uint64).reshape(-1, words)[which]).all(axis=1)
        return np.sort(proposed[same])  # (each row has one key, and ``wanted`` each key once)

    def keys_at(self, rows):
        """The keys at ``rows`` (numpy int64), as an Arrow array of the file's key type."""
        import numpy as np
        import pyarrow as pa

        padded = self.keys[rows]
        lengths = padded[:, -1].astype(np.int64)
        kept = np.arange(padded.shape[1] - 1) < lengths[:, None]
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
        data = padded[:, :-1][kept]
        return pa.Array.from_buffers(pa.binary() if self.binary else pa.string(), len(rows),
                                     [None, pa.py_buffer(offsets), pa.py_buffer(data.tobytes())])

    def offsets_at(self, rows):
        """The offsets at ``rows`` (numpy int64), as numpy int64."""
        return self.offsets[rows]


def load(table: str, data_file: str, size: int, records: int | None) -> KeyIndex | None:
    """The index of ``data_file`` when one was built from this file (``size`` bytes,
    ``records`` rows), else None."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.ipc as ipc

    target = path_of(table, data_file)
    if records is None or not os.path.isfile(target):
        return None
    try:
        read = ipc.open_file(pa.memory_map(target)).read_all()
    except (OSError, pa.ArrowException):
        return None
    metadata = read.schema.metadata or {}
    if (metadata.get(b"topiclake.key_index") != _FORMAT
            or metadata.get(b"topiclake.data_size") != str(size).encode()
            or metadata.get(b"topiclake.data_rows") != str(records).encode() or read.num_rows != records
            or metadata.get(b"topiclake.key_type") not in (b"binary", b"string")
            or read.schema.names != ["key", "offset", "hash", "row"]):
        return None
    # (one chunk, used in place: combining chunks would copy the mapped pages)
    columns = [read.column(name).chunk(0) if read.column(name).num_chunks == 1 else read.column(name).combine_chunks()
               for name in read.schema.names]
    key, offset, hashed, row = columns
    if not pa.types.is_fixed_size_binary(key.type) or any(column.null_count for column in columns):
        return None
    width = key.type.byte_width
    keys = np.frombuffer(key.buffers()[1], np.uint8, records * width, key.offset * width).reshape(-1, width)
    return KeyIndex(keys, offset.to_numpy(), hashed.to_numpy(), row.to_numpy(),
                    metadata.get(b"topiclake.key_type") == b"binary")


def large(add: dict) -> bool:
    """Whether a data file (its ``add``) holds :data:`MIN_ROWS` records or more by its
    statistics: the files worth an index."""
    records = file_stats.of(add).records
    return records is not None and records >= MIN_ROWS


def turned_on(configuration: dict | None) -> bool:
    """Whether a table's properties (``configuration``) leave its key indexes on: unless
    :data:`PROPERTY` is ``false`` (case-blind, as Delta reads its own switches)."""
    return str((configuration or {}).get(PROPERTY, "true")).lower() != "false"


def of_file(table: str, data_file: str, add: dict, configuration: dict | None) -> KeyIndex | None:
    """The index of a large data file of ``table`` (its path and ``add``) built from that
    file, unless the table's properties (``configuration``) turn indexes off; else None."""
    if not (turned_on(configuration) and large(add)):
        return None
    return load(table, data_file, add.get("size"), file_stats.of(add).records)


def sweep(table: str, now_ms: int, version: int) -> int:
    """Delete the indexes whose data file is gone (vacuumed), every index when ``version``'s
    properties turn them off, and the temporaries a crash left (older than an hour at
    ``now_ms``); how many were deleted."""
    root = os.path.join(table, FOLDER)
    if not os.path.isdir(root):
        return 0
    # (a version whose checksum does not hold its properties keeps them: unknown is not off)
    kept = turned_on(version_checksum.configuration(table, version))
    deleted = 0
    for folder, _, names in os.walk(root):
        for name in names:
            index = os.path.join(folder, name)
            try:
                if name.endswith(_SUFFIX):
                    if kept and os.path.exists(os.path.join(table, os.path.relpath(index, root)[: -len(_SUFFIX)])):
                        continue
                elif os.stat(index).st_mtime_ns // 1_000_000 > now_ms - _ABANDONED_MS:
                    continue
                os.remove(index)
                deleted += 1
            except FileNotFoundError:
                pass  # renamed or swept meanwhile
    return deleted
