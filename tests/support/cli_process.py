"""A ``topiclake`` command run in a new process, told whether it started a JVM."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

#: A ``topiclake`` command in a new process, which then prints its exit status and whether
#: no JVM started (pyspark's gateway is made only by a session's start).
_JVM_TOLD = ("import sys; from framework.cli.main import main; status = main(sys.argv[1:]); "
             "from pyspark import SparkContext; print(status, SparkContext._gateway is None)")


def in_a_new_cli_process(*command: str, timeout: int = 120, statuses: tuple[str, ...] = ("0",)) -> tuple[str, bool]:
    """What ``topiclake command`` printed in a new process, which must exit with one of
    ``statuses``, and whether it started a JVM."""
    done = subprocess.run([sys.executable, "-c", _JVM_TOLD, *command], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout)
    *printed, last = done.stdout.strip().splitlines() or [""]
    status, _, no_jvm = last.partition(" ")
    assert status in statuses and no_jvm in ("True", "False"), done.stdout + done.stderr[-2000:]
    return "\n".join(printed), no_jvm == "False"


def printed_with_no_jvm(*command: str, timeout: int = 120) -> str:
    """What ``topiclake command`` printed in a new process, which must exit 0 with no JVM started."""
    printed, jvm_started = in_a_new_cli_process(*command, timeout=timeout)
    assert not jvm_started, f"a JVM started: {printed[-2000:]}"
    return printed
