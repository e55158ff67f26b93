"""What every strategy shares: its context, its options table, ranking, seeds.

A strategy proposes (``ask``) and is told (``tell``); it never compiles or
measures. It sees finished :class:`~ctune.records.Trial`s
only, including failed ones, which rank below every feasible trial
(constraint-domination: feasible first, then by total violation; a failed
build or measurement has the largest violation of all).

Options come as a small table ``name -> (description, default)`` (Kernel
Tuner's ``_options``): it validates user input, lists the allowed keys on
error, and is the table of docs/search.md, "Strategy options".
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from ctune.errors import UserError
from ctune.records import Candidate, GeneValue, Outcome, Trial
from ctune.spec.space.params import Space

if TYPE_CHECKING:
    from ctune.controls.setup import ControlsSetup

#: the violation of a trial that has no values (failed build or measurement)
FAILED_VIOLATION = 1e300

OptionTable = dict[str, tuple[str, Any]]


@dataclass(frozen=True)
class StrategyContext:
    """Everything a strategy may know: the genome, the problem, the directions, the seed,
    and where controls files come from when the space has acf genes."""

    kernel: str
    space: Space
    dims: Mapping[str, int] = field(default_factory=dict)
    directions: tuple[str, ...] = ("min",)
    seed: int = 0
    controls: ControlsSetup | None = None


def _coerce_option(strategy: str, key: str, raw: Any, default: Any) -> Any:
    if not isinstance(raw, str):
        return raw
    text = raw.strip()
    try:
        if isinstance(default, bool):
            if text.lower() in ("1", "true", "yes", "on"):
                return True
            if text.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(text)
        if isinstance(default, int):
            return int(text)
        if isinstance(default, float):
            return float(text)
    except ValueError:
        kind = type(default).__name__
        raise UserError(f"option {key}={raw!r} for {strategy}: not a valid {kind}") from None
    return text


def resolve_options(strategy: str, table: OptionTable, given: Mapping[str, Any]) -> dict[str, Any]:
    """Defaults overlaid with ``given``; unknown keys are one UserError listing the allowed."""
    unknown = sorted(set(given) - set(table))
    if unknown:
        allowed = ", ".join(table) or "none"
        raise UserError(f"unknown option '{unknown[0]}' for {strategy} (allowed: {allowed})")
    out = {k: default for k, (_, default) in table.items()}
    for key, raw in given.items():
        out[key] = _coerce_option(strategy, key, raw, table[key][1])
    return out


def parse_option_items(items: Sequence[str]) -> dict[str, str]:
    """``["population_size=16", ...]`` -> dict; malformed items are UserErrors."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UserError(f"--option {item!r}: expected NAME=VALUE")
        out[key.strip()] = value.strip()
    return out


def check_probability(strategy: str, options: Mapping[str, Any], *names: str) -> None:
    for name in names:
        value = options[name]
        if not isinstance(value, (int, float)) or not 0.0 <= float(value) <= 1.0:
            raise UserError(f"option {name}={value} for {strategy}: must be within [0, 1]")


def check_one_objective(
    strategy: str, directions: Sequence[str], advice: str = "use --strategy nsga2"
) -> None:
    """Refuse several objectives to a strategy that optimises one."""
    if len(directions) != 1:
        raise UserError(
            f"strategy {strategy} optimises one objective, not {len(directions)}; {advice}"
        )


def check_at_least(strategy: str, options: Mapping[str, Any], name: str, low: int) -> None:
    value = options[name]
    if not isinstance(value, int) or value < low:
        raise UserError(f"option {name}={value} for {strategy}: must be an integer >= {low}")


# --- ranking -----------------------------------------------------------------


def min_form(trial: Trial, directions: Sequence[str]) -> tuple[float, ...] | None:
    """The trial's values to minimise (``max`` objectives negated); None if infeasible."""
    if not trial.feasible or trial.values is None:
        return None
    # here, not at the top: the option tables in this module make `ctune search --help`,
    # which should not import numpy (pareto's)
    from ctune.objective.pareto import minimized

    return minimized(trial.values, directions)


def total_violation(trial: Trial) -> float:
    """0 for a feasible trial; the summed violation when constraints fail; huge when failed."""
    if not trial.outcome.is_ok or trial.values is None:
        return FAILED_VIOLATION
    return float(sum(v for v in trial.violations if v > 0))


def infeasible_order(trials: Iterable[Trial]) -> list[Trial]:
    """Infeasible trials best first: least violation, then earliest."""
    return sorted(trials, key=lambda t: (total_violation(t), t.number))


# --- seeds ---------------------------------------------------------------------


def seed_values(
    space: Space, dims: Mapping[str, int], rng: random.Random
) -> list[dict[str, GeneValue]]:
    """The default build, then the spec's ``suggest`` values, all repaired to validity.

    Suggestions are read two ways: zipped across genes (the i-th suggestion of
    every gene together, which is how spec authors list coherent tiles) and
    one gene at a time on top of the default; where that breaks a restriction, the
    suggested value stays and the other genes are repaired around it. An open gene's
    suggestions (controls files) are the controls engine's to propose, not a strategy's.
    """
    default = space.default_values()
    # (draft, the gene whose suggestion it carries: kept while the others are repaired)
    drafts: list[tuple[dict[str, GeneValue], tuple[str, ...]]] = [(default, ())]
    suggesting = [g for g in space.genes if g.suggest and not g.open]
    depth = max((len(g.suggest) for g in suggesting), default=0)
    for i in range(depth):
        zipped = {g.name: g.suggest[min(i, len(g.suggest) - 1)] for g in suggesting}
        drafts.append(({**default, **zipped}, ()))
    for g in suggesting:
        drafts.extend(({**default, g.name: value}, (g.name,)) for value in g.suggest)
    out: list[dict[str, GeneValue]] = []
    seen: set[tuple[int, ...]] = set()
    for draft, keep in drafts:
        fixed = space.repair(draft, dims, rng, keep)
        if fixed is None:
            continue
        code = space.encode(fixed)
        if code not in seen:
            seen.add(code)
            out.append(fixed)
    return out


# --- base class ----------------------------------------------------------------------


def _encode_rng_state(state: tuple[Any, ...]) -> list[Any]:
    version, internal, gauss = state
    return [version, list(internal), gauss]


def _decode_rng_state(data: Sequence[Any]) -> tuple[Any, ...]:
    version, internal, gauss = data
    return (version, tuple(internal), gauss)


class BaseStrategy:
    """Bookkeeping every strategy needs: options, RNG, what it asked and was told.

    Subclasses implement :meth:`ask` and may extend :meth:`tell`.
    """

    name: ClassVar[str] = "base"
    OPTIONS: ClassVar[OptionTable] = {}

    def __init__(self, context: StrategyContext, options: Mapping[str, Any] | None = None) -> None:
        self.context = context
        self.space = context.space
        self.options = resolve_options(self.name, self.OPTIONS, options or {})
        self.rng = random.Random(context.seed)
        self.told: dict[str, Trial] = {}
        self.asked: set[str] = set()
        self.generation = 0

    # --- helpers for subclasses ---------------------------------------------
    def candidate(self, values: Mapping[str, GeneValue]) -> Candidate:
        return Candidate.of(self.context.kernel, values)

    def seen(self, key: str) -> bool:
        return key in self.told or key in self.asked

    def valid(self, values: Mapping[str, GeneValue]) -> bool:
        return self.space.is_valid(values, self.context.dims)

    def unseen(
        self, drafts: Iterable[Mapping[str, GeneValue]], m: int, taken: set[str]
    ) -> list[Candidate]:
        """Up to ``m`` of ``drafts``, in order, that this strategy has not seen and that are
        not in ``taken`` (which gains their keys); marking them asked is the caller's."""
        out: list[Candidate] = []
        for values in drafts:
            if len(out) >= m:
                break
            cand = self.candidate(values)
            if not self.seen(cand.key()) and cand.key() not in taken:
                out.append(cand)
                taken.add(cand.key())
        return out

    # --- protocol -------------------------------------------------------------
    def ask(self, n: int) -> list[Candidate]:
        raise NotImplementedError

    def upcoming(self, n: int) -> list[Candidate]:
        """The next ``n`` candidates :meth:`ask` will return, without asking them; empty
        where proposals depend on results (most strategies), so nothing is built ahead."""
        return []

    def first_asks_ignore_values(self) -> bool:
        """Whether the asks after the baseline, until the next :meth:`tell`, depend only on
        which candidates were told, never on a value (seeds and uniform samples): then
        :meth:`guess_first_asks` can name them. False unless a strategy says so."""
        return False

    def guess_first_asks(self, baseline: Candidate) -> Callable[[int], list[Candidate]] | None:
        """An ``ask`` whose calls return, in turn, what this strategy's asks will once
        ``baseline`` is told (the first generation, then its refills), named before the
        baseline is built: a copy of this strategy told a stand-in of it. None where those
        asks depend on the baseline's value (:meth:`first_asks_ignore_values`), so nothing
        is built beside the baseline."""
        if self.told or self.asked or not self.first_asks_ignore_values():
            return None
        twin = copy.deepcopy(self, memo={id(self.context): self.context})
        values = (0.0,) * len(self.context.directions)
        twin.tell([Trial(0, 0, baseline, Outcome.OK, values=values)])
        return twin.ask

    def tell(self, trials: Sequence[Trial]) -> None:
        """Record finished trials, asked or not (fillers): none is proposed again."""
        for trial in trials:
            self.told[trial.candidate.key()] = trial
        self.generation += 1

    def state(self) -> dict[str, Any]:
        """JSON-able state; with the told trials replayed it restores the strategy."""
        return {
            "strategy": self.name,
            "generation": self.generation,
            "told": len(self.told),
            "rng": _encode_rng_state(self.rng.getstate()),
        }

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Restore the RNG and generation counter after the trials were replayed."""
        if state.get("strategy") != self.name:
            return
        self.generation = int(state.get("generation", self.generation))
        if state.get("rng") is not None:
            self.rng.setstate(_decode_rng_state(state["rng"]))


__all__ = [
    "FAILED_VIOLATION",
    "BaseStrategy",
    "OptionTable",
    "StrategyContext",
    "check_at_least",
    "check_one_objective",
    "check_probability",
    "infeasible_order",
    "min_form",
    "parse_option_items",
    "resolve_options",
    "seed_values",
    "total_violation",
]
