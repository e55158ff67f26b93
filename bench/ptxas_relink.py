"""A launcher build again with other ptxas options, without its front end: the experiment
behind rebuilding only what a controls file (or a ptxas flag) changes.

A controls file changes only ptxas's output, yet every candidate of a launcher kernel
(CUTLASS) pays the whole nvcc pipeline: cudafe++, cicc and the host compiler on CUTLASS's
host code (bench/nvcc_phases.py). Here, for one kernel's default build:

1. nvcc runs once with ``--keep`` (the leader's build, as today) and ``--dryrun`` gives its
   steps;
2. the host object is compiled once more with the fatbin left out: its
   ``fatbinData`` becomes an undefined symbol;
3. the variant: ptxas with the extra options on the kept PTX, fatbinary, the fatbin alone
   as an object of its own (``fatbinData`` global and hidden: never bound to another
   library's in a process that loads many builds), then the original link step;
4. the reference: the whole nvcc run with ``-Xptxas OPTIONS``.

The row says whether the two libraries carry the same SASS (ctune's digest), whether the
variant loads, and the seconds of each step.

    python bench/ptxas_relink.py [--kernel gemm] [--ptxas-option=-O1] [--out FILE]

Results: ``bench/results/ptxas_relink-<N>cpu.json``.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from nvcc_phases import default_argv  # noqa: E402

from ctune.compile.relink import (  # noqa: E402
    fatbin_object_source,
    host_side,
    split_fatbin,
    with_output,
)
from ctune.compile.sass import sass_digest  # noqa: E402

#: a line of nvcc --dryrun that sets a variable rather than runs a step
_SETTING = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def _run(command: str, cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(command, shell=True, cwd=cwd, check=True, capture_output=True)
    return time.perf_counter() - start


def relink(kernel: str, option: str, scratch: Path) -> dict[str, Any]:
    return {"kernel": kernel, **relink_argv(default_argv(kernel), option, scratch)}


def relink_argv(argv: list[str], option: str, scratch: Path) -> dict[str, Any]:
    """The experiment for one launcher build's nvcc ``argv`` (``-o`` names its library),
    in ``scratch``."""
    nvcc, stem = argv[0], Path(argv[-1]).stem
    keep = scratch / "keep"
    keep.mkdir()
    base = with_output(argv, "base.so")
    steps = subprocess.run(
        [*base, "--dryrun", "--keep", "--keep-dir", "keep"],
        cwd=scratch, capture_output=True, text=True, check=True,
    ).stderr.splitlines()  # fmt: skip
    runs = [line[3:] for line in steps if line.startswith("#$ ")]
    commands = [c for c in runs if not _SETTING.match(c)]
    ptxas = next(c for c in commands if c.startswith("ptxas "))
    fatbinary = next(c for c in commands if c.startswith("fatbinary ") and f"{stem}.cubin" in c)
    host_compile = next(c for c in commands if " -c -x c++" in c and "cudafe1.cpp" in c)
    link = next(c for c in commands if c.startswith("g++ "))
    seconds: dict[str, float] = {}
    seconds["full_build_keep"] = _run(shlex.join([*base, "--keep", "--keep-dir", "keep"]), scratch)
    fatbin_c = keep / f"{stem}.fatbin.c"
    original = fatbin_c.read_text()
    _, rest = split_fatbin(original)
    fatbin_c.write_text(host_side(rest))
    host_object = f"keep/{stem}.host.o"
    seconds["host_object_once"] = _run(
        host_compile.replace(f'-o "keep/{stem}.o"', f'-o "{host_object}"'), scratch
    )
    fatbin_c.write_text(original)
    variant = scratch / "variant"
    variant.mkdir()
    start = time.perf_counter()
    variant_ptxas = ptxas.replace("ptxas ", f"ptxas {option} ", 1)
    _run(variant_ptxas.replace('-o "keep/', '-o "variant/'), scratch)
    _run(fatbinary.replace('"keep/', '"variant/').replace("file=keep/", "file=variant/"), scratch)
    asm_block, _ = split_fatbin((variant / f"{stem}.fatbin.c").read_text())
    (variant / "fatbin.c").write_text(fatbin_object_source(asm_block))
    _run("gcc -c -fPIC -x c variant/fatbin.c -o variant/fatbin.o", scratch)
    _run(
        link.replace(f'"keep/{stem}.o"', f'"{host_object}" "variant/fatbin.o"').replace(
            '-o "base.so"', '-o "variant/kernel.so"'
        ),
        scratch,
    )
    seconds["variant_relink"] = time.perf_counter() - start
    reference = with_output(argv, "reference.so")
    at = reference.index("-o")
    reference[at:at] = ["-Xptxas", option]
    seconds["reference_full_build"] = _run(shlex.join(reference), scratch)
    digests = {
        name: sass_digest((scratch / path).read_bytes())
        for name, path in (
            ("base", "base.so"),
            ("variant", "variant/kernel.so"),
            ("reference", "reference.so"),
        )
    }
    ctypes.CDLL(str(scratch / "variant" / "kernel.so"))  # it loads (no GPU needed for that)
    return {
        "nvcc": nvcc,
        "ptxas_option": option,
        "seconds": {k: round(v, 3) for k, v in seconds.items()},
        "sass_digest": digests,
        "variant_same_sass_as_reference": digests["variant"] == digests["reference"],
        "option_changes_sass": digests["base"] != digests["reference"],
        "variant_loads": True,
        "speedup": round(seconds["reference_full_build"] / seconds["variant_relink"], 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel", default="gemm")
    parser.add_argument("--ptxas-option", default="-O1")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        row = relink(args.kernel, args.ptxas_option, Path(scratch))
    print(json.dumps(row, indent=2))
    version = subprocess.run([row["nvcc"], "--version"], capture_output=True, text=True).stdout
    document = {
        "fingerprint": {
            "cpus": os.cpu_count(),
            "nvcc_version": version.strip().splitlines()[-1],
            "python": platform.python_version(),
        },
        "rows": [row],
    }
    out = args.out or ROOT / "bench" / "results" / f"ptxas_relink-{os.cpu_count()}cpu.json"
    if out.exists():  # one row per (kernel, option): others kept
        old = json.loads(out.read_text())["rows"]
        same = (args.kernel, args.ptxas_option)
        document["rows"] = [*(r for r in old if (r["kernel"], r["ptxas_option"]) != same), row]
    out.write_text(json.dumps(document, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
