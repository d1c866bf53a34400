"""A producer in its own process (its own JVM), driven line by line over stdin.

Commands: ``produce <n> <tag>`` appends n records with keys ``<tag>-0``.. (unique, so
compaction never supersedes them) and prints ``ok <base offset> <count>``; ``produce-when
<signal file> <n> <tag>`` waits until the file exists, produces the same way, then creates
``<signal file>.done`` (so a test can hold another writer's transaction open until this
append has committed); ``loop <seconds>
<tag>`` produces one-record batches for that long and prints ``ok <batches>``; ``quit``.
Any failure prints ``error <message>``: the test asserts none happens.
"""

import os
import sys
import time

sys.path.insert(0, sys.argv[1])

from framework.clients.produce import produce  # noqa: E402
from framework.clients.records import parse_records  # noqa: E402
from framework.log.topic import Topic  # noqa: E402
from framework.log.warehouse import Warehouse  # noqa: E402
from framework.session import local_session  # noqa: E402
from framework.spec import load_spec  # noqa: E402


def main() -> None:
    repo, spec_path, warehouse = sys.argv[1:4]
    spark = local_session("producer-process", conf={"spark.sql.shuffle.partitions": "1"})
    topic = Topic(spark, Warehouse.resolve(warehouse), load_spec(spec_path))
    print("ready", flush=True)
    for line in sys.stdin:
        words = line.split()
        try:
            if words[0] == "quit":
                break
            if words[0] in ("produce", "produce-when"):
                signal = None
                if words[0] == "produce-when":
                    signal, words = words[1], words[1:]
                    deadline = time.monotonic() + 120
                    while not os.path.exists(signal):
                        if time.monotonic() > deadline:
                            raise TimeoutError(f"no signal at {signal}")
                        time.sleep(0.05)
                count, tag = int(words[1]), words[2]
                raw = [(i, {"key": f"{tag}-{i}", "value": tag, "timestamp": 0, "partition": 0}) for i in range(count)]
                [result] = produce(topic, parse_records(raw, topic.spec, "producer"), 0)
                if signal:
                    open(signal + ".done", "w").close()
                print(f"ok {result.base_offset} {result.count}", flush=True)
            elif words[0] == "loop":
                until, tag, batches = time.monotonic() + float(words[1]), words[2], 0
                while time.monotonic() < until:
                    raw = [(0, {"key": f"{tag}-{batches}", "value": tag, "timestamp": 0, "partition": 0})]
                    produce(topic, parse_records(raw, topic.spec, "producer"), 0)
                    batches += 1
                print(f"ok {batches}", flush=True)
        except Exception as error:  # noqa: BLE001 - reported to the test, which fails on it
            print(f"error {type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
