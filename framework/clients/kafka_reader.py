"""Reading a Kafka topic: its partitions and offsets, and a partition's records as a DataFrame.

Everything goes through Kafka's own Java client, which Spark's Kafka source
(``spark-sql-kafka-0-10``) puts on the driver's classpath: the offsets through a
``KafkaConsumer`` on the driver, the records through Spark's Kafka source in batch mode,
so the ``kafka.*`` security settings of a spec mean the same to both, and no record
passes through the Python driver.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping

from framework.errors import ArgumentError, TopiclakeError
from framework.log.table_layout import HEADERS_TYPE
from framework.spec.model import TopicSpec
from framework.spec.names import ENV_REFERENCE

#: How long a metadata call may wait for the brokers before ingest gives up with an error.
METADATA_TIMEOUT_MS = 15_000


class KafkaUnavailableError(ArgumentError):
    """The brokers of ``source.kafka`` did not answer (a wrong address, or Kafka is down)."""


class KafkaDataLossError(TopiclakeError):
    """Kafka no longer has offsets that were never ingested (its retention removed them)."""


@dataclass(frozen=True)
class PartitionOffsets:
    """One Kafka partition's log start offset and log end offset (Kafka's watermarks)."""

    partition: int
    earliest: int
    latest: int


def resolve(value: str, field: str, spec: TopicSpec, environ: Mapping[str, str] | None = None) -> str:
    """``value`` with each ``${NAME}`` replaced by the environment variable, read now."""
    environ = os.environ if environ is None else environ

    def substitute(match) -> str:
        name = match.group(1)
        if name not in environ:
            raise ArgumentError(f"{spec.source}: source.kafka.{field}: environment variable {name} is not set "
                                f"(the spec refers to it as ${{{name}}})")
        return environ[name]

    return ENV_REFERENCE.sub(substitute, value)


def client_settings(spec: TopicSpec, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Spark Kafka source options of ``spec``'s source, references resolved: the user's
    options, then ``kafka.bootstrap.servers``."""
    source = spec.kafka_source
    if source is None:
        raise ArgumentError(f"{spec.source}: topic {spec.topic} has no source.kafka; its records come from produce")
    options = {name: resolve(value, f"options.{name}", spec, environ) for name, value in source.options.items()}
    options["kafka.bootstrap.servers"] = resolve(source.bootstrap_servers, "bootstrap.servers", spec, environ)
    return options


def partition_offsets(spark, spec: TopicSpec, options: Mapping[str, str]) -> list[PartitionOffsets]:
    """Every partition of the Kafka topic with its earliest and latest offsets.

    Refuses (exit 2) a topic that does not exist, a partition count other than the spec's,
    and brokers that do not answer within :data:`METADATA_TIMEOUT_MS`.
    """
    jvm = spark.sparkContext._jvm
    topic = spec.kafka_topic
    servers = options["kafka.bootstrap.servers"]
    where = f"{spec.source}: source.kafka"
    props = jvm.java.util.Properties()
    for name, value in options.items():
        if name.startswith("kafka."):
            props.put(name[len("kafka."):], value)
    deserializer = "org.apache.kafka.common.serialization.ByteArrayDeserializer"
    props.put("key.deserializer", deserializer)
    props.put("value.deserializer", deserializer)
    props.put("enable.auto.commit", "false")
    props.put("allow.auto.create.topics", "false")
    # How long to wait for the brokers: the spec's kafka.default.api.timeout.ms, else ours.
    wait_ms = int(options.get("kafka.default.api.timeout.ms", METADATA_TIMEOUT_MS))
    props.put("default.api.timeout.ms", str(wait_ms))
    props.put("request.timeout.ms", str(min(wait_ms, int(options.get("kafka.request.timeout.ms", wait_ms)))))
    timeout = jvm.java.time.Duration.ofMillis(wait_ms)
    consumer_class = jvm.org.apache.kafka.clients.consumer.KafkaConsumer
    if type(consumer_class).__name__ == "JavaPackage":  # py4j's answer for a class it cannot find
        raise ArgumentError("Spark's Kafka source is not on this session's classpath: add the package "
                            "org.apache.spark:spark-sql-kafka-0-10_2.13 of your Spark version (--packages, or the "
                            "cluster's libraries)")
    try:
        consumer = consumer_class(props)
    except Exception as error:  # noqa: BLE001 - a bad client setting is the user's
        raise ArgumentError(f"{where}.options: Kafka's client refused the settings: {_java_message(error)}") from None
    try:
        try:
            infos = consumer.partitionsFor(topic, timeout)
        except Exception as error:  # noqa: BLE001 - re-worded: which brokers, which field
            raise KafkaUnavailableError(
                f"{where}.bootstrap.servers: Kafka at {servers} did not answer within "
                f"{wait_ms / 1000:g} s ({_java_message(error)})") from None
        if infos is None or infos.size() == 0:
            raise ArgumentError(f"{where}.topic: Kafka at {servers} has no topic {topic!r}")
        count = infos.size()
        if count != spec.partitions:
            raise ArgumentError(f"{spec.source}: partitions: the spec says {spec.partitions} but Kafka topic "
                                f"{topic!r} has {count}; one partition table per Kafka partition")
        partitions = jvm.java.util.ArrayList()
        for p in range(count):
            partitions.add(jvm.org.apache.kafka.common.TopicPartition(topic, p))
        earliest = consumer.beginningOffsets(partitions, timeout)
        latest = consumer.endOffsets(partitions, timeout)
        return [PartitionOffsets(p, int(earliest.get(partitions.get(p))), int(latest.get(partitions.get(p))))
                for p in range(count)]
    finally:
        consumer.close()


def read_partition(spark, spec: TopicSpec, options: Mapping[str, str], partition: int, start: int, end: int):
    """Records at offsets ``[start, end)`` of one Kafka partition (a batch read), shaped as a
    partition table's columns: offset, timestamp, key, value (NULL: a tombstone), headers."""
    import json

    from pyspark.sql import functions as F

    topic = spec.kafka_topic
    reader = spark.read.format("kafka")
    for name, value in options.items():
        reader = reader.option(name, value)
    frame = (
        reader.option("assign", json.dumps({topic: [partition]}))
        .option("startingOffsets", json.dumps({topic: {str(partition): start}}))
        .option("endingOffsets", json.dumps({topic: {str(partition): end}}))
        .option("includeHeaders", "true")
        # Kept true (Spark's default): a compacted topic's gaps are read without complaint, while
        # a fetch that comes back empty before the range's end fails the read instead of
        # silently skipping records. Ingest checks Kafka's log start offset itself beforehand.
        .option("failOnDataLoss", "true")
        .load()
    )
    # Spark's Kafka source gives NULL headers for a record without any; the table holds [].
    return frame.select(
        F.col("offset").cast("long").alias("offset"),
        F.col("timestamp"),
        F.col("key").cast(spec.key_type).alias("key"),
        F.col("value").cast(spec.value_type).alias("value"),
        F.coalesce(F.col("headers").cast(HEADERS_TYPE), F.array().cast(HEADERS_TYPE)).alias("headers"),
    )


def _java_message(error: Exception) -> str:
    """The first line of a Java exception's message, without py4j's wrapping."""
    java = getattr(error, "java_exception", None)
    text = str(java.toString()) if java is not None else str(error)
    return text.strip().splitlines()[0] if text.strip() else type(error).__name__
