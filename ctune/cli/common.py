"""Shared CLI plumbing: settings resolution, spec loading, ``--set`` parsing."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctune.cli.invocation import resolve_settings
from ctune.errors import UserError

# the spec, toolchain and space modules load when a command runs: the command modules
# import this one at their top, and `ctune --help` needs none of them
if TYPE_CHECKING:
    from ctune.compile.toolchain import Toolchain
    from ctune.config import Settings
    from ctune.records import Candidate, GeneValue
    from ctune.spec import KernelSpec
    from ctune.spec.space.params import Space


def settings(**overrides: Any) -> Settings:
    return resolve_settings({k: v for k, v in overrides.items() if v is not None})


def load(kernel: Path, cfg: Settings) -> tuple[KernelSpec, Toolchain]:
    """Probe nvcc, then load the spec with the options this nvcc offers; an arch it does
    not compile for is refused here, before any candidate is built for it."""
    from ctune.compile.select_toolchain import nvcc_for
    from ctune.compile.toolchain import probe_toolchain, target_arch
    from ctune.spec import load_spec

    toolchain = probe_toolchain(nvcc_for(cfg))
    spec = load_spec(kernel, toolchain.help_text)
    target_arch(cfg.arch, spec, toolchain)
    return spec, toolchain


def _match_value(space: Space, name: str, raw: str) -> GeneValue:
    gene = space.gene(name)
    if gene.open and gene.takes(raw.strip().lower()):
        return raw.strip().lower()  # a controls file's digest
    for value in gene.values:
        if str(value).lower() == raw.strip().lower() or (
            isinstance(value, bool)
            and raw.strip().lower() in (("1", "on", "yes") if value else ("0", "off", "no"))
        ):
            return value
    allowed = ", ".join(str(v) for v in gene.values)
    if gene.open:
        allowed += ", or a stored controls file's sha256 (ctune compile --acf-file FILE)"
    raise UserError(f"--set {name}={raw}: not a value of {name} (allowed: {allowed})")


def parse_sets(
    space: Space, items: Sequence[str], base: Mapping[str, GeneValue]
) -> dict[str, GeneValue]:
    """Apply ``NAME=VALUE`` items to ``base``; unknown genes and values, and a gene set
    twice (the last would silently win, as a repeated --objective is refused), are one-line
    errors."""
    values = dict(base)
    given: dict[str, str] = {}
    for item in items:
        name, sep, raw = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise UserError(f"--set {item!r}: expected NAME=VALUE")
        if name not in space:
            raise UserError(f"--set {name}: unknown gene (genes: {', '.join(space.names)})")
        if name in given:
            raise UserError(
                f"--set {name} is given twice ({given[name]!r} and {item!r}); give it once"
            )
        given[name] = item
        values[name] = _match_value(space, name, raw)
    return values


def offer_controls(
    spec: KernelSpec,
    toolchain: Toolchain,
    cfg: Settings,
    asked: tuple[str, ...] | None,
    origin: str = "--acf",
) -> KernelSpec:
    """The spec with the ``acf`` genes this toolchain takes for the run's target: the
    command line's (``asked``, by the option ``origin``; a refusal is a UserError) or the
    spec's (a warning line)."""
    if asked is None and not spec.acf:
        return spec
    from ctune.cli.render import warn_line
    from ctune.compile.toolchain import target_arch
    from ctune.controls.offer import offer_acf

    arch = target_arch(cfg.arch, spec, toolchain)
    return offer_acf(spec, toolchain, arch, asked, warn_line, origin)


def candidate_from_sets(spec: KernelSpec, items: Sequence[str]) -> Candidate:
    return spec.candidate(parse_sets(spec.space, items, spec.space.default_values()))
