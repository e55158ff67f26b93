"""``ctune search --problem-set``: parse the set's options, run a step, report where it stands.

The logic is ``ctune.sets.problem_set``; this only refuses options that name one problem's
files (the set keeps one per shape in its folder), owns the measurer for the whole set, and
prints the outcome.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctune.errors import UserError
from ctune.measure import Measurer
from ctune.search.options import WARM_START_SHARE, share_of_budget

if TYPE_CHECKING:
    from concurrent.futures import Future

    from ctune.config import Settings
    from ctune.objective.spec import ObjectiveSpec
    from ctune.records import Measurement
    from ctune.search.driver import SearchOptions
    from ctune.sets.problem_set import SetProgress
    from ctune.spec import KernelSpec


@dataclass(frozen=True)
class SetArgs:
    name: str
    set_dir: Path | None
    margin: str
    step_s: float | None  # --step-time, parsed (cli.options.parse_duration)
    cross_processes: int
    reuse_share: float = WARM_START_SHARE
    shipped: tuple[Path, ...] = ()  # dispatch tables whose builds the cover takes first
    vendor: bool = False  # the spec's vendor call as a column the cover may choose


class LazyMeasurer(Measurer):
    """The GPU measurer, started on first use: re-covering a finished set with another
    --dispatch-margin reads only files and needs no GPU. Its device name is "" until then."""

    def __init__(self, cfg: Settings) -> None:
        self.cfg = cfg
        self.real: Measurer | None = None

    def _started(self) -> Measurer:
        if self.real is None:
            from ctune.search.session import default_measurer

            self.real = default_measurer(self.cfg)
        return self.real

    @property
    def device_name(self) -> str | None:  # type: ignore[override]
        return "" if self.real is None else self.real.device_name

    @property
    def capabilities(self) -> frozenset[str] | None:  # type: ignore[override]
        return self._started().capabilities

    @property
    def slots(self) -> int:  # type: ignore[override]
        return self._started().slots

    @property
    def baseline_s(self) -> float | None:
        return self._started().baseline_s

    def set_baseline(self, seconds: float | None) -> None:
        self._started().set_baseline(seconds)

    def measure(self, *args: Any, **kwargs: Any) -> Measurement:
        return self._started().measure(*args, **kwargs)

    def remeasure(self, *args: Any, **kwargs: Any) -> dict[str, list[Measurement]]:
        return self._started().remeasure(*args, **kwargs)

    def start(self, *args: Any, **kwargs: Any) -> Future[Measurement]:
        return self._started().start(*args, **kwargs)

    def forget(self) -> None:
        self._started().forget()

    def prestart(self, count: int, wait: bool = True) -> None:
        self._started().prestart(count, wait)

    def set_up_ahead(self, *args: Any, **kwargs: Any) -> None:
        self._started().set_up_ahead(*args, **kwargs)

    def fingerprint_fields(self) -> dict[str, str] | None:
        return self._started().fingerprint_fields()

    def close(self) -> None:
        if self.real is not None:
            self.real.close()


def run_set(
    cfg: Settings,
    spec: KernelSpec,
    objective: ObjectiveSpec,
    search: SearchOptions,
    args: SetArgs,
    given: dict[str, Any],
    compiler: Any,
    measurer: Any,
    fmt: str,
) -> None:
    from ctune.cli import render_search
    from ctune.registry.assemble import ResultPublisher
    from ctune.search.pruning import parse_margin
    from ctune.sets.dispatch_table import shipped_builds
    from ctune.sets.problem_set import run_problem_set
    from ctune.sets.set_layout import SetOptions

    owned = [compiler, measurer]
    try:
        clash = [name for name, value in given.items() if value is not None]
        if clash:
            raise UserError(
                f"--problem-set with {clash[0]}: a set keeps one journal and result file per "
                "shape in its folder (--set-dir); leave it out"
            )
        if search.warm_start_share != WARM_START_SHARE:  # the set sets it per shape
            raise UserError(
                "--warm-start-share does not apply to --problem-set: use --reuse-share (the "
                "share of each shape's budget for its group's earlier builds and --warm-start)"
            )
        if args.cross_processes < 1:
            raise UserError("--cross-processes must be 1 or more")
        share_of_budget(args.reuse_share, "--reuse-share")
        opts = SetOptions(
            set_name=args.name,
            set_dir=args.set_dir or Path(cfg.cache_dir) / "sets" / f"{spec.name}-{args.name}",
            margin=parse_margin(args.margin),
            step_s=args.step_s,
            cross_processes=args.cross_processes,
            reuse_share=args.reuse_share,
            shipped=shipped_builds(args.shipped, spec),
            vendor=args.vendor,
        )
        if measurer is None and objective.measures:
            measurer = LazyMeasurer(cfg)
            owned.append(measurer)
        display = render_search.SearchDisplay(fmt)
        with display:
            progress = run_problem_set(
                cfg,
                spec,
                objective,
                search,
                opts,
                compiler=compiler,
                measurer=measurer,
                on_event=display.handle,
                publish_for=lambda out: ResultPublisher(cfg.registry, Path(cfg.cache_dir), out),
            )
    finally:
        for part in owned:
            if part is not None:
                part.close()
    report(progress, fmt)


def report(progress: SetProgress, fmt: str) -> None:
    from ctune.cli import render

    render.report(fmt, progress.to_json, lambda: _table(progress))


def _table(progress: SetProgress) -> None:
    from ctune.cli.render import line
    from ctune.sets.set_layout import VENDOR_BUILD

    total = len(progress.searched) + len(progress.pending)
    line(
        ("problem set", "bold"), f" {progress.set_name}: {len(progress.searched)}/{total} searched"
    )
    if progress.pending:
        line(f"not searched yet: {', '.join(progress.pending)}")
    elif progress.missing_cells > 0:
        line(f"cross-measurement: {progress.missing_cells} finalist x shape cells to go")
    cover = progress.cover
    if cover is not None:
        vendor = VENDOR_BUILD in cover.builds
        kernels = len(cover.builds) - vendor
        who = f"{kernels} builds{' and the vendor call' if vendor else ''} cover"
        if vendor and not kernels:
            who = "the vendor call alone covers"
        line(
            ("dispatch", "bold"),
            f" {who} {len(cover.assignment)} shapes within "
            f"{cover.margin:.1%} (worst loss {cover.max_loss:.2%}): {progress.table}, "
            f"{progress.header}",
        )
        for build in cover.builds:
            shapes = sorted(s for s, b in cover.assignment.items() if b == build)
            if build == VENDOR_BUILD:
                shipped = " (the library call, no kernel to ship)"
            else:
                shipped = " (shipped already)" if build in cover.shipped else ""
            line(f"  {build}{shipped}: {', '.join(shapes)}")
    else:
        line(
            ("incomplete", "yellow"), f": run the same command again (state in {progress.set_dir})"
        )
    for note in progress.notes:
        line(("note", "yellow"), f" {note}")
