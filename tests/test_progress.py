"""Progress on stderr: a bar on a terminal, plain lines when not, nothing with --json."""

from __future__ import annotations

import io
import os
import pty
import select
import subprocess
import sys
from pathlib import Path

import pytest

from framework.cli.progress import Progress

REPO = Path(__file__).resolve().parent.parent


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_gets_a_bar_and_the_lines_above_it():
    screen = Terminal()
    progress = Progress(screen)
    for done, name in enumerate(["orders-0", "orders-1"]):
        progress.step(done, 2, name)
        progress.line(f"[{done + 1}/2] {name}")
    progress.step(2, 2, "done")
    text = screen.getvalue()
    assert "[1/2] orders-0" in text and "[2/2] orders-1" in text
    assert "━" in text and "2/2" in text  # rich's bar, its count
    assert "\x1b[" in text  # drawn in place with terminal escapes


def test_a_pipe_gets_plain_lines_only():
    piped = io.StringIO()
    progress = Progress(piped)
    progress.step(0, 2, "orders-0")
    progress.line("[1/2] orders-0")
    progress.step(2, 2, "done")
    assert piped.getvalue() == "[1/2] orders-0\n"


def test_json_prints_no_progress_at_all():
    screen = Terminal()
    progress = Progress(screen, quiet=True)
    progress.step(0, 1, "x")
    progress.line("[1/1] x")
    assert screen.getvalue() == ""


@pytest.mark.slow
def test_maintain_on_a_terminal_draws_the_bar(tmp_path):
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "events.yaml").write_text("topic: events\npartitions: 2\nconfig:\n  cleanup.policy: compact\n")
    main, child = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "framework.cli", "--warehouse", str(tmp_path / "w"), "--specs", str(specs),
         "maintain", "--no-report", "--now", "2026-01-01T00:00:00Z"],
        cwd=REPO, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=child, env={**os.environ, "COLUMNS": "100"})
    os.close(child)
    screen = b""
    while True:
        ready, _, _ = select.select([main], [], [], 1)
        if ready:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            screen += chunk
        elif process.poll() is not None:
            break
    out = process.stdout.read().decode()
    assert process.wait(timeout=300) == 0, screen.decode(errors="replace")[-2000:]
    shown = screen.decode(errors="replace")
    assert "━" in shown and "2/2" in shown, shown[-2000:]
    assert "[1/2] events-0" in shown
    assert out.splitlines() == ["events-0: ok", "events-1: ok"]  # stdout stays plain
