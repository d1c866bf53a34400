"""The wheel ``python -m build`` makes, installed in a clean virtual environment: its core
runs ``topiclake lint`` and ``schema`` with only PyYAML and pydantic installed, and with the
engine's libraries added it runs a maintenance run and writes the report (the templates and
the schema ship inside it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow

SPEC = """\
topic: events
partitions: 1
config:
  cleanup.policy: compact
"""


def _run(*command, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in command], capture_output=True, text=True, timeout=600, **kwargs)


def test_the_wheel_is_pure_python_and_carries_its_data(built_wheel):
    assert built_wheel.name == "topiclake-0.1.0-py3-none-any.whl"
    names = set(zipfile.ZipFile(built_wheel).namelist())
    assert {"framework/spec/topic-spec.schema.json", "framework/report/templates/partition.html",
            "framework/report/templates/report.css", "framework/cli/__main__.py",
            "framework/java/topiclake/hadoop/NioRawLocalFileSystem.java",
            "framework/java/topiclake/hadoop/NioRawLocalFs.java"} <= names
    assert not any(name.startswith(("tests/", "jobs/")) for name in names)


def test_installed_in_a_clean_venv_it_lints_then_maintains(built_wheel, tmp_path):
    venv = tmp_path / "venv"
    assert _run(sys.executable, "-m", "venv", venv).returncode == 0
    python, topiclake = venv / "bin" / "python", venv / "bin" / "topiclake"
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.pop("PYTHONPATH", None)
    installed = _run(python, "-m", "pip", "install", "-q", "-c", REPO / "constraints.txt", built_wheel, env=env)
    assert installed.returncode == 0, installed.stderr[-3000:]
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "events.yaml").write_text(SPEC)

    # the core alone: no Spark in this environment
    assert _run(python, "-c", "import importlib.util as u; assert u.find_spec('pyspark') is None", env=env,
                cwd=tmp_path).returncode == 0
    lint = _run(topiclake, "lint", specs, env=env, cwd=tmp_path)
    assert lint.returncode == 0 and "ok   " in lint.stdout, lint.stdout + lint.stderr
    schema = json.loads(_run(topiclake, "schema", env=env, cwd=tmp_path).stdout)
    shipped = json.loads((REPO / "framework" / "spec" / "topic-spec.schema.json").read_text())
    assert schema["$defs"]["TopicConfig"] == shipped["$defs"]["TopicConfig"]
    # without great_expectations the expectation type is a pattern, not its registry's names
    assert "enum" not in schema["$defs"]["ExpectationSpec"]["properties"]["type"]

    # the engine: its libraries come from the project's environment through a .pth file
    # (installing pyspark and Great Expectations again would take minutes); topiclake itself
    # is still the wheel's copy, which comes first on the path.
    site = Path(_run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])",
                     env=env).stdout.strip())
    (site / "zz-engine-from-project-venv.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    where = _run(python, "-c", "import framework; print(framework.__file__)", env=env, cwd=tmp_path)
    assert where.stdout.strip().startswith(str(site)), where.stdout + where.stderr
    warehouse = tmp_path / "warehouse"
    maintained = _run(topiclake, "maintain", "--warehouse", warehouse, "--specs", specs, "--with-sample-data",
                      "--sample-records", "40", "--now", "2026-01-01T00:00:00Z", env=env, cwd=tmp_path)
    assert maintained.returncode == 0, maintained.stdout[-2000:] + maintained.stderr[-3000:]
    assert "events-0: ok" in maintained.stdout
    page = warehouse / "_topiclake" / "report" / "partitions" / "events-0.html"
    assert page.exists() and "<svg" in page.read_text()
