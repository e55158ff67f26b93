"""The restrictions a draft proposes, and defaults that keep them: a step or divisor that
can reach 0, static shared memory over the 48 KiB a kernel gets without opting in."""

from __future__ import annotations

from ctune.expr import ExprError
from ctune.expr import parse as parse_expr
from ctune.spec.declarations import (
    STATIC_SMEM_BYTES,
    c_extent_expression,
    int_defines,
    static_shared,
)
from ctune.spec.draft.guess import GeneGuess
from ctune.spec.draft.indexing import zero_steps
from ctune.spec.draft.launch import IDENT
from ctune.spec.draft.source import Kernel, Source

#: a restriction the draft proposes, and why (its ``# check:``)
Rule = tuple[str, str]


def defaults_within(genes: list[GeneGuess], rules: list[str], checks: list[str]) -> list[GeneGuess]:
    """The genes with defaults that keep every proposed restriction: a default that breaks
    one is lowered to the largest of its values that keeps them all (the others' at
    their defaults), so that the draft's default candidate is one the space holds."""
    parsed = []
    for rule in rules:
        try:
            parsed.append(parse_expr(rule))
        except ExprError:
            continue
    by_name = {g.name: g for g in genes}

    def kept(values: dict[str, int]) -> bool:
        try:
            return all(bool(rule.evaluate(values)) for rule in parsed)
        except (ExprError, ZeroDivisionError):
            return False

    defaults = {g.name: g.default for g in genes}
    for expr in parsed:
        if kept(defaults):
            break
        for name in sorted(expr.names & by_name.keys()):
            fits = [v for v in by_name[name].values if kept({**defaults, name: v})]
            if fits:
                smaller = [v for v in fits if v <= defaults[name]]
                chosen = max(smaller) if smaller else min(fits)
                checks.append(
                    f"{name}: default {defaults[name]} breaks a proposed restriction; "
                    f"{chosen} instead"
                )
                defaults[name] = chosen
                break
    return [g.with_default(defaults[g.name]) if defaults[g.name] != g.default else g for g in genes]


def step_restrictions(body: str, genes: list[GeneGuess]) -> list[Rule]:
    """``A % B == 0`` where the kernel divides a gene by a gene or steps over one by one."""
    out = []
    for a, b in zero_steps(body, {g.name for g in genes if 0 not in g.values}):
        why = f"{a} / {b} must not be 0 (a step of 0 loops forever) and cover {a} whole"
        out.append((f"{a} % {b} == 0", why))
    return out


def shared_restrictions(source: Source, kernel: Kernel, genes: list[GeneGuess]) -> list[Rule]:
    """The static shared memory limit, where genes size the kernel's ``__shared__`` arrays
    (read as the spec's screening reads them, ``ctune.spec.declarations``) so that their
    largest values would pass it: the author sees the rule the device limits apply."""
    by_name = {g.name: g for g in genes}
    defines = {k: v for k, v in int_defines(source.text).items() if k not in by_name}
    terms: list[str] = []
    for decl in static_shared(source.text, kernel.name):
        extents = [c_extent_expression(e, defines) for e in decl.extents]
        if decl.element_bytes is None or None in extents:
            return []  # an array this draft cannot size
        shown = [e if IDENT.fullmatch(e) or e.isdigit() else f"({e})" for e in extents if e]
        terms.append(" * ".join([str(decl.element_bytes), *shown]))
    try:
        total = parse_expr(" + ".join(terms)) if terms else None
        if total is None or not total.names or not total.names <= set(by_name):
            return []
        largest = total.evaluate({n: max(by_name[n].values) for n in total.names})
    except ExprError:
        return []
    if largest <= STATIC_SMEM_BYTES:
        return []
    why = "static __shared__ bytes within 48 KiB (more needs an opt-in)"
    return [(f"{total.source} <= {STATIC_SMEM_BYTES}", why)]
