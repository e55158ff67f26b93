"""Does `ctune check` call exactly the right artifacts stale? (CPU only: nvcc, no GPU.)

Clones this repository (its committed registry included) into a temporary
folder, applies one edit at a time, runs the clone's `ctune check` on it and
reads the verdicts:

- no-op edits (comments in kernels and in the measuring code, a new problem,
  a description, the virtual environment elsewhere, another host compiler,
  another nvcc build that emits the same SASS, ...) must leave every artifact
  fresh or WARN: each STALE is a *false stale*;
- real edits (a kernel edit that changes SASS, a changed problem, a protocol
  bump, another nvcc that emits other SASS, another arch, changed sampling
  settings, ...) must make the affected artifacts STALE with the right reason:
  each miss is a *missed stale*.

Writes ``bench/results/staleness.json`` with ``false_stale``, ``missed_stale``,
``cases`` (each with its verdicts and wall time) and the wall time of
`ctune check` on the committed registry with an empty build cache (cold) and
again (warm).

    python bench/staleness.py [--out bench/results/staleness.json] [--only NAME ...]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VERDICT = re.compile(r"^(fresh|WARN|STALE) (\S+)")
ALL = ("attention", "cutlass_gemm", "gemm")
Edit = Callable[[Path, Path], dict[str, str]]  # (clone, scratch) -> extra environment


@dataclass
class Case:
    name: str
    real: bool  # True: the kernels' artifacts must be STALE; False: none may be
    edit: Edit
    # whose artifacts a real edit must make stale: kernels ("gemm") or keys ("gemm/sq4096/")
    kernels: tuple[str, ...] = ALL
    reason: str = ""  # a text the STALE lines must show (the field or file named)
    result: dict[str, object] = field(default_factory=dict)


# --- edits ---------------------------------------------------------------------------


def _append(rel: str, text: str) -> Edit:
    def edit(clone: Path, scratch: Path) -> dict[str, str]:
        with (clone / rel).open("a") as f:
            f.write(text)
        return {}

    return edit


def _replace(rel: str, old: str, new: str) -> Edit:
    def edit(clone: Path, scratch: Path) -> dict[str, str]:
        path = clone / rel
        text = path.read_text()
        if old not in text:
            raise SystemExit(
                f"bench/staleness.py: {rel} no longer contains {old!r}: update the case"
            )
        path.write_text(text.replace(old, new, 1))
        return {}

    return edit


def _env(**values: str) -> Edit:
    return lambda clone, scratch: dict(values)


def _tool(name: str, script: str) -> Edit:
    """A wrapper program named ``name`` first on PATH (and as CTUNE_NVCC for nvcc)."""

    def edit(clone: Path, scratch: Path) -> dict[str, str]:
        folder = scratch / f"bin-{name}"
        folder.mkdir(exist_ok=True)
        path = folder / name
        path.write_text(script)
        path.chmod(0o755)
        env = {"PATH": f"{folder}:{os.environ['PATH']}"}
        if name == "nvcc":
            env["CTUNE_NVCC"] = str(path)
        return env

    return edit


def _nvcc_wrapper(version: str, extra: str) -> Edit:
    real = shutil.which("nvcc") or "nvcc"
    return _tool(
        "nvcc",
        "#!/bin/sh\n"
        'for a in "$@"; do [ "$a" = --version ] && '
        f'{{ "{real}" --version | sed "s/V[0-9.]*$/V{version}/"; exit 0; }}; done\n'
        f'exec "{real}" {extra} "$@"\n',
    )


def _venv_elsewhere(clone: Path, scratch: Path) -> dict[str, str]:
    """The CUTLASS headers imported from another folder, as from a venv somewhere else."""
    import cutlass_library

    target = scratch / "elsewhere" / "site-packages"
    if not target.exists():
        shutil.copytree(Path(cutlass_library.__file__).parent, target / "cutlass_library")
    return {"PYTHONPATH": f"{clone}:{target}"}


def _host_compiler(clone: Path, scratch: Path) -> dict[str, str]:
    real = shutil.which("g++") or "g++"
    script = (
        "#!/bin/sh\n"
        'for a in "$@"; do [ "$a" = --version ] && { echo "g++ (Other) 99.1.0"; exit 0; }; done\n'
        f'exec "{real}" "$@"\n'
    )
    return _tool("g++", script)(clone, scratch)


def _protocol_bump(clone: Path, scratch: Path) -> dict[str, str]:
    """A real protocol change: a constant, the version and its released digest together."""
    plan = clone / "ctune/measure/plan.py"
    plan.write_text(plan.read_text().replace("WARMUP_AGREEMENT = 0.03", "WARMUP_AGREEMENT = 0.02"))
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from ctune.measure import protocol as p; print(p.definition_digest())",
        ],
        cwd=clone,
        env={**os.environ, "PYTHONPATH": str(clone)},
        capture_output=True,
        text=True,
        check=True,
    )
    proto = clone / "ctune/measure/protocol.py"
    text = proto.read_text().replace("PROTOCOL_VERSION = 1", "PROTOCOL_VERSION = 2")
    text = text.replace(
        "RELEASED: dict[int, str] = {",
        f'RELEASED: dict[int, str] = {{\n    2: "{done.stdout.strip()}",',
    )
    proto.write_text(text)
    return {}


GEMM_YAML = "kernels/gemm.yaml"
CASES = [
    # --- no-op edits: nothing may become STALE ---
    Case(
        "comment appended to gemm.cu", False, _append("kernels/gemm.cu", "\n// a reviewer's note\n")
    ),
    Case(
        "comment appended to attention.cu", False, _append("kernels/attention.cu", "\n/* note */\n")
    ),
    Case(
        "comment appended to cutlass_gemm.cu",
        False,
        _append("kernels/cutlass_gemm.cu", "\n// note\n"),
    ),
    Case("blank lines in gemm.cu", False, _append("kernels/gemm.cu", "\n\n\n")),
    Case(
        "docstring edit in ctune/evidence/stats.py",
        False,
        _replace(
            "ctune/evidence/stats.py",
            "Statistics over timing samples",
            "Statistics of timing samples",
        ),
    ),
    Case(
        "comment in ctune/measure/cupy_events.py",
        False,
        _append("ctune/measure/cupy_events.py", "\n# note\n"),
    ),
    Case(
        "refactor-only line in ctune/measure/plan.py",
        False,
        _append("ctune/measure/plan.py", "\n_UNUSED_ALIAS = SHORT_KERNEL_MS\n"),
    ),
    Case(
        "new problem in gemm.yaml",
        False,
        _replace(
            GEMM_YAML,
            "problems:\n",
            "problems:\n  - {name: sq1234, dims: {M: 1234, N: 1234, K: 1234}}\n",
        ),
    ),
    Case(
        "description of gemm.yaml",
        False,
        _replace(GEMM_YAML, "description: >-\n", "description: >-\n  Tuned by the bench.\n"),
    ),
    Case(
        "gene description in gemm.yaml",
        False,
        _replace(GEMM_YAML, 'description: "CTA tile rows', 'description: "rows per CTA tile,'),
    ),
    Case("comment in gemm.yaml", False, _append(GEMM_YAML, "\n# a comment\n")),
    Case(
        "new problem set in gemm.yaml",
        False,
        _replace(GEMM_YAML, "problem_sets:\n", "problem_sets:\n  bench-set: [sq4096]\n"),
    ),
    Case(
        "comment in the reference gemm_ref.py",
        False,
        _append("kernels/gemm_ref.py", "\n# checked in fp32\n"),
    ),
    Case("comment in attention.yaml", False, _append("kernels/attention.yaml", "\n# note\n")),
    Case("README edit", False, _append("README.md", "\nA line.\n")),
    Case("the venv elsewhere (CUTLASS headers at another path)", False, _venv_elsewhere),
    Case("a different host compiler", False, _host_compiler),
    Case("another nvcc build, same SASS", False, _nvcc_wrapper("13.0.99", "")),
    Case("CTUNE_JOBS changed", False, _env(CTUNE_JOBS="1")),
    Case("compile timeout changed", False, _env(CTUNE_COMPILE_TIMEOUT_S="900")),
    # --- real edits: the affected artifacts must be STALE, naming why ---
    Case(
        "gemm.cu edit that changes SASS",
        True,
        _append(
            "kernels/gemm.cu",
            '\nextern "C" __global__ void ctune_bench_extra(float* p) { p[0] = 1.f; }\n',
        ),
        ("gemm",),
        "gemm.cu (changed)",
    ),
    Case(
        "changed problem dims (gemm sq4096)",
        True,
        _replace(
            GEMM_YAML,
            "{name: sq4096, dims: {M: 4096, N: 4096, K: 4096}}",
            "{name: sq4096, dims: {M: 4096, N: 4096, K: 2048}}",
        ),
        ("gemm/sq4096/",),
        "spec_problem_sha256",
    ),
    Case("protocol bump", True, _protocol_bump, ALL, "protocol_version"),
    Case(
        "another nvcc emitting other SASS",
        True,
        _nvcc_wrapper("13.0.98", "-Xptxas -O1"),
        ALL,
        "SASS",
    ),
    Case("changed arch", True, _env(CTUNE_ARCH="sm_100a"), ALL, "arch"),
    Case("warm-up set to 0", True, _env(CTUNE_WARMUP_MS="0"), ALL, "plan.warmup_ms"),
    Case("timing budget shrunk", True, _env(CTUNE_REP_MS="10"), ALL, "plan.rep_ms"),
    Case("L2 policy hot", True, _env(CTUNE_L2_POLICY="hot"), ALL, "l2_policy"),
    Case(
        "reference code changed",
        True,
        _replace("kernels/gemm_ref.py", "astype(xp.float32)", "astype(xp.float16)"),
        ("gemm", "cutlass_gemm"),
        "spec_reference_sha256",
    ),
    Case(
        "tolerance changed",
        True,
        _replace(GEMM_YAML, "default: {rel_l2: 5.0e-3,", "default: {rel_l2: 1.0e-2,"),
        ("gemm",),
        "spec_tolerance_sha256",
    ),
    Case(
        "entry renamed",
        True,
        _replace(GEMM_YAML, "entry: ctune_gemm", "entry: ctune_gemm_v2"),
        ("gemm",),
        "spec_entry",
    ),
    Case(
        "launch rule changed",
        True,
        _replace(GEMM_YAML, 'block: ["block_threads", 1, 1]', 'block: ["block_threads", 2, 1]'),
        ("gemm",),
        "launch[",
    ),
]


# --- running -------------------------------------------------------------------------


def _check(clone: Path, env: dict[str, str]) -> tuple[int, str, float]:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "ctune", "check"],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    return done.returncode, done.stdout + done.stderr, time.perf_counter() - start


def _verdicts(output: str) -> dict[str, str]:
    out = {}
    for line in output.splitlines():
        m = VERDICT.match(line)
        if m:
            out[m.group(2)] = m.group(1)
    return out


def _reset(clone: Path) -> None:
    subprocess.run(["git", "checkout", "-q", "--", "."], cwd=clone, check=True)
    subprocess.run(["git", "clean", "-fdq"], cwd=clone, check=True)


def run_case(case: Case, clone: Path, scratch: Path, base_env: dict[str, str]) -> None:
    _reset(clone)
    env = {**base_env, **case.edit(clone, scratch)}
    code, output, wall = _check(clone, env)
    verdicts = _verdicts(output)
    stale = sorted(k for k, v in verdicts.items() if v == "STALE")
    prefixes = tuple(p if "/" in p else f"{p}/" for p in case.kernels)
    expected = sorted(k for k in verdicts if k.startswith(prefixes)) if case.real else []
    if case.real:
        ok = bool(expected) and set(expected) <= set(stale) and case.reason in output
    else:
        ok = not stale and code == 0
    case.result = {
        "name": case.name,
        "kind": "real" if case.real else "no-op",
        "ok": ok,
        "exit_code": code,
        "stale": stale,
        "expected_stale": expected,
        "reason_expected": case.reason,
        "wall_s": round(wall, 2),
        "output_tail": output[-1500:] if not ok else "",
    }
    print(
        f"{'ok  ' if ok else 'FAIL'} {case.name}: exit {code}, stale {len(stale)}, {wall:.1f} s",
        flush=True,
    )


def _fingerprint() -> dict[str, str]:
    def first(argv: list[str]) -> str:
        try:
            text = subprocess.run(argv, capture_output=True, text=True, check=False).stdout
        except OSError:
            return "missing"
        return next((ln for ln in text.splitlines() if ln.strip()), "")

    return {
        "machine": platform.node() or "unknown",
        "cpus": str(os.cpu_count()),
        "nvcc": first(["nvcc", "--version"])
        + " "
        + (first(["sh", "-c", "nvcc --version | tail -2 | head -1"])),
        "host_compiler": first(["g++", "--version"]),
        "python": platform.python_version(),
        "gpu": "none (CPU-only benchmark)",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "bench/results/staleness.json")
    parser.add_argument("--only", nargs="*", help="run only cases whose name contains one of these")
    args = parser.parse_args(argv)
    cases = [c for c in CASES if not args.only or any(o in c.name for o in args.only)]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ctune-staleness-") as tmp:
        scratch = Path(tmp)
        clone = scratch / "clone"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        base_env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("CTUNE_")},
            "PYTHONPATH": str(clone),
            "CTUNE_CACHE_DIR": str(scratch / "cache"),
        }
        code, output, cold = _check(clone, base_env)
        if code != 0:
            print(output)
            raise SystemExit("the committed registry is not fresh here: fix that first")
        _, _, warm = _check(clone, base_env)
        print(f"ctune check on the committed registry: cold {cold:.1f} s, warm {warm:.1f} s")
        for case in cases:
            run_case(case, clone, scratch, base_env)
    results = [c.result for c in cases]
    summary = {
        "false_stale": sum(1 for r in results if r["kind"] == "no-op" and not r["ok"]),
        "missed_stale": sum(1 for r in results if r["kind"] == "real" and not r["ok"]),
        "noop_cases": sum(1 for r in results if r["kind"] == "no-op"),
        "real_cases": sum(1 for r in results if r["kind"] == "real"),
        "check_wall_s": {"cold": round(cold, 2), "warm": round(warm, 2)},
        "wall_s": round(time.perf_counter() - started, 1),
        "fingerprint": _fingerprint(),
        "cases": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=2) + "\n")
    print(
        f"false_stale {summary['false_stale']} of {summary['noop_cases']}, "
        f"missed_stale {summary['missed_stale']} of {summary['real_cases']} -> {args.out}"
    )
    return 1 if summary["false_stale"] or summary["missed_stale"] else 0


if __name__ == "__main__":
    sys.exit(main())
