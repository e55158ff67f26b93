"""Buffers of issue 46 on the CPU (numpy): vector and struct elements, constants, and input
data given as .npy, .npz or a Python function, checked against the declared buffer and
seen by the reference as the kernel sees it."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

from ctune.errors import SpecError
from ctune.measure.arrays import float32_values, make_buffers, struct_field
from ctune.measure.correctness import check_outputs, reference_outputs
from ctune.spec import load_spec

GIVEN = Path(__file__).parents[2] / "data" / "kernels" / "given"


@pytest.fixture
def fir(tmp_path: Path) -> Path:
    for item in GIVEN.iterdir():
        shutil.copy(item, tmp_path / item.name)
    return tmp_path / "fir_points.yaml"


def _set_init(path: Path, arg: str, init) -> None:
    data = yaml.safe_load(path.read_text())
    next(a for a in data["args"] if a["name"] == arg)["init"] = init
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def _buffers(path: Path, seed: int = 7):
    spec = load_spec(path)
    return spec, make_buffers(np, spec, spec.problem(), seed)


def test_storage_layouts_and_the_parameter_order(fir: Path) -> None:
    _, buffers = _buffers(fir)
    assert buffers.order == ("in", "pts", "out", "n")  # the constant is no parameter
    assert [type(a).__name__ for a in buffers.args()] == ["ndarray", "ndarray", "ndarray", "int32"]
    assert buffers.arrays["in"].shape == (4096, 2) and buffers.arrays["in"].dtype == np.float32
    assert buffers.arrays["pts"].shape == (4096, 8) and buffers.arrays["pts"].dtype == np.uint8
    assert np.isnan(buffers.arrays["out"]).all()  # poisoned
    assert np.array_equal(buffers.constants["coeffs"], np.load(GIVEN / "taps.npy"))


def test_the_reference_sees_the_given_values(fir: Path) -> None:
    spec, buffers = _buffers(fir)
    seen = buffers.reference_inputs(np)
    expected = np.load(GIVEN / "taps.npy")
    assert np.array_equal(seen["coeffs"], expected)
    assert set(seen["pts"]) == {"x", "y"}
    assert np.all(np.diff(seen["pts"]["x"]) >= 0)  # the function's sorted points
    assert seen["in"].shape == (4096, 2)
    out = reference_outputs(np, spec, spec.reference(), spec.problem(), buffers)["out"]
    # the kernel's sum, written out for one element
    x, y = seen["in"][5]
    want = (
        sum(expected[t] * (x + t * y) for t in range(16))
        + seen["pts"]["x"][5] * seen["pts"]["y"][5]
    )
    assert out[5] == pytest.approx(want, rel=1e-5)


def test_a_function_sees_the_seed_and_is_deterministic_for_it(fir: Path) -> None:
    _, first = _buffers(fir, seed=1)
    _, again = _buffers(fir, seed=1)
    _, other = _buffers(fir, seed=2)
    assert np.array_equal(first.arrays["pts"], again.arrays["pts"])
    assert not np.array_equal(first.arrays["pts"], other.arrays["pts"])


def test_a_function_that_ignores_the_seed_of_its_draws_is_refused(fir: Path) -> None:
    (fir.parent / "noisy.py").write_text(
        "import numpy as np\n"
        "def make(dims, seed):\n"
        "    return np.random.default_rng().random((16,), dtype=np.float32)\n"
    )
    _set_init(fir, "coeffs", {"python": "noisy.py:make"})
    with pytest.raises(SpecError, match="two calls with seed 7 returned different arrays"):
        _buffers(fir)


def test_an_npz_member_is_read(fir: Path) -> None:
    taps = np.linspace(1, 2, 16, dtype=np.float32)
    np.savez(fir.parent / "data.npz", taps=taps, other=np.zeros(3))
    _set_init(fir, "coeffs", {"npz": "data.npz:taps"})
    _, buffers = _buffers(fir)
    assert np.array_equal(buffers.constants["coeffs"], taps)
    _set_init(fir, "coeffs", {"npz": "data.npz:nothere"})
    with pytest.raises(SpecError, match=r"no member 'nothere' \(has: taps, other\)"):
        _buffers(fir)


@pytest.mark.parametrize(
    ("values", "words"),
    [
        (np.zeros(16, dtype=np.float64), "has dtype float64, the buffer holds float32"),
        (np.zeros(15, dtype=np.float32), "has shape (15,), the buffer's is (16,)"),
    ],
)
def test_given_data_of_another_shape_or_type_is_one_line(fir: Path, values, words) -> None:
    np.save(fir.parent / "taps.npy", values)
    with pytest.raises(SpecError) as caught:
        _buffers(fir)
    assert words in str(caught.value) and "args.coeffs.init: taps.npy" in str(caught.value)


def test_a_vector_given_as_components_and_a_struct_by_its_fields(fir: Path) -> None:
    np.save(fir.parent / "in.npy", np.arange(8192, dtype=np.float32).reshape(4096, 2))
    _set_init(fir, "in", {"npy": "in.npy"})
    _, buffers = _buffers(fir)
    assert buffers.arrays["in"][3].tolist() == [6.0, 7.0]
    np.save(fir.parent / "in.npy", np.arange(4096, dtype=np.float32))
    with pytest.raises(SpecError, match=r"shape \(4096,\), the buffer's is \(4096, 2\)"):
        _buffers(fir)
    _set_init(fir, "in", "normal")
    wrong = np.zeros(4096, dtype=[("x", np.float32), ("z", np.float32)])
    np.save(fir.parent / "pts.npy", wrong)
    _set_init(fir, "pts", {"npy": "pts.npy"})
    with pytest.raises(SpecError, match="fields x, y"):
        _buffers(fir)


def test_a_pickle_is_never_loaded(fir: Path) -> None:
    np.save(fir.parent / "taps.npy", np.array([object()] * 16, dtype=object))
    with pytest.raises(SpecError, match="not a readable npy file"):
        _buffers(fir)


def test_struct_fields_keep_their_c_offsets_and_random_fields_are_nonzero(tmp_path) -> None:
    from ctune.measure.arrays import generate_input
    from ctune.spec.elements import struct_element

    dtype = struct_element([("flag", "int8"), ("v", "float2"), ("w", "float64")]).dtype
    stored = generate_input(np, dtype, (64,), ("normal", 0.0, 1.0), 3)
    assert stored.shape == (64, 24)
    assert np.all(stored[:, 1:8] == 0)  # padding
    fields = float32_values(np, stored, dtype)
    assert fields["v"].shape == (64, 2) and fields["w"].shape == (64,)
    assert np.all(fields["w"] != 0) and np.all(struct_field(np, stored, dtype, "flag") != 0)


def test_a_struct_output_is_compared_field_by_field(fir: Path) -> None:
    data = yaml.safe_load(fir.read_text())
    out = next(a for a in data["args"] if a["name"] == "out")
    out["dtype"] = {"struct": [["s", "float32"], ["k", "int32"]]}
    fir.write_text(yaml.safe_dump(data, sort_keys=False))
    spec, buffers = _buffers(fir)
    stored = buffers.arrays["out"]
    stored[..., 0:4] = np.full((4096, 1), 2.0, dtype=np.float32).view(np.uint8)
    stored[..., 4:8] = np.full((4096, 1), 3, dtype=np.int32).view(np.uint8)
    good = {"out": {"s": np.full(4096, 2.0), "k": np.full(4096, 3.0)}}
    assert all(e.ok for e in check_outputs(np, spec, spec.problem(), buffers, good))
    bad = {"out": {"s": np.full(4096, 2.0), "k": np.full(4096, 4.0)}}
    errors = check_outputs(np, spec, spec.problem(), buffers, bad)
    assert [e.name for e in errors if not e.ok] == ["out.k"]
    with pytest.raises(SpecError, match="return a dict of its fields"):
        check_outputs(np, spec, spec.problem(), buffers, {"out": np.zeros(4096)})
