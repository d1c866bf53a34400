"""What every verb is given: the parsed arguments, the warehouse, the specs, a Spark
session started only when a verb asks for it, and where output and progress go."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from framework.deferred_session import DeferredSession
from framework.errors import ArgumentError, TopiclakeError

__all__ = ["DEFAULT_SPECS", "Context", "DeferredSession", "parse_now"]

DEFAULT_SPECS = "table_specs"
#: The verbs that judge checks or write the report with Great Expectations.
GX_VERBS = frozenset({"maintain", "compact", "retain", "optimize", "vacuum", "validate", "report", "simulate"})


class Context:
    """What every command needs: parsed args, the warehouse, the specs, and a lazy Spark."""

    def __init__(self, args: argparse.Namespace):
        from framework.log.warehouse import Warehouse

        self.args = args
        self.warehouse = Warehouse.resolve(args.warehouse)
        self._spark = None
        self._reporter = None
        self._specs = None

    @property
    def spark(self):
        if self._spark is None:
            from framework.session import get_session

            if self.args.verb in GX_VERBS:
                from framework.checks import gx_import

                gx_import.import_in_background()  # while the session starts (see gx_import)
            self._spark = get_session(kafka=self.args.verb == "ingest", metastore=self.metastore())
        return self._spark

    @property
    def deferred_spark(self):
        """The session, started when something first asks it a question. ``status``, ``plan``,
        ``create`` and the maintenance verbs hand it to the logs they read: a local table
        answers from its Delta log's files, so on a local warehouse where nothing is to be
        done they start no JVM (framework/deferred_session.py)."""
        from framework.session import require_engine

        require_engine()
        if self._spark is not None:  # started already (a maintain that produced sample data first)
            return self._spark
        return DeferredSession(lambda: self.spark)

    @property
    def specs(self):
        if self._specs is None:
            from framework.spec import load_specs

            self._specs = load_specs(self.args.specs or [DEFAULT_SPECS])
        return self._specs

    def spec(self, topic: str):
        for spec in self.specs:
            if spec.topic == topic:
                return spec
        known = ", ".join(s.topic for s in self.specs) or "none"
        raise ArgumentError(f"--topic: no spec for topic {topic!r} in {', '.join(self.args.specs or [DEFAULT_SPECS])} "
                            f"(known: {known})")

    def selected(self):
        topic = getattr(self.args, "topic", None)
        return [self.spec(topic)] if topic else list(self.specs)

    def out(self, human: str | None = None, data: Any = None) -> None:
        if self.args.json:
            if data is not None:
                print(json.dumps(data, sort_keys=True, default=str))
        elif human is not None:
            print(human)

    def progress(self, message: str) -> None:
        self.reporter.line(message)

    def step(self, done: int, total: int, label: str = "") -> None:
        self.reporter.step(done, total, label)

    @property
    def reporter(self):
        if self._reporter is None:
            from framework.cli.progress import Progress

            self._reporter = Progress(sys.stderr, quiet=self.args.json)
        return self._reporter

    def metastore(self) -> str | None:
        """Where the embedded session keeps its Hive metastore when a spec names catalog tables:
        ``$TOPICLAKE_METASTORE``, else beside the warehouse's own tables (a cluster's session
        brings its own metastore and ignores this)."""
        import os

        try:
            named = any(spec.table is not None for spec in self.specs)
        except TopiclakeError:  # no specs here: the verb that needs them says so itself
            return None
        if not named:
            return None
        if os.environ.get("TOPICLAKE_METASTORE"):
            return os.environ["TOPICLAKE_METASTORE"]
        if not self.warehouse.is_local:
            raise ArgumentError(f"--warehouse: {self.warehouse.root} is not local, and the embedded session's "
                                "metastore must be: set TOPICLAKE_METASTORE to a local folder")
        root = self.warehouse.internal_root
        return os.path.join(root[len("file:"):] if root.startswith("file:") else root, "metastore")

    # ------------------------------------------------------------ for the verbs
    def now_ms(self) -> int:
        """``--now``, or the clock."""
        return parse_now(getattr(self.args, "now", None))

    def partitions(self, topic):
        """``--partition``'s log of ``topic``, or all of them."""
        partition = getattr(self.args, "partition", None)
        return [topic.partition(partition)] if partition is not None else topic.partitions()

    def existing_log(self, topic: str, partition: int, deferred: bool = False):
        """A partition's log that must exist already (read, delete-records); ``deferred``: on
        the session started when first asked (:attr:`deferred_spark`)."""
        from framework.log.topic import Topic

        spark = self.deferred_spark if deferred else self.spark
        log = Topic(spark, self.warehouse, self.spec(topic)).partition(partition)
        if not log.exists():
            raise ArgumentError(f"{log.name}: no table at {log.path}; run `topiclake create` or produce first")
        return log


def parse_now(text: str | None) -> int:
    """``--now``: epoch milliseconds or ISO-8601; the clock when absent."""
    from framework.clients.records import parse_timestamp

    if text is None:
        return int(time.time() * 1000)
    try:
        return parse_timestamp(text)
    except ValueError as error:
        raise ArgumentError(f"--now: {error}") from None
