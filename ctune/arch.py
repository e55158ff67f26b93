"""The target architecture: what a spec's ``arch``, ``--arch``, ``CTUNE_ARCH`` and
``[tool.ctune] arch`` may be.

Two checks, each where its input is known. The shape (``sm_90``, ``sm_90a``,
``compute_80``; :func:`check`) is checked where a value is read, the spec loader and each
settings layer, so a bad one is one line naming where it came from, not an IndexError
where the gencode is written. Whether the installed nvcc compiles for it
(:func:`check_offered`: ``sm_12`` has the shape, and nvcc refuses it) needs the toolchain,
so the commands check the arch they will build for once nvcc has been probed; the list is
the allowed values ``nvcc --help`` gives for ``--gpu-architecture``, the help text the
toolchain probe already reads (``nvcc --list-gpu-arch`` says the same).
"""

from __future__ import annotations

import re

ARCH_RE = re.compile(r"^(?:sm|compute)_(\d{1,2})(\d)[a-z]?$")
#: the arch of a spec that names none (the loader's default)
DEFAULT = "sm_90"


def check(value: object) -> str:
    """``value`` if it has an architecture's shape; ValueError otherwise (the caller says
    where)."""
    if not isinstance(value, str) or not ARCH_RE.match(value):
        raise ValueError(f"{value!r} is not like sm_90 or sm_90a")
    return value


def capability(arch: str) -> tuple[int, int] | None:
    """``sm_90a`` -> (9, 0); None when ``arch`` has no architecture's shape."""
    match = ARCH_RE.match(arch)
    return (int(match.group(1)), int(match.group(2))) if match else None


def offered(nvcc_help: str) -> tuple[str, ...]:
    """The ``sm_`` and ``compute_`` values ``nvcc --help`` allows for ``--gpu-architecture``;
    empty when the text does not list them (then nothing is refused)."""
    section = re.search(r"^--gpu-architecture\b.*?(?=^--|\Z)", nvcc_help, re.M | re.S)
    _, found, allowed = (section.group() if section else "").partition(
        "Allowed values for this option:"
    )
    if not found:
        return ()
    return tuple(v for v in re.findall(r"'([^']+)'", allowed) if ARCH_RE.match(v))


def check_offered(arch: str, nvcc_help: str) -> str:
    """``arch`` if this nvcc compiles for it (or its help does not say); ValueError
    naming the real architectures it does compile for otherwise."""
    allowed = offered(nvcc_help)
    if allowed and arch not in allowed:
        real = sorted({v for v in allowed if v.startswith("sm_")}, key=_order)
        plain = [v for v in real if v[-1].isdigit()]
        raise ValueError(
            f"{arch!r} is not an architecture this nvcc compiles for "
            f"(nvcc --list-gpu-arch: {', '.join(plain)})"
        )
    return arch


def _order(arch: str) -> tuple[tuple[int, int], str]:
    return capability(arch) or (0, 0), arch


__all__ = ["ARCH_RE", "DEFAULT", "capability", "check", "check_offered", "offered"]
