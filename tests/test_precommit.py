"""The pre-commit hook (``.pre-commit-hooks.yaml``) as a user's repository runs it: the real
``pre-commit`` installs topiclake's core from this repository into its own environment and
blocks a commit whose spec lint refuses. Needs PyPI (or pip's cache) for PyYAML and pydantic."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow

GOOD = """\
topic: orders
partitions: 3
config:
  cleanup.policy: compact
"""
BAD = """\
topic: orders
partitions: 3
config:
  cleanup.policy: compact
  max.compaction.lag.ms: 0
"""


def _git(folder: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=folder, capture_output=True, text=True, timeout=300)


@pytest.fixture
def user_repo(tmp_path):
    head = _git(REPO, "rev-parse", "HEAD").stdout.strip()
    if _git(REPO, "status", "--porcelain", "--", ".pre-commit-hooks.yaml", "setup.cfg", "framework").stdout:
        pytest.fail("commit the hook and the package first: pre-commit installs the committed revision")
    folder = tmp_path / "specs-repo"
    folder.mkdir()
    for args in (("init", "-q"), ("config", "user.email", "t@example.com"), ("config", "user.name", "t"),
                 ("config", "commit.gpgsign", "false")):
        assert _git(folder, *args).returncode == 0
    (folder / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {REPO}\n    rev: {head}\n    hooks:\n      - id: topiclake-lint\n")
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.pop("VIRTUAL_ENV", None)
    installed = subprocess.run([sys.executable, "-m", "pre_commit", "install"], cwd=folder, env=env,
                               capture_output=True, text=True, timeout=120)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    return folder, env


def _commit(folder: Path, env: dict, spec: str) -> subprocess.CompletedProcess:
    (folder / "table_specs").mkdir(exist_ok=True)
    (folder / "table_specs" / "orders.yaml").write_text(spec)
    _git(folder, "add", "-A")
    path = os.pathsep.join([str(Path(sys.executable).parent), env["PATH"]])  # `pre-commit` for the git hook
    return subprocess.run(["git", "commit", "-q", "-m", "spec"], cwd=folder, env={**env, "PATH": path},
                          capture_output=True, text=True, timeout=900)


def test_the_hook_blocks_a_bad_spec_and_passes_a_good_one(user_repo):
    folder, env = user_repo
    blocked = _commit(folder, env, BAD)
    said = blocked.stdout + blocked.stderr
    assert blocked.returncode != 0, said
    assert "topiclake lint (topic specs)" in said and "Failed" in said
    assert "table_specs/orders.yaml:5:" in said and "max.compaction.lag.ms" in said
    assert _git(folder, "rev-list", "--all").stdout == ""  # nothing was committed

    passed = _commit(folder, env, GOOD)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert len(_git(folder, "rev-list", "--all").stdout.split()) == 1
    # the hook's environment holds topiclake's core only: no Spark came with it
    envs = list((Path(env["PRE_COMMIT_HOME"])).glob("repo*/py_env-*"))
    assert envs and not list(envs[0].glob("lib/python*/site-packages/pyspark"))
    # and a verb that needs Spark says which extra to install, in one line
    status = subprocess.run([str(envs[0] / "bin" / "topiclake"), "status", "--specs", str(folder / "table_specs")],
                            cwd=folder, capture_output=True, text=True, timeout=120)
    assert status.returncode == 1
    assert status.stderr.strip().splitlines() == [
        "topiclake: this command needs pyspark, delta, great_expectations, which topiclake's core install leaves out: "
        "pip install 'topiclake[spark]' (or 'topiclake[engine]' where the cluster brings Spark and Delta)"]
