"""Kernels written elsewhere, tuned as their authors wrote them: how much spec each needs.

The kernels under ``bench/own_kernels/`` are written in the styles CUDA code comes in,
none of them for ctune: C++ linkage with a grid-stride loop (``vecadd``), a textbook
shared-memory matmul with a ``#ifndef`` tile width and 2-D blocks (``matmul_tiled``), a
template the file never instantiates (``block_sum``), two kernels in one file with
``#define`` sizes (``transpose_coalesced``), Kernel Tuner's style with bare
``block_size_x/y/z`` macros and 3-D blocks (``stencil7``), and a kernel in a namespace
with ``__launch_bounds__`` and dynamic shared memory (``softmax_rows``). No kernel file
is edited: its sha256 is checked before and after.

For each kernel:

1. ``ctune init`` drafts a sidecar from a copy of the ``.cu`` and ``ctune space`` runs
   on the draft as it is;
2. the reviewed sidecar next to the kernel (the draft with its guesses corrected and the
   reference written) is counted (``spec_lines``: lines that are not blank or comments;
   ``edited_lines``: those the draft did not have as they are),
   ``ctune space`` shows its valid space within the device, ``ctune compile`` builds its
   default candidate;
3. on a GPU, ``ctune search --objective p50`` tunes it (``--compile-only`` stops at 2).

Writes ``bench/results/own_kernels-<gpu_id>.json`` (``kernels``: one record per kernel;
``tuned_unmodified``: how many were tuned with their source unchanged; ``spec_lines``
per kernel), with the machine's fingerprint.

    python bench/own_kernels.py [--compile-only] [--budget 24] [--kernels vecadd ...]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
KERNELS_DIR = ROOT / "bench" / "own_kernels"


@dataclass(frozen=True)
class Case:
    name: str
    source: str  # the kernel file, as written
    entry: str | None  # --entry for ctune init when the file has several kernels
    sidecar: str  # the reviewed sidecar
    style: str


CASES = (
    Case("vecadd", "vecadd.cu", None, "vecadd.yaml", "C++ linkage, grid-stride loop"),
    Case(
        "matmul_tiled",
        "matmul_tiled.cu",
        None,
        "matmul_tiled.yaml",
        "#ifndef tile width, 2-D blocks, shared memory",
    ),
    Case(
        "block_sum",
        "block_reduce.cu",
        None,
        "block_reduce.yaml",
        "template never instantiated, genes as template arguments",
    ),
    Case(
        "transpose_coalesced",
        "transpose.cu",
        "transpose_coalesced",
        "transpose_coalesced.yaml",
        "two kernels in one file, #define sizes, 2-D blocks",
    ),
    Case(
        "stencil7",
        "stencil3d.cu",
        None,
        "stencil3d.yaml",
        "Kernel Tuner style: bare block_size_x/y/z macros, 3-D blocks",
    ),
    Case(
        "softmax_rows",
        "softmax.cu",
        None,
        "softmax.yaml",
        "namespace, __launch_bounds__, dynamic shared memory",
    ),
)


def ctune(*args: str, cwd: Path, timeout: float = 1800) -> subprocess.CompletedProcess[str]:
    """The ctune command line, as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "ctune", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def spec_lines(path: Path) -> int:
    """Lines of a sidecar that say something: not blank, not only a comment."""
    return len(_meaningful(path))


def _meaningful(path: Path) -> list[str]:
    lines = (line.split("#", 1)[0].rstrip() for line in path.read_text().splitlines())
    return [line for line in lines if line.strip()]


def edited_lines(draft_path: Path, reviewed: Path) -> int:
    """Lines of the reviewed sidecar that the draft did not have as they are."""
    drafted = set(_meaningful(draft_path))
    return sum(1 for line in _meaningful(reviewed) if line not in drafted)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _error(done: subprocess.CompletedProcess[str]) -> str:
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    return lines[-1] if lines else f"exit {done.returncode}"


def draft(case: Case, work: Path) -> dict[str, Any]:
    """``ctune init`` on a copy of the kernel, then ``ctune space`` on the draft as it is."""
    folder = work / case.name
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(KERNELS_DIR / case.source, folder / case.source)
    entry = ["--entry", case.entry] if case.entry else []
    made = ctune("init", case.source, *entry, cwd=folder)
    out: dict[str, Any] = {"init": made.returncode == 0}
    if made.returncode != 0:
        return {**out, "error": _error(made)}
    sidecar = (folder / case.source).with_suffix(".yaml")
    out["draft_lines"] = spec_lines(sidecar)
    out["edited_lines"] = edited_lines(sidecar, KERNELS_DIR / case.sidecar)
    space = ctune("space", case.source, "--json", cwd=folder)
    out["space"] = space.returncode == 0
    if space.returncode != 0:
        return {**out, "error": _error(space)}
    report = json.loads(space.stdout)
    out["draft_genes"] = [
        g["name"] for g in report["genes"] if g["family"] not in ("nvcc", "ptxas")
    ]
    out["draft_valid"] = report["valid"]
    return out


def compile_default(case: Case, work: Path) -> dict[str, Any]:
    """The reviewed sidecar: its size, its space within the device, its default build."""
    sidecar = KERNELS_DIR / case.sidecar
    out: dict[str, Any] = {"spec_lines": spec_lines(sidecar)}
    space = ctune("space", str(sidecar), "--json", cwd=work)
    if space.returncode != 0:
        return {**out, "error": _error(space)}
    report = json.loads(space.stdout)
    device = report.get("device") or {}
    out.update(
        valid=report["valid"],
        product=report["product"],
        device_limits=device.get("limits"),
        ruled_out_by_device=device.get("ruled_out"),
    )
    built = ctune("compile", str(sidecar), "--json", cwd=work)
    if built.returncode != 0:
        return {**out, "compiled": False, "error": _error(built)}
    build = json.loads(built.stdout)["build"]
    out.update(
        compiled=build["outcome"] == "ok",
        entry_symbol=build.get("entry_symbol"),
        regs=build["resources"].get("regs"),
        static_smem_bytes=build["resources"].get("smem_bytes"),
    )
    return out


def tune(case: Case, work: Path, out_dir: Path, budget: int, seed: int) -> dict[str, Any]:
    """``ctune search --objective p50`` on the GPU; the search confirms in fresh processes."""
    sidecar = KERNELS_DIR / case.sidecar
    artifact = out_dir / "artifacts" / f"own-{case.name}.json"
    artifact.parent.mkdir(parents=True, exist_ok=True)
    args = ["--objective", "p50", "--budget", str(budget), "--seed", str(seed)]
    done = ctune("search", str(sidecar), *args, "--json", "--out", str(artifact), cwd=work)
    if done.returncode != 0:
        return {"searched": False, "error": _error(done)}
    result = json.loads(done.stdout)
    pinned = next((m for m in result["front"] if m["key"] == result.get("pinned")), None)
    baseline = result.get("baseline") or {}
    gain = (pinned or {}).get("gain") or {}
    return {
        "searched": True,
        "evaluations": result["evaluations"],
        "failures": result["failures"],
        "infeasible": result["infeasible"],
        "baseline_p50_ms": (baseline.get("values") or [None])[0],
        "tuned_p50_ms": (pinned or {}).get("values", [None])[0],
        "gain": gain.get("ratio"),
        "gain_ci": gain.get("ci"),
        "changed": (pinned or {}).get("changed"),
        "wall_s": result["timing"]["wall_s"],
        "artifact": str(artifact.relative_to(ROOT)) if artifact.is_relative_to(ROOT) else None,
    }


def run_case(
    case: Case, work: Path, out_dir: Path, *, gpu: bool, budget: int, seed: int
) -> dict[str, Any]:
    source = KERNELS_DIR / case.source
    before = sha256(source)
    record: dict[str, Any] = {
        "kernel": case.name,
        "source": f"bench/own_kernels/{case.source}",
        "sidecar": f"bench/own_kernels/{case.sidecar}",
        "style": case.style,
        "source_sha256": before,
        "draft": draft(case, work),
        **compile_default(case, work),
    }
    if gpu and record.get("compiled"):
        record["search"] = tune(case, work, out_dir, budget, seed)
    unchanged = sha256(source) == before
    record["source_unchanged"] = unchanged
    record["tuned_unmodified"] = bool(unchanged and record.get("search", {}).get("searched"))
    return record


def report(records: list[dict[str, Any]], gpu: dict[str, str] | None, wall_s: float) -> dict:
    return {
        "gpu": (gpu or {}).get("gpu_name", "none (compile-only)"),
        "fingerprint": gpu or {},
        "compile_only": gpu is None,
        "wall_s": round(wall_s, 1),
        "kernels": records,
        "tuned_unmodified": sum(r["tuned_unmodified"] for r in records),
        "compiled_unmodified": sum(
            bool(r.get("compiled") and r["source_unchanged"]) for r in records
        ),
        "spec_lines": {r["kernel"]: r["spec_lines"] for r in records},
        "draft_lines": {r["kernel"]: r["draft"].get("draft_lines") for r in records},
        "edited_lines": {r["kernel"]: r["draft"].get("edited_lines") for r in records},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--compile-only", action="store_true", help="no search, even on a GPU")
    parser.add_argument("--budget", type=int, default=24, help="evaluations per search")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--kernels", nargs="*", default=[c.name for c in CASES])
    args = parser.parse_args(argv)
    unknown = sorted(set(args.kernels) - {c.name for c in CASES})
    if unknown:
        parser.error(f"unknown kernels {unknown} (known: {', '.join(c.name for c in CASES)})")

    gpu = None
    if not args.compile_only:
        from ctune.evidence.identity import probe_gpu_machine

        gpu = probe_gpu_machine()
    started = time.time()
    records = []
    with tempfile.TemporaryDirectory(prefix="own-kernels-") as scratch:
        for case in (c for c in CASES if c.name in args.kernels):
            print(f"[{time.time() - started:6.0f} s] {case.name}: {case.style}", flush=True)
            records.append(
                run_case(
                    case,
                    Path(scratch),
                    args.out,
                    gpu=gpu is not None,
                    budget=args.budget,
                    seed=args.seed,
                )
            )
    data = report(records, gpu, time.time() - started)
    from ctune.evidence.identity import gpu_id

    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"own_kernels-{gpu_id(gpu)}.json"
    path.write_text(json.dumps(data, indent=2) + "\n")
    print(path)
    for r in records:
        state = (
            "tuned" if r["tuned_unmodified"] else ("compiled" if r.get("compiled") else "FAILED")
        )
        print(f"  {r['kernel']:22s} {r['spec_lines']:3d} spec lines  {state}  {r.get('error', '')}")
    return 0 if all(r.get("compiled") for r in records) else 1


if __name__ == "__main__":
    raise SystemExit(main())
