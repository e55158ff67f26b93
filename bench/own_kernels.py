"""Kernels written elsewhere, tuned as their authors wrote them: how much spec each needs.

The kernels under ``bench/own_kernels/`` are written in the styles CUDA code comes in,
none of them for ctune: C++ linkage with a grid-stride loop (``vecadd``), a textbook
shared-memory matmul with a ``#ifndef`` tile width and 2-D blocks (``matmul_tiled``), a
template the file never instantiates (``block_sum``), two kernels in one file with
``#define`` sizes (``transpose_coalesced``), Kernel Tuner's style with bare
``block_size_x/y/z`` macros and 3-D blocks (``stencil7``), and a kernel in a namespace
with ``__launch_bounds__`` and dynamic shared memory (``softmax_rows``). No kernel file
is edited: its sha256 is checked before and after.

The external set (``--set external``) is kernels from public projects (NVIDIA's CUDA
samples, Rodinia, PolyBench/GPU), listed with their upstream commit, licence and sha256
in ``bench/external/manifest.json`` and fetched unmodified into the git-ignored
``bench/external/src/`` by ``python bench/external_kernels.py fetch``; the specs and
references beside the manifest are ctune's. A kernel whose spec needs a feature this
ctune lacks (its ``needs``) and does not load is skipped with the reason. A kernel's
``include_dirs`` in the manifest are the folders its project's build passes with ``-I``:
``ctune init -I`` is given them, as a user would.

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

    python bench/own_kernels.py [--set own|external|all] [--compile-only] [--budget 24]
        [--kernels vecadd ...]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
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
EXTERNAL_DIR = ROOT / "bench" / "external"
# a sidecar line that says where the sidecar lies relative to the kernel, not a review
PLACEMENT_KEYS = ("source:",)


@dataclass(frozen=True)
class Case:
    name: str
    source: str  # the kernel file, as written, relative to folder
    entry: str | None  # --entry for ctune init when the file has several kernels
    sidecar: str  # the reviewed sidecar, in folder
    style: str
    folder: Path = KERNELS_DIR
    project: str | None = None  # external: the project folder under src/ copied for init
    needs: tuple[str, ...] = ()  # external: spec features this ctune may lack
    include_dirs: tuple[str, ...] = ()  # external: `ctune init -I` folders, under folder


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


def external_cases(manifest: Path = EXTERNAL_DIR / "manifest.json") -> tuple[Case, ...]:
    """The external set, from the manifest's kernel table."""
    data = json.loads(manifest.read_text())
    return tuple(
        Case(
            name=k["name"],
            source=f"src/{k['file']}",
            entry=k["entry"].split("<", 1)[0],
            sidecar=k["spec"],
            style=k["style"],
            folder=manifest.parent,
            project=k["file"].split("/", 1)[0],
            needs=tuple(k.get("needs", ())),
            include_dirs=tuple(k.get("include_dirs", ())),
        )
        for k in data["kernels"]
    )


SETS = {"own": lambda: CASES, "external": external_cases}


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


def edited_lines(draft_path: Path | None, reviewed: Path) -> int:
    """Lines of the reviewed sidecar that the draft did not have as they are (every line
    when there is no draft); a placement line (``source:``) is not an edit."""
    drafted = set(_meaningful(draft_path)) if draft_path is not None else set()
    return sum(
        1
        for line in _meaningful(reviewed)
        if line not in drafted and not line.strip().startswith(PLACEMENT_KEYS)
    )


_LIST_ITEM = re.compile(r"^\s*-\s*\{?\s*name:\s*([^,}\s]+)")
_KEY = re.compile(r"^(\s*)([A-Za-z_][\w.-]*)\s*:")


def _identities(path: Path) -> dict[str, tuple[str, bool]]:
    """Each meaningful line's place in the sidecar (``args.x``, ``problems.0``,
    ``launch.grid``, ``name``) with whether the line carried a ``# check:`` mark."""
    places: dict[str, tuple[str, bool]] = {}
    section, items = "", 0
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].rstrip()
        if not line.strip():
            continue
        item, key = _LIST_ITEM.match(line), _KEY.match(line)
        if item:  # an arg by its parameter's name, another list's item by its position
            place = f"{section}.{item.group(1) if section == 'args' else items}"
            items += 1
        elif key and not key.group(1):
            section, items = key.group(2), 0
            place = section
        elif key:
            place = f"{section}.{key.group(2)}"
        else:
            place = f"{section}.{line.strip()}"
        places[line] = (place, "# check:" in raw)
    return places


def unmarked_edits(draft_path: Path, reviewed: Path) -> list[str]:
    """Edited lines (as ``edited_lines`` counts them) whose place in the draft carried no
    ``# check:`` mark, or that the draft had no place for: the edits init did not flag. A
    key added under a marked section header (``metrics:  # check: add flops``) was flagged."""
    drafted = _identities(draft_path)
    marked = {place for place, mark in drafted.values() if mark}
    out = []
    for line, (place, _) in _identities(reviewed).items():
        if line in drafted or line.strip().startswith(PLACEMENT_KEYS):
            continue
        if place not in marked and place.split(".", 1)[0] not in marked:  # a marked section
            out.append(place)
    return out


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _error(done: subprocess.CompletedProcess[str]) -> str:
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    return lines[-1] if lines else f"exit {done.returncode}"


def draft(case: Case, work: Path) -> dict[str, Any]:
    """``ctune init`` on a copy of the kernel, then ``ctune space`` on the draft as it is."""
    folder = work / case.name
    folder.mkdir(parents=True, exist_ok=True)
    if case.project:  # the project's folder, so that the file's own includes resolve
        shutil.copytree(case.folder / "src" / case.project, folder / "src" / case.project)
    else:
        shutil.copy(case.folder / case.source, folder / case.source)
    source = folder / case.source
    entry = ["--entry", case.entry] if case.entry else []
    includes = [arg for d in case.include_dirs for arg in ("-I", str(folder / d))]
    made = ctune("init", source.name, *entry, *includes, cwd=source.parent)
    out: dict[str, Any] = {"init": made.returncode == 0}
    if made.returncode != 0:
        edited = edited_lines(None, case.folder / case.sidecar)
        return {**out, "edited_lines": edited, "error": _error(made)}
    sidecar = source.with_suffix(".yaml")
    placed = _place_include_dirs(sidecar, folder)
    out["draft_lines"] = spec_lines(sidecar)
    out["edited_lines"] = edited_lines(placed, case.folder / case.sidecar)
    out["check_marks"] = sum("# check:" in line for line in sidecar.read_text().splitlines())
    out["unmarked_edits"] = unmarked_edits(placed, case.folder / case.sidecar)
    space = ctune("space", source.name, "--json", cwd=source.parent)
    out["space"] = space.returncode == 0
    if space.returncode != 0:
        return {**out, "error": _error(space)}
    report = json.loads(space.stdout)
    out["draft_genes"] = [
        g["name"] for g in report["genes"] if g["family"] not in ("nvcc", "ptxas")
    ]
    out["draft_valid"] = report["valid"]
    return out


def _place_include_dirs(sidecar: Path, folder: Path) -> Path:
    """A copy of the draft to compare, its include_dirs named as the reviewed sidecar beside
    ``folder``'s ``src/`` names the same folders: like ``source:``, where the sidecar
    lies, not a review."""
    text = sidecar.read_text()
    line = re.search(r"^include_dirs: \[(.*)\]$", text, re.M)
    if line is None:
        return sidecar
    placed = [
        str((sidecar.parent / d.strip('"')).resolve().relative_to(folder.resolve()))
        for d in line.group(1).split(", ")
    ]
    copy = sidecar.with_name(f"{sidecar.stem}.placed.yaml")
    copy.write_text(text.replace(line.group(0), f"include_dirs: [{', '.join(placed)}]"))
    return copy


def _failed(case: Case, done: subprocess.CompletedProcess[str]) -> dict[str, str]:
    """A step that failed: an error, or a skip where the spec uses features this ctune
    may lack (the lead's GPU run then shows which ones were missing)."""
    if case.needs:
        return {"skipped": f"needs {', '.join(case.needs)}: {_error(done)}"}
    return {"error": _error(done)}


def compile_default(case: Case, work: Path) -> dict[str, Any]:
    """The reviewed sidecar: its size, its space within the device, its default build."""
    sidecar = case.folder / case.sidecar
    out: dict[str, Any] = {"spec_lines": spec_lines(sidecar)}
    space = ctune("space", str(sidecar), "--json", cwd=work)
    if space.returncode != 0:
        return {**out, **_failed(case, space)}
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
        return {**out, "compiled": False, **_failed(case, built)}
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
    sidecar = case.folder / case.sidecar
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
    source = case.folder / case.source
    folder = case.folder.relative_to(ROOT) if case.folder.is_relative_to(ROOT) else case.folder
    record: dict[str, Any] = {
        "kernel": case.name,
        "set": "external" if case.project else "own",
        "source": f"{folder}/{case.source}",
        "sidecar": f"{folder}/{case.sidecar}",
        "style": case.style,
    }
    if case.project:
        record.update(project=case.project, needs=list(case.needs))
    if not source.is_file():
        fetch = "python bench/external_kernels.py fetch"
        return {**record, "skipped": f"{case.source} not fetched: run `{fetch}`"}
    before = sha256(source)
    record.update(source_sha256=before, draft=draft(case, work), **compile_default(case, work))
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
        "tuned_unmodified": sum(bool(r.get("tuned_unmodified")) for r in records),
        "compiled_unmodified": sum(
            bool(r.get("compiled") and r.get("source_unchanged")) for r in records
        ),
        "skipped": {r["kernel"]: r["skipped"] for r in records if "skipped" in r},
        "spec_lines": {r["kernel"]: r.get("spec_lines") for r in records},
        "draft_lines": {r["kernel"]: r.get("draft", {}).get("draft_lines") for r in records},
        "edited_lines": {r["kernel"]: r.get("draft", {}).get("edited_lines") for r in records},
    }


def merged(previous: list[dict[str, Any]], now: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows of this run, after the earlier rows of kernels it did not run."""
    ran = {r["kernel"] for r in now}
    return [r for r in previous if r["kernel"] not in ran] + now


def write_results(
    path: Path,
    records: list[dict[str, Any]],
    previous: dict[str, Any] | None,
    gpu: Any,
    wall_s: float,
) -> None:
    """The result file of the kernels run so far, with ``previous``'s other rows (--merge)."""
    rows = records
    if previous is not None:
        wall_s += previous.get("wall_s", 0.0)
        rows = merged(previous["kernels"], records)
    path.write_text(json.dumps(report(rows, gpu, wall_s), indent=2) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--compile-only", action="store_true", help="no search, even on a GPU")
    parser.add_argument(
        "--merge",
        action="store_true",
        help="keep the result file's rows of kernels not run now (one set per call)",
    )
    parser.add_argument("--budget", type=int, default=24, help="evaluations per search")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", choices=[*SETS, "all"], default="all", dest="kernel_set")
    parser.add_argument("--kernels", nargs="*", help="only these (default: the whole set)")
    args = parser.parse_args(argv)
    names = list(SETS) if args.kernel_set == "all" else [args.kernel_set]
    cases = [case for name in names for case in SETS[name]()]
    known = [c.name for c in cases]
    unknown = sorted(set(args.kernels or ()) - set(known))
    if unknown:
        parser.error(f"unknown kernels {unknown} (known: {', '.join(known)})")
    if args.kernels:
        cases = [c for c in cases if c.name in args.kernels]

    gpu = None
    if not args.compile_only:
        from ctune.evidence.identity import probe_gpu_machine

        gpu = probe_gpu_machine()
    started = time.time()
    records: list[dict[str, Any]] = []
    from ctune.evidence.identity import gpu_id

    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"own_kernels-{gpu_id(gpu)}.json"
    previous = json.loads(path.read_text()) if args.merge and path.is_file() else None
    with tempfile.TemporaryDirectory(prefix="own-kernels-") as scratch:
        for case in cases:
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
            # after every kernel: a call cut short by its time limit keeps what it measured
            write_results(path, records, previous, gpu, time.time() - started)
    if not cases:
        write_results(path, records, previous, gpu, 0.0)
    print(path)
    for r in records:
        if "skipped" in r:
            print(f"  {r['kernel']:22s} skipped: {r['skipped']}")
            continue
        state = (
            "tuned" if r["tuned_unmodified"] else ("compiled" if r.get("compiled") else "FAILED")
        )
        print(f"  {r['kernel']:22s} {r['spec_lines']:3d} spec lines  {state}  {r.get('error', '')}")
    return 0 if all(r.get("compiled") for r in records if "skipped" not in r) else 1


if __name__ == "__main__":
    raise SystemExit(main())
