"""compile.command: the exact argv for a candidate, table-driven; runtime genes stay out."""

import dataclasses
import threading
import time
from pathlib import Path

import pytest

from ctune.compile.command import (
    build_argv,
    key_argv,
    split_genes,
    tuned_flags,
    tuned_flags_refusal,
)
from ctune.compile.nvcc import NvccCompiler
from ctune.compile.toolchain import Toolchain
from ctune.errors import UserError
from ctune.records import Build, Outcome
from ctune.spec import load_spec
from ctune.spec.flags import check_flags
from ctune.spec.space import CATALOGUE, Gene

SRC = Path("/k/gemm.cu")
OUT = Path("/c/kernel.cubin")


def _argv(**over):
    args = dict(
        nvcc="nvcc",
        source=SRC,
        output=OUT,
        arch="sm_90",
        entry_kind="kernel",
        std="c++17",
        include_dirs=(),
        define_genes={},
        flag_genes={},
        problem_defines={},
    )
    args.update(over)
    return build_argv(**args)


CASES = [
    (
        "default build",
        {},
        [
            "nvcc",
            "--generate-code=arch=compute_90,code=sm_90",
            "-cubin",
            "-std=c++17",
            "-Xptxas",
            "-v",
            "-o",
            "/c/kernel.cubin",
            "/k/gemm.cu",
        ],
    ),
    (
        "defines sorted, bools as ints, problem defines first",
        {"define_genes": {"BN": 64, "BM": 128, "SWZ": True}, "problem_defines": {"CTUNE_BF16": 1}},
        [
            "nvcc",
            "--generate-code=arch=compute_90,code=sm_90",
            "-cubin",
            "-std=c++17",
            "-Xptxas",
            "-v",
            "-DCTUNE_BF16=1",
            "-DBM=128",
            "-DBN=64",
            "-DSWZ=1",
            "-o",
            "/c/kernel.cubin",
            "/k/gemm.cu",
        ],
    ),
    (
        "flags in catalogue order, defaults omitted",
        {"flag_genes": {"dlcm": "cg", "maxrregcount": 128, "ptxas_opt": 3, "fast_math": True}},
        [
            "nvcc",
            "--generate-code=arch=compute_90,code=sm_90",
            "-cubin",
            "-std=c++17",
            "-Xptxas",
            "-v",
            "-maxrregcount=128",
            "--use_fast_math",
            "-Xptxas",
            "-dlcm=cg",
            "-o",
            "/c/kernel.cubin",
            "/k/gemm.cu",
        ],
    ),
    (
        "launcher on sm_90a with includes",
        {
            "entry_kind": "launcher",
            "arch": "sm_90a",
            "include_dirs": (Path("/inc"),),
            "output": Path("/c/kernel.so"),
        },
        [
            "nvcc",
            "--generate-code=arch=compute_90a,code=sm_90a",
            "-shared",
            "-Xcompiler",
            "-fPIC",
            "--no-compress",
            "-std=c++17",
            "-Xptxas",
            "-v",
            "-I/inc",
            "-o",
            "/c/kernel.so",
            "/k/gemm.cu",
        ],
    ),
]


@pytest.mark.parametrize(("what", "over", "expected"), CASES, ids=[c[0] for c in CASES])
def test_argv(what, over, expected):
    assert _argv(**over) == expected


def test_key_argv_drops_paths_ctune_owns():
    argv = _argv(define_genes={"BM": 64})
    assert "-o" not in key_argv(argv) and "nvcc" not in key_argv(argv)
    assert key_argv(argv) == key_argv(_argv(define_genes={"BM": 64}, output=Path("/else/k.cubin")))


def test_tuned_flags_are_what_a_build_needs():
    argv = _argv(define_genes={"BM": 64}, flag_genes={"ptxas_opt": 2}, include_dirs=(Path("/inc"),))
    assert tuned_flags(argv) == [
        "--generate-code=arch=compute_90,code=sm_90",
        "-std=c++17",
        "-DBM=64",
        "-Xptxas",
        "-O2",
    ]


def test_tuned_flags_of_a_launcher_leave_out_the_harness_library():
    """A launcher is built as a host library for ctune's harness: a user's build makes its
    own program, so -shared, -Xcompiler -fPIC and --no-compress are not what it needs."""
    argv = _argv(entry_kind="launcher", define_genes={"BM": 64}, output=Path("/c/kernel.so"))
    assert "-shared" in argv and "--no-compress" in argv  # ctune's own build has them
    assert tuned_flags(argv) == [
        "--generate-code=arch=compute_90,code=sm_90",
        "-std=c++17",
        "-DBM=64",
    ]


def test_every_build_line_is_one_a_registry_member_may_record():
    """Every catalogue value, a launcher, a header source, problem defines and the spec's
    extra flags: what tuned_flags writes is what an artifact's reader accepts."""
    for name, flag in CATALOGUE.items():
        for value in flag.gene.values:
            for kind, source in (("kernel", SRC), ("launcher", Path("/k/gemm.cuh"))):
                argv = _argv(
                    entry_kind=kind,
                    source=source,
                    arch="sm_90a",
                    define_genes={"BM": 64, "SHAPE": "Shape<_128, _64>"},
                    problem_defines={"CTUNE_BF16": 1},
                    flag_genes={name: value},
                    extra_flags=["--expt-relaxed-constexpr"],
                )
                assert tuned_flags_refusal(tuned_flags(argv)) is None, (name, value, kind)


@pytest.mark.parametrize(
    "flags",
    [
        ["-Xcompiler=-fplugin=/tmp/e.so"],
        ["-Xcompiler", "-fplugin=/tmp/e.so"],
        ["-o", "/tmp/x"],
        ["--dryrun"],
        ["-Xptxas"],
        ["-Xptxas", "--apply-controls=/etc/x.acf"],
        ["--apply-controls=controls/x.acf"],
        ["--generate-code=arch=compute_90a,code=sm_80"],
    ],
)
def test_a_recorded_line_no_build_writes_is_refused(flags):
    assert "not allowed" in (tuned_flags_refusal(["-std=c++17", *flags]) or "")


@pytest.mark.parametrize(
    "flags",
    [
        ["-o", "/etc/x"],
        ["--run"],
        ["-Xcompiler", "-fplugin=evil.so"],
        ["-DX=$(rm -rf /)"],
        ["--output-directory=/"],
        ["-ccbin=/tmp/gcc"],
        ["-Xptxas", "-O9"],
        ["-I/etc"],
    ],
)
def test_hostile_flags_refused(flags):
    with pytest.raises(UserError, match="not allowed"):
        check_flags(flags)


def test_allowed_flags_pass():
    check_flags(["-DFOO=1", "--expt-relaxed-constexpr", "-Xptxas", "-dlcm=cg", "-lineinfo"])


# --- runtime genes: never in argv, so their candidates share one build -------------------------

DATA = Path(__file__).parents[2] / "data" / "kernels"
FAKE_TOOLCHAIN = Toolchain("/bin/nvcc", "13.0.88", "13.0.88", "release 13.0, V13.0.88", "")


@pytest.mark.parametrize(
    ("values", "defines", "flags"),
    [
        ({"BLOCK": 128, "ITEMS": 4, "UNROLL": 2}, {"UNROLL": 2}, {}),
        ({"BLOCK": 64, "ITEMS": 1, "UNROLL": 1}, {"UNROLL": 1}, {}),
        (
            {"BLOCK": 64, "ITEMS": 1, "UNROLL": 1, "ptxas_opt": 2},
            {"UNROLL": 1},
            {"ptxas_opt": 2},
        ),
    ],
)
def test_split_genes_leaves_runtime_genes_out(values, defines, flags):
    genes = (
        Gene("BLOCK", (64, 128), 128, "runtime"),
        Gene("ITEMS", (1, 4), 1, "runtime"),
        Gene("UNROLL", (1, 2), 1, "template"),
        CATALOGUE["ptxas_opt"].gene,
    )
    assert split_genes(genes, values) == (defines, flags)


def test_an_ifdef_switch_is_in_argv_when_on_and_absent_when_off(tmp_path):
    """``-DUSE_LDG=0`` defines USE_LDG, so ``#ifdef USE_LDG`` code was on in every build."""
    spec = load_spec(DATA / "saxpy.yaml")
    genes = (*spec.genes, Gene("USE_LDG", (0, 1), 0, "define", ifdef=True))
    spec = dataclasses.replace(spec, genes=genes)
    compiler = NvccCompiler(spec, FAKE_TOOLCHAIN, tmp_path / "cache")
    problem, out = spec.problem(), Path("/c/kernel.cubin")
    values = spec.space.default_values()
    off = compiler.argv(spec.candidate(values), problem, out)
    on = compiler.argv(spec.candidate({**values, "USE_LDG": 1}), problem, out)
    assert not any("USE_LDG" in item for item in off)
    assert "-DUSE_LDG=1" in on and [a for a in on if a != "-DUSE_LDG=1"] == off
    with pytest.raises(ValueError, match=r"an #ifdef switch is 0 \(off\) or 1 \(on\)"):
        Gene("USE_LDG", (0, 2), 0, "define", ifdef=True)


@pytest.fixture
def rt_compiler(tmp_path, monkeypatch):
    spec = load_spec(DATA / "rt_saxpy.yaml")
    compiler = NvccCompiler(spec, FAKE_TOOLCHAIN, tmp_path / "cache", jobs=4)
    # the include closure needs nvcc -M; the key's other parts are what this test is about
    monkeypatch.setattr(compiler, "closure_digest", lambda problem: "c" * 64)
    return compiler


def test_candidates_differing_only_in_runtime_genes_share_argv_and_build_key(rt_compiler):
    spec, problem, out = rt_compiler.spec, rt_compiler.spec.problem(), Path("/c/kernel.cubin")
    a = spec.candidate({"BLOCK": 128, "ITEMS": 1, "UNROLL": 1})
    b = spec.candidate({"BLOCK": 256, "ITEMS": 4, "UNROLL": 1})
    c = spec.candidate({"BLOCK": 128, "ITEMS": 1, "UNROLL": 2})
    argv_a, argv_b = rt_compiler.argv(a, problem, out), rt_compiler.argv(b, problem, out)
    assert a.key() != b.key()
    assert argv_a == argv_b
    assert not any("BLOCK" in item or "ITEMS" in item for item in argv_a)
    assert "-DUNROLL=1" in argv_a
    key_a = rt_compiler.build_key(argv_a, problem)
    assert key_a == rt_compiler.build_key(argv_b, problem)
    assert key_a != rt_compiler.build_key(rt_compiler.argv(c, problem, out), problem)


def test_a_build_under_way_is_shared_not_compiled_again(rt_compiler, monkeypatch):
    """Candidates sharing a build key arrive together (compile-ahead): one nvcc run for all."""
    spec, problem = rt_compiler.spec, rt_compiler.spec.problem()
    started, release = threading.Semaphore(0), threading.Event()
    compiled: list[str] = []

    def fake_compile(candidate, problem, key, final, rebuilt=""):
        compiled.append(candidate.key())
        started.release()
        release.wait(10)
        return Build(
            candidate.key(),
            ("nvcc", key),
            "fake",
            Outcome.OK,
            str(final / "kernel.cubin"),
            "f" * 64,
            12.5,
            build_key=key,
        )

    monkeypatch.setattr(rt_compiler, "_compile", fake_compile)
    shared = [
        spec.candidate({"BLOCK": block, "ITEMS": items, "UNROLL": 1})
        for block, items in ((128, 1), (64, 4), (256, 2))
    ]
    other = spec.candidate({"BLOCK": 128, "ITEMS": 1, "UNROLL": 2})
    with rt_compiler:
        first = rt_compiler.submit(shared[0], problem)
        assert started.acquire(timeout=10)  # the first is compiling
        rest = [rt_compiler.submit(c, problem) for c in (*shared[1:], other)]
        assert started.acquire(timeout=10)  # the other key compiles at the same time
        time.sleep(0.5)  # let the two sharers reach the build under way
        release.set()
        builds = [f.result(timeout=10) for f in (first, *rest)]
    assert sorted(compiled) == sorted([shared[0].key(), other.key()])
    mine, *sharers, theirs = builds
    assert not mine.cache_hit and mine.compile_s == 12.5
    for cand, build in zip(shared[1:], sharers, strict=True):
        assert build.candidate_key == cand.key()
        assert build.cache_hit and build.compile_s == 12.5  # the cache-hit convention
        assert (build.binary_path, build.build_key, build.argv) == (
            mine.binary_path,
            mine.build_key,
            mine.argv,
        )
    assert theirs.build_key != mine.build_key and not theirs.cache_hit


def test_a_header_compiles_as_cuda_and_a_spec_may_say_so_itself():
    argv = _argv(source=Path("/k/gemm.cuh"))
    assert argv[-4:] == ["/c/kernel.cubin", "-x", "cu", "/k/gemm.cuh"]
    assert "-x" not in _argv()  # a .cu needs nothing
    check_flags(["-x", "cu"])  # the one language a spec may name
    for flags in (["-x", "c++"], ["-x"], ["-x", "cu", "foo.c"]):
        with pytest.raises(UserError, match="not allowed"):
            check_flags(flags)
    given = _argv(source=Path("/k/gemm.h"), extra_flags=("-x", "cu"))
    assert given.count("-x") == 1
