"""Progress on stderr: a bar on a terminal (rich), plain lines when not (a log, a pipe, CI).

Detail lines (what each stage did) print either way; on a terminal they scroll above the
bar. Nothing is printed with ``--json``: stdout then carries only the JSON result.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO

__all__ = ["Progress"]


class Progress:
    """One command's progress: ``line`` for what happened, ``step`` for how far along."""

    def __init__(self, stream: TextIO | None = None, quiet: bool = False):
        self.stream = stream or sys.stderr
        self.quiet = quiet
        self._bar: Any = None
        self._task: Any = None

    @property
    def on_terminal(self) -> bool:
        isatty = getattr(self.stream, "isatty", None)
        return bool(isatty and isatty())

    def line(self, message: str) -> None:
        if self.quiet:
            return
        if self._bar is not None:
            self._bar.console.print(message, markup=False, highlight=False, soft_wrap=True)
        else:
            print(message, file=self.stream, flush=True)

    def step(self, done: int, total: int, label: str = "") -> None:
        """``done`` of ``total`` units (partitions) finished; ``label``: the one under way."""
        if self.quiet or not self.on_terminal:
            return  # the detail lines already say which partition is under way
        if self._bar is None and not self._start(total):
            return
        self._bar.update(self._task, completed=done, total=total, description=label)
        if done >= total:
            self.close()

    def _start(self, total: int) -> bool:
        try:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
            from rich.progress import Progress as Bar
        except ImportError:  # the core install (a git hook) has no rich: lines only
            return False
        console = Console(file=self.stream, force_terminal=True)
        self._bar = Bar(TextColumn("{task.description:<28}"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), console=console, transient=False)
        self._task = self._bar.add_task("", total=total)
        self._bar.start()
        return True

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
