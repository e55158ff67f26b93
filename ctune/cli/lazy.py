"""A module named at the top of a command module but loaded on first use.

Building the command tree (``ctune --help``, shell completion) imports every command
module; what those commands run, and the renderers that pull it in, should load only when
a command runs. importlib's ``LazyLoader`` gives a module object that loads itself on its
first attribute access, so the command bodies keep using it as if imported normally.
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType


def lazy_module(name: str) -> ModuleType:
    """The module ``name``: the loaded one if it is loaded, else one that loads on first use."""
    loaded = sys.modules.get(name)
    if loaded is not None:
        return loaded
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ImportError(f"no module named {name!r}", name=name)
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    parent, _, child = name.rpartition(".")
    if parent:  # as the import system does: `from parent import child` finds it
        setattr(sys.modules[parent], child, module)
    return module


__all__ = ["lazy_module"]
