"""Where one build's compile time goes, phase by phase (nvcc ``--time``), and what a
controls file would have to rerun.

A controls file (``ptxas --apply-controls``) changes only what ptxas makes. For each
kernel the default build's argv (``ctune compile KERNEL --format json``) runs again with
nvcc's own ``--time`` report, on this machine, one nvcc at a time. The phases are grouped:

- ``host_front``: preprocessing and cudafe++ of the host side;
- ``device_front``: preprocessing and cicc (the PTX);
- ``ptxas``, ``fatbinary``;
- ``host_compile``: the host compiler on the kernel's own object (CUTLASS's host code);
- ``link``: nvlink, the link stub and the final link.

``rerun_s`` is what a controls candidate would cost per step of reuse: ``full`` (today:
every phase), ``from_ptx`` (ptxas, fatbinary, the host compile and the link: the PTX and
the host source kept from the leader's build), ``fatbin_object`` (ptxas, fatbinary and the
link: the host object kept too, the fatbin in an object of its own).

    python bench/nvcc_phases.py [KERNEL ...] [--repeat N] [--out FILE]

Results: ``bench/results/nvcc_phases-<N>cpu.json`` with the machine and toolchain.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ("gemm", "attention", "hand_gemm", "hand_attention")

#: nvcc's phase names (the ``phase name`` column of ``--time``) by group
GROUPS = {
    "gcc (preprocessing 4)": "host_front",
    "cudafe++": "host_front",
    "gcc (preprocessing 1)": "device_front",
    "cicc": "device_front",
    "ptxas": "ptxas",
    "fatbinary": "fatbinary",
    "nvlink": "link",
    "gcc (linking)": "link",
    "nvcc (driver)": "driver",
}
RERUN = {
    "full": ("host_front", "device_front", "ptxas", "fatbinary", "host_compile", "link"),
    "from_ptx": ("ptxas", "fatbinary", "host_compile", "link"),
    "fatbin_object": ("ptxas", "fatbinary", "link"),
}


def default_argv(kernel: str) -> list[str]:
    """The default build's argv, as ``ctune compile`` records it (it builds, or finds the
    build in the cache)."""
    done = subprocess.run(
        [sys.executable, "-m", "ctune", "compile", f"kernels/{kernel}.cu", "--format", "json"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return list(json.loads(done.stdout)["build"]["argv"])


def group_of(phase: str, input_files: str) -> str:
    if phase == "gcc (compiling)":  # the link stub's compile is part of the link
        return "link" if "link.stub" in input_files or "dlink" in input_files else "host_compile"
    return GROUPS.get(phase, "other")


def timed_phases(argv: Sequence[str]) -> dict[str, float]:
    """Seconds per group for one run of ``argv`` with ``--time`` (output to a scratch
    folder; the build cache is not touched)."""
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "time.csv"
        items = list(argv)
        at = items.index("-o")
        items[at + 1] = str(Path(scratch) / Path(items[at + 1]).name)
        subprocess.run(
            [*items, "--time", str(report)], cwd=scratch, capture_output=True, check=True
        )
        seconds: dict[str, float] = {}
        with report.open() as rows:
            for row in csv.DictReader(rows, skipinitialspace=True):
                fields = {k.strip(): (v or "").strip() for k, v in row.items() if k}
                if fields.get("unit") != "ms":
                    continue
                group = group_of(fields["phase name"], fields.get("phase input files", ""))
                seconds[group] = seconds.get(group, 0.0) + float(fields["metric"]) / 1e3
    return seconds


def measure(kernel: str, repeat: int) -> dict[str, Any]:
    argv = default_argv(kernel)
    runs = [timed_phases(argv) for _ in range(repeat)]
    groups = sorted({g for run in runs for g in run})
    phases = {g: round(statistics.median(run.get(g, 0.0) for run in runs), 3) for g in groups}
    total = sum(phases.values())
    rerun = {name: round(sum(phases.get(g, 0.0) for g in of), 3) for name, of in RERUN.items()}
    return {
        "kernel": kernel,
        "nvcc": argv[0],
        "argv": [item.replace(str(ROOT), "<repo>") for item in argv[1:]],
        "runs": repeat,
        "phases_s": phases,
        "total_s": round(total, 3),
        "rerun_s": rerun,
        "speedup_over_full": {
            name: round(rerun["full"] / s, 1) if s > 0 else None for name, s in rerun.items()
        },
    }


def fingerprint(nvcc: str) -> dict[str, Any]:
    version = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
    host = subprocess.run(["g++", "--version"], capture_output=True, text=True).stdout
    cpu = next(
        (ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
         if ln.startswith("model name")),
        platform.processor() or "unknown",
    )  # fmt: skip
    return {
        "machine": platform.node() or "unknown",
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "nvcc_version": version.strip().splitlines()[-1] if version else "unknown",
        "host_compiler": host.splitlines()[0] if host else "unknown",
        "python": platform.python_version(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kernels", nargs="*", default=list(KERNELS))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    rows = []
    for kernel in args.kernels:
        row = measure(kernel, args.repeat)
        print(
            f"{kernel:15s} total {row['total_s']:6.1f} s  "
            + "  ".join(f"{g} {s:.2f}" for g, s in row["phases_s"].items())
            + f"  | controls rerun: {row['rerun_s']}",
            flush=True,
        )
        rows.append(row)
    document = {"fingerprint": fingerprint(rows[0]["nvcc"] if rows else "nvcc"), "rows": rows}
    out = args.out or ROOT / "bench" / "results" / f"nvcc_phases-{os.cpu_count()}cpu.json"
    out.write_text(json.dumps(document, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
