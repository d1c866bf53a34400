"""A topic: its spec and its partition tables, created idempotently and kept fitting the spec."""

from __future__ import annotations

from framework.errors import TableMismatchError
from framework.log.partition_log import PartitionLog
from framework.log.warehouse import Warehouse
from framework.side_by_side import each
from framework.spec import TopicSpec

#: Threads creating a new topic's partition tables.
CREATE_THREADS = 4


class Topic:
    """The partition tables of one topic spec in one warehouse."""

    def __init__(self, spark, warehouse: Warehouse, spec: TopicSpec):
        self.spark = spark
        self.warehouse = warehouse
        self.spec = spec

    @property
    def name(self) -> str:
        return self.spec.topic

    def partition(self, partition: int) -> PartitionLog:
        return PartitionLog(self.spark, self.warehouse, self.spec, partition)

    def partitions(self) -> list[PartitionLog]:
        return [self.partition(p) for p in range(self.spec.partitions)]

    def check_fits(self, skip_unreadable: bool = False) -> list[PartitionLog]:
        """Refuse a spec that no longer fits the tables already there; return those tables.

        Kafka can add partitions but never remove them, and a key's type is part of
        every record written; so fewer partitions, or another key or value type, is refused.
        With ``skip_unreadable``, a table whose schema cannot be read is left out rather
        than failing the call (maintenance lets that one partition fail on its own).
        """
        if self.spec.table is not None:
            from framework.log.catalog import check_names

            check_names(self.spark, self.warehouse, self.spec)
        beyond_path = self.warehouse.partition_path(self.spec.topic, self.spec.partitions)
        if self.warehouse.table_exists(self.spark, beyond_path):
            raise TableMismatchError(
                f"{self.spec.source}: partitions: the spec says {self.spec.partitions} but the "
                f"warehouse already has {beyond_path}; Kafka topics can gain partitions, never lose them"
            )
        existing = []
        for log in self.partitions():
            if not log.exists():
                continue
            try:
                schema = log.schema()
            except Exception:  # noqa: BLE001 - a broken table is that partition's failure, not the spec's
                if not skip_unreadable:
                    raise
                continue
            existing.append(log)
            fields = {f.name: f.dataType.simpleString() for f in schema.fields}
            for column, wanted in (("key", self.spec.key_type), ("value", self.spec.value_type)):
                found = fields.get(column)
                if found != wanted:
                    raise TableMismatchError(
                        f"{self.spec.source}: {column}.type: the spec says {wanted} but table "
                        f"{log.path} stores {column} as {found}; records already written cannot change type"
                    )
        return existing

    def create(self, sync_properties: bool = True) -> dict[int, str]:
        """Create missing partition tables; bring existing ones' properties in line with the spec.

        Returns, per partition, "created", "updated" (properties changed) or "exists".
        """
        existing = {log.partition for log in self.check_fits()}
        outcome: dict[int, str] = {}
        for log in self.partitions():
            if log.partition not in existing:
                outcome[log.partition] = "created" if log.create() else "exists"
            elif sync_properties and log.sync_properties():
                outcome[log.partition] = "updated"
            else:
                outcome[log.partition] = "exists"
        self.register()
        return outcome

    def ensure(self, appending_to: frozenset[int] = frozenset()) -> None:
        """Make sure every partition table exists (produce creates a topic on first use). A
        partition in ``appending_to`` is left to its caller's append, whose commit creates
        the table (``PartitionLog._claimed_append``); such a caller registers the tables
        (:meth:`register`) once it has appended."""
        existing = {log.partition for log in self.check_fits()}
        self._create_all([log for log in self.partitions() if log.partition not in existing | appending_to])
        if not appending_to:
            self.register()

    def create_missing(self) -> None:
        """Create the partition tables no append created (after :meth:`ensure` with
        ``appending_to``: a partition that got no record), then register the tables."""
        self._create_all([log for log in self.partitions() if not log.exists()])
        self.register()

    def ensure_partitions(self) -> list[PartitionLog]:
        """Check the spec against every readable table and create the missing ones, leaving
        any table that cannot be read for its own partition's run to fail on."""
        self.check_fits(skip_unreadable=True)
        logs = self.partitions()
        self._create_all([log for log in logs if not log.exists()])
        self.register()
        return logs

    def register(self) -> list[str]:
        """With ``table:`` in the spec, name the tables in the catalog too (idempotent)."""
        if self.spec.table is None:
            return []
        from framework.log.catalog import register

        return register(self.spark, self.warehouse, self.spec)

    def _create_all(self, missing: list[PartitionLog]) -> None:
        """Create tables side by side (``topiclake create`` or a first maintain of a
        100-partition topic makes 100 tables), each thread through its own child session: a
        create carries its commit metadata in a session conf."""
        each(self.spark, missing,
             lambda session, log: PartitionLog(session, self.warehouse, self.spec, log.partition).create(),
             CREATE_THREADS, name="create")
