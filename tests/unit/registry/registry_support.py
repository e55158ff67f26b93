"""Helpers for the registry tests: a fixed fingerprint, artifact factories, git.

A plain module (not a conftest) so that writer subprocesses can import it too.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ctune.ci.gate_run import Remeasured
from ctune.evidence.compare import SampleSet
from ctune.evidence.identity import FIELDS
from ctune.measure import SamplingPlan
from ctune.measure.protocol import record as protocol_record
from ctune.records import Candidate, Measurement, Outcome, canonical_json, sha256_hex
from ctune.registry.schema import Artifact, FrontMember, ObjectiveInfo

DEVICE = "sm90-nvidia-h100-80gb-hbm3"
Run = Callable[..., tuple[int, str, str]]  # the `cli` fixture: args -> (code, stdout, stderr)

FINGERPRINT: dict[str, str] = {
    "nvcc_version": "Cuda compilation tools, release 13.0, V13.0.88",
    "ptxas_version": "13.0.88",
    "host_compiler": "g++ (Debian 12.2.0-14+deb12u1) 12.2.0",
    "arch": "sm_90",
    "kernel_source_sha256": "a" * 64,
    "spec_entry": "ctune_gemm",
    "spec_problem_sha256": "b" * 64,
    "spec_args_sha256": "b" * 64,
    "spec_reference_sha256": "b" * 64,
    "spec_tolerance_sha256": "b" * 64,
    "spec_metrics_sha256": "b" * 64,
    "spec_build_sha256": "b" * 64,
    "spec_space_sha256": "b" * 64,
    "protocol_version": "1",
    "l2_policy": "cold",
    "cutlass_version": "none",
    "harness_sha256": "c" * 64,
    "gpu_name": "NVIDIA H100 80GB HBM3",
    "sm": "sm_90",
    "sm_count": "132",
    "memory_bytes": "85520809984",
    "ecc": "on",
    "mig": "off",
    "compute_mode": "default",
    "driver": "580.159.04",
    "power_limit_w": "700",
    "clocks": "sm=1980MHz mem=2619MHz",
    "cuda_runtime": "13.0",
    "cupy_version": "14.2.0",
    "ctune_version": "0.1.0",
}
assert set(FINGERPRINT) == set(FIELDS)

GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "Test Author",
    "GIT_AUTHOR_EMAIL": "author@example.com",
    "GIT_COMMITTER_NAME": "Test Author",
    "GIT_COMMITTER_EMAIL": "author@example.com",
    "GIT_AUTHOR_DATE": "2025-01-01T00:00:00+00:00",
    "GIT_COMMITTER_DATE": "2025-01-01T00:00:00+00:00",
}


def member(
    kernel: str,
    block_m: int,
    p50_ms: float,
    *,
    medians: tuple[float, ...] = (),
    samples: tuple[float, ...] = (),
) -> FrontMember:
    cand = Candidate.of(kernel, {"BLOCK_M": block_m, "STAGES": 3, "ptxas_opt": "O3"})
    return FrontMember(
        candidate=cand,
        key=cand.key(),
        values=(p50_ms, 0.5 * p50_ms),
        summary={"p50_ms": p50_ms, "n": len(samples), "p50_ci_ms": [p50_ms * 0.99, p50_ms]},
        samples_ms=samples,
        process_medians_ms=medians,
        sass_sha256=f"{block_m:064x}",
        nvcc_flags=("-Xptxas", "-O3", "-maxrregcount=128"),
        defines={"BLOCK_M": block_m, "STAGES": 3, "USE_TMA": True},
        launch={"grid": (1024, 1, 1), "block": (256, 1, 1), "dynamic_smem_bytes": 49152},
        resources={"regs": 128, "spills_bytes": 0, "smem_bytes": None},
    )


def make_artifact(
    kernel: str = "gemm",
    problem: str = "sq4096",
    device_class: str = DEVICE,
    *,
    fingerprint: dict[str, str] | None = None,
    pinned: bool = True,
    medians: tuple[float, ...] = (1.0, 1.001, 0.999),
    **provenance: Any,
) -> Artifact:
    samples = tuple(m + d for m in medians for d in (-0.002, 0.0, 0.002))
    front = (
        member(kernel, 128, 1.0, medians=medians, samples=samples),
        member(kernel, 64, 1.2),
    )
    baseline = member(
        kernel,
        256,
        1.5,
        medians=tuple(1.5 * m for m in medians),
        samples=tuple(1.5 * s for s in samples),
    )
    return Artifact(
        kernel=kernel,
        problem=problem,
        device_class=device_class,
        fingerprint=dict(fingerprint or FINGERPRINT),
        objectives=(ObjectiveInfo("p50", "min", "ms"), ObjectiveInfo("energy", "min", "J")),
        front=front,
        baseline=baseline,
        pinned=front[0].key if pinned else None,
        provenance={
            "strategy": "nsga2",
            "seed": 7,
            "evaluations": 320,
            "code_commit": "0" * 40,
            **provenance,
        },
        protocol=protocol_record(SamplingPlan(quantile=0.5)),
    )


#: stand-in bytes for a controls file (a real one is NVIDIA's encrypted output)
CONTROLS_BYTES = b"\x17ctune test controls file\x00" * 40


def with_controls(
    a: Artifact, digest: str, index: int = 0, *, compiler: str = "ptxas", pin: bool = True
) -> Artifact:
    """``a`` with front member ``index`` built with the controls file ``digest``: its
    ``acf_<compiler>`` gene and its flags name it, as a search with ``--acf`` records it."""
    m = a.front[index]
    gene = f"acf_{compiler}"
    cand = Candidate.of(a.kernel, {**m.candidate.as_dict(), gene: digest})
    option = f"--apply-controls=controls/{digest}.acf"
    flags = (*m.nvcc_flags, *(("-Xptxas", option) if compiler == "ptxas" else (option,)))
    member = dataclasses.replace(m, candidate=cand, key=cand.key(), nvcc_flags=flags)
    front = (*a.front[:index], member, *a.front[index + 1 :])
    pinned = member.key if pin and index == 0 else a.pinned
    return dataclasses.replace(a, front=front, pinned=pinned)


def git(repo: Path, *args: str, check: bool = True) -> str:
    done = subprocess.run(
        ["git", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **GIT_IDENTITY},
    )
    if check and done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {done.stderr}")
    return done.stdout


def edit_file(path: Path, edit: Callable[[dict[str, Any]], object]) -> None:
    """Apply ``edit`` to the JSON file at ``path`` and recompute its digest where it has
    one: a hand edit that the digest does not catch (docs/security.md)."""
    data = json.loads(path.read_text())
    edit(data)
    if "digest" in data:
        body = {k: v for k, v in data.items() if k != "digest"}
        data["digest"] = sha256_hex(canonical_json(body))
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def one_line_error(err: str, *needles: str) -> None:
    """The CLI's error contract: exactly one line, no traceback, naming each needle."""
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], lines[0]


# --- sharing: a bare repository as the remote, clones as machines ---------------

REF = "ctune/registry"  # the registry ref machines share, checked out nowhere (the CI set-up)


def rel_of(a: Artifact) -> str:
    """Where ``a`` lives in a machine's repository (registry folder ``registry/``)."""
    return f"registry/{a.kernel}/{a.problem}/{a.device_class}.json"


def remote_files(bare: Path, ref: str = REF) -> dict[str, bytes]:
    """Every registry file at the remote's ref, byte for byte."""
    names = git(bare, "ls-tree", "-r", "--name-only", ref, "--", "registry").split()
    return {n: git_blob(bare, f"{ref}:{n}") for n in names}


def git_blob(repo: Path, spec: str) -> bytes:
    return subprocess.run(
        ["git", "cat-file", "blob", spec], cwd=repo, capture_output=True, check=True
    ).stdout


def git_tip(repo: Path, ref: str) -> str:
    """The commit ``ref`` names in ``repo``; "" when it does not exist."""
    return git(repo, "rev-parse", "--verify", "-q", ref, check=False).strip()


def init_repo(path: Path) -> Path:
    """A repository with one commit on main, a README, and a fixed identity."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.name", "Test Author")
    git(path, "config", "user.email", "author@example.com")
    (path / "README.md").write_text("project\n")
    git(path, "add", "README.md")
    git(path, "commit", "-q", "-m", "initial")
    return path


# --- synthetic timings and a stand-in for the GPU (gate tests) -------------------


def synthetic(
    rng: np.random.Generator,
    base_ms: float,
    *,
    processes: int = 5,
    n: int = 200,
    between_cv: float = 0.003,
    within_cv: float = 0.01,
) -> SampleSet:
    """Process medians move by run-to-run noise; samples scatter around each median."""
    medians = base_ms * (1 + rng.normal(0, between_cv, processes))
    samples = [m * (1 + rng.normal(0, within_cv, n)) for m in medians]
    return SampleSet(
        tuple(float(np.median(s)) for s in samples), tuple(float(x) for s in samples for x in s)
    )


def _measurements(key: str, s: SampleSet, per: int) -> list[Measurement]:
    return [
        Measurement(key, "sq4096", Outcome.OK, samples_ms=s.samples_ms[i * per : (i + 1) * per])
        for i in range(len(s.process_medians_ms))
    ]


def artifact_with_samples(rng: np.random.Generator) -> Artifact:
    a = make_artifact()
    pinned, base = synthetic(rng, 1.0), synthetic(rng, 1.5)

    def with_samples(m: FrontMember, s: SampleSet) -> FrontMember:
        return dataclasses.replace(
            m, process_medians_ms=s.process_medians_ms, samples_ms=s.samples_ms
        )

    return dataclasses.replace(
        a,
        front=(with_samples(a.front[0], pinned), a.front[1]),
        baseline=with_samples(a.baseline, base),
    )


class StandInRemeasurer:
    """Serves scripted timings per call; records what it was asked to measure. ``vendor``:
    the spec's vendor call's time per call, as the pinned member's scale is (absent: not
    measured, as without ``--vendor``); ``vendor_outcome``: its outcome."""

    def __init__(
        self,
        rng: np.random.Generator,
        scale: Sequence[float],
        canary: float = 1.0,
        outcome: Outcome = Outcome.OK,
        sass: str | None = None,
        vendor: Sequence[float] = (),
        vendor_outcome: Outcome = Outcome.OK,
    ) -> None:
        self.rng, self.scale, self.canary = rng, list(scale), canary
        self.outcome, self.sass = outcome, sass
        self.vendor, self.vendor_outcome = list(vendor), vendor_outcome
        self.calls: list[list[str]] = []

    def __call__(self, artifact: Artifact, members: Sequence[FrontMember], k: int) -> Remeasured:
        self.calls.append([m.key for m in members])
        scale = self.scale[min(len(self.calls), len(self.scale)) - 1]
        out: dict[str, list[Measurement]] = {}
        for m in members:
            base = 1.5 * self.canary if m is artifact.baseline else 1.0 * scale
            out[m.key] = _measurements(m.key, synthetic(self.rng, base, processes=k), 200)
            if self.outcome is not Outcome.OK and m is not artifact.baseline:
                out[m.key] = [Measurement(m.key, "sq4096", self.outcome, error="hang after 10 s")]
        sass = {m.key: self.sass or m.sass_sha256 for m in members}
        if not self.vendor:
            return Remeasured(out, sass)
        base = self.vendor[min(len(self.calls), len(self.vendor)) - 1]
        vendor = _measurements("gemm@vendor", synthetic(self.rng, base, processes=k), 200)
        if self.vendor_outcome is not Outcome.OK:
            vendor = [Measurement("gemm@vendor", "sq4096", self.vendor_outcome, error="no torch")]
        return Remeasured(out, sass, vendor, "cuBLAS")

    def build_ahead(self, work: Sequence[tuple[Artifact, Sequence[FrontMember]]]) -> None:
        """Where it stands in for ``RebuildingRemeasurer``: nothing to build."""


def built_saxpy_artifact(kernels: Path, cache: Path) -> Artifact:
    """A saxpy artifact as a search records it: members built by nvcc with their SASS,
    flags and launch geometry, the closure and this machine's fingerprint."""
    from ctune.compile.command import tuned_flags
    from ctune.compile.nvcc import NvccCompiler
    from ctune.compile.toolchain import probe_toolchain
    from ctune.spec import load_spec

    spec = load_spec(kernels / "saxpy.yaml")
    problem = spec.problem("n1m")
    template = make_artifact("saxpy", "n1m")
    members = []
    with NvccCompiler(spec, probe_toolchain(), cache) as compiler:
        for block, like in ((256, template.baseline), (128, template.front[0])):
            cand = spec.candidate({**spec.space.default_values(), "BLOCK": block})
            build = compiler.build(cand, problem)
            assert build.outcome.is_ok, build.log_tail
            members.append(
                dataclasses.replace(
                    like,
                    candidate=cand,
                    key=cand.key(),
                    sass_sha256=build.sass_sha256 or "",
                    nvcc_flags=tuple(tuned_flags(build.argv)),
                    defines={},
                    resources={},
                    launch=spec.launch_geometry(cand, problem),
                )
            )
    return built_here(template, spec, members)


def built_here(template: Artifact, spec: Any, members: list[FrontMember]) -> Artifact:
    """``template`` with ``members`` (built here: the default, then the pinned one) as its
    baseline and front, the spec's source closure, and this machine's fingerprint for the
    n1m problem (its GPU fields from :data:`FINGERPRINT`, there being no GPU here)."""
    from ctune import identity_probe
    from ctune.compile.deps import source_closure

    gpu = {k: v for k, v in FINGERPRINT.items() if FIELDS[k][1] == "gpu"}
    fp = {**gpu, **identity_probe.current_fingerprint(spec, False, problem="n1m")}
    return dataclasses.replace(
        template,
        fingerprint=fp,
        baseline=members[0],
        front=(members[1],),
        pinned=members[1].key,
        inputs={"closure": source_closure(spec)},
    )
