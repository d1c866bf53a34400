"""The nine guarantees of CONTRACT section 5, proved with Great Expectations after every run.

A check compares two versions of a partition table, read through Delta time travel: the
version a stage started from and the one it committed (``check_stage``), or the version
the last maintenance run left and the current one (``validate``). It costs a fixed,
small number of Spark passes, whatever the partition's size, and never brings records to
the driver:

1. **Pairing.** Each version is projected to a narrow row per record (offset, key, a
   content fingerprint, the winner rank, timestamp, delete horizon, size) and the two are
   grouped by offset: a full outer join that counts duplicate offsets instead of
   multiplying them. The pairing is persisted; it is the only pass over the records.
2. **Bounds.** One aggregate over the pairing gives the numbers the rules need: the first
   uncleanable offset recomputed from the data, the time-retention boundary, the highest
   removed offset... The pure functions below say what they mean for each guarantee.
3. **Violations.** The rules become one small frame ``(guarantee, offset, key, detail)``:
   the per-offset rules in one pass over the pairing, the per-key rules (unique keys,
   winners, final state, tombstones) in one window over the key.
4. **Judgement.** A one-row metrics frame counts the violations per guarantee (NULL when
   the stage does not check that guarantee). Great Expectations judges it with one named
   expectation per guarantee, in the warehouse's file-backed project, so every result
   lands in the validations store and ``report`` renders it as Data Docs. The spec's own
   ``expectations:`` run as a second suite over the after version's user columns.

A failed guarantee is named in :class:`ValidationOutcome.failed_guarantees` (e.g.
``"G3 unique keys below the checkpoint"``) and explained in ``details`` with up to five
offending rows.

Where the numbers come from: log start, log end offset and checkpoint are read from the
commit metadata of the version itself (what the table says, not what the engine thinks
it wrote); the first uncleanable offset is recomputed from the before version's data, so
a stage that misjudged it is caught (G2, G6).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from . import gx_project
from .errors import ArgumentError, TimeTravelError
from .log import RECORD_COLUMNS, PartitionLog
from .log_state import LogState, fold
from .maintenance import StageCheck, ValidationOutcome
from .spec import TopicConfig, TopicSpec
from .warehouse import Warehouse

__all__ = [
    "GUARANTEES",
    "STAGE_GUARANTEES",
    "Guarantee",
    "Guarantees",
    "Rule",
    "Scope",
    "consumed_removals_explained",
    "head_start",
    "header_version",
    "max_lag_end",
    "state_at",
    "states_at",
    "versions_to_read",
    "winner_rank",
]

#: How many offending rows each failed guarantee shows.
SAMPLE_ROWS = 5
#: Each stage's validation definition runs the guarantees suite over the metrics frame.
DATASOURCE = "topiclake"
#: GE's pandas datasource, for the one-row metrics frames the guarantees are judged on.
METRICS_DATASOURCE = "topiclake-metrics"
BATCH_DEFINITION = "whole frame"


# ----------------------------------------------------------------- the guarantees
@dataclass(frozen=True)
class Guarantee:
    """One guarantee of CONTRACT section 5."""

    code: str
    title: str
    statement: str

    @property
    def name(self) -> str:
        """What a failure is called: ``"G3 unique keys below the checkpoint"``."""
        return f"{self.code} {self.title}"

    @property
    def description(self) -> str:
        """The expectation's description: ``"G3: <the guarantee in words>"``."""
        return f"{self.code}: {self.statement}"

    @property
    def column(self) -> str:
        """The metrics column that counts this guarantee's violations."""
        return f"{self.code.lower()}_violations"


GUARANTEES: tuple[Guarantee, ...] = (
    Guarantee("G1", "offsets never change or repeat",
              "offsets never change and never repeat; what survives is a subset of what was there "
              "(records appended above the earlier version's log end offset aside)"),
    Guarantee("G2", "head untouched",
              "compaction leaves the head (offsets at or above the first uncleanable offset U) exactly as it was"),
    Guarantee("G3", "unique keys below the checkpoint",
              "below the new checkpoint each key appears at most once"),
    Guarantee("G4", "survivors are their key's winner",
              "each survivor below the checkpoint is its key's winner under the compaction strategy"),
    Guarantee("G5", "final state unchanged",
              "compaction leaves the final state (key -> value by the strategy) unchanged, except keys "
              "whose tombstone passed its delete horizon"),
    Guarantee("G6", "max compaction lag honoured",
              "after a run at now, every record below U whose timestamp is older than "
              "now - max.compaction.lag.ms lies below the checkpoint"),
    Guarantee("G7", "tombstones kept for delete.retention.ms",
              "a tombstone stays at least delete.retention.ms after the run that first kept it"),
    Guarantee("G8", "retention removes only a prefix",
              "retention removed only a prefix of the log; consumed retention removed nothing at or above "
              "the smallest committed offset"),
    Guarantee("G9", "time-travel window readable",
              "the table versions inside the time-travel window are still readable"),
)
_BY_CODE = {g.code: g for g in GUARANTEES}

#: What each kind of check proves (CONTRACT section 5; ``validate`` is the verb).
STAGE_GUARANTEES: Mapping[str, tuple[str, ...]] = {
    "compact": ("G1", "G2", "G3", "G4", "G5", "G6", "G7"),
    "retain": ("G1", "G3", "G8"),
    "delete_records": ("G1", "G3", "G8"),
    "vacuum": ("G9",),
    "validate": ("G1", "G3", "G4", "G6", "G7"),
}


# ------------------------------------------------------------------ pure rules
def head_start(first_uncleanable: int | None, cleaned_up_to: int | None, recomputed_u: int) -> int:
    """Where the head a compaction must leave alone starts.

    The stage's own U, a retry's cap (``cleaned_up_to``) and U recomputed from the before
    version's data should agree (or the cap be lower); the smallest is the strictest, so a
    stage that compacted past the true U is caught.
    """
    return min(x for x in (first_uncleanable, cleaned_up_to, recomputed_u) if x is not None)


def max_lag_end(recomputed_u: int, first_uncleanable: int | None, cleaned_up_to: int | None) -> int:
    """G6 looks at records below this: U recomputed from the data, or a retry's cap.

    A run whose commit lost to producers is capped (``cleaned_up_to`` below the U it
    measured) at the segment it rolled to; records above the cap were appended while it
    ran and wait for the next run. An uncapped run reports its own U as ``cleaned_up_to``;
    that is exactly what G6 must not trust.
    """
    capped = cleaned_up_to is not None and first_uncleanable is not None and cleaned_up_to < first_uncleanable
    return min(recomputed_u, cleaned_up_to) if capped else recomputed_u


def consumed_removals_explained(highest_removed: int | None, smallest_committed: int | None,
                                time_boundary: int | None, max_bytes: int | None, suffix_bytes: int) -> bool:
    """May a retention run have removed records at or above the smallest committed offset?

    Only time or size retention can (KIP-68 comes after them). Time removes every record
    below ``time_boundary``; size removes a record while the records from it to the end
    hold more than ``max_bytes`` (``suffix_bytes``: the highest removed record's size plus
    the bytes the run kept).
    """
    if highest_removed is None or smallest_committed is None or highest_removed < smallest_committed:
        return True
    if time_boundary is not None and highest_removed < time_boundary:
        return True
    return max_bytes is not None and suffix_bytes > max_bytes


def first_stamp_ms(now_ms: int, config: TopicConfig) -> int:
    """The delete horizon a run gives a tombstone it keeps for the first time."""
    return now_ms + config.delete_retention_ms


@dataclass(frozen=True)
class Scope:
    """The numbers one before/after comparison is judged by."""

    mode: str                        # compact | retain | delete_records | validate
    now_ms: int
    version_before: int
    version_after: int
    log_end_before: int
    log_end_after: int
    log_start_after: int
    #: below this every key must appear once (max of checkpoint and log start, after)
    checkpoint_after: int
    #: compaction: offsets at or above this must be untouched
    head_start: int | None = None
    #: G6: records in [checkpoint_after, max_lag_end) must not be older than max lag
    max_lag_end: int | None = None
    smallest_committed: int | None = None
    #: False when retention removed records at or above the smallest committed offset
    #: that neither time nor size retention explains
    consumed_explained: bool = True
    #: validate, since the last maintenance run: nothing but appends is legal
    appends_only: bool = False


# ------------------------------------------------------------ table versions
def state_at(log: PartitionLog, version: int) -> LogState:
    """The offset bookkeeping as of ``version``, folded from the commit metadata up to it."""
    return states_at(log, [version])[version]


HISTORY_PAGES = (32, 512, None)


def states_at(log: PartitionLog, versions: Iterable[int], first_page: list | None = None) -> dict[int, LogState]:
    """The bookkeeping as of each of ``versions``; ``first_page`` is ``log.commits(32)`` if
    the caller already read it (each read of the Delta history is a Spark job)."""
    wanted = sorted(set(versions))
    found: dict[int, LogState] = {}
    for limit in HISTORY_PAGES:
        commits = first_page if (limit == HISTORY_PAGES[0] and first_page is not None) else log.commits(limit)
        exhausted = limit is None or len(commits) < limit
        for version in wanted:
            if version in found:
                continue
            folded = fold(c for c in commits if c.version <= version)
            if folded.state is not None and (folded.complete or exhausted):
                found[version] = folded.state
        if len(found) == len(wanted) or exhausted:
            break
    for version in wanted:
        if version not in found:  # the Delta log no longer holds topiclake's bookkeeping
            found[version] = _state_from_data(log, version)
    return found


def _state_from_data(log: PartitionLog, version: int) -> LogState:
    from pyspark.sql import functions as F

    row = log.read(version).agg(F.min("offset").alias("lo"), F.max("offset").alias("hi")).collect()[0]
    if row["hi"] is None:
        return LogState()
    return LogState(log_start_offset=row["lo"], log_end_offset=row["hi"] + 1, checkpoint=row["lo"])


def _clean_end(state: LogState) -> int:
    return max(state.checkpoint, state.log_start_offset)


# ------------------------------------------------------------ Spark, as SQL text
# The rules are written as Spark SQL expressions: each is one call into the JVM, where
# building the same expressions from Column objects takes one call per node (thousands
# per check, most of a small check's time). Only our own column names and numbers are
# pasted in; the one user string (the header name) goes through _sql_string.


def _sql_string(text: str) -> str:
    """A Spark SQL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _header_version_sql(name: str) -> str:
    """KIP-280's header version: the last header called ``name``, read as decimal text (an
    optional minus sign and digits, nothing else), else as exactly 8 big-endian bytes;
    NULL when missing or unparsable (cleaner.header_version, in Spark SQL)."""
    raw = f"try_element_at(filter(headers, h -> h.key = {_sql_string(name)}), -1).value"
    # \z, not $: Java's $ also matches before a final newline, and the cast would trim it.
    return (f"CASE WHEN CAST({raw} AS STRING) RLIKE '^-?[0-9]+\\\\z' THEN try_cast(CAST({raw} AS STRING) AS BIGINT) "
            f"WHEN octet_length({raw}) = 8 THEN CAST(conv(hex({raw}), 16, -10) AS BIGINT) END")


def header_version(name: str):
    """:func:`_header_version_sql` as a column of a frame with a ``headers`` column."""
    from pyspark.sql import functions as F

    return F.expr(_header_version_sql(name))


def _rank_sql(config: TopicConfig) -> str:
    """A struct whose maximum is the key's winner (KIP-280); its last field is the offset."""
    strategy = config.compaction_strategy
    if strategy == "offset":
        return "named_struct('offset', `offset`)"
    if strategy == "timestamp":
        return "named_struct('ts', unix_millis(`timestamp`), 'offset', `offset`)"
    if strategy == "header":
        version = _header_version_sql(config.compaction_strategy_header)
        return (f"named_struct('has', ({version}) IS NOT NULL, 'version', coalesce({version}, 0L), "
                "'offset', `offset`)")
    raise ValueError(f"unknown compaction.strategy {strategy!r}")


def winner_rank(config: TopicConfig):
    """The winner rank as a column of a partition table."""
    from pyspark.sql import functions as F

    return F.expr(_rank_sql(config))


def _side(frame, side: str, config: TopicConfig):
    """One version, one narrow row per record."""
    return frame.selectExpr(
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
        f"{_rank_sql(config)} AS rank",
    )


_PAIRED = {  # column -> side; each becomes <column>_b and/or <column>_a
    "key": "ba", "fp": "ba", "vfp": "ba", "ts": "ba", "horizon": "ba", "size": "b", "rank": "ba",
}


def _pairing(before, after, config: TopicConfig):
    """Before and after, side by side per offset: a full outer join that counts duplicate
    offsets instead of multiplying them."""
    from pyspark.sql import functions as F

    both = _side(before, "b", config).unionByName(_side(after, "a", config))
    aggregates = ["count(CASE WHEN side = 'b' THEN 1 END) AS nb", "count(CASE WHEN side = 'a' THEN 1 END) AS na",
                  # differs from fp_a only when the after version repeats the offset
                  "min(CASE WHEN side = 'a' THEN fp END) AS fp_a_low"]
    for column, sides in _PAIRED.items():
        aggregates += [f"max(CASE WHEN side = '{s}' THEN {column} END) AS {column}_{s}" for s in sides]
    return both.groupBy("offset").agg(*[F.expr(a) for a in aggregates])


def _bounds(pairs, config: TopicConfig, now_ms: int, log_start_after: int) -> dict:
    """The few numbers the rules need, in one aggregate over the pairing."""
    from pyspark.sql import functions as F

    young = now_ms - config.min_compaction_lag_ms
    time_boundary = "CAST(NULL AS BIGINT)"
    if config.delete and config.retention_ms >= 0:
        time_boundary = f"min(CASE WHEN nb > 0 AND ts_b >= {now_ms - config.retention_ms} THEN `offset` END)"
    aggregates = [
        f"min(CASE WHEN nb > 0 AND ts_b > {young} THEN `offset` END) AS u_before",
        f"min(CASE WHEN na > 0 AND ts_a > {young} THEN `offset` END) AS u_after",
        f"{time_boundary} AS time_boundary",
        "max(CASE WHEN nb > 0 AND na = 0 THEN named_struct('offset', `offset`, 'size', size_b) END) AS highest_removed",
        f"coalesce(sum(CASE WHEN nb > 0 AND na > 0 AND `offset` >= {log_start_after} THEN size_b END), 0) AS kept_bytes",
        "count(CASE WHEN nb > 0 THEN 1 END) AS records_before",
        "count(CASE WHEN na > 0 THEN 1 END) AS records_after",
        "count(CASE WHEN nb > 0 AND na = 0 THEN 1 END) AS removed",
        "count(CASE WHEN na > 0 AND nb = 0 THEN 1 END) AS added",
    ]
    bounds = pairs.agg(*[F.expr(a) for a in aggregates]).collect()[0].asDict()
    highest = bounds.pop("highest_removed")
    bounds["highest_removed"] = None if highest is None else highest["offset"]
    bounds["highest_removed_size"] = 0 if highest is None else (highest["size"] or 0)
    return bounds


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
        detail = _sql_string(self.detail)
        if self.args:
            detail = f"format_string({detail}, {', '.join(f'CAST({a} AS STRING)' for a in self.args)})"
        return (f"CASE WHEN {self.when} THEN named_struct('guarantee', '{self.guarantee}', 'detail', {detail}) "
                "END")


def _violations_of(frame, rules: Sequence[Rule], key_sql: str, key_type: str):
    """Every rule that holds for a row, as (guarantee, offset, key, detail) rows, in one pass."""
    key = f"base64({key_sql})" if key_type == "binary" else key_sql
    found = f"filter(array({', '.join(rule.sql() for rule in rules)}), v -> v IS NOT NULL)"
    return frame.selectExpr("`offset`", f"{key} AS key", f"explode({found}) AS v").selectExpr(
        "v.guarantee AS guarantee", "CAST(`offset` AS BIGINT) AS `offset`", "CAST(key AS STRING) AS key",
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
        stamp = first_stamp_ms(scope.now_ms, config)
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


def _key_rows(pairs):
    """The pairing unfolded again: one row per record of either version, keyed by its key."""
    before = pairs.where("nb > 0").selectExpr(
        "key_b AS key", "'b' AS side", "`offset`", "rank_b AS rank", "vfp_b AS vfp", "horizon_b AS horizon",
        "na = 0 AS removed")
    after = pairs.where("na > 0").selectExpr(
        "key_a AS key", "'a' AS side", "`offset`", "rank_a AS rank", "vfp_a AS vfp", "horizon_a AS horizon",
        "false AS removed")
    return before.unionByName(after)


def _final_text(final: str) -> str:
    return (f"CASE WHEN {final} IS NULL THEN 'absent' "
            f"WHEN {final}.v IS NULL THEN format_string('a tombstone (offset %s)', {final}.r.offset) "
            f"ELSE format_string('the value of offset %s', {final}.r.offset) END")


def _key_rules(scope: Scope, config: TopicConfig, checked: Sequence[str]) -> tuple[list[str], list[Rule]]:
    """Window columns over the key, and the rules judged with them."""
    over = "OVER (PARTITION BY key)"
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


def _violations(pairs, scope: Scope, config: TopicConfig, key_type: str, checked: Sequence[str]):
    """One frame of every violation the rules find: per offset, then per key."""
    frames = []
    offset_rules = _offset_rules(scope, config, checked)
    if offset_rules:
        frames.append(_violations_of(pairs, offset_rules, "coalesce(key_a, key_b)", key_type))
    columns, key_rules = _key_rules(scope, config, checked)
    if key_rules:
        frames.append(_violations_of(_key_rows(pairs).selectExpr("*", *columns), key_rules, "key", key_type))
    result = frames[0]
    for frame in frames[1:]:
        result = result.unionByName(frame)
    return result


VIOLATION_COLUMNS = ("guarantee", "offset", "key", "detail")


def _literal_violations(spark, rows: Sequence[tuple]):
    """A violations frame from a few driver-side rows, built in the JVM (no Python worker)."""
    def literal(value) -> str:
        return "NULL" if value is None else str(int(value)) if isinstance(value, int) else _sql_string(str(value))

    structs = [
        "named_struct(" + ", ".join(f"'{name}', {literal(value)}" for name, value in zip(VIOLATION_COLUMNS, row)) + ")"
        for row in rows
    ]
    if not structs:
        return spark.range(0).selectExpr("CAST(NULL AS STRING) AS guarantee", "CAST(NULL AS BIGINT) AS `offset`",
                                         "CAST(NULL AS STRING) AS key", "CAST(NULL AS STRING) AS detail")
    return spark.range(1).selectExpr(f"explode(array({', '.join(structs)})) AS v").selectExpr(
        "CAST(v.guarantee AS STRING) AS guarantee", "CAST(v.offset AS BIGINT) AS `offset`",
        "CAST(v.key AS STRING) AS key", "CAST(v.detail AS STRING) AS detail")


def _metrics(counts: Mapping[str, int], checked: Sequence[str], context: Mapping[str, object]):
    """One row: per guarantee the number of violations (None = not checked), and context.

    The counts were computed by Spark over the violations (:func:`_summary`); GE judges
    this one row with its pandas engine, in milliseconds (its Spark engine took ~0.8 s a
    check, more than the Spark work it judged).
    """
    import pandas as pd

    row: dict[str, object] = {g.column: (counts.get(g.code, 0) if g.code in checked else None) for g in GUARANTEES}
    row.update(context)
    return pd.DataFrame([row], dtype=object)


def _sql_literal(value) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{value}L"
    return _sql_string(str(value))


def _summary(violations, limit: int = SAMPLE_ROWS) -> tuple[dict[str, int], dict[str, list]]:
    """Per guarantee: how many violations, and up to ``limit`` of them, lowest offsets first.

    One pass over the (small) violations frame; it is also the pass that fills its cache.
    """
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


# ------------------------------------------------------------- G9: readability
def versions_to_read(check: StageCheck, oldest_still_inside: int | None) -> list[tuple[int, str]]:
    """The versions a vacuum must have left readable, and why each is on the list.

    The window slides while the check runs: a version that was inside it when the
    vacuum ran may have left it since (``oldest_still_inside`` is the oldest version
    inside it now), and Delta then rightly refuses it. The latest version is always due.
    """
    oldest = check.oldest_window_version
    if oldest is not None and oldest_still_inside is not None:
        oldest = max(oldest, oldest_still_inside)
    elif oldest_still_inside is None:
        oldest = None
    chosen: dict[int, str] = {}
    if oldest is not None and oldest <= check.version_after:
        chosen[oldest] = "the oldest version inside the time-travel window"
        if check.version_before >= oldest:
            chosen.setdefault(check.version_before, "the version before the vacuum")
    chosen.setdefault(check.version_after, "the version after the vacuum")
    return sorted(chosen.items())


def read_problem(log: PartitionLog, version: int) -> str | None:
    """Why ``version`` cannot be read in full, or None when it can.

    Every data file must be opened: the largest hash of one column cannot be answered
    from Delta's statistics, which a count (or a min or max of the column) could be.
    """
    from pyspark.sql import functions as F

    try:
        log.read(version).agg(F.max(F.xxhash64("offset"))).collect()
    except Exception as error:  # noqa: BLE001 - any failure to read is the finding
        text = str(error).strip()
        first = text.splitlines()[0] if text else type(error).__name__
        return first[:400]
    return None


# ----------------------------------------------------------- Great Expectations
def _guarantee_expectations():
    import great_expectations.expectations as gxe

    # A map expectation skips NULLs: a guarantee the stage does not check shows as
    # "missing", neither passed nor failed.
    return [
        gxe.ExpectColumnValuesToBeBetween(column=g.column, min_value=0, max_value=0, description=g.description,
                                          meta={"guarantee": g.name})
        for g in GUARANTEES
    ]


def _spec_expectations(spec: TopicSpec):
    from great_expectations.expectations.expectation_configuration import ExpectationConfiguration

    return [
        ExpectationConfiguration(type=e.type, kwargs=e.to_dict()["kwargs"], meta=e.to_dict().get("meta") or {})
        .to_domain_obj()
        for e in spec.expectations
    ]


def _signature(expectations) -> list:
    """What makes two suites the same, ignoring GE's ids."""
    import json

    out = []
    for e in expectations:
        body = e.configuration.to_json_dict()
        body.pop("id", None)
        body.pop("rendered_content", None)
        out.append(json.dumps(body, sort_keys=True, default=str))
    return out


class _Project:
    """The warehouse's GE project: one datasource, and suites, assets and validation
    definitions fetched or added by name, kept in sync with the code and the spec."""

    def __init__(self, warehouse: Warehouse):
        self.context = gx_project.context(warehouse)

    def _datasource(self, name: str):
        try:
            return self.context.data_sources.get(name)
        except KeyError:
            if name == METRICS_DATASOURCE:
                return self.context.data_sources.add_pandas(name)
            # We persist what we validate ourselves; GE caching each batch would double it.
            return self.context.data_sources.add_spark(name, persist=False)

    def _batch_definition(self, asset_name: str, datasource: str):
        source = self._datasource(datasource)
        try:
            asset = source.get_asset(asset_name)
        except LookupError:
            asset = source.add_dataframe_asset(asset_name)
        try:
            return asset.get_batch_definition(BATCH_DEFINITION)
        except KeyError:
            return asset.add_batch_definition_whole_dataframe(BATCH_DEFINITION)

    def _suite(self, name: str, expectations):
        import great_expectations as gx
        from great_expectations.exceptions import DataContextError

        try:
            suite = self.context.suites.get(name)
        except DataContextError:
            return self.context.suites.add(gx.ExpectationSuite(name=name, expectations=expectations))
        if _signature(suite.expectations) != _signature(expectations):
            for old in list(suite.expectations):
                suite.delete_expectation(old)
            for new in expectations:
                suite.add_expectation(new)
            suite.save()
        return suite

    def _definition(self, name: str, batch_definition, suite):
        import great_expectations as gx
        from great_expectations.exceptions import DataContextError

        try:
            found = self.context.validation_definitions.get(name)
        except DataContextError:
            found = None
        if found is not None and found.suite.name == suite.name and found.data.name == batch_definition.name \
                and found.asset.name == batch_definition.data_asset.name \
                and found.data_source.name == batch_definition.data_asset.datasource.name:
            return found
        if found is not None:
            self.context.validation_definitions.delete(name)
        return self.context.validation_definitions.add(gx.ValidationDefinition(name=name, data=batch_definition,
                                                                               suite=suite))

    def run(self, definition: str, suite_name: str, expectations, asset: str, frame, result_format: str,
            datasource: str = DATASOURCE):
        suite = self._suite(suite_name, expectations)
        validation = self._definition(definition, self._batch_definition(asset, datasource), suite)
        return validation.run(batch_parameters={"dataframe": frame}, result_format=result_format)


# ----------------------------------------------------------------- the class
class Guarantees:
    """Checks the guarantees of a partition after a maintenance stage, or between versions."""

    def __init__(self, spark, warehouse: Warehouse):
        self.spark = spark
        self.warehouse = warehouse
        self._project: _Project | None = None

    @property
    def project(self) -> _Project:
        if self._project is None:
            self._project = _Project(self.warehouse)
        return self._project

    # ------------------------------------------------------------ entry points
    def check_stage(self, check: StageCheck) -> ValidationOutcome:
        """Judge one committed stage (Maintenance calls this after each commit)."""
        if check.stage not in STAGE_GUARANTEES or check.stage == "validate":
            raise ArgumentError(f"StageCheck.stage: {check.stage!r} is not a maintenance stage; "
                                "stages: compact, retain, delete_records, vacuum")
        if check.stage == "vacuum":
            return self._check_vacuum(check)
        log = check.log
        state_before = check.state_before
        state_after = state_at(log, check.version_after)
        before = check.before if check.before is not None else log.read(check.version_before)
        after = log.read(check.version_after)

        def scope_of(bounds: dict) -> Scope:
            return _stage_scope(check, state_before, state_after, bounds)

        return self._compare(log, check.stage, before, after, state_after, scope_of, check.now_ms,
                             run_spec_expectations=True)

    def validate(self, log: PartitionLog, now_ms: int, from_version: int | None = None,
                 to_version: int | None = None) -> ValidationOutcome:
        """``topiclake validate``: the invariants of ``to_version`` (default: the latest) and,
        against ``from_version`` (default: the version the last maintenance run left, else
        0), that nothing but appends happened in between."""
        recent = log.commits(HISTORY_PAGES[0])
        latest = recent[0].version
        to = latest if to_version is None else to_version
        if not 0 <= to <= latest:
            raise ArgumentError(f"--to-version: {to} is not a version of {log.name} (0..{latest})")
        notes: list[str] = []
        if from_version is None:
            start = self._last_run_version(log)
            start = 0 if start is None or start > to else start
        else:
            start = from_version
            if not 0 <= start <= to:
                raise ArgumentError(f"--from-version: {start} must be between 0 and the version checked ({to})")
        try:
            before = log.read(start)
        except TimeTravelError as error:
            if from_version is not None:
                raise
            # The last run's version left the time-travel window: only the invariants remain.
            notes.append(f"note: compared with nothing: {error}")
            start, before = to, None
        after = log.read(to)
        if before is None:
            before = after
        states = states_at(log, [start, to], first_page=recent)

        def scope_of(bounds: dict) -> Scope:
            return _validate_scope(now_ms, start, to, states[start], states[to], bounds,
                                   appends_only=from_version is None)

        outcome = self._compare(log, "validate", before, after, states[to], scope_of, now_ms,
                                run_spec_expectations=True)
        if notes:
            return ValidationOutcome(outcome.passed, outcome.failed_guarantees, tuple(notes) + outcome.details)
        return outcome

    # --------------------------------------------------------------- the work
    def _compare(self, log: PartitionLog, stage: str, before, after, state_after: LogState, scope_of,
                 now_ms: int, run_spec_expectations: bool) -> ValidationOutcome:
        config = log.spec.config
        checked = STAGE_GUARANTEES[stage]
        pairs = _pairing(before, after, config).persist()
        violations = None
        try:
            bounds = _bounds(pairs, config, now_ms, state_after.log_start_offset)
            scope = scope_of(bounds)
            violations = _violations(pairs, scope, config, log.spec.key_type, checked).persist()
            context = {"stage": stage, "version_before": scope.version_before, "version_after": scope.version_after,
                       "now_ms": now_ms, "records_before": bounds["records_before"],
                       "records_after": bounds["records_after"], "removed_records": bounds["removed"],
                       "checkpoint_after": scope.checkpoint_after, "log_start_after": scope.log_start_after,
                       "first_uncleanable_offset": bounds["u_before"]}
            outcome = self._judge(log, stage, scope, violations, context)
        finally:
            for frame in (violations, pairs):
                if frame is not None:
                    frame.unpersist()
        if run_spec_expectations and log.spec.expectations:
            outcome = _merge(outcome, self._spec_suite(log, stage, after))
        return outcome

    def _check_vacuum(self, check: StageCheck) -> ValidationOutcome:
        import time

        from .vacuum import oldest_readable_version

        log = check.log
        window = check.window_ms if check.window_ms is not None else log.spec.config.time_travel_retention_ms
        still_inside = oldest_readable_version(log, window, int(time.time() * 1000))
        rows = []
        for version, why in versions_to_read(check, still_inside):
            problem = read_problem(log, version)
            if problem is not None:
                rows.append(("G9", None, None, f"version {version} ({why}) cannot be read: {problem}"))
        violations = _literal_violations(self.spark, rows).persist()
        context = {"stage": "vacuum", "version_before": check.version_before, "version_after": check.version_after,
                   "now_ms": check.now_ms, "oldest_window_version": check.oldest_window_version}
        scope = Scope("vacuum", check.now_ms, check.version_before, check.version_after, 0, 0, 0, 0)
        try:
            return self._judge(log, "vacuum", scope, violations, context)
        finally:
            violations.unpersist()

    def _judge(self, log: PartitionLog, stage: str, scope: Scope, violations, context: Mapping[str, object]
               ) -> ValidationOutcome:
        """Great Expectations judges the metrics row; the violations explain what failed."""
        counts, samples = _summary(violations)
        result = self.project.run(
            definition=f"topiclake.{log.name}.{stage}.guarantees",
            suite_name=f"topiclake.{log.spec.topic}.guarantees",
            expectations=_guarantee_expectations(),
            asset=f"{log.spec.topic}.guarantees",
            frame=_metrics(counts, STAGE_GUARANTEES[stage], context),
            result_format="BOOLEAN_ONLY",
            datasource=METRICS_DATASOURCE,
        )
        failed: list[str] = []
        details: list[str] = []
        for item in result.results:
            if item.success:
                continue
            name = (item.expectation_config.meta or {}).get("guarantee") or item.expectation_config.type
            failed.append(name)
            code = name.split()[0]
            details.append(f"{name}: {counts.get(code, 'some')} violation(s) in {log.name}, "
                           f"versions {scope.version_before} -> {scope.version_after}")
            for row in samples.get(code, []):
                where = [] if row["offset"] is None else [f"offset {row['offset']}"]
                if row["key"] is not None:
                    where.append(f"key {row['key']!r}")
                details.append(f"  {', '.join(where) + ': ' if where else ''}{row['detail']}")
        return ValidationOutcome(passed=not failed, failed_guarantees=tuple(failed), details=tuple(details))

    def _spec_suite(self, log: PartitionLog, stage: str, after) -> ValidationOutcome:
        """The spec's own expectations over the after version's user columns."""
        result = self.project.run(
            definition=f"topiclake.{log.name}.{stage}.expectations",
            suite_name=f"topiclake.{log.spec.topic}.expectations",
            expectations=_spec_expectations(log.spec),
            asset=f"{log.spec.topic}.records",
            frame=after.select(*RECORD_COLUMNS),
            result_format="SUMMARY",
        )
        failed: list[str] = []
        details: list[str] = []
        for item in result.results:
            if item.success:
                continue
            config = item.expectation_config
            name = f"spec expectation {config.type}"
            if name not in failed:
                failed.append(name)
            kwargs = {k: v for k, v in config.kwargs.items() if k != "batch_id"}  # GE's own, not the spec's
            details.append(f"{name} {kwargs}: {_observed(item)}")
        return ValidationOutcome(passed=not failed, failed_guarantees=tuple(failed), details=tuple(details))

    def _last_run_version(self, log: PartitionLog) -> int | None:
        from .history import MaintenanceHistory

        last = MaintenanceHistory(self.spark, self.warehouse).last_run(log.spec.topic, log.partition)
        return None if last is None else last["version_after"]


def _observed(item) -> str:
    """A short account of a failed spec expectation."""
    info = item.exception_info or {}
    if isinstance(info, dict) and info.get("raised_exception"):
        return f"could not be evaluated: {str(info.get('exception_message'))[:300]}"
    result = item.result or {}
    if "unexpected_count" in result:
        sample = list(result.get("partial_unexpected_list") or [])[:SAMPLE_ROWS]
        return f"{result['unexpected_count']} unexpected value(s), e.g. {sample}"
    if "observed_value" in result:
        return f"observed {result['observed_value']!r}"
    return "failed"


def _merge(first: ValidationOutcome, second: ValidationOutcome) -> ValidationOutcome:
    return ValidationOutcome(
        passed=first.passed and second.passed,
        failed_guarantees=first.failed_guarantees + second.failed_guarantees,
        details=first.details + second.details,
    )


def _stage_scope(check: StageCheck, before: LogState, after: LogState, bounds: dict) -> Scope:
    """The numbers a compaction or retention stage is judged by."""
    config = check.log.spec.config
    u_before = bounds["u_before"] if bounds["u_before"] is not None else before.log_end_offset
    u_before = min(u_before, before.log_end_offset)
    common = dict(
        now_ms=check.now_ms, version_before=check.version_before, version_after=check.version_after,
        log_end_before=before.log_end_offset, log_end_after=after.log_end_offset,
        log_start_after=after.log_start_offset, checkpoint_after=_clean_end(after),
    )
    if check.stage == "compact":
        return Scope(mode="compact", head_start=head_start(check.first_uncleanable_offset, check.cleaned_up_to, u_before),
                     max_lag_end=max_lag_end(u_before, check.first_uncleanable_offset, check.cleaned_up_to),
                     **common)
    smallest = check.smallest_committed_offset if check.stage == "retain" else None
    time_boundary = None  # time retention removes every record below it
    if config.delete and config.retention_ms >= 0:
        # no record young enough: time retention may remove them all
        time_boundary = bounds["time_boundary"] if bounds["time_boundary"] is not None else before.log_end_offset
    explained = consumed_removals_explained(
        bounds["highest_removed"], smallest, time_boundary,
        None if config.retention_bytes == -1 else config.retention_bytes,
        bounds["highest_removed_size"] + bounds["kept_bytes"],
    )
    return Scope(mode=check.stage, smallest_committed=smallest, consumed_explained=explained, **common)


def _validate_scope(now_ms: int, version_before: int, version_after: int, before: LogState, after: LogState,
                    bounds: dict, appends_only: bool) -> Scope:
    """The numbers ``validate`` judges the current version (and the appends since) by."""
    u_after = bounds["u_after"] if bounds["u_after"] is not None else after.log_end_offset
    return Scope(
        mode="validate", now_ms=now_ms, version_before=version_before, version_after=version_after,
        log_end_before=before.log_end_offset, log_end_after=after.log_end_offset,
        log_start_after=after.log_start_offset, checkpoint_after=_clean_end(after),
        max_lag_end=min(u_after, after.log_end_offset), appends_only=appends_only,
    )
