"""A compaction check's rules over its records in the driver: the rules of
``framework.checks.rules`` for a compaction stage, and the bounds of
``framework.checks.bounds`` a scoped check takes from its pairing, written once more over
Python rows, for the few records a change touches (``framework.checks.arrow_scope`` reads
them). ``tests/test_arrow_check.py`` pins the two expressions together: on every version
the guarantee tests make, healthy and corrupted, both count the same violations per
guarantee and give the same bounds.

Only counts: a check whose counts are not all zero is measured again by Spark, for the
offending rows it shows. So where Spark's answer would hang on the order of its 64-bit
fingerprints (an offset holding two different records on one side) or on how SQL orders a
null timestamp, this says nothing (None), and Spark counts.
"""

from __future__ import annotations

from collections import Counter
from typing import Callable, NamedTuple, Sequence

from framework.checks import bounds as scoped_bounds
from framework.checks.scope import Scope
from framework.cleaner import rules as cleaner
from framework.spec import TopicConfig

__all__ = ["Record", "counted", "net"]


class Record(NamedTuple):
    """A record as a check compares it: ``timestamp`` and ``horizon`` in epoch
    milliseconds, ``headers`` as ``((key, value), ...)``."""

    offset: int
    key: object
    timestamp: int | None
    value: bytes | None
    headers: tuple | None
    horizon: int | None
    size: int | None

    def says(self) -> tuple:
        """What Spark's fingerprint ``fp`` hashes: what the producer wrote."""
        return self.timestamp, self.key, self.value, self.headers


def net(after: Counter, made: Sequence[Record], undone: Sequence[Record]) -> Counter:
    """The before version's records in scope, as ``ChangeScope.sides`` nets them: the after
    version's, less what the commits inserted or updated to, plus what they deleted or
    updated from (a multiset of whole records; none below once)."""
    before = Counter(after)
    before.update(undone)
    before.subtract(made)
    return +before


class _Side(NamedTuple):
    """One version's records at one offset: how many, and the record (one distinct)."""

    n: int
    record: Record


def _paired(before: Counter, after: Counter) -> dict[int, tuple[_Side | None, _Side | None]] | None:
    """Both sides per offset; None when a side holds two different records at one offset."""
    sides: dict[int, list] = {}
    for index, records in enumerate((before, after)):
        for record, n in records.items():
            pair = sides.setdefault(record.offset, [None, None])
            if pair[index] is not None:
                return None
            pair[index] = _Side(n, record)
    return {offset: (pair[0], pair[1]) for offset, pair in sides.items()}


def _ranks(records: set[Record], config: TopicConfig) -> dict[Record, tuple] | None:
    """``cleaner.rules.winner_rank`` of each record; None when the timestamp strategy meets a
    null timestamp (SQL orders it first; Spark counts)."""
    strategy, name = config.compaction_strategy, config.compaction_strategy_header
    ranks = {}
    for record in records:
        if strategy == "timestamp" and record.timestamp is None:
            return None
        version = (cleaner.header_version(cleaner.last_header(record.headers or (), name)) if strategy == "header"
                   else None)
        ranks[record] = cleaner.winner_rank(strategy, record.offset, record.timestamp or 0, version)
    return ranks


def counted(before: Counter, after: Counter, config: TopicConfig, now_ms: int, dirty_from: int,
            log_start_after: int, outside: dict, scope_of: Callable[[dict], Scope]):
    """The violations of a compaction per guarantee, the data's bounds and the scope they
    give, from the records in scope of both versions (``outside``: what
    ``bounds.scoped_numbers`` reads outside them, U being the pairing's: every young record
    of the before version lies at or above ``dirty_from``); None where Spark must count."""
    pairs = _paired(before, after)
    ranks = None if pairs is None else _ranks(set(before) | set(after), config)
    if ranks is None:
        return None
    young = cleaner.uncleanable_after_ms(now_ms, config)
    removed = [(offset, b.record.size) for offset, (b, a) in pairs.items() if b is not None and a is None]
    young_offsets = [offset for offset, (b, _) in pairs.items()
                     if b is not None and offset >= dirty_from and b.record.timestamp is not None
                     and cleaner.newer_than(b.record.timestamp, young)]
    highest = max(removed, default=None)
    changed = {
        "highest_removed": None if highest is None else {"offset": highest[0], "size": highest[1]},
        "removed": len(removed), "added": sum(1 for b, a in pairs.values() if a is not None and b is None),
        "u_before": min(young_offsets, default=None),
        "removed_from_start": sum(size or 0 for offset, size in removed if offset >= log_start_after),
    }
    data_bounds = scoped_bounds.scoped_finished(outside, changed)
    scope = scope_of(data_bounds)
    counts = Counter(_offset_violations(pairs, scope, config))
    counts.update(_key_violations(pairs, ranks, scope, config))
    return {code: n for code, n in counts.items() if n}, data_bounds, scope


def _offset_violations(pairs: dict, scope: Scope, config: TopicConfig):
    """``rules._offset_rules`` of a compaction: each rule that holds for an offset, by its
    guarantee."""
    stamp = cleaner.delete_horizon_ms(scope.now_ms, config)
    deadline = scope.now_ms - config.max_compaction_lag_ms
    for offset, (b, a) in pairs.items():
        na = a.n if a else 0
        both = b is not None and a is not None
        changed = both and b.record.says() != a.record.says()
        horizon_moved = both and b.record.horizon != a.record.horizon
        if na > 1:
            yield "G1"
        if changed:
            yield "G1"
        if a is not None and b is None and offset < scope.log_end_before:
            yield "G1"
        if a is not None and offset >= scope.log_end_after:
            yield "G1"
        if b is not None and scope.head_start <= offset < scope.log_end_before:
            if na == 0:
                yield "G2"
            elif changed or horizon_moved:
                yield "G2"
        if offset < scope.head_start and horizon_moved:
            fresh_stamp = b.record.horizon is None and b.record.value is None and a.record.horizon == stamp
            if not fresh_stamp:
                yield "G7"
        if config.compact and scope.max_lag_end is not None and a is not None:
            ts = a.record.timestamp
            if scope.checkpoint_after <= offset < scope.max_lag_end and ts is not None and ts < deadline:
                yield "G6"
        if (config.compact and a is not None and offset < scope.checkpoint_after and a.record.value is None
                and a.record.horizon is None):
            yield "G7"


def _key_violations(pairs: dict, ranks: dict, scope: Scope, config: TopicConfig):
    """``rules._key_rules`` of a compaction: the pairing unfolded to a row per offset and
    side, grouped by key (keyless rows one group, as SQL's window groups NULLs)."""
    by_key: dict[object, list] = {}
    for b, a in pairs.values():
        if b is not None:
            by_key.setdefault(b.record.key, []).append(("b", b.record, a is None))
        if a is not None:
            by_key.setdefault(a.record.key, []).append(("a", a.record, False))
    below, log_end_before, head = scope.checkpoint_after, scope.log_end_before, scope.head_start
    for key, rows in by_key.items():
        win = max((ranks[r] for side, r, _ in rows if side == "b" and r.offset < below), default=None)
        clean = sum(1 for side, r, _ in rows if side == "a" and r.offset < below)
        final_b = max(((ranks[r], r) for side, r, _ in rows if side == "b"), default=None)
        final_a = max(((ranks[r], r) for side, r, _ in rows if side == "a" and r.offset < log_end_before),
                      default=None)
        expired = any(side == "b" and r.value is None and r.horizon is not None and r.horizon <= scope.now_ms
                      and r.offset < head for side, r, _ in rows)
        for side, record, removed in rows:
            if side == "a" and record.offset < below:
                if key is None:
                    yield "G4"
                else:
                    if clean > 1:
                        yield "G3"
                    if win is None or ranks[record] != win:
                        yield "G4"
            speaks = ((side == "b" and final_b is not None and record.offset == final_b[1].offset)
                      or (final_b is None and side == "a" and final_a is not None
                          and record.offset == final_a[1].offset))
            if speaks and key is not None and not expired:
                value_b = None if final_b is None else final_b[1].value
                value_a = None if final_a is None else final_a[1].value
                if value_b != value_a:
                    yield "G5"
            if (side == "b" and record.value is None and removed and record.offset < head
                    and win is not None and ranks[record] == win
                    and (record.horizon is None or record.horizon > scope.now_ms)):
                yield "G7"
