"""The ``bench`` application: the command line (``app/cli.py``) and one module per command (``app/commands/``).
It sits on top of everything: the only code that imports suites and reports, over the kernel (``bench``)."""
