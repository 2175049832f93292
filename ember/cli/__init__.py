"""The ``ember`` command line; see :mod:`ember.cli.main` for the command table."""

from ember.cli.main import main, register_command

__all__ = ["main", "register_command"]
