"""Hypothesis strategies for the engine-vs-model property tests.

Everything is tiny on purpose: each engine step costs about a second. A scenario has the
shape of the acceptance files (contract section 7), so it can be written out as YAML and
given to `topiclake simulate`, or replayed step by step:

    {"name": ..., "spec": {"topic", "partitions": 1..3, "config": {...}},
     "steps": [{"produce": {"now", "records", "expect_error"?}} | {"maintain": {"now", "force"}}
               | {"commit_offset": {"group", "partition", "offset"}}
               | {"delete_records": {"partition", "before_offset", "expect_error"?}}, ...]}

Times are in milliseconds and stay within a few tens of seconds of 0, so that the small
lags and retentions below actually matter. Every generated spec is valid per contract
section 2; a batch or a delete_records that must be refused says so (`expect_error`).
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from framework.clients.partitioner import default_partition

KEYS = ["a", "b", "c", "d"]
# four values and a tombstone: about 20% of the records are tombstones
VALUES = ["1", "2", "xy", "long-value", None]
HEADER = "v"


@st.composite
def topic_configs(draw) -> dict[str, Any]:
    """A valid config dict with Kafka's names; an absent key means the contract's default."""
    config: dict[str, Any] = {}
    config["cleanup.policy"] = draw(
        st.sampled_from(["compact", "compact", "compact,delete", "compact,delete", "delete"])
    )

    min_lag = draw(st.sampled_from([0, 0, 0, 1000, 3000]))
    if min_lag or draw(st.booleans()):
        config["min.compaction.lag.ms"] = min_lag
    max_lag = draw(st.sampled_from([None, None, 1, 2000, 5000, 20000]))
    if max_lag is not None:  # None: Kafka's huge default
        config["max.compaction.lag.ms"] = max(max_lag, min_lag, 1)

    ratio = draw(st.sampled_from([None, 0.0, 0.0, 0.3, 0.5, 0.9, 1.0]))
    if ratio is not None:
        config["min.cleanable.dirty.ratio"] = ratio

    config["delete.retention.ms"] = draw(st.sampled_from([0, 500, 2000, 5000]))

    if draw(st.booleans()):
        # KIP-68's use: consumed retention instead of a short time retention, which would
        # otherwise delete everything first
        config["consumed.retention.ms"] = draw(st.sampled_from([0, 0, 1000, 5000]))
        config["consumed.retention.groups"] = draw(st.sampled_from([["g1"], ["g1"], ["g1", "g2"]]))
        retention_ms = draw(st.sampled_from([-1, -1, -1, None, 8000]))
    else:
        retention_ms = draw(st.sampled_from([-1, -1, -1, None, 0, 3000, 8000]))
    if retention_ms is not None:  # None: the 7-day default, which never bites here
        config["retention.ms"] = retention_ms
    retention_bytes = draw(st.sampled_from([-1, -1, -1, None, 10, 30, 60]))
    if retention_bytes is not None:
        config["retention.bytes"] = retention_bytes

    if draw(st.integers(0, 9)) == 0:
        config["message.timestamp.type"] = "LogAppendTime"

    strategy = draw(st.sampled_from([None, "offset", "timestamp", "header", "header"]))
    if strategy is not None:
        config["compaction.strategy"] = strategy
    if strategy == "header":
        config["compaction.strategy.header"] = HEADER
    return config


INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

def _header_values() -> st.SearchStrategy:
    """Values for the "v" header: decimal text, 8 raw bytes, garbage, or null."""
    decimal = st.sampled_from(["0", "1", "2", "5", "-3", "-0", "007", "12345678", "-1234567",
                               str(INT64_MAX), str(INT64_MIN), "99999999999999999999",
                               str(INT64_MAX + 1)])
    raw8 = st.one_of(
        st.integers(-3, 3),
        st.sampled_from([INT64_MIN, INT64_MAX, 5 * 2**32, -(2**40)]),
    ).map(lambda n: n.to_bytes(8, "big", signed=True))
    garbage_values = ["", "x1", "+5", "1.5", " 2", "2 ", "-", b"\x00\x01", b"\xff" * 7, b"\x00" * 9,
                      "+1234567",  # 8 bytes, not decimal: big-endian
                      "٣",  # a non-ASCII digit is not decimal text
                      # digits and a line terminator are not decimal text; Java's regex $
                      # once let them through ("1234567\n" is 8 bytes: big-endian)
                      "7\n", "1234567\n", "2\r\n"]
    garbage = st.sampled_from(garbage_values)
    return st.one_of(decimal, decimal, raw8, garbage, st.none())


@st.composite
def _headers(draw) -> list[list]:
    values = _header_values()
    kind = draw(st.sampled_from(["none", "none", "one", "one", "several", "other"]))
    if kind == "none":
        return []
    if kind == "one":
        return [[HEADER, draw(values)]]
    if kind == "several":
        return [[HEADER, draw(values)] for _ in range(draw(st.integers(2, 3)))]
    # another header around it, or a header whose name differs only in case
    other = draw(st.sampled_from([["h", "x"], ["V", "9"], ["vv", "8"]]))
    return [other, [HEADER, draw(values)]] if draw(st.booleans()) else [[HEADER, draw(values)], other]


@st.composite
def record_batches(draw, config: dict[str, Any], now: int = 10_000, partitions: int = 1) -> list[dict[str, Any]]:
    """1..8 records with timestamps near `now` (duplicates, out of order, and sometimes a
    little in the future). With several partitions, a record names its partition or, as
    most Kafka records do, leaves it to Kafka's default partitioner (murmur2 of the key)."""
    deltas = [-8000, -5000, -3000, -3000, -1000, 0, 0, 1000]
    records = []
    for _ in range(draw(st.integers(1, 8))):
        record: dict[str, Any] = {}
        if partitions == 1 or draw(st.booleans()):
            record["partition"] = draw(st.integers(0, partitions - 1))
        record.update({
            "key": draw(st.sampled_from(KEYS)),
            "value": draw(st.sampled_from(VALUES)),
            "timestamp": max(0, now + draw(st.sampled_from(deltas))),
        })
        headers = draw(_headers())
        if headers:
            record["headers"] = headers
        records.append(record)
    return records


def _bad_record(draw, config: dict[str, Any], partitions: int) -> dict[str, Any]:
    """A record produce must refuse, so that its whole batch is refused."""
    kinds = ["partition"] + (["null key"] if "compact" in config["cleanup.policy"] else [])
    record: dict[str, Any] = {"key": draw(st.sampled_from(KEYS)), "value": "1", "timestamp": 0}
    if draw(st.sampled_from(kinds)) == "partition":
        record["partition"] = partitions + draw(st.integers(0, 2))  # past the last partition
    else:
        record["key"] = None
        record["partition"] = 0
    return record


def _as_bytes(data):
    return data.encode("utf-8") if isinstance(data, str) else data


@st.composite
def scenarios(draw, min_steps: int = 1, max_steps: int = 5, binary: bool = True) -> dict[str, Any]:
    """A spec of 1..3 partitions and min_steps..max_steps steps: a produce first, a
    maintain last (when there are two or more steps), and any mix in between of produce
    (sometimes a batch produce must refuse, `expect_error`), maintain, commit_offset and
    delete_records; the clock mostly moves forward.

    With `binary`, about one topic in eight has binary keys and values (the records then
    carry bytes)."""
    config = draw(topic_configs())
    partitions = draw(st.sampled_from([1, 1, 2, 3]))
    groups = config.get("consumed.retention.groups", [])
    count = draw(st.integers(min_steps, max_steps))
    now = draw(st.sampled_from([0, 2000, 10_000]))
    is_binary = binary and draw(st.integers(0, 7)) == 0
    steps: list[dict[str, Any]] = []
    committed: set[str] = set()
    ends = [0] * partitions  # each partition's log end offset
    for index in range(count):
        if index == 0:
            kind = "produce"
        elif index == count - 1:
            kind = "maintain"
        else:
            kinds = (["produce", "produce", "maintain", "maintain", "maintain", "delete_records", "delete_records"]
                     + (["commit_offset"] * 5 if groups else []))
            kind = draw(st.sampled_from(kinds))

        if kind == "commit_offset":
            # a group that has not committed yet first: consumed retention needs them all
            waiting = [g for g in groups if g not in committed]
            group = draw(st.sampled_from(waiting or groups))
            committed.add(group)
            steps.append({"commit_offset": {"group": group, "partition": draw(st.integers(0, partitions - 1)),
                                            "offset": draw(st.integers(0, 12))}})
            continue
        if kind == "delete_records":
            partition = draw(st.integers(0, partitions - 1))
            before = draw(st.integers(0, ends[partition] + 1))
            body = {"partition": partition, "before_offset": before}
            if "delete" not in config["cleanup.policy"] or before > ends[partition]:
                body["expect_error"] = True  # POLICY_VIOLATION, or OFFSET_OUT_OF_RANGE
            steps.append({"delete_records": body})
            continue

        if index > 0:
            move = draw(st.sampled_from(["forward", "forward", "forward", "same", "back"]))
            if move == "forward":
                now += draw(st.sampled_from([500, 1000, 3000, 6000, 20_000]))
            elif move == "back":
                now = max(0, now - draw(st.sampled_from([1000, 5000])))
        if kind == "produce":
            records = draw(record_batches(config, now, partitions))
            body = {"now": now, "records": records}
            if index > 0 and draw(st.integers(0, 2)) == 0:
                records.insert(draw(st.integers(0, len(records))), _bad_record(draw, config, partitions))
                body["expect_error"] = True
            if is_binary:
                for record in records:
                    record["key"] = _as_bytes(record["key"])
                    record["value"] = _as_bytes(record["value"])
            if not body.get("expect_error"):
                for record in records:
                    key = record["key"]
                    ends[record["partition"] if "partition" in record
                         else default_partition(_as_bytes(key), partitions)] += 1
            steps.append({"produce": body})
        else:
            steps.append({"maintain": {"now": now, "force": draw(st.integers(0, 3)) == 0}})
    spec: dict[str, Any] = {"topic": "generated", "partitions": partitions}
    if is_binary:
        spec["key"] = {"type": "binary"}
        spec["value"] = {"type": "binary"}
    spec["config"] = config
    return {"name": "generated", "spec": spec, "steps": steps}
