"""Where the Java installation's tools are: ``JAVA_HOME``'s when it has the tool, else the
first on ``PATH``. One place for the class archive's key (which ``java`` the session
starts), the local file system's compiler (``javac``) and the tests' Kafka broker."""

from __future__ import annotations

import os
import shutil

__all__ = ["tool"]


def tool(name: str) -> str | None:
    """The path of the JDK tool ``name`` (``java``, ``javac``), or None when there is none."""
    home = os.environ.get("JAVA_HOME")
    candidate = os.path.join(home, "bin", name) if home else None
    return candidate if candidate and os.path.isfile(candidate) else shutil.which(name)
