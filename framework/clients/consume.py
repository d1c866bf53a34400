"""Streaming consumers of partition tables: Kafka's consumer guarantees through maintenance.

A plain Delta streaming source (``spark.readStream.format("delta")``) stops at the first
commit that rewrites or removes data, with ``DELTA_SOURCE_TABLE_IGNORE_CHANGES``: every
compaction MERGE and every retention DELETE is such a commit. With ``skipChangeCommits``
the source skips those commits and goes on with the appends. That is exactly Kafka's
contract for a consumer: one that keeps up sees every appended record once, in offset
order within a partition, whatever the cleaner does behind it; one that starts later
sees the log as it is then (compacted), then every new append. Bin-packing and purge
commits change no record (``dataChange=false``), so streams skip them anyway.

A consumer must keep up within the time-travel window: once vacuum has removed an
append's files, a stream that had not read them yet fails rather than skip records.
"""

from __future__ import annotations

from framework.log.table_layout import RECORD_COLUMNS
from framework.log.topic import Topic

#: The Delta streaming source options a consumer of a partition table needs.
SOURCE_OPTIONS = {"skipChangeCommits": "true"}


def stream_partition(topic: Topic, partition: int, **options):
    """A streaming DataFrame of one partition's records (offset, timestamp, key, value,
    headers); ``options`` are passed on to Delta's streaming source (e.g.
    ``maxFilesPerTrigger``, ``startingVersion``)."""
    log = topic.partition(partition)  # refuses a partition out of range
    reader = topic.spark.readStream.format("delta")
    for name, value in {**SOURCE_OPTIONS, **options}.items():
        reader = reader.option(name, value)
    return reader.load(log.path).select(*RECORD_COLUMNS)


def stream_topic(topic: Topic, **options):
    """A streaming DataFrame of every partition, with a ``partition`` column: one Delta
    source per partition table, unioned."""
    from pyspark.sql import functions as F

    frames = [stream_partition(topic, p, **options).withColumn("partition", F.lit(p))
              for p in range(topic.spec.partitions)]
    result = frames[0]
    for frame in frames[1:]:
        result = result.unionByName(frame)
    return result
