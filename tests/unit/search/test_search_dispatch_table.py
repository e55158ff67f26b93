"""The dispatch table's rule: exact cases in Python, and the C++ header (compiled with the host
compiler) answering every query of a grid exactly as the Python lookup does."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from ctune.errors import UserError
from ctune.sets.dispatch_table import (
    Entry,
    Table,
    from_json,
    header,
    set_dims,
    shipped_builds,
    table_device,
    with_bounds,
)
from ctune.sets.set_layout import build_id
from ctune.spec import KernelSpec, load_spec

ROOT = Path(__file__).parents[3]

BUILDS = ({"id": "b0", "flags_line": "-DTILE_M=64"}, {"id": "b1", "flags_line": '-DX="q"'})
TABLE = Table(
    "gemm",
    ("M", "N", "K"),
    ("SPLITS",),
    BUILDS,
    (
        Entry("qkv-t1", (1, 6144, 4096), "float16", 0, (1,)),
        Entry("qkv-t16", (16, 6144, 4096), "float16", 0, (2,)),
        Entry("qkv-t2048", (2048, 6144, 4096), "float16", 1, (1,)),
        Entry("o-t128", (128, 4096, 4096), "float16", 1, (4,)),
        Entry("o-t128-bf16", (128, 4096, 4096), "bfloat16", 0, (3,)),
    ),
)


def name(dims: tuple[int, ...], dtype: str) -> str | None:
    e = TABLE.lookup(dims, dtype)
    return e.problem if e else None


def test_exact_match() -> None:
    assert name((16, 6144, 4096), "float16") == "qkv-t16"
    assert name((128, 4096, 4096), "bfloat16") == "o-t128-bf16"


def test_same_row_nearest_m_in_log2_ties_to_the_larger() -> None:
    assert name((8, 6144, 4096), "float16") == "qkv-t16"  # log2: 1 from 16, 3 from 1
    assert name((4, 6144, 4096), "float16") == "qkv-t16"  # 2 vs 2: the larger M
    assert name((2, 6144, 4096), "float16") == "qkv-t1"
    assert name((100000, 6144, 4096), "float16") == "qkv-t2048"
    # log2 181 = 7.4998: 3.4998 from 16, 3.5002 from 2048 (a near tie is not a tie)
    assert name((181, 6144, 4096), "float16") == "qkv-t16"


def test_other_rows_fall_back_to_the_nearest_shape_of_the_dtype() -> None:
    assert name((128, 4096, 14336), "float16") == "o-t128"
    assert name((1, 57344, 8192), "bfloat16") == "o-t128-bf16"  # the only bf16 entry
    assert name((1, 4096, 4096), "float32") is None  # no entry of that dtype


def table_json() -> dict[str, object]:
    return {
        "kind": "ctune-dispatch",
        "kernel": "gemm",
        "dims": ["M", "N", "K"],
        "runtime_genes": ["SPLITS"],
        "builds": list(BUILDS),
        "shapes": [
            {
                "problem": e.problem,
                "dims": dict(zip(("M", "N", "K"), e.dims, strict=True)),
                "dtype": e.dtype,
                "build": BUILDS[e.build]["id"],
                "runtime": {"SPLITS": e.runtime[0]},
            }
            for e in TABLE.entries
        ],
    }


def test_json_round_trip_and_refusal() -> None:
    assert from_json(table_json()) == TABLE
    with pytest.raises(UserError, match="not a dispatch table"):
        from_json({"kind": "other"})


@pytest.fixture(scope="module")
def spec() -> KernelSpec:
    return load_spec(ROOT / "kernels" / "gemm.yaml")


def test_shipped_builds_read_tables_of_the_kernel_and_refuse_others(
    tmp_path: Path, spec: KernelSpec
) -> None:
    table = tmp_path / "dispatch.json"
    table.write_text(json.dumps(table_json()))
    # builds without their genes keep the ids they were written with
    assert shipped_builds([table], spec) == {str(b["id"]) for b in BUILDS}
    with pytest.raises(UserError, match=r"a table of gemm, not of hand_gemm; give a"):
        shipped_builds([table], load_spec(ROOT / "kernels" / "hand_gemm.yaml"))
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    with pytest.raises(UserError, match=r"--dispatch-shipped .*broken.json: not a readable"):
        shipped_builds([broken], spec)
    with pytest.raises(UserError, match=r"--dispatch-shipped .*absent.json: not a readable"):
        shipped_builds([tmp_path / "absent.json"], spec)
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"kind": "other"}))
    with pytest.raises(UserError, match=r"--dispatch-shipped .*other.json: not a dispatch table"):
        shipped_builds([other], spec)
    other.write_text(json.dumps({"kind": "ctune-dispatch", "kernel": "gemm"}))
    with pytest.raises(UserError, match="a dispatch table without 'dims'"):
        shipped_builds([other], spec)
    edited = table_json()
    edited["builds"][0]["serves"] = 5  # by hand: a build's list of problems made a number
    other.write_text(json.dumps(edited))
    with pytest.raises(UserError, match=r"other.json: a build that does not read"):
        shipped_builds([other], spec)


def test_a_table_written_before_a_gene_was_added_ships_the_builds_a_search_names_today(
    tmp_path: Path, spec: KernelSpec
) -> None:
    """A decode build recorded without the GEMV genes (added later, default 0) is the build a
    search over today's space compiles for that candidate: the same id, not a new build."""
    decode = {"SWAP_AB": 1, "TILE_M": 64, "TILE_N": 16, "TILE_K": 128, "SCHEDULE": 1}
    today = spec.candidate({**spec.space.default_values(), **decode})
    problem = spec.problem("llm8b-qkv-t1-bf16")
    genes = {k: v for k, v in today.as_dict().items() if k not in spec.runtime_names}
    recorded = {k: v for k, v in genes.items() if not k.startswith("GEMV")}
    assert recorded != genes  # the table's day had no GEMV genes
    old = {"id": "b-written-then", "genes": recorded, "serves": [problem.name]}
    data = {**table_json(), "builds": [old], "shapes": []}
    table = tmp_path / "dispatch.json"
    table.write_text(json.dumps(data))
    assert shipped_builds([table], spec) == {build_id(spec, today, problem)}
    # the same genes for the fp16 problem are another build (CTUNE_BF16 is compiled in)
    assert build_id(spec, today, spec.problem("llm8b-qkv-t1")) != build_id(spec, today, problem)


QUERIES = [
    (m, n, k, dt)
    for m in (1, 2, 3, 4, 8, 16, 24, 64, 100, 128, 181, 1000, 2048, 4096, 10**6)
    for n, k in ((6144, 4096), (4096, 4096), (4096, 14336), (57344, 8192))
    for dt in ("float16", "bfloat16", "float32")
]


def _compiled(source: Path) -> Path:
    """``source`` built by the host compiler, warnings as errors: the executable."""
    exe = source.with_suffix("")
    subprocess.run(
        ["g++", "-std=c++17", "-pedantic-errors", "-Wall", "-Werror", "-o", str(exe), str(source)],
        check=True,
        capture_output=True,
        text=True,
    )
    return exe


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs a host C++ compiler (g++)")
def test_header_agrees_with_python_on_a_grid(tmp_path: Path) -> None:
    (tmp_path / "dispatch.h").write_text(header(TABLE, "a test table"))
    calls = "\n".join(f'  show(lookup({m}, {n}, {k}, "{dt}"));' for m, n, k, dt in QUERIES)
    (tmp_path / "main.cpp").write_text(
        '#include <cstdio>\n#include "dispatch.h"\n'
        "using namespace ctune_dispatch_gemm;\n"
        "void show(const Entry* e) {\n"
        '  if (!e) { std::printf("none\\n"); return; }\n'
        '  std::printf("%lld %lld %lld %s %d %lld\\n", (long long)e->dims[0],'
        " (long long)e->dims[1], (long long)e->dims[2], e->dtype, e->build,"
        " (long long)e->runtime[0]);\n"
        "}\n"
        f"int main() {{\n{calls}\n  return 0;\n}}\n"
    )
    exe = _compiled(tmp_path / "main.cpp")
    got = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split("\n")
    for (m, n, k, dt), out in zip(QUERIES, got, strict=False):
        e = TABLE.lookup((m, n, k), dt)
        want = (
            "none"
            if e is None
            else f"{e.dims[0]} {e.dims[1]} {e.dims[2]} {e.dtype} {e.build} {e.runtime[0]}"
        )
        assert out == want, (m, n, k, dt)
    assert len([g for g in got if g]) == len(QUERIES)
    text = header(TABLE, "x")
    assert '"-DX=\\"q\\""' in text  # quotes escaped in C strings


def test_the_header_names_the_vendor_build_or_none() -> None:
    assert "constexpr int kVendorBuild = -1;" in header(TABLE, "x")
    vendor = {"id": "vendor", "flags_line": "", "vendor": "cuBLAS */ x"}
    text = header(dataclasses.replace(TABLE, builds=(*BUILDS, vendor)), "x")
    assert "constexpr int kVendorBuild = 2;" in text
    assert "(cuBLAS * / x)" in text  # free text kept out of the comment's end


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs a host C++ compiler (g++)")
def test_a_header_with_the_vendor_build_compiles(tmp_path: Path) -> None:
    vendor = {"id": "vendor", "flags_line": "", "vendor": "cuBLAS"}
    entries = (*TABLE.entries, Entry("o-t1", (1, 4096, 4096), "float16", 2, (0,)))
    table = dataclasses.replace(TABLE, builds=(*BUILDS, vendor), entries=entries)
    (tmp_path / "dispatch.h").write_text(header(table, "a test table"))
    (tmp_path / "main.cpp").write_text(
        '#include "dispatch.h"\n'
        "using namespace ctune_dispatch_gemm;\n"
        'int main() { return lookup(1, 4096, 4096, "float16")->build == kVendorBuild ? 0 : 1; }\n'
    )
    exe = _compiled(tmp_path / "main.cpp")
    assert subprocess.run([str(exe)], check=False).returncode == 0


def test_a_shipped_vendor_build_keeps_its_id(tmp_path: Path, spec: KernelSpec) -> None:
    """The vendor call has no genes to rename it by: a table that ships it ships ``vendor``."""
    vendor = {"id": "vendor", "genes": {}, "vendor": "cuBLAS", "serves": ["llm8b-qkv-t1"]}
    table = tmp_path / "dispatch.json"
    table.write_text(json.dumps({**table_json(), "builds": [vendor], "shapes": []}))
    assert shipped_builds([table], spec) == {"vendor"}


def _committed(kernel: str, table: str) -> Table:
    """A committed table, its entries' ranges worked out from today's spec."""
    data = json.loads((ROOT / "bench/results" / table).read_text())
    return from_json(with_bounds(data, load_spec(ROOT / "kernels" / f"{kernel}.yaml")))


ATTENTION = "dispatch-attention-prefill-causal-sm90-nvidia-h200.json"
T1 = "dispatch-gemm-t1-fp16-sm90-nvidia-h200.json"


def test_an_entry_serves_only_its_compile_group_and_restrictions() -> None:
    att = _committed("attention", ATTENTION)
    assert att.lookup((1, 32, 32, 2048, 2048, 128, 0), "float16") is None  # not causal
    near = att.lookup((1, 32, 32, 3000, 3000, 64, 1), "float16")
    assert near is not None and near.dims[5] == 64  # HEAD_DIM is compiled in
    t1 = _committed("gemm", T1)
    big = t1.lookup((2048, 4096, 4096), "float16")
    assert big is not None and t1.builds[big.build]["genes"].get("GEMV", 0) == 0  # M <= 16


def test_equal_octaves_tie_to_the_larger_m_exactly() -> None:
    table = dataclasses.replace(
        TABLE,
        entries=(
            Entry("a", (5, 1, 1), "float16", 0, (1,)),
            Entry("b", (20, 1, 1), "float16", 0, (1,)),
        ),
    )
    e = table.lookup((10, 1, 1), "float16")
    assert e is not None and e.problem == "b"


def _agree(tmp_path: Path, table: Table, queries: list[tuple[tuple[int, ...], str]]) -> None:
    """The header's lookup, compiled with g++, chooses what ``Table.lookup`` chooses."""
    (tmp_path / "dispatch.h").write_text(header(table, "a test table", "s"))
    calls = "\n".join(
        f"  show(lookup({', '.join(map(str, d))}, {json.dumps(dt)}));" for d, dt in queries
    )
    ns = "ctune_dispatch_" + table.kernel + "_s"
    (tmp_path / "main.cpp").write_text(
        f'#include <cstdio>\n#include "dispatch.h"\nusing namespace {ns};\n'
        'void show(const Entry* e) { std::printf("%d\\n", e ? int(e - kEntries) : -1); }\n'
        f"int main() {{\n{calls}\n  return 0;\n}}\n"
    )
    exe = _compiled(tmp_path / "main.cpp")
    got = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split()
    want = []
    for d, dt in queries:
        e = table.lookup(d, dt)
        want.append(str(-1 if e is None else table.entries.index(e)))
    assert got == want


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs a host C++ compiler (g++)")
def test_the_header_agrees_on_compile_groups_and_restrictions(tmp_path: Path) -> None:
    att = _committed("attention", ATTENTION)
    qa = [
        ((1, 32, 32, s, s, d, c), dt)
        for s in (512, 1024, 3000, 8192)
        for d in (64, 96, 128)
        for c in (0, 1)
        for dt in ("float16", "bfloat16")
    ]
    _agree(tmp_path, att, qa)
    t1 = _committed("gemm", T1)
    qg = [((m, n, 4096), "float16") for m in (1, 2, 10, 16, 17, 128, 2048) for n in (4096, 6144)]
    _agree(tmp_path, t1, [*qg, ((10, 1, 1), "float16")])
    ties = dataclasses.replace(
        TABLE,
        entries=(
            Entry("a", (5, 1, 1), "float16", 0, (1,)),
            Entry("b", (20, 1, 1), "float16", 0, (1,)),
        ),
    )
    _agree(tmp_path, ties, [((10, 1, 1), "float16"), ((0, 1, 1), "float16")])


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs a host C++ compiler (g++)")
def test_the_header_compiles_for_any_dim_names_and_an_empty_table(tmp_path: Path) -> None:
    names = ("M", "N", "K", "n", "DTYPE", "DIMS", "DO", "INT", "dtype", "dims")
    entry = Entry("p", tuple(range(1, len(names) + 1)), "float16", 0, (1,))
    odd = Table("k", names, ("SPLITS",), BUILDS, (entry,))
    _agree(tmp_path, odd, [(entry.dims, "float16"), ((9,) * len(names), "float16")])
    empty = Table("k", ("M",), (), (), ())
    _agree(tmp_path, empty, [((1,), "float16")])


def test_the_device_names_every_gpu_of_the_rows(caplog: pytest.LogCaptureFixture) -> None:
    class Here:
        device_name = "GPU C"

    rows = [{"device": "GPU A"}, {"device": "GPU B"}, {}]
    assert table_device(rows, Here()) == "GPU A + GPU B"
    assert "several GPUs: GPU A + GPU B" in caplog.text
    assert table_device([{"device": "GPU A"}], Here()) == "GPU A"
    assert table_device([{}], Here()) == "GPU C"  # rows written before they named it


def test_a_set_whose_problems_have_other_dims_is_refused(spec: KernelSpec) -> None:
    from ctune.spec.model import Problem

    a, b = Problem("a", {"M": 1, "N": 2}), Problem("b", {"M": 1, "K": 2})
    assert set_dims(spec, [a, a]) == ("M", "N")
    with pytest.raises(UserError, match="b have other dims than a"):
        set_dims(spec, [a, b])
