"""compile.command: the exact argv for a candidate, table-driven."""

from pathlib import Path

import pytest

from ctune.compile.command import build_argv, key_argv, tuned_flags
from ctune.compile.flags import check_flags
from ctune.errors import UserError

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
        "-cubin",
        "-std=c++17",
        "-DBM=64",
        "-Xptxas",
        "-O2",
    ]


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
