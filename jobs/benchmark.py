"""Side-by-side measurements in one process, reported as ratios (these machines are noisy).

Builds two identical partitions of ``--records`` records over ``--keys`` keys, then times:

1. ``compaction``: topiclake's compaction of a whole dirty partition (plan + one MERGE);
2. ``full rewrite``: the naive alternative on the twin table (compute the winners, overwrite
   the table): the baseline topiclake's MERGE is compared with;
3. ``validation``: the guarantee checks of that compaction (Great Expectations);
4. ``incremental``: a second compaction after 1% of the keys were updated;
5. ``plan (nothing due)`` against ``full scan``: deciding that nothing is due reads commit
   metadata and the head, not the whole table;
6. ``lint`` of the shipped specs in a fresh interpreter against a bare interpreter start:
   lint is for git hooks, so it must not start Spark.

    python jobs/benchmark.py --records 1000000 --keys 100000 [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from framework.cli import guarded  # noqa: E402

DAY_MS = 86_400_000


def _timed(label, results, action):
    started = time.perf_counter()
    value = action()
    results[label] = time.perf_counter() - started
    print(f"  {label:<22} {results[label]:8.2f} s", file=sys.stderr, flush=True)
    return value


def _spec(topic: str):
    from framework.spec import parse_spec

    return parse_spec({"topic": topic, "partitions": 1, "config": {
        "cleanup.policy": "compact", "min.cleanable.dirty.ratio": 0.5, "delete.retention.ms": DAY_MS}}, "benchmark")


def _records(spark, count: int, keys: int, now: int, seed: int = 1):
    from pyspark.sql import functions as F

    frame = spark.range(count).withColumnRenamed("id", "n")
    key = F.concat(F.lit("key-"), (F.abs(F.xxhash64("n", F.lit(seed))) % keys).cast("string"))
    value = F.when(F.rand(seed) < 0.02, F.lit(None).cast("string")).otherwise(
        F.to_json(F.struct(F.col("n").alias("seq"), F.round(F.rand(seed + 1) * 100, 2).alias("amount"))))
    timestamp = F.lit(now - 2 * DAY_MS) + F.col("n")
    return frame.select(key.alias("key"), value.alias("value"), timestamp.alias("timestamp"))


def _full_rewrite(spark, log, now: int) -> None:
    """The baseline: compute every key's winner and overwrite the table with the winners."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    table = log.read(log.snapshot().version)
    best = F.max("offset").over(Window.partitionBy("key"))
    winners = table.withColumn("_best", best).where(F.col("offset") == F.col("_best")).drop("_best")
    winners.write.format("delta").mode("overwrite").save(log.path)


def run(argv) -> int:
    parser = argparse.ArgumentParser(prog="jobs/benchmark.py", description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--warehouse", help="where to build the tables (default: a temporary folder)")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)

    from framework import compaction
    from framework.guarantees import Guarantees
    from framework.maintenance import Maintenance, StageCheck
    from framework.produce import produce_frame
    from framework.session import get_session
    from framework.topic import Topic
    from framework.warehouse import Warehouse

    folder = args.warehouse or tempfile.mkdtemp(prefix="topiclake-benchmark-")
    warehouse = Warehouse.resolve(folder)
    spark = get_session("topiclake-benchmark")
    now = int(time.time() * 1000)
    results: dict[str, float] = {}
    print(f"benchmark: {args.records} records over {args.keys} keys in {warehouse.root}", file=sys.stderr)

    topic, twin = (Topic(spark, warehouse, _spec(name)) for name in ("bench", "bench-twin"))
    for handle in (topic, twin):
        _timed(f"produce {handle.name}", results, lambda h=handle: produce_frame(h, _records(spark, args.records, args.keys, now), now))
    log, twin_log = topic.partition(0), twin.partition(0)

    planned = _timed("plan (all dirty)", results, lambda: compaction.plan(log, now))
    before = log.read(planned.snapshot.version)
    outcome = _timed("compaction", results, lambda: compaction.execute(log, planned, run_id="benchmark"))
    _timed("full rewrite", results, lambda: _full_rewrite(spark, twin_log, now))
    check = StageCheck(log=log, stage="compact", now_ms=now, version_before=outcome.version_before,
                       version_after=outcome.version_after, before=before, state_before=planned.snapshot.state,
                       state_after=outcome.state_after, first_uncleanable_offset=planned.measure.first_uncleanable_offset,
                       cleaned_up_to=outcome.cleaned_up_to)
    verdict = _timed("validation", results, lambda: Guarantees(spark, warehouse).check_stage(check))

    updates = max(1, args.keys // 100)
    _timed("produce 1% updates", results, lambda: produce_frame(topic, _records(spark, updates, args.keys, now, seed=2), now))
    maintenance = Maintenance(spark, warehouse, [topic.spec], record_history=False)
    _timed("incremental", results, lambda: maintenance.run(now, topic="bench", stages=("compact",), force=True))

    from pyspark.sql import functions as F

    _timed("plan (nothing due)", results, lambda: compaction.plan(log, now))
    _timed("full scan", results, lambda: log.read().agg(F.sum("_size"), F.count("*")).collect())

    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    lint = [sys.executable, "-c", "import sys; from framework.cli import main; sys.exit(main(['lint', 'table_specs']))"]
    _timed("bare interpreter", results, lambda: subprocess.run([sys.executable, "-c", "pass"], cwd=repo, check=True))
    _timed("lint", results, lambda: subprocess.run(lint, cwd=repo, check=True, capture_output=True))

    summary = {
        "records": args.records,
        "keys": args.keys,
        "removed_records": outcome.removed_records,
        "validation_passed": verdict.passed,
        "seconds": {k: round(v, 3) for k, v in results.items()},
        "ratios": {
            "compaction / full rewrite": round(results["compaction"] / results["full rewrite"], 3),
            "validation / compaction": round(results["validation"] / results["compaction"], 3),
            "incremental / compaction": round(results["incremental"] / results["compaction"], 3),
            "plan (nothing due) / full scan": round(results["plan (nothing due)"] / results["full scan"], 3),
            "lint / bare interpreter": round(results["lint"] / results["bare interpreter"], 3),
        },
    }
    print(json.dumps(summary, indent=2))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(summary, handle, indent=2)
    if not args.warehouse:
        shutil.rmtree(folder, ignore_errors=True)
    return 0 if verdict.passed else 1


def main(argv=None) -> int:
    return guarded(lambda: run(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
