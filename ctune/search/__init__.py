"""Search: strategies propose, one driver runs the loop, a journal remembers.

The boundary is the :class:`Strategy` protocol (``ask(n)``, ``tell(trials)``,
``state()``). Built-in strategies are found through a lazy name table, as
Kernel Tuner does: a module is imported on first use (so ``import ctune``
never imports DEAP), and a missing optional dependency is named. Names that
are not built in are looked up in the entry-point group ``ctune.strategies``,
only then.

A search is put together by ``session.py`` (``SearchSession``) and run by ``driver.py``.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ctune.compile.contract import Compiler
from ctune.errors import ToolchainError, UserError

if TYPE_CHECKING:
    from ctune.records import Candidate, Trial
    from ctune.search.strategy import OptionTable, StrategyContext


@runtime_checkable
class Strategy(Protocol):
    """Proposes candidates and learns from finished trials; never compiles or measures.

    ``ask(n)`` returns at most ``n`` valid candidates (fewer, or none when it
    has nothing new to offer); ``tell`` receives every asked candidate's
    trial, failures included, and may also receive trials it never asked for
    (the driver's fillers, ``filling.py``): a strategy takes them like its
    own (into its selection pool) and never proposes them again; ``state()``
    is JSON-able, and ``load_state(state)`` after the replayed trials were told
    restores the strategy on ``--resume`` so that it proposes what it would
    have. ``options`` are the resolved options (defaults filled in), recorded
    in the artifact. ``ctune.testing.contract_strategy`` is the contract suite.

    ``upcoming(n)``: the next ``n`` candidates ``ask`` will return, without asking them,
    from a strategy whose proposals never depend on results (``ExhaustiveStrategy``); the
    driver then compiles the next generation while this one is measured. Empty from the
    others (``BaseStrategy``'s).

    ``guess_first_asks(baseline)``: an ``ask`` whose calls return, in turn, what the asks
    after the ``baseline`` (the default build) is told will return until the next ``tell``
    (the first generation, then the cost model's refills of it), named before the baseline
    is even built, where they do not depend on its value (seeds and uniform samples:
    ``BaseStrategy.first_asks_ignore_values``); the driver compiles them beside the
    baseline. None where they do.
    """

    OPTIONS: OptionTable
    options: Mapping[str, Any]

    def ask(self, n: int) -> list[Candidate]: ...

    def upcoming(self, n: int) -> list[Candidate]: ...

    def guess_first_asks(self, baseline: Candidate) -> Callable[[int], list[Candidate]] | None: ...

    def tell(self, trials: Sequence[Trial]) -> None: ...

    def state(self) -> dict[str, Any]: ...

    def load_state(self, state: Mapping[str, Any]) -> None: ...


@runtime_checkable
class Publisher(Protocol):
    """What a finished search is handed to (the registry's ``ResultPublisher``): the search
    never imports the registry, the caller chooses what happens to a result."""

    def check(self) -> None:
        """Before the search: refuse now what would fail at the end (e.g. no commit target)."""

    def __call__(self, spec: Any, objective: Any, result: Any) -> Any: ...


#: name -> "module:Class"; imported on first use
STRATEGIES: dict[str, str] = {
    "nsga2": "ctune.search.nsga2:Nsga2Strategy",
    "ga": "ctune.search.ga:GaStrategy",
    "staged": "ctune.search.staged:StagedStrategy",
    "parzen": "ctune.search.parzen:ParzenStrategy",
    "tpe": "ctune.search.tpe:TpeStrategy",
    "random": "ctune.search.baselines:RandomStrategy",
    "exhaustive": "ctune.search.baselines:ExhaustiveStrategy",
}
#: strategy -> the optional package its module needs
_REQUIRES = {"nsga2": "deap", "ga": "deap"}
#: strategy -> (package, extra) of an optional extra: missing, it is a toolchain gap (exit 3)
_EXTRAS = {"tpe": ("optuna", "optuna")}


#: what ``auto`` resolves to, by number of objectives (one, several)
AUTO_STRATEGY = ("staged", "nsga2")


def strategy_names() -> list[str]:
    return ["auto", *STRATEGIES]


def strategy_names_help() -> str:
    """The ``--strategy`` help: every name, and what ``auto`` picks (from ``AUTO_STRATEGY``,
    so the help cannot drift from ``resolve_name``)."""
    one, several = AUTO_STRATEGY
    names = ", ".join(
        f"{name} (needs {_EXTRAS[name][0]})" if name in _EXTRAS else name for name in STRATEGIES
    )
    return f"auto ({one} for one objective, {several} for several), {names}"


def resolve_name(name: str, n_objectives: int) -> str:
    """``auto`` is staged for one objective (the Parzen-estimator model over the structure
    genes, then the flags of the leading builds; the model alone where there are no flag
    genes) and nsga2 for several."""
    if name == "auto":
        return AUTO_STRATEGY[0] if n_objectives == 1 else AUTO_STRATEGY[1]
    return name


def strategy_class(name: str) -> type:
    """The class behind a strategy name (built in, else the ``ctune.strategies`` group)."""
    target = STRATEGIES.get(name)
    if target is None:
        from importlib.metadata import entry_points

        for ep in entry_points(group="ctune.strategies"):
            if ep.name == name:
                loaded: type = ep.load()
                return _checked_plugin(name, ep.value, loaded)
        raise UserError(f"unknown strategy '{name}' (allowed: {', '.join(strategy_names())})")
    module_name, _, cls_name = target.partition(":")
    if name in _EXTRAS:
        package, extra = _EXTRAS[name]
        if importlib.util.find_spec(package) is None:
            raise ToolchainError(
                f"strategy {name} needs the optional package '{package}': "
                f"pip install 'ctune[{extra}]'"
            )
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        package = _REQUIRES.get(name, exc.name or "a dependency")
        raise UserError(
            f"strategy {name} needs the '{package}' package (pip install {package}): {exc}"
        ) from None
    cls: type = getattr(module, cls_name)
    return cls


#: what a strategy class must provide (:class:`Strategy`); ``BaseStrategy`` provides them
STRATEGY_METHODS = ("ask", "upcoming", "guess_first_asks", "tell", "state", "load_state")


def _checked_plugin(name: str, where: str, cls: type) -> type:
    """A strategy class from another package, refused in one line where it lacks part of
    the contract (instead of failing mid-search)."""
    missing = [m for m in STRATEGY_METHODS if not callable(getattr(cls, m, None))]
    if missing:
        raise UserError(
            f"strategy '{name}' ({where}) lacks {', '.join(missing)}: subclass "
            "ctune.search.strategy.BaseStrategy, which provides them"
        )
    return cls


def option_table(name: str) -> OptionTable:
    """A strategy's options; built-in tables are read without importing DEAP."""
    from ctune.search.baselines import ExhaustiveStrategy, RandomStrategy
    from ctune.search.evolution import GA_OPTIONS, NSGA2_OPTIONS
    from ctune.search.parzen import PARZEN_OPTIONS
    from ctune.search.staged import STAGED_OPTIONS
    from ctune.search.tpe import TPE_OPTIONS

    builtin = {
        "nsga2": NSGA2_OPTIONS,
        "ga": GA_OPTIONS,
        "staged": STAGED_OPTIONS,
        "parzen": PARZEN_OPTIONS,
        "tpe": TPE_OPTIONS,
        "random": RandomStrategy.OPTIONS,
        "exhaustive": ExhaustiveStrategy.OPTIONS,
    }
    if name in builtin:
        return dict(builtin[name])
    return dict(getattr(strategy_class(name), "OPTIONS", {}))


def make_strategy(
    name: str, context: StrategyContext, options: Mapping[str, Any] | None = None
) -> Strategy:
    """Instantiate a strategy by name; ``auto`` picks by the number of objectives."""
    cls = strategy_class(resolve_name(name, len(context.directions)))
    strategy: Strategy = cls(context, options or {})
    return strategy


def __getattr__(name: str) -> Any:
    # run_search and its types live in driver.py; imported on first use so that
    # `import ctune.search` stays light and free of import cycles.
    if name in ("run_search", "SearchOptions"):
        from ctune.search import driver

        return getattr(driver, name)
    raise AttributeError(name)


__all__ = [
    "STRATEGIES",
    "Compiler",
    "Publisher",
    "SearchOptions",
    "Strategy",
    "make_strategy",
    "option_table",
    "resolve_name",
    "run_search",
    "strategy_class",
    "strategy_names",
]
