"""The folders show the flow, and imports follow it (issue 13): each package may import only
from itself and from the packages before it in ``LAYERS``, so a rule's home says what it
may depend on. Pure AST reading: no Spark."""

from __future__ import annotations

import ast
from pathlib import Path

FRAMEWORK = Path(__file__).resolve().parent.parent / "framework"

#: The flow of the data, first to last; the first entry is the shared ground floor.
LAYERS = (
    ("errors", "faults", "user_cache", "jdk", "jvm_options", "engine_jars", "local_file_system", "yarn_defaults",
     "class_archive", "session", "deferred_session", "side_by_side", "local_rows", "__init__"),
    ("spec",),
    ("cleaner",),
    ("log",),
    ("clients",),
    ("stages",),
    ("checks",),
    ("report",),
    ("cli",),
)
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}


def _unit(path: Path) -> str:
    """The package (or top-level module) a file belongs to."""
    parts = path.relative_to(FRAMEWORK).with_suffix("").parts
    return parts[0]


def _imported_units(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}: relative import (absolute imports keep the layering greppable)"
            module = node.module or ""
            if module == "framework":
                found.update(alias.name for alias in node.names)
            elif module.startswith("framework."):
                found.add(module.split(".")[1])
        elif isinstance(node, ast.Import):
            found.update(a.name.split(".")[1] for a in node.names if a.name.startswith("framework."))
    return found


def test_every_module_belongs_to_a_layer():
    units = {_unit(p) for p in FRAMEWORK.rglob("*.py")}
    assert units <= set(RANK), f"not in LAYERS: {sorted(units - set(RANK))}"


def test_imports_never_point_back_up_the_flow():
    wrong = []
    for path in sorted(FRAMEWORK.rglob("*.py")):
        unit = _unit(path)
        for target in _imported_units(path):
            if target != unit and target in RANK and RANK[target] > RANK[unit] and RANK[target] > 0:
                wrong.append(f"{path.relative_to(FRAMEWORK)} imports framework.{target}")
    assert not wrong, "imports against the flow:\n" + "\n".join(wrong)


def test_no_module_is_a_room_of_many_jobs():
    """About 400 lines at most per module (issue 13)."""
    long = {str(p.relative_to(FRAMEWORK)): n for p in FRAMEWORK.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > 420}
    assert not long, long
