"""Great Expectations imported in the background while a command's session starts
(framework/checks/gx_import.py): once, and waited for before any use."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from framework.cli.context import GX_VERBS
from framework.cli.main import build_parser, main

REPO = Path(__file__).resolve().parent.parent

IN_A_NEW_INTERPRETER = """
import sys
from framework.checks import gx_import
assert "great_expectations" not in sys.modules
assert gx_import.import_in_background() is True
assert gx_import.import_in_background() is False  # one import, however often asked
from framework.checks import gx_suites
expectations = gx_suites.guarantee_expectations()  # waits for the import, then uses it
assert "great_expectations.expectations" in sys.modules and len(expectations) == 9, expectations
assert gx_import.import_in_background() is False
"""


def test_the_import_runs_once_in_the_background_and_is_waited_for():
    done = subprocess.run([sys.executable, "-c", IN_A_NEW_INTERPRETER], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]


def test_the_verbs_that_start_it_are_verbs():
    verbs = set(build_parser()._subparsers._group_actions[0].choices)
    assert GX_VERBS <= verbs, GX_VERBS - verbs


SPEC = ("topic: users\npartitions: 1\nconfig: {cleanup.policy: [compact, delete], retention.ms: -1, "
        "min.cleanable.dirty.ratio: 0.0}\n")


def test_a_verb_starts_the_import_with_its_session_exactly_when_it_uses_great_expectations(spark, tmp_path,
                                                                                        monkeypatch, capsys):
    """Each verb as the command line runs it, on one topic: the verbs outside ``GX_VERBS``
    run without waiting for Great Expectations (every use of it waits first:
    ``gx_import.imported``), and the verbs in it start the import as their session starts
    (``report``, and the maintenance verbs with nothing due, start none here); those that
    judged a check here (or wrote the report) used it."""
    from framework.checks import gx_import

    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "users.yaml").write_text(SPEC)
    records = tmp_path / "records.jsonl"
    records.write_text("".join(f'{{"key": "k{i % 3}", "value": "{i}", "timestamp": {i}}}\n' for i in range(6)))
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text("spec: {topic: s, partitions: 1,\n"
                        "       config: {cleanup.policy: compact, min.cleanable.dirty.ratio: 0.0}}\n"
                        "steps:\n"
                        "  - produce: [{key: a, value: '1', timestamp: 0}, {key: a, value: '2', timestamp: 0}]\n"
                        "  - maintain: {now: 10}\n"
                        "  - expect: {offsets: [1]}\n")
    common = ["--warehouse", str(tmp_path / "warehouse"), "--specs", str(specs)]
    topic = ["--topic", "users"]
    runs = [  # every verb that needs neither Kafka nor a file of Kafka's configs
        ("lint", [str(specs)]), ("schema", []), ("create", topic), ("produce", [*topic, "--input", str(records)]),
        ("read", [*topic, "--partition", "0"]), ("commit-offset", ["--group", "g", *topic, "--partition", "0",
                                                                   "--offset", "1"]),
        ("plan", [*topic, "--now", "100"]), ("status", topic), ("compact", [*topic, "--now", "100"]),
        ("retain", [*topic, "--now", "100"]), ("optimize", [*topic, "--now", "100"]),
        ("vacuum", [*topic, "--now", "100"]), ("maintain", [*topic, "--now", "200", "--no-report"]),
        ("validate", [*topic, "--now", "300"]),
        ("delete-records", [*topic, "--partition", "0", "--before-offset", "1"]),
        ("report", []), ("simulate", [str(scenario)]),
    ]
    untried = set(build_parser()._subparsers._group_actions[0].choices) - {verb for verb, _ in runs}
    assert untried == {"ingest", "import-kafka-config"}, untried
    started, waited = [], []
    monkeypatch.setattr(gx_import, "import_in_background", lambda: started.append(verb) or False)
    shipped = gx_import.imported
    monkeypatch.setattr(gx_import, "imported", lambda: waited.append(verb) or shipped())
    for verb, args in runs:
        code = main([verb, *common, *args]) if verb not in ("lint", "schema", "simulate") else main([verb, *args])
        out = capsys.readouterr()
        assert code == 0, (verb, out.out[-2000:], out.err[-2000:])
    # a report of a local warehouse starts no session (framework/report/data.py), so nothing
    # to overlap: it imports Great Expectations as it builds the Data Docs; and a maintenance
    # verb with nothing due on a local warehouse starts no session either (retain, optimize,
    # vacuum and maintain here: framework/deferred_session.py), nor the import; nor does a
    # validate of small local partitions (counted by Arrow: framework/checks/arrow_whole.py)
    assert set(started) == {"compact", "simulate"}, set(started)
    assert set(started) <= GX_VERBS
    assert set(waited) <= GX_VERBS, set(waited) - GX_VERBS
    # (the others judged nothing here: nothing was due by then)
    assert {"compact", "validate", "report", "simulate"} <= set(waited), waited
