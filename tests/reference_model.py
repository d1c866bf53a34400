"""A reference model of topiclake's contract (CONTRACT.md sections 3, 4 and 7).

This is the oracle for the property-based tests that compare the real Spark/Delta engine
with the contract. It is deliberately naive: every partition is a plain list of records
in offset order, and every rule of section 4 is written out once, in the order the
contract states it. Nothing here is fast, and nothing here is shared with the engine
except Kafka's default partitioner.

Where the contract is silent, the decisions taken are the ones written in the docstrings
below (and listed in the report that came with this file).
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

try:
    from framework.clients.partitioner import default_partition
except ImportError:  # run from a checkout where the package is not installed
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from framework.clients.partitioner import default_partition


INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

# Kafka's defaults (contract section 2), plus "off" for the KIP-68 and KIP-280 extras.
DEFAULTS: dict[str, Any] = {
    "cleanup.policy": "delete",
    "min.compaction.lag.ms": 0,
    "max.compaction.lag.ms": INT64_MAX,
    "min.cleanable.dirty.ratio": 0.5,
    "delete.retention.ms": 86_400_000,
    "retention.ms": 604_800_000,
    "retention.bytes": -1,
    "message.timestamp.type": "CreateTime",
    "compaction.strategy": "offset",
    "compaction.strategy.header": None,
    "consumed.retention.ms": -1,
    "consumed.retention.groups": [],
}

DUE_REASONS = ("dirty_ratio", "max_lag", "tombstone_horizon", "forced")


@dataclass
class ModelRecord:
    offset: int
    timestamp: int  # ms since the epoch
    key: str | bytes | None
    value: str | bytes | None  # None = tombstone
    headers: tuple[tuple[str, bytes | None], ...] = ()
    delete_horizon: int | None = None  # set the first time a compaction run keeps a winning tombstone


class ModelRejected(Exception):
    """A request the contract refuses; nothing of it was applied."""


# ---------------------------------------------------------------------------------------
# Pure helpers
# ---------------------------------------------------------------------------------------


def as_bytes(data: str | bytes | None) -> bytes:
    """UTF-8 bytes of a string, bytes as they are, and b"" for None."""
    if data is None:
        return b""
    if isinstance(data, str):
        return data.encode("utf-8")
    return bytes(data)


def record_size(record: ModelRecord) -> int:
    """Contract section 4: key + value + every header's name and value, in bytes."""
    size = len(as_bytes(record.key)) + len(as_bytes(record.value))
    for name, value in record.headers:
        size += len(as_bytes(name)) + len(as_bytes(value))
    return size


_DECIMAL = re.compile(rb"-?[0-9]+")


def parse_header_int(raw: bytes | None) -> int | None:
    """A header value read as a signed 64-bit integer (KIP-280), or None if it is missing.

    Decimal text (an optional '-' and one or more ASCII digits) is read as decimal, and is
    missing if it does not fit in 64 bits; otherwise exactly 8 bytes are read as a
    big-endian two's-complement integer; anything else is missing.
    """
    if raw is None:
        return None
    if _DECIMAL.fullmatch(raw):
        number = int(raw.decode("ascii"))
        if INT64_MIN <= number <= INT64_MAX:
            return number
        return None
    if len(raw) == 8:
        return int.from_bytes(raw, "big", signed=True)
    return None


def header_value(record: ModelRecord, header_name: str) -> int | None:
    """The value of the LAST header called `header_name`, parsed by parse_header_int."""
    last = None
    found = False
    for name, value in record.headers:
        if name == header_name:
            found = True
            last = value
    if not found:
        return None
    return parse_header_int(last)


def pick_winner(records: Sequence[ModelRecord], strategy: str, header_name: str | None) -> ModelRecord:
    """The record of one key that compaction keeps (KIP-280)."""
    if strategy == "offset":
        return max(records, key=lambda r: r.offset)
    if strategy == "timestamp":
        return max(records, key=lambda r: (r.timestamp, r.offset))
    if strategy == "header":

        def rank(r: ModelRecord) -> tuple[bool, int, int]:
            value = header_value(r, header_name)
            return (value is not None, value if value is not None else 0, r.offset)

        return max(records, key=rank)
    raise ValueError(f"unknown compaction.strategy {strategy!r}")


def parse_policy(policy: str | Sequence[str]) -> set[str]:
    """`compact`, `delete`, `compact,delete` or a list of those, as a set."""
    parts = policy.split(",") if isinstance(policy, str) else list(policy)
    result = {str(part).strip().lower() for part in parts if str(part).strip()}
    if not result or not result <= {"compact", "delete"}:
        raise ValueError(f"bad cleanup.policy {policy!r}")
    return result


def _headers_tuple(headers: Any) -> tuple[tuple[str, bytes | None], ...]:
    """Headers as given to produce (a dict, or a list of [name, value] pairs) -> tuple."""
    if headers is None:
        return ()
    pairs = list(headers.items()) if isinstance(headers, Mapping) else list(headers)
    result = []
    for pair in pairs:
        if isinstance(pair, (str, bytes)) or len(pair) != 2:
            raise ModelRejected(f"a header must be a [name, value] pair, got {pair!r}")
        name, value = pair
        if not isinstance(name, str):
            raise ModelRejected(f"a header name must be a string, got {name!r}")
        if isinstance(value, str):
            value = value.encode("utf-8")
        elif value is not None and not isinstance(value, (bytes, bytearray)):
            raise ModelRejected(f"header {name!r} has a value that is not text or bytes: {value!r}")
        result.append((name, None if value is None else bytes(value)))
    return tuple(result)


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


# ---------------------------------------------------------------------------------------
# The model
# ---------------------------------------------------------------------------------------


class _Partition:
    def __init__(self) -> None:
        self.records: list[ModelRecord] = []  # in offset order
        self.log_start = 0
        self.end_offset = 0  # the next offset to assign
        self.checkpoint = 0  # every offset below it has been compacted
        self.last_decision: dict = {}


class ModelTopic:
    def __init__(self, partitions: int, config: Mapping[str, Any]):
        if not _is_int(partitions) or partitions < 1:
            raise ValueError(f"partitions must be an int >= 1, got {partitions!r}")
        merged = dict(DEFAULTS)
        merged.update(config or {})
        self.partitions = partitions
        self.policy = parse_policy(merged["cleanup.policy"])
        self.min_lag = int(merged["min.compaction.lag.ms"])
        self.max_lag = int(merged["max.compaction.lag.ms"])
        self.min_ratio = float(merged["min.cleanable.dirty.ratio"])
        self.delete_retention = int(merged["delete.retention.ms"])
        self.retention_ms = int(merged["retention.ms"])
        self.retention_bytes = int(merged["retention.bytes"])
        self.timestamp_type = str(merged["message.timestamp.type"])
        if self.timestamp_type not in ("CreateTime", "LogAppendTime"):
            raise ValueError(f"bad message.timestamp.type {self.timestamp_type!r}")
        self.strategy = str(merged["compaction.strategy"])
        self.strategy_header = merged["compaction.strategy.header"]
        if self.strategy not in ("offset", "timestamp", "header"):
            raise ValueError(f"bad compaction.strategy {self.strategy!r}")
        if self.strategy == "header" and not self.strategy_header:
            raise ValueError("compaction.strategy=header needs compaction.strategy.header")
        self.consumed_ms = int(merged["consumed.retention.ms"])
        self.consumed_groups = list(merged["consumed.retention.groups"] or [])
        self.commits: dict[tuple[str, int], int] = {}  # (group, partition) -> offset
        self._logs = [_Partition() for _ in range(partitions)]

    # -- writes -------------------------------------------------------------------------

    def produce(self, records: Sequence[Mapping], now: int) -> None:
        """Append one batch, all or nothing. Raises ModelRejected and writes nothing."""
        placed: list[tuple[int, ModelRecord]] = []  # (partition, record without offset)
        for i, given in enumerate(records):
            key = given.get("key")
            value = given.get("value")
            if key is not None and not isinstance(key, (str, bytes)):
                raise ModelRejected(f"record {i}: key must be text or bytes, got {key!r}")
            if value is not None and not isinstance(value, (str, bytes)):
                raise ModelRejected(f"record {i}: value must be text or bytes, got {value!r}")
            if key is None and "compact" in self.policy:
                raise ModelRejected(f"record {i}: a null key on a topic whose policy includes compact")

            if self.timestamp_type == "LogAppendTime":
                timestamp = now
            else:
                timestamp = given.get("timestamp")
                if timestamp is None:
                    raise ModelRejected(f"record {i}: no timestamp under CreateTime")
                if not _is_int(timestamp) or timestamp < 0:
                    raise ModelRejected(f"record {i}: timestamp must be an int >= 0, got {timestamp!r}")

            partition = given.get("partition")
            if partition is None:
                if key is None:
                    raise ModelRejected(f"record {i}: no key and no partition")
                partition = default_partition(as_bytes(key), self.partitions)
            if not _is_int(partition) or not 0 <= partition < self.partitions:
                raise ModelRejected(f"record {i}: partition {partition!r} out of range")

            headers = _headers_tuple(given.get("headers"))
            placed.append((partition, ModelRecord(-1, timestamp, key, value, headers)))

        # Every record is valid: append them, in batch order.
        for partition, record in placed:
            log = self._logs[partition]
            record.offset = log.end_offset
            log.end_offset += 1
            log.records.append(record)

    def ingest(self, partition: int, records: Sequence[Mapping], kafka_log_start: int | None = None) -> None:
        """Append records that carry Kafka's offsets (CONTRACT section 3, source.kafka).

        Offsets may have gaps; they must be increasing and at or past the log end offset.
        A log that never held a record starts where Kafka's log starts (``kafka_log_start``,
        which compaction never moves), else at the first offset ingested; the log end offset
        becomes the last offset + 1. Timestamps are Kafka's.
        """
        self._check_partition(partition)
        log = self._logs[partition]
        if records and log.end_offset == 0 and log.log_start == 0:
            first = records[0]["offset"] if kafka_log_start is None else kafka_log_start
            log.log_start = log.checkpoint = first
        for given in records:
            offset = given["offset"]
            if not _is_int(offset) or offset < log.end_offset:
                raise ModelRejected(f"offset {offset!r} is below the log end offset {log.end_offset}")
            if given.get("key") is None and "compact" in self.policy:
                raise ModelRejected("a null key on a topic whose policy includes compact")
            log.records.append(ModelRecord(offset, int(given["timestamp"]), given.get("key"), given.get("value"),
                                           _headers_tuple(given.get("headers"))))
            log.end_offset = offset + 1

    def commit_offset(self, group: str, partition: int, offset: int) -> None:
        """A consumer group's committed offset; the latest commit wins."""
        self._check_partition(partition)
        if not _is_int(offset) or offset < 0:
            raise ModelRejected(f"committed offset must be an int >= 0, got {offset!r}")
        self.commits[(group, partition)] = offset

    def delete_records(self, partition: int, before_offset: int) -> None:
        """Kafka's deleteRecords (KIP-107): move the log start forward to before_offset."""
        self._check_partition(partition)
        log = self._logs[partition]
        if "delete" not in self.policy:
            raise ModelRejected("delete-records is refused on a compact-only topic")
        if not _is_int(before_offset) or before_offset < 0:
            raise ModelRejected(f"before offset must be an int >= 0, got {before_offset!r}")
        if before_offset > log.end_offset:
            raise ModelRejected(f"before offset {before_offset} is past the log end offset {log.end_offset}")
        if before_offset > log.log_start:
            log.records = [r for r in log.records if r.offset >= before_offset]
            log.log_start = before_offset

    def maintain(self, now: int, force: bool = False) -> None:
        """Per partition: compaction (if due or forced), then retention."""
        for partition in range(self.partitions):
            self._maintain_partition(partition, now, force)

    # -- reads --------------------------------------------------------------------------

    def offsets(self, partition: int) -> list[int]:
        return [r.offset for r in self._log(partition).records]

    def records(self, partition: int) -> list[ModelRecord]:
        return [replace(r) for r in self._log(partition).records]

    def end_offset(self, partition: int) -> int:
        return self._log(partition).end_offset

    def log_start(self, partition: int) -> int:
        return self._log(partition).log_start

    def checkpoint(self, partition: int) -> int:
        return self._log(partition).checkpoint

    def last_decision(self, partition: int) -> dict:
        return dict(self._log(partition).last_decision)

    # -- internals ----------------------------------------------------------------------

    def _check_partition(self, partition: int) -> None:
        if not _is_int(partition) or not 0 <= partition < self.partitions:
            raise ModelRejected(f"partition {partition!r} out of range")

    def _log(self, partition: int) -> _Partition:
        self._check_partition(partition)
        return self._logs[partition]

    def _maintain_partition(self, partition: int, now: int, force: bool) -> None:
        log = self._logs[partition]
        decision: dict[str, Any] = {
            "partition": partition,
            "now": now,
            "force": force,
            "log_start_before": log.log_start,
            "end_offset": log.end_offset,
            "checkpoint_before": log.checkpoint,
        }

        # First uncleanable offset U (KIP-58, per record).
        cutoff = now - self.min_lag
        first_uncleanable = log.end_offset
        for record in log.records:
            if record.timestamp > cutoff:
                first_uncleanable = record.offset
                break
        checkpoint = log.checkpoint
        dirty = [r for r in log.records if checkpoint <= r.offset < first_uncleanable]
        clean = [r for r in log.records if r.offset < checkpoint]
        dirty_bytes = sum(record_size(r) for r in dirty)
        clean_bytes = sum(record_size(r) for r in clean)
        total = dirty_bytes + clean_bytes
        ratio = dirty_bytes / total if total > 0 else 0.0

        reasons: list[str] = []
        if "compact" in self.policy:
            if dirty and ratio > self.min_ratio:
                reasons.append("dirty_ratio")
            if dirty and min(r.timestamp for r in dirty) < now - self.max_lag:
                reasons.append("max_lag")
            if any(
                r.value is None and r.delete_horizon is not None and r.delete_horizon <= now
                for r in clean
            ):
                reasons.append("tombstone_horizon")
            if force:
                reasons.append("forced")

        decision.update(
            {
                "U": first_uncleanable,
                "dirty_bytes": dirty_bytes,
                "clean_bytes": clean_bytes,
                "dirty_ratio": ratio,
                "oldest_dirty_timestamp": min((r.timestamp for r in dirty), default=None),
                "due_reasons": reasons,
                "compacted": bool(reasons),
            }
        )

        removed_by_compaction: list[int] = []
        if reasons:
            removed_by_compaction = self._compact(log, first_uncleanable, now)
        decision["checkpoint_after"] = log.checkpoint
        decision["removed_by_compaction"] = removed_by_compaction

        removed_by_retention: dict[str, list[int]] = {"time": [], "size": [], "consumed": []}
        if "delete" in self.policy:
            removed_by_retention = self._retain(log, partition, now)
        decision["removed_by_retention"] = removed_by_retention
        decision["log_start_after"] = log.log_start
        log.last_decision = decision

    def _compact(self, log: _Partition, first_uncleanable: int, now: int) -> list[int]:
        """One compaction run over every record below U. Returns the removed offsets."""
        removed: set[int] = set()
        by_key: dict[bytes, list[ModelRecord]] = {}
        for record in log.records:
            if record.offset >= first_uncleanable:
                continue
            if record.key is None:
                removed.add(record.offset)  # the cleaner discards keyless records
            else:
                by_key.setdefault(as_bytes(record.key), []).append(record)

        for records_of_key in by_key.values():
            winner = pick_winner(records_of_key, self.strategy, self.strategy_header)
            for record in records_of_key:
                if record is not winner:
                    removed.add(record.offset)
            if winner.value is None:  # a tombstone: KIP-534's two passes
                if winner.delete_horizon is not None and winner.delete_horizon <= now:
                    removed.add(winner.offset)
                elif winner.delete_horizon is None:
                    winner.delete_horizon = now + self.delete_retention

        log.records = [r for r in log.records if r.offset not in removed]
        log.checkpoint = max(log.checkpoint, first_uncleanable)
        return sorted(removed)

    def _retain(self, log: _Partition, partition: int, now: int) -> dict[str, list[int]]:
        """Time, then size, then consumed retention; each removes a prefix."""
        removed: dict[str, list[int]] = {"time": [], "size": [], "consumed": []}

        if self.retention_ms != -1:
            before = log.end_offset
            for record in log.records:
                if now - record.timestamp <= self.retention_ms:
                    before = record.offset
                    break
            removed["time"] = self._remove_below(log, before)

        if self.retention_bytes != -1:
            left = list(log.records)
            while left and sum(record_size(r) for r in left) > self.retention_bytes:
                left.pop(0)
            before = left[0].offset if left else log.end_offset
            removed["size"] = self._remove_below(log, before)

        commits = [self.commits.get((group, partition)) for group in self.consumed_groups]
        if self.consumed_ms >= 0 and commits and None not in commits:
            smallest_commit = min(commits)
            before = log.end_offset
            for record in log.records:
                if record.offset >= smallest_commit or now - record.timestamp <= self.consumed_ms:
                    before = record.offset
                    break
            removed["consumed"] = self._remove_below(log, before)

        return removed

    @staticmethod
    def _remove_below(log: _Partition, before: int) -> list[int]:
        """Remove every record below `before` and move the log start there, if any record
        lies below it; otherwise change nothing."""
        gone = [r.offset for r in log.records if r.offset < before]
        if gone:
            log.records = [r for r in log.records if r.offset >= before]
            log.log_start = before
        return gone
