"""Correctness first: a candidate's outputs against the spec's reference.

rules C1-C3: compare with a float32-or-better reference by relative L2
error and max abs error against the spec's per-output tolerance; any NaN or
Inf fails; outputs are poisoned before each run; fresh inputs per check (two
checks, different seeds); kernels declared deterministic are run twice on the
same inputs and must agree bitwise; inputs the kernel must not modify are
checked unchanged afterwards. A spec's ``verify`` function, where it has one, decides in
place of the tolerance (the other rules still apply). Generic over ``xp`` (numpy in CPU
tests, cupy in the worker); the kernel run and the reference are injected.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np

from ctune.errors import SpecError
from ctune.measure.arrays import Buffers, bits_view, float32_values, make_buffers
from ctune.records import Outcome

if TYPE_CHECKING:
    from ctune.records import GeneValue
    from ctune.spec import KernelSpec, Problem, Tolerance

#: run(buffers) launches the kernel once on these buffers and waits for it
RunFn = Callable[[Buffers], None]
#: reference(seed, buffers) -> float32 outputs by name (cached per seed by the caller)
ReferenceFn = Callable[[int, Buffers], Mapping[str, Any]]
#: the spec's verify function: (expected, got, atol=None) -> True where the outputs are right
VerifyFn = Callable[..., Any]


@dataclass(frozen=True, slots=True)
class OutputError:
    name: str
    rel_l2: float
    max_abs: float
    non_finite: int  # NaN or Inf values in the output
    ok: bool

    def describe(self, tol: Tolerance) -> str:
        if self.non_finite:
            return (
                f"output {self.name}: {self.non_finite} NaN/Inf values "
                "(unwritten elements keep the NaN poison)"
            )
        return (
            f"output {self.name}: rel_l2 {self.rel_l2:.3g} (tolerance {tol.rel_l2:g}), "
            f"max_abs {self.max_abs:.3g} (tolerance {tol.max_abs:g})"
        )


@dataclass(frozen=True, slots=True)
class CheckReport:
    outcome: Outcome  # OK, WRONG_RESULT or NONDETERMINISTIC
    rel_l2: float | None  # worst over outputs and checks
    max_abs: float | None
    error: str = ""
    checks: int = 0


def compare(xp: ModuleType, name: str, output: Any, reference: Any, tol: Tolerance) -> OutputError:
    """Relative L2 and max abs error of ``output`` (float32 values) against ``reference``."""
    out = xp.asarray(output).astype(xp.float64).ravel()
    ref = xp.asarray(reference).astype(xp.float64).ravel()
    if out.size != ref.size:
        raise SpecError(
            f"reference output {name} has {ref.size} elements; the kernel's buffer has {out.size}"
        )
    if not bool(xp.isfinite(ref).all()):
        raise SpecError(f"reference output {name} contains NaN or Inf")
    non_finite = int(out.size - int(xp.isfinite(out).sum()))
    if non_finite:
        return OutputError(name, math.inf, math.inf, non_finite, False)
    diff = out - ref
    err_norm = float(xp.sqrt((diff * diff).sum()))
    ref_norm = float(xp.sqrt((ref * ref).sum()))
    rel = err_norm / ref_norm if ref_norm > 0 else 0.0 if err_norm == 0 else math.inf
    max_abs = float(xp.abs(diff).max()) if diff.size else 0.0
    ok = rel <= tol.rel_l2 and max_abs <= tol.max_abs
    return OutputError(name, rel, max_abs, 0, ok)


def differing_elements(xp: ModuleType, a: Any, b: Any) -> int:
    """How many elements differ bit for bit (NaN patterns compare as bits)."""
    return int((bits_view(xp, a) != bits_view(xp, b)).sum())


def _worst(errors: list[OutputError]) -> tuple[float | None, float | None]:
    if not errors:
        return None, None
    return max(e.rel_l2 for e in errors), max(e.max_abs for e in errors)


def check_outputs(
    xp: ModuleType,
    spec: KernelSpec,
    problem: Problem,
    buffers: Buffers,
    reference: Mapping[str, Any],
) -> list[OutputError]:
    errors = []
    for name in buffers.names("output", "inout"):
        if name not in reference:
            raise SpecError(
                f"{spec.reference_path.name}: the reference returned no '{name}' "
                f"(returned: {', '.join(sorted(reference)) or 'nothing'})"
            )
        values = float32_values(xp, buffers.arrays[name], buffers.dtypes[name])
        tol = spec.tolerance_for(name, problem)
        for part, (got, want) in _parts(spec, name, values, reference[name]).items():
            errors.append(compare(xp, part, got, want, tol))
    return errors


def _parts(spec: KernelSpec, name: str, values: Any, expected: Any) -> dict[str, tuple[Any, Any]]:
    """An output and its reference by part: the output itself, or each field of a struct
    (the reference returns a dict of fields for a struct output)."""
    if not isinstance(values, Mapping):
        return {name: (values, expected)}
    if not isinstance(expected, Mapping) or set(expected) != set(values):
        raise SpecError(
            f"{spec.reference_path.name}: output {name} is a struct; return a dict of its "
            f"fields ({', '.join(values)}) for it"
        )
    return {f"{name}.{f}": (values[f], expected[f]) for f in values}


def warm_checks(
    xp: ModuleType,
    spec: KernelSpec,
    problem: Problem,
    buffers: Buffers,
    reference: Mapping[str, Any],
) -> None:
    """Run the check's own kernels once on ``reference`` against itself (verdicts dropped):
    CuPy compiles them for this problem's shapes here, while a problem is set up and no hang
    limit counts it, rather than inside the first candidate's timed request."""
    for name in buffers.names("output", "inout") if spec.verify_path is None else ():
        if name in reference:
            values = float32_values(xp, buffers.arrays[name], buffers.dtypes[name])
            tol = spec.tolerance_for(name, problem)
            for part, (_, want) in _parts(spec, name, values, reference[name]).items():
                compare(xp, part, want, want, tol)
    for name in buffers.names("input", "inout"):
        differing_elements(xp, buffers.arrays[name], buffers.arrays[name])


def run_checks(
    xp: ModuleType,
    spec: KernelSpec,
    problem: Problem,
    run: RunFn,
    reference: ReferenceFn,
    seeds: tuple[int, ...],
    runtime: Mapping[str, GeneValue] | None = None,
    verify: VerifyFn | None = None,
) -> CheckReport:
    """Check the candidate once per seed; the first check also tests determinism. With a
    spec's ``verify`` (``verify``, else imported here) it decides instead of the tolerance."""
    if verify is None and spec.verify_path is not None:
        verify = spec.verify()
    all_errors: list[OutputError] = []
    for index, seed in enumerate(seeds):
        buffers = make_buffers(xp, spec, problem, seed, runtime)
        read_only = buffers.names("input")
        pristine = buffers.snapshot(xp, buffers.names("input", "inout"))
        expected = reference(seed, buffers)
        run(buffers)
        if verify is None:
            errors = check_outputs(xp, spec, problem, buffers, expected)
        else:
            errors = poisoned_outputs(xp, buffers)
            if not errors and not verified(xp, spec, problem, buffers, expected, verify):
                return CheckReport(
                    Outcome.WRONG_RESULT,
                    None,
                    None,
                    f"verify {_verify_name(spec)} returned False on check {index + 1} "
                    f"(seed {seed})",
                    index + 1,
                )
        all_errors.extend(errors)
        rel, max_abs = _worst(all_errors)
        bad = [e for e in errors if not e.ok]
        if bad:
            text = "; ".join(
                e.describe(spec.tolerance_for(e.name.split(".")[0], problem)) for e in bad
            )
            return CheckReport(
                Outcome.WRONG_RESULT,
                rel,
                max_abs,
                f"check {index + 1} (seed {seed}): {text}",
                index + 1,
            )
        for name in read_only:
            changed = differing_elements(xp, buffers.arrays[name], pristine[name])
            if changed:
                return CheckReport(
                    Outcome.WRONG_RESULT,
                    rel,
                    max_abs,
                    f"check {index + 1}: the kernel modified input {name} "
                    f"({changed} elements changed; role input must stay read-only)",
                    index + 1,
                )
        if index == 0 and spec.deterministic:
            first = buffers.snapshot(xp, buffers.names("output", "inout"))
            buffers.restore(xp, pristine)
            buffers.poison_outputs(xp)
            run(buffers)
            for name, values in first.items():
                changed = differing_elements(xp, buffers.arrays[name], values)
                if changed:
                    return CheckReport(
                        Outcome.NONDETERMINISTIC,
                        rel,
                        max_abs,
                        f"output {name}: {changed} of {values.size} elements differ between two "
                        "runs on the same inputs (spec says deterministic: true)",
                        index + 1,
                    )
    rel, max_abs = _worst(all_errors)
    return CheckReport(Outcome.OK, rel, max_abs, "", len(seeds))


def poisoned_outputs(xp: ModuleType, buffers: Buffers) -> list[OutputError]:
    """The outputs (a struct's fields each) with NaN or Inf values: unwritten elements keep
    the poison, whatever a verify function would make of them."""
    bad = []
    for name in buffers.names("output", "inout"):
        values = float32_values(xp, buffers.arrays[name], buffers.dtypes[name])
        parts = values if isinstance(values, Mapping) else {None: values}
        for field_name, part in parts.items():
            count = int(part.size - int(xp.isfinite(part).sum()))
            if count:
                label = name if field_name is None else f"{name}.{field_name}"
                bad.append(OutputError(label, math.inf, math.inf, count, False))
    return bad


def verified(
    xp: ModuleType,
    spec: KernelSpec,
    problem: Problem,
    buffers: Buffers,
    expected: Mapping[str, Any],
    verify: VerifyFn,
) -> bool:
    """The spec's verify function on host copies (Kernel Tuner's ``verify(answer, result,
    atol=...)`` by output name): ``expected`` as the reference returned it, the outputs as
    the tolerance compare sees them, ``atol`` the outputs' max_abs where the spec gives a
    tolerance. What it raises is the spec's problem, as a failing reference is."""
    got = {
        name: _host(xp, float32_values(xp, buffers.arrays[name], buffers.dtypes[name]))
        for name in buffers.names("output", "inout")
    }
    want = {name: _host(xp, value) for name, value in expected.items()}
    kwargs = {"atol": _atol(spec, problem, list(got))} if _takes_atol(verify) else {}
    try:
        answer = verify(want, got, **kwargs)
    except Exception as exc:
        if _looks_like_cuda(exc):
            raise  # a device fault surfacing here is the candidate's, not the function's
        raise SpecError(f"verify {_verify_name(spec)} raised {type(exc).__name__}: {exc}") from None
    if not isinstance(answer, (bool, np.bool_)):
        raise SpecError(
            f"verify {_verify_name(spec)} must return True or False, got {type(answer).__name__}"
        )
    return bool(answer)


def _verify_name(spec: KernelSpec) -> str:
    path = spec.verify_path
    return f"{path.name if path is not None else '?'}:{spec.verify_function}"


def _host(xp: ModuleType, value: Any) -> Any:
    """A numpy array on the host (a struct's dict of fields, field by field)."""
    if isinstance(value, Mapping):
        return {str(k): _host(xp, v) for k, v in value.items()}
    return np.asarray(getattr(xp, "asnumpy", np.asarray)(value))


def _atol(spec: KernelSpec, problem: Problem, outputs: list[str]) -> float | None:
    """The strictest max_abs the spec or the problem gives the outputs; None where neither
    gives a tolerance (Kernel Tuner passes atol only when its user sets one)."""
    if "tolerance" not in spec.raw and not problem.tolerance:
        return None
    return min(spec.tolerance_for(name, problem).max_abs for name in outputs)


def _takes_atol(function: VerifyFn) -> bool:
    """Whether ``function`` takes ``atol`` (a two-argument one is called without it)."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return True
    return any(p.name == "atol" or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


def reference_outputs(
    xp: ModuleType, spec: KernelSpec, func: Callable[..., Any], problem: Problem, buffers: Buffers
) -> dict[str, Any]:
    """Call the spec's reference on float32 copies of the inputs; float32 results by name."""
    inputs = buffers.reference_inputs(xp)
    try:
        result = func(xp, inputs, dict(problem.dims))
    except Exception as exc:
        if _looks_like_cuda(exc):
            raise  # a device fault surfacing here is the candidate's, not the reference's
        raise SpecError(
            f"{spec.reference_path.name}:{spec.reference_function} raised "
            f"{type(exc).__name__}: {exc}"
        ) from None
    if not isinstance(result, Mapping):
        raise SpecError(
            f"{spec.reference_path.name}:{spec.reference_function} must return a dict of outputs, "
            f"got {type(result).__name__}"
        )
    return {str(k): _float32(xp, v) for k, v in result.items()}


def _float32(xp: ModuleType, value: Any) -> Any:
    """A reference output as float32 (a struct output's dict of fields, field by field)."""
    if isinstance(value, Mapping):
        return {str(k): _float32(xp, v) for k, v in value.items()}
    return xp.ascontiguousarray(xp.asarray(value), dtype=xp.float32)


def _looks_like_cuda(exc: BaseException) -> bool:
    text = f"{type(exc).__name__}: {exc}"
    return any(tag in text for tag in ("cudaError", "CUDA_ERROR", "CUBLAS_STATUS", "OutOfMemory"))


__all__ = [
    "CheckReport",
    "OutputError",
    "check_outputs",
    "compare",
    "differing_elements",
    "poisoned_outputs",
    "reference_outputs",
    "run_checks",
    "verified",
]
