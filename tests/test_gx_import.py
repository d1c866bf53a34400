"""Great Expectations imported in the background while a command's session starts
(framework/checks/gx_import.py): once, and waited for before any use."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from framework.cli.context import GX_VERBS
from framework.cli.main import build_parser

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
    assert not GX_VERBS & {"lint", "schema", "produce", "create", "read", "commit-offset", "ingest"}
