"""Which ``acf`` genes a run offers: those asked for that the toolchain takes for the target.

The spec asks with ``acf: [ptxas]``; the command line with ``--acf ptxas,nvcc`` (or
``none``), which overrides it. A compiler that takes no controls files for the target
architecture (ptxas before 13.3; nvcc before 13.3 or below sm_100) is left out: with a
warning line when the spec asked, with a UserError naming the fix when the command line
did, since then the user wants something this toolchain cannot do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ctune.errors import UserError
from ctune.spec.space.nvcc import ACF

if TYPE_CHECKING:
    from ctune.compile.toolchain import Toolchain
    from ctune.spec import KernelSpec

_FIX = (
    "a CUDA 13.3+ toolchain: pip install 'ctune[cuda13.3]', then --nvcc wheel; "
    "or a 13.3 ptxas with --ptxas"
)


def parse_acf_option(text: str | None) -> tuple[str, ...] | None:
    """``--acf ptxas,nvcc`` as compilers; ``none`` is none; None (not given) stays None."""
    if text is None:
        return None
    items = [t.strip() for t in text.split(",") if t.strip()]
    if items == ["none"]:
        return ()
    bad = [t for t in items if t not in ACF]
    if bad or not items:
        raise UserError(
            f"--acf {text!r}: expected compilers among {', '.join(ACF)}, comma-separated, or none"
        )
    return tuple(dict.fromkeys(items))


def offer_acf(
    spec: KernelSpec,
    toolchain: Toolchain,
    arch: str,
    asked: tuple[str, ...] | None,
    warn: Callable[[str], None],
    origin: str = "--acf",
) -> KernelSpec:
    """``spec`` with the ``acf`` genes of the compilers asked for (``asked``: the command
    line's, by the option ``origin``; None for the spec's ``acf``) that ``toolchain`` takes
    for ``arch``."""
    from_cli = asked is not None
    wanted = asked if asked is not None else spec.acf
    if not wanted and not spec.acf:
        return spec
    offered = []
    for compiler in wanted:
        ok, why = toolchain.takes_controls(compiler, arch)
        if ok:
            offered.append(compiler)
        elif from_cli:
            raise UserError(
                f"{origin}: {why}; ask only for what the toolchain takes for {arch} ({_FIX})"
            )
        else:
            warn(f"{spec.yaml_path.name}: acf {compiler} not offered: {why}")
    return spec.with_acf(tuple(offered))


def relink_hint(spec: KernelSpec, relink: str) -> str | None:
    """A line for a search of a launcher's ptxas controls files with ``relink`` off: each
    such candidate is then a whole nvcc run, where a front end kept once makes it a ptxas
    run and a link (docs/advanced-controls.md, "The relink setting"); None otherwise."""
    if relink != "off" or spec.entry_kind != "launcher" or "ptxas" not in spec.acf:
        return None
    return (
        f"{spec.name} is a launcher: with --relink off each ptxas controls file is a whole "
        "nvcc build; --relink auto builds each from one kept front end (ptxas and a link)"
    )


__all__ = ["offer_acf", "parse_acf_option", "relink_hint"]
