"""The ``topiclake`` command: argument parsing and exit codes (``main``), one function per
verb (``commands``), their text (``render``), and scenario files (``simulate``)."""
