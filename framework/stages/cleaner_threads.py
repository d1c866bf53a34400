"""Partitions maintained side by side: Kafka's ``log.cleaner.threads``.

The threads, their child sessions and the order of results are
:func:`framework.side_by_side.in_order`'s. Here: the default, and each partition's
progress lines held until its turn, so a run's output and history read as with one
thread. One thread (Kafka's default) maintains each partition only when the run asks for
its result: the next partition starts after the previous one's history is written.
"""

from __future__ import annotations

import threading
from typing import Callable

#: Kafka's default for ``log.cleaner.threads``.
DEFAULT_CLEANER_THREADS = 1


class HeldLines:
    """Progress lines: said at once by the calling thread, held by a cleaner thread until
    its partition's turn (:meth:`hold`, :meth:`release`)."""

    def __init__(self, say: Callable[[str], None]):
        self.say = say
        self._local = threading.local()

    def __call__(self, message: str) -> None:
        held = getattr(self._local, "lines", None)
        if held is None:
            self.say(message)
        else:
            held.append(message)

    def hold(self) -> list[str]:
        """From now on this thread's lines go into the returned list."""
        self._local.lines = []
        return self._local.lines

    def release(self) -> None:
        """This thread's lines are said at once again."""
        self._local.lines = None
