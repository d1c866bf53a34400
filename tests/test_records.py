"""Producer records: parsing, checks with line and field, partition assignment (pure)."""

import json

import pytest

from framework.clients.records import assign_partitions, parse_records, parse_timestamp, read_json_lines
from framework.errors import RecordError
from framework.spec import parse_spec


def spec(policy="compact", partitions=1, key_type="string", value_type="string", timestamp_type="CreateTime"):
    return parse_spec({"topic": "t", "partitions": partitions, "key": {"type": key_type},
                       "value": {"type": value_type},
                       "config": {"cleanup.policy": policy, "message.timestamp.type": timestamp_type}}, "test")


def problems(items, topic=None):
    with pytest.raises(RecordError) as caught:
        parse_records(list(enumerate(items, start=1)), topic or spec(), "input.jsonl")
    return [(p.line, p.field, p.rule) for p in caught.value.problems]


def test_a_good_record():
    [record] = parse_records([(1, {"key": "a", "value": "1", "timestamp": 5,
                                   "headers": {"v": "7", "raw": {"base64": "AAE="}, "none": None}})], spec(), "x")
    assert (record.key, record.value, record.timestamp_ms, record.partition) == ("a", "1", 5, None)
    assert record.headers == (("v", b"7"), ("raw", b"\x00\x01"), ("none", None))
    assert record.size() == 1 + 1 + 1 + 1 + 3 + 2 + 4


def test_null_key_on_a_compacted_topic_names_line_and_field():
    [(line, field, rule)] = problems([{"key": "a", "value": "1", "timestamp": 0},
                                      {"key": None, "value": "1", "timestamp": 0}])
    assert (line, field) == (2, "key") and "compacted topic" in rule


def test_null_key_is_fine_on_a_delete_topic():
    [record] = parse_records([(1, {"key": None, "value": "1", "timestamp": 0})], spec("delete"), "x")
    assert record.key is None


@pytest.mark.parametrize("raw,fragment", [
    ({"key": "a", "value": "1"}, "missing"),
    ({"key": "a", "value": "1", "timestamp": -1}, "negative"),
    ({"key": "a", "value": "1", "timestamp": "yesterday"}, "ISO-8601"),
    ({"key": "a", "value": "1", "timestamp": True}, "boolean"),
    ({"key": "a", "value": "1", "timestamp": 253402300800000}, "9999"),
])
def test_bad_timestamps(raw, fragment):
    [(line, field, rule)] = problems([raw])
    assert (line, field) == (1, "timestamp") and fragment in rule


def test_timestamp_forms():
    assert parse_timestamp(0) == 0
    assert parse_timestamp("1970-01-01T00:00:01Z") == 1000
    assert parse_timestamp("1970-01-01T01:00:00+01:00") == 0
    assert parse_timestamp("1970-01-01 00:00:00.250") == 250
    assert parse_timestamp("1234") == 1234
    assert parse_timestamp(5.0) == 5


def test_log_append_time_needs_no_timestamp():
    [record] = parse_records([(1, {"key": "a", "value": "1"})], spec(timestamp_type="LogAppendTime"), "x")
    assert record.timestamp_ms is None


@pytest.mark.parametrize("raw,field,fragment", [
    ({"key": "a", "value": "1", "timestamp": 0, "partition": 3}, "partition", "out of range"),
    ({"key": "a", "value": "1", "timestamp": 0, "partition": "0"}, "partition", "integer"),
    ({"key": "a", "value": 1.5, "timestamp": 0}, "value", "float"),
    ({"key": ["a"], "value": "1", "timestamp": 0}, "key", "text"),
    ({"key": "a", "value": "1", "timestamp": 0, "headers": "v=1"}, "headers", "object"),
    ({"key": "a", "value": "1", "timestamp": 0, "headers": [["v"]]}, "headers", "pair"),
    ({"key": "a", "value": "1", "timestamp": 0, "headers": {"v": 1.5}}, "headers", "float"),
    ({"key": "a", "value": "1", "timestamp": 0, "timestmap": 0}, "timestmap", "did you mean timestamp"),
])
def test_each_field_rule(raw, field, fragment):
    found = problems([raw], spec(partitions=2))
    assert any(f == field and fragment in rule for _, f, rule in found), found


def test_binary_topics_take_base64():
    topic = spec(key_type="binary", value_type="binary")
    [record] = parse_records([(1, {"key": "AAE=", "value": {"base64": "/w=="}, "timestamp": 0})], topic, "x")
    assert record.key == b"\x00\x01" and record.value == b"\xff"
    [(_, field, rule)] = problems([{"key": "not base64!", "value": None, "timestamp": 0}], topic)
    assert field == "key" and "base64" in rule


def test_integers_read_as_their_decimal_text():
    [record] = parse_records([(1, {"key": 1, "value": 2, "timestamp": 0, "headers": {"v": 3}})], spec(), "x")
    assert (record.key, record.value, record.headers) == ("1", "2", (("v", b"3"),))


def test_all_problems_reported_at_once():
    found = problems([{"key": None, "value": "1", "timestamp": 0}, "not an object",
                      {"key": "a", "value": "1"}])
    assert [line for line, _, _ in found] == [1, 2, 3]


def test_json_lines_file(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_text('{"key": "a", "value": "1", "timestamp": 0}\n\n{"key": "b", "value": null, "timestamp": 1}\n')
    records = read_json_lines(str(path), spec())
    assert [r.key for r in records] == ["a", "b"] and records[1].value is None
    path.write_text('{"key": "a", "value": "1", "timestamp": 0}\n{"key": "b",\n')
    with pytest.raises(RecordError) as caught:
        read_json_lines(str(path), spec())
    assert caught.value.problems[0].line == 2 and "JSON" in caught.value.problems[0].rule
    with pytest.raises(RecordError) as caught:
        read_json_lines(str(tmp_path / "missing.jsonl"), spec())
    assert "cannot read" in caught.value.problems[0].rule


def test_assign_partitions_uses_kafkas_partitioner():
    topic = spec(partitions=3)
    records = parse_records([(i, {"key": k, "value": "1", "timestamp": 0}) for i, k in
                             enumerate(["a", "b", "c", "order-42"])], topic, "x")
    grouped = assign_partitions(records, topic)
    assert {p: [r.key for r in rs] for p, rs in grouped.items()} == {1: ["a", "c"], 2: ["b"], 0: ["order-42"]}


def test_keyless_records_stick_to_one_partition():
    topic = spec("delete", partitions=4)
    records = parse_records([(i, {"key": None, "value": str(i), "timestamp": 0}) for i in range(5)], topic, "x")
    grouped = assign_partitions(records, topic)
    assert len(grouped) == 1 and len(next(iter(grouped.values()))) == 5


def test_problem_lines_are_one_line_each():
    found = problems([{"key": None, "value": "1", "timestamp": 0}])
    for _, _, rule in found:
        assert "\n" not in rule
    json.dumps(found)
