"""Candidate -> the exact nvcc argv. Pure: no subprocess, no file access.

Genes render in a fixed order: target, language, resource report, include
dirs, defines (problem defines, then define/template/launch genes, sorted),
catalogue flags (catalogue order), the spec's fixed flags, output, source (``-x cu`` before
a source that is not a ``.cu``: a header).
The same candidate always gives the same argv, which is part of the build key.
A define is written by :func:`ctune.quoting.define_flag`, the one rule for what
reaches nvcc's command line (checked where nvcc is run).
Runtime genes are not rendered at all (:func:`split_genes`): candidates that
differ only in them have one argv, hence one build key and one cached binary.
Nor is an ``#ifdef`` switch that is off: its macro is left undefined.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from ctune.controls.store import APPLY_OPTION, applied_digest, registry_relative
from ctune.errors import UserError
from ctune.quoting import define_flag
from ctune.records import GeneValue
from ctune.spec.flags import check_flags, language_flags
from ctune.spec.space.nvcc import render_flags
from ctune.spec.space.params import Gene


def split_genes(
    genes: Sequence[Gene], values: Mapping[str, GeneValue]
) -> tuple[dict[str, GeneValue], dict[str, GeneValue]]:
    """A candidate's values for nvcc: (``-D`` genes, catalogue flag genes).

    Runtime genes are in neither: they reach the kernel through its launch rule,
    so leaving them out lets their candidates share a build. An ``ifdef`` switch that is
    off is in neither too (:meth:`Gene.defines`): ``-DNAME=0`` would turn ``#ifdef NAME`` on.
    """
    by_name = {g.name: g for g in genes}
    defines: dict[str, GeneValue] = {}
    flags: dict[str, GeneValue] = {}
    for name, value in values.items():
        gene = by_name[name]
        if gene.flag:
            flags[name] = value
        elif gene.defines(value):
            defines[name] = value
    return defines, flags


def default_defines(genes: Sequence[Gene]) -> dict[str, GeneValue]:
    """The ``-D`` genes of the default build: what the source closure is taken with."""
    return split_genes(genes, {g.name: g.default for g in genes})[0]


def target_flags(arch: str, entry_kind: str) -> list[str]:
    """SASS for exactly one architecture: ``sm_90`` -> compute_90 -> sm_90."""
    number = arch.split("_", 1)[1]
    gencode = f"--generate-code=arch=compute_{number},code=sm_{number}"
    if entry_kind == "launcher":
        # a host library; --no-compress keeps the embedded cubin readable for the SASS digest
        return [gencode, "-shared", "-Xcompiler", "-fPIC", "--no-compress"]
    return [gencode, "-cubin"]


def build_argv(
    *,
    nvcc: str,
    source: Path,
    output: Path,
    arch: str,
    entry_kind: str,
    std: str,
    include_dirs: Sequence[Path],
    define_genes: Mapping[str, GeneValue],
    flag_genes: Mapping[str, GeneValue],
    problem_defines: Mapping[str, GeneValue],
    extra_flags: Sequence[str] = (),
) -> list[str]:
    argv = [nvcc, *target_flags(arch, entry_kind), f"-std={std}", "-Xptxas", "-v"]
    argv += [f"-I{d}" for d in include_dirs]
    argv += [define_flag(k, v) for k, v in sorted(problem_defines.items())]
    argv += [define_flag(k, v) for k, v in sorted(define_genes.items())]
    argv += render_flags(dict(flag_genes))
    argv += list(extra_flags)
    argv += ["-o", str(output), *language_flags(source, extra_flags), str(source)]
    return argv


def ptx_argv(argv: Sequence[str], output: Path) -> list[str]:
    """A cubin build's argv as the PTX of the same front end (defines, includes, flags).

    The virtual architecture replaces the real one and ``-ptx`` replaces ``-cubin``;
    ptxas options stay (nvcc does not run ptxas for PTX output).
    """
    out: list[str] = []
    items = list(argv)
    i = 0
    while i < len(items):
        item = items[i]
        if item == "-cubin":
            item = "-ptx"
        elif item.startswith("--generate-code=arch=compute_"):
            number = item.split("compute_", 1)[1].split(",", 1)[0]
            item = f"--generate-code=arch=compute_{number},code=compute_{number}"
        elif item == "-o" and i + 1 < len(items):
            out += ["-o", str(output)]
            i += 2
            continue
        out.append(item)
        i += 1
    return out


def key_argv(argv: Sequence[str]) -> list[str]:
    """argv without the nvcc path and output path: what the build key covers."""
    items = list(argv[1:])
    if "-o" in items:
        i = items.index("-o")
        del items[i : i + 2]
    return items


#: argv items only ctune's own builds need: the output it inspects (a cubin, a host
#: library with a readable cubin) and the resource report it parses. A user's build
#: chooses its own output, so they are never recorded or exported.
HARNESS_ITEMS = frozenset({"-cubin", "-shared", "--no-compress"})
HARNESS_PAIRS = frozenset({("-Xcompiler", "-fPIC"), ("-Xptxas", "-v")})


def without_harness_flags(items: Sequence[str]) -> list[str]:
    """``items`` without :data:`HARNESS_ITEMS` and :data:`HARNESS_PAIRS`: the flags as a
    user compiles the kernel (also the form an older record is compared in)."""
    out: list[str] = []
    skip_next = False
    for i, item in enumerate(items):
        if skip_next:
            skip_next = False
            continue
        if i + 1 < len(items) and (item, items[i + 1]) in HARNESS_PAIRS:
            skip_next = True
            continue
        if item not in HARNESS_ITEMS:
            out.append(item)
    return out


def tuned_flags(argv: Sequence[str]) -> list[str]:
    """The part of argv a build system must reproduce (target, defines and catalogue
    flags), without ctune's own output mode and include paths; a stored controls file is
    named as the registry holds it (``controls/DIGEST.acf``)."""
    items = without_harness_flags(key_argv(argv)[:-1])  # drop the source
    out = []
    for item in items:
        if item.startswith("-I"):
            continue
        digest = applied_digest(item)
        out.append(item if digest is None else f"{APPLY_OPTION}={registry_relative(digest)}")
    return out


# What a build writes besides the spec's allow-listed flags (``spec/flags.py``): the target,
# the language standard and defines (a registry's controls file: :func:`_registry_controls`)
_BUILD_ITEM = re.compile(
    r"^(?:--generate-code=arch=compute_(\d+[af]?),code=sm_\1"
    r"|-std=c\+\+\d\d|-D[A-Za-z_][A-Za-z0-9_]*(?:=.*)?)$"
)


def _registry_controls(item: str) -> bool:
    """``--apply-controls=controls/<digest>.acf``: a controls file as an artifact names it."""
    digest = applied_digest(item)
    return digest is not None and item == f"{APPLY_OPTION}={registry_relative(digest)}"


def tuned_flags_refusal(items: Sequence[str]) -> str | None:
    """Why ``items`` are not flags :func:`tuned_flags` writes (a registry member's recorded
    ``nvcc_flags``), else None.

    An export puts them on a user's compile line, so an item no build writes (a host
    compiler plugin, an output path, ``--dryrun``) is refused whatever its characters:
    each is a target, a standard, a define, a harness item, a registry controls file
    (alone or after ``-Xptxas``), or one of the flags a spec may add."""
    rest: list[str] = []
    items = without_harness_flags(items)
    i = 0
    while i < len(items):
        pair = items[i] == "-Xptxas" and i + 1 < len(items) and _registry_controls(items[i + 1])
        if pair or _BUILD_ITEM.match(items[i]) or _registry_controls(items[i]):
            i += 2 if pair else 1
            continue
        rest.append(items[i])
        i += 1
    try:
        check_flags(rest)
    except UserError as exc:
        return str(exc)
    return None
