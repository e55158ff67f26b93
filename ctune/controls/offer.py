"""Which ``acf`` genes a run offers: those asked for that the toolchain takes for the target.

The spec asks with ``acf: [ptxas]``; the command line with ``--acf ptxas,nvcc`` (or
``none``), which overrides it. A compiler that takes no controls files for the target
architecture (ptxas before 13.3; nvcc before 13.3 or below sm_100) is left out: with a
warning line when the spec asked, with a UserError naming the fix when the command line
did, since then the user wants something this toolchain cannot do.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ctune.errors import UserError
from ctune.space.nvcc import ACF

if TYPE_CHECKING:
    from ctune.kernelspec import KernelSpec

#: the first release whose ptxas and nvcc take ``--apply-controls``
FIRST_RELEASE = (13, 3)
#: the first architecture whose nvcc (NVVM) takes its own controls file
NVCC_FIRST_ARCH = 100
_FIX = "a CUDA 13.3+ toolchain: pip install 'ctune[cuda13.3]', then --nvcc"


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


def _release(version: str) -> tuple[int, int] | None:
    match = re.match(r"(\d+)\.(\d+)", version or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


def _arch_number(arch: str) -> int | None:
    match = re.match(r"(?:sm|compute)_(\d+)", arch)
    return int(match.group(1)) if match else None


def takes_controls(toolchain: Any, compiler: str, arch: str) -> tuple[bool, str]:
    """(does ``toolchain``'s ``compiler`` take a controls file for ``arch``, why not).

    The toolchain's own ``takes_controls`` answers when it has one; else the rule by
    version and architecture (a release number, never a probe: ptxas 13.0 reads the option
    and refuses every file with the same words as a damaged one).
    """
    own = getattr(toolchain, "takes_controls", None)
    if callable(own):
        answer: tuple[bool, str] = own(compiler, arch)
        return answer
    version = toolchain.ptxas_version if compiler == "ptxas" else toolchain.nvcc_version
    release = _release(str(version))
    if release is None or release < FIRST_RELEASE:
        return False, f"{compiler} {version} takes no controls files (13.3 or later does)"
    number = _arch_number(arch)
    if compiler == "nvcc" and (number is None or number < NVCC_FIRST_ARCH):
        return False, f"nvcc {version} takes no controls file of its own for {arch} (sm_100+)"
    return True, ""


def offer_acf(
    spec: KernelSpec,
    toolchain: Any,
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
        ok, why = takes_controls(toolchain, compiler, arch)
        if ok:
            offered.append(compiler)
        elif from_cli:
            raise UserError(
                f"{origin}: {why}; ask only for what the toolchain takes for {arch} ({_FIX})"
            )
        else:
            warn(f"{spec.yaml_path.name}: acf {compiler} not offered: {why}")
    return spec.with_acf(tuple(offered))


__all__ = ["FIRST_RELEASE", "offer_acf", "parse_acf_option", "takes_controls"]
