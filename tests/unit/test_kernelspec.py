"""Loading kernel specs: a valid one loads; each kind of bad input is one clear line."""

from __future__ import annotations

import copy
import os
import shutil
from pathlib import Path

import pytest
import yaml

from ctune.errors import SpecError, UserError
from ctune.spec import load_spec

DATA = Path(__file__).parents[1] / "data" / "kernels"


@pytest.fixture
def saxpy(tmp_path: Path) -> Path:
    for name in ("saxpy.cu", "saxpy.yaml", "saxpy_ref.py"):
        shutil.copy(DATA / name, tmp_path / name)
    return tmp_path / "saxpy.yaml"


def _edit(path: Path, change) -> Path:
    data = yaml.safe_load(path.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_loads_and_builds_space(saxpy: Path) -> None:
    spec = load_spec(saxpy)
    assert spec.name == "saxpy"
    assert spec.entry_symbol == "saxpy" and spec.entry_kind == "kernel"
    assert spec.space.names[:4] == ("ptxas_opt", "maxrregcount", "fast_math", "dlcm")
    assert spec.space.gene("BLOCK").values == (32, 64, 128, 256, 512, 1024)
    assert spec.select_problems("all")[1].dims == {"N": 1000003}
    out = spec.reference()(__import__("numpy"), {"x": 1.0, "y": 2.0}, {})
    assert out["y"] == 3.5
    assert len(spec.spec_sha256) == 64


@pytest.mark.parametrize(
    "entry",
    [
        "saxpy",
        "_Z5saxpyPKfPffi",
        "blas::saxpy",
        "saxpy_t<BLOCK, UNROLL>",
        "saxpy_t<128, float>",
        "saxpy(const float*, float*, float, int)",
        "saxpy_t<UNROLL, half, true, __nv_bfloat16, uint8_t, float4>",  # literals, CUDA types
        "saxpy_t<BLOCK * 2, (UNROLL + 1), Tile<2, 4>, ::ns::Acc>",  # expressions, qualified
        "saxpy_t<BLOCK, n>",  # a name the file declares (its parameter)
    ],
)
def test_entry_names_a_kernel_as_written(saxpy: Path, entry: str) -> None:
    _edit(saxpy, lambda d: d.update(entry=entry))
    assert load_spec(saxpy).entry_symbol == entry


def test_template_arguments_may_name_the_kernels_own_headers_and_defines(saxpy: Path) -> None:
    """Names a macro can set (problem defines, -D flags) or the file's own headers declare."""
    (saxpy.parent / "tile.cuh").write_text("struct Acc { float v; };\nconstexpr int kTile = 8;\n")
    saxpy.with_suffix(".cu").write_text(
        '#include "tile.cuh"\n' + saxpy.with_suffix(".cu").read_text()
    )
    entry = "saxpy_t<kTile, Acc, USE_X, WIDE>"
    _edit(
        saxpy,
        lambda d: (
            d.update(entry=entry, extra_flags=["-DUSE_X=1"]),
            d["problems"][0].update(defines={"WIDE": 1}),
        ),
    )
    assert load_spec(saxpy).entry_symbol == entry
    (saxpy.parent / "tile.cuh").write_text("template <typename Acc> struct Box {};\n")
    with pytest.raises(SpecError, match="'kTile' in saxpy_t"):
        load_spec(saxpy)  # a template parameter's name means nothing at the instantiation


def test_deterministic_is_a_yaml_boolean(saxpy: Path) -> None:
    assert load_spec(saxpy).deterministic  # left out: true
    saxpy.write_text(saxpy.read_text() + "deterministic: no\n")  # YAML 1.1's false
    assert load_spec(saxpy).deterministic is False


def test_cu_path_finds_sidecar(saxpy: Path) -> None:
    assert load_spec(saxpy.with_suffix(".cu")).name == "saxpy"


def test_spec_digest_ignores_comments_but_not_content(saxpy: Path) -> None:
    before = load_spec(saxpy).spec_sha256
    saxpy.write_text("# a comment\n" + saxpy.read_text())
    assert load_spec(saxpy).spec_sha256 == before
    _edit(saxpy, lambda d: d["problems"].append({"name": "big", "dims": {"N": 1 << 24}}))
    assert load_spec(saxpy).spec_sha256 != before


BAD = [
    ("unknown top-level key", lambda d: d.update(threads=4), "threads: unknown key"),
    ("unknown flag gene", lambda d: d["flags"].append("O7"), "flags.O7: unknown flag gene"),
    (
        "flag gene named twice",
        lambda d: d["flags"].append("ptxas_opt"),
        "flags.ptxas_opt: named twice",
    ),
    ("metrics a list", lambda d: d.update(metrics=["a"]), "metrics: expected a mapping NAME"),
    ("metrics text", lambda d: d.update(metrics="x"), "metrics: expected a mapping NAME"),
    ("metrics a number", lambda d: d.update(metrics=5), "got int 5"),
    ("metric name a number", lambda d: d.update(metrics={5: "N"}), "metrics.5: a metric's name"),
    ("restrictions a number", lambda d: d.update(restrictions=5), "restrictions: expected a list"),
    (
        "restrictions one text, not a list",
        lambda d: d.update(restrictions="BLOCK > 0"),
        "restrictions: expected a list of expressions, got str 'BLOCK > 0'",
    ),
    ("genes a list", lambda d: d.update(genes=[1]), "genes: expected a mapping NAME"),
    ("derived a list", lambda d: d.update(derived=["x"]), "derived: expected a mapping NAME"),
    ("problem sets a list", lambda d: d.update(problem_sets=["all"]), "problem_sets: expected"),
    (
        "restriction names an unknown gene",
        lambda d: d["restrictions"].append("WARPS <= 4"),
        "unknown name 'WARPS'",
    ),
    (
        "restriction uses a forbidden construct",
        lambda d: d["restrictions"].append("__import__('os')"),
        "restrictions[1]",
    ),
    (
        "default breaks a restriction",
        lambda d: d["restrictions"].append("BLOCK < 128"),
        "default values break restriction 'BLOCK < 128'",
    ),
    (
        "restriction that cannot be evaluated at the default",
        lambda d: d["restrictions"].append("BLOCK / (UNROLL - 1) > 0"),
        "restrictions[1]: 'BLOCK / (UNROLL - 1) > 0' cannot be evaluated with the default genes "
        "for problem n1m: division by zero",
    ),
    (
        "derived value that cannot be evaluated at the default",
        lambda d: (
            d.update(derived={"per": "N // (UNROLL - 1)"}),
            d["restrictions"].append("per > 0"),
        ),
        "derived.per: 'N // (UNROLL - 1)' cannot be evaluated with the default genes for "
        "problem n1m: division by zero",
    ),
    (
        "default not among values",
        lambda d: d["genes"]["BLOCK"].update(default=100),
        "genes.BLOCK.default",
    ),
    (
        "gene with two value forms",
        lambda d: d["genes"]["UNROLL"].update(pow2=[1, 8]),
        "genes.UNROLL",
    ),
    (
        "gene name not an identifier",
        lambda d: d["genes"].update({"1X": {"values": [1]}}),
        "genes.1X",
    ),
    (
        "gene clashes with a flag",
        lambda d: d["genes"].update(fast_math={"values": [0, 1]}),
        "clashes",
    ),
    ("bad dtype", lambda d: d["args"][0].update(dtype="float8"), "args.x.dtype"),
    ("bad role", lambda d: d["args"][0].update(role="weights"), "args.x.role"),
    ("shape names an unknown dim", lambda d: d["args"][0].update(shape=["M"]), "unknown name 'M'"),
    ("scalar without value", lambda d: d["args"][2].pop("value"), "args.a.value"),
    ("zero inputs", lambda d: d["args"][0].update(init={"uniform": [0, 0]}), "lo < hi"),
    ("zero normal", lambda d: d["args"][0].update(init={"normal": [0, 0]}), "not all zeros"),
    ("init not numbers", lambda d: d["args"][0].update(init={"normal": [0, "abc"]}), "numbers"),
    ("negative std", lambda d: d["args"][0].update(init={"normal": [0, -1]}), "std >= 0"),
    (
        "NaN and infinite bounds",
        lambda d: d["args"][0].update(init={"uniform": [float("nan"), float("inf")]}),
        "args.x.init: uniform: [nan, inf] must be finite numbers",
    ),
    (
        "infinite std",
        lambda d: d["args"][0].update(init={"normal": [0, float("inf")]}),
        "args.x.init: normal: [0, inf] must be finite numbers",
    ),
    (
        "NaN as text",
        lambda d: d["args"][0].update(init={"uniform": ["nan", 1]}),
        "must be finite numbers",
    ),
    (
        "problem define with a gene's name",
        lambda d: d["problems"][0].update(defines={"BLOCK": 64}),
        "problems.n1m.defines.BLOCK: 'BLOCK' is a gene, whose value would replace this one in "
        "every build; rename one of them",
    ),
    (
        "problem dim with a gene's name",
        lambda d: d["problems"][1]["dims"].update(UNROLL=2),
        "problems.ragged.dims.UNROLL: 'UNROLL' is a gene",
    ),
    (
        "problem dim with a flag gene's name",
        lambda d: d["problems"][1]["dims"].update(fast_math=1),
        "problems.ragged.dims.fast_math: 'fast_math' is a gene",
    ),
    (
        "problem dim with a device gene's name",
        lambda d: d["problems"][1]["dims"].update(sm_clock_mhz=1),
        "problems.ragged.dims.sm_clock_mhz: 'sm_clock_mhz' is a gene",
    ),
    (
        "negative problem dim",
        lambda d: d["problems"][0].update(dims={"N": -5}),
        "problems.n1m.dims.N: -5 is negative",
    ),
    ("suggest not a list", lambda d: d["genes"]["BLOCK"].update(suggest=256), "suggest"),
    (
        "suggestion not among the values",
        lambda d: d["genes"]["UNROLL"].update(suggest=[2, 3]),
        "genes.UNROLL.suggest: 3 is not among the values [1, 2, 4, 8]",
    ),
    (
        "text default for a number",
        lambda d: d["genes"]["UNROLL"].update(default="2"),
        "genes.UNROLL.default: '2' is not among the values [1, 2, 4, 8]",
    ),
    ("no outputs", lambda d: d["args"][1].update(role="input"), "no output arg"),
    (
        "scalar value divides by zero",
        lambda d: d["args"][3].update(value="N / 0"),
        "args.n.value: division by zero in 'N / 0' (problem n1m)",
    ),
    (
        "negative shape on one problem",
        lambda d: d["args"][0].update(shape=["N - 2000000"]),
        "args.x.shape: shape entry 'N - 2000000' = -951424 is not a size (a whole number >= 0) "
        "(problem n1m)",
    ),
    (
        "shape divides by zero",
        lambda d: d["args"][0].update(shape=["N // (N - N)"]),
        "args.x.shape: shape entry 'N // (N - N)': division by zero",
    ),
    (
        "scalar too large for int8",
        lambda d: d["args"][3].update(dtype="int8", value=1000),
        "args.n.value: 1000 does not fit int8 (-128..127) (problem n1m)",
    ),
    (
        "negative uint32",
        lambda d: d["args"][3].update(dtype="uint32", value=-1),
        "args.n.value: -1 does not fit uint32 (0..4294967295)",
    ),
    (
        "a problem's dtype the scalar does not fit",
        lambda d: d["problems"][1].update(dtypes={"n": "uint16"}),
        "args.n.value: 1000003 does not fit uint16 (0..65535) (problem ragged)",
    ),
    (
        "float16 overflow",
        lambda d: d["args"][2].update(dtype="float16", value=1.0e6),
        "args.a.value: 1000000.0 does not fit float16 (at most 65504)",
    ),
    (
        "scalar of a runtime gene at its default",
        lambda d: (
            d["genes"].update(SPLIT={"values": [0, 1], "family": "runtime"}),
            d["args"][3].update(value="N // SPLIT"),
        ),
        "args.n.value: division by zero in 'N // SPLIT' (problem n1m, runtime genes at their "
        "defaults)",
    ),
    (
        "negative grid",
        lambda d: d["launch"].update(grid=["-1"]),
        "launch.grid[0]: '-1' = -1 (allowed: 1..2147483647) for problem n1m with the default genes",
    ),
    (
        "empty block",
        lambda d: d["launch"].update(block=["BLOCK*0"]),
        "launch.block[0]: 'BLOCK*0' = 0 (allowed: 1..2147483647) for problem n1m",
    ),
    (
        "negative shared memory",
        lambda d: d["launch"].update(dynamic_smem_bytes="-5"),
        "launch.dynamic_smem_bytes: '-5' = -5 (allowed: 0..2147483647)",
    ),
    (
        "launch rule dividing by zero",
        lambda d: d["launch"].update(grid=["N // (UNROLL - 1)"]),
        "launch.grid[0]: division by zero in 'N // (UNROLL - 1)' for problem n1m",
    ),
    (
        "grid of 0 for a valid candidate other than the default",
        lambda d: d["launch"].update(grid=["ceil_div(N, BLOCK * UNROLL)", "BLOCK // 64"]),
        "launch.grid[1]: 'BLOCK // 64' = 0 (allowed: 1..65535) for problem n1m at BLOCK=32, a "
        "valid candidate (fix the rule, or add a restriction)",
    ),
    (
        "missing reference file",
        lambda d: d.update(reference={"python": "nope.py:f"}),
        "reference.python: nope.py is not a file in the spec's folder",
    ),
    (
        "reference function the file does not define",
        lambda d: d.update(reference={"python": "saxpy_ref.py:no_such_function"}),
        "reference.python: saxpy_ref.py defines no function 'no_such_function' at its top level",
    ),
    (
        "reference outside the spec's folder, by an absolute path",
        lambda d: d.update(reference={"python": f"{DATA / 'saxpy_ref.py'}:saxpy"}),
        "saxpy_ref.py resolves outside the spec's folder",
    ),
    (
        "reference outside the spec's folder, by ..",
        lambda d: d.update(reference={"python": "../elsewhere/saxpy_ref.py:saxpy"}),
        "reference.python: ../elsewhere/saxpy_ref.py resolves outside the spec's folder",
    ),
    (
        "malformed reference",
        lambda d: d.update(reference={"python": "saxpy_ref"}),
        "FILE.py:FUNCTION",
    ),
    ("problem set with unknown problem", lambda d: d["problem_sets"].update(x=["n2m"]), "'n2m'"),
    (
        "problem set naming a problem twice",
        lambda d: d["problem_sets"].update(x=["n1m", "n1m"]),
        "problem_sets.x: 'n1m' is named twice",
    ),
    (
        "duplicate problem",
        lambda d: d["problems"].append(copy.deepcopy(d["problems"][0])),
        "appears twice",
    ),
    ("bad problem name", lambda d: d["problems"][0].update(name="N 1M"), "must match"),
    ("unknown default problem", lambda d: d.update(default_problem="zz"), "default_problem"),
    ("entry not a kernel name", lambda d: d.update(entry="sax py"), "entry: 'sax py': write"),
    ("entry with odd characters", lambda d: d.update(entry="saxpy;rm"), "no C++ kernel name"),
    (
        "launcher not a C identifier",
        lambda d: (d.pop("launch"), d.update(entry={"symbol": "ns::go", "kind": "launcher"})),
        "entry.symbol: 'ns::go' is not a C identifier",
    ),
    (
        "runtime gene as a template argument",
        lambda d: (
            d["genes"]["BLOCK"].update(family="runtime"),
            d.update(entry="saxpy_t<BLOCK, UNROLL>"),
        ),
        "entry: 'BLOCK' is a runtime gene: it never reaches nvcc",
    ),
    (
        "template argument naming nothing",
        lambda d: d.update(entry="saxpy_t<BLOCK, UNROLLK>"),
        "entry: 'UNROLLK' in saxpy_t<BLOCK, UNROLLK> is neither a gene (BLOCK, UNROLL), a "
        "problem define nor a literal, and saxpy.cu does not declare it; fix the name, or "
        "qualify a type another folder declares (::UNROLLK)",
    ),
    (
        "template argument naming a problem dim",
        lambda d: d.update(entry="saxpy_t<BLOCK, N>"),
        "saxpy.cu does not declare it; problem dims are not -D: add it to the problems' defines",
    ),
    ("bad entry kind", lambda d: d.update(entry={"symbol": "saxpy", "kind": "host"}), "entry.kind"),
    ("launch missing grid", lambda d: d["launch"].pop("grid"), "launch.grid"),
    (
        "launcher with a launch rule",
        lambda d: d.update(entry={"symbol": "s", "kind": "launcher"}),
        "remove 'launch'",
    ),
    ("hostile extra flag", lambda d: d.update(extra_flags=["-o", "/etc/passwd"]), "extra_flags"),
    (
        "range of a trillion values (counted, never built)",
        lambda d: d["genes"].update(UNROLL={"range": [1, 10**12], "default": 1}),
        "genes.UNROLL.range: 1000000000000 values; at most 4096",
    ),
    (
        "more values than a gene may take",
        lambda d: d["genes"]["UNROLL"].update(values=list(range(1, 4098))),
        "genes.UNROLL.values: 4097 values; at most 4096",
    ),
    (
        "pow2 over a 4,400-bit range",
        lambda d: d["genes"]["BLOCK"].update(pow2=[32, 2**4400], default=256),
        "genes.BLOCK.pow2: 4396 values; at most 4096",
    ),
    (
        "nested exponent in a restriction",
        lambda d: d["restrictions"].append("((((BLOCK**64)**64)**64)**64)**64 > 0"),
        "((((BLOCK**64)**64)**64)**64)**64 > 0",
    ),
    (
        "1,900 unary minus signs in a restriction",
        lambda d: d["restrictions"].append("-" * 1900 + "BLOCK < 0"),
        "restrictions[1]: expression nested deeper than 100 levels",
    ),
    ("bad l2 policy", lambda d: d.update(l2_policy="warm"), "l2_policy: 'warm'"),
    (
        "deterministic as text",
        lambda d: d.update(deterministic="false"),
        "deterministic: expected true or false, got 'false'",
    ),
    ("deterministic maybe", lambda d: d.update(deterministic="maybe"), "deterministic: expected"),
    ("deterministic a number", lambda d: d.update(deterministic=0), "got 0"),
    ("bad l2 policy, old name", lambda d: d.update(l2="warm"), "l2_policy: 'warm'"),
    ("both names, differing", lambda d: d.update(l2="hot", l2_policy="cold"), "keep 'l2_policy'"),
    (
        "bad tolerance",
        lambda d: d.update(tolerance={"default": {"rel_l2": -1, "max_abs": 1}}),
        "positive",
    ),
    (
        "tolerance for a non-output",
        lambda d: d.update(tolerance={"x": {"rel_l2": 1, "max_abs": 1}}),
        "not an output",
    ),
    ("missing required key", lambda d: d.pop("args"), "args: missing"),
    ("source outside the folder", lambda d: d.update(source="../../etc/passwd"), "source"),
    (
        "unknown gene family",
        lambda d: d["genes"]["UNROLL"].update(family="runtim"),
        "genes.UNROLL.family: 'runtim' (allowed: launch, template, define, runtime)",
    ),
    (
        "scalar value names a compiled gene",
        lambda d: d["args"][3].update(value="N // BLOCK"),
        "args.n.value: 'BLOCK' cannot be a scalar's value (it is a launch gene, compiled in: "
        "read the BLOCK macro in the kernel, or make it family runtime)",
    ),
    (
        "runtime gene used nowhere",
        lambda d: d["genes"].update(SWZ={"values": [0, 1], "family": "runtime"}),
        "genes.SWZ: a runtime gene must be named by the launch rule (grid, block, "
        "dynamic_smem_bytes)",
    ),
    (
        "runtime gene named only by a restriction",
        lambda d: (
            d["genes"].update(SWZ={"values": [0, 1], "family": "runtime"}),
            d["restrictions"].append("SWZ == 0 or BLOCK >= 64"),
        ),
        "genes.SWZ: a runtime gene must be named",
    ),
    (
        "shape names a runtime gene",
        lambda d: (
            d["genes"]["UNROLL"].update(family="runtime"),
            d["args"][0].update(shape=["N * UNROLL"]),
        ),
        "args.x.shape[0]: unknown name 'UNROLL'",
    ),
    (
        "scalar value names a flag gene",
        lambda d: d["args"][3].update(value="maxrregcount"),
        "args.n.value: unknown name 'maxrregcount'",
    ),
    (
        "ifdef switch with values other than 0 and 1",
        lambda d: d["genes"].update(USE_LDG={"values": [0, 2], "ifdef": True}),
        "genes.USE_LDG.ifdef: an #ifdef switch is off or on: give it values: [0, 1]",
    ),
    (
        "ifdef switch of another family",
        lambda d: d["genes"].update(USE_LDG={"values": [0, 1], "ifdef": True, "family": "launch"}),
        "genes.USE_LDG.ifdef: an #ifdef switch is family define (not launch)",
    ),
    (
        "ifdef not a boolean",
        lambda d: d["genes"].update(USE_LDG={"values": [0, 1], "ifdef": "yes"}),
        "genes.USE_LDG.ifdef: expected true or false",
    ),
    (
        "ifdef switch as a template argument",
        lambda d: (
            d["genes"].update(USE_LDG={"values": [0, 1], "ifdef": True}),
            d.update(entry="saxpy_t<BLOCK, USE_LDG>"),
        ),
        "entry: 'USE_LDG' is an #ifdef switch: off, it is not defined",
    ),
]


def test_a_launch_rule_is_checked_only_where_the_restrictions_allow(saxpy: Path) -> None:
    """BLOCK * UNROLL > 4096 would give a grid y of 0, and the restriction rules it out."""
    _edit(saxpy, lambda d: d["launch"].update(grid=["1", "4096 // (BLOCK * UNROLL)"]))
    assert load_spec(saxpy).launch is not None


@pytest.mark.parametrize("written", [True, 1.0])
def test_a_default_or_suggestion_written_otherwise_is_the_listed_value(
    saxpy: Path, written: object
) -> None:
    """``true`` and ``1.0`` equal the value 1: stored as written, a result file would say
    ``"UNROLL": true`` where the build had ``-DUNROLL=1``."""
    _edit(saxpy, lambda d: d["genes"]["UNROLL"].update(default=written, suggest=[written, 4.0]))
    gene = load_spec(saxpy).space.gene("UNROLL")
    assert [type(v) for v in (gene.default, *gene.suggest)] == [int, int, int]
    assert (gene.default, gene.suggest) == (1, (1, 4))


def test_runtime_gene_as_a_scalar_argument(saxpy: Path, tmp_path: Path) -> None:
    """A runtime gene may be a scalar's value: it reaches the kernel without a rebuild."""

    data = yaml.safe_load(saxpy.read_text())
    data["genes"]["SPLIT"] = {"values": [1, 2, 4], "default": 1, "family": "runtime"}
    data["args"].append({"name": "split", "role": "scalar", "dtype": "int32", "value": "SPLIT"})
    path = tmp_path / "saxpy.yaml"
    path.write_text(yaml.safe_dump(data))
    for name in ("saxpy.cu", "saxpy_ref.py"):
        (tmp_path / name).write_text((saxpy.parent / name).read_text())
    spec = load_spec(path)
    assert "SPLIT" in spec.runtime_names
    split = next(a for a in spec.args if a.name == "split")
    assert split.value is not None and split.value.evaluate({"N": 8, "SPLIT": 4}) == 4


@pytest.mark.parametrize(("what", "change", "message"), BAD, ids=[b[0] for b in BAD])
def test_bad_spec_is_one_line_naming_file_and_key(saxpy: Path, what, change, message) -> None:
    _edit(saxpy, change)
    with pytest.raises(SpecError) as err:
        load_spec(saxpy)
    text = str(err.value)
    assert message in text, text
    assert str(saxpy) in text
    assert "\n" not in text


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name: saxpy\nname: other\n", "duplicate key 'name'"),
        ("entry: &e saxpy\nname: *e\n", "anchors are not allowed"),
        ("entry: [saxpy\n", "line"),
        ("- just\n- a list\n", "expected a mapping"),
        ("\xff\xfe", "not UTF-8"),
        ("? [1, 2]\n: 3\n", "line 1: a key must be a single value"),
    ],
)
def test_malformed_yaml(saxpy: Path, text: str, message: str) -> None:
    saxpy.write_bytes(text.encode("latin-1") if "\xff" in text else text.encode())
    with pytest.raises(SpecError, match=message):
        load_spec(saxpy)


def test_a_spec_nested_1000_deep_is_one_line(saxpy: Path) -> None:
    saxpy.write_text(saxpy.read_text() + "extra: " + "[" * 1000 + "\n")  # 3 KB
    with pytest.raises(SpecError, match=r"saxpy\.yaml: line \d+: nested deeper than 32 levels"):
        load_spec(saxpy)


@pytest.mark.timeout(20)
@pytest.mark.parametrize("special", ["/dev/zero", "fifo"])
def test_a_spec_that_is_not_a_regular_file_is_refused_unread(saxpy: Path, special: str) -> None:
    saxpy.unlink()
    if special == "fifo":
        os.mkfifo(saxpy)
    else:
        saxpy.symlink_to(special)
    kind = "a FIFO" if special == "fifo" else "a character device"
    with pytest.raises(SpecError, match=rf"^spec .*saxpy\.yaml: {kind}, not a regular file$"):
        load_spec(saxpy.with_suffix(".cu"))


def test_a_source_that_is_not_a_regular_file_is_named(saxpy: Path) -> None:
    source = saxpy.with_suffix(".cu")
    source.unlink()
    source.symlink_to("/dev/zero")
    with pytest.raises(SpecError, match=r"source: .* is a character device, not a file"):
        load_spec(saxpy)


def test_missing_sidecar_and_file(tmp_path: Path) -> None:
    cu = tmp_path / "lonely.cu"
    cu.write_text('extern "C" __global__ void k() {}\n')
    with pytest.raises(UserError, match=r"no spec sidecar lonely\.yaml"):
        load_spec(cu)
    with pytest.raises(UserError, match="no such file"):
        load_spec(tmp_path / "absent.cu")


def test_problem_overrides(saxpy: Path) -> None:
    _edit(
        saxpy,
        lambda d: d["problems"].append(
            {
                "name": "f64",
                "dims": {"N": 10},
                "defines": {"USE_F64": 1},
                "dtypes": {"x": "float64"},
            }
        ),
    )
    spec = load_spec(saxpy)
    f64 = spec.problem("f64")
    assert f64.defines == {"USE_F64": 1}
    assert spec.args[0].dtype_for(f64) == "float64"
    assert spec.args[0].dtype_for(spec.problem("n1m")) == "float32"
    _edit(saxpy, lambda d: d["problems"][-1].update(dtypes={"z": "float64"}))
    with pytest.raises(SpecError, match="no such arg"):
        load_spec(saxpy)


def test_runtime_genes_load_and_stay_out_of_the_build(saxpy: Path) -> None:
    spec = load_spec(DATA / "rt_saxpy.yaml")
    assert spec.runtime_names == {"BLOCK", "ITEMS"}
    assert [g.compiled for g in spec.genes] == [False, False, True]
    assert spec.launch is not None and spec.launch.grid[0].names == {"N", "BLOCK", "ITEMS"}
    # a runtime gene may reach the launch rule through a derived value, and may be restricted
    _edit(
        saxpy,
        lambda d: (
            d["genes"]["BLOCK"].update(family="runtime"),
            d.update(derived={"threads": "BLOCK"}),
            d["launch"].update(block=["threads"]),
        ),
    )
    spec = load_spec(saxpy)
    assert spec.runtime_names == {"BLOCK"}
    assert spec.space.violations({**spec.space.default_values(), "BLOCK": 1024, "UNROLL": 8}, {})


def test_an_ifdef_switch_off_is_not_defined_anywhere_a_build_is(saxpy: Path) -> None:
    """``#ifdef USE_LDG`` with ``-DUSE_LDG=0`` is on: an ifdef switch's 0 passes no -D at all
    (argv, the closure's defines, the artifact's exported defines); a plain 0/1 gene keeps
    ``-DNAME=0`` as before."""
    from ctune.compile.command import default_defines, split_genes
    from ctune.registry.assemble import front_member
    from ctune.search.result import MemberResult

    _edit(
        saxpy,
        lambda d: d["genes"].update(
            USE_LDG={"values": [0, 1], "default": 0, "ifdef": True},
            SWZ={"values": [0, 1], "default": 0},
        ),
    )
    spec = load_spec(saxpy)
    assert spec.space.gene("USE_LDG").ifdef and not spec.space.gene("SWZ").ifdef
    off = spec.space.default_values()
    assert split_genes(spec.space.genes, off)[0] == {"BLOCK": 256, "UNROLL": 1, "SWZ": 0}
    on = split_genes(spec.space.genes, {**off, "USE_LDG": 1})[0]
    assert on == {"BLOCK": 256, "UNROLL": 1, "USE_LDG": 1, "SWZ": 0}
    assert default_defines(spec.genes) == {"BLOCK": 256, "UNROLL": 1, "SWZ": 0}
    problem = spec.problem()
    for values, defines in ((off, {}), ({**off, "USE_LDG": 1}, {"USE_LDG": 1})):
        cand = spec.candidate(values)
        result = MemberResult(cand, cand.key(), {}, (1.0,), None, False, None, None)
        m = front_member(spec, problem, result, keep_samples=False)
        assert m.defines == {"BLOCK": 256, "UNROLL": 1, "SWZ": 0, **defines}


def test_a_recorded_candidate_in_todays_space() -> None:
    """An artifact's member recorded before a gene was added builds with that gene's default;
    one that sets a gene the spec dropped cannot be honoured (one line: retune)."""
    spec = load_spec(Path(__file__).parents[2] / "kernels" / "gemm.cu")
    current = spec.default_candidate()
    assert spec.in_space(current) is current
    older = spec.candidate({k: v for k, v in current.as_dict().items() if k != "SWAP_AB"})
    assert spec.in_space(older).as_dict() == current.as_dict()
    dropped = spec.candidate({**current.as_dict(), "OLD_GENE": 1})
    with pytest.raises(UserError, match=r"OLD_GENE.*retune"):
        spec.in_space(dropped)


@pytest.mark.parametrize("bad", ["8 $(touch x)", "`id`", "${HOME}", 'a"b', "a\\b", "a\nb"])
def test_a_string_value_nvccs_shell_would_act_on_is_refused_naming_file_and_key(
    saxpy: Path, bad: str
) -> None:
    _edit(saxpy, lambda d: d["genes"].update(MODE={"values": ["plain", bad], "family": "define"}))
    with pytest.raises(SpecError) as caught:
        load_spec(saxpy)
    message = str(caught.value)
    assert message.startswith(f"{saxpy}: genes.MODE.values: ") and "\n" not in message
    _edit(saxpy, lambda d: (d["genes"].pop("MODE"), d["problems"][0].update(defines={"M": bad})))
    with pytest.raises(SpecError, match=r"problems\.n1m\.defines\.M: "):
        load_spec(saxpy)


def test_a_template_argument_with_commas_and_a_statement_are_fine_values(saxpy: Path) -> None:
    shape = "cutlass::gemm::GemmShape<128, 128, 64>"
    genes = {"SHAPE": {"values": [shape, "int a; int b;"], "family": "define"}}
    _edit(saxpy, lambda d: d["genes"].update(genes))
    assert load_spec(saxpy).space.gene("SHAPE").values == (shape, "int a; int b;")
