"""The version of jurist (the same as pyproject.toml's)."""

__version__ = "0.1.0"
