"""Input data given by the spec: a ``.npy`` file, a ``.npz`` member, or a Python function.

An input whose values must have structure (sorted keys, a polygon, a sparse matrix) cannot
be drawn at random; ``init: {npy: x.npy}``, ``{npz: x.npz:member}`` or ``{python:
gen.py:make}`` gives them. Files are read through the capped reader (``ctune.files``),
without pickles; a function is called as ``make(dims, seed)`` and must return a numpy array,
the same one each time for a seed (it is called twice on first use, and the two results
compared). The array must have the buffer's shape and element type exactly (a vector type
as its components on a last axis, a struct as a structured array with the same fields);
the buffer gets it in its storage layout (``ctune.measure.arrays``), the reference the
same values. Results are kept per process, so a check's seeds cost one call each.
"""

from __future__ import annotations

import io
import zipfile
from collections import OrderedDict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from ctune.errors import SpecError
from ctune.files import InputFileError, read_capped
from ctune.measure.bf16 import float32_to_bf16_bits
from ctune.spec.elements import element

if TYPE_CHECKING:
    from ctune.spec import ArgSpec, GivenData, KernelSpec

#: the largest data file (or .npz member) read for one buffer
MAX_GIVEN_BYTES = 4 * 1024**3
#: arrays kept per process (a problem's check seeds and its timed set)
_KEPT = 8
_cache: OrderedDict[tuple[Any, ...], np.ndarray] = OrderedDict()


def given_storage(
    spec: KernelSpec,
    arg: ArgSpec,
    dtype: str,
    shape: tuple[int, ...],
    dims: Mapping[str, int],
    seed: int,
) -> np.ndarray:
    """The given values of ``arg`` as a host array in the buffer's storage layout."""
    data: GivenData = arg.init  # type: ignore[assignment]
    where = f"{spec.yaml_path}: args.{arg.name}.init: {data.describe()}"
    stat = data.path.stat() if data.path.exists() else None
    stamp = (stat.st_mtime_ns, stat.st_size) if stat else None
    key: tuple[Any, ...] = (str(data.path), data.member, stamp, dtype, shape)
    if data.kind == "python":
        key += (seed, tuple(sorted(dims.items())))
    found = _cache.get(key)
    if found is None:
        found = storage_of(where, _read(where, spec, arg, dims, seed), dtype, shape)
        _cache[key] = found
        while len(_cache) > _KEPT:
            _cache.popitem(last=False)
    _cache.move_to_end(key)
    return found


def _read(
    where: str, spec: KernelSpec, arg: ArgSpec, dims: Mapping[str, int], seed: int
) -> np.ndarray:
    data: GivenData = arg.init  # type: ignore[assignment]
    if data.kind == "python":
        first = _call(where, spec, arg, dims, seed)
        again = _call(where, spec, arg, dims, seed)
        if (
            first.dtype != again.dtype
            or first.shape != again.shape
            or first.tobytes() != again.tobytes()
        ):
            raise SpecError(
                f"{where}: two calls with seed {seed} returned different arrays; "
                "derive every random draw from the seed (np.random.default_rng(seed))"
            )
        return first
    try:
        raw = read_capped(data.path, MAX_GIVEN_BYTES, "given data")
    except InputFileError as exc:
        raise SpecError(f"{where}: {exc.reason}") from None
    try:
        if data.kind == "npy":
            return np.load(io.BytesIO(raw), allow_pickle=False)
        return _npz_member(where, raw, data.member)
    except SpecError:
        raise
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        raise SpecError(f"{where}: not a readable {data.kind} file ({exc})") from None


def _npz_member(where: str, raw: bytes, member: str) -> np.ndarray:
    with np.load(io.BytesIO(raw), allow_pickle=False) as npz:
        if member not in npz.files:
            raise SpecError(
                f"{where}: no member {member!r} (has: {', '.join(npz.files) or 'none'})"
            )
        info = npz.zip.getinfo(f"{member}.npy")
        if info.file_size > MAX_GIVEN_BYTES:
            raise SpecError(f"{where}: member {member} is larger than {MAX_GIVEN_BYTES} bytes")
        return npz[member]


def _call(
    where: str, spec: KernelSpec, arg: ArgSpec, dims: Mapping[str, int], seed: int
) -> np.ndarray:
    data: GivenData = arg.init  # type: ignore[assignment]
    function = spec.import_function(f"args.{arg.name}.init", data.path, data.member)
    try:
        result = function(dict(dims), seed)
    except Exception as exc:
        raise SpecError(f"{where}: raised {type(exc).__name__}: {exc}") from None
    if not isinstance(result, np.ndarray):
        raise SpecError(f"{where}: returned {type(result).__name__}; return a numpy array")
    return result


def storage_of(where: str, array: np.ndarray, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    """``array`` checked against the buffer (``shape`` elements of ``dtype``) and laid out
    as the device stores it; SpecError naming both when they differ."""
    el = element(dtype)
    if el.kind == "struct":
        want_names = tuple(f.name for f in el.fields)
        if array.dtype.names != want_names:
            raise SpecError(
                f"{where}: has dtype {array.dtype}, the buffer holds {dtype} "
                f"(a structured array with fields {', '.join(want_names)})"
            )
        _check_shape(where, array.shape, shape, dtype)
        out = np.zeros((*shape, el.itemsize), dtype=np.uint8)
        for f in el.fields:
            values = array[f.name]
            want = (*shape, f.lanes) if f.lanes > 1 else shape
            if values.shape != want or values.dtype != _numpy_scalar(f.scalar):
                raise SpecError(
                    f"{where}: field {f.name} is {values.dtype} {values.shape}, the buffer's is "
                    f"{f.scalar} x {f.lanes}"
                )
            stored = np.ascontiguousarray(_stored(values, f.scalar))
            out[..., f.offset : f.offset + f.nbytes] = stored.view(np.uint8).reshape(
                (*shape, f.nbytes)
            )
        return out
    scalar, lanes = el.fields[0].scalar, el.fields[0].lanes
    want = (*shape, lanes) if el.kind == "vector" else shape
    if array.dtype != _numpy_scalar(scalar):
        raise SpecError(
            f"{where}: has dtype {array.dtype}, the buffer holds {dtype}"
            + (f" (give {_numpy_scalar(scalar)} with a last axis of {lanes})" if lanes > 1 else "")
        )
    _check_shape(where, array.shape, want, dtype)
    return np.ascontiguousarray(_stored(array, scalar))


def _check_shape(where: str, got: tuple[int, ...], want: tuple[int, ...], dtype: str) -> None:
    if tuple(got) != tuple(want):
        raise SpecError(
            f"{where}: has shape {tuple(got)}, the buffer's is {tuple(want)} ({dtype}); "
            "give data of the problem's shape"
        )


def _numpy_scalar(scalar: str) -> np.dtype[Any]:
    """The numpy dtype given data of a scalar type must have (bfloat16: float32 values)."""
    return np.dtype("float32" if scalar == "bfloat16" else scalar)


def _stored(values: np.ndarray, scalar: str) -> np.ndarray:
    if scalar == "bfloat16":
        return np.asarray(float32_to_bf16_bits(np, values))
    return values


__all__ = ["MAX_GIVEN_BYTES", "given_storage", "storage_of"]
