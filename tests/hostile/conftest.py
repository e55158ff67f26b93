"""The hostile-input tier: its two shared modules, and the template project.

The suite runs with ``--import-mode=importlib``, so sibling modules are not importable by
name; the harness and the set-ups are registered here once as ``hostile_harness`` and
``hostile_setups`` (as the registry tests register ``registry_support``).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest


def _load(name: str, filename: str) -> None:
    if name in sys.modules:
        return
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(filename))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)


_load("hostile_harness", "harness.py")
_load("hostile_setups", "setups.py")

from hostile_harness import Project, build_template, copy_template, warm_up  # noqa: E402


@pytest.fixture(scope="session")
def template(tmp_path_factory: pytest.TempPathFactory) -> Project:
    """The project every case copies: a git repository with saxpy, a registry holding one
    artifact built by this nvcc, a finished search journal and its result file."""
    warm_up()
    return build_template(tmp_path_factory.mktemp("hostile-template"))


@pytest.fixture
def project(template: Project, tmp_path: Path) -> Project:
    return copy_template(template, tmp_path)
