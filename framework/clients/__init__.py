"""Records in and out: checked producer records, Kafka's partitioner, produce, ingest from
a real Kafka topic, streaming consumers. May import everything below: spec, cleaner, log."""
