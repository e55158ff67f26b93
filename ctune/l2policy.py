"""The L2 policy: one name, ``l2_policy``, for whether the L2 is flushed before each sample.

``cold`` flushes it before every sample, ``hot`` does not; the name is the same in the
spec, settings, plans, the fingerprint and every record. Files from before the name was
settled spell it ``l2``: :func:`migrate` maps that spelling on read and is the only place
that knows it. Nothing persisted is rewritten, and spec digests are taken on the old
spelling (:func:`legacy_form`), so the rename changes no identity. docs/design.md, "Names".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

NAME = "l2_policy"
#: the old spellings, read everywhere, written nowhere
OLD_NAMES = ("l2",)
POLICIES = ("cold", "hot")
DEFAULT = "cold"


class BothNames(ValueError):
    """Both spellings are given, with different values: which one was meant cannot be
    guessed. ``old`` and ``new`` are the names as :func:`migrate` saw them, for a caller
    that says them as the user wrote them."""

    def __init__(self, old: str, new: str) -> None:
        super().__init__(
            f"both {old!r} (the old name) and {new!r} are given, and differ; keep {new!r}"
        )
        self.old, self.new = old, new


def migrate(data: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``data`` with an old spelling renamed to :data:`NAME`.

    Raises :class:`BothNames` (a ValueError; the caller adds where) when both spellings
    are given with different values.
    """
    out = dict(data)
    for old in OLD_NAMES:
        if old not in out:
            continue
        value = out.pop(old)
        if NAME in out and out[NAME] != value:
            raise BothNames(old, NAME)
        out.setdefault(NAME, value)
    return out


def legacy_form(data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` with :data:`NAME` spelled the old way: the form spec digests were taken on
    before the rename, so a spec digests the same under either spelling."""
    out = {k: v for k, v in data.items() if k != NAME}
    if NAME in data:
        out[OLD_NAMES[0]] = data[NAME]
    return out


def check(value: object) -> str:
    """``value`` if it is a policy; ValueError naming the allowed ones otherwise (the
    caller says where)."""
    if value not in POLICIES:
        raise ValueError(f"{value!r} (allowed: {', '.join(POLICIES)})")
    return str(value)


__all__ = ["DEFAULT", "NAME", "OLD_NAMES", "POLICIES", "check", "legacy_form", "migrate"]
