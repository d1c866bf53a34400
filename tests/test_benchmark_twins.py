"""The benchmark's "as before" twins still patch something the engine has.

``jobs/benchmark.py`` times each change against the engine as it was before it, by patching
the new path away for the twin (``mock.patch.object(module, "name", ...)``). When a rule
moves to another module, such a patch names an attribute that is no longer there, and the
twin's section dies at its first run: the partitions section (target 4's figures) did so
from the move of ``appended_between`` into ``log_state`` (3d76871) until stop 100, unseen
because only a benchmark run reaches it. This resolves every patch target the way the
benchmark's own imports bind it, without running a section, and requires each named
attribute to exist.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

BENCHMARK = Path(__file__).resolve().parents[1] / "jobs" / "benchmark.py"


def _own_nodes(scope):
    """The nodes of ``scope``'s body outside the functions and classes it defines."""
    stack = list(scope.body)
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            stack.extend(ast.iter_child_nodes(node))


def _bound(scope) -> dict[str, tuple[str, str | None]]:
    """What ``scope``'s own imports bind: name -> (module, attribute or None)."""
    bound = {}
    for node in _own_nodes(scope):
        if isinstance(node, ast.ImportFrom) and node.level == 0:
            bound.update({alias.asname or alias.name: (node.module, alias.name) for alias in node.names})
        elif isinstance(node, ast.Import):  # "import a.b" binds a; "import a.b as c" binds c to a.b
            bound.update({alias.asname or alias.name.split(".")[0]:
                          (alias.name if alias.asname else alias.name.split(".")[0], None) for alias in node.names})
    return bound


def _patches(scope, names: dict) -> list[tuple[int, str, str, dict]]:
    """Every ``mock.patch.object(target, "attribute", ...)`` in ``scope`` and the functions it
    defines: (line, target's source, attribute, the imports in force there)."""
    names = {**names, **_bound(scope)}
    found = []
    for node in _own_nodes(scope):
        if (isinstance(node, ast.Call) and ast.unparse(node.func) == "mock.patch.object" and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)):
            found.append((node.lineno, ast.unparse(node.args[0]), node.args[1].value, names))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found += _patches(node, names)
    return found


def _resolved(source: str, names: dict):
    base, *attributes = source.split(".")
    module, attribute = names[base]
    value = importlib.import_module(module)
    if attribute is not None:
        value = (getattr(value, attribute) if hasattr(value, attribute)
                 else importlib.import_module(f"{module}.{attribute}"))
    for attribute in attributes:
        value = getattr(value, attribute)
    return value


def test_every_twin_patches_an_attribute_the_engine_has():
    patches = _patches(ast.parse(BENCHMARK.read_text()), {})
    assert len(patches) >= 40, "the benchmark's twins were not found"
    unresolved = [f"line {line}: {source}" for line, source, _, names in patches if source.split(".")[0] not in names]
    assert not unresolved, f"patch targets bound by no import: {unresolved}"
    missing = [f"line {line}: {source}.{attribute}" for line, source, attribute, names in patches
               if not hasattr(_resolved(source, names), attribute)]
    assert not missing, f"the benchmark patches attributes that are not there: {missing}"
