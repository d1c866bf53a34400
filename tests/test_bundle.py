"""``databricks.yml``, the Databricks Asset Bundle, checked without a workspace: its job with
Databricks' own typed bundle models (``databricks-bundles`` from PyPI, which refuse an
unknown field or value), and every task's parameters with topiclake's own parser."""

from __future__ import annotations

import configparser
import re
from pathlib import Path

import pytest
import yaml
from databricks.bundles.jobs import Job

from framework.cli.main import build_parser

REPO = Path(__file__).resolve().parent.parent
BUNDLE = yaml.safe_load((REPO / "databricks.yml").read_text())
JOB = BUNDLE["resources"]["jobs"]["topiclake_maintenance"]


def _resolved(text: str) -> str:
    """``${var.x}`` as its default (what a deploy without overrides substitutes)."""
    def default(match: re.Match) -> str:
        return str(BUNDLE["variables"][match.group(1)]["default"])

    text = re.sub(r"\$\{var\.([a-z_]+)\}", default, text)
    return text.replace("${workspace.file_path}", "/Workspace/topiclake/files")


def test_the_job_is_what_databricks_bundle_models_accept():
    job = Job.from_dict(JOB)
    assert [t.task_key for t in job.tasks] == ["ingest", "maintain", "report"]
    assert job.max_concurrent_runs == 1 and job.as_dict()["schedule"]["quartz_cron_expression"] == "${var.schedule}"
    with pytest.raises(ValueError, match="Unexpected field"):
        Job.from_dict({**JOB, "tasks": [{**JOB["tasks"][0], "python_wheel_tsk": {}}]})


def test_ingest_then_maintain_then_report():
    after = {t["task_key"]: [d["task_key"] for d in t.get("depends_on", [])] for t in JOB["tasks"]}
    assert after == {"ingest": [], "maintain": ["ingest"], "report": ["maintain"]}
    assert next(t for t in JOB["tasks"] if t["task_key"] == "report")["run_if"] == "ALL_DONE"


@pytest.mark.parametrize("task", JOB["tasks"], ids=lambda t: t["task_key"])
def test_every_task_is_the_topiclake_command_from_the_wheel(task):
    setup = configparser.ConfigParser()
    setup.read(REPO / "setup.cfg")
    scripts = dict(line.split(" = ") for line in setup["options.entry_points"]["console_scripts"].strip().splitlines())
    wheel_task = task["python_wheel_task"]
    assert wheel_task["package_name"] == setup["metadata"]["name"]
    assert wheel_task["entry_point"] in scripts
    assert {"whl": "./dist/*.whl"} in task["libraries"]
    arguments = [_resolved(p) for p in wheel_task["parameters"]]
    parsed = build_parser().parse_args(arguments)  # an unknown option would raise ArgumentError
    assert parsed.verb == task["task_key"]
    assert parsed.warehouse == "/Volumes/main/topiclake/warehouse"
    assert parsed.specs == ["/Workspace/topiclake/files/table_specs"]


def test_every_variable_used_is_defined_and_the_wheel_is_built_with_build():
    used = set(re.findall(r"\$\{var\.([a-z_]+)\}", (REPO / "databricks.yml").read_text()))
    assert used == set(BUNDLE["variables"])
    assert BUNDLE["artifacts"]["topiclake"] == {"type": "whl", "build": "python -m build --wheel", "path": "."}
    assert set(BUNDLE["targets"]) == {"dev", "prod"}
