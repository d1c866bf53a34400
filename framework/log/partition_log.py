"""One topic partition as a Delta table: create, append with offsets, read, versions.

Table layout (``<warehouse>/<topic>-<partition>``):

==================  ==========================================  ==========================
column              type                                        meaning
==================  ==========================================  ==========================
offset              BIGINT NOT NULL                             assigned at append, never
                                                                reused, never changed
timestamp           TIMESTAMP NOT NULL                          CreateTime or append time
key                 STRING or BINARY                            NULL refused when compacted
value               STRING or BINARY                            NULL = tombstone
headers             ARRAY<STRUCT<key STRING, value BINARY>>     in order, duplicates kept
_size               BIGINT NOT NULL                             the contract's record size
_delete_horizon     TIMESTAMP                                   a kept tombstone's horizon
_segment            BIGINT NOT NULL (partition column)          base offset of the segment
==================  ==========================================  ==========================

``_segment`` is what lets producers and the cleaner run at once. Open-source Delta
judges conflicts by partition values, so a MERGE restricted to ``_segment < U`` never
conflicts with appends into a segment whose base offset is at least ``U``. Appends go to
the active segment; when a cleaning run does collide with an append into it, the run
rolls the log to a new segment (a marker commit) and retries, as Kafka rolls its
active segment. Producers never read the table, so they never lose to a cleaning run.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from typing import Callable, Iterable

from framework import faults
from framework.errors import ArgumentError, ConcurrentWriteError, TimeTravelError
from framework.log import appended_rows, version_checksum
from framework.log.commit_log import read_commits
from framework.log.delta_commits import (
    MAX_COMMIT_ATTEMPTS,
    TXN_APP_ID_CONF,
    TXN_VERSION_CONF,
    USER_METADATA_CONF,
    StaleSnapshotError,
    backoff,
    commit_metadata,
    is_retryable_conflict,
    session_confs,
)
from framework.log.delta_create import NewTable, clear_uncommitted_log
from framework.log.delta_transactions import WRITTEN_OR_SKIPPED, claimed_commit
from framework.log.log_state import (
    NO_RECORD_YET,
    NO_TIMESTAMP,
    AppendedRecords,
    CommitEntry,
    LogState,
    Snapshot,
    appends_reach,
    fold,
    metadata_field,
    newest_timestamp,
    oldest_timestamp,
    sizes_from_commits,
    to_metadata,
)
from framework.log.table_layout import RECORD_COLUMNS, desired_properties, table_schema
from framework.log.warehouse import Warehouse, delta_table_sql
from framework.spec import TopicSpec

#: SetTransaction app ids: every maintenance commit claims the next epoch of the first.
MAINTENANCE_APP_ID = "topiclake.maintenance"
SEGMENT_ROLL_APP_ID = "topiclake.segment-roll"
#: every append (produce, ingest) claims base offset + 1 of this one
APPEND_APP_ID = "topiclake.append"


#: A new partition's bookkeeping: no record yet.
NEW_LOG = LogState(max_timestamp_ms=NO_TIMESTAMP, min_timestamp_ms=NO_RECORD_YET)

#: How many commits each read of the history takes, newest first, until the bookkeeping is settled.
HISTORY_PAGES = (16, 256, None)


@dataclass(frozen=True)
class AppendResult:
    partition: int
    base_offset: int
    count: int
    version: int | None


class PartitionLog:
    """The Delta table of one topic partition."""

    def __init__(self, spark, warehouse: Warehouse, spec: TopicSpec, partition: int):
        if not 0 <= partition < spec.partitions:
            raise ArgumentError(
                f"partition {partition} is out of range for topic {spec.topic} "
                f"(partitions: {spec.partitions}, valid 0..{spec.partitions - 1})"
            )
        self.spark = spark
        self.warehouse = warehouse
        self.spec = spec
        self.partition = partition
        self.name = spec.table_name(partition)
        self.path = warehouse.partition_path(spec.topic, partition)

    def __repr__(self) -> str:
        return f"PartitionLog({self.path!r})"

    # ------------------------------------------------------------------ table
    def exists(self) -> bool:
        return self.warehouse.table_exists(self.spark, self.path)

    def delta_table(self):
        from delta.tables import DeltaTable

        return DeltaTable.forPath(self.spark, self.path)

    def create(self) -> bool:
        """Create the table if it does not exist; True when this call created it."""
        if self.exists():
            return False
        faults.reached("create.before_commit", log=self)
        with commit_metadata(self.spark, metadata := to_metadata(NEW_LOG, "create", None)):
            created = self.definition().create(self.spark, self.path, metadata)
        faults.reached("create.after_commit", log=self)
        return created

    def definition(self) -> NewTable:
        """The table as its creation declares it (a create, or a first append)."""
        return NewTable(table_schema(self.spec), desired_properties(self.spec, self.partition), ("_segment",),
                        f"topiclake: topic {self.spec.topic}, partition {self.partition}")

    def properties(self) -> dict[str, str]:
        return dict(tuple(r) for r in self.spark.sql(f"SHOW TBLPROPERTIES {delta_table_sql(self.path)}").collect())

    def sync_properties(self, newest_version: int | None = None) -> dict[str, str]:
        """Bring table properties in line with the spec; returns what changed. The current ones
        come from the newest version's checksum (a local file), else ``SHOW TBLPROPERTIES``;
        ``newest_version``: the newest version, if the caller has just read the log."""
        wanted = desired_properties(self.spec, self.partition)
        newest = [newest_version] if newest_version is not None else [c.version for c in read_commits(
            self.spark, self.path, 1)]
        current = (newest and version_checksum.configuration(self.path, newest[0])) or self.properties()
        changed = {k: v for k, v in wanted.items() if current.get(k) != v}
        if changed:
            assignments = ", ".join(f"'{k}' = '{_sql_string(v)}'" for k, v in sorted(changed.items()))
            self.spark.sql(f"ALTER TABLE {delta_table_sql(self.path)} SET TBLPROPERTIES ({assignments})")
        return changed

    def schema(self):
        """The table's schema: the newest version's checksum holds it, else Delta loads it."""
        found = version_checksum.newest_schema(self.spark, self.path)
        return found or self.spark.read.format("delta").load(self.path).schema

    # ---------------------------------------------------------------- history
    def commits(self, limit: int | None = None) -> list[CommitEntry]:
        """Newest-first commits (version, read version, userMetadata)."""
        return [CommitEntry(c.version, c.read_version, c.user_metadata) for c in read_commits(self.spark, self.path, limit)]

    def snapshot(self) -> Snapshot:
        """The latest version and the bookkeeping as of it."""
        recent = self.commits(HISTORY_PAGES[0])
        version = recent[0].version
        state = self.states_at([version], first_page=recent)[version]
        past_checkpoint, after_cut = sizes_from_commits(recent, state)
        if (past_checkpoint is None and after_cut is None and len(recent) == HISTORY_PAGES[0]
                and not appends_reach(recent, max(state.checkpoint, state.log_start_offset))):
            # more appends came since the checkpoint than the first page holds: the next page
            # is a read of 256 small local files, where the scan it saves is a Spark job
            past_checkpoint, after_cut = sizes_from_commits(self.commits(HISTORY_PAGES[1]), state)
        return Snapshot(version=version, state=state, past_checkpoint=past_checkpoint, after_cut=after_cut)

    def states_at(self, versions: Iterable[int], first_page: list[CommitEntry] | None = None) -> dict[int, LogState]:
        """The bookkeeping as of each of ``versions``, folded from the commit metadata up to
        it; ``first_page`` is ``commits(HISTORY_PAGES[0])`` if the caller already read it.
        Reads more of the history only while the newest page does not settle a version."""
        wanted = sorted(set(versions))
        found: dict[int, LogState] = {}
        for limit in HISTORY_PAGES:
            commits = first_page if (limit == HISTORY_PAGES[0] and first_page is not None) else self.commits(limit)
            exhausted = limit is None or len(commits) < limit
            for version in wanted:
                if version not in found:
                    folded = fold(c for c in commits if c.version <= version)
                    if folded.state is not None and (folded.complete or exhausted):
                        found[version] = folded.state
            if len(found) == len(wanted) or exhausted:
                break
        for version in wanted:
            if version not in found:  # no topiclake commit left in the log (cleaned up long ago)
                found[version] = self._state_from_data(version)
        return found

    def _state_from_data(self, version: int) -> LogState:
        row = self.read(version).selectExpr("min(`offset`) AS lo", "max(`offset`) AS hi", "max(_segment) AS seg"
                                            ).collect()[0]
        if row["hi"] is None:
            raise ConcurrentWriteError(
                f"{self.name}: the Delta log no longer holds topiclake's offset bookkeeping and the "
                "table is empty, so its log end offset cannot be recovered; refusing to guess"
            )
        end = row["hi"] + 1
        return LogState(log_start_offset=row["lo"], log_end_offset=end, checkpoint=row["lo"], active_segment=row["seg"])

    # ------------------------------------------------------------------- read
    def read(self, version: int | None = None, as_of: str | None = None):
        """All columns at ``version`` (pinned) or a timestamp, else at the latest version (unpinned)."""
        reader = self.spark.read.format("delta")
        try:
            if version is not None:
                reader = reader.option("versionAsOf", int(version))
            elif as_of is not None:
                reader = reader.option("timestampAsOf", as_of)
            frame = reader.load(self.path)
            if version is not None or as_of is not None:
                frame.schema  # resolves the version now, so a missing one is refused here
            return frame
        except Exception as error:  # noqa: BLE001 - re-worded below, re-raised otherwise
            text = str(error)
            markers = ("TIME_TRAVEL", "VERSION_NOT_EXIST", "VERSION_NOT_FOUND", "TIMESTAMP_GREATER", "TIMESTAMP_EARLIER")
            if any(m in text for m in markers):
                first_line = text.strip().splitlines()[0]
                raise TimeTravelError(f"{self.name}: cannot read that version: {first_line}") from None
            raise

    def read_files(self, version: int):
        """All columns at ``version`` from the files its checksum lists when they are the
        version (no snapshot state to rebuild), else through Delta (:meth:`read`)."""
        return version_checksum.read_plain(self.spark, self.path, version, lambda: self.read(version))

    def read_snapshot(self, snap: Snapshot):
        """A pinned snapshot's records from its files (:meth:`read_files`), at every size: a
        time-travel read rebuilds the version's state to plan each scan (Delta's
        ``PrepareDeltaScan``); Parquet's row-group statistics skip by offset instead."""
        return self.read_files(snap.version)

    def size(self, version: int, start: int | None = None, end: int | None = None) -> tuple[int, int]:
        """Records and bytes (the contract's byte measure) at ``version``, of the offsets in
        ``[start, end)`` (the whole log by default): one aggregate pass."""
        records = self.read(version)
        if start is not None:
            records = records.where(f"`offset` >= {int(start)}")
        if end is not None:
            records = records.where(f"`offset` < {int(end)}")
        row = records.selectExpr("count(*) AS n", "sum(_size) AS b").collect()[0]
        return row["n"], row["b"] or 0

    def records(self, version: int | None = None, as_of: str | None = None):
        """The user-facing columns, in offset order."""
        return self.read(version, as_of).select(*RECORD_COLUMNS).orderBy("offset")

    # ----------------------------------------------------------------- append
    def append(self, records, appended: AppendedRecords, max_timestamp_ms: int | None) -> AppendResult:
        """Append ``records`` as one atomic commit, assigning offsets from the log end offset.

        ``records`` has key, value, timestamp, headers and ``_seq`` (0..count-1, the order
        offsets follow): a DataFrame, which the caller persists, since a retry evaluates it
        again, or driver-side rows (an Arrow table in ``appended_rows.driver_side_schema``,
        with ``_size``), which Arrow writes.
        ``appended`` is their count, bytes and oldest timestamp, which the commit records so
        that planning can measure them without a scan; ``max_timestamp_ms`` is their newest
        timestamp (None if not known), for the state.
        """
        count = appended.records
        if count == 0:
            return AppendResult(self.partition, self.snapshot().state.log_end_offset, 0, None)

        def plan(state: LogState):
            base = state.log_end_offset
            frame = appended_rows.numbered(records, base)
            fields = {"base_offset": base, "count": count, "bytes": appended.bytes,
                      "batch_min_timestamp_ms": appended.min_timestamp_ms}
            after = state.with_appended(count, max_timestamp_ms, appended.min_timestamp_ms)
            return base, frame, after, fields

        return self._claimed_append("produce", plan, count)

    def append_ingested(self, records, appended: AppendedRecords, start: int, last_offset: int, read_to: int,
                        max_timestamp_ms: int | None) -> AppendResult:
        """Append records that carry Kafka's offsets (``ingest``), as one atomic commit.

        ``records`` (offset, timestamp, key, value, headers) are Kafka's offsets ``[start,
        read_to)``, the last of them ``last_offset``, ``appended`` their count, bytes and
        oldest timestamp, the newest timestamp ``max_timestamp_ms``; the commit records that
        range. A first ingest that starts past 0 moves the log start offset to Kafka's.
        Returns None's version when another ingest already appended from ``start`` (nothing
        is written twice).
        """
        count = appended.records

        def plan(state: LogState):
            if state.log_end_offset > start:
                return None  # another ingest appended these offsets first
            log_start = start if state.log_end_offset == state.log_start_offset else state.log_start_offset
            after = replace(state, log_start_offset=max(state.log_start_offset, log_start),
                            log_end_offset=last_offset + 1,
                            max_timestamp_ms=newest_timestamp([state.max_timestamp_ms, max_timestamp_ms]),
                            min_timestamp_ms=oldest_timestamp([state.min_timestamp_ms, appended.min_timestamp_ms]))
            return start, records, after, {"base_offset": start, "count": count, "bytes": appended.bytes,
                                           "batch_min_timestamp_ms": appended.min_timestamp_ms,
                                           "kafka_offsets": [start, read_to]}

        return self._claimed_append("ingest", plan, count)

    def _claimed_append(self, operation: str, plan: Callable[[LogState], tuple | None], count: int) -> AppendResult:
        """One atomic append whose offsets start at a base that only one writer may claim.

        ``plan(state)`` gives (base offset, frame with offsets, state after, metadata fields),
        or None when the state shows the append is no longer wanted. The base is claimed with
        a Delta SetTransaction (:data:`APPEND_APP_ID`, version base + 1), so two writers never
        both write from one base: the later one conflicts (and plans again from the new
        snapshot) or finds the claim taken and writes nothing. With no table yet, the commit
        creates it (version 0, :meth:`definition`); a creator first makes this one conflict.
        """
        producer_id, lost_to = uuid.uuid4().hex, ""  # lost_to: how the last attempt was lost
        for attempt in range(MAX_COMMIT_ATTEMPTS):
            new_table = None if self.exists() else self.definition()
            if new_table is not None:
                clear_uncommitted_log(self.spark, self.path)  # what a killed create left, as create does
            snap = None if new_table is not None else self.snapshot()
            state, read_version = (NEW_LOG, None) if snap is None else (snap.state, snap.version)
            planned = plan(state)
            if planned is None:
                return AppendResult(self.partition, state.log_end_offset, 0, None)
            base, frame, after, fields = planned
            frame = appended_rows.in_layout(frame, self.spec, state.active_segment, count)
            metadata = to_metadata(after, operation, read_version, producer_id=producer_id, **fields)
            at = dict(log=self, base_offset=base, count=count)
            faults.reached(f"{operation}.before_commit", **at)
            try:
                # claim base + 1: bases only grow, so one app id serves all appends (the checksum lists it once)
                landed = claimed_commit(self.spark, self.path, table_schema(self.spec), APPEND_APP_ID, base + 1,
                                        metadata, frame, new_table, appended_rows.RECORDS_PER_APPEND_FILE,
                                        lambda at=at: faults.reached(f"{operation}.files_written", **at))
            except Exception as error:  # noqa: BLE001
                if not is_retryable_conflict(error):
                    raise
                lost_to = f"a commit conflict, {type(error).__name__}, planned from version {read_version}"
                backoff(attempt)
                continue
            if landed == WRITTEN_OR_SKIPPED:
                landed = self._landed(producer_id, -1 if read_version is None else read_version)
            if landed is not None:
                faults.reached(f"{operation}.after_commit", **at, version=landed)
                return AppendResult(self.partition, base, count, landed)
            lost_to = f"base offset {base} already claimed, planned from version {read_version}"
            backoff(attempt)  # Delta skipped it: another writer already wrote this base
        raise ConcurrentWriteError(f"{self.name}: gave up appending after {MAX_COMMIT_ATTEMPTS} attempts lost to "
                                   f"other writers (the last: {lost_to})")

    def _landed(self, producer_id: str, read_version: int) -> int | None:
        return self.find_commit("producer_id", producer_id, read_version)

    def find_commit(self, field: str, value: str, after_version: int) -> int | None:
        """The version of the commit after ``after_version`` whose metadata has ``field == value``.

        Delta skips, without an error, a write whose SetTransaction version it has seen;
        looking for the commit is how a writer tells "landed" from "skipped".
        """
        for limit in (8, 64, None):
            commits = self.commits(limit)
            for commit in commits:
                if commit.version <= after_version:
                    return None
                if metadata_field(commit.user_metadata, field) == value:
                    return commit.version
            if limit is None or len(commits) < limit:
                return None
        return None

    # -------------------------------------------------------------- maintenance
    def commit_maintenance(self, state: LogState, operation: str, action: Callable[[], object] | None,
                           read_version: int, confs: dict[str, str] | None = None, **extra) -> int:
        """Commit a maintenance change (``action``, a Delta DML; or None for bookkeeping only)
        so that the commit carries ``state`` and claims maintenance epoch ``state.clean.epoch``.

        Every maintenance commit holds a SetTransaction of one app id, so two maintenance
        runs on one partition can never both commit from the same starting point: the later
        one conflicts, or Delta skips it (then :class:`StaleSnapshotError` asks to re-plan).
        Returns the new table version.
        """
        commit_id = uuid.uuid4().hex
        metadata = to_metadata(state, operation, read_version, commit_id=commit_id, **extra)
        epoch = state.clean.epoch
        point = operation if operation in ("compact", "delete_records") else "retain"
        faults.reached(f"{point}.before_commit", log=self, operation=operation, read_version=read_version)
        version = WRITTEN_OR_SKIPPED
        if action is None:
            version = self._empty_commit(metadata, MAINTENANCE_APP_ID, epoch)
        else:
            settings = {USER_METADATA_CONF: metadata, TXN_APP_ID_CONF: MAINTENANCE_APP_ID, TXN_VERSION_CONF: str(epoch)}
            settings.update(confs or {})
            with session_confs(self.spark, settings):
                done = action()  # a commit through the transaction API returns its version
            version = done if type(done) is int else version
        if version == WRITTEN_OR_SKIPPED:  # a DML or DataFrame write: only the commits tell
            version = self.find_commit("commit_id", commit_id, read_version)
        if version is None:
            raise StaleSnapshotError(f"{self.name}: another maintenance run committed epoch {epoch} first")
        faults.reached(f"{point}.after_commit", log=self, operation=operation, version=version)
        return version

    def _empty_commit(self, metadata: str, app_id: str, txn_version: int):
        """A commit with no data (Delta skips an empty append unless it carries a SetTransaction);
        what :func:`claimed_commit` answers."""
        return claimed_commit(self.spark, self.path, table_schema(self.spec), app_id, txn_version, metadata)

    def roll_segment(self, snap: Snapshot) -> LogState:
        """Start a new active segment at the log end offset, so appends leave older ones alone."""
        state = snap.state
        rolled = replace(state, active_segment=max(state.active_segment, state.log_end_offset))
        if rolled.active_segment != state.active_segment:
            metadata = to_metadata(rolled, "roll-segment", snap.version)
            self._empty_commit(metadata, SEGMENT_ROLL_APP_ID, rolled.active_segment)
        return rolled


def _sql_string(value: str) -> str:
    return value.replace("\\", "\\\\").replace("'", "\\'")
