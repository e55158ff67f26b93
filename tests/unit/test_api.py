"""ctune.tune / write_spec / load_artifact: the Python API, on the stand-ins (no nvcc, no GPU)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import ctune
from ctune.errors import CtuneError, UserError
from ctune.spec import load_spec
from ctune.testing.standins import StandInCompiler, StandInMeasurer

KERNEL = """
__global__ void vector_add(float* c, const float* a, const float* b, int n) {
    int i = (blockIdx.x * block_size_x + threadIdx.x) * tile;
    for (int t = 0; t < tile; ++t)
        if (i + t < n) c[i + t] = a[i + t] + b[i + t];
}
"""


def vector_add(xp, inputs, dims):
    return {"c": inputs["a"] + inputs["b"]}


def close_enough(expected, got, atol=None):
    return bool(np.allclose(expected["c"], got["c"], atol=atol or 1e-6))


LIMIT = 0.5


def uses_a_global(expected, got, atol=None):
    return bool(np.abs(expected["c"] - got["c"]).max() <= LIMIT)


N = 100_000


def _arguments():
    a = np.ones(N, dtype=np.float32)
    return [np.zeros_like(a), a, a.copy(), np.int32(N)]


def test_the_spec_says_what_tune_kernel_would(tmp_path: Path) -> None:
    path = ctune.write_spec(
        "vector_add",
        KERNEL,
        N,
        _arguments(),
        {"block_size_x": [64, 128, 256], "tile": [1, 2, 4]},
        reference=vector_add,
        restrictions=["block_size_x * tile <= 512"],
        grid_div_x=["block_size_x", "tile"],
        flags=["ptxas_opt"],
        tolerance=(1e-6, 1e-5),
        workdir=tmp_path / "w",
    )
    spec = load_spec(path)
    assert spec.entry_symbol == "vector_add" and spec.source_path == tmp_path / "w" / "kernel.cu"
    assert [(a.name, a.role, a.dtype) for a in spec.args] == [
        ("c", "inout", "float32"),  # not const in the signature
        ("a", "input", "float32"),
        ("b", "input", "float32"),
        ("n", "scalar", "int32"),
    ]
    assert spec.args[0].shape[0].source == "100000" and spec.args[3].value.source == "100000"
    assert [e.source for e in spec.launch.grid] == [
        "ceil_div(problem_size_x, block_size_x * tile)",
        "1",
        "1",
    ]
    assert [e.source for e in spec.launch.block] == ["block_size_x", "1", "1"]
    assert spec.extra_flags == ("-Dblock_size_y=1", "-Dblock_size_z=1")
    assert spec.space.gene("block_size_x").family == "launch"
    assert spec.space.gene("tile").family == "define"
    assert spec.space.count_valid(spec.problem().dims)[0] == 4 * 8  # ptxas_opt x 8 of 9
    assert spec.tolerance_for("c").rel_l2 == 1e-6
    out = spec.reference()(np, {"a": np.ones(2), "b": np.ones(2)}, {})
    assert out["c"].tolist() == [2.0, 2.0]
    # the same call finds the same folder and spec under the cache
    again = ctune.write_spec(
        "vector_add", KERNEL, N, _arguments(), {"block_size_x": [64]}, reference=vector_add,
        cache_dir=tmp_path / "cache",
    )  # fmt: skip
    assert again == ctune.write_spec(
        "vector_add", KERNEL, N, _arguments(), {"block_size_x": [64]}, reference=vector_add,
        cache_dir=tmp_path / "cache",
    )  # fmt: skip
    assert again.parent.parent == tmp_path / "cache" / "api"


def test_a_kernel_file_keeps_its_includes(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "k.cu").write_text(KERNEL)
    ref = tmp_path / "ref.py"
    ref.write_text("def vector_add(xp, inputs, dims):\n    return {'c': inputs['a']}\n")
    path = ctune.write_spec(
        "vector_add", tmp_path / "src" / "k.cu", (N,), _arguments(), {"block_size_x": [32]},
        reference=f"{ref}:vector_add", workdir=tmp_path / "w",
    )  # fmt: skip
    spec = load_spec(path)
    assert spec.include_dirs == (tmp_path / "src",)
    # copied beside the spec: a spec's reference lies in its folder
    assert spec.reference_path == tmp_path / "w" / "reference.py"
    assert spec.reference_path.read_text() == ref.read_text()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"reference": lambda xp, i, d: i}, "pass a def"),
        ({"problem_size": 0}, "problem_size: 1 to 3 positive integers"),
        ({"arguments": _arguments()[:3]}, "vector_add takes 4 parameter(s) (c, a, b, n), 3 given"),
        ({"arguments": [*_arguments()[:3], "n"]}, "arguments[3] (n): expected an array"),
        (
            {"arguments": [np.zeros(3, dtype=np.complex64), *_arguments()[1:]]},
            "arguments[0] (c): dtype complex64",
        ),
        ({"tune_params": {"bad name": [1]}}, "'bad name' is not a C identifier"),
        ({"tune_params": {"tile": []}}, "expected a non-empty list"),
        ({"restrictions": [lambda p: p.get("x")]}, "cannot be written as a spec expression"),
        ({"restrictions": [lambda p: p["x"] > 1]}, "it reads x, not a tune_params name"),
        ({"restrictions": [lambda p: p["block_size_x"] // 0 > 1]}, "it raised ZeroDivisionError"),
        (
            {"verify": lambda a, b, atol=None: True},
            "verify: cannot copy the function into the spec folder: it is a lambda; define it",
        ),
        ({"verify": "check.py:fn"}, "verify: expected a function"),
        ({"reference": None, "answer": [None, None, None, None]}, "answer: every entry is None"),
        (
            {"reference": None, "answer": [np.zeros(3), None, None, None]},
            "answer: c has shape (3,)",
        ),
        (
            {"reference": None, "answer": [None, None, None, np.int32(1)]},
            "answer: n is a scalar argument",
        ),
        ({"reference": None, "answer": [None] * 3}, "answer: 3 entries for 4 arguments"),
        ({"cmem_args": {"c": np.zeros(4)}}, "cmem_args: c is a kernel parameter"),
        ({"cmem_args": {"k": [1, 2]}}, "cmem_args['k']: expected a numpy array"),
        ({"reference": None}, "give reference= (a function of the inputs) or answer="),
        ({"kernel_source": "no kernel here"}, "give a .cu file path or the kernel's source"),
        ({"kernel_source": "missing.cu"}, "kernel file missing.cu: no such file"),
        ({"kernel_name": 5}, "kernel_name: the kernel's name as its source says it"),
        ({"arguments": None}, "arguments: a list of the kernel's arguments"),
        ({"problem_size": (1000.0,)}, "problem_size: 1 to 3 positive integers, got (1000.0,)"),
        ({"tune_params": [("block_size_x", [64])]}, "tune_params: expected a dict {name: list"),
        ({"tune_params": {1: [64]}}, "tune_params: 1 is not a C identifier"),
        (
            {"tune_params": {"block_size_x": 64}},
            "tune_params['block_size_x']: expected a non-empty list of values (the first is "
            "the default), got 64; write [64]",
        ),
        ({"tune_params": {"block_size_x": {64, 128}}}, "expected a non-empty list of values"),
        ({"tune_params": {"block_size_x": [64.5]}}, "64.5 is not a whole number of threads"),
        ({"tune_params": {"tile": [float("nan")]}}, "tune_params['tile']: nan is not a finite"),
        ({"tune_params": {"tile": [1, None]}}, "tune_params['tile']: None is not a number"),
        ({"tolerance": (1e-3,)}, "tolerance: (rel_l2, max_abs), two numbers, got (0.001,)"),
        ({"tolerance": "tight"}, "tolerance: (rel_l2, max_abs), two numbers, got 'tight'"),
        ({"workdir": 5}, "workdir: a folder's path, got 5"),
        ({"grid_div_x": [2]}, "grid_div_x: expected a string or a list of strings, got [2]"),
        ({"flags": 5}, "flags: expected a string or a list of strings, got 5"),
        ({"block_size_names": ["a", "b", "c", "d"]}, "block_size_names: 1 to 3 C identifiers"),
        ({"block_size_names": "1x"}, "block_size_names: 1 to 3 C identifiers"),
        (
            {"block_size_names": ["block_size_x", "block_size_x"]},
            "block_size_names: block_size_x, block_size_x, block_size_z names an axis twice",
        ),
        (
            {"block_size_names": ["block_size_y"]},
            "block_size_names: block_size_y, block_size_y, block_size_z names an axis twice",
        ),
    ],
)
def test_bad_input_is_one_line(tmp_path: Path, change: dict, message: str) -> None:
    call = {
        "kernel_name": "vector_add",
        "kernel_source": KERNEL,
        "problem_size": N,
        "arguments": _arguments(),
        "tune_params": {"block_size_x": [64]},
        "reference": vector_add,
        "workdir": tmp_path,
        **change,
    }
    with pytest.raises(UserError) as err:
        ctune.write_spec(**call)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_bare_string_is_one_item_where_a_list_is_expected(tmp_path: Path) -> None:
    """Kernel Tuner takes grid_div_x="block_size_x"; list("bx") would be its characters."""
    path = ctune.write_spec(
        "vector_add", KERNEL, N, _arguments(), {"bx": [64, 128], "tile": [1, 2]},
        reference=vector_add, workdir=tmp_path / "w", block_size_names="bx",
        grid_div_x="bx", flags="ptxas_opt",
    )  # fmt: skip
    spec = load_spec(path)
    assert [e.source for e in spec.launch.block] == ["bx", "1", "1"]
    assert spec.launch.grid[0].source == "ceil_div(problem_size_x, bx)"
    assert spec.extra_flags == ("-Dblock_size_y=1", "-Dblock_size_z=1")
    assert spec.space.gene("bx").family == "launch" and spec.space.gene("ptxas_opt")
    names = np.array(["block_size_x", "tile"])  # a numpy array of strings, item by item
    tiled = ctune.write_spec(
        "vector_add", KERNEL, N, _arguments(), {"block_size_x": [64], "tile": [1, 2]},
        reference=vector_add, workdir=tmp_path / "v", grid_div_x=names,
    )  # fmt: skip
    assert load_spec(tiled).launch.grid[0].source == "ceil_div(problem_size_x, block_size_x * tile)"


def _tune_refused(tmp_path: Path, workdir: str, change: dict) -> tuple[str, StandInCompiler]:
    """The one-line error of a ``tune()`` with ``change`` into ``tmp_path/workdir``, and the
    stand-in compiler it was given (of the spec a good call writes in ``tmp_path/w``)."""
    path = ctune.write_spec(
        "vector_add", KERNEL, N, _arguments(), {"block_size_x": [64, 128]},
        reference=vector_add, workdir=tmp_path / "w",
    )  # fmt: skip
    compiler = StandInCompiler(load_spec(path))
    with pytest.raises(UserError) as err:
        ctune.tune(
            "vector_add", KERNEL, N, _arguments(), {"block_size_x": [64, 128]},
            reference=vector_add, workdir=tmp_path / workdir, compiler=compiler,
            measurer=StandInMeasurer(), **change,
        )  # fmt: skip
    assert "\n" not in str(err.value)
    return str(err.value), compiler


@pytest.mark.parametrize(
    ("change", "message"),
    [
        # parsed whole (a list of its characters said "--constraint 'p': expected TERM OP")
        ({"constraints": "power<=400V"}, "unit 'V' does not fit power"),
        ({"constraints": 5}, "constraints: expected a string or a list of strings, got 5"),
        ({"objective": None}, "objective: expected a string or a list of strings, got None"),
    ],
)
def test_objective_and_constraints_take_a_string_or_a_list(
    tmp_path: Path, change: dict, message: str
) -> None:
    said, compiler = _tune_refused(tmp_path, "w", change)
    assert message in said and compiler.calls == 0


def test_numpy_values_are_taken_as_kernel_tuner_takes_them(tmp_path: Path) -> None:
    """numpy scalars and arrays, as Kernel Tuner users pass them, are their Python values;
    a whole float block size is its int (Kernel Tuner takes int() of a block dimension)."""
    path = ctune.write_spec(
        "vector_add", KERNEL, np.int32(N), _arguments(),
        {"block_size_x": np.arange(64, 257, 64), "tile": (np.int64(1), np.int32(2)),
         "unroll": [np.bool_(False), np.bool_(True)], "kind": np.array(["a", "b"])},
        reference=vector_add, workdir=tmp_path / "w", tolerance=np.array([1e-6, 1e-5]),
    )  # fmt: skip
    spec = load_spec(path)
    assert spec.args[0].shape[0].source == str(N)
    assert spec.space.gene("block_size_x").values == (64, 128, 192, 256)
    assert spec.space.gene("tile").values == (1, 2)
    assert spec.space.gene("unroll").values == (0, 1)
    assert spec.space.gene("kind").values == ("a", "b")
    assert spec.tolerance_for("c").max_abs == 1e-5
    floats = ctune.write_spec(
        "vector_add", KERNEL, (N,), _arguments(), {"block_size_x": [64.0, 128.0]},
        reference=vector_add, workdir=tmp_path / "v", restrictions=["block_size_x >= 64"],
    )  # fmt: skip
    assert load_spec(floats).space.gene("block_size_x").values == (64, 128)


def test_a_workdir_that_is_a_file_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("mine")
    for workdir, message in [
        (tmp_path / "taken", "is a file; name a folder"),
        (tmp_path / "taken" / "w", "workdir: cannot make"),
    ]:
        with pytest.raises(UserError) as err:
            ctune.write_spec(
                "vector_add", KERNEL, N, _arguments(), {"block_size_x": [64]},
                reference=vector_add, workdir=workdir,
            )  # fmt: skip
        assert message in str(err.value) and "\n" not in str(err.value)
    assert (tmp_path / "taken").read_text() == "mine"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"budget": "10"}, "--budget must be a whole number, got '10'"),
        ({"budget": 6.5}, "--budget must be a whole number, got 6.5"),
        ({"time_s": float("nan")}, "--time must be positive and finite, got nan s"),
        ({"seed": "x"}, "--seed must be a whole number, got 'x'"),
        ({"confirm_processes": "5"}, "--confirm-processes must be a whole number"),
        ({"strategy_options": [1]}, "strategy_options (--option) must be a dict"),
        ({"warm_start": 5}, "warm_start: a T4 results file's path, got 5"),
        ({"warm_start_share": "all"}, "warm_start_share 'all': give a share of the budget"),
    ],
)
def test_a_bad_search_option_is_one_line_before_anything_is_written(
    tmp_path: Path, change: dict, message: str
) -> None:
    said, compiler = _tune_refused(tmp_path, "new", change)
    assert message in said and compiler.calls == 0 and not (tmp_path / "new").exists()


def test_tune_returns_results_the_front_and_the_best(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    path = ctune.write_spec(
        "vector_add", KERNEL, N, _arguments(), {"block_size_x": [64, 128, 256, 512]},
        reference=vector_add, workdir=tmp_path / "w",
    )  # fmt: skip
    out = ctune.tune(
        "vector_add",
        KERNEL,
        N,
        _arguments(),
        {"block_size_x": [64, 128, 256, 512]},
        reference=vector_add,
        budget=np.int64(4),  # numpy scalars, as Kernel Tuner users pass them
        seed=np.int32(3),
        confirm_processes=0,
        workdir=tmp_path / "w",
        compiler=StandInCompiler(load_spec(path), fail_every=None),
        measurer=StandInMeasurer(samples=30, wrong_every=None, fault_corner=None),
    )
    assert out.objectives == ["p50"] and out.spec == path
    assert len(out.results) == 4
    assert {r["block_size_x"] for r in out.results} == {64, 128, 256, 512}
    assert all(r["outcome"] == "ok" and r["p50"] > 0 for r in out.results)
    best = min(out.results, key=lambda r: r["p50"])
    assert out.best == {"block_size_x": best["block_size_x"]}
    assert out.front[0]["key"] == best["key"]
    assert out.search.plan["budget"] == 4 and out.journal.is_file()
    # the result file reads back as an artifact, as a registry would hand it out
    assert out.artifact is not None
    artifact = ctune.load_artifact(out.artifact)
    pinned = artifact.pinned_member()
    assert pinned is not None and pinned.candidate.as_dict() == out.best
    assert pinned.nvcc_flags and "-cubin" not in pinned.nvcc_flags  # as a user compiles it
    assert artifact.provenance["budget"] == 4
    # and from a registry, by its key
    from ctune.registry.service import publish_artifact

    publish_artifact(tmp_path / "reg", artifact, commit=False)
    key = f"{artifact.kernel}/{artifact.problem}/{artifact.device_class}"
    assert ctune.load_artifact(key, registry=tmp_path / "reg").digest() == artifact.digest()
    with pytest.raises(CtuneError, match="no artifact vector_add/nope"):
        ctune.load_artifact(f"vector_add/nope/{artifact.device_class}", registry=tmp_path / "reg")


def test_tune_reports_a_typo_before_the_missing_gpu(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    path = ctune.write_spec(
        "vector_add", KERNEL, N, _arguments(), {"block_size_x": [64, 128]},
        reference=vector_add, workdir=tmp_path / "w",
    )  # fmt: skip

    class NoGpu(StandInMeasurer):
        capabilities = frozenset()

    compiler = StandInCompiler(load_spec(path))
    with pytest.raises(UserError, match="unknown strategy 'gaa'"):
        ctune.tune(
            "vector_add", KERNEL, N, _arguments(), {"block_size_x": [64, 128]},
            reference=vector_add, objective="p99", strategy="gaa", workdir=tmp_path / "w",
            compiler=compiler, measurer=NoGpu(),
        )  # fmt: skip
    with pytest.raises(UserError, match=r"warm_start_share 1.5: give a share .* \(0, 1\]"):
        ctune.tune(
            "vector_add", KERNEL, N, _arguments(), {"block_size_x": [64, 128]},
            reference=vector_add, objective="p99", warm_start_share=1.5, workdir=tmp_path / "w",
            compiler=compiler, measurer=NoGpu(),
        )  # fmt: skip
    assert compiler.calls == 0


def test_a_callable_restriction_is_written_as_the_expression_it_computes(tmp_path: Path) -> None:
    def fits(block_size_x, tile):
        return block_size_x * tile <= 512

    path = ctune.write_spec(
        "vector_add", KERNEL, N, _arguments(), {"block_size_x": [64, 128, 256], "tile": [1, 2, 4]},
        reference=vector_add, workdir=tmp_path / "w",
        restrictions=[lambda p: p["block_size_x"] * p["tile"] <= 512, fits, "tile >= 1"],
    )  # fmt: skip
    assert [r.source for r in load_spec(path).restrictions] == [
        "block_size_x * tile <= 512",
        "block_size_x * tile <= 512",
        "tile >= 1",
    ]
    one = ctune.write_spec(
        "vector_add", KERNEL, N, _arguments(), {"block_size_x": [64, 128]},
        reference=vector_add, workdir=tmp_path / "v",
        restrictions=lambda p: p["block_size_x"] < 128,
    )  # fmt: skip
    assert [r.source for r in load_spec(one).restrictions] == ["block_size_x < 128"]


def test_lambdas_on_one_line_are_each_written_as_their_own(tmp_path: Path, monkeypatch) -> None:
    """Each lambda is found by where its code comes from (co_positions), not as the first
    lambda of its lines: that wrote ['tile <= 2', 'tile <= 2'] for the second pair."""
    params = {"block_size_x": [128, 64, 256], "tile": [1, 2, 4]}
    call = {
        "kernel_name": "vector_add", "kernel_source": KERNEL, "problem_size": N,
        "arguments": _arguments(), "tune_params": params, "reference": vector_add,
    }  # fmt: skip
    pairs = [
        [lambda p: p["block_size_x"] >= 128, lambda p: p["tile"] <= 2],
        [lambda p: p["tile"] <= 2, lambda p: p["tile"] <= 2 and p["block_size_x"] >= 64],
    ]
    written = [
        [r.source for r in load_spec(ctune.write_spec(**call, restrictions=pair,
                                                      workdir=tmp_path / str(i))).restrictions]
        for i, pair in enumerate(pairs)
    ]  # fmt: skip
    assert written == [
        ["block_size_x >= 128", "tile <= 2"],
        ["tile <= 2", "tile <= 2 and block_size_x >= 64"],
    ]
    # without column information (python -X no_debug_ranges) two on a line are refused
    monkeypatch.setattr("ctune.api_keywords._code_spans", lambda code: [])
    with pytest.raises(UserError, match="cannot be told apart from the other lambdas on its line"):
        ctune.write_spec(**call, restrictions=pairs[0], workdir=tmp_path / "x")
    alone = ctune.write_spec(
        **call, restrictions=[lambda p: p["tile"] <= 2], workdir=tmp_path / "y"
    )
    assert [r.source for r in load_spec(alone).restrictions] == ["tile <= 2"]


def test_answer_gives_the_inputs_and_cmem_args_fill_constant_memory(tmp_path: Path) -> None:
    arguments = _arguments()
    arguments[1] = np.arange(N, dtype=np.float32)  # given data, not ctune's random values
    expected = arguments[1] + arguments[2]
    call = {
        "kernel_name": "vector_add", "kernel_source": KERNEL, "problem_size": N,
        "arguments": arguments, "tune_params": {"block_size_x": [64]}, "workdir": tmp_path / "w",
    }  # fmt: skip
    path = ctune.write_spec(**call, answer=[expected, None, None, None])
    spec = load_spec(path)
    assert [(a.name, a.role) for a in spec.args] == [
        ("c", "inout"), ("a", "input"), ("b", "input"), ("n", "scalar"),
    ]  # fmt: skip
    assert np.array_equal(np.load(path.parent / "arg_a.npy"), arguments[1])
    outputs = spec.reference()(np, {}, {})
    assert list(outputs) == ["c"] and np.array_equal(outputs["c"], expected)
    spec = load_spec(
        ctune.write_spec(**call, reference=vector_add, cmem_args={"coeff": np.ones(8, np.float32)})
    )
    coeff = spec.args[-1]
    assert (coeff.name, coeff.role, coeff.dtype, [e.source for e in coeff.shape]) == (
        "coeff", "constant", "float32", ["8"],
    )  # fmt: skip


def test_a_failed_tune_leaves_no_spec_folder(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CTUNE_CACHE_DIR", str(tmp_path / "cache"))
    path = ctune.write_spec(
        "vector_add", KERNEL, N, _arguments(), {"block_size_x": [64, 128]},
        reference=vector_add, workdir=tmp_path / "w",
    )  # fmt: skip
    with pytest.raises(UserError, match="unknown strategy 'gaa'"):
        ctune.tune(
            "vector_add", KERNEL, N, _arguments(), {"block_size_x": [64, 128]},
            reference=vector_add, strategy="gaa",
            compiler=StandInCompiler(load_spec(path)), measurer=StandInMeasurer(),
        )  # fmt: skip
    api = tmp_path / "cache" / "api"
    assert not api.exists() or not any(api.iterdir())
    # a folder the caller named and that was there before is theirs: it stays
    with pytest.raises(UserError, match="unknown strategy 'gaa'"):
        ctune.tune(
            "vector_add", KERNEL, N, _arguments(), {"block_size_x": [64, 128]},
            reference=vector_add, strategy="gaa", workdir=tmp_path / "w",
            compiler=StandInCompiler(load_spec(path)), measurer=StandInMeasurer(),
        )  # fmt: skip
    assert path.is_file()


def test_a_module_level_verify_is_copied_beside_the_spec(tmp_path: Path) -> None:
    call = {
        "kernel_name": "vector_add", "kernel_source": KERNEL, "problem_size": N,
        "arguments": _arguments(), "tune_params": {"block_size_x": [64]},
        "reference": vector_add, "tolerance": (1e-3, 0.25),
    }  # fmt: skip
    path = ctune.write_spec(**call, verify=close_enough, workdir=tmp_path / "w")
    spec = load_spec(path)
    assert spec.verify_path == (path.parent / "verify.py").resolve()
    assert "import numpy as np" in spec.verify_path.read_text()
    copied = spec.verify()
    assert copied is not None and copied is not close_enough
    right = {"c": np.ones(4, np.float32)}
    assert copied(right, {"c": right["c"] + 0.2}, atol=0.25) is True
    assert copied(right, {"c": right["c"] + 0.3}, atol=0.25) is False
    without = ctune.write_spec(**call, cache_dir=tmp_path / "cache")
    assert not (without.parent / "verify.py").exists() and load_spec(without).verify() is None


def test_a_verify_that_cannot_be_copied_is_refused_in_one_line(tmp_path: Path) -> None:
    threshold = 0.5

    def closure(expected, got, atol=None):
        return bool(np.abs(expected["c"] - got["c"]).max() <= threshold)

    class Checker:
        def check(self, expected, got, atol=None):
            return True

    call = {
        "kernel_name": "vector_add", "kernel_source": KERNEL, "problem_size": N,
        "arguments": _arguments(), "tune_params": {"block_size_x": [64]},
        "reference": vector_add, "workdir": tmp_path / "w",
    }  # fmt: skip
    for verify, why in [
        (closure, "closure is defined inside a function"),
        (Checker().check, "expected a function"),
        (Checker.check, "Checker.check is defined in a class"),
        (uses_a_global, "uses_a_global uses LIMIT, which is not a module its file imports"),
        (lambda e, g: True, "it is a lambda"),
    ]:
        with pytest.raises(UserError) as err:
            ctune.write_spec(**call, verify=verify)
        text = str(err.value)
        assert why in text and "\n" not in text, text
        assert "verify: {python: FILE.py:FUNCTION}" in text or "expected a function" in text
    assert not (tmp_path / "w").exists()  # refused before anything is written
