"""Re-tune stale artifacts: the search that made each one, run again.

``ctune check`` says *that* an artifact is stale; a release engineer then wants
the same search again on the current sources, toolchain and GPU, not to
reconstruct it from memory. An artifact records everything that search took:
the kernel and problem, the objectives and constraints (``extensions
.objective_spec``), the strategy, seed and budget (``provenance``), the strategy's
options, time budget, patience and filling (``extensions.search.plan``), and the
arch and L2 policy it was built and timed with (``fingerprint``). This module
turns that back into a ``ctune search ... --commit`` command line; the CLI
prints it, or runs it in-process as that same command, so the re-tune shows the
search's own live progress and commits through the same path as any search.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ctune.errors import RegistryError
from ctune.registry.extensions import RecordedSearch, recorded_search
from ctune.registry.layout import ArtifactKey
from ctune.registry.schema import Artifact


@dataclass(frozen=True, slots=True)
class Retune:
    key: ArtifactKey
    argv: tuple[str, ...]  # the ctune arguments (after the program name)
    env: tuple[tuple[str, str], ...] = ()  # settings the search needs, e.g. CTUNE_REGISTRY

    def command(self) -> str:
        import shlex

        prefix = "".join(f"{k}={shlex.quote(v)} " for k, v in self.env)
        return f"{prefix}ctune {shlex.join(self.argv)}"


def search_argv(
    artifact: Artifact,
    kernels_dir: Path,
    budget: int | None = None,
    out_dir: Path | None = None,
    *,
    where: str | None = None,
) -> tuple[str, ...]:
    """The ``ctune search`` arguments that reproduce ``artifact``'s search: committing, or
    writing a result file into ``out_dir`` for ``ctune registry import`` (a machine without
    the registry's git history, such as a GPU runner that gets a copy of the tree).

    A malformed record of the search (``where``: its file, for the message) is a
    RegistryError: a command line guessed from it would run another search."""
    where = where or f"{artifact.kernel}/{artifact.problem}/{artifact.device_class}"
    recorded = recorded_search(artifact, where)
    source = Path(kernels_dir) / f"{artifact.kernel}.cu"
    objectives = recorded.objectives or tuple(o.name for o in artifact.objectives)
    if not objectives:
        raise RegistryError(f"{where}: no objectives recorded")
    argv = ["search", str(source), "--problem", artifact.problem]
    for text in objectives:
        argv += ["--objective", text]
    for text in recorded.constraints:
        argv += ["--constraint", text]
    provenance = artifact.provenance
    if provenance.get("strategy"):
        argv += ["--strategy", str(provenance["strategy"])]
    if provenance.get("seed") is not None:
        argv += ["--seed", str(provenance["seed"])]
    evaluations = budget or provenance.get("budget") or provenance.get("evaluations")
    if evaluations:
        argv += ["--budget", str(evaluations)]
    argv += _plan_flags(recorded)
    for option, field in (("--arch", "arch"), ("--l2-policy", "l2_policy")):
        if artifact.fingerprint.get(field):
            argv += [option, artifact.fingerprint[field]]
    if out_dir is not None:
        return (*argv, "--out", str(Path(out_dir) / f"{artifact.kernel}-{artifact.problem}.json"))
    return (*argv, "--commit")


def _plan_flags(recorded: RecordedSearch) -> list[str]:
    """What else shaped the search (``search/plan.py``): strategy options, time, patience,
    filling, the cost model; artifacts written before the plan was recorded have none of it."""
    flags: list[str] = []
    for name, value in recorded.options:
        flags += ["--option", f"{name}={value}"]
    if recorded.time_s is not None:
        flags += ["--time", f"{recorded.time_s:g}"]
    if recorded.patience is not None:
        flags += ["--patience", str(recorded.patience)]
    if recorded.fill is False:
        flags.append("--no-fill")
    if recorded.cost_model is not None:
        flags += ["--cost-model", "on" if recorded.cost_model else "off"]
    return flags


__all__ = ["Retune", "search_argv"]
