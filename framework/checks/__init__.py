"""The nine guarantees, checked after every stage: the catalogue, the pure scope rules, the
Spark rules, and Great Expectations' suites. May import every layer below, never the report
or the command line."""
