"""Delta's deletion vectors, read and written without the JVM (the protocol's "Deletion
Vector Format").

A deletion vector hides rows of a data file by their index in it. It is stored in a file
of the table's folder, ``deletion_vector_<uuid>.bin`` (under a folder of random prefix
characters when the descriptor names one): a version byte (1), then each vector at its
``offset`` as its size (4 bytes, big-endian), its data and the data's CRC-32 (4 bytes,
big-endian). The data is a magic number (:data:`MAGIC`, little-endian) and the row indexes
as a 64-bit Roaring bitmap in the portable format of RoaringFormatSpec, which is what
``pyroaring.BitMap64.serialize`` writes (byte for byte what Delta writes, pinned by
``tests/test_deletion_vectors.py``). The ``add`` action names it by a descriptor: storage
type ``u`` and the file's UUID in Z85 (:func:`z85_encode`), its offset, data size and
cardinality (the rows it hides).

Only files (type ``u``) are read and written here; an inline vector (``i``) or an absolute
path (``p``) gives None, and the caller leaves the table to Delta.
"""

from __future__ import annotations

import contextlib
import json
import os
import struct
import uuid
import zlib

__all__ = ["MAGIC", "cardinality", "checksum_counts", "counted", "file_of", "hidden_rows", "histogram_bin", "indexes",
           "remove_file", "turned_on", "visible", "write", "z85_decode", "z85_encode"]

#: The portable RoaringBitmapArray format's magic number (Delta's ``PortableRoaringBitmapArraySerializationFormat``).
MAGIC = 1681511377
#: The format version a deletion vector file starts with.
FORMAT_VERSION = 1
_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_Z85_VALUE = {c: i for i, c in enumerate(_Z85)}
#: Delta's ``DeletedRecordCountsHistogramUtils.BUCKET_BOUNDARIES``: the version checksum
#: counts its files by the rows their deletion vector hides (0 for a file with none).
HISTOGRAM_BOUNDARIES = (0, 1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 2**31 - 1, 2**63 - 1)


def z85_encode(data: bytes) -> str:
    """ZeroMQ's Z85 of ``data`` (a multiple of 4 bytes), as Delta writes a UUID."""
    if len(data) % 4:
        raise ValueError("Z85 encodes whole 4-byte words")
    out = []
    for (word,) in struct.iter_unpack(">I", data):
        digits = []
        for _ in range(5):
            word, digit = divmod(word, 85)
            digits.append(_Z85[digit])
        out.extend(reversed(digits))
    return "".join(out)


def z85_decode(text: str) -> bytes | None:
    """The bytes of Z85 ``text`` (a multiple of 5 characters), or None when it is not Z85."""
    if len(text) % 5 or not set(text) <= _Z85_VALUE.keys():
        return None
    words = []
    for i in range(0, len(text), 5):
        word = 0
        for c in text[i:i + 5]:
            word = word * 85 + _Z85_VALUE[c]
        if word >= 2**32:
            return None
        words.append(word)
    return struct.pack(f">{len(words)}I", *words)


def file_of(folder: str, descriptor: dict) -> str | None:
    """The file holding the deletion vector ``descriptor`` names in the table at ``folder``,
    or None when it is not a file of the table's folder (inline, absolute, unreadable)."""
    if not isinstance(descriptor, dict) or descriptor.get("storageType") != "u":
        return None
    named = descriptor.get("pathOrInlineDv")
    if not isinstance(named, str) or len(named) < 20:
        return None
    prefix, encoded = named[:-20], named[-20:]
    raw = z85_decode(encoded)
    if raw is None or "/" in prefix or prefix in (".", ".."):
        return None
    name = f"deletion_vector_{uuid.UUID(bytes=raw)}.bin"
    return os.path.join(folder, prefix, name) if prefix else os.path.join(folder, name)


def turned_on(configuration: dict) -> bool:
    """Whether a table's properties (``configuration``) turn deletion vectors on
    (``delta.enableDeletionVectors``, as Delta reads the property: case-blind)."""
    return str((configuration or {}).get("delta.enableDeletionVectors", "false")).lower() == "true"


def hidden_rows(folder: str, descriptor: dict | None):
    """The row indexes ``descriptor`` hides, as a ``pyroaring.BitMap64`` (empty without
    one), or None when it is not read here (see the module's text) or its file does not
    hold it whole (size, magic number, CRC or cardinality wrong)."""
    from pyroaring import BitMap64

    if descriptor is None:
        return BitMap64()
    path = file_of(folder, descriptor)
    offset, size = descriptor.get("offset", 1), descriptor.get("sizeInBytes")
    if path is None or not isinstance(offset, int) or not isinstance(size, int) or offset < 1 or size < 4:
        return None
    try:
        with open(path, "rb") as handle:
            handle.seek(offset)
            framed = handle.read(size + 8)
    except OSError:
        return None
    if len(framed) != size + 8 or struct.unpack(">i", framed[:4])[0] != size:
        return None
    data = framed[4:4 + size]
    if struct.unpack(">I", framed[4 + size:])[0] != zlib.crc32(data) or struct.unpack("<i", data[:4])[0] != MAGIC:
        return None
    try:
        rows = BitMap64.deserialize(data[4:])
    except (ValueError, OverflowError):
        return None
    return rows if len(rows) == descriptor.get("cardinality") else None


def indexes(rows):
    """The row indexes of a ``pyroaring.BitMap64`` as a sorted numpy int64 array."""
    import numpy as np

    return np.frombuffer(rows.to_array(), dtype=np.uint64).astype(np.int64)


def visible(hidden, num_rows: int):
    """A numpy mask of a file's ``num_rows`` rows: true where ``hidden`` (its deletion
    vector's rows, a ``pyroaring.BitMap64``) does not hide the row."""
    import numpy as np

    mask = np.ones(num_rows, dtype=bool)
    mask[indexes(hidden)] = False
    return mask


def write(folder: str, vectors: list) -> list[dict]:
    """Write ``vectors`` (``pyroaring.BitMap64`` each, none empty) into one new deletion
    vector file of the table at ``folder``: their descriptors, in order. The file is new
    (a fresh UUID, created exclusively) and no version names it until a commit does; a
    crash before that leaves a file no version lists, which VACUUM removes."""
    identity = uuid.uuid4()
    descriptors, chunks, offset = [], [struct.pack(">B", FORMAT_VERSION)], 1
    for rows in vectors:
        data = struct.pack("<i", MAGIC) + rows.serialize()
        chunks.append(struct.pack(">i", len(data)) + data + struct.pack(">I", zlib.crc32(data)))
        descriptors.append({"storageType": "u", "pathOrInlineDv": z85_encode(identity.bytes), "offset": offset,
                            "sizeInBytes": len(data), "cardinality": len(rows)})
        offset += len(data) + 8
    with open(os.path.join(folder, f"deletion_vector_{identity}.bin"), "xb") as handle:
        handle.write(b"".join(chunks))
        handle.flush()
        os.fsync(handle.fileno())
    return descriptors


def remove_file(folder: str, descriptor: dict) -> None:
    """Delete the deletion vector file ``descriptor`` names, which no commit took."""
    path = file_of(folder, descriptor)
    if path is not None:
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)


def file_and_vector(action: dict) -> tuple[str, str]:
    """A file as a rewrite reads it: its path and its vector (a file given a new vector
    since is not the file read: the vector hides more of its rows)."""
    return action["path"], json.dumps(action.get("deletionVector"), sort_keys=True)


def histogram_bin(cardinality: int) -> int:
    """The bin of Delta's deleted-record histogram a file hiding ``cardinality`` rows is counted in."""
    import bisect

    return min(bisect.bisect_right(HISTOGRAM_BOUNDARIES, cardinality) - 1, len(HISTOGRAM_BOUNDARIES) - 2)


def cardinality(action: dict) -> int:
    """The rows an ``add`` or ``remove`` action's deletion vector hides (0 without one)."""
    return int((action.get("deletionVector") or {}).get("cardinality", 0))


def counted(all_files: list[dict]) -> dict:
    """The version checksum's deletion-vector fields of a version whose live files are
    ``all_files`` (``add`` actions), as Delta counts them where the checksum before had none."""
    counts = [0] * (len(HISTOGRAM_BOUNDARIES) - 1)
    for add in all_files:
        counts[histogram_bin(cardinality(add))] += 1
    return {"numDeletedRecordsOpt": sum(map(cardinality, all_files)),
            "numDeletionVectorsOpt": sum(1 for add in all_files if add.get("deletionVector")),
            "deletedRecordCountsHistogramOpt": {"deletedRecordCounts": counts}}


def checksum_counts(checksum: dict, adds: list[dict], removes: list[dict]) -> dict:
    """The version checksum's deletion-vector fields after ``adds`` and ``removes`` (each
    ``remove`` carrying the vector its file had), from the previous ``checksum``'s, as Delta
    carries them forward; {} when it has none."""
    fields = {}
    if isinstance(checksum.get("numDeletedRecordsOpt"), int):
        fields["numDeletedRecordsOpt"] = (checksum["numDeletedRecordsOpt"] + sum(map(cardinality, adds))
                                          - sum(map(cardinality, removes)))
    if isinstance(checksum.get("numDeletionVectorsOpt"), int):
        fields["numDeletionVectorsOpt"] = (checksum["numDeletionVectorsOpt"]
                                           + sum(1 for a in adds if a.get("deletionVector"))
                                           - sum(1 for r in removes if r.get("deletionVector")))
    histogram = checksum.get("deletedRecordCountsHistogramOpt")
    if isinstance(histogram, dict) and isinstance(histogram.get("deletedRecordCounts"), list):
        counts = list(histogram["deletedRecordCounts"])
        for sign, action in [*((1, a) for a in adds), *((-1, r) for r in removes)]:
            counts[histogram_bin(cardinality(action))] += sign
        fields["deletedRecordCountsHistogramOpt"] = dict(histogram, deletedRecordCounts=counts)
    return fields
