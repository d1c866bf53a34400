"""The ingest job: append each Kafka partition's new records to its table, exactly once.

``topiclake ingest`` as a job file, for the places that run a script rather than a command:

- embedded:   ``python jobs/ingest.py --warehouse warehouse --specs table_specs [--topic T]``
- a cluster:  ``spark-submit --packages io.delta:delta-spark_4.1_2.13:4.4.0,\\
              org.apache.spark:spark-sql-kafka-0-10_2.13:4.1.1 \\
              --conf spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension \\
              --conf spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog \\
              --py-files topiclake.zip jobs/ingest.py --warehouse s3a://bucket/lake``
- Databricks: a Python script task with this file and the same parameters (Databricks
              runtimes ship Spark's Kafka source); the cluster's session is used as it is.

Schedule it before ``jobs/maintain.py``: ingest, then maintain. Exit status as the CLI's:
0 ok, 1 a failure (Kafka lost offsets never ingested, a commit lost to other writers),
2 bad input (the spec, an unset ${ENV} reference, a missing topic, a partition-count
mismatch, brokers that do not answer).
"""

from __future__ import annotations

import os
import sys

# Running as a script from a checkout: make the package importable without installing it.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from framework.cli.main import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["ingest", *sys.argv[1:]]))
