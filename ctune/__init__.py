"""ctune: search nvcc/ptxas flags, launch configurations and template parameters
for a CUDA kernel, measure every candidate honestly on the GPU, and keep the
Pareto-best ones as versioned, reviewable artifacts.

Importing ctune imports nothing heavy (no cupy, pynvml, deap or git) and probes nothing.
"""

from ctune.errors import CtuneError, RegistryError, ToolchainError, UserError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without loading typing (read by type checkers)
if TYPE_CHECKING:
    from ctune.records import Build, Candidate, Measurement, Outcome, Trial

__version__ = "0.1.0"

#: the records, loaded on first use: the ``ctune`` program imports this package before it
#: can take a Ctrl-C (``ctune/__main__.py``), so it holds nothing that takes time to load
_RECORDS = ("Build", "Candidate", "Measurement", "Outcome", "Trial")


def __getattr__(name: str) -> object:
    # run_search pulls in the search driver, tune and load_artifact the API module;
    # resolve them on first use so that a bare `import ctune` stays light
    # (tests/unit/test_import_light.py).
    if name in _RECORDS:
        from ctune import records

        return getattr(records, name)
    if name == "run_search":
        from ctune.search.driver import run_search

        return run_search
    if name in ("tune", "load_artifact", "TuneResult", "write_spec"):
        from ctune import api

        return getattr(api, name)
    raise AttributeError(f"module 'ctune' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The loaded names and the lazy ones above (``__all__``), as tab completion and
    ``help(ctune)`` expect, without loading them."""
    return sorted(set(globals()) | set(__all__))


__all__ = [
    "Build",
    "Candidate",
    "CtuneError",
    "Measurement",
    "Outcome",
    "RegistryError",
    "ToolchainError",
    "Trial",
    "TuneResult",
    "UserError",
    "__version__",
    "load_artifact",
    "run_search",
    "tune",
    "write_spec",
]
