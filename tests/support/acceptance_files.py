"""Where the acceptance scenarios are: ``../shared/acceptance`` beside the repository, or
``$TOPICLAKE_SHARED/acceptance``."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
#: The shared folder beside the repository (CONTRACT, acceptance scenarios).
SHARED = Path(os.environ.get("TOPICLAKE_SHARED", REPO.parent / "shared"))
ACCEPTANCE = SHARED / "acceptance"


def acceptance_files() -> list[Path]:
    """Every acceptance scenario; an empty or missing folder is an error, never a skip."""
    files = sorted(ACCEPTANCE.glob("*.yaml"))
    if not files:
        raise RuntimeError(f"no acceptance scenarios under {ACCEPTANCE} (set TOPICLAKE_SHARED)")
    return files
