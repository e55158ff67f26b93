"""Genes, restrictions and the space they span: encode, enumerate, sample, repair.

One genome holds several families of genes (nvcc and ptxas flags, launch configuration,
template/define parameters, runtime values, which share a build). Every gene is a finite
ordered list of values, so a candidate is also a vector of indices for the genetic
operators; restrictions are safe expressions (``ctune.expr``) over genes, derived values
and the problem's dimensions. An *open* gene (``Gene.open``: the ``acf`` family) also takes
any sha256 digest it does not list; strategies choose only among its listed values.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from ctune.errors import UserError
from ctune.expr import Expr, ExprError
from ctune.records import GeneValue, is_sha256_hex
from ctune.spec.space.enumerate import Check, Walk, checks_of
from ctune.spec.space.enumerate import count as count_assignments

FAMILIES = ("nvcc", "ptxas", "launch", "template", "define", "runtime", "device", "acf")
#: a candidate's (name, value) pairs that reach nvcc: equal groups, one build
BuildGroup = tuple[tuple[str, GeneValue], ...]
#: the families a spec's ``genes:`` may name (the first two come from the flag catalogue;
#: device genes come from --device-genes, with values read from the GPU)
SPEC_FAMILIES = FAMILIES[2:6]


class SpaceValueError(UserError):
    """A gene name or value that the spec's space does not have (from a file or an option)."""


class DerivedValueError(ExprError):
    """A derived value that cannot be evaluated for a candidate; ``name`` says which."""

    def __init__(self, name: str, error: ExprError) -> None:
        super().__init__(f"derived value {name}: {error}")
        self.name = name
        self.error = error


@dataclass(frozen=True, slots=True)
class Breach:
    """What a candidate breaks: restriction ``index`` (false, or raising ``error``), or
    the derived value ``derived`` that cannot be evaluated (``error`` says why)."""

    source: str  # the expression's text
    error: str = ""  # where evaluating it raised: "division by zero"
    index: int = -1  # the restriction's position in Space.restrictions
    derived: str = ""  # the derived value's name

    @property
    def text(self) -> str:
        """How a report names it: the restriction, and why it cannot be evaluated."""
        if self.derived:
            return f"derived value {self.derived}: {self.error}"
        return f"{self.source} (cannot be evaluated: {self.error})" if self.error else self.source


@dataclass(frozen=True, slots=True)
class Gene:
    """One tunable: a name, its ordered values, the default build's value."""

    name: str
    values: tuple[GeneValue, ...]
    default: GeneValue
    family: str = "define"
    numerics: bool = False  # changes floating-point results (fast-math and its parts)
    suggest: tuple[GeneValue, ...] = ()
    description: str = ""
    #: an ``#ifdef`` switch: the source tests whether the macro is defined, not its value
    ifdef: bool = False
    #: any sha256 digest is a value too (a controls file named by its content); strategies
    #: choose only among the listed values
    open: bool = False

    def __post_init__(self) -> None:
        if not self.values:
            raise ValueError(f"gene {self.name} has no values")
        if len(set(self.values)) != len(self.values):
            raise ValueError(f"gene {self.name} repeats a value")
        if self.default not in self.values:
            raise ValueError(f"gene {self.name}: default {self.default!r} is not among its values")
        if self.family not in FAMILIES:
            raise ValueError(f"gene {self.name}: family {self.family!r} not in {FAMILIES}")
        if self.ifdef and not set(self.values) <= {0, 1}:
            raise ValueError(f"gene {self.name}: an #ifdef switch is 0 (off) or 1 (on)")
        if self.open and not all(isinstance(v, str) and not is_sha256_hex(v) for v in self.values):
            raise ValueError(f"gene {self.name}: an open gene lists words, not digests")

    def index(self, value: GeneValue) -> int:
        """The position of ``value`` among the listed values; an open gene's unlisted member
        (a digest) is at its default's position: strategies leave open genes alone."""
        if self.open and value not in self.values and self.takes(value):
            return self.values.index(self.default)
        return self.values.index(value)

    def takes(self, value: object) -> bool:
        """Is ``value`` one of this gene's values, listed or (open gene) a digest?"""
        return value in self.values or (self.open and is_sha256_hex(value))

    @property
    def compiled(self) -> bool:
        """Does the value reach nvcc? A runtime gene never does: it is not part of a build;
        nor does a device gene (it sets the GPU's clock or power limit, not the binary).

        The one home of the compiled-or-runtime rule (build groups, argv, fillers,
        the artifact's defines and runtime values all ask this).
        """
        return not (self.runtime or self.device)

    def defines(self, value: GeneValue) -> bool:
        """Is the macro defined in a build with this value? Every compiled gene's is, but for
        an ``ifdef`` switch's 0: ``#ifdef NAME`` asks whether NAME is defined, and
        ``-DNAME=0`` defines it, so off must pass nothing. The one home of that rule (argv,
        the source closure and the artifact's defines all ask this)."""
        return self.compiled and not (self.ifdef and not value)

    @property
    def device(self) -> bool:
        """Does it set the GPU (clock, power limit) rather than the binary or its launch?"""
        return self.family == "device"

    @property
    def runtime(self) -> bool:
        """Is it a launcher argument (a runtime gene), measured without a rebuild?"""
        return self.family == "runtime"

    @property
    def flag(self) -> bool:
        """Is the value an nvcc/ptxas option (a catalogue flag or a controls file) rather
        than a ``-D``?"""
        return self.family in ("nvcc", "ptxas", "acf")


def _why(error: ExprError, source: str) -> str:
    """An evaluation error's text without the expression it is about, which the report
    names already (``division by zero in 'X'`` reads ``division by zero``)."""
    return str(error).replace(f" in '{source}'", "")


@dataclass(frozen=True)
class Space:
    """Ordered genes plus restrictions; pure, deterministic given an RNG."""

    genes: tuple[Gene, ...]
    restrictions: tuple[Expr, ...] = ()
    derived: tuple[tuple[str, Expr], ...] = ()
    _by_name: dict[str, Gene] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._by_name.update({g.name: g for g in self.genes})
        if len(self._by_name) != len(self.genes):
            raise ValueError("gene names must be unique")

    # --- lookup -----------------------------------------------------------
    @property
    def names(self) -> tuple[str, ...]:
        return tuple(g.name for g in self.genes)

    def gene(self, name: str) -> Gene:
        return self._by_name[name]

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def build_group(self, genes: Iterable[tuple[str, GeneValue]]) -> BuildGroup:
        """The values that reach nvcc (runtime genes never do): candidates that agree on
        them share one build."""
        return tuple((k, v) for k, v in genes if self._by_name[k].compiled)

    def default_values(self) -> dict[str, GeneValue]:
        return {g.name: g.default for g in self.genes}

    def member(self, name: str, value: object) -> GeneValue | None:
        """The gene's own value equal to ``value`` in type and value, else None.

        ``True`` is not ``1`` and ``"8"`` is not ``8``: a recorded value matches only a value
        of the same kind (an int may stand for an equal float, as JSON writes ``2.0`` as
        ``2`` in some writers). An open gene's member may also be a sha256 digest."""
        gene = self._by_name.get(name)
        if gene is None:
            return None
        if gene.open and is_sha256_hex(value):
            assert isinstance(value, str)
            return value
        for own in gene.values:
            if type(own) is type(value) and own == value:
                return own
            if type(own) is float and type(value) is int and own == value:
                return own
        return None

    def check_values(self, values: Mapping[str, object], where: str) -> dict[str, GeneValue]:
        """``values`` as this space's own values, or one line naming ``where`` and the gene.

        The one gate for gene values that come from outside the spec (``--set``, a journal,
        an artifact): a name the space lacks or a value not among the gene's values is
        refused, so nothing else reaches the compiler's command line.
        """
        out: dict[str, GeneValue] = {}
        for name, value in values.items():
            if not isinstance(name, str) or name not in self._by_name:
                raise SpaceValueError(f"{where}: gene {name!r} is not in the spec's space")
            own = self.member(name, value)
            if own is None:
                allowed = ", ".join(repr(v) for v in self._by_name[name].values[:12])
                more = ", ..." if len(self._by_name[name].values) > 12 else ""
                if self._by_name[name].open:
                    more += ", or a controls file's sha256 digest (64 lower-case hex)"
                raise SpaceValueError(
                    f"{where}: {name}={value!r} is not a value of {name} (allowed: {allowed}{more})"
                )
            out[name] = own
        return out

    def in_today(self, values: Mapping[str, GeneValue]) -> dict[str, GeneValue]:
        """Values recorded in an earlier space, in this one: genes added since take their
        defaults, genes no longer here are dropped (a recorded build is then the build a
        search would make of it today)."""
        return {g.name: values.get(g.name, g.default) for g in self.genes}

    def cardinality(self) -> int:
        """Size of the unrestricted product of all genes."""
        return math.prod(len(g.values) for g in self.genes)

    # --- evaluation -------------------------------------------------------
    def environment(
        self, values: Mapping[str, GeneValue], dims: Mapping[str, int]
    ) -> dict[str, GeneValue]:
        """Genes, problem dims and derived values, in the order derived values need."""
        env: dict[str, GeneValue] = {**dims, **values}
        for name, expr in self.derived:
            try:
                env[name] = expr.evaluate(env)
            except ExprError as exc:
                raise DerivedValueError(name, exc) from None
        return env

    def breaches(self, values: Mapping[str, GeneValue], dims: Mapping[str, int]) -> list[Breach]:
        """Every restriction the candidate breaks. One that raises (a division by zero) is
        broken, and its error kept to say why; a derived value that raises is the one
        breach, since no restriction can be evaluated without it."""
        try:
            env = self.environment(values, dims)
        except DerivedValueError as exc:
            source = dict(self.derived)[exc.name].source
            return [Breach(source, _why(exc.error, source), derived=exc.name)]
        broken = []
        for index, restriction in enumerate(self.restrictions):
            try:
                ok, error = bool(restriction.evaluate(env)), ""
            except ExprError as exc:
                ok, error = False, _why(exc, restriction.source)
            if not ok:
                broken.append(Breach(restriction.source, error, index))
        return broken

    def violations(self, values: Mapping[str, GeneValue], dims: Mapping[str, int]) -> list[str]:
        """The text of every restriction the candidate breaks (:attr:`Breach.text`)."""
        return [b.text for b in self.breaches(values, dims)]

    def is_valid(self, values: Mapping[str, GeneValue], dims: Mapping[str, int]) -> bool:
        return not self.violations(values, dims)

    # --- codec -------------------------------------------------------------
    def encode(self, values: Mapping[str, GeneValue]) -> tuple[int, ...]:
        """Each gene's value as its index (:meth:`Gene.index`: an open gene's digest codes
        as its default, so ``decode(encode(v))`` is :meth:`declared` of ``v``)."""
        return tuple(g.index(values[g.name]) for g in self.genes)

    def declared(self, values: Mapping[str, GeneValue]) -> dict[str, GeneValue]:
        """``values`` with every open gene's unlisted digest at its default: the candidate
        as a strategy that chooses among listed values sees it."""
        return self.decode(self.encode(values))

    def decode(self, indices: tuple[int, ...] | list[int]) -> dict[str, GeneValue]:
        return {g.name: g.values[i] for g, i in zip(self.genes, indices, strict=True)}

    # --- enumeration --------------------------------------------------------
    def _constrained_names(self) -> set[str]:
        """Genes that some restriction depends on, directly or through derived values."""
        derived_deps = {name: set(expr.names) for name, expr in self.derived}
        needed: set[str] = set()
        for restriction in self.restrictions:
            stack = list(restriction.names)
            while stack:
                name = stack.pop()
                if name in needed:
                    continue
                needed.add(name)
                stack.extend(derived_deps.get(name, ()))
        return needed & set(self._by_name)

    def _split(self) -> tuple[tuple[Gene, ...], tuple[Gene, ...]]:
        constrained = self._constrained_names()
        bound = tuple(g for g in self.genes if g.name in constrained)
        free = tuple(g for g in self.genes if g.name not in constrained)
        return bound, free

    def _walk_inputs(
        self, dims: Mapping[str, int]
    ) -> tuple[tuple[Gene, ...], tuple[Gene, ...], dict[str, GeneValue], list[Check]]:
        """Restricted genes, free genes, the environment (free genes at their defaults,
        which no restriction reads) and the checks of the pruned walk."""
        bound, free = self._split()
        env: dict[str, GeneValue] = {**dims, **{g.name: g.default for g in free}}
        checks = checks_of(self.restrictions, self.derived, frozenset(g.name for g in bound))
        return bound, free, env, checks

    def count_valid(self, dims: Mapping[str, int], limit: int = 500_000) -> tuple[int, bool]:
        """(number of valid candidates, exact?). Free genes multiply without enumeration;
        past ``limit`` visited nodes the restricted part is estimated by sampling."""
        bound, free, env, checks = self._walk_inputs(dims)
        free_size = math.prod(len(g.values) for g in free)
        valid, exact = count_assignments(
            [g.name for g in bound], {g.name: g.values for g in bound}, checks, env, limit
        )
        return valid * free_size, exact

    def iter_valid(self, dims: Mapping[str, int]) -> Iterator[dict[str, GeneValue]]:
        """Every valid candidate, in a deterministic order (exhaustive search): the
        product order of the genes, restricted ones pruned as early as possible."""
        bound, free, env, checks = self._walk_inputs(dims)
        walk = Walk([g.name for g in bound], [g.values for g in bound], checks, env)
        for combo in walk.assignments():
            partial = {g.name: v for g, v in zip(bound, combo, strict=True)}
            for rest in itertools.product(*(g.values for g in free)):
                values = {**partial, **{g.name: v for g, v in zip(free, rest, strict=True)}}
                yield {name: values[name] for name in self.names}

    # --- sampling -----------------------------------------------------------
    def random_values(self, rng: random.Random) -> dict[str, GeneValue]:
        return {g.name: rng.choice(g.values) for g in self.genes}

    def sample(
        self, rng: random.Random, n: int, dims: Mapping[str, int], max_tries: int = 0
    ) -> list[dict[str, GeneValue]]:
        """Up to n distinct valid candidates drawn uniformly (rejection sampling)."""
        max_tries = max_tries or max(1000, 200 * n)
        seen: set[tuple[int, ...]] = set()
        out: list[dict[str, GeneValue]] = []
        for _ in range(max_tries):
            if len(out) >= n:
                break
            values = self.random_values(rng)
            code = self.encode(values)
            if code in seen:
                continue
            seen.add(code)
            if self.is_valid(values, dims):
                out.append(values)
        return out

    def repair(
        self,
        values: Mapping[str, GeneValue],
        dims: Mapping[str, int],
        rng: random.Random,
        keep: Collection[str] = (),
    ) -> dict[str, GeneValue] | None:
        """The nearest valid candidate: change as few restricted genes as possible.

        Tries single-gene changes, then pairs, in random order, the genes in ``keep`` last
        (a seed's suggested value is what the draft is for: change its neighbours first);
        falls back to a random valid sample. None only when no valid candidate can be found.
        """
        current = dict(values)
        if self.is_valid(current, dims):
            return current
        bound, _ = self._split()
        genes = list(bound)
        rng.shuffle(genes)
        genes.sort(key=lambda gene: gene.name in keep)  # stable: the shuffled order otherwise
        for gene in genes:
            options = [v for v in gene.values if v != current[gene.name]]
            rng.shuffle(options)
            for value in options:
                trial = {**current, gene.name: value}
                if self.is_valid(trial, dims):
                    return trial
        # pairs touching a kept gene last too (stable: the shuffled order otherwise)
        pairs = sorted(
            itertools.combinations(genes, 2),
            key=lambda pair: (pair[0].name in keep) + (pair[1].name in keep),
        )
        for first, second in pairs:
            for v1 in rng.sample(first.values, len(first.values)):
                for v2 in rng.sample(second.values, len(second.values)):
                    trial = {**current, first.name: v1, second.name: v2}
                    if self.is_valid(trial, dims):
                        return trial
        fallback = self.sample(rng, 1, dims)
        if not fallback:
            return None
        # keep the unrestricted genes, which any restriction-valid point accepts
        return {**current, **{g.name: fallback[0][g.name] for g in bound}}
