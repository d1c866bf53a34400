"""The named fault points: hooks run where the engine commits, and TOPICLAKE_FAULTS kills there."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from framework import faults

REPO = Path(__file__).resolve().parents[1]


def test_a_hook_runs_at_its_point_with_the_context_and_only_inside_the_block():
    calls = []
    with faults.installed("compact.before_commit", lambda point, context: calls.append((point, context))):
        faults.reached("compact.before_commit", partition=3)
        faults.reached("compact.after_commit", partition=3)  # another point: not this hook's
    faults.reached("compact.before_commit", partition=4)  # after the block: removed
    assert calls == [("compact.before_commit", {"partition": 3})]


def test_an_unknown_point_is_refused_so_a_typo_cannot_make_a_test_vacuous():
    with pytest.raises(ValueError, match="unknown fault point 'compact.before_comit'"):
        with faults.installed("compact.before_comit", lambda point, context: None):
            pass
    with pytest.raises(ValueError):
        faults.reached("nowhere")


def test_without_hooks_a_dml_source_is_left_alone(spark):
    frame = spark.range(3)
    assert faults.inside("compact.during_commit", frame) is frame


@pytest.mark.slow
def test_the_environment_switch_kills_the_process_at_the_point(tmp_path):
    """The crash tests' switch: SIGKILL just before a producer's commit leaves nothing written."""
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "t.yaml").write_text("topic: t\npartitions: 1\nconfig: {cleanup.policy: delete}\n")
    records = tmp_path / "in.jsonl"
    records.write_text('{"key": "a", "value": "1", "timestamp": 0}\n')
    warehouse = tmp_path / "warehouse"
    command = [sys.executable, "-m", "framework.cli", "--warehouse", str(warehouse), "--specs", str(specs),
               "produce", "--topic", "t", "--input", str(records)]
    environment = dict(os.environ, **{faults.ENVIRONMENT: "produce.before_commit"})
    done = subprocess.run(command, cwd=REPO, env=environment, capture_output=True, text=True, timeout=240)
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
    log = warehouse / "t-0" / "_delta_log"
    # the append's commit would have created the table (version 0): no commit was written
    assert not log.exists() or sorted(p.name for p in log.glob("*.json")) == []
