"""Which writer wrote a stage's files: Arrow (as shipped, on a local table) or Spark's."""

from __future__ import annotations


def arrow_writes(monkeypatch, module, name: str, writer: str) -> list[bool]:
    """``module.name``, an Arrow writer that answers None when it writes nothing, patched for
    ``writer``: with "spark" it always answers None (Spark's writer writes); otherwise it
    runs, and the list returned records, call by call, whether it wrote."""
    calls: list[bool] = []
    real = getattr(module, name)

    def spy(*args, **kwargs):
        if writer == "spark":
            return None
        written = real(*args, **kwargs)
        calls.append(written is not None)
        return written

    monkeypatch.setattr(module, name, spy)
    return calls
