"""The acceptance scenarios again, through the plain verbs a user types instead of `simulate`.

Each step becomes a command line, run in-process on the test session: the spec is written
to a specs folder, ``produce`` reads a JSON-lines file, ``maintain --now`` runs the whole
maintenance (validation and report included), and ``expect`` is checked with ``read`` and
``status --json``. The translation is independent of framework/cli/simulate.py, so the two
paths check each other.

Every scenario without a ``maintain`` step runs here (the foundation's: bad records, bad
specs, partitioning), and the first scenario of each cleanup policy that has one; the
rest differ from those only in what maintenance decides, which simulate covers.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
from pathlib import Path

import pytest
import yaml

from framework.cli.main import main
from tests.support.acceptance_files import acceptance_files


def _jsonable(value):
    if isinstance(value, bytes):
        return {"base64": base64.b64encode(value).decode("ascii")}
    if isinstance(value, (dt.datetime, dt.date)):
        return value.isoformat()
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    return value


class Verbs:
    def __init__(self, tmp_path: Path, capsys, spec: dict):
        self.tmp_path = tmp_path
        self.capsys = capsys
        self.topic = spec["topic"]
        self.warehouse = tmp_path / "warehouse"
        self.specs = tmp_path / "specs"
        self.specs.mkdir()
        (self.specs / f"{self.topic}.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
        self.now = 0
        self.inputs = 0

    def __call__(self, *args: str) -> tuple[int, str, str]:
        code = main(["--warehouse", str(self.warehouse), "--specs", str(self.specs), *args])
        captured = self.capsys.readouterr()
        return code, captured.out, captured.err

    def status(self) -> dict:
        code, out, err = self("--json", "status", "--topic", self.topic, "--now", str(self.now))
        assert code == 0, err
        return {row["partition"]: row for row in json.loads(out)}

    def end_offsets(self) -> dict:
        return {name: row["log_end_offset"] for name, row in self.status().items()}

    def offsets(self, partition: int) -> list[int]:
        code, out, err = self("read", "--topic", self.topic, "--partition", str(partition))
        assert code == 0, err
        return [json.loads(line)["offset"] for line in out.splitlines()]

    # ------------------------------------------------------------------ steps
    def produce(self, body) -> None:
        if isinstance(body, list):
            body = {"records": body}
        self.now = body.get("now", self.now)
        self.inputs += 1
        source = self.tmp_path / f"input-{self.inputs}.jsonl"
        source.write_text("".join(json.dumps(_jsonable(r)) + "\n" for r in body["records"]))
        before = self.end_offsets()
        code, out, err = self("produce", "--topic", self.topic, "--input", str(source), "--now", str(self.now))
        if body.get("expect_error"):
            assert code == 2, f"the batch was accepted: {out}"
            assert len(err.strip().splitlines()) >= 1 and "Traceback" not in err
            assert self.end_offsets() == before, "a refused batch wrote something"
        else:
            assert code == 0, err

    def commit_offset(self, body) -> None:
        code, _, err = self("commit-offset", "--group", body["group"], "--topic", self.topic,
                            "--partition", str(body["partition"]), "--offset", str(body["offset"]))
        assert code == 0, err

    def maintain(self, body) -> None:
        body = body or {}
        self.now = body.get("now", self.now)
        code, out, err = self("maintain", "--topic", self.topic, "--now", str(self.now),
                              *(["--force"] if body.get("force") else []))
        assert code == 0, err + out

    def delete_records(self, body) -> None:
        code, _, err = self("delete-records", "--topic", self.topic, "--partition", str(body["partition"]),
                            "--before-offset", str(body["before_offset"]))
        if body.get("expect_error"):
            assert code == 2 and "Traceback" not in err, err
        else:
            assert code == 0, err

    def expect(self, body) -> None:
        offsets = body.get("offsets")
        if offsets is not None:
            wanted = offsets if isinstance(offsets, dict) else {0: offsets}
            for partition, expected in wanted.items():
                assert self.offsets(int(partition)) == expected, f"partition {partition}"
        ends = body.get("end_offset")
        if ends is not None:
            wanted = ends if isinstance(ends, dict) else {0: ends}
            actual = self.end_offsets()
            for partition, expected in wanted.items():
                assert actual[f"{self.topic}-{partition}"] == expected, f"partition {partition} end offset"


def _through_the_verbs() -> list[Path]:
    chosen, policies = [], set()
    for path in acceptance_files():
        scenario = yaml.safe_load(path.read_text()) or {}
        kinds = {kind for step in scenario.get("steps") or [] if isinstance(step, dict) for kind in step}
        policy = str(((scenario.get("spec") or {}).get("config") or {}).get("cleanup.policy", "delete"))
        if "maintain" not in kinds or policy not in policies:
            chosen.append(path)
            if "maintain" in kinds:
                policies.add(policy)
    return chosen


@pytest.mark.slow
@pytest.mark.parametrize("path", _through_the_verbs(), ids=lambda p: p.name)
def test_acceptance_scenario_through_the_verbs(spark, path, tmp_path, capsys):
    scenario = yaml.safe_load(path.read_text())
    verbs = Verbs(tmp_path, capsys, scenario["spec"])
    if scenario.get("expect_spec_error"):
        for args in (("lint", str(verbs.specs)), ("create",)):
            code, out, err = verbs(*args)
            assert code == 2, out
            # lint's findings are its output; other verbs say it on stderr
            assert str(verbs.specs / f"{verbs.topic}.yaml") in out + err and "Traceback" not in err
        assert not os.path.exists(verbs.warehouse), "a refused spec wrote something"
        return
    code, _, err = verbs("create")
    assert code == 0, err
    for number, step in enumerate(scenario.get("steps") or [], start=1):
        [(kind, body)] = step.items()
        try:
            getattr(verbs, kind)(body)
        except AssertionError as failure:
            raise AssertionError(f"{path.name} step {number} ({kind}): {failure}") from None
