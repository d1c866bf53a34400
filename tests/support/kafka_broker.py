"""One real Apache Kafka broker (KRaft, a single node on loopback) for the tests.

Kafka itself is the referee for what compaction keeps: tests produce to a real topic, let
Kafka's own log cleaner compact it, and compare. The broker runs from the jars that
``scripts/fetch-kafka.sh`` copies from Maven Central into ``.kafka/lib`` (see
``scripts/kafka/pom.xml``); no Kafka tarball is involved. Facts this module relies on are
in the shared FIELD_NOTES, section "A real Kafka broker on these machines".

Use::

    broker = KafkaBroker()
    broker.start(tmp_path)           # formats storage, starts java, waits for the port
    try:
        broker.create_topic("t", 1, {"cleanup.policy": "compact"})
        broker.produce("t", [{"key": "k", "value": "v", "partition": 0}])
        broker.consume_all("t", 0)
    finally:
        broker.stop()                # SIGTERM by PID, SIGKILL after 10 s

The Python side talks to the broker with ``confluent-kafka`` (librdkafka in the wheel),
imported lazily so that importing this module costs nothing.
"""

from __future__ import annotations

import atexit
import base64
import os
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from framework import jdk
from tests.support.child_jvm import QUICK_JIT_OPTIONS

REPO = Path(__file__).resolve().parents[2]
#: Where scripts/fetch-kafka.sh puts the broker's jars (git-ignored).
KAFKA_LIB = REPO / ".kafka" / "lib"
FETCH_SCRIPT = REPO / "scripts" / "fetch-kafka.sh"

#: How long start() waits for the broker to answer, and stop() for it to exit on SIGTERM.
START_TIMEOUT_S = 60.0
STOP_GRACE_S = 10.0
#: Timeout of each client call (create topic, flush, consume) against the local broker.
CLIENT_TIMEOUT_S = 30.0

# The broker's log4j2 configuration: INFO to stdout, which start() sends to broker.log. The
# cleaner's lines ("Cleaner 0: ...", loggers org.apache.kafka.storage.internals.log.Cleaner
# and .LogCleaner) say what each pass kept and discarded.
_LOG4J2_PROPERTIES = """\
status = warn
appender.out.type = Console
appender.out.name = STDOUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = STDOUT
"""


def ensure_kafka_jars() -> Path:
    """Return ``.kafka/lib``, first running scripts/fetch-kafka.sh if it is not there yet.

    The script's stamp file ``.fetched`` marks a complete copy (the script swaps the folder in
    only once Maven has finished), so a half-fetched lib is never used.
    """
    if not (KAFKA_LIB / ".fetched").is_file():
        subprocess.run([str(FETCH_SCRIPT)], check=True)
    return KAFKA_LIB


def _free_loopback_port() -> int:
    """A TCP port free on 127.0.0.1 right now (the OS picks it; the broker binds it soon after)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _random_cluster_id() -> str:
    """A cluster id as ``StorageTool random-uuid`` makes one: 16 random bytes, base64url
    without padding, never starting with '-' (Kafka's Uuid.randomUuid rule); made here to save
    a JVM start."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")
        if not cid.startswith("-"):
            return cid


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8")


def _utf8(text: str | None) -> bytes | None:
    return None if text is None else text.encode("utf-8")


class KafkaBroker:
    """A single-node KRaft Kafka (broker and controller in one JVM) on 127.0.0.1.

    After start(): ``bootstrap_servers`` ("127.0.0.1:PORT"), ``log_dirs`` (the broker's only
    log directory, where the partition folders and ``cleaner-offset-checkpoint`` live) and
    ``pid`` (of the java process, the leader of its own process group).
    """

    def __init__(self, lib: Path | None = None, heap: str = "384m") -> None:
        self.lib = lib if lib is not None else KAFKA_LIB
        self.heap = heap
        self.workdir: Path | None = None
        self.port: int | None = None
        self.controller_port: int | None = None
        self._proc: subprocess.Popen | None = None
        self._log_file = None
        self._admin = None

    # ----------------------------------------------------------------- lifecycle

    @property
    def bootstrap_servers(self) -> str:
        if self.port is None:
            raise RuntimeError("KafkaBroker not started")
        return f"127.0.0.1:{self.port}"

    @property
    def log_dirs(self) -> Path:
        if self.workdir is None:
            raise RuntimeError("KafkaBroker not started")
        return self.workdir / "kafka-logs"

    @property
    def pid(self) -> int:
        if self._proc is None:
            raise RuntimeError("KafkaBroker not started")
        return self._proc.pid

    @property
    def log_path(self) -> Path:
        """The broker's stdout and stderr (its log4j2 output goes to stdout)."""
        if self.workdir is None:
            raise RuntimeError("KafkaBroker not started")
        return self.workdir / "broker.log"

    def start(self, workdir: Path) -> None:
        """Format storage under ``workdir`` and start the broker; return once it serves
        metadata. Raises RuntimeError with the broker log's tail if java exits, TimeoutError
        if it does not answer within START_TIMEOUT_S."""
        if self._proc is not None:
            raise RuntimeError("KafkaBroker already started")
        if not (self.lib / ".fetched").is_file():
            raise FileNotFoundError(f"no Kafka jars in {self.lib}: run scripts/fetch-kafka.sh")
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = _free_loopback_port()
        self.controller_port = _free_loopback_port()
        while self.controller_port == self.port:
            self.controller_port = _free_loopback_port()

        props = self.workdir / "server.properties"
        props.write_text(self._server_properties())
        log4j = self.workdir / "log4j2.properties"
        log4j.write_text(_LOG4J2_PROPERTIES)
        classpath = f"{self.lib}/*"  # java expands the wildcard itself (no shell involved)
        jvm = [
            jdk.tool("java") or "java",
            f"-Dlog4j2.configurationFile={log4j}",
            # Modest on a 2-core machine shared with Spark: one GC thread, and the quick JIT
            # only (the broker serves a few thousand records in a test, not a benchmark).
            "-XX:+UseSerialGC",
            *QUICK_JIT_OPTIONS,
            "-Djava.awt.headless=true",
            "-cp",
            classpath,
        ]

        # 1. Format the (empty) log dir with a fresh cluster id. No --standalone: the quorum
        #    is given by controller.quorum.voters in server.properties.
        fmt = subprocess.run(
            [*jvm[:1], "-Xmx128m", *jvm[1:], "kafka.tools.StorageTool", "format",
             "-t", _random_cluster_id(), "-c", str(props)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120,
        )
        if fmt.returncode != 0:
            raise RuntimeError(f"kafka StorageTool format failed ({fmt.returncode}):\n{fmt.stdout}")

        # 2. Start the broker in its own process group (a new session), so that a Ctrl-C meant
        #    for pytest does not reach it half-way; stop() ends it by PID.
        self._log_file = open(self.log_path, "ab")
        self._proc = subprocess.Popen(
            [*jvm[:1], f"-Xmx{self.heap}", *jvm[1:], "kafka.Kafka", str(props)],
            stdin=subprocess.DEVNULL, stdout=self._log_file, stderr=subprocess.STDOUT,
            cwd=self.workdir, start_new_session=True,
        )
        atexit.register(self.stop)  # if the caller never reaches stop(): no stray JVM
        try:
            self._wait_ready(time.monotonic() + START_TIMEOUT_S)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """SIGTERM the broker by PID, SIGKILL it if still alive after STOP_GRACE_S, and reap
        it. Safe to call twice, or on a broker that never started."""
        if self._admin is not None:
            self._admin = None  # librdkafka's client closes when collected
        proc, self._proc = self._proc, None
        if proc is not None:
            atexit.unregister(self.stop)
            if proc.poll() is None:
                try:
                    os.kill(proc.pid, signal.SIGTERM)
                    proc.wait(timeout=STOP_GRACE_S)
                except subprocess.TimeoutExpired:
                    os.kill(proc.pid, signal.SIGKILL)
                    proc.wait()
                except ProcessLookupError:
                    proc.wait()
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def __enter__(self) -> KafkaBroker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def log_tail(self, lines: int = 40) -> str:
        """The last lines of the broker's log (for error messages)."""
        try:
            text = self.log_path.read_text(errors="replace")
        except (OSError, RuntimeError):
            return "(no broker log)"
        return "\n".join(text.splitlines()[-lines:])

    def _server_properties(self) -> str:
        props = {
            # KRaft, one node that is both broker and controller, loopback only.
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": (f"PLAINTEXT://127.0.0.1:{self.port},"
                          f"CONTROLLER://127.0.0.1:{self.controller_port}"),
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": str(self.log_dirs),
            # One replica of everything, including the internal topics (consumer offsets,
            # transaction state, share-group state), with one partition each: quick to create.
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            # Tests create every topic themselves, explicitly.
            "auto.create.topics.enable": "false",
            "num.partitions": "1",
            # Cleaner and retention act within about a second (defaults: 15 s and 5 min).
            "log.cleaner.backoff.ms": "500",
            "log.retention.check.interval.ms": "1000",
            # The default 128 MiB dedupe buffer would take a third of the heap; 32 MiB
            # holds a million keys, far more than a test writes.
            "log.cleaner.dedupe.buffer.size": str(32 * 1024 * 1024),
        }
        return "".join(f"{k}={v}\n" for k, v in props.items())

    def _wait_ready(self, deadline: float) -> None:
        # First the port: the JVM takes several seconds to get there (~10 s on 2 cores).
        while True:
            self._raise_if_dead()
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1.0):
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"Kafka broker did not open port {self.port} in "
                                   f"{START_TIMEOUT_S:.0f} s; log tail:\n{self.log_tail()}")
            time.sleep(0.25)
        # Then a metadata answer that names this broker: the listener may accept before the
        # broker has registered with its controller and can serve requests.
        while True:
            self._raise_if_dead()
            try:
                md = self.admin().list_topics(timeout=2.0)
                if md.brokers:
                    return
            except Exception:  # noqa: BLE001 - KafkaException while it starts up
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"Kafka broker on port {self.port} answered no metadata in "
                                   f"{START_TIMEOUT_S:.0f} s; log tail:\n{self.log_tail()}")
            time.sleep(0.25)

    def _raise_if_dead(self) -> None:
        if self._proc is not None and self._proc.poll() is not None:
            code = self._proc.returncode
            raise RuntimeError(f"Kafka broker exited with code {code}; log tail:\n{self.log_tail()}")

    # ------------------------------------------------------------------- clients

    def admin(self):
        """A shared confluent_kafka AdminClient for this broker."""
        if self._admin is None:
            from confluent_kafka.admin import AdminClient

            self._admin = AdminClient({"bootstrap.servers": self.bootstrap_servers})
        return self._admin

    def create_topic(self, name: str, partitions: int = 1,
                     configs: dict[str, str] | None = None) -> None:
        """Create a topic (replication factor 1) with these topic configs, and wait until
        every partition has a leader."""
        from confluent_kafka.admin import NewTopic

        topic = NewTopic(name, num_partitions=partitions, replication_factor=1,
                         config=dict(configs or {}))
        self.admin().create_topics([topic])[name].result(timeout=CLIENT_TIMEOUT_S)
        deadline = time.monotonic() + CLIENT_TIMEOUT_S
        while True:
            md = self.admin().list_topics(topic=name, timeout=5.0).topics.get(name)
            if (md is not None and md.error is None and len(md.partitions) == partitions
                    and all(p.leader >= 0 and p.error is None for p in md.partitions.values())):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"topic {name!r} not ready after {CLIENT_TIMEOUT_S:.0f} s")
            time.sleep(0.1)

    def produce(self, topic: str, records: Sequence[dict[str, Any]]) -> list[tuple[int, int]]:
        """Produce records and flush; return the (partition, offset) Kafka assigned to each,
        in the order given.

        Each record is a dict: ``key`` (str or None), ``value`` (str, or None for a
        tombstone), ``partition`` (int), optional ``headers`` (list of (str, bytes)) and
        optional ``timestamp_ms`` (int, the record's CreateTime; default now). The producer is
        idempotent, so retries can neither reorder nor duplicate records in a partition.
        """
        from confluent_kafka import Producer

        producer = Producer({
            "bootstrap.servers": self.bootstrap_servers,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
        })
        assigned: list[tuple[int, int] | None] = [None] * len(records)
        errors: list[str] = []

        def on_delivery(index: int):
            def callback(err, msg) -> None:
                if err is not None:
                    errors.append(f"record {index}: {err}")
                else:
                    assigned[index] = (msg.partition(), msg.offset())
            return callback

        for i, rec in enumerate(records):
            kwargs: dict[str, Any] = {
                "key": _utf8(rec.get("key")),
                "value": _utf8(rec.get("value")),
                "partition": int(rec["partition"]),
                "on_delivery": on_delivery(i),
            }
            if rec.get("headers"):
                kwargs["headers"] = [(str(k), v) for k, v in rec["headers"]]
            if rec.get("timestamp_ms") is not None:
                kwargs["timestamp"] = int(rec["timestamp_ms"])
            while True:
                try:
                    producer.produce(topic, **kwargs)
                    break
                except BufferError:  # local queue full: let deliveries drain, then retry
                    producer.poll(0.1)
            producer.poll(0)
        remaining = producer.flush(CLIENT_TIMEOUT_S)
        if remaining:
            raise TimeoutError(f"{remaining} records to {topic!r} undelivered after "
                               f"{CLIENT_TIMEOUT_S:.0f} s")
        if errors:
            raise RuntimeError(f"produce to {topic!r} failed: " + "; ".join(errors[:5]))
        return [a for a in assigned if a is not None]

    def consume_all(self, topic: str, partition: int) -> list[dict[str, Any]]:
        """Every record of one partition from its earliest offset up to the high watermark
        as it was when called, in offset order (assign, not subscribe; no offsets committed).

        Each record is a dict: ``offset``, ``key`` and ``value`` (str or None), ``headers``
        (list of (str, bytes); [] when it has none) and ``timestamp_ms``. A compacted
        partition's offsets have gaps; that is expected.
        """
        from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

        consumer = Consumer({
            "bootstrap.servers": self.bootstrap_servers,
            "group.id": f"topiclake-tests-{uuid.uuid4().hex}",  # never joins: assign only
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
        })
        try:
            low, high = consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=CLIENT_TIMEOUT_S)
            out: list[dict[str, Any]] = []
            if high <= low:
                return out
            consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
            deadline = time.monotonic() + CLIENT_TIMEOUT_S
            while True:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{topic}-{partition}: read {len(out)} records, "
                                       f"high watermark {high} not reached")
                msg = consumer.poll(0.5)
                if msg is None:
                    continue
                if msg.error() is not None:
                    # EOF: the consumer's position is the high watermark of that moment. The
                    # last offsets below `high` may be control records (transaction markers),
                    # which a consumer never sees, so EOF, not the last offset, ends the read.
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        if msg.offset() >= high:
                            return out
                        continue
                    raise RuntimeError(f"{topic}-{partition}: {msg.error()}")
                if msg.offset() >= high:
                    return out
                out.append({
                    "offset": msg.offset(),
                    "key": _text(msg.key()),
                    "value": _text(msg.value()),
                    "headers": [(k, v) for k, v in (msg.headers() or [])],
                    "timestamp_ms": msg.timestamp()[1],
                })
                if msg.offset() == high - 1:
                    return out
        finally:
            consumer.close()

    # ---------------------------------------------------------- the log on disk

    def partition_dir(self, topic: str, partition: int) -> Path:
        return self.log_dirs / f"{topic}-{partition}"

    def active_segment_base(self, topic: str, partition: int) -> int:
        """The base offset of the partition's active (newest) segment: the largest base
        offset among its ``<base offset>.log`` files (a file's name is its base offset)."""
        bases = [int(p.stem) for p in self.partition_dir(topic, partition).glob("*.log")
                 if p.stem.isdigit()]
        if not bases:
            raise FileNotFoundError(f"no segments in {self.partition_dir(topic, partition)}")
        return max(bases)

    def cleaner_checkpoint(self, topic: str, partition: int) -> int | None:
        """The partition's offset in ``<log.dirs>/cleaner-offset-checkpoint`` (where the last
        cleaning pass ended), or None if the cleaner has not cleaned it yet.

        The file: a version line, a count line, then ``<topic> <partition> <offset>`` lines;
        Kafka writes it to a temporary file and renames it, so a read never sees half of it.
        """
        path = self.log_dirs / "cleaner-offset-checkpoint"
        try:
            lines = path.read_text().splitlines()
        except FileNotFoundError:
            return None
        for line in lines[2:]:
            parts = line.split()
            if len(parts) == 3 and parts[0] == topic and parts[1] == str(partition):
                return int(parts[2])
        return None

    def wait_cleaned(self, topic: str, partition: int, timeout: float = 60) -> int:
        """Wait until Kafka's log cleaner has cleaned the partition up to its active segment
        (which is never cleaned): the checkpoint reaches the active segment's base offset.
        Returns that offset.

        Roll the segment first (``segment.ms`` passed, then one more append): with only an
        active segment there is nothing to clean, and this raises at once instead of waiting.
        Tombstones are removed by a later pass, once ``delete.retention.ms`` has passed since
        the pass that first cleaned them; this does not wait for that.
        """
        deadline = time.monotonic() + timeout
        while True:
            base = self.active_segment_base(topic, partition)
            if base == 0:
                raise ValueError(f"{topic}-{partition} has only its active segment: nothing "
                                 "for the cleaner; roll it (segment.ms, then an append) first")
            done = self.cleaner_checkpoint(topic, partition)
            if done is not None and done >= base:
                return base
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{topic}-{partition}: cleaner checkpoint {done}, active segment base "
                    f"{base}, after {timeout:.0f} s; log tail:\n{self.log_tail()}")
            self._raise_if_dead()
            time.sleep(0.2)

    def delete_records(self, topic: str, partition: int, before_offset: int) -> int:
        """Delete the partition's records below ``before_offset`` (Kafka's DeleteRecords: the
        log start offset moves up); returns the new low watermark."""
        from confluent_kafka import TopicPartition

        admin = self.admin()
        if not hasattr(admin, "delete_records"):
            raise NotImplementedError("this confluent-kafka has no AdminClient.delete_records")
        tp = TopicPartition(topic, partition, before_offset)
        futures = admin.delete_records([tp], request_timeout=CLIENT_TIMEOUT_S)
        (future,) = futures.values()
        return future.result(timeout=CLIENT_TIMEOUT_S).low_watermark
