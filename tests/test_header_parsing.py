"""KIP-280's header version (CONTRACT section 4), pinned byte by byte.

A header value is read as a signed 64-bit integer: as decimal text when its bytes are an
optional minus sign and ASCII digits and nothing else (out of the 64-bit range: missing),
else, when it is exactly 8 bytes, as a big-endian two's-complement integer, else it is
missing. The last header with the name counts, and names are case-sensitive.

Two implementations must agree with the table below, whose expected values are written
out by hand: the pure rule (``framework.cleaner.rules.header_version``) and its one Spark
SQL expression (``framework.cleaner.spark_sql``), reached both the way the guarantee checks
read a record's headers and the way the compaction engine ranks records
(``compaction._rank_sql`` under the header strategy).
"""

from __future__ import annotations

import pytest

INT64_MAX = 9223372036854775807
INT64_MIN = -9223372036854775808

#: (what it is, the header value's bytes, the signed 64-bit value or None = missing)
CASES = [
    # decimal text: an optional minus sign and ASCII digits, nothing else
    ("digit", b"7", 7),
    ("negative", b"-7", -7),
    ("leading zeros", b"007", 7),
    ("negative leading zeros", b"-007", -7),
    ("zero", b"0", 0),
    ("minus zero", b"-0", 0),
    ("many leading zeros", b"00000000000000000000007", 7),
    ("seven digits", b"1234567", 1234567),
    ("nine digits", b"123456789", 123456789),
    ("eight ASCII digits are decimal, not big-endian", b"12345678", 12345678),
    ("eight bytes, minus and digits: decimal", b"-1234567", -1234567),
    ("decimal INT64_MAX", b"9223372036854775807", 9223372036854775807),
    ("decimal INT64_MAX + 1: out of range", b"9223372036854775808", None),
    ("decimal INT64_MIN", b"-9223372036854775808", -9223372036854775808),
    ("decimal INT64_MIN - 1: out of range", b"-9223372036854775809", None),
    ("twenty digits: out of range", b"99999999999999999999", None),
    # not decimal text, not 8 bytes: missing
    ("trailing newline", b"7\n", None),
    ("leading space", b" 7", None),
    ("trailing space", b"7 ", None),
    ("leading tab", b"\t7", None),
    ("plus sign", b"+7", None),
    ("empty", b"", None),
    ("minus alone", b"-", None),
    ("double minus", b"--7", None),
    ("exponent", b"1e3", None),
    ("hex text", b"0x10", None),
    ("decimal point", b"7.0", None),
    ("word", b"abc", None),
    ("arabic-indic digit three", "\u0663".encode(), None),  # b"\xd9\xa3"
    ("fullwidth digit seven", "\uff17".encode(), None),
    ("not UTF-8", b"\xff\xfe", None),
    ("seven bytes", b"\x00\x00\x00\x00\x00\x00\x2a", None),
    ("nine bytes", b"\x00\x00\x00\x00\x00\x00\x00\x00\x01", None),
    ("nine bytes of 0xff", b"\xff" * 9, None),
    # exactly 8 bytes, not decimal text: big-endian two's complement
    ("big-endian 256", b"\x00\x00\x00\x00\x00\x00\x01\x00", 256),
    ("big-endian 42", b"\x00\x00\x00\x00\x00\x00\x00\x2a", 42),
    ("big-endian zero", b"\x00\x00\x00\x00\x00\x00\x00\x00", 0),
    ("big-endian -2", b"\xff\xff\xff\xff\xff\xff\xff\xfe", -2),
    ("eight bytes of 0xff (not UTF-8)", b"\xff\xff\xff\xff\xff\xff\xff\xff", -1),
    ("big-endian INT64_MIN", b"\x80\x00\x00\x00\x00\x00\x00\x00", -9223372036854775808),
    ("big-endian INT64_MAX", b"\x7f\xff\xff\xff\xff\xff\xff\xff", 9223372036854775807),
    ("seven digits and a newline: big-endian", b"1234567\n", 3544952156018063114),        # 0x313233343536370a
    ("a space and seven digits: big-endian", b" 1234567", 2319690478573139511),           # 0x2031323334353637
    ("seven digits and a space: big-endian", b"1234567 ", 3544952156018063136),           # 0x3132333435363720
    ("eight letters: big-endian", b"ABCDEFGH", 4702394921427289928),                      # 0x4142434445464748
    ("four arabic-indic threes: big-endian", "\u0663\u0663\u0663\u0663".encode(),
     -2764126448521061981),                                                               # 0xd9a3d9a3d9a3d9a3
    # no value at all
    ("null value", None, None),
]

IDS = [label for label, _, _ in CASES]


def test_the_table_is_what_it_says():
    """The table itself: sizes as labelled, and expected values inside 64 bits."""
    assert INT64_MAX == 2**63 - 1 and INT64_MIN == -(2**63)
    for label, value, expected in CASES:
        assert expected is None or INT64_MIN <= expected <= INT64_MAX, label
        if label.startswith("big-endian") or ": big-endian" in label or label.startswith("eight bytes"):
            assert len(value) == 8, label
    assert dict((label, value) for label, value, _ in CASES)["arabic-indic digit three"] == b"\xd9\xa3"
    assert len(set(IDS)) == len(IDS)


# ------------------------------------------------------------- (a) the pure rule
@pytest.mark.parametrize("label, value, expected", CASES, ids=IDS)
def test_the_pure_rule(label, value, expected):
    from framework.cleaner.rules import header_version

    assert header_version(value) == expected


# ------------------------------------------------ (b) the guarantee checks' reading
HEADER_SCHEMA = "array<struct<key: string, value: binary>>"


def _headers_frame(spark, rows):
    """A frame (i, headers) with headers ARRAY<STRUCT<key STRING, value BINARY>>, as in a
    partition table; ``rows`` is a list of header lists [(name, bytes or None), ...]."""
    return spark.createDataFrame(
        [(i, [(name, None if value is None else bytearray(value)) for name, value in headers])
         for i, headers in enumerate(rows)],
        f"i int, headers {HEADER_SCHEMA}",
    )


def _mismatches(got: dict, wanted: dict) -> list[str]:
    return [f"{label}: got {got.get(label)!r}, expected {wanted[label]!r}"
            for label in wanted if got.get(label, "absent") != wanted[label]]


def test_the_guarantee_checks_read_header_versions_as_the_table_says(spark):
    from framework.cleaner.spark_sql import header_version

    frame = _headers_frame(spark, [[("version", value)] for _, value, _ in CASES])
    got = {IDS[r["i"]]: r["v"] for r in frame.select("i", header_version("version").alias("v")).collect()}
    assert not _mismatches(got, {label: expected for label, _, expected in CASES})


# ------------------------------------------------------- (c) the engine's reading
def _header_spec(name: str = "version"):
    from framework.spec import parse_spec

    return parse_spec({"topic": "t", "partitions": 1, "config": {
        "compaction.strategy": "header", "compaction.strategy.header": name}}, "t.yaml")


def test_the_compaction_engine_ranks_header_versions_as_the_table_says(spark):
    from framework.stages.compaction import _rank_sql

    config = _header_spec().config
    assert config.compaction_strategy == "header"
    frame = spark.createDataFrame(
        [(i, None if value is None else bytearray(value)) for i, (_, value, _) in enumerate(CASES)],
        "offset bigint, _hv binary",
    )
    rows = frame.selectExpr("`offset`", f"{_rank_sql(config)} AS r").collect()
    got = {IDS[r["offset"]]: (r["r"]["has"], r["r"]["v"]) for r in rows}
    # missing: the record does not have the version, and ranks as version 0 below every one that has it
    wanted = {label: (expected is not None, 0 if expected is None else expected) for label, _, expected in CASES}
    assert not _mismatches(got, wanted)
    assert all(r["r"]["offset"] == r["offset"] for r in rows)


# ------------------------------------- the last header with the name, case-sensitive
#: (headers of one record, the version under the name "version")
LAST_HEADER = [
    ([("version", b"1"), ("version", b"9")], 9),                 # the last one counts, not the first or the largest
    ([("version", b"9"), ("version", b"1")], 1),
    ([("version", b"5"), ("version", b"junk")], None),           # the last one does not parse: missing
    ([("version", b"5"), ("version", None)], None),              # the last one has no value: missing
    ([("version", b"3"), ("Version", b"8")], 3),                 # names are case-sensitive
    ([("VERSION", b"8"), ("Version", b"8"), ("version ", b"8")], None),
    ([("v", b"8"), ("version", b"\x00\x00\x00\x00\x00\x00\x00\x07"), ("versions", b"9")], 7),
    ([], None),
]


def test_the_last_header_with_the_name_counts_and_names_are_case_sensitive_pure():
    from framework.cleaner.rules import header_version, last_header

    assert [header_version(last_header(headers, "version")) for headers, _ in LAST_HEADER] == [
        expected for _, expected in LAST_HEADER]


def test_the_last_header_with_the_name_counts_and_names_are_case_sensitive_in_the_checks(spark):
    from framework.cleaner.spark_sql import header_version

    quoted = "it's \\ v"  # a name SQL must quote: a quote and a backslash
    frame = _headers_frame(spark, [headers for headers, _ in LAST_HEADER]
                           + [[(quoted, b"4"), ("it's v", b"5"), ("it's \\ V", b"6")]])
    rows = frame.select("i", header_version("version").alias("v"), header_version(quoted).alias("q")).collect()
    got = {r["i"]: r["v"] for r in rows}
    assert [got[i] for i in range(len(LAST_HEADER))] == [expected for _, expected in LAST_HEADER]
    assert [r["q"] for r in sorted(rows, key=lambda r: r["i"])] == [None] * len(LAST_HEADER) + [4]


def test_the_engine_compacts_by_the_last_header_with_the_name_case_sensitively(spark):
    """Three keys, each with a winner below its highest offset only under the rule:
    k1 by the last header (not the first), k2 by the exact name (not "Version"), k3
    because a last header that does not parse is missing (not the last one that parses)."""
    import datetime

    from framework.log.table_layout import table_schema
    from framework.stages.compaction import DELETE, compaction_actions

    spec = _header_spec()
    epoch = datetime.datetime(1970, 1, 1)
    records = [  # offset, key, headers
        (0, "k1", [("version", b"1"), ("version", b"9")]),   # 9: wins
        (1, "k1", [("version", b"5")]),                      # 5 (but 5 > 1, the first header of offset 0)
        (2, "k2", [("version", b"3")]),                      # 3: wins
        (3, "k2", [("version", b"1"), ("Version", b"8")]),   # 1 (8 under another name)
        (4, "k3", [("version", b"5")]),                      # 5: wins
        (5, "k3", [("version", b"7"), ("version", b"x")]),   # missing (7 is not the last one)
    ]
    frame = spark.createDataFrame(
        [(offset, epoch, key, "v", [(n, bytearray(v)) for n, v in headers], 10, None, 0)
         for offset, key, headers in records],
        table_schema(spec),
    )
    actions = compaction_actions(frame, spec.config, cleanable_end=6, now_ms=10_000)
    removed = sorted(r["offset"] for r in actions.where(f"_action = '{DELETE}'").select("offset").collect())
    assert removed == [1, 3, 5]
