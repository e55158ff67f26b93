"""Does `ctune check` call exactly the right artifacts stale? (CPU only: nvcc, no GPU.)

Clones this repository (its committed registry included) into a temporary
folder, applies one edit at a time, runs the clone's `ctune check` on it and
reads the verdicts:

- no-op edits (comments and docstrings in kernels, references and the measuring
  code, a new problem, a description, a space extension, a new gene whose
  default renders nothing, a render rule that keeps the SASS, the virtual
  environment elsewhere, another host compiler, another nvcc build that emits
  the same SASS, ...) must leave every artifact fresh or WARN: each STALE is a
  *false stale*;
- real edits (a kernel, include or CUTLASS header edit that changes SASS, a
  changed problem, a gene default in the spec or the flag catalogue, a render
  rule of a flag, a protocol bump, another nvcc that emits other SASS, another
  arch, changed sampling settings, ...) must make the affected artifacts STALE,
  each naming the right reason: each miss is a *missed stale*.

The whole committed registry is checked once, with an empty build cache (cold)
and again (warm); the cases then run on a copy of it cut to the small kernels'
artifacts and one CUTLASS GEMM artifact (``KEEP``), so that an edit that
rebuilds every member costs a few builds, not a hundred CUTLASS ones.

Writes ``bench/results/staleness.json`` with ``false_stale``, ``missed_stale``,
``cases`` (each with its verdicts and wall time) and those two wall times.

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
VERDICT = re.compile(r"^(fresh|WARN|STALE) ([^\s:]+)")
ALL = ("hand_attention", "gemm", "hand_gemm")
#: the registry the cases run on: these artifacts (key prefixes) of the committed one
KEEP = ("hand_attention/", "hand_gemm/", "gemm/sq4096/")
Edit = Callable[[Path, Path], dict[str, str]]  # (clone, scratch) -> extra environment


@dataclass
class Case:
    name: str
    real: bool  # True: the kernels' artifacts must be STALE; False: none may be
    edit: Edit
    # whose artifacts a real edit must make stale: kernels ("hand_gemm") or keys
    # ("hand_gemm/sq4096/")
    kernels: tuple[str, ...] = ALL
    # texts each of those artifacts' STALE report must show (the field, file or member named)
    reason: str | tuple[str, ...] = ""
    result: dict[str, object] = field(default_factory=dict)

    @property
    def reasons(self) -> tuple[str, ...]:
        return (self.reason,) if isinstance(self.reason, str) else self.reason


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


def _rename(rel: str, old: str, new: str) -> Edit:
    """Every whole-word ``old`` in ``rel`` becomes ``new``."""

    def edit(clone: Path, scratch: Path) -> dict[str, str]:
        path = clone / rel
        text, count = re.subn(rf"\b{re.escape(old)}\b", new, path.read_text())
        if not count:
            raise SystemExit(f"bench/staleness.py: {rel} no longer has {old!r}: update the case")
        path.write_text(text)
        return {}

    return edit


def _edits(*edits: Edit) -> Edit:
    """Several edits as one case."""

    def edit(clone: Path, scratch: Path) -> dict[str, str]:
        env: dict[str, str] = {}
        for one in edits:
            env.update(one(clone, scratch))
        return env

    return edit


def _write(rel: str, text: str) -> Edit:
    def edit(clone: Path, scratch: Path) -> dict[str, str]:
        (clone / rel).write_text(text)
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


def _cutlass_copy(clone: Path, target: Path) -> dict[str, str]:
    """The CUTLASS headers imported from ``target`` (a copy), as from a venv elsewhere."""
    import cutlass_library

    if not target.exists():
        shutil.copytree(Path(cutlass_library.__file__).parent, target / "cutlass_library")
    return {"PYTHONPATH": f"{clone}:{target}"}


def _venv_elsewhere(clone: Path, scratch: Path) -> dict[str, str]:
    return _cutlass_copy(clone, scratch / "elsewhere" / "site-packages")


def _cutlass_header(header: str, text: str) -> Edit:
    """``text`` appended to a CUTLASS header (``cute/tensor.hpp``) of a copy of the wheel."""

    def edit(clone: Path, scratch: Path) -> dict[str, str]:
        target = scratch / f"cutlass-{abs(hash(text)):x}" / "site-packages"
        shutil.rmtree(target, ignore_errors=True)
        env = _cutlass_copy(clone, target)
        path = target / "cutlass_library" / "source" / "include" / header
        with path.open("a") as f:
            f.write(text)
        return env

    return edit


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


GEMM_YAML = "kernels/hand_gemm.yaml"
ATTENTION_YAML = "kernels/hand_attention.yaml"
CATALOGUE = "ctune/spec/space/nvcc.py"
KERNEL = 'extern "C" __global__ void ctune_bench_extra(float* p) { p[0] = 1.f; }\n'
PTXAS_OPT = '    return [] if v == 3 else ["-Xptxas", f"-O{v}"]'
CASES = [
    # --- no-op edits: nothing may become STALE ---
    Case(
        "comment appended to hand_gemm.cu",
        False,
        _append("kernels/hand_gemm.cu", "\n// a reviewer's note\n"),
    ),
    Case(
        "comment appended to hand_attention.cu",
        False,
        _append("kernels/hand_attention.cu", "\n/* note */\n"),
    ),
    Case(
        "comment appended to gemm.cu (CUTLASS)",
        False,
        _append("kernels/gemm.cu", "\n// note\n"),
    ),
    Case("blank lines in hand_gemm.cu", False, _append("kernels/hand_gemm.cu", "\n\n\n")),
    Case(
        "indentation of a line in hand_gemm.cu",
        False,
        _replace("kernels/hand_gemm.cu", "#define BLOCK_M 128", "#define   BLOCK_M   128"),
    ),
    Case(
        "a local variable renamed in hand_gemm.cu (same SASS)",
        False,
        _rename("kernels/hand_gemm.cu", "gsize", "group_rows"),
    ),
    Case(
        "comment in a CUTLASS header",
        False,
        _cutlass_header("cute/tensor.hpp", "\n// a note in the wheel\n"),
    ),
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
        "dims of a problem without artifacts (gemm sq8192)",
        False,
        _replace(
            GEMM_YAML, "dims: {M: 8192, N: 8192, K: 8192}", "dims: {M: 8192, N: 8192, K: 4096}"
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
        "space extension: a new gene value (gemm BLOCK_K 128)",
        False,
        _replace(GEMM_YAML, "BLOCK_K: {values: [32, 64]", "BLOCK_K: {values: [32, 64, 128]"),
    ),
    Case(
        "a new restriction the members meet (gemm)",
        False,
        _replace(GEMM_YAML, "restrictions:\n", 'restrictions:\n  - "STAGES <= 6"\n'),
    ),
    Case(
        "a new gene whose default renders nothing (fast_math in gemm's flags)",
        False,
        _replace(GEMM_YAML, "flags: [ptxas_opt,", "flags: [fast_math, ptxas_opt,"),
    ),
    Case(
        "a new gene whose default is the source's own (-DCTUNE_BF16=0)",
        False,
        _replace(GEMM_YAML, "genes:\n", "genes:\n  CTUNE_BF16: {values: [0, 1], default: 0}\n"),
    ),
    Case(
        "launch rule rewritten, same geometry (gemm block)",
        False,
        _replace(
            GEMM_YAML,
            'block: ["block_threads", 1, 1]',
            'block: ["threads + (128 if WGMMA == 2 else 0)", 1, 1]',
        ),
    ),
    Case(
        "comment in the reference gemm_ref.py",
        False,
        _append("kernels/gemm_ref.py", "\n# checked in fp32\n"),
    ),
    Case(
        "docstring edit in the reference gemm_ref.py",
        False,
        _replace("kernels/gemm_ref.py", '"""Reference for', '"""The reference for'),
    ),
    Case(
        "docstring added to the reference function (attention_ref.py)",
        False,
        _replace(
            "kernels/attention_ref.py",
            "dict[str, Any]:\n    q, k, v",
            'dict[str, Any]:\n    """Softmax attention, one head at a time."""\n    q, k, v',
        ),
    ),
    Case("comment in attention.yaml", False, _append(ATTENTION_YAML, "\n# note\n")),
    Case(
        "a kernel without artifacts edited (tiled_matmul.yaml)",
        False,
        _append("kernels/tiled_matmul.yaml", "\n# note\n"),
    ),
    Case("README edit", False, _append("README.md", "\nA line.\n")),
    Case(
        "render rule rewritten, same argv (ptxas_opt)",
        False,
        _replace(
            CATALOGUE,
            PTXAS_OPT,
            '    if v == 3:\n        return []\n    return ["-Xptxas", "-O" + str(v)]',
        ),
    ),
    Case(
        "render rule passing the default explicitly, same SASS (-Xptxas -O3)",
        False,
        _replace(CATALOGUE, PTXAS_OPT, '    return ["-Xptxas", f"-O{v}"]'),
    ),
    Case(
        "comment and description in the flag catalogue",
        False,
        _replace(
            CATALOGUE,
            '"ptxas optimisation level -O"),',
            '"ptxas -O level"),  # a note',
        ),
    ),
    Case("the venv elsewhere (CUTLASS headers at another path)", False, _venv_elsewhere),
    Case("a different host compiler", False, _host_compiler),
    Case("another nvcc build, same SASS (version string)", False, _nvcc_wrapper("13.0.99", "")),
    Case("CTUNE_JOBS changed", False, _env(CTUNE_JOBS="1")),
    Case("compile timeout changed", False, _env(CTUNE_COMPILE_TIMEOUT_S="900")),
    # --- real edits: the affected artifacts must be STALE, naming why ---
    Case(
        "hand_gemm.cu edit that changes SASS",
        True,
        _append("kernels/hand_gemm.cu", "\n" + KERNEL),
        ("hand_gemm",),
        ("hand_gemm.cu (changed)", "SASS"),
    ),
    Case(
        "an include file added to hand_gemm.cu, other SASS",
        True,
        _edits(
            _write("kernels/bench_extra.h", KERNEL),
            _replace(
                "kernels/hand_gemm.cu",
                "#include <stdint.h>\n",
                '#include <stdint.h>\n#include "bench_extra.h"\n',
            ),
        ),
        ("hand_gemm",),
        ("bench_extra.h (added)", "SASS"),
    ),
    Case(
        "a CUTLASS header edit that changes SASS",
        True,
        _cutlass_header("cute/tensor.hpp", "\n" + KERNEL),
        ("gemm",),
        ("@cutlass/cute/tensor.hpp (changed)", "SASS"),
    ),
    Case(
        "changed problem dims (hand_gemm sq4096)",
        True,
        _replace(
            GEMM_YAML,
            "{name: sq4096, dims: {M: 4096, N: 4096, K: 4096}}",
            "{name: sq4096, dims: {M: 4096, N: 4096, K: 2048}}",
        ),
        ("hand_gemm/sq4096/",),
        "spec_problem_sha256",
    ),
    Case(
        "problem defines added (hand_gemm sq4096 in bf16)",
        True,
        _replace(
            GEMM_YAML,
            "{name: sq4096, dims: {M: 4096, N: 4096, K: 4096}}",
            "{name: sq4096, dims: {M: 4096, N: 4096, K: 4096}, defines: {CTUNE_BF16: 1}}",
        ),
        ("hand_gemm/sq4096/",),
        "spec_problem_sha256",
    ),
    Case(
        "problem removed (hand_gemm sq4096)",
        True,
        _replace(GEMM_YAML, "  - {name: sq4096, dims: {M: 4096, N: 4096, K: 4096}}\n", ""),
        ("hand_gemm/sq4096/",),
        "sq4096",
    ),
    Case(
        "gene default in the spec (gemm GROUP_M 8 -> 1)",
        True,
        _replace(
            GEMM_YAML,
            "GROUP_M: {values: [1, 8], default: 8",
            "GROUP_M: {values: [1, 8], default: 1",
        ),
        ("hand_gemm",),
        "default[GROUP_M]: 8 -> 1",
    ),
    Case(
        "gene default in the spec (attention STAGES 2 -> 3)",
        True,
        _replace(
            ATTENTION_YAML,
            "STAGES: {values: [1, 2, 3], default: 2",
            "STAGES: {values: [1, 2, 3], default: 3",
        ),
        ("hand_attention",),
        "default[STAGES]: 2 -> 3",
    ),
    Case(
        "flag catalogue default (ptxas_opt 3 -> 2)",
        True,
        _replace(CATALOGUE, '(3, 2, 1, 0), 3, "ptxas"', '(3, 2, 1, 0), 2, "ptxas"'),
        ALL,
        "default[ptxas_opt]: 3 -> 2",
    ),
    Case(
        "flag catalogue default (register_usage_level 5 -> 8)",
        True,
        _replace(
            CATALOGUE,
            "(5, 0, 2, 4, 6, 8, 10),\n            5,",
            "(5, 0, 2, 4, 6, 8, 10),\n            8,",
        ),
        ALL,
        "default[register_usage_level]: 5 -> 8",
    ),
    Case(
        "render rule of a flag (ptxas_opt one level lower)",
        True,
        _replace(CATALOGUE, PTXAS_OPT, '    return ["-Xptxas", f"-O{int(v) - 1}"]'),
        ("hand_gemm", "gemm"),  # attention's SASS is the same at -O2 (rebuilt: still valid)
        ("nvcc_flags[", "-Xptxas -O2", "SASS"),
    ),
    Case(
        "render rule of a flag (fast_math inverted)",
        True,
        _replace(
            CATALOGUE, '_switch("--use_fast_math")', 'lambda v: [] if v else ["--use_fast_math"]'
        ),
        ("hand_attention",),
        ("nvcc_flags[", "--use_fast_math", "SASS"),
    ),
    Case(
        "a new gene whose default passes a define (-DCTUNE_BF16=1)",
        True,
        _replace(GEMM_YAML, "genes:\n", "genes:\n  CTUNE_BF16: {values: [0, 1], default: 1}\n"),
        ("hand_gemm",),
        ("-DCTUNE_BF16=1", "SASS"),
    ),
    Case(
        "extra flags that change the code (attention --use_fast_math)",
        True,
        _replace(ATTENTION_YAML, "flags: [", 'extra_flags: ["--use_fast_math"]\nflags: ['),
        ("hand_attention",),
        ("spec_build_sha256", "SASS"),
    ),
    Case("protocol bump", True, _protocol_bump, ALL, "protocol_version"),
    Case(
        "another nvcc emitting other SASS",
        True,
        _nvcc_wrapper("13.0.98", "-Xptxas -O1"),
        ALL,
        ("nvcc_version", "SASS"),
    ),
    Case("changed arch (CTUNE_ARCH)", True, _env(CTUNE_ARCH="sm_100a"), ALL, "arch"),
    Case(
        "arch in the spec (gemm sm_90a -> sm_90)",
        True,
        _replace(GEMM_YAML, "arch: sm_90a", "arch: sm_90"),
        ("hand_gemm",),
        "arch: sm_90a -> sm_90",
    ),
    Case("warm-up set to 0", True, _env(CTUNE_WARMUP_MS="0"), ALL, "plan.warmup_ms"),
    Case("timing budget shrunk", True, _env(CTUNE_REP_MS="10"), ALL, "plan.rep_ms"),
    Case(
        "energy window changed", True, _env(CTUNE_ENERGY_WINDOW_S="2"), ALL, "plan.energy_window_s"
    ),
    Case("L2 policy hot (CTUNE_L2_POLICY)", True, _env(CTUNE_L2_POLICY="hot"), ALL, "l2_policy"),
    Case(
        "L2 policy in the spec (gemm hot)",
        True,
        _replace(GEMM_YAML, "l2_policy: cold", "l2_policy: hot"),
        ("hand_gemm",),
        "l2_policy: cold -> hot",
    ),
    Case(
        "reference code changed",
        True,
        _replace("kernels/gemm_ref.py", "astype(xp.float32)", "astype(xp.float16)"),
        ("hand_gemm", "gemm"),
        "spec_reference_sha256",
    ),
    Case(
        "reference logic changed (attention scale)",
        True,
        _replace("kernels/attention_ref.py", "1.0 / math.sqrt(", "2.0 / math.sqrt("),
        ("hand_attention",),
        "spec_reference_sha256",
    ),
    Case(
        "reference no longer deterministic (gemm)",
        True,
        _replace(GEMM_YAML, "deterministic: true", "deterministic: false"),
        ("hand_gemm",),
        "spec_reference_sha256",
    ),
    Case(
        "tolerance changed",
        True,
        _replace(GEMM_YAML, "default: {rel_l2: 5.0e-3,", "default: {rel_l2: 1.0e-2,"),
        ("hand_gemm",),
        "spec_tolerance_sha256",
    ),
    Case(
        "input init changed (gemm A uniform [-2, 2])",
        True,
        _replace(
            GEMM_YAML,
            "shape: [M, K], init: {uniform: [-1, 1]}",
            "shape: [M, K], init: {uniform: [-2, 2]}",
        ),
        ("hand_gemm",),
        "spec_args_sha256",
    ),
    Case(
        "metrics changed (gemm flops)",
        True,
        _replace(GEMM_YAML, 'flops: "2 * M * N * K"', 'flops: "2 * M * N * K + M * N"'),
        ("hand_gemm",),
        "spec_metrics_sha256",
    ),
    Case(
        "entry renamed",
        True,
        _replace(GEMM_YAML, "entry: ctune_gemm", "entry: ctune_gemm_v2"),
        ("hand_gemm",),
        "spec_entry",
    ),
    Case(
        "launch rule changed",
        True,
        _replace(GEMM_YAML, 'block: ["block_threads", 1, 1]', 'block: ["block_threads", 2, 1]'),
        ("hand_gemm",),
        "launch[",
    ),
    Case(
        "shared memory rule changed (gemm smem_bytes)",
        True,
        _replace(
            GEMM_YAML, "    STAGES * (BLOCK_M + BLOCK_N)", "    (STAGES + 1) * (BLOCK_M + BLOCK_N)"
        ),
        ("hand_gemm",),
        "launch[",
    ),
]


# --- running -------------------------------------------------------------------------


def _check(clone: Path, env: dict[str, str]) -> tuple[int, str, float]:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "ctune", "check", "--verbose"],  # every artifact named
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    return done.returncode, done.stdout + done.stderr, time.perf_counter() - start


def _reports(output: str) -> dict[str, tuple[str, str]]:
    """Artifact -> (verdict, its report: the verdict line and the reasons indented under it)."""
    out: dict[str, tuple[str, str]] = {}
    current = ""
    for line in output.splitlines():
        m = VERDICT.match(line)
        if m:
            current = m.group(2)
            out[current] = (m.group(1), line)
        elif current and line.startswith("  "):
            verdict, text = out[current]
            out[current] = (verdict, f"{text}\n{line}")
        else:
            current = ""
    return out


def _reset(clone: Path) -> None:
    subprocess.run(["git", "checkout", "-q", "--", "."], cwd=clone, check=True)
    subprocess.run(["git", "clean", "-fdq"], cwd=clone, check=True)


def _keep_only(clone: Path, keep: tuple[str, ...]) -> list[str]:
    """Cut the clone's registry to the artifacts under ``keep`` (committed in the clone, so
    each case's reset keeps the cut); returns the keys kept."""
    registry = clone / "registry"
    kept = []
    for path in sorted(registry.glob("*/*/*.json")):
        key = path.relative_to(registry).with_suffix("").as_posix()
        if key.startswith(keep):
            kept.append(key)
        else:
            path.unlink()
    identity = ["-c", "user.name=bench", "-c", "user.email=bench@localhost"]
    subprocess.run(["git", "add", "-A", "registry"], cwd=clone, check=True)
    subprocess.run(
        ["git", *identity, "commit", "-q", "-m", "bench: the registry the cases run on"],
        cwd=clone,
        check=True,
    )
    return kept


def run_case(case: Case, clone: Path, scratch: Path, base_env: dict[str, str]) -> None:
    _reset(clone)
    env = {**base_env, **case.edit(clone, scratch)}
    code, output, wall = _check(clone, env)
    reports = _reports(output)
    stale = sorted(k for k, (v, _) in reports.items() if v == "STALE")
    prefixes = tuple(p if "/" in p else f"{p}/" for p in case.kernels)
    expected = sorted(k for k in reports if k.startswith(prefixes)) if case.real else []
    unexplained = [k for k in expected if not all(r in reports[k][1] for r in case.reasons)]
    if case.real:
        ok = bool(expected) and set(expected) <= set(stale) and not unexplained
    else:
        ok = not stale and code == 0
    case.result = {
        "name": case.name,
        "kind": "real" if case.real else "no-op",
        "ok": ok,
        "exit_code": code,
        "stale": stale,
        "expected_stale": expected,
        "reason_expected": list(case.reasons),
        "verdicts": {k: v for k, (v, _) in sorted(reports.items())},
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
        if code != 0 or "STALE" in output:
            print(output)
            raise SystemExit("the committed registry is not fresh here: fix that first")
        committed = len(_reports(output))
        _, _, warm = _check(clone, base_env)
        print(
            f"ctune check on the committed registry ({committed} artifacts): "
            f"cold {cold:.1f} s, warm {warm:.1f} s"
        )
        kept = _keep_only(clone, KEEP)
        print(f"the cases run on {len(kept)} of them: {', '.join(kept)}")
        for case in cases:
            run_case(case, clone, scratch, base_env)
    results = [c.result for c in cases]
    summary = {
        "false_stale": sum(1 for r in results if r["kind"] == "no-op" and not r["ok"]),
        "missed_stale": sum(1 for r in results if r["kind"] == "real" and not r["ok"]),
        "noop_cases": sum(1 for r in results if r["kind"] == "no-op"),
        "real_cases": sum(1 for r in results if r["kind"] == "real"),
        "check_wall_s": {"cold": round(cold, 2), "warm": round(warm, 2)},
        "committed_artifacts": committed,
        "case_artifacts": kept,
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
