"""Names a kernel uses but nothing defines, found by compiling it.

Kernel Tuner kernels read their tunables as bare macros (``block_size_x``) that the
tuner prepends; a file like that does not compile alone. Which identifiers are
meant that way only the compiler can say (a name may be a variable, a type, an enum
or a macro), so the file is compiled and every ``identifier "X" is undefined`` is
defined and compiled again, a few rounds at most. A name the code calls (``f(...)``) is a
function, not a tunable: the runtime API CUDA removed is mapped to its successor
(``-DcudaThreadSynchronize=cudaDeviceSynchronize``), any other is left for the author.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ctune.compile.command import target_flags
from ctune.compile.logs import first_error_line
from ctune.compile.process import run_nvcc
from ctune.quoting import define_flag
from ctune.spec.flags import language_flags

_UNDEFINED = re.compile(r'identifier "([A-Za-z_]\w*)" is undefined')
MAX_ROUNDS = 4
#: runtime functions CUDA removed, and the ones the CUDA documentation names in their place
REMOVED_APIS = {
    "cudaThreadSynchronize": "cudaDeviceSynchronize",
    "cudaThreadExit": "cudaDeviceReset",
    "cudaThreadSetLimit": "cudaDeviceSetLimit",
    "cudaThreadGetLimit": "cudaDeviceGetLimit",
    "cudaThreadSetCacheConfig": "cudaDeviceSetCacheConfig",
    "cudaThreadGetCacheConfig": "cudaDeviceGetCacheConfig",
}


@dataclass
class Probe:
    """What compiling the file alone said: the names it lacked and whether it then built."""

    undefined: dict[str, int] = field(default_factory=dict)  # name -> the value it was given
    builds: bool = False
    error: str = ""  # the first error left, when it does not build
    #: names called as functions, defined nowhere -> what they map to (None: not known)
    functions: dict[str, str | None] = field(default_factory=dict)


def find_undefined(
    nvcc: str,
    source: Path,
    *,
    arch: str,
    std: str,
    defines: Mapping[str, int | str],
    include_dirs: Sequence[Path] = (),
    guess: Callable[[str], int],
    called: Callable[[str], bool] = lambda name: False,
    timeout_s: float = 120.0,
) -> Probe:
    """Compile ``source`` with ``defines`` plus, each round, the names still undefined
    (``called`` tells a function the code calls from a value)."""
    probe = Probe()
    with tempfile.TemporaryDirectory(prefix="ctune-init-") as work:
        for _ in range(MAX_ROUNDS):
            mapped = {n: m for n, m in probe.functions.items() if m is not None}
            values: dict[str, int | str] = {**defines, **probe.undefined, **mapped}
            argv = [
                nvcc,
                *target_flags(arch, "kernel"),
                f"-std={std}",
                *(f"-I{d}" for d in include_dirs),
                *(define_flag(k, v) for k, v in sorted(values.items())),
                "-o",
                str(Path(work) / "probe.cubin"),
                *language_flags(Path(source)),
                str(source),
            ]
            try:
                done = run_nvcc(
                    argv, what=f"{source}: nvcc", timeout_s=timeout_s, scratch=Path(work)
                )
            except OSError as exc:
                probe.error = f"nvcc did not run: {exc}"
                return probe
            if done.timed_out:
                probe.error = f"nvcc did not run: it took longer than {timeout_s:g} s"
                return probe
            log = (done.stdout + done.stderr).decode(errors="replace")
            taken = probe.undefined.keys() | probe.functions.keys()
            new = [n for n in dict.fromkeys(_UNDEFINED.findall(log)) if n not in taken]
            if done.returncode == 0:
                probe.builds = True
                return probe
            for name in new:
                if called(name):
                    probe.functions[name] = REMOVED_APIS.get(name)
                else:
                    probe.undefined[name] = guess(name)
            if not any(n in probe.undefined or probe.functions.get(n) for n in new):
                probe.error = first_error_line(log)  # nothing left that a round can define
                return probe
        probe.error = "names were still undefined after several rounds"
    return probe


__all__ = ["REMOVED_APIS", "Probe", "find_undefined"]
