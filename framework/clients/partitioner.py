"""Kafka's default partitioner, bit-compatible with the Java client.

A record without an explicit partition goes to
``(murmur2(key bytes) & 0x7fffffff) % partitions`` (``Utils.murmur2`` and
``Utils.toPositive`` in Kafka's clients), so the same key lands in the same partition
table as in the topic it mirrors.
"""

from __future__ import annotations

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK32 = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's 32-bit murmur2 of ``data``, as the signed int the Java client returns."""
    length = len(data)
    h = (_SEED ^ length) & _MASK32
    whole = length - length % 4
    for i in range(0, whole, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * _M) & _MASK32
        k ^= k >> 24
        k = (k * _M) & _MASK32
        h = (h * _M) & _MASK32
        h ^= k
    # The tail: Java's switch falls through from 3 to 2 to 1.
    tail = length % 4
    if tail == 3:
        h ^= data[whole + 2] << 16
    if tail >= 2:
        h ^= data[whole + 1] << 8
    if tail >= 1:
        h ^= data[whole]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def default_partition(key: bytes, partitions: int) -> int:
    """The partition Kafka's default partitioner picks for a non-null ``key``."""
    if partitions < 1:
        raise ValueError(f"partitions must be >= 1, got {partitions}")
    return (murmur2(key) & 0x7FFFFFFF) % partitions


def default_partitions(keys, partitions: int):
    """:func:`default_partition` of every key of an Arrow binary array at once (numpy's
    uint32 arithmetic wraps as Java's int does); a null key gives -1. The produce path
    runs it on Arrow batches, where a Python call per record would bound its rate."""
    import numpy as np
    import pyarrow as pa

    if partitions < 1:
        raise ValueError(f"partitions must be >= 1, got {partitions}")
    keys = keys.cast(pa.large_binary())  # int64 offsets, whatever the batch held
    offsets_buffer, data_buffer = keys.buffers()[1:3]
    offsets = np.frombuffer(offsets_buffer, dtype=np.int64)[keys.offset:keys.offset + len(keys) + 1]
    data = np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None else np.zeros(0, np.uint8)
    starts, lengths = offsets[:-1], np.diff(offsets)
    m = np.uint32(_M)
    h = np.uint32(_SEED) ^ lengths.astype(np.uint32)
    words = lengths // 4
    for i in range(int(words.max(initial=0))):
        rows = np.flatnonzero(words > i)
        at = starts[rows] + 4 * i
        k = (data[at].astype(np.uint32) | (data[at + 1].astype(np.uint32) << 8)
             | (data[at + 2].astype(np.uint32) << 16) | (data[at + 3].astype(np.uint32) << 24))
        k *= m
        k ^= k >> np.uint32(24)
        k *= m
        h[rows] = (h[rows] * m) ^ k
    tail, whole = lengths % 4, starts + 4 * words
    for size, shift in ((3, 16), (2, 8)):
        rows = np.flatnonzero(tail >= size)
        h[rows] ^= data[whole[rows] + size - 1].astype(np.uint32) << np.uint32(shift)
    rows = np.flatnonzero(tail >= 1)
    h[rows] = (h[rows] ^ data[whole[rows]].astype(np.uint32)) * m
    h ^= h >> np.uint32(13)
    h *= m
    h ^= h >> np.uint32(15)
    chosen = ((h & np.uint32(0x7FFFFFFF)) % np.uint32(partitions)).astype(np.int32)
    if keys.null_count:
        chosen[keys.is_null().to_numpy(zero_copy_only=False)] = -1
    return chosen
