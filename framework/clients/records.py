"""Producer records from JSON lines or scenario files: parsed, checked, normalised.

Pure Python, no Spark. Every problem names the input, the line and the field; a batch
with any problem is refused whole (one produce call is one atomic append).

Input form of a record (one JSON object a line, or one mapping in a scenario):

``key``, ``value``
    text on a ``string`` topic; on a ``binary`` topic base64 text, ``{"base64": ...}``
    or (from YAML) ``!!binary``. ``null`` value = tombstone. An integer is read as its
    decimal text (YAML's ``key: 1``).
``timestamp``
    epoch milliseconds or ISO-8601 (UTC when no zone is given). Required under
    ``CreateTime``; under ``LogAppendTime`` the append time replaces it, as a broker does.
``headers``
    an object ``{"name": value}``, or a list of ``[name, value]`` pairs when names repeat.
    A value is UTF-8 text, ``{"base64": ...}``, ``!!binary`` bytes, an integer (its
    decimal text) or ``null``.
``partition``
    optional; without it the key decides, through Kafka's murmur2 partitioner.
"""

from __future__ import annotations

import base64
import binascii
import difflib
import json
import random
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Iterable, Mapping, Sequence

from framework.clients.partitioner import default_partition
from framework.errors import Problem, RecordError
from framework.spec import TopicSpec

RECORD_FIELDS = ("key", "value", "timestamp", "headers", "partition")
#: Spark's TIMESTAMP ends with year 9999.
MAX_TIMESTAMP_MS = 253402300799999
#: Stop collecting problems after this many; the first ones tell the story.
MAX_PROBLEMS = 20

Header = tuple[str, bytes | None]


@dataclass(frozen=True)
class ProducerRecord:
    """A record ready to append: typed key and value, a timestamp, headers, a partition."""

    key: str | bytes | None
    value: str | bytes | None
    timestamp_ms: int | None
    headers: tuple[Header, ...]
    partition: int | None
    line: int | None = None

    def key_bytes(self) -> bytes | None:
        return _as_bytes(self.key)

    def size(self) -> int:
        """The contract's record size: UTF-8 bytes of key, value, header names and values."""
        total = len(_as_bytes(self.key) or b"") + len(_as_bytes(self.value) or b"")
        for name, value in self.headers:
            total += len(name.encode("utf-8")) + len(value or b"")
        return total


def _as_bytes(data: str | bytes | None) -> bytes | None:
    if data is None or isinstance(data, bytes):
        return data
    return data.encode("utf-8")


class _Collector:
    """Problems of one input, capped so a huge bad file stays readable."""

    def __init__(self, source: str):
        self.source = source
        self.problems: list[Problem] = []

    def add(self, line: int | None, field: str | None, rule: str) -> None:
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(Problem(self.source, line, None, field, rule))

    def raise_if_any(self) -> None:
        if self.problems:
            raise RecordError(self.problems)


def parse_timestamp(raw: Any) -> int:
    """Epoch milliseconds from an int, an integral float, or ISO-8601 text; ValueError otherwise."""
    if isinstance(raw, bool):
        raise ValueError("must be epoch milliseconds or ISO-8601 text, got a boolean")
    if isinstance(raw, int):
        value = raw
    elif isinstance(raw, float) and raw.is_integer():
        value = int(raw)
    elif isinstance(raw, str):
        text = raw.strip()
        if text.lstrip("-").isdigit():
            value = int(text)
        else:
            try:
                moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
            except ValueError:
                raise ValueError(f"must be epoch milliseconds or ISO-8601 text, got {raw!r}") from None
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=timezone.utc)
            delta = moment - datetime(1970, 1, 1, tzinfo=timezone.utc)
            value = (delta.days * 86400 + delta.seconds) * 1000 + delta.microseconds // 1000
    elif isinstance(raw, datetime):
        moment = raw if raw.tzinfo else raw.replace(tzinfo=timezone.utc)
        value = int(moment.timestamp() * 1000)
    else:
        raise ValueError(f"must be epoch milliseconds or ISO-8601 text, got {type(raw).__name__}")
    if value < 0:
        raise ValueError(f"must not be negative, got {value}")
    if value > MAX_TIMESTAMP_MS:
        raise ValueError(f"must be at most {MAX_TIMESTAMP_MS} (year 9999), got {value}")
    return value


def _decode_base64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("is not valid base64") from None


def _utf8(text: str) -> str:
    """``text`` when it can be stored as UTF-8. JSON's ``\\ud800`` escapes can name a lone
    surrogate, which no UTF-8 text (and so no Delta string) can hold."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ValueError(f"is not valid Unicode text: a lone surrogate {text[error.start]!r} "
                         f"at character {error.start + 1}") from None
    return text


def _printable(text: str) -> str:
    """A name for a message: itself, or escaped when it holds a lone surrogate (unprintable)."""
    try:
        return _utf8(text)
    except ValueError:
        return ascii(text)


def _payload(raw: Any, kind: str) -> str | bytes | None:
    """A key or value for a ``string`` or ``binary`` field; ValueError names what is wrong."""
    if raw is None:
        return None
    if isinstance(raw, bool) or isinstance(raw, float):
        raise ValueError(f"must be {'text' if kind == 'string' else 'base64 text or bytes'} or null, "
                         f"got {type(raw).__name__} {raw!r}")
    if isinstance(raw, int):
        raw = str(raw)
    if isinstance(raw, Mapping):
        if set(raw) != {"base64"} or not isinstance(raw["base64"], str):
            raise ValueError('an object here must be {"base64": "<text>"}')
        data = _decode_base64(raw["base64"])
        if kind == "binary":
            return data
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError("base64 bytes are not UTF-8 text, and the topic's type is string") from None
    if isinstance(raw, bytes):
        if kind == "binary":
            return raw
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError("bytes are not UTF-8 text, and the topic's type is string") from None
    if isinstance(raw, str):
        return _decode_base64(raw) if kind == "binary" else _utf8(raw)
    raise ValueError(f"must be text or null, got {type(raw).__name__}")


def _header_value(raw: Any) -> bytes | None:
    if raw is None:
        return None
    if isinstance(raw, bool) or isinstance(raw, float):
        raise ValueError(f"must be text, bytes, an integer or null, got {type(raw).__name__} {raw!r}")
    if isinstance(raw, int):
        return str(raw).encode("ascii")
    if isinstance(raw, str):
        return _utf8(raw).encode("utf-8")
    if isinstance(raw, bytes):
        return raw
    if isinstance(raw, Mapping) and set(raw) == {"base64"} and isinstance(raw["base64"], str):
        return _decode_base64(raw["base64"])
    raise ValueError(f'must be text, {{"base64": ...}}, bytes, an integer or null, got {type(raw).__name__}')


def _headers(raw: Any) -> tuple[Header, ...]:
    if raw is None:
        return ()
    if isinstance(raw, Mapping):
        pairs: Iterable = raw.items()
    elif isinstance(raw, (list, tuple)):
        pairs = []
        for i, pair in enumerate(raw):
            if not isinstance(pair, (list, tuple)) or len(pair) != 2:
                raise ValueError(f"item {i} must be a [name, value] pair")
            pairs.append(tuple(pair))
    else:
        raise ValueError("must be an object of name: value, or a list of [name, value] pairs")
    headers = []
    for name, value in pairs:
        if not isinstance(name, str):
            raise ValueError(f"a header name must be text, got {type(name).__name__} {name!r}")
        try:
            _utf8(name)
        except ValueError as error:
            raise ValueError(f"header name {name!r} {error}") from None
        try:
            headers.append((name, _header_value(value)))
        except ValueError as error:
            raise ValueError(f"{name!r}: {error}") from None
    return tuple(headers)


def parse_record(raw: Any, spec: TopicSpec, line: int | None, problems: _Collector) -> ProducerRecord | None:
    """One record, or None after adding its problems to ``problems``."""
    if not isinstance(raw, Mapping):
        problems.add(line, None, f"a record must be an object with {', '.join(RECORD_FIELDS)}, "
                                 f"got {type(raw).__name__}")
        return None
    before = len(problems.problems)
    for name in raw:
        if name not in RECORD_FIELDS:
            close = difflib.get_close_matches(str(name), RECORD_FIELDS, n=1)
            hint = f"; did you mean {close[0]}?" if close else f"; allowed: {', '.join(RECORD_FIELDS)}"
            problems.add(line, _printable(str(name)), f"unknown field{hint}")
    config = spec.config
    key = value = None
    try:
        key = _payload(raw.get("key"), spec.key_type)
    except ValueError as error:
        problems.add(line, "key", str(error))
    try:
        value = _payload(raw.get("value"), spec.value_type)
    except ValueError as error:
        problems.add(line, "value", str(error))
    if "key" in raw and raw.get("key") is None and config.compact:
        problems.add(line, "key", "a record without a key cannot be produced to a compacted topic "
                                  f"(cleanup.policy={','.join(sorted(config.cleanup_policy))})")
    elif "key" not in raw and config.compact:
        problems.add(line, "key", "missing; a compacted topic needs a key on every record")
    timestamp = None
    if config.message_timestamp_type == "CreateTime":
        if raw.get("timestamp") is None:
            problems.add(line, "timestamp", "missing; message.timestamp.type=CreateTime needs epoch "
                                            "milliseconds or ISO-8601 text")
        else:
            try:
                timestamp = parse_timestamp(raw["timestamp"])
            except ValueError as error:
                problems.add(line, "timestamp", str(error))
    headers: tuple[Header, ...] = ()
    try:
        headers = _headers(raw.get("headers"))
    except ValueError as error:
        problems.add(line, "headers", str(error))
    partition = raw.get("partition")
    if partition is not None:
        if isinstance(partition, bool) or not isinstance(partition, int):
            problems.add(line, "partition", f"must be an integer, got {partition!r}")
            partition = None
        elif not 0 <= partition < spec.partitions:
            problems.add(line, "partition", f"{partition} is out of range: topic {spec.topic} has "
                                            f"{spec.partitions} partition(s), 0..{spec.partitions - 1}")
            partition = None
    if len(problems.problems) > before:
        return None
    return ProducerRecord(key, value, timestamp, headers, partition, line)


def parse_records(items: Sequence[tuple[int | None, Any]], spec: TopicSpec, source: str) -> list[ProducerRecord]:
    """Parse ``(line, raw)`` pairs; RecordError with every problem if any record is bad."""
    problems = _Collector(source)
    records = []
    for line, raw in items:
        record = parse_record(raw, spec, line, problems)
        if record is not None:
            records.append(record)
    problems.raise_if_any()
    return records


def read_json_lines(path: str, spec: TopicSpec) -> list[ProducerRecord]:
    """Records from a JSON-lines file; blank lines are skipped."""
    problems = _Collector(path)
    items: list[tuple[int, Any]] = []
    try:
        handle = open(path, encoding="utf-8")
    except OSError as error:
        problems.add(None, None, f"cannot read the input: {error.strerror or error}")
        problems.raise_if_any()
        raise  # unreachable: raise_if_any raised
    with handle:
        try:
            for number, text in enumerate(handle, start=1):
                if not text.strip():
                    continue
                try:
                    items.append((number, json.loads(text)))
                except json.JSONDecodeError as error:
                    problems.add(number, None, f"not valid JSON: {error.msg} (column {error.colno})")
        except UnicodeDecodeError as error:
            problems.add(None, None, f"not UTF-8 text: {error.reason}")
    problems.raise_if_any()
    return parse_records(items, spec, path)


def assign_partitions(records: Iterable[ProducerRecord], spec: TopicSpec, source: str = "input",
                      rng: random.Random | None = None) -> dict[int, list[ProducerRecord]]:
    """Group records by partition: explicit, else Kafka's default partitioner on the key.

    Keyless records without a partition go, all of one call, to one partition picked at
    random: Kafka's sticky partitioner.
    """
    by_partition: dict[int, list[ProducerRecord]] = {}
    sticky: int | None = None
    for record in records:
        partition = record.partition
        if partition is None:
            key = record.key_bytes()
            if key is not None:
                partition = default_partition(key, spec.partitions)
            else:
                if sticky is None:
                    sticky = (rng or random).randrange(spec.partitions)
                partition = sticky
        by_partition.setdefault(partition, []).append(record)
    return by_partition
