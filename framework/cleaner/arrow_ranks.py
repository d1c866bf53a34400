"""The cleaner's winner rule (``rules.winner_rank``, KIP-280) over Arrow columns.

The compaction's Arrow decider (``stages.arrow_actions``) finds each key's winner with it,
and the guarantee checks' Arrow side (``checks.arrow_rules``) judges survivors with it, so
there is one columnar expression of the rule, as ``spark_sql.winner_rank_sql`` is Spark's.
``tests/test_compaction_actions.py`` and ``tests/test_guarantees.py`` pin both users to
Spark's expression of the rule, for every strategy.
"""

from __future__ import annotations

from framework.cleaner import rules
from framework.spec import TopicConfig

__all__ = ["dense_ranks", "header_pairs"]


def header_pairs(headers) -> list | None:
    """Each record's headers as (key, value) pairs (None for null headers), or None when no
    record has a header (the Python conversion is paid only then)."""
    import pyarrow.compute as pc

    if not pc.sum(pc.greater(pc.list_value_length(headers), 0)).as_py():
        return None
    return [None if h is None else tuple((x["key"], x["value"]) for x in h) for h in headers.to_pylist()]


def dense_ranks(records, config: TopicConfig, pairs: list | None = None):
    """Each record's ``rules.winner_rank`` as an int64 that orders as the rank does (equal
    ranks, equal numbers), or None when the timestamp strategy meets a null timestamp (SQL
    orders it first; the caller leaves it to Spark). ``records`` holds ``offset`` and, as
    the strategy needs, ``timestamp`` (an integer or timestamp column) or ``headers``;
    ``pairs`` is :func:`header_pairs` of them when the caller has it. The offset strategy's
    rank is the offset; the timestamp strategy's orders by timestamp, then offset, as
    numpy's lexsort does; the header strategy's is the rule's own, record by record."""
    import numpy as np
    import pyarrow as pa

    strategy = config.compaction_strategy
    offsets = records["offset"].to_numpy()
    if strategy == "offset":
        return pa.array(offsets, pa.int64())
    if strategy == "timestamp":
        if records["timestamp"].null_count:
            return None
        components = (offsets, records["timestamp"].to_numpy())  # (lexsort: the last is the first key)
        order = np.lexsort(components)
        ordered = [component[order] for component in components]
        new = np.ones(len(order), dtype=bool)
        new[1:] = np.any([np.diff(component) != 0 for component in ordered], axis=0)
        dense = np.empty(len(order), dtype=np.int64)
        dense[order] = np.cumsum(new) - 1
        return pa.array(dense, pa.int64())
    name = config.compaction_strategy_header
    if pairs is None:
        pairs = header_pairs(records["headers"])
    if pairs is None:
        pairs = [None] * len(offsets)
    ranks = [rules.winner_rank(strategy, offset, 0, rules.header_version(rules.last_header(h or (), name)))
             for offset, h in zip(offsets.tolist(), pairs, strict=True)]
    places = {rank: place for place, rank in enumerate(sorted(set(ranks)))}
    return pa.array([places[rank] for rank in ranks], pa.int64())
