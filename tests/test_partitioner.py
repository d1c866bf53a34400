"""Kafka's default partitioner, against the Java client's own test vectors."""

import pytest

from framework.clients.partitioner import default_partition, default_partitions, murmur2

# From Kafka's UtilsTest.testMurmur2 (clients/src/test/java/org/apache/kafka/common/utils).
KAFKA_VECTORS = {
    "21": -973932308,
    "foobar": -790332482,
    "a-little-bit-long-string": -985981536,
    "a-little-bit-longer-string": -1486304829,
    "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    "abc": 479470107,
}


@pytest.mark.parametrize("text,expected", sorted(KAFKA_VECTORS.items()))
def test_murmur2_matches_kafka(text, expected):
    assert murmur2(text.encode("utf-8")) == expected


def test_every_tail_length_gives_a_signed_32_bit_hash():
    # Tails of 0..3 bytes take different branches of the Java switch; the vectors above
    # cover lengths 2, 3, 6, 24, 26 and 48 (tails 2, 3, 2, 0, 2, 0); add tail 1.
    for n in range(9):
        value = murmur2(b"k" * n)
        assert -(2**31) <= value < 2**31
    assert len({murmur2(b"k" * n) for n in range(9)}) == 9


def test_default_partition_is_toPositive_mod():
    # (murmur2 & 0x7fffffff) % n, as Utils.toPositive(Utils.murmur2(key)) % numPartitions.
    for key in (b"a", b"b", b"c", b"order-42", b"\xff\x00\x10"):
        assert default_partition(key, 3) == (murmur2(key) & 0x7FFFFFFF) % 3
    assert [default_partition(k.encode(), 3) for k in ("a", "b", "c", "order-42")] == [1, 2, 1, 0]


def test_partitions_must_be_positive():
    with pytest.raises(ValueError):
        default_partition(b"a", 0)


def _corpus() -> list:
    """Kafka's vectors, every tail length, non-ASCII and zero bytes, and random keys of 0-70
    bytes (seeded), with nulls between."""
    import random

    rng = random.Random(20261126)
    keys = [text.encode("utf-8") for text in KAFKA_VECTORS] + [b"", b"\x00", b"\xff" * 5, "é-ü".encode()]
    keys += [b"k" * n for n in range(12)]
    keys += [bytes(rng.randrange(256) for _ in range(rng.randrange(71))) for _ in range(3000)]
    return [None if i % 97 == 0 else key for i, key in enumerate(keys)]


@pytest.mark.parametrize("partitions", [1, 2, 3, 12, 1000, 2**31 - 1])
def test_vectorised_partitioner_agrees_with_the_pure_one(partitions):
    # The produce path runs default_partitions on Arrow batches; default_partition is the
    # rule. They must agree on every key (a null key: -1).
    import pyarrow as pa

    keys = _corpus()
    expected = [-1 if key is None else default_partition(key, partitions) for key in keys]
    assert default_partitions(pa.array(keys, pa.binary()), partitions).tolist() == expected
    # an Arrow slice (offset into shared buffers), and UTF-8 strings hashed as their bytes
    assert default_partitions(pa.array(keys, pa.binary()).slice(7, 500), partitions).tolist() == expected[7:507]
    texts = ["order-42", "é", "", None, "a-little-bit-longer-string"]
    assert default_partitions(pa.array(texts, pa.string()), partitions).tolist() == [
        -1 if t is None else default_partition(t.encode(), partitions) for t in texts]


def test_vectorised_partitioner_of_no_keys_and_bad_counts():
    import pyarrow as pa

    assert default_partitions(pa.array([], pa.binary()), 3).tolist() == []
    assert default_partitions(pa.array([None, None], pa.binary()), 3).tolist() == [-1, -1]
    with pytest.raises(ValueError):
        default_partitions(pa.array([b"a"]), 0)
