"""The one line of a compiler log that says why a build failed. Pure."""

from __future__ import annotations

#: ctune's own diagnosis of a build (an entry it cannot find) starts with this
CTUNE_ERROR = "[ctune] error:"


def first_error_line(log_tail: str) -> str:
    """ctune's own diagnosis when there is one, else the compiler's first error line.

    ctune's line names the cause precisely (the entry is not a kernel of the cubin,
    and which kernels are); nvcc's first error is the usual root of what follows.
    """
    lines = [ln.strip() for ln in log_tail.splitlines() if ln.strip()]
    for line in lines:
        if line.startswith(CTUNE_ERROR):
            return line.removeprefix(CTUNE_ERROR).strip()[:1000]
    for line in lines:
        if "error" in line.lower():
            return line[:300]
    return lines[-1][:300] if lines else "(no compiler output)"


__all__ = ["CTUNE_ERROR", "first_error_line"]
