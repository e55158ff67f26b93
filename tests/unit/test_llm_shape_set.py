"""The CUTLASS GEMM's LLM shape set, checked against the models' own numbers, and the bench
helpers that carry a problem-set search between GPU calls and judge its dispatch table."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from ctune.spec import KernelSpec, load_spec

ROOT = Path(__file__).parents[2]
MODELS = {  # hidden, MLP, heads, KV heads, head dim
    "llm8b": (4096, 14336, 32, 8, 128),
    "llm70b": (8192, 28672, 64, 8, 128),
}
TOKENS = (1, 16, 128, 2048, 8192)


@pytest.fixture(scope="module")
def spec() -> KernelSpec:
    pytest.importorskip(
        "cutlass_library", reason="the spec's @cutlass include needs nvidia-cutlass"
    )
    return load_spec(ROOT / "kernels" / "gemm.yaml")


def expected() -> dict[str, dict[str, int]]:
    out = {}
    for model, (h, f, heads, kv, d) in MODELS.items():
        proj = {
            "qkv": ((heads + 2 * kv) * d, h),
            "o": (h, heads * d),
            "gateup": (2 * f, h),
            "down": (h, f),
        }
        for name, (n, k) in proj.items():
            for t in TOKENS:
                out[f"{model}-{name}-t{t}"] = {"M": t, "N": n, "K": k}
    return out


def test_every_projection_at_every_t_in_both_dtypes(spec: KernelSpec) -> None:
    shapes = expected()
    assert len(shapes) == 40
    for name, dims in shapes.items():
        fp16, bf16 = spec.problem(name), spec.problem(name + "-bf16")
        assert fp16.dims == dims and bf16.dims == dims
        assert fp16.defines == {} and bf16.defines == {"CTUNE_BF16": 1}
        assert {a: bf16.dtypes.get(a) for a in "ABC"} == dict.fromkeys("ABC", "bfloat16")


def test_the_sets(spec: KernelSpec) -> None:
    sets = spec.problem_sets
    shapes = expected()
    assert set(sets["llm-fp16"]) == set(shapes)
    assert set(sets["llm-bf16"]) == {n + "-bf16" for n in shapes}
    assert set(sets["llm-all"]) == set(sets["llm-fp16"]) | set(sets["llm-bf16"])
    for model in MODELS:
        assert set(sets[f"{model}-fp16"]) == {n for n in shapes if n.startswith(model + "-")}
    decode = {n for n, d in shapes.items() if d["M"] <= 128}
    assert set(sets["decode-fp16"]) == decode
    assert set(sets["decode-bf16"]) == {n + "-bf16" for n in decode}


def test_tma_alignment_holds_and_m1_is_allowed(spec: KernelSpec) -> None:
    for name in spec.problem_sets["llm-all"]:
        dims = spec.problem(name).dims
        assert dims["N"] % 8 == 0 and dims["K"] % 8 == 0  # 16-byte rows for TMA
        assert spec.space.is_valid(spec.space.default_values(), dims)


def test_restrictions_rule_out_the_combinations_that_do_not_compile(spec: KernelSpec) -> None:
    d = spec.problem("llm8b-o-t1").dims
    base = spec.space.default_values()
    coop_epi2 = {**base, "EPILOGUE": 2}  # cooperative kernel, 64-row TMA epilogue
    assert not spec.space.is_valid(coop_epi2, d)
    pingpong = {**base, "EPILOGUE": 2, "SCHEDULE": 1, "TILE_M": 64}
    assert spec.space.is_valid(pingpong, d)
    coop64 = {**base, "TILE_M": 64}  # cooperative needs two 64-row consumer warpgroups
    assert not spec.space.is_valid(coop64, d)
    decode = {**base, "SWAP_AB": 1, "TILE_N": 16, "SCHEDULE": 1, "TILE_M": 64}
    assert spec.space.is_valid(decode, d)


def _bench(name: str) -> ModuleType:
    path = ROOT / "bench" / f"{name}.py"
    module_spec = importlib.util.spec_from_file_location(f"bench_{name}", path)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_spec.name] = module
    module_spec.loader.exec_module(module)
    return module


def test_carry_packs_only_finalists_and_unpacks_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    carry = _bench("carry_builds")
    cache = tmp_path / "cache"
    for key in ("keep1", "keep2", "loser"):
        (cache / "builds" / key).mkdir(parents=True)
        (cache / "builds" / key / "kernel.so").write_bytes(key.encode() * 100)
    finalists = tmp_path / "finalists.json"
    entries = [{"build_key": "keep1"}, {"build_key": "keep2"}, {"build_key": ""}]
    finalists.write_text(json.dumps({"finalists": [*entries, {"build_key": "gone"}]}))
    monkeypatch.setenv("CTUNE_CACHE_DIR", str(cache))
    archive = tmp_path / "carry" / "builds.tgz"
    assert carry.main(["pack", str(archive), str(finalists)]) == 0
    monkeypatch.setenv("CTUNE_CACHE_DIR", str(tmp_path / "fresh"))
    assert carry.main(["unpack", str(archive)]) == 0
    got = sorted(p.name for p in (tmp_path / "fresh" / "builds").iterdir())
    assert got == ["keep1", "keep2"]
    assert (tmp_path / "fresh" / "builds" / "keep1" / "kernel.so").read_bytes() == b"keep1" * 100
    assert carry.main(["unpack", str(tmp_path / "none.tgz")]) == 0  # first call: nothing yet


def test_bench_reads_tokens_and_judges_the_dispatch_target() -> None:
    pytest.importorskip("numpy")
    kv = _bench("kernels_vs_vendor")
    assert kv._tokens("llm70b-qkv-t16-bf16") == 16
    assert kv._tokens("llm8b-o-t8192") == 8192
    assert kv._tokens("sq4096") > 128
    table = {"builds": [{}] * 8, "max_loss_vs_per_shape_best": 0.03, "unservable": []}
    assert kv.dispatch_target(table)["met"]
    assert not kv.dispatch_target({**table, "builds": [{}] * 9})["met"]
    assert not kv.dispatch_target({**table, "max_loss_vs_per_shape_best": 0.031})["met"]


def test_dispatch_summary_counts_builds_per_dtype(tmp_path: Path, spec: KernelSpec) -> None:
    """A build is compiled for one dtype: the summary's union over both dtypes is not what a
    serving engine ships, its per-dtype parts are."""
    kv = _bench("kernels_vs_vendor")

    def table(shapes: dict[str, str], builds: list[str], loss: float) -> dict:
        return {
            "shapes": [
                {
                    "problem": name,
                    "dtype": dtype,
                    "build": builds[i % len(builds)],
                    "loss_vs_per_shape_best": loss,
                }
                for i, (name, dtype) in enumerate(shapes.items())
            ],
            "builds": [{"id": b} for b in builds],
            "max_loss_vs_per_shape_best": loss,
        }

    path = tmp_path / "dispatch.json"
    fp16 = {"llm8b-o-t1": "float16", "llm8b-o-t16": "float16"}
    kv.merge_dispatch(path, "a", table(fp16, ["b1", "b2"], 0.01), spec)
    merged = kv.merge_dispatch(
        path, "b", table({"llm8b-o-t1-bf16": "bfloat16"}, ["b3", "b1"], 0.02), spec
    )
    assert merged["builds"] == ["b1", "b2", "b3"] and len(merged["shapes"]) == 3
    assert merged["max_loss_vs_per_shape_best"] == 0.02
    half, brain = merged["by_dtype"]["float16"], merged["by_dtype"]["bfloat16"]
    assert (half["sets"], half["builds"], half["max_loss_vs_per_shape_best"]) == (
        ["a"],
        ["b1", "b2"],
        0.01,
    )
    assert (brain["sets"], brain["builds"], len(brain["shapes"])) == (["b"], ["b1", "b3"], 1)
    assert json.loads(path.read_text())["by_dtype"] == merged["by_dtype"]


def test_dispatch_summary_serves_a_shape_from_the_set_merged_last(
    tmp_path: Path, spec: KernelSpec
) -> None:
    """A shape searched again in a later set leaves the earlier set's table, and so does a
    build that served only it: the summary counts what a serving engine would ship."""
    kv = _bench("kernels_vs_vendor")
    path = tmp_path / "dispatch.json"

    def shape(problem: str, build: str, loss: float) -> dict:
        return {
            "problem": problem,
            "dtype": "float16",
            "build": build,
            "loss_vs_per_shape_best": loss,
        }

    decode = {
        "shapes": [shape("o-t1", "b1", 0.01), shape("o-t128", "b2", 0.025)],
        "builds": [{"id": "b1"}, {"id": "b2"}],
        "max_loss_vs_per_shape_best": 0.025,
    }
    t128 = {
        "shapes": [shape("o-t128", "b3", 0.0)],
        "builds": [{"id": "b3"}],
        "max_loss_vs_per_shape_best": 0.0,
    }
    kv.merge_dispatch(path, "decode", decode, spec)
    merged = kv.merge_dispatch(path, "t128", t128, spec)
    left = merged["sets"]["decode"]
    assert [s["problem"] for s in left["shapes"]] == ["o-t1"]
    assert [b["id"] for b in left["builds"]] == ["b1"]
    assert left["max_loss_vs_per_shape_best"] == 0.01
    assert left["superseded"] == {"o-t128": "t128"}
    assert merged["builds"] == ["b1", "b3"] and len(merged["shapes"]) == 2
    again = kv.merge_dispatch(path, "t128", t128, spec)  # the same set merged twice: no change
    assert again["builds"] == ["b1", "b3"]
    # a set whose every shape a later one took serves nothing: it is in no dtype's summary
    whole = {**decode, "shapes": [shape("o-t1", "b4", 0.0), shape("o-t128", "b4", 0.0)]}
    whole["builds"] = [{"id": "b4"}]
    merged = kv.merge_dispatch(path, "decode-again", whole, spec)
    assert all(merged["sets"][name]["shapes"] == [] for name in ("decode", "t128"))
    assert set(merged["by_dtype"]) == {"float16"}  # not a "mixed" group of empty sets
    assert merged["by_dtype"]["float16"]["sets"] == ["decode-again"]


def test_a_run_lists_only_the_targets_it_measured() -> None:
    """The H100 run measured CUTLASS attention alone: its GEMM and hand-kernel targets
    were reported as missed ("-", "no") though nothing was measured for them."""
    pytest.importorskip("numpy")
    kv = _bench("kernels_vs_vendor")
    report = ROOT / "bench" / "results" / "kernels_vs_vendor-sm90-nvidia-h100-80gb-hbm3.json"
    goals = {g["target"]: g for g in kv.targets(kv.load_rows(report))}
    assert not any("cuBLAS" in name or "hand-written" in name for name in goals)
    assert "attention vs PyTorch SDPA, geomean" not in goals  # the hand kernel's target
    fmha = goals["tuned CUTLASS attention vs SDPA, geomean over prefill"]
    assert fmha["met"] and fmha["value"] == pytest.approx(1.048, abs=5e-4)
    assert all(g["value"] is not None for g in goals.values())


def test_dispatch_summary_counts_a_build_once_across_a_gene_added_since(
    tmp_path: Path, spec: KernelSpec
) -> None:
    """A table written before the GEMV genes existed and one written after name one build by
    two ids; the summary counts what an engine ships: one build."""
    from ctune.sets.set_layout import build_id

    kv = _bench("kernels_vs_vendor")
    decode = {"SWAP_AB": 1, "TILE_M": 64, "TILE_N": 16, "TILE_K": 128, "SCHEDULE": 1}
    today = spec.candidate({**spec.space.default_values(), **decode})
    genes = {k: v for k, v in today.as_dict().items() if k not in spec.runtime_names}
    then = {k: v for k, v in genes.items() if not k.startswith("GEMV")}
    new_id = build_id(spec, today, spec.problem("llm8b-o-t1"))

    def table(problem: str, build: dict) -> dict:
        shape = {"problem": problem, "dtype": "float16", "build": build["id"]}
        return {
            "shapes": [{**shape, "loss_vs_per_shape_best": 0.0}],
            "builds": [build],
            "max_loss_vs_per_shape_best": 0.0,
        }

    path = tmp_path / "dispatch.json"
    old = {"id": "b-written-then", "genes": then, "serves": ["llm8b-o-t16"]}
    kv.merge_dispatch(path, "decode", table("llm8b-o-t16", old), spec)
    now = {"id": new_id, "genes": genes, "serves": ["llm8b-o-t1"]}
    merged = kv.merge_dispatch(path, "t1", table("llm8b-o-t1", now), spec)
    assert merged["builds"] == [new_id]
    assert merged["by_dtype"]["float16"]["builds"] == [new_id]


def test_a_table_published_without_measuring_keeps_the_rows_numbers(tmp_path: Path) -> None:
    """--table-only: a finished set's table joins the summary with the fingerprint of the set's
    own result files; the report's rows of its shapes change their dispatch fields only."""
    import shutil

    kv = _bench("kernels_vs_vendor")
    results = ROOT / "bench" / "results"
    out = tmp_path / "results"
    out.mkdir()
    for name in ("kernels_vs_vendor-sm90-nvidia-h200.json", "dispatch-sm90-nvidia-h200.json"):
        shutil.copy(results / name, out / name)
    set_dir = tmp_path / "set"
    (set_dir / "artifacts").mkdir(parents=True)
    artifact = ROOT / "registry" / "gemm" / "llm8b-o-t16" / "sm90-nvidia-h200.json"
    shutil.copy(artifact, set_dir / "artifacts" / "gemm-llm8b-o-t16.json")
    build = {"id": "bfeedfeed000", "serves": ["llm8b-o-t16"]}
    shape = {"problem": "llm8b-o-t16", "dtype": "float16", "build": build["id"]}
    table = {
        "kind": "ctune-dispatch",
        "kernel": "gemm",
        "shapes": [{**shape, "loss_vs_per_shape_best": 0.01}],
        "builds": [build],
        "max_loss_vs_per_shape_best": 0.01,
    }
    (set_dir / "dispatch.json").write_text(json.dumps(table))
    report = out / "kernels_vs_vendor-sm90-nvidia-h200.json"
    before = {r["problem"]: r for r in json.loads(report.read_text())["rows"]}
    assert kv.main(["--problem-set", "t16-t128-fp16", "--set-dir", str(set_dir),
                    "--table-only", "--out", str(out)]) == 0  # fmt: skip
    written = json.loads((out / "dispatch-gemm-t16-t128-fp16-sm90-nvidia-h200.json").read_text())
    assert written["fingerprint"]["gpu_name"] == "NVIDIA H200"
    assert "kernel_source_sha256" not in written["fingerprint"]  # the machine's fields only
    merged = json.loads((out / "dispatch-sm90-nvidia-h200.json").read_text())
    assert merged["sets"]["t16-t128-fp16"]["shapes"][0]["build"] == "bfeedfeed000"
    after = {r["problem"]: r for r in json.loads(report.read_text())["rows"]}
    assert after["llm8b-o-t16"]["dispatch_build"] == "bfeedfeed000"
    assert after["llm8b-o-t16"]["dispatch_loss"] == 0.01
    for name, row in after.items():
        assert row["tuned_ms"] == before[name]["tuned_ms"]
        assert row["vendor_ms"] == before[name]["vendor_ms"]
    # a set not covered yet: one line, exit 2
    (set_dir / "dispatch.json").unlink()
    assert kv.main(["--problem-set", "t16-t128-fp16", "--set-dir", str(set_dir),
                    "--table-only", "--out", str(out)]) == 2  # fmt: skip


def test_the_gpu_tiers_gemv_cases_are_valid(tmp_path: Path, gpu_test_module) -> None:
    """The GPU tier's GEMV test (its own copy of the spec, with a tail problem added) asks
    for builds the spec offers: a restriction added later must not leave it failing there."""
    pytest.importorskip(
        "cutlass_library", reason="the spec's @cutlass include needs nvidia-cutlass"
    )
    module = gpu_test_module("test_kernels_correct")
    copy = load_spec(module.write_gemv_spec(tmp_path))
    for threads, row_threads in module.GEMV_SHAPES:
        values = {
            **copy.space.default_values(),
            "GEMV": 1,
            "GEMV_THREADS": threads,
            "GEMV_ROW_THREADS": row_threads,
        }
        for name in [*module.GEMV_PROBLEMS, module.GEMV_TAIL["name"]]:
            dims = copy.problem(name).dims
            assert copy.space.is_valid(values, dims), (name, copy.space.violations(values, dims))
