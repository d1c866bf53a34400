"""One function per ``topiclake`` verb: takes the CLI context, returns an exit status.

Callable from Python too (``framework.cli.main.main([...])``); jobs and notebooks use the
same functions. Spark starts only for verbs that need it, after the input is checked.
"""

from __future__ import annotations

import json
import sys
import time

from framework.cli.context import DEFAULT_SPECS
from framework.cli.render import plan_text, record_json, status_text
from framework.errors import ArgumentError, ExitCode, Problem, RecordError


# ------------------------------------------------------------------- the verbs
def lint(ctx) -> int:
    from framework.spec import lint as lint_specs

    paths = ctx.args.paths or ctx.args.specs or [DEFAULT_SPECS]
    report = lint_specs(paths)
    ctx.out("\n".join(report.lines()), {
        "ok": report.ok(),
        "specs": [{"source": s.source, "topic": s.topic, "partitions": s.partitions,
                   "ignored_configs": list(s.ignored_configs), "warnings": list(s.warnings)} for s in report.specs],
        "problems": [str(p) for p in report.problems],
    })
    return ExitCode.OK if report.ok() else ExitCode.BAD_INPUT


def schema(ctx) -> int:
    from framework.spec.schema import schema_text

    text = schema_text()
    if ctx.args.output is None:
        sys.stdout.write(text)
        return ExitCode.OK
    try:
        with open(ctx.args.output, "w", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as error:
        raise ArgumentError(f"--output: cannot write {ctx.args.output}: {error.strerror}") from None
    ctx.progress(f"schema: {ctx.args.output}")
    return ExitCode.OK


def import_kafka_config(ctx) -> int:
    import os

    import yaml

    from framework.spec.kafka_configs import import_spec

    args = ctx.args
    try:
        with open(args.file, encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError) as error:
        raise ArgumentError(f"{args.file}: cannot read it: {error.strerror if isinstance(error, OSError) else error}") \
            from None
    if args.output and os.path.exists(args.output):
        raise ArgumentError(f"--output: {args.output} exists; topiclake does not overwrite a spec")
    imported = import_spec(text, args.file, args.partitions, topic=args.topic, bootstrap_servers=args.bootstrap_servers)
    body = f"# topiclake spec, from the Kafka configs in {os.path.basename(args.file)} (topiclake import-kafka-config)\n"
    body += yaml.safe_dump(imported.spec, sort_keys=False, default_flow_style=False)
    for note in imported.notes():
        ctx.progress(f"import-kafka-config: {note}")
    if args.output:
        temporary = f"{args.output}.tmp-{os.getpid()}"
        with open(temporary, "w", encoding="utf-8") as handle:
            handle.write(body)
        os.replace(temporary, args.output)
        ctx.out(f"import-kafka-config: wrote {args.output} (topic {imported.spec['topic']})",
                {"output": args.output, "spec": imported.spec, "notes": imported.notes()})
    else:
        ctx.out(body.rstrip("\n"), {"spec": imported.spec, "notes": imported.notes()})
    return ExitCode.OK


def create(ctx) -> int:
    from framework.log.topic import Topic

    # tables that exist with the spec's properties are read from their Delta logs' files: an
    # idempotent create of a local warehouse starts no JVM
    spark = ctx.deferred_spark
    topics = [Topic(spark, ctx.warehouse, spec) for spec in ctx.selected()]
    for topic in topics:  # every spec must fit before anything is created
        topic.check_fits()
    results = {}
    for topic in topics:
        outcome = topic.create()
        results[topic.name] = outcome
        for partition, what in outcome.items():
            ctx.out(f"{topic.spec.table_name(partition)}: {what} ({topic.partition(partition).path})")
    ctx.out(None, results)
    return ExitCode.OK


def produce(ctx) -> int:
    from dataclasses import replace

    from framework.clients.produce import produce as produce_records
    from framework.clients.records import read_json_lines
    from framework.log.topic import Topic

    args = ctx.args
    spec = ctx.spec(args.topic)
    records = read_json_lines(args.input, spec)
    if args.partition is not None:
        if not 0 <= args.partition < spec.partitions:
            raise ArgumentError(f"--partition: {args.partition} is out of range for topic {spec.topic} "
                                f"(partitions 0..{spec.partitions - 1})")
        clashes = [r for r in records if r.partition is not None and r.partition != args.partition]
        if clashes:
            raise RecordError([Problem(args.input, r.line, None, "partition",
                                       f"{r.partition} contradicts --partition {args.partition}") for r in clashes[:20]])
        records = [replace(r, partition=args.partition) for r in records]
    now = ctx.now_ms()
    results = produce_records(Topic(ctx.deferred_spark, ctx.warehouse, spec), records, now, source=args.input)
    for r in results:
        last = r.base_offset + r.count - 1
        ctx.out(f"{spec.table_name(r.partition)}: {r.count} record(s) at offsets {r.base_offset}..{last} "
                f"(table version {r.version})")
    ctx.out(None, [r.__dict__ for r in results])
    return ExitCode.OK


def ingest(ctx) -> int:
    from framework.clients.ingest import ingest as ingest_topics
    from framework.clients.ingest import ingest_specs

    specs = ingest_specs(ctx.selected(), explicit=getattr(ctx.args, "topic", None) is not None)
    total, done = sum(spec.partitions for spec in specs), []

    def progress(result) -> None:
        done.append(result)
        ctx.progress(result.describe())
        ctx.step(len(done), total, f"{result.topic}-{result.partition}")

    results = ingest_topics(ctx.spark, ctx.warehouse, specs, progress=progress)
    appended = [r for r in results if r.version is not None]
    ctx.out(f"ingest: {sum(r.records for r in appended)} record(s) into {len(appended)} of {len(results)} "
            "partition(s)", [r.__dict__ for r in results])
    return ExitCode.OK


def commit_offset(ctx) -> int:
    from framework.log.consumer_offsets import ConsumerOffsets

    args = ctx.args
    spec = ctx.spec(args.topic)
    spec.table_name(args.partition)  # range check before Spark starts
    if args.offset < 0:
        raise ArgumentError(f"--offset: a committed offset must be >= 0, got {args.offset}")
    # a local table is read and replaced without a JVM (framework/log/own_commits.py)
    ConsumerOffsets(ctx.deferred_spark, ctx.warehouse).commit(args.group, args.topic, args.partition, args.offset)
    ctx.out(f"group {args.group} committed offset {args.offset} for {spec.table_name(args.partition)}",
            {"group": args.group, "topic": args.topic, "partition": args.partition, "offset": args.offset})
    return ExitCode.OK


def read(ctx) -> int:
    from framework.log import local_records

    args = ctx.args
    ctx.spec(args.topic).table_name(args.partition)
    for name in ("from_offset", "version"):
        if getattr(args, name) is not None and getattr(args, name) < 0:
            raise ArgumentError(f"--{name.replace('_', '-')}: must be >= 0, got {getattr(args, name)}")
    # a small local version is read by Arrow: no Spark job, and in a new process no JVM
    log = ctx.existing_log(args.topic, args.partition, deferred=True)
    rows = None if args.as_of is not None else local_records.records(log.path, args.version, args.from_offset)
    if rows is None:
        from pyspark.sql import functions as F

        frame = log.read(args.version, None if args.as_of is None else _as_of_text(ctx, args.as_of))
        if args.from_offset is not None:
            frame = frame.where(F.col("offset") >= args.from_offset)
        frame = frame.select("offset", F.unix_millis("timestamp").alias("timestamp"), "key", "value", "headers")
        rows = frame.orderBy("offset").toLocalIterator()
    for row in rows:
        print(json.dumps(record_json(row, log.spec, log.partition), sort_keys=False))
    return ExitCode.OK


def _as_of_text(ctx, text: str) -> str:
    """A time for Delta's timestampAsOf, in the session's time zone."""
    from datetime import datetime, timezone
    from zoneinfo import ZoneInfo

    from framework.clients.records import parse_timestamp

    try:
        ms = parse_timestamp(text)
    except ValueError as error:
        raise ArgumentError(f"--as-of: {error}") from None
    zone = ZoneInfo(ctx.spark.conf.get("spark.sql.session.timeZone", "UTC"))
    moment = datetime.fromtimestamp(ms / 1000, tz=timezone.utc).astimezone(zone)
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def delete_records(ctx) -> int:
    from framework.stages.retention import check_delete_records_allowed
    from framework.stages.retention import delete_records as delete

    args = ctx.args
    spec = ctx.spec(args.topic)
    spec.table_name(args.partition)
    check_delete_records_allowed(spec)  # before Spark starts
    log = ctx.existing_log(args.topic, args.partition)
    result = delete(log, args.before_offset)
    ctx.out(f"{log.name}: log start {result.state_before.log_start_offset} -> {result.state_after.log_start_offset}, "
            f"removed {result.removed_records} record(s)",
            {"partition": log.partition, "log_start_offset": result.state_after.log_start_offset,
             "removed_records": result.removed_records, "version": result.version_after})
    return ExitCode.OK


def plan(ctx) -> int:
    from framework.log.consumer_offsets import ConsumerOffsets
    from framework.log.topic import Topic
    from framework.stages.planning import plan_partition

    now = ctx.now_ms()
    spark = ctx.deferred_spark  # a local warehouse's plan reads the Delta logs' files alone
    offsets = ConsumerOffsets(spark, ctx.warehouse)
    report = []
    for spec in ctx.selected():
        topic = Topic(spark, ctx.warehouse, spec)
        for log in ctx.partitions(topic):
            if not log.exists():
                report.append({"partition": log.name, "exists": False})
                ctx.out(f"{log.name}: no table yet")
                continue
            entry = plan_partition(log, now, offsets, getattr(ctx.args, "force", False)).to_dict()
            report.append(entry)
            ctx.out(plan_text(log, entry))
    ctx.out(None, report)
    return ExitCode.OK


def _maintenance(ctx, stages) -> int:
    from framework.checks.guarantees import Guarantees
    from framework.stages.maintenance import Maintenance

    specs = ctx.selected()
    # a local warehouse with nothing due is decided from its Delta logs' files, and its run's
    # history rows are committed without a JVM (framework/log/own_commits.py)
    spark = ctx.deferred_spark
    runner = Maintenance(spark, ctx.warehouse, specs, validator=Guarantees(spark, ctx.warehouse),
                         progress=ctx.progress, step=ctx.step)
    run = runner.run(
        ctx.now_ms(), topic=getattr(ctx.args, "topic", None), partition=getattr(ctx.args, "partition", None),
        stages=stages, force=getattr(ctx.args, "force", False),
        vacuum_retention_ms=getattr(ctx.args, "retention_ms", None),
        unsafe_vacuum=getattr(ctx.args, "unsafe_shorter_time_travel", False),
        cleaner_threads=ctx.args.cleaner_threads,
    )
    summary = []
    for part in run.partitions:
        entry = {"topic": part.topic, "partition": part.partition, "failed": part.failed, "error": part.error,
                 "failed_guarantees": part.failed_guarantees, "stages": [r.as_dict() for r in part.rows]}
        summary.append(entry)
        status = "FAILED" if part.failed else "ok"
        ctx.out(f"{part.topic}-{part.partition}: {status}"
                + (f" ({part.error or ', '.join(part.failed_guarantees)})" if part.failed else ""))
    ctx.out(None, {"run_id": run.run_id, "now_ms": run.now_ms, "partitions": summary})
    return ExitCode.FAILED if run.failed else ExitCode.OK


def maintain(ctx) -> int:
    from framework.stages.maintenance import STAGES

    if ctx.args.sample_records < 1:
        raise ArgumentError(f"--sample-records: must be at least 1, got {ctx.args.sample_records}")
    if ctx.args.with_sample_data:
        _produce_sample_data(ctx)
    code = _maintenance(ctx, STAGES)
    if not (ctx.args.json or ctx.args.no_report):
        from framework.report.site import write_report

        where = write_report(lambda: ctx.spark, ctx.warehouse)
        ctx.progress(f"report: {where}")
    return code


def _produce_sample_data(ctx) -> None:
    """The quick start's demo records, the same for a given clock wherever Spark runs them."""

    from framework.clients.produce import produce_frame
    from framework.clients.sample_data import sample_frame
    from framework.log.small_partitions import small_partition_settings
    from framework.log.topic import Topic

    now = ctx.now_ms()
    for spec in ctx.selected():
        started = time.monotonic()
        frame = sample_frame(ctx.spark, spec, ctx.args.sample_records, now)
        with small_partition_settings(ctx.spark, ctx.args.sample_records):
            results = produce_frame(Topic(ctx.spark, ctx.warehouse, spec), frame, now)
        ctx.progress(f"sample data: {sum(r.count for r in results)} record(s) into {spec.topic} "
                     f"({time.monotonic() - started:.1f}s)")


def compact(ctx) -> int:
    return _maintenance(ctx, ("compact",))


def retain(ctx) -> int:
    return _maintenance(ctx, ("retain",))


def optimize(ctx) -> int:
    return _maintenance(ctx, ("optimize",))


def vacuum(ctx) -> int:
    return _maintenance(ctx, ("vacuum",))


def validate(ctx) -> int:
    from framework.checks.guarantees import Guarantees
    from framework.log.topic import Topic

    args = ctx.args
    spark = ctx.deferred_spark  # a local warehouse with no tables yet has nothing to ask Spark
    guarantees = Guarantees(spark, ctx.warehouse)
    failed = False
    results = []
    for spec in ctx.selected():
        logs = [log for log in ctx.partitions(Topic(spark, ctx.warehouse, spec)) if log.exists()]
        outcomes = guarantees.validate_many(logs, ctx.now_ms(), args.from_version, args.to_version)
        for log, outcome in zip(logs, outcomes):
            failed |= not outcome.passed
            results.append({"partition": log.name, "passed": outcome.passed,
                            "failed_guarantees": list(outcome.failed_guarantees), "details": list(outcome.details)})
            ctx.out(f"{log.name}: {'passed' if outcome.passed else 'FAILED ' + ', '.join(outcome.failed_guarantees)}")
            for line in outcome.details:
                ctx.out(f"  {line}")
    ctx.out(None if results else "no partition table to validate yet", results)
    return ExitCode.FAILED if failed else ExitCode.OK


def status(ctx) -> int:
    from framework.log.history import MaintenanceHistory
    from framework.log.topic import Topic
    from framework.stages.planning import partition_status

    now = ctx.now_ms()
    spark = ctx.deferred_spark  # as plan's
    history = MaintenanceHistory(spark, ctx.warehouse)
    rows = []
    for spec in ctx.selected():
        last_runs = history.last_runs(spec.topic)
        for log in Topic(spark, ctx.warehouse, spec).partitions():
            if not log.exists():
                rows.append({"partition": log.name, "exists": False})
                ctx.out(f"{log.name}: no table yet")
                continue
            entry = partition_status(log, now, last_runs.get(log.partition))
            rows.append(entry)
            ctx.out(status_text(entry))
    ctx.out(None, rows)
    return ExitCode.OK


def report(ctx) -> int:
    from framework.report.site import write_report

    where = write_report(lambda: ctx.spark, ctx.warehouse, ctx.args.output)
    ctx.out(f"report: {where}", {"report": where})
    return ExitCode.OK


def simulate(ctx) -> int:
    from framework.cli.simulate import run_scenarios

    return run_scenarios(ctx.args.scenarios, out=sys.stdout, progress=ctx.progress, as_json=ctx.args.json,
                         session=lambda: ctx.spark)


VERBS = {
    "lint": lint, "schema": schema, "import-kafka-config": import_kafka_config, "create": create, "produce": produce, "ingest": ingest,
    "commit-offset": commit_offset, "read": read,
    "delete-records": delete_records, "plan": plan, "maintain": maintain, "compact": compact, "retain": retain,
    "optimize": optimize, "vacuum": vacuum, "validate": validate, "status": status, "report": report, "simulate": simulate,
}


def run(ctx) -> int:
    return VERBS[ctx.args.verb](ctx)
