"""Persist, version, diff and export tuned artifacts in a git repository (storage only: the CI
verbs that rebuild and re-measure them are ``ctune.ci``)."""
