"""``topiclake``: argument parsing, output and exit codes. The work is done elsewhere.

Exit status: 0 success; 1 a guarantee or expectation failed, or a partition could not
be maintained; 2 bad input (spec, records, arguments, scenario), one line per problem,
nothing written.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Callable, Sequence

from framework.cli.context import Context
from framework.errors import ArgumentError, ExitCode, TopiclakeError


class _Parser(argparse.ArgumentParser):
    """argparse that raises ArgumentError (one line, exit 2) instead of printing usage."""

    def error(self, message: str):  # noqa: D401 - argparse's API
        verb = self.prog.partition(" ")[2]  # "topiclake produce" -> "produce"; every line says "topiclake:" already
        raise ArgumentError(f"{verb}: {message}" if verb else message)


def _add_common(parser: argparse.ArgumentParser, nested: bool) -> None:
    """Options valid before the verb and after it (the later one wins)."""
    default = argparse.SUPPRESS if nested else None
    parser.add_argument("--warehouse", default=default,
                        help="warehouse folder or URI (default: $TOPICLAKE_WAREHOUSE, then ./warehouse)")
    parser.add_argument("--specs", action="append", default=default, metavar="PATH",
                        help="a spec file or a folder of them; repeatable (default: table_specs/)")
    parser.add_argument("--json", action="store_true", default=argparse.SUPPRESS if nested else False,
                        help="print machine-readable JSON")
    parser.add_argument("--verbose", action="store_true", default=argparse.SUPPRESS if nested else False,
                        help="show Spark's start-up output (Ivy, JVM warnings); otherwise it goes to a log file")


def build_parser() -> argparse.ArgumentParser:
    from framework import __version__

    parser = _Parser(prog="topiclake", description="Kafka log-compaction guarantees for topics kept as Delta tables.")
    parser.add_argument("--version", action="version", version=f"topiclake {__version__}")
    _add_common(parser, nested=False)
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", parser_class=_Parser)
    verbs.required = True

    def verb(name: str, help_text: str) -> argparse.ArgumentParser:
        sub = verbs.add_parser(name, help=help_text, description=help_text)
        _add_common(sub, nested=True)
        return sub

    def topic_arg(sub, required=False):
        sub.add_argument("--topic", required=required, help="the topic (default: every topic in the specs)")

    def now_arg(sub):
        sub.add_argument("--now", help="epoch milliseconds or ISO-8601 (default: the clock)")

    sub = verb("lint", "validate specs without starting Spark")
    sub.add_argument("paths", nargs="*", metavar="SPEC", help="spec files or folders (default: --specs)")

    sub = verb("schema", "print the spec's JSON Schema (for editors: yaml-language-server)")
    sub.add_argument("--output", default=None, help="write it to this file instead")

    sub = verb("import-kafka-config", "write a spec from a Kafka topic's configs (a properties file, or what "
                                      "`kafka-configs --describe --entity-type topics` prints); no Spark")
    sub.add_argument("file", metavar="FILE", help="the properties file or the describe output")
    sub.add_argument("--partitions", type=int, required=True, help="the Kafka topic's partition count")
    sub.add_argument("--topic", help="the topic (default: the one the describe output names)")
    sub.add_argument("--bootstrap-servers", metavar="SERVERS",
                     help="also write source.kafka with these brokers (or a ${ENV} reference)")
    sub.add_argument("--output", metavar="SPEC.yaml", help="write the spec here (default: print it)")

    sub = verb("create", "create the partition tables (idempotent) and sync their properties")
    topic_arg(sub)

    sub = verb("produce", "append records from a JSON-lines file")
    topic_arg(sub, required=True)
    sub.add_argument("--partition", type=int, help="send every record to this partition")
    sub.add_argument("--input", required=True, metavar="FILE.jsonl")
    now_arg(sub)

    sub = verb("ingest", "append each Kafka partition's new records (source.kafka in the spec), exactly once")
    topic_arg(sub)

    sub = verb("commit-offset", "record a consumer group's committed offset")
    sub.add_argument("--group", required=True)
    topic_arg(sub, required=True)
    sub.add_argument("--partition", type=int, required=True)
    sub.add_argument("--offset", type=int, required=True)

    sub = verb("read", "print a partition's records as JSON lines, in offset order")
    topic_arg(sub, required=True)
    sub.add_argument("--partition", type=int, required=True)
    sub.add_argument("--from-offset", type=int, default=None)
    when = sub.add_mutually_exclusive_group()
    when.add_argument("--version", type=int, help="a table version inside the time-travel window")
    when.add_argument("--as-of", help="a time inside the time-travel window (ISO-8601 or epoch ms)")

    sub = verb("delete-records", "Kafka's deleteRecords (KIP-107): move the log start forward")
    topic_arg(sub, required=True)
    sub.add_argument("--partition", type=int, required=True)
    sub.add_argument("--before-offset", type=int, required=True)

    for name, help_text in (
        ("plan", "print what maintenance would do and why; writes nothing"),
        ("maintain", "compaction, retention, bin-packing, vacuum and validation, per the specs"),
        ("compact", "the compaction stage of maintain"),
        ("retain", "the retention stage of maintain"),
        ("optimize", "the bin-packing stage of maintain: small files into files near segment.bytes"),
        ("vacuum", "the vacuum stage of maintain"),
    ):
        sub = verb(name, help_text)
        topic_arg(sub)
        sub.add_argument("--partition", type=int, default=None)
        now_arg(sub)
        if name in ("plan", "maintain", "compact"):
            sub.add_argument("--force", action="store_true", help="compact even when not due")
        if name != "plan":
            sub.add_argument("--cleaner-threads", type=int, default=1, metavar="N",
                             help="partitions maintained side by side, each through its own Spark session "
                                  "(Kafka's log.cleaner.threads; default 1)")
        if name == "maintain":
            sub.add_argument("--with-sample-data", action="store_true",
                             help="first produce sample records into every topic (the quick start's demo data)")
            sub.add_argument("--sample-records", type=int, default=3000, help="sample records per topic")
            sub.add_argument("--no-report", action="store_true", help="skip writing the report")
        if name in ("maintain", "vacuum"):
            sub.add_argument("--retention-ms", type=int, default=None,
                             help="vacuum window; only the spec's, or 0 with --unsafe-shorter-time-travel")
            sub.add_argument("--unsafe-shorter-time-travel", action="store_true",
                             help="allow a vacuum window shorter than time.travel.retention.ms")

    sub = verb("validate", "check the guarantees of a partition's current version, or of a version range")
    topic_arg(sub)
    sub.add_argument("--partition", type=int, default=None)
    sub.add_argument("--from-version", type=int, default=None)
    sub.add_argument("--to-version", type=int, default=None)
    now_arg(sub)

    sub = verb("status", "per partition: log start, end offset, checkpoint, dirty ratio, last run")
    topic_arg(sub)
    now_arg(sub)

    sub = verb("report", "write the data-quality report and print where it is")
    sub.add_argument("--output", default=None, help="folder for the site (default: <warehouse>/_topiclake/report)")

    sub = verb("simulate", "run scenario files through the real engine in temporary warehouses")
    sub.add_argument("scenarios", nargs="+", metavar="SCENARIO.yaml")
    return parser


def guarded(action: Callable[[], int]) -> int:
    """Run ``action``; turn topiclake's errors into their exit status and one line each.

    A user's mistake never shows a traceback; an unexpected failure shows one line
    (``TOPICLAKE_DEBUG=1`` re-raises it). Jobs use this as the CLI does.
    """
    try:
        return int(action())
    except TopiclakeError as error:
        for line in error.lines():
            print(f"topiclake: {line}", file=sys.stderr)
        return int(error.exit_code)
    except KeyboardInterrupt:
        print("topiclake: interrupted", file=sys.stderr)
        return 130
    except Exception as error:  # noqa: BLE001 - a bug or an infrastructure failure, not the user's input
        if os.environ.get("TOPICLAKE_DEBUG"):
            raise
        first = str(error).strip().splitlines()[0] if str(error).strip() else ""
        print(f"topiclake: internal error: {type(error).__name__}: {first} "
              "(set TOPICLAKE_DEBUG=1 for the traceback)", file=sys.stderr)
        return int(ExitCode.FAILED)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit status (never raises for a user's mistake)."""

    def command() -> int:
        try:
            args = build_parser().parse_args(argv)
        except SystemExit as done:  # --version and --help print, then end here
            return int(done.code or 0)
        if args.verbose:
            from framework.session import show_spark_output

            show_spark_output()
        from framework.cli import commands

        return commands.run(Context(args))

    return guarded(command)


def entry_point() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry_point()
