"""The scoped check's two sides, netted in one read (``ChangeScope.sides``), are exactly
what the definition in ``framework.checks.changes`` says: the after version's records in
scope, and the before version's as the after version's minus what the feed says the
commits inserted or updated to, plus what they deleted or updated from (multisets of
whole records, Spark's ``exceptAll``).

Real commits give a feed that agrees with the data; these rows also hold what only a
corrupted table or feed could: a duplicated record, an insert the after version lacks, a
postimage that differs from the record at its offset, and a record that is made twice
by the feed and present once. The pairing of the netted sides must equal the pairing of
the sides the definition builds, row for row.
"""

from __future__ import annotations

import datetime as dt

import pytest

from framework.checks import rules
from framework.checks.changes import ChangeScope, changed_offsets, touched_keys
from framework.spec import parse_spec

CONFIG = parse_spec({"topic": "t", "partitions": 1, "config": {"cleanup.policy": "compact"}}, "test").config
SCHEMA = ("`offset` BIGINT, `timestamp` TIMESTAMP, key STRING, value STRING, "
          "headers ARRAY<STRUCT<key: STRING, value: BINARY>>, _size BIGINT, _delete_horizon TIMESTAMP, _segment BIGINT")
T0 = dt.datetime(2026, 11, 28, tzinfo=dt.timezone.utc)


def record(offset: int, key: str | None, value: str | None, horizon: bool = False) -> tuple:
    return (offset, T0 + dt.timedelta(seconds=offset), key, value, None, 10 + offset,
            T0 + dt.timedelta(days=1) if horizon else None, 0)


AFTER = [
    record(0, "a", "0"),
    record(1, "b", "1"),
    record(2, "c", None, horizon=True),   # a tombstone the commit stamped (pre and postimage below)
    record(3, "d", "3"), record(3, "d", "3"),  # duplicated in the after version
    record(4, "e", "4"),                   # the feed's postimage of offset 4 says otherwise
    record(5, "f", "5"),                   # made twice by the feed, present once
    record(9, "g", "9"),                   # not in scope: an untouched key below the clean end
]
FEED = [
    (record(2, "c", None), "update_preimage"),
    (record(2, "c", None, horizon=True), "update_postimage"),
    (record(4, "e", "4"), "update_preimage"),
    (record(4, "e", "four"), "update_postimage"),
    (record(5, "f", "5"), "insert"), (record(5, "f", "5"), "insert"),
    (record(6, "h", "6"), "insert"),       # an insert the after version lacks
    (record(7, "a", "old"), "delete"),     # what the commit removed
]


@pytest.fixture(scope="module")
def scope(spark):
    feed = spark.createDataFrame(
        [(*row, change, 3, T0) for row, change in FEED],
        SCHEMA + ", _change_type STRING, _commit_version BIGINT, _commit_timestamp TIMESTAMP")
    keys = touched_keys(spark.createDataFrame([(k,) for k in "acdefh"], "key STRING"))
    offsets = changed_offsets(spark.createDataFrame([(o,) for o in (2, 4, 5, 6, 7, 7)], "offset BIGINT"))
    return ChangeScope(dirty_from=10, log_start_after=0, keys=keys, offsets=offsets, feed=feed)


def _rows(frame) -> list:
    return sorted((tuple(row) for row in frame.collect()), key=repr)


def test_the_netted_sides_pair_as_the_definitions_sides_do(spark, scope):
    after = spark.createDataFrame(AFTER, SCHEMA)
    in_scope = scope.of(after)
    columns = in_scope.columns
    made = scope.feed.where("_change_type IN ('insert', 'update_postimage')").select(*columns)
    undone = scope.feed.where("_change_type IN ('delete', 'update_preimage')").select(*columns)
    before = in_scope.exceptAll(made).unionByName(undone)
    defined = rules.pairing(before, in_scope, CONFIG)
    netted = rules.paired(scope.sides(after, lambda records, side: rules.narrow(records, side, CONFIG)),
                          counted=True)
    assert _rows(netted) == _rows(defined)
    by_offset = {row["offset"]: row for row in netted.collect()}
    # what the pairing then judges: b at 1 and 9 out of scope; 3 twice after; 4's postimage
    # was never written, so the record at 4 stays on the before side beside its preimage;
    # 5 made twice and present once nets to none before; 6 never lands; 7 only before
    assert sorted(by_offset) == [0, 2, 3, 4, 5, 7]
    assert {o: (by_offset[o]["nb"], by_offset[o]["na"]) for o in by_offset} == {
        0: (1, 1), 2: (1, 1), 3: (2, 2), 4: (2, 1), 5: (0, 1), 7: (1, 0)}
    assert by_offset[2]["horizon_b"] is None and by_offset[2]["horizon_a"] is not None


@pytest.mark.parametrize("key_type", ["STRING", "BINARY"])
def test_the_touched_keys_bring_every_record_of_theirs_into_scope_by_their_hash(spark, key_type):
    """Keys are matched by their 64-bit hash, on string and binary topics alike: every record
    of a touched key is in scope, an untouched key's records below the clean end are not,
    and a record without a key is in scope only by its offset; a key or an offset named twice
    still brings each record once."""
    def key(text):
        return None if text is None else (text if key_type == "STRING" else text.encode())

    schema = SCHEMA.replace("key STRING", f"key {key_type}")
    rows = [(o, T0, key(k), "v", None, 10, None, 0) for o, k in
            [(0, "a"), (1, "b"), (2, "a"), (3, None), (4, "c"), (5, None), (12, "b")]]
    scope = ChangeScope(dirty_from=10, log_start_after=0,
                        keys=touched_keys(spark.createDataFrame([(key(k),) for k in ("a", "c", "a", None)],
                                                                f"key {key_type}")),
                        offsets=changed_offsets(spark.createDataFrame([(5,), (5,)], "offset BIGINT")),
                        feed=None)
    in_scope = scope.of(spark.createDataFrame(rows, schema))
    assert in_scope.columns == spark.createDataFrame(rows, schema).columns
    assert sorted(r["offset"] for r in in_scope.collect()) == [0, 2, 4, 5, 12]
