"""Imports every command module so that each registers itself on the app."""

from ctune.cli import compile as _compile  # noqa: F401
