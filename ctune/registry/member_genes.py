"""An artifact's gene values against its kernel's space: what a hand edit leaves behind.

The digest (``schema.py``) catches a torn or corrupted file, not an edit: anyone can
recompute it. What ctune checks instead is that every member's genes are the spec's own
values (``Space.check_values``, type included) or, where the spec cannot be had, that
every value could go on nvcc's command line at all (``quoting.py``). ``ctune
check`` calls such an artifact STALE and builds none of it; ``ctune registry verify``
reports it (docs/security.md).
"""

from __future__ import annotations

from pathlib import Path

from ctune.errors import CtuneError
from ctune.quoting import bare_refusal, value_refusal
from ctune.records import is_sha256_hex
from ctune.registry.schema import Artifact
from ctune.spec.space.nvcc import ACF_GENES, CATALOGUE, NO_CONTROLS
from ctune.spec.space.params import Space, SpaceValueError

EDITED = "the artifact was edited by hand or the space changed"


def _grammar_refusal(name: str, value: str) -> str | None:
    """Why a value could not go on nvcc's command line at all: a catalogue flag's value
    is written bare there, any other value as a quoted ``-D`` (``quoting.py``); a
    controls file's gene names one by its digest (or ``none``), never a path."""
    if name in ACF_GENES:
        ok = value == NO_CONTROLS or is_sha256_hex(value)
        return None if ok else "is not none nor a controls file's sha256 digest"
    return bare_refusal(value) if name in CATALOGUE else value_refusal(value)


def hand_edits(artifact: Artifact, space: Space | None) -> list[str]:
    """One line per member whose genes ``space`` does not have as values (None: no spec,
    so every string value is checked against the command-line rule only).

    A gene the space no longer has is not one: today's builds drop it (a removed gene is
    the spec's change, which the SASS comparison judges), but its value must still be one
    that could reach nvcc."""
    out: list[str] = []
    seen: set[str] = set()
    for m in (*artifact.front, artifact.baseline):
        if m.key in seen:
            continue
        seen.add(m.key)
        genes = m.candidate.as_dict()
        known = {k: v for k, v in genes.items() if space is not None and k in space}
        if space is not None:
            try:
                space.check_values(known, f"member {m.key}")
            except SpaceValueError as exc:
                out.append(f"{exc}; {EDITED}")
                continue
        for name, value in genes.items():
            if not isinstance(value, str) or name in known:
                continue
            why = _grammar_refusal(name, value)
            if why is not None:
                out.append(f"member {m.key}: gene {name}={value[:80]!r} {why}; {EDITED}")
                break
    return out


def spec_space(kernels_dir: Path, kernel: str, nvcc: str = "nvcc") -> Space | None:
    """The space of ``<kernels_dir>/<kernel>.yaml`` (with this nvcc's options where nvcc
    is here), or None when the spec is missing or does not load."""
    from ctune.compile.toolchain import probe_toolchain
    from ctune.spec import load_spec

    path = Path(kernels_dir) / f"{kernel}.yaml"
    if not path.is_file():
        return None
    try:
        help_text: str | None = probe_toolchain(nvcc).help_text
    except CtuneError:
        help_text = None
    try:
        return load_spec(path, help_text).space
    except CtuneError:
        return None


__all__ = ["EDITED", "hand_edits", "spec_space"]
