"""ctune from Python, the way ``kernel_tuner.tune_kernel`` users call a tuner.

:func:`tune` takes a kernel (a ``.cu`` file or its source text), its arguments as
numpy/cupy arrays and numpy scalars, tunable parameters with restrictions, and objectives;
it writes the kernel's sidecar (the same YAML a user would write, kept so the search can
be resumed from the command line), runs ``ctune search`` and returns every result and the
front. :func:`load_artifact` reads a tuned result back from a registry. The guide, and
what differs from Kernel Tuner and why: docs/python-api.md.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import os
import re
import shutil
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctune import api_args
from ctune.api_args import plain, shown, string_list
from ctune.errors import UserError
from ctune.records import canonical_json, sha256_hex

if TYPE_CHECKING:
    from ctune.config import Settings
    from ctune.registry.schema import Artifact
    from ctune.search.options import SearchOptions
    from ctune.search.result import SearchResult

#: Kernel Tuner's names for the thread block's dimensions, and its defaults for them
BLOCK_SIZE_NAMES = ("block_size_x", "block_size_y", "block_size_z")
BLOCK_DEFAULTS = (256, 1, 1)
AXES = "xyz"
_SCALARS = {"int": "int32", "float": "float32", "bool": "uint8"}
#: the file ``verify=`` is copied into, beside the spec
VERIFY_FILE = "verify.py"


@dataclass(frozen=True)
class TuneResult:
    """What :func:`tune` found.

    ``results`` has one dict per evaluated configuration (its parameters, ``outcome``,
    ``key`` and one entry per objective), like Kernel Tuner's results list; ``front`` the
    confirmed best (several when there are several objectives), ``best`` the parameters
    of the one ctune pins. ``spec`` is the sidecar it searched: ``ctune search SPEC
    --resume JOURNAL`` continues the search from the command line.
    """

    results: list[dict[str, Any]]
    front: list[dict[str, Any]]
    best: dict[str, Any] | None
    objectives: list[str]
    spec: Path
    journal: Path
    artifact: Path | None
    search: SearchResult


def tune(
    kernel_name: str,
    kernel_source: str | Path,
    problem_size: int | Sequence[int],
    arguments: Sequence[Any],
    tune_params: Mapping[str, Sequence[Any]],
    *,
    reference: Callable[..., Mapping[str, Any]] | str | None = None,
    answer: Sequence[Any] | None = None,
    verify: Callable[..., Any] | None = None,
    cmem_args: Mapping[str, Any] | None = None,
    restrictions: Restrictions = (),
    grid_div_x: Sequence[str] | None = None,
    grid_div_y: Sequence[str] | None = None,
    grid_div_z: Sequence[str] | None = None,
    block_size_names: Sequence[str] | None = None,
    objective: str | Sequence[str] = "p50",
    constraints: Sequence[str] = (),
    flags: Sequence[str] = (),
    tolerance: tuple[float, float] | None = None,
    strategy: str | None = None,
    strategy_options: Mapping[str, Any] | None = None,
    budget: int | None = None,
    time_s: float | None = None,
    seed: int | None = None,
    arch: str | None = None,
    workdir: str | Path | None = None,
    confirm_processes: int = 5,
    warm_start: str | Path | None = None,
    warm_start_share: float | None = None,
    compiler: Any = None,
    measurer: Any = None,
) -> TuneResult:
    """Tune ``kernel_name`` over ``tune_params`` on this machine's GPU; see the module doc.

    ``kernel_name`` is the kernel as its source names it (``vadd``, ``ns::k``,
    ``gemm<block_size_x, float>``: parameter names feed template arguments).
    ``objective`` is one ctune objective or several (a Pareto search); ``flags`` adds
    nvcc/ptxas catalogue genes (``ctune space`` lists them); ``tolerance`` is
    ``(rel_l2, max_abs)``. ``warm_start`` is a T4 results file whose best configurations
    are measured first, at most ``warm_start_share`` of the budget (default a quarter; 1: all
    of them). ``compiler`` and ``measurer`` replace nvcc and the GPU
    (``ctune.testing.standins``) in tests. Kernel Tuner's ``answer``, ``verify``, ``cmem_args``
    and callable restrictions are taken as :func:`write_spec` says; a failed call removes the
    spec folder it made.
    """
    from ctune.config import resolve

    objectives = string_list(objective, "objective")
    constraint_list = string_list(constraints, "constraints", optional=True)
    options = _search_options(
        strategy=strategy,
        strategy_options=strategy_options,
        budget=budget,
        time_s=time_s,
        seed=seed,
        confirm_processes=confirm_processes,
        warm_start=warm_start,
        warm_start_share=warm_start_share,
    )
    overrides = {"arch": arch} if arch else {}
    settings = resolve(overrides)
    spec_path, made = _write_spec(
        kernel_name,
        kernel_source,
        problem_size,
        arguments,
        tune_params,
        reference=reference,
        answer=answer,
        verify=verify,
        cmem_args=cmem_args,
        restrictions=restrictions,
        grid_div_x=grid_div_x,
        grid_div_y=grid_div_y,
        grid_div_z=grid_div_z,
        block_size_names=block_size_names,
        flags=flags,
        tolerance=tolerance,
        workdir=workdir,
        cache_dir=settings.cache_dir,
    )
    try:
        return _tune_spec(
            settings,
            spec_path,
            objectives=objectives,
            constraints=constraint_list,
            options=options,
            compiler=compiler,
            measurer=measurer,
        )
    except Exception:
        if made:  # nothing of a failed call is left behind: the folder it made goes
            shutil.rmtree(spec_path.parent, ignore_errors=True)
        raise


def _tune_spec(
    settings: Settings,
    spec_path: Path,
    *,
    objectives: list[str],
    constraints: list[str],
    options: SearchOptions,
    compiler: Any,
    measurer: Any,
) -> TuneResult:
    """:func:`tune` on the spec it wrote, with its checked options."""
    from ctune.objective import parse_objective_spec
    from ctune.registry.assemble import ResultPublisher
    from ctune.search.driver import run_session
    from ctune.search.session import SearchSession
    from ctune.spec import load_spec

    toolchain = None
    help_text = None
    if compiler is None:
        from ctune.compile.select_toolchain import toolchain_for

        toolchain = toolchain_for(settings)
        help_text = toolchain.help_text
    spec = load_spec(spec_path, help_text)
    if toolchain is not None:
        from ctune.compile.toolchain import target_arch

        target_arch(settings.arch, spec, toolchain)
    if options.warm_start_source:
        from ctune.exchange.t4 import read_t4

        seeds = tuple(read_t4(Path(options.warm_start_source)))
        options = dataclasses.replace(options, warm_start=seeds)
    objective_spec = parse_objective_spec(objectives, constraints, spec.metrics)
    session = SearchSession(
        settings,
        spec,
        objective_spec,
        options,
        compiler=compiler,
        measurer=measurer,
        toolchain=toolchain,
        publish=ResultPublisher(
            settings.registry, Path(settings.cache_dir), spec_path.parent / "result.json"
        ),
    )
    result = run_session(session)
    return _tune_result(result, spec_path, [o["name"] for o in result.objectives])


def _search_options(
    *,
    strategy: Any,
    strategy_options: Any,
    budget: Any,
    time_s: Any,
    seed: Any,
    confirm_processes: Any,
    warm_start: Any,
    warm_start_share: Any,
) -> SearchOptions:
    """:func:`tune`'s search arguments as ``ctune search``'s options, numpy scalars as the
    Python values they hold, checked by the search's own rules (``check_options``) before
    anything is written: a bad budget is one line, not a spec folder and then an error."""
    from ctune.search.options import WARM_START_SHARE, SearchOptions, share_of_budget
    from ctune.search.session import check_options

    if warm_start is not None and not isinstance(warm_start, (str, os.PathLike)):
        raise UserError(f"warm_start: a T4 results file's path, got {shown(warm_start)}")
    given = {} if strategy_options is None else strategy_options
    if isinstance(given, Mapping):
        given = {key: plain(value) for key, value in given.items()}
    share = plain(warm_start_share)
    options = SearchOptions(
        strategy=strategy,
        strategy_options=given,
        budget=plain(budget),
        time_s=plain(time_s),
        seed=plain(seed),
        confirm_processes=plain(confirm_processes),
        warm_start_source=str(warm_start or ""),
        warm_start_share=WARM_START_SHARE
        if share is None
        else share_of_budget(share, "warm_start_share"),
    )
    check_options(options)
    return options


def _tune_result(result: SearchResult, spec_path: Path, names: list[str]) -> TuneResult:
    from ctune.search.journal import read

    replay, _ = read(result.journal)
    rows = []
    for trial in replay.trials:
        row: dict[str, Any] = {**trial.candidate.as_dict(), "key": trial.candidate.key()}
        row["outcome"] = trial.outcome.value
        for name, value in zip(names, trial.values or (), strict=False):
            row[name] = value
        rows.append(row)
    front = []
    for member in result.front:
        entry: dict[str, Any] = {**member.candidate.as_dict(), "key": member.key}
        entry.update(zip(names, member.values, strict=False))
        if member.gain is not None:
            entry["gain"] = member.gain.ratio
        front.append(entry)
    pinned = next((m for m in result.front if m.key == result.pinned), None)
    return TuneResult(
        results=rows,
        front=front,
        best=pinned.candidate.as_dict() if pinned is not None else None,
        objectives=names,
        spec=spec_path,
        journal=result.journal,
        artifact=result.artifact_path,
        search=result,
    )


# --- the sidecar -----------------------------------------------------------------------


Restrictions = Sequence[str | Callable[..., Any]] | Callable[..., Any]


def write_spec(
    kernel_name: str,
    kernel_source: str | Path,
    problem_size: int | Sequence[int],
    arguments: Sequence[Any],
    tune_params: Mapping[str, Sequence[Any]],
    *,
    reference: Callable[..., Mapping[str, Any]] | str | None = None,
    answer: Sequence[Any] | None = None,
    verify: Callable[..., Any] | None = None,
    cmem_args: Mapping[str, Any] | None = None,
    restrictions: Restrictions = (),
    grid_div_x: Sequence[str] | None = None,
    grid_div_y: Sequence[str] | None = None,
    grid_div_z: Sequence[str] | None = None,
    block_size_names: Sequence[str] | None = None,
    flags: Sequence[str] = (),
    tolerance: tuple[float, float] | None = None,
    workdir: str | Path | None = None,
    cache_dir: Path = Path(".ctune"),
) -> Path:
    """Write the sidecar (with the kernel and the reference) that :func:`tune` searches;
    :func:`tune`'s spec arguments, so that a call moves between the two unchanged.

    Kernel Tuner's keywords: ``answer`` (one entry per argument, None where unchecked)
    takes the place of ``reference``, and the arguments' own data become the inputs;
    ``cmem_args`` ({symbol: array}) fill ``__constant__`` memory; a restriction may be a
    callable, written as the expression it computes; ``verify`` (``fn(expected, got,
    atol=None) -> bool`` by output name) decides correctness in place of ``tolerance``, copied
    into ``verify.py`` where it is a module-level def using only modules (else refused). The
    folder is ``workdir``, else ``<cache_dir>/api/<kernel>-<digest>``: the same call finds
    the same folder and spec. Each :func:`tune` call is a new search with a journal of its
    own (builds are cached by content either way); ``ctune search SPEC --resume JOURNAL``
    continues one (``TuneResult.journal``).
    """
    return _write_spec(
        kernel_name,
        kernel_source,
        problem_size,
        arguments,
        tune_params,
        reference=reference,
        answer=answer,
        verify=verify,
        cmem_args=cmem_args,
        restrictions=restrictions,
        grid_div_x=grid_div_x,
        grid_div_y=grid_div_y,
        grid_div_z=grid_div_z,
        block_size_names=block_size_names,
        flags=flags,
        tolerance=tolerance,
        workdir=workdir,
        cache_dir=cache_dir,
    )[0]


def _write_spec(
    kernel_name: str,
    kernel_source: str | Path,
    problem_size: int | Sequence[int],
    arguments: Sequence[Any],
    tune_params: Mapping[str, Sequence[Any]],
    *,
    reference: Callable[..., Mapping[str, Any]] | str | None,
    answer: Sequence[Any] | None,
    verify: Callable[..., Any] | None,
    cmem_args: Mapping[str, Any] | None,
    restrictions: Restrictions,
    grid_div_x: Sequence[str] | None,
    grid_div_y: Sequence[str] | None,
    grid_div_z: Sequence[str] | None,
    block_size_names: Sequence[str] | None,
    flags: Sequence[str],
    tolerance: tuple[float, float] | None,
    workdir: str | Path | None,
    cache_dir: Path,
) -> tuple[Path, bool]:
    """(:func:`write_spec`'s path, whether this call made its folder)."""
    import yaml

    from ctune.api_keywords import (
        answer_reference,
        check_answer,
        check_cmem_args,
        restriction_text,
        verify_module,
    )

    # Kernel Tuner's argument types, as plain values, all checked before anything is written
    kernel_name = api_args.kernel_name(kernel_name)
    sizes = api_args.problem_sizes(problem_size)
    arguments = api_args.argument_list(arguments)
    params = api_args.tune_param_lists(tune_params)
    names = api_args.block_size_names(block_size_names, BLOCK_SIZE_NAMES)
    grid_div = [
        None if given is None else string_list(given, f"grid_div_{axis}")
        for given, axis in zip((grid_div_x, grid_div_y, grid_div_z), AXES, strict=True)
    ]
    flag_list = string_list(flags, "flags", optional=True)
    tolerances = api_args.tolerance_pair(tolerance)
    given_folder = api_args.workdir(workdir)
    verify_text, verify_name = verify_module(verify) if verify is not None else (None, "")
    if (reference is None) == (answer is None):
        raise UserError("reference: give reference= (a function of the inputs) or answer=")
    source_text, origin = _source(kernel_source)
    genes = {name: _gene(name, values, names) for name, values in params.items()}
    extra = [f"-D{n}={d}" for n, d in zip(names, BLOCK_DEFAULTS, strict=True) if n not in genes]
    block = [n if n in genes else str(d) for n, d in zip(names, BLOCK_DEFAULTS, strict=True)]
    grid = []
    for axis in range(len(sizes)):
        given = grid_div[axis]
        divisors = given if given is not None else [names[axis]]
        if names[axis] not in genes and divisors == [names[axis]]:
            divisors = [str(BLOCK_DEFAULTS[axis])]  # an untuned block size is its default
        step = " * ".join(d if d.isidentifier() else f"({d})" for d in divisors or ["1"])
        grid.append(f"ceil_div(problem_size_{AXES[axis]}, {step})")
    base = re.sub(r"[^a-z0-9._-]+", "-", kernel_name.split("<")[0].split("::")[-1].lower())
    name = (base.strip("-._") or "kernel")[:48]
    spec: dict[str, Any] = {
        "name": name,
        "source": "kernel.cu",
        "entry": kernel_name,
    }
    if origin is not None:
        spec["include_dirs"] = [str(origin)]  # the kernel's own #include "..." still resolve
    if extra:
        spec["extra_flags"] = extra  # Kernel Tuner defines every block size name
    if flag_list:
        spec["flags"] = flag_list
    if genes:
        spec["genes"] = genes
    if callable(restrictions) or isinstance(restrictions, str):
        restrictions = [restrictions]
    if restrictions:
        spec["restrictions"] = [restriction_text(r, params) for r in restrictions]
    spec["launch"] = {"grid": grid, "block": block}
    dims = {f"problem_size_{AXES[i]}": s for i, s in enumerate(sizes)}
    spec["problems"] = [{"name": "tune", "dims": dims}]
    args = _args(kernel_name, source_text, arguments)
    data: dict[str, Any] = {}  # file name -> the array it holds, beside the spec
    if answer is not None:
        checked = check_answer(answer, arguments, [a["name"] for a in args])
        for arg, value, expected in zip(args, arguments, answer, strict=True):
            if "shape" not in arg:
                continue
            arg["role"] = "inout" if arg["name"] in checked else "input"
            arg["init"] = {"npy": f"arg_{arg['name']}.npy"}  # the arguments' own data
            data[arg["init"]["npy"]] = value
            if expected is not None:
                data[f"answer_{arg['name']}.npy"] = expected
    if cmem_args:
        check_cmem_args(cmem_args, [a["name"] for a in args])
        for symbol, values in cmem_args.items():
            where = f"cmem_args[{symbol!r}]"
            args.append(
                {"name": symbol, "role": "constant", "dtype": _dtype(values, where),
                 "shape": list(values.shape) or [1], "init": {"npy": f"cmem_{symbol}.npy"}}
            )  # fmt: skip
            data[f"cmem_{symbol}.npy"] = values.reshape(-1) if values.shape == () else values
    spec["args"] = args
    if tolerances is not None:
        rel_l2, max_abs = tolerances
        spec["tolerance"] = {"default": {"rel_l2": rel_l2, "max_abs": max_abs}}
    ref_text: str | None
    if answer is not None:
        ref_file, ref_text, function = "answer.py", answer_reference(checked), "answer"
    else:
        assert reference is not None
        ref_file, ref_text, function = _reference(reference)
    spec["reference"] = {"python": f"{ref_file}:{function}"}
    if verify_text is not None:
        spec["verify"] = {"python": f"{VERIFY_FILE}:{verify_name}"}
    arrays = {k: _npy_bytes(v) for k, v in data.items()}
    digest = sha256_hex(
        canonical_json(
            {
                "spec": spec,
                "source": source_text,
                "ref": ref_text,
                **({"verify": verify_text} if verify_text is not None else {}),
                **({"data": {k: sha256_hex(v) for k, v in arrays.items()}} if arrays else {}),
            }
        )
    )
    folder = given_folder or Path(cache_dir) / "api" / f"{name}-{digest[:12]}"
    made = not folder.exists()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(
            f"workdir: cannot make the folder {folder}: {exc.strerror or exc}"
        ) from None
    from ctune.writes import write_atomic

    for file_name, content in arrays.items():
        write_atomic(folder / file_name, content)
    write_atomic(folder / "kernel.cu", source_text)
    write_atomic(folder / ref_file, ref_text)
    if verify_text is not None:
        write_atomic(folder / VERIFY_FILE, verify_text)
    path = folder / f"{name}.yaml"
    header = "# written by ctune.tune(); `ctune search` and `ctune space` take it as it is\n"
    write_atomic(path, header + yaml.safe_dump(spec, sort_keys=False, width=100))
    return path, made


def _npy_bytes(array: Any) -> bytes:
    """An array (numpy, or cupy brought to the host) as a ``.npy`` file's bytes."""
    import io

    import numpy as np

    host = array.get() if hasattr(array, "get") and not isinstance(array, np.ndarray) else array
    out = io.BytesIO()
    np.save(out, np.ascontiguousarray(host), allow_pickle=False)
    return out.getvalue()


def _source(kernel_source: str | Path) -> tuple[str, Path | None]:
    """(the source text, the folder it came from or None for a string)."""
    if isinstance(kernel_source, Path) or (
        isinstance(kernel_source, str)
        and "\n" not in kernel_source
        and kernel_source.endswith((".cu", ".cuh"))
    ):
        from ctune.files import MAX_SOURCE_BYTES, read_text_capped

        path = Path(kernel_source)
        text = read_text_capped(path, MAX_SOURCE_BYTES, "kernel file", errors="replace")
        return text, path.resolve().parent
    if not isinstance(kernel_source, str) or "__global__" not in kernel_source:
        raise UserError(
            "kernel_source: give a .cu file path or the kernel's source text (with a __global__)"
        )
    return kernel_source, None


def _gene(name: str, values: list[Any], block_names: Sequence[str]) -> dict[str, Any]:
    """A tune_params entry as a spec gene: a block size name is a launch gene."""
    launch = name in block_names
    out = [_gene_value(name, value, launch) for value in values]
    return {"values": out, "default": out[0], "family": "launch" if launch else "define"}


def _gene_value(name: str, value: Any, launch: bool) -> int | str:
    """One value as the spec says it: a bool as 0 or 1, a float as its text (a -D value is
    text; the spec keeps numbers exact). A block dimension is a whole number of threads:
    64.0 is 64 (Kernel Tuner takes int() of it), 64.5 is refused, as NaN and Inf are."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value) or (launch and not value.is_integer()):
            kind = "a whole number of threads" if launch else "a finite number"
            raise UserError(f"tune_params[{name!r}]: {value!r} is not {kind}")
        return int(value) if launch else repr(value)
    if not isinstance(value, (int, str)):
        raise UserError(f"tune_params[{name!r}]: {shown(value)} is not a number or a string")
    return value


def _dtype(value: Any, where: str) -> str:
    from ctune.spec import DTYPES

    dtype = getattr(value, "dtype", None)
    name = getattr(dtype, "name", None) or _SCALARS.get(type(value).__name__)
    if name not in DTYPES:
        raise UserError(
            f"{where}: dtype {name or type(value).__name__} (allowed: {', '.join(DTYPES)})"
        )
    return str(name)


def _args(kernel_name: str, source_text: str, arguments: Sequence[Any]) -> list[dict[str, Any]]:
    """One arg per argument: arrays are buffers (role from the kernel's constness), the rest
    scalars with their values; names from the kernel's signature where it can be read."""
    from ctune.spec.draft.source import read_source

    base = kernel_name.split("<")[0].split("(")[0].split("::")[-1].strip()
    kernel = next((k for k in read_source(source_text).kernels if k.name == base), None)
    params = list(kernel.params) if kernel is not None else []
    if params and len(params) != len(arguments):
        raise UserError(
            f"arguments: {kernel_name} takes {len(params)} parameter(s) "
            f"({', '.join(p.name for p in params)}), {len(arguments)} given"
        )
    out = []
    for i, value in enumerate(arguments):
        param = params[i] if params else None
        name = param.name if param is not None else f"arg{i}"
        where = f"arguments[{i}] ({name})"
        shape = getattr(value, "shape", None)
        if shape is not None and len(shape) > 0:
            role = "input" if param is not None and param.const_pointee else "inout"
            out.append(
                {"name": name, "role": role, "dtype": _dtype(value, where), "shape": list(shape)}
            )
            continue
        number = value.item() if hasattr(value, "item") else value
        if not isinstance(number, (int, float)) or (
            isinstance(number, float) and not math.isfinite(number)
        ):
            raise UserError(f"{where}: expected an array or a number, got {type(value).__name__}")
        if isinstance(number, bool):
            number = int(number)
        out.append({"name": name, "role": "scalar", "dtype": _dtype(value, where), "value": number})
    return out


def _reference(reference: Callable[..., Mapping[str, Any]] | str) -> tuple[str, str, str]:
    """(file, its text to write, function): a path:function's file, or a function's source.

    The measuring worker is another process: it imports the reference from a file. A
    function is copied there by its source, so it must be a module-level ``def`` that
    needs nothing but its arguments (``xp`` is numpy or cupy). A file is copied whole:
    a spec's reference lies in the spec's folder, as its verify function does.
    """
    if isinstance(reference, str):
        from ctune.files import MAX_SOURCE_BYTES, InputFileError, read_text_capped

        file_part, _, function = reference.partition(":")
        path = Path(file_part)
        if not function or not path.is_file():
            raise UserError(f"reference: {reference!r} is not an existing FILE.py:FUNCTION")
        try:
            return "reference.py", read_text_capped(path, MAX_SOURCE_BYTES, "reference"), function
        except InputFileError as exc:
            raise UserError(f"reference: {exc}") from None
    if not inspect.isfunction(reference) or reference.__name__ == "<lambda>":
        raise UserError(
            "reference: pass a def (xp, inputs, dims) -> {output: array}, or 'file.py:fn'"
        )
    try:
        text = textwrap.dedent(inspect.getsource(reference))
    except (OSError, TypeError):
        raise UserError(
            f"reference: the source of {reference.__name__} cannot be read; pass 'file.py:fn'"
        ) from None
    header = '"""The reference passed to ctune.tune(), copied here for the measuring worker."""\n'
    return (
        "reference.py",
        f"{header}\nimport math\n\nimport numpy as np\n\n\n{text}",
        reference.__name__,
    )


# --- reading results back ----------------------------------------------------------------


def load_artifact(key: str | Path, registry: str | Path = "registry") -> Artifact:
    """A tuned artifact: ``kernel/problem/device-class`` (or ``REV:KEY``, from git) in a
    registry folder, or a search's result file (``.json``) as ``tune`` and ``ctune search``
    write it.

    ``artifact.pinned_member()`` is the build to ship: its ``defines``, ``nvcc_flags``,
    ``launch`` and ``runtime`` values; ``artifact.front`` holds the rest of the front.
    """
    from ctune.registry.service import load_artifact as from_registry
    from ctune.registry.store import read_result

    if str(key).endswith(".json"):
        return read_result(Path(key))
    return from_registry(Path(registry), str(key))[1]


__all__ = ["TuneResult", "load_artifact", "tune", "write_spec"]
