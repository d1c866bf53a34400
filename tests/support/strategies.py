"""KIP-280's three compaction strategies, as the topic configs that choose them (the
header strategy reads the header ``v``), for tests that run a check under each."""

STRATEGIES = {
    "offset": {},
    "timestamp": {"compaction.strategy": "timestamp"},
    "header": {"compaction.strategy": "header", "compaction.strategy.header": "v"},
}
