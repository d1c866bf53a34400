"""The main job: maintain every topic of the specs, check the guarantees, write the report.

Runs three ways, always through ``main(argv) -> int``:

- embedded:   ``python jobs/maintain.py --warehouse warehouse --specs table_specs``
- a cluster:  ``spark-submit --packages io.delta:delta-spark_4.1_2.13:4.4.0 \\
              --conf spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension \\
              --conf spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog \\
              --py-files topiclake.zip jobs/maintain.py --warehouse s3a://bucket/lake``
- Databricks: a Python script task with this file and the same parameters; the
              cluster's active session is used as it is.

Exit status as the CLI's: 0 ok, 1 a guarantee failed or a partition could not be
maintained, 2 bad input.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

# Running as a script from a checkout: make the package importable without installing it.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from framework.cli import guarded  # noqa: E402
from framework.errors import ArgumentError, ExitCode  # noqa: E402


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        raise ArgumentError(f"{self.prog}: {message}")


def parse_args(argv):
    parser = _Parser(prog="jobs/maintain.py", description=__doc__.splitlines()[0])
    parser.add_argument("--warehouse", help="warehouse folder or URI (default: $TOPICLAKE_WAREHOUSE, then ./warehouse)")
    parser.add_argument("--specs", action="append", help="spec file or folder, repeatable (default: table_specs)")
    parser.add_argument("--topic", help="maintain only this topic")
    parser.add_argument("--now", help="epoch ms or ISO-8601 (default: the clock)")
    parser.add_argument("--force", action="store_true", help="compact even when not due")
    parser.add_argument("--with-sample-data", action="store_true",
                        help="first produce sample records into every topic (the quick start's demo data)")
    parser.add_argument("--sample-records", type=int, default=3000, help="sample records per topic")
    parser.add_argument("--no-report", action="store_true", help="skip writing the report")
    parser.add_argument("--verbose", action="store_true",
                        help="show Spark's start-up output (Ivy, JVM warnings); otherwise it goes to a log file")
    return parser.parse_args(argv)


def run(argv) -> int:
    args = parse_args(argv)
    from framework.cli import parse_now
    from framework.guarantees import Guarantees
    from framework.maintenance import Maintenance
    from framework.produce import produce_frame
    from framework.report import write_report
    from framework.sample_data import sample_frame
    from framework.session import get_session
    from framework.spec import load_specs
    from framework.topic import Topic
    from framework.warehouse import Warehouse

    specs = load_specs(args.specs or ["table_specs"])
    if args.topic and args.topic not in {s.topic for s in specs}:
        raise ArgumentError(f"--topic: no spec for topic {args.topic!r}")
    now = parse_now(args.now)
    warehouse = Warehouse.resolve(args.warehouse)
    if args.verbose:
        from framework.session import show_spark_output

        show_spark_output()
    spark = get_session("topiclake-maintain")

    def progress(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    if args.with_sample_data:
        for spec in specs:
            started = time.monotonic()
            frame = sample_frame(spark, spec, args.sample_records, now)
            results = produce_frame(Topic(spark, warehouse, spec), frame, now)
            progress(f"sample data: {sum(r.count for r in results)} record(s) into {spec.topic} "
                     f"({time.monotonic() - started:.1f}s)")
    maintenance = Maintenance(spark, warehouse, specs, validator=Guarantees(spark, warehouse).check_stage,
                              progress=progress)
    started = time.monotonic()
    result = maintenance.run(now, topic=args.topic, force=args.force)
    for part in result.partitions:
        status = "FAILED: " + (part.error or ", ".join(part.failed_guarantees)) if part.failed else "ok"
        print(f"{part.topic}-{part.partition}: {status}")
    progress(f"maintenance run {result.run_id}: {len(result.partitions)} partition(s) in "
             f"{time.monotonic() - started:.1f}s")
    if not args.no_report:
        print(f"report: {write_report(spark, warehouse)}")
    return ExitCode.FAILED if result.failed else ExitCode.OK


def main(argv=None) -> int:
    return guarded(lambda: run(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
