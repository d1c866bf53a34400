"""The main job: maintain every topic of the specs, check the guarantees, write the report.

It is ``topiclake maintain`` (the same orchestration, arguments and exit status), as a
script a cluster can run:

- embedded:   ``python jobs/maintain.py --warehouse warehouse --specs table_specs``
- a cluster:  ``spark-submit --packages io.delta:delta-spark_4.1_2.13:4.4.0 \\
              --conf spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension \\
              --conf spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog \\
              --py-files topiclake-0.1.0-py3-none-any.whl jobs/maintain.py --warehouse s3a://bucket/lake``
- Databricks: a Python script task with this file and the same parameters; the
              cluster's active session is used as it is.

Options are ``topiclake maintain``'s (``--help``), among them ``--with-sample-data`` (first
produce the quick start's demo records) and ``--no-report``. Exit status as the CLI's: 0
ok, 1 a guarantee failed or a partition could not be maintained, 2 bad input.
"""

from __future__ import annotations

import os
import sys

# Running as a script from a checkout: make the package importable without installing it.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from framework.cli.main import main as topiclake  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    return topiclake(["maintain", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
