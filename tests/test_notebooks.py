"""The notebooks run top to bottom, in a fresh kernel, against a temporary warehouse."""

import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path, tmp_path, monkeypatch, long_lived_child_jvm):
    monkeypatch.setenv("TOPICLAKE_WAREHOUSE", str(tmp_path / "warehouse"))
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(notebook, timeout=900, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    assert os.path.exists(tmp_path / "warehouse" / "_topiclake" / "report" / "index.html")


def test_there_are_notebooks():
    assert NOTEBOOKS, "notebooks/ must hold at least the walkthrough"
