"""The package's version, in a module of its own so that modules stamping it into results import nothing
else (``bench/__init__.py`` re-exports it)."""

__version__ = "0.1.0"
