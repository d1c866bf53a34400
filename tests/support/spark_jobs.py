"""How many Spark jobs a piece of engine code runs (the tests that pin "no Spark job" paths)."""

from __future__ import annotations

import uuid


def spark_jobs(spark, action):
    """What ``action`` returns, and how many Spark jobs it ran."""
    context = spark.sparkContext
    group = f"plan-cost-{uuid.uuid4().hex}"  # the tracker keeps a group's jobs: one group per count
    context.setJobGroup(group, "counting", False)
    try:
        result = action()
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
    return result, len(context.statusTracker().getJobIdsForGroup(group))
