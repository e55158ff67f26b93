"""Persist, version, diff, export and gate tuned artifacts in a git repository."""
