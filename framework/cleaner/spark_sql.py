"""The cleaner's record rules (``framework.cleaner.rules``) as Spark SQL expressions.

The compaction engine ranks records with them and the guarantee checks judge survivors
with them, so there is one Spark expression of each rule; ``tests/test_header_parsing.py``
and ``tests/test_cleaner.py`` pin it to the pure function on a shared corpus.

SQL text, not Column trees: each expression is one call into the JVM, where building it
from Column objects takes one call per node. Only our own column names and numbers are
pasted in; the one user string (the header name) goes through :func:`sql_string`.
"""

from __future__ import annotations

from framework.spec import TopicConfig

__all__ = ["header_version", "header_version_sql", "last_header_sql", "newer_than_sql", "retention_keeps_sql",
           "sql_string", "winner_rank_sql"]

#: Spark's largest TIMESTAMP, in epoch milliseconds (9999-12-31T23:59:59.999).
_MAX_TIMESTAMP_MS = 253402300799999


def sql_string(text: str) -> str:
    """A Spark SQL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def newer_than_sql(ms: int) -> str:
    """Records whose timestamp is newer than ``ms`` (how U and time retention find the young
    ones). The TIMESTAMP literal, clamped to Spark's range, lets Delta skip the files whose
    newest timestamp is older; the millisecond comparison keeps the rule exact."""
    floor = max(0, min(ms, _MAX_TIMESTAMP_MS))
    return f"`timestamp` >= timestamp_millis({floor}) AND unix_millis(`timestamp`) > {ms}"


def retention_keeps_sql(keep_since_ms: int, keep_from_offset: int | None = None) -> str:
    """The records time or consumed retention keeps (``rules.retention_keeps``)."""
    young = newer_than_sql(keep_since_ms - 1)
    return young if keep_from_offset is None else f"(`offset` >= {int(keep_from_offset)} OR ({young}))"


def last_header_sql(name: str) -> str:
    """The value of the record's last header called ``name`` (names are case-sensitive)."""
    return f"try_element_at(filter(headers, h -> h.key = {sql_string(name)}), -1).value"


def header_version_sql(raw: str) -> str:
    """KIP-280's header version of the header value ``raw`` (a SQL expression): decimal text
    (an optional minus sign and digits, nothing else), else exactly 8 big-endian bytes;
    NULL when missing or unparsable (``rules.header_version``)."""
    # \z, not $: Java's $ also matches before a final newline, and the cast would trim it.
    return (f"CASE WHEN CAST({raw} AS STRING) RLIKE '^-?[0-9]+\\\\z' THEN try_cast(CAST({raw} AS STRING) AS BIGINT) "
            f"WHEN octet_length({raw}) = 8 THEN CAST(conv(hex({raw}), 16, -10) AS BIGINT) END")


def header_version(name: str):
    """The header version as a column of a frame with a ``headers`` column."""
    from pyspark.sql import functions as F

    return F.expr(header_version_sql(last_header_sql(name)))


def winner_rank_sql(config: TopicConfig, header_value: str | None = None) -> str:
    """A struct whose maximum over a key is the key's winner (KIP-280, ``rules.winner_rank``);
    its last field is the offset. ``header_value``: where the header strategy's raw header
    is (default: the last one of its name in ``headers``)."""
    strategy = config.compaction_strategy
    if strategy == "offset":
        return "named_struct('offset', `offset`)"
    if strategy == "timestamp":
        return "named_struct('ts', unix_millis(`timestamp`), 'offset', `offset`)"
    if strategy == "header":
        version = header_version_sql(header_value or last_header_sql(config.compaction_strategy_header))
        return f"named_struct('has', ({version}) IS NOT NULL, 'v', coalesce({version}, 0L), 'offset', `offset`)"
    raise ValueError(f"unknown compaction.strategy {strategy!r}")
