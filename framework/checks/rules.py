"""The guarantees' rules in Spark SQL: pair two versions of a partition, aggregate the few
numbers the rules need, and list every violation as ``(guarantee, offset, key, detail)``.

A check costs a fixed, small number of Spark passes whatever the partition's size, and
brings no records to the driver:

1. **Pairing.** Each version is projected to a narrow row per record (offset, key, a
   content fingerprint, the winner rank, timestamp, delete horizon, size) and the two are
   grouped by offset: a full outer join that counts duplicate offsets instead of
   multiplying them. The caller persists it; it is the only pass over the records. On a
   large partition the caller hands in only the records the change touches
   (``framework.checks.changes``); the rules are the same.
2. **Bounds.** The numbers ``framework.checks.scope`` turns into a :class:`Scope`
   (``framework.checks.bounds``), aggregated over the pairing, riding along with the
   violations' count when the stage says what they should be.
3. **Violations.** The per-offset rules in one pass over the pairing, the per-key rules
   (unique keys, winners, final state, tombstones) in one window over the key.

Many small partitions' checks can be one query (``framework.checks.batched``): the rows
carry which partition they are (``by``), and the numbers of each one's :class:`Scope` are
columns joined in (``scopes``): the rules' SQL takes each number as written, so a rule
written once judges a literal or a column alike.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Sequence

from framework.checks.scope import Scope
from framework.cleaner.rules import delete_horizon_ms
from framework.cleaner.spark_sql import sql_string, winner_rank_sql
from framework.spec import TopicConfig

__all__ = ["SAMPLE_ROWS", "Rule", "narrow", "paired", "pairing", "summary", "violations"]

#: How many offending rows each failed guarantee shows.
SAMPLE_ROWS = 5


def narrow(frame, side: str, config: TopicConfig, by: Sequence[str] = ()):
    """One version's records (or some of them), one narrow row per record: what
    :func:`paired` groups (``by``: columns carried along, see :func:`paired`)."""
    return frame.selectExpr(
        *by,
        "`offset`",
        f"'{side}' AS side",
        "key",
        # What a record says, as a 64-bit hash; the null flags keep (key NULL, value x) and
        # (key x, value NULL) apart, since hashing skips NULLs.
        "xxhash64(`timestamp`, key IS NULL, key, value IS NULL, value, size(headers), headers) AS fp",
        # NULL for a tombstone: the final state treats "tombstone" and "absent" alike.
        "CASE WHEN value IS NOT NULL THEN xxhash64(value) END AS vfp",
        "unix_millis(`timestamp`) AS ts",
        "unix_millis(_delete_horizon) AS horizon",
        "_size AS size",
        f"{winner_rank_sql(config)} AS rank",
    )


_PAIRED = {  # column -> side; each becomes <column>_b and/or <column>_a
    "key": "ba", "fp": "ba", "vfp": "ba", "ts": "ba", "horizon": "ba", "size": "b", "rank": "ba",
}


def pairing(before, after, config: TopicConfig, one_task: bool = False):
    """Before and after, side by side per offset: a full outer join that counts duplicate
    offsets instead of multiplying them. ``one_task`` (a small partition's versions): the
    records go through one Spark partition, so the grouping here and the windows of
    :func:`violations` and :func:`summary` need no shuffle: each of the check's two jobs is
    one stage."""
    return paired(narrow(before, "b", config).unionByName(narrow(after, "a", config)), one_task)


def paired(both, one_task: bool = False, counted: bool = False, by: Sequence[str] = ()):
    """The narrow rows of both sides grouped by offset (see :func:`pairing`); ``counted``:
    each row stands for ``_n`` records (see ``framework.checks.changes``); ``by``: columns
    that tell the partitions of a batch apart (``framework.checks.batched``), grouped by too."""
    from pyspark.sql import functions as F

    if one_task:
        both = both.coalesce(1)
    one = "_n" if counted else "1"
    aggregates = [f"coalesce(sum(CASE WHEN side = 'b' THEN {one} END), 0) AS nb",
                  f"coalesce(sum(CASE WHEN side = 'a' THEN {one} END), 0) AS na",
                  # differs from fp_a only when the after version repeats the offset
                  "min(CASE WHEN side = 'a' THEN fp END) AS fp_a_low"]
    for column, sides in _PAIRED.items():
        aggregates += [f"max(CASE WHEN side = '{s}' THEN {column} END) AS {column}_{s}" for s in sides]
    return both.groupBy(*by, "offset").agg(*[F.expr(a) for a in aggregates])


@dataclass(frozen=True)
class Rule:
    """One way a guarantee can be broken: a SQL condition over a row, and what to say.

    ``detail`` is text for Spark's format_string; each ``%s`` takes the next of ``args``
    (SQL expressions over the same row).
    """

    guarantee: str
    when: str
    detail: str
    args: tuple[str, ...] = ()

    def sql(self) -> str:
        detail = sql_string(self.detail)
        if self.args:
            detail = f"format_string({detail}, {', '.join(f'CAST({a} AS STRING)' for a in self.args)})"
        return (f"CASE WHEN {self.when} THEN named_struct('guarantee', '{self.guarantee}', 'detail', {detail}) "
                "END")


def _violations_of(frame, rules: Sequence[Rule], key_sql: str, key_type: str, by: Sequence[str] = ()):
    """Every rule that holds for a row, as (guarantee, offset, key, detail) rows, in one pass."""
    key = f"base64({key_sql})" if key_type == "binary" else key_sql
    found = f"filter(array({', '.join(rule.sql() for rule in rules)}), v -> v IS NOT NULL)"
    return frame.selectExpr(*by, "`offset`", f"{key} AS key", f"explode({found}) AS v").selectExpr(
        *by, "v.guarantee AS guarantee", "CAST(`offset` AS BIGINT) AS `offset`", "CAST(key AS STRING) AS key",
        "v.detail AS detail")


_HORIZON_B = "coalesce(CAST(horizon_b AS STRING), 'none')"
_HORIZON_A = "coalesce(CAST(horizon_a AS STRING), 'none')"


def _offset_rules(scope: Scope, config: TopicConfig, checked: Sequence[str]) -> list[Rule]:
    """Rules judged per offset, from the pairing alone."""
    removed, inserted = "(nb > 0 AND na = 0)", "(na > 0 AND nb = 0)"
    changed = "(nb > 0 AND na > 0 AND (fp_b != fp_a OR fp_b != fp_a_low))"
    horizon_moved = "(nb > 0 AND na > 0 AND NOT (horizon_b <=> horizon_a))"
    vb, va = scope.version_before, scope.version_after
    rules = [
        Rule("G1", "na > 1", f"offset appears %s times in version {va}", ("na",)),
        Rule("G1", changed, f"record changed between versions {vb} and {va} (key %s -> %s; the timestamp, key, "
                            "value or headers differ)", ("key_b", "key_a")),
        Rule("G1", f"{inserted} AND `offset` < {scope.log_end_before}",
             f"not in version {vb}, although below its log end offset {scope.log_end_before}: a record was "
             "inserted or an offset changed"),
        Rule("G1", f"na > 0 AND `offset` >= {scope.log_end_after}",
             f"at or beyond the log end offset {scope.log_end_after} of version {va}"),
    ]
    if scope.mode == "compact":
        head = f"(nb > 0 AND `offset` >= {scope.head_start} AND `offset` < {scope.log_end_before})"
        stamp = delete_horizon_ms(scope.now_ms, config)
        fresh_stamp = f"(horizon_b IS NULL AND vfp_b IS NULL AND horizon_a = {stamp})"
        rules += [
            Rule("G2", f"{head} AND na = 0", f"head record removed (the head starts at U = {scope.head_start})"),
            Rule("G2", f"{head} AND na > 0 AND ({changed} OR {horizon_moved})",
                 f"head record changed (the head starts at U = {scope.head_start})"),
            Rule("G7", f"`offset` < {scope.head_start} AND {horizon_moved} AND NOT {fresh_stamp}",
                 "delete horizon %s -> %s; a tombstone kept for the first time gets now + delete.retention.ms "
                 f"= {stamp} and keeps it", (_HORIZON_B, _HORIZON_A)),
        ]
    if scope.mode in ("retain", "delete_records"):
        start = scope.log_start_after
        rules += [
            Rule("G8", f"{removed} AND `offset` >= {start}", f"removed at or above the new log start {start}"),
            Rule("G8", f"nb > 0 AND na > 0 AND `offset` < {start}", f"still present below the new log start {start}"),
            Rule("G1", horizon_moved, "delete horizon changed by retention: %s -> %s", (_HORIZON_B, _HORIZON_A)),
        ]
        if not scope.consumed_explained:
            # (removals at or above the new log start are the prefix rule's already)
            rules.append(Rule("G8", f"{removed} AND `offset` >= {scope.smallest_committed} AND `offset` < {start}",
                              f"removed at or above the smallest committed offset {scope.smallest_committed}, "
                              "which neither time nor size retention explains"))
    if scope.mode == "validate" and scope.appends_only:
        rules += [
            Rule("G1", f"{removed} AND `offset` >= {scope.log_start_after}",
                 f"removed between versions {vb} and {va}: between maintenance runs only appends are legal"),
            Rule("G1", horizon_moved, f"delete horizon changed between versions {vb} and {va}: %s -> %s",
                 (_HORIZON_B, _HORIZON_A)),
        ]
    if config.compact and scope.max_lag_end is not None:
        deadline = scope.now_ms - config.max_compaction_lag_ms
        rules.append(Rule(
            "G6", f"na > 0 AND `offset` >= {scope.checkpoint_after} AND `offset` < {scope.max_lag_end} "
                  f"AND ts_a < {deadline}",
            f"timestamp %s is older than now - max.compaction.lag.ms = {deadline}, below U = {scope.max_lag_end}, "
            f"yet the record lies above the checkpoint {scope.checkpoint_after}", ("ts_a",)))
    if config.compact:
        rules.append(Rule("G7", f"na > 0 AND `offset` < {scope.checkpoint_after} AND vfp_a IS NULL "
                                "AND horizon_a IS NULL",
                          f"tombstone below the checkpoint {scope.checkpoint_after} without a delete horizon"))
    return [rule for rule in rules if rule.guarantee in checked]


def _key_rows(pairs, by: Sequence[str] = ()):
    """The pairing unfolded again: one row per record of either version, keyed by its key."""
    before = pairs.where("nb > 0").selectExpr(
        *by, "key_b AS key", "'b' AS side", "`offset`", "rank_b AS rank", "vfp_b AS vfp", "horizon_b AS horizon",
        "na = 0 AS removed")
    after = pairs.where("na > 0").selectExpr(
        *by, "key_a AS key", "'a' AS side", "`offset`", "rank_a AS rank", "vfp_a AS vfp", "horizon_a AS horizon",
        "false AS removed")
    return before.unionByName(after)


def _final_text(final: str) -> str:
    return (f"CASE WHEN {final} IS NULL THEN 'absent' "
            f"WHEN {final}.v IS NULL THEN format_string('a tombstone (offset %s)', {final}.r.offset) "
            f"ELSE format_string('the value of offset %s', {final}.r.offset) END")


def _key_rules(scope: Scope, config: TopicConfig, checked: Sequence[str],
               by: Sequence[str] = ()) -> tuple[list[str], list[Rule]]:
    """Window columns over the key, and the rules judged with them."""
    over = f"OVER (PARTITION BY {', '.join((*by, 'key'))})"
    below = f"`offset` < {scope.checkpoint_after}"
    clean_after = f"(side = 'a' AND {below})"
    # Compaction: a survivor must be the winner among the records the run looked at (the
    # before version below the new checkpoint); validate: among the current ones.
    candidates = f"side = '{'b' if scope.mode == 'compact' else 'a'}' AND {below}"
    columns = [
        f"max(CASE WHEN {candidates} THEN rank END) {over} AS _win",
        f"count(CASE WHEN {clean_after} THEN 1 END) {over} AS _clean",
    ]
    c = scope.checkpoint_after
    rules = [
        Rule("G3", f"{clean_after} AND key IS NOT NULL AND _clean > 1", f"key appears %s times below the checkpoint {c}",
             ("_clean",)),
        Rule("G4", f"{clean_after} AND key IS NULL", f"a record without a key below the checkpoint {c}"),
        Rule("G4", f"{clean_after} AND key IS NOT NULL AND _win IS NULL",
             f"no record of this key lay below the checkpoint in version {scope.version_before}"),
        Rule("G4", f"{clean_after} AND key IS NOT NULL AND rank != _win",
             f"not its key's winner under the {config.compaction_strategy} strategy: the winner is offset %s",
             ("_win.offset",)),
    ]
    if scope.mode == "compact":
        state = "named_struct('r', rank, 'v', vfp)"
        columns += [
            f"max(CASE WHEN side = 'b' THEN {state} END) {over} AS _final_b",
            f"max(CASE WHEN side = 'a' AND `offset` < {scope.log_end_before} THEN {state} END) {over} AS _final_a",
            # G5's exception: a tombstone of the key passed its horizon, so it may go.
            f"max(CASE WHEN side = 'b' AND vfp IS NULL AND horizon <= {scope.now_ms} "
            f"AND `offset` < {scope.head_start} THEN 1 END) {over} AS _expired",
        ]
        # One row speaks for the key: the before version's winner, else the after version's.
        speaks = ("((side = 'b' AND `offset` = _final_b.r.offset) "
                  "OR (_final_b IS NULL AND side = 'a' AND `offset` = _final_a.r.offset))")
        rules += [
            Rule("G5", f"{speaks} AND key IS NOT NULL AND _expired IS NULL AND NOT (_final_b.v <=> _final_a.v)",
                 "final state of the key changed: %s before, %s after",
                 (_final_text("_final_b"), _final_text("_final_a"))),
            Rule("G7", f"side = 'b' AND vfp IS NULL AND removed AND `offset` < {scope.head_start} AND rank = _win "
                       f"AND (horizon IS NULL OR horizon > {scope.now_ms})",
                 f"tombstone removed while still its key's winner, before its delete horizon (%s; now {scope.now_ms})",
                 ("coalesce(CAST(horizon AS STRING), 'none set')",)),
        ]
    return columns, [rule for rule in rules if rule.guarantee in checked]


def violations(pairs, scope: Scope, config: TopicConfig, key_type: str, checked: Sequence[str],
               by: Sequence[str] = (), scopes=None):
    """One frame of every violation the rules find: per offset, then per key.

    ``by`` and ``scopes`` judge a batch of partitions (``framework.checks.batched``): the
    pairing is grouped by ``by`` too, and ``scopes`` (one row per ``by`` value) holds the
    numbers each partition is judged by, as the columns ``scope`` names."""
    frames = []

    def scoped(frame):
        return frame if scopes is None else frame.join(scopes, list(by))

    offset_rules = _offset_rules(scope, config, checked)
    if offset_rules:
        frames.append(_violations_of(scoped(pairs), offset_rules, "coalesce(key_a, key_b)", key_type, by))
    columns, key_rules = _key_rules(scope, config, checked, by)
    if key_rules:
        frames.append(_violations_of(scoped(_key_rows(pairs, by)).selectExpr("*", *columns), key_rules, "key",
                                     key_type, by))
    return functools.reduce(lambda one, other: one.unionByName(other), frames)


def summary(violations, limit: int = SAMPLE_ROWS) -> tuple[dict[str, int], dict[str, list]]:
    """Per guarantee: how many violations, and up to ``limit`` of them, lowest offsets first,
    in one pass over the (small) violations frame (the pass that also fills its cache)."""
    rows = (
        violations.selectExpr(
            "*", "count(*) OVER (PARTITION BY guarantee) AS _count",
            "row_number() OVER (PARTITION BY guarantee ORDER BY `offset` ASC NULLS FIRST, detail) AS _n")
        .where(f"_n <= {int(limit)}")
        .collect()
    )
    counts: dict[str, int] = {}
    samples: dict[str, list] = {}
    for row in sorted(rows, key=lambda r: (r["guarantee"], r["_n"])):
        counts[row["guarantee"]] = row["_count"]
        samples.setdefault(row["guarantee"], []).append(row)
    return counts, samples
