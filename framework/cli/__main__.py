"""``python -m framework.cli``: the ``topiclake`` command."""

from framework.cli.main import entry_point

entry_point()
