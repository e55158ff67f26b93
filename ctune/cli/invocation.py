"""The environment one ``main()`` call resolves its settings from.

``main(argv, environ=...)`` runs a command as if the process environment were
``environ``: ``ctune registry retune --run`` runs each recorded ``ctune search`` in this
process with the settings it was recorded with (e.g. ``CTUNE_REGISTRY``). Patching
``os.environ`` for that would change them for every thread of the process, reach every
child process (nvcc) and leak if the search failed half-way. The mapping is held in a
context variable instead, set for the duration of that one call: it reaches that
command's settings and nothing else, and the outer command's are back afterwards.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from typing import Any

from ctune.config import Settings, resolve

#: the running main() call's environment; None: os.environ
_ENVIRON: ContextVar[Mapping[str, str] | None] = ContextVar("ctune_cli_environ", default=None)
#: whether a main() call is running (a command run inside another is not the user's command)
_INSIDE: ContextVar[bool] = ContextVar("ctune_cli_inside", default=False)


@contextlib.contextmanager
def invoked_with(environ: Mapping[str, str] | None) -> Iterator[None]:
    """Commands run inside resolve their settings from ``environ`` (None: os.environ)."""
    token, inside = _ENVIRON.set(environ), _INSIDE.set(True)
    try:
        yield
    finally:
        _INSIDE.reset(inside)
        _ENVIRON.reset(token)


def inside_a_command() -> bool:
    """Whether this runs inside a command (``registry retune --run``'s searches do)."""
    return _INSIDE.get()


def invocation_environ() -> Mapping[str, str] | None:
    """The running command's environment when ``main()`` was given one, else None."""
    return _ENVIRON.get()


def resolve_settings(overrides: Mapping[str, Any]) -> Settings:
    """A command's settings: [tool.ctune], then its environment (``os.environ`` unless
    ``main()`` was given one), then its options."""
    return resolve(overrides, environ=invocation_environ())


__all__ = ["inside_a_command", "invocation_environ", "invoked_with", "resolve_settings"]
