"""Bad input through the plain command line: one clear line, exit 2, nothing written.

Every case runs ``topiclake`` (in-process, ``framework.cli.main.main``) against one warehouse
that already holds data, and must

* exit with status 2 and print nothing on standard output,
* print no traceback, and exactly one line, ``topiclake: ...``, on standard error,
* name what was wrong: the file and line (for files), and the field or argument,
* leave the warehouse exactly as it was: the same files, byte for byte in size and name
  (so no table version, record, history row or report moved).

The cases cover records (JSON lines), specs, arguments and scenario files.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from framework.cli.main import main

USERS = """\
topic: users
partitions: 2
config:
  cleanup.policy: compact
  min.cleanable.dirty.ratio: 0.0
  time.travel.retention.ms: 3600000
"""
EVENTS = """\
topic: events
partitions: 1
config:
  cleanup.policy: delete
  retention.ms: -1
"""
GOOD = {"key": "a", "value": "1", "timestamp": 0}


def _bomb(levels: int) -> str:
    """YAML for a list nesting ``levels`` deep, each level nine aliases of the one inside."""
    text = "[x, x, x, x, x, x, x, x, x]"
    for level in range(levels):
        text = f"[&l{level} {text}" + f", *l{level}" * 8 + "]"
    return text


def _line(record) -> str:
    return record if isinstance(record, str) else json.dumps(record)


#: name -> (lines of a JSON-lines file produced into --topic users, what the message names)
RECORDS = {
    "malformed JSON": (['{"key": "a", "value": '], [":1:"]),
    "a line that is a list": (["[1, 2]"], [":1:"]),
    "null key on a compacted topic": ([{"key": None, "value": "1", "timestamp": 0}], [":1:", "key"]),
    "timestamp that is a word": ([{"key": "a", "value": "1", "timestamp": "yesterday"}], [":1:", "timestamp"]),
    "negative timestamp": ([{"key": "a", "value": "1", "timestamp": -5}], [":1:", "timestamp"]),
    "partition out of range": ([{"key": "a", "value": "1", "timestamp": 0, "partition": 2}], [":1:", "partition"]),
    "negative partition": ([{"key": "a", "value": "1", "timestamp": 0, "partition": -1}], [":1:", "partition"]),
    "partition as text": ([{"key": "a", "value": "1", "timestamp": 0, "partition": "zero"}], [":1:", "partition"]),
    "header value an object": ([{**GOOD, "headers": [["h", {"x": 1}]]}], [":1:", "headers"]),
    "headers a string": ([{**GOOD, "headers": "h=x"}], [":1:", "headers"]),
    "header without a name": ([{**GOOD, "headers": [[None, "x"]]}], [":1:", "headers"]),
    "header of three parts": ([{**GOOD, "headers": [["h", "x", "y"]]}], [":1:", "headers"]),
    "unknown field": ([{**GOOD, "vaule": "1"}], [":1:", "vaule"]),
    "key an object": ([{"key": {"a": 1}, "value": "1", "timestamp": 0}], [":1:", "key"]),
    "value a list": ([{"key": "a", "value": [1], "timestamp": 0}], [":1:", "value"]),
    "a key with a lone surrogate": (['{"key": "a\\ud800", "value": "1", "timestamp": 0}'], [":1:", "key", "surrogate"]),
    "a header name with a lone surrogate": (['{"key": "a", "value": "1", "timestamp": 0, "headers": [["\\udfff", "x"]]}'],
                                            [":1:", "headers", "surrogate"]),
    "one bad line at the end": ([GOOD] * 20 + [{"key": "a", "value": "1", "timestamp": "noon"}], [":21:", "timestamp"]),
}

#: name -> (arguments after --warehouse/--specs, what the message names)
ARGUMENTS = {
    "unknown topic": (["produce", "--topic", "nope", "--input", "{good}"], ["--topic", "nope"]),
    "produce --partition out of range": (["produce", "--topic", "users", "--partition", "7", "--input", "{good}"],
                                         ["partition", "7"]),
    "produce --input missing": (["produce", "--topic", "users", "--input", "{missing}"], ["missing.jsonl"]),
    "--now a word": (["maintain", "--now", "soon"], ["--now"]),
    "read --partition out of range": (["read", "--topic", "users", "--partition", "5"], ["partition", "5"]),
    "read a negative --from-offset": (["read", "--topic", "users", "--partition", "0", "--from-offset", "-3"],
                                      ["--from-offset"]),
    "read a version that does not exist": (["read", "--topic", "users", "--partition", "0", "--version", "999"],
                                           ["999"]),
    "commit-offset a negative offset": (["commit-offset", "--group", "g", "--topic", "users", "--partition", "0",
                                         "--offset", "-1"], ["offset"]),
    "commit-offset partition out of range": (["commit-offset", "--group", "g", "--topic", "users", "--partition",
                                              "9", "--offset", "1"], ["partition", "9"]),
    "delete-records on a compact-only topic": (["delete-records", "--topic", "users", "--partition", "0",
                                                "--before-offset", "1"], ["POLICY_VIOLATION"]),
    "delete-records past the log end": (["delete-records", "--topic", "events", "--partition", "0",
                                         "--before-offset", "99"], ["OFFSET_OUT_OF_RANGE"]),
    "delete-records a negative offset": (["delete-records", "--topic", "events", "--partition", "0",
                                          "--before-offset", "-2"], ["offset"]),
    "maintain --retention-ms shorter than the window": (["maintain", "--retention-ms", "0"], ["retention"]),
    "vacuum --retention-ms negative": (["vacuum", "--retention-ms", "-1", "--unsafe-shorter-time-travel"],
                                       ["retention"]),
    "maintain an unknown topic": (["maintain", "--topic", "nope"], ["--topic", "nope"]),
    "maintain --partition out of range": (["maintain", "--topic", "users", "--partition", "9"], ["--partition"]),
    "maintain --partition without --topic past every topic": (["maintain", "--partition", "1"], ["--partition"]),
    "validate --from-version after --to-version": (["validate", "--topic", "users", "--partition", "0",
                                                    "--from-version", "3", "--to-version", "1"], ["version"]),
    "status an unknown topic": (["status", "--topic", "nope"], ["nope"]),
    "no verb": ([], ["VERB"]),
    "unknown verb": (["compress"], ["compress"]),
    "produce without --input": (["produce", "--topic", "users"], ["--input"]),
    "--partition a word": (["read", "--topic", "users", "--partition", "first"], ["--partition"]),
}

#: name -> (a spec file's text, what the message names); each is given to `maintain --specs`
SPECS = {
    "a python object tag": ("topic: x\npartitions: !!python/object:os.system 1\nconfig: {}\n", [":2:"]),
    # nine levels of nine aliases: 9**9 strings if anything expanded it
    "an anchor bomb": ("topic: x\npartitions: 1\nconfig:\n  consumed.retention.groups: "
                       + _bomb(9) + "\n", [":4:", "consumed.retention.groups"]),
    "zero partitions": ("topic: x\npartitions: 0\nconfig: {}\n", [":2:", "partitions"]),
    "a misspelt config": ("topic: x\npartitions: 1\nconfig:\n  cleanup.polcy: compact\n", [":4:", "cleanup.polcy",
                                                                                          "cleanup.policy"]),
    "a topic name that climbs out": ("topic: ../x\npartitions: 1\nconfig: {}\n", [":1:", "topic"]),
    "an unknown cleanup policy": ("topic: x\npartitions: 1\nconfig:\n  cleanup.policy: shred\n", [":4:",
                                                                                              "cleanup.policy"]),
    "min lag above max lag": ("topic: x\npartitions: 1\nconfig:\n  min.compaction.lag.ms: 60000\n"
                              "  max.compaction.lag.ms: 1000\n", ["max.compaction.lag.ms"]),
    "a duplicated key": ("topic: x\ntopic: y\npartitions: 1\n", [":2:", "topic"]),
    "not a mapping": ("- topic: x\n", [":1:"]),
    "a negative retention": ("topic: x\npartitions: 1\nconfig:\n  retention.ms: -7\n", [":4:", "retention.ms"]),
    "a source without brokers": ("topic: x\npartitions: 1\nsource:\n  kafka:\n    topic: x\n",
                                 [":5:", "source.kafka.bootstrap.servers", "is required"]),
    "a secret in clear": ("topic: x\npartitions: 1\nsource:\n  kafka:\n    bootstrap.servers: b:9092\n    options:\n"
                          "      kafka.sasl.jaas.config: hunter2\n", [":7:", "kafka.sasl.jaas.config", "${ENV_VAR}"]),
    "an option ingest sets": ("topic: x\npartitions: 1\nsource:\n  kafka:\n    bootstrap.servers: b:9092\n"
                              "    options: {startingOffsets: earliest}\n", [":6:", "startingOffsets", "set by ingest"]),
    "a misspelt source": ("topic: x\npartitions: 1\nsource:\n  kafak: {}\n", [":4:", "source.kafak", "kafka"]),
    "a broken env reference": ("topic: x\npartitions: 1\nsource:\n  kafka:\n    bootstrap.servers: ${BROKERS\n",
                               [":5:", "bootstrap.servers", "${NAME}"]),
}

#: name -> (a scenario file's text, what the message names); each is given to `simulate`
SCENARIOS = {
    "an unknown step": ("spec: {topic: s, partitions: 1}\nsteps:\n  - maintian: {}\n", [":3:", "maintian",
                                                                                      "maintain"]),
    "steps not a list": ("spec: {topic: s, partitions: 1}\nsteps: 5\n", [":2:", "steps"]),
    "now a word": ("spec: {topic: s, partitions: 1}\nsteps:\n  - maintain: {now: later}\n", [":3:", "now"]),
    "malformed YAML": ("spec: {topic: s\nsteps: []\n", ["s.yaml"]),
}


def _tree(root: str) -> dict[str, int]:
    """Every file under ``root`` with its size: what 'nothing written' compares."""
    found = {}
    for folder, _, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            found[os.path.relpath(path, root)] = os.path.getsize(path)
    return found


@pytest.fixture(scope="module")
def setting(spark, tmp_path_factory):
    """A warehouse holding both topics' data, maintained once; and the files the cases use."""
    root = tmp_path_factory.mktemp("bad-input")
    specs = root / "specs"
    specs.mkdir()
    (specs / "users.yaml").write_text(USERS)
    (specs / "events.yaml").write_text(EVENTS)
    good = root / "good.jsonl"
    good.write_text("".join(json.dumps({"key": f"k{i}", "value": str(i), "timestamp": 0}) + "\n" for i in range(6)))
    common = ["--warehouse", str(root / "warehouse"), "--specs", str(specs)]
    for topic in ("users", "events"):
        assert main([*common, "produce", "--topic", topic, "--input", str(good), "--now", "0"]) == 0
    assert main([*common, "maintain", "--now", "1000"]) == 0
    return {"root": root, "common": common, "good": str(good), "warehouse": str(root / "warehouse")}


def _refused(capsys, setting, args: list[str], names: list[str]) -> None:
    capsys.readouterr()
    before = _tree(setting["warehouse"])
    code = main(args)
    out, err = capsys.readouterr()
    assert code == 2, f"exit {code}, expected 2; stderr: {err}"
    assert out == ""
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("topiclake: "), f"not one line: {err!r}"
    for name in names:
        assert name in lines[0], f"{name!r} not named in: {lines[0]}"
    assert _tree(setting["warehouse"]) == before, "the warehouse changed"


@pytest.mark.parametrize("name", sorted(RECORDS))
def test_bad_records(capsys, setting, name):
    lines, names = RECORDS[name]
    source = setting["root"] / f"records-{sorted(RECORDS).index(name)}.jsonl"
    source.write_text("".join(_line(r) + "\n" for r in lines))
    _refused(capsys, setting, [*setting["common"], "produce", "--topic", "users", "--input", str(source)],
             [str(source), *names])


@pytest.mark.parametrize("name", sorted(ARGUMENTS))
def test_bad_arguments(capsys, setting, name):
    args, names = ARGUMENTS[name]
    args = [a.format(good=setting["good"], missing=str(setting["root"] / "missing.jsonl")) for a in args]
    _refused(capsys, setting, [*setting["common"], *args], names)


def _written(setting, kind: str, cases: dict, name: str, file_name: str) -> Path:
    """Case ``name``'s text, written as ``file_name`` in a folder of its own."""
    folder = setting["root"] / f"{kind}-{sorted(cases).index(name)}"
    folder.mkdir(exist_ok=True)
    path = folder / file_name
    path.write_text(cases[name][0])
    return path


@pytest.mark.parametrize("name", sorted(SPECS))
def test_bad_specs(capsys, setting, name):
    spec = _written(setting, "spec", SPECS, name, "x.yaml")
    _refused(capsys, setting, ["--warehouse", setting["warehouse"], "--specs", str(spec.parent), "maintain"],
             [str(spec), *SPECS[name][1]])


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_bad_scenarios(capsys, setting, name):
    scenario = _written(setting, "scenario", SCENARIOS, name, "s.yaml")
    _refused(capsys, setting, ["--warehouse", setting["warehouse"], "simulate", str(scenario)],
             [str(scenario), *SCENARIOS[name][1]])


def test_there_are_at_least_forty_cases():
    assert len(RECORDS) + len(ARGUMENTS) + len(SPECS) + len(SCENARIOS) >= 40
