"""The curated nvcc/ptxas flag catalogue for CUDA 13.0, as genes.

Each entry's default value renders no flag at all, so the default candidate is exactly
the plain build; entries that change floating point results are marked ``numerics``. An
entry that needs a compiler option is offered only when ``nvcc --help`` lists it. The
``acf`` genes (:data:`ACF`) hold advanced-controls files by sha256 digest; the compiler
puts the stored file's path in place of the digest (``ctune.controls.store``).
docs/spec-format.md lists the catalogue; docs/advanced-controls.md the controls files.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ctune.records import GeneValue
from ctune.spec.space.params import Gene

Render = Callable[[GeneValue], list[str]]


@dataclass(frozen=True, slots=True)
class FlagSpec:
    gene: Gene
    render: Render
    requires_option: str | None = None  # offered only if `nvcc --help` lists it


def _switch(flag: str) -> Render:
    return lambda v: [flag] if v else []


def _bool_option(flag: str, default: bool) -> Render:
    return lambda v: [] if v == default else [f"{flag}={'true' if v else 'false'}"]


def _ptxas(option: str, default: GeneValue) -> Render:
    return lambda v: [] if v == default else ["-Xptxas", f"{option}={v}"]


def _maxrregcount(v: GeneValue) -> list[str]:
    return [] if v == 0 else [f"-maxrregcount={v}"]


def _ptxas_opt(v: GeneValue) -> list[str]:
    return [] if v == 3 else ["-Xptxas", f"-O{v}"]


def _flag(
    name: str,
    values: tuple[GeneValue, ...],
    default: GeneValue,
    family: str,
    render: Render,
    description: str,
    numerics: bool = False,
    requires_option: str | None = None,
) -> FlagSpec:
    gene = Gene(name, values, default, family, numerics, (), description)
    return FlagSpec(gene, render, requires_option)


CATALOGUE: dict[str, FlagSpec] = {
    f.gene.name: f
    for f in (
        _flag("ptxas_opt", (3, 2, 1, 0), 3, "ptxas", _ptxas_opt, "ptxas optimisation level -O"),
        _flag(
            "maxrregcount",
            (0, 32, 40, 48, 56, 64, 72, 80, 96, 128, 168, 255),
            0,
            "nvcc",
            _maxrregcount,
            "register cap per thread (0 = none); trades occupancy against spills",
        ),
        _flag(
            "fast_math",
            (False, True),
            False,
            "nvcc",
            _switch("--use_fast_math"),
            "--use_fast_math: ftz, approximate div/sqrt, fmad",
            numerics=True,
        ),
        _flag(
            "ftz",
            (False, True),
            False,
            "nvcc",
            _bool_option("--ftz", False),
            "flush fp32 denormals to zero",
            numerics=True,
        ),
        _flag(
            "prec_div",
            (True, False),
            True,
            "nvcc",
            _bool_option("--prec-div", True),
            "IEEE fp32 division (false = fast approximation)",
            numerics=True,
        ),
        _flag(
            "prec_sqrt",
            (True, False),
            True,
            "nvcc",
            _bool_option("--prec-sqrt", True),
            "IEEE fp32 square root (false = fast approximation)",
            numerics=True,
        ),
        _flag(
            "fmad",
            (True, False),
            True,
            "nvcc",
            _bool_option("--fmad", True),
            "contract multiply-add into FMA",
            numerics=True,
        ),
        _flag(
            "extra_device_vectorization",
            (False, True),
            False,
            "nvcc",
            _switch("--extra-device-vectorization"),
            "more aggressive vectorisation in the NVVM optimiser",
        ),
        _flag(
            "restrict",
            (False, True),
            False,
            "nvcc",
            _switch("--restrict"),
            "treat kernel pointer parameters as __restrict__",
        ),
        _flag(
            "lineinfo",
            (False, True),
            False,
            "nvcc",
            _switch("-lineinfo"),
            "line information for profilers (SASS unchanged)",
        ),
        _flag(
            "dlcm",
            ("default", "ca", "cg"),
            "default",
            "ptxas",
            _ptxas("-dlcm", "default"),
            "default cache modifier on global loads",
        ),
        _flag(
            "dscm",
            ("default", "wb", "cg", "cs", "wt"),
            "default",
            "ptxas",
            _ptxas("-dscm", "default"),
            "default cache modifier on global stores",
        ),
        _flag(
            "register_usage_level",
            (5, 0, 2, 4, 6, 8, 10),
            5,
            "ptxas",
            _ptxas("--register-usage-level", 5),
            "ptxas register-usage aggressiveness 0..10 (beta in 13.0)",
        ),
        _flag(
            "allow_expensive_optimizations",
            ("default", "true", "false"),
            "default",
            "ptxas",
            _ptxas("--allow-expensive-optimizations", "default"),
            "ptxas expensive optimisations (default: on at -O2 and above)",
        ),
        _flag(
            "fast_compile",
            ("0", "min", "mid", "max"),
            "0",
            "ptxas",
            _ptxas("--Ofast-compile", "0"),
            "trade runtime performance for compile time",
        ),
    )
}


@dataclass(frozen=True, slots=True)
class AcfSpec:
    """One compiler's controls file as a gene: its name, and its argv given the file's path."""

    space: str  # the compiler whose controls it holds: ptxas or nvcc
    gene_name: str
    render: Callable[[str], list[str]]
    description: str


#: the controls files a spec's ``acf:`` may name, by compiler, in the order they render
ACF: dict[str, AcfSpec] = {
    a.space: a
    for a in (
        AcfSpec(
            "ptxas",
            "acf_ptxas",
            lambda path: ["-Xptxas", f"--apply-controls={path}"],
            "ptxas advanced-controls file (ptxas 13.3+), by its sha256; none: without",
        ),
        AcfSpec(
            "nvcc",
            "acf_nvcc",
            lambda path: [f"--apply-controls={path}"],
            "nvcc advanced-controls file (nvcc 13.3+, sm_100+), by its sha256; none: without",
        ),
    )
}
ACF_GENES = {a.gene_name: a for a in ACF.values()}
NO_CONTROLS = "none"


def acf_gene(space: str, seeds: Sequence[str] = ()) -> Gene:
    """The open gene of ``space``'s controls file; ``seeds``: digests the controls engine
    proposes first (the spec's ``acf_files``)."""
    spec = ACF[space]
    return Gene(
        spec.gene_name,
        (NO_CONTROLS,),
        NO_CONTROLS,
        "acf",
        suggest=tuple(seeds),
        description=spec.description,
        open=True,
    )


def flag_names() -> tuple[str, ...]:
    return tuple(CATALOGUE)


def render_flags(values: dict[str, GeneValue]) -> list[str]:
    """nvcc argv items for the catalogue genes present in ``values``, in catalogue order,
    then the controls files (an ``acf`` gene's value here is the file's path, or none)."""
    argv: list[str] = []
    for name, spec in CATALOGUE.items():
        if name in values:
            argv.extend(spec.render(values[name]))
    for name, acf in ACF_GENES.items():
        value = values.get(name, NO_CONTROLS)
        if value != NO_CONTROLS:
            argv.extend(acf.render(str(value)))
    return argv


def supported(spec: FlagSpec, nvcc_help: str) -> bool:
    """Whether this nvcc offers the entry (``nvcc --help`` text)."""
    return spec.requires_option is None or spec.requires_option in nvcc_help
