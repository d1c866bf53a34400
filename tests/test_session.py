"""The embedded session's settings that only change what a query costs, not what it does."""

from __future__ import annotations

from unittest import mock


def _py4j_commands(spark, build) -> int:
    """How many commands the Python side sends to the JVM while ``build()`` runs."""
    client = spark.sparkContext._gateway._gateway_client
    real = client.send_command
    sent = []

    def counted(command, *args, **kwargs):
        sent.append(command)
        return real(command, *args, **kwargs)

    with mock.patch.object(client, "send_command", counted):
        build()
    return len(sent)


def test_queries_are_built_without_pysparks_dataframe_debugging(spark):
    """pyspark records the Python call site of every DataFrame function call in the JVM
    unless ``spark.python.sql.dataFrameDebugging.enabled`` is false (LOCAL_CONF): a few
    round trips to the JVM for each ``col``, ``lit`` or ``select``; the engine builds many
    small queries a partition. The same query, built both ways, gives the same rows."""
    from pyspark.errors import utils
    from pyspark.sql import functions as F

    frame = spark.range(5)

    def build():
        return frame.select((F.col("id") + F.lit(1)).alias("next"), F.when(F.col("id") > 2, F.lit("late")))

    assert spark.conf.get("spark.python.sql.dataFrameDebugging.enabled") == "false"
    assert not utils.is_debugging_enabled()
    shipped = _py4j_commands(spark, build)
    with mock.patch.object(utils, "_enable_debugging_cache", True):
        pysparks_default = _py4j_commands(spark, build)
        rows_with_debugging = build().collect()
    assert shipped * 2 <= pysparks_default, (shipped, pysparks_default)
    assert build().collect() == rows_with_debugging
