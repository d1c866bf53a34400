"""The pure cleaner: what is due, the cleanable range, who wins (KIP-280), where retention
cuts; as plain functions (``rules``) and, where Spark needs them, as one SQL expression each
(``spark_sql``). May import: errors, spec."""
