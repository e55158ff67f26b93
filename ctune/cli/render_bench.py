"""Rendering for ``ctune bench``: one candidate's correctness, timing and energy."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text

from ctune.cli.render import console, log_block, report, styled
from ctune.evidence.identity import gpu_label

if TYPE_CHECKING:
    from ctune.measure import SamplingPlan
    from ctune.records import Build, Candidate, Measurement
    from ctune.spec import KernelSpec, Problem


def _ms(value: float) -> str:
    """Milliseconds with µs resolution for small values."""
    if value < 0.1:
        return f"{value * 1000:.2f} µs"
    return f"{value:.4f} ms"


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def _ci(bounds: tuple[float, float]) -> str:
    return f"[{_ms(bounds[0])}, {_ms(bounds[1])}]"


def bench_report(
    spec: KernelSpec,
    problem: Problem,
    candidate: Candidate,
    build: Build,
    measurement: Measurement | None,
    plan: SamplingPlan,
    fmt: str,
    vendor: Measurement | None = None,
) -> None:
    """One report: a table in reading order, or its JSON document; ``vendor``: the spec's
    vendor call measured beside the candidate (``--vendor``)."""
    from dataclasses import asdict

    from ctune.records import to_json

    def document() -> dict[str, object]:
        return {
            "kernel": spec.name,
            "problem": problem.name,
            "candidate": candidate.to_json(),
            "key": candidate.key(),
            "plan": asdict(plan),
            "build": to_json(build),
            "measurement": to_json(measurement) if measurement is not None else None,
            **({"vendor": to_json(vendor)} if vendor is not None else {}),
        }

    def table() -> None:
        _table(spec, problem, candidate, build, measurement)
        if vendor is not None and measurement is not None:
            console.print(_vendor_lines(spec, measurement, vendor))

    report(fmt, document, table)


def _vendor_lines(spec: KernelSpec, m: Measurement, v: Measurement) -> Text:
    """The vendor call's times beside the candidate's, and the vendor over the candidate
    (> 1: the candidate is faster): one process each, so points, not intervals."""
    name = spec.vendor_name
    if not v.outcome.is_ok or v.summary is None:
        return styled((f"vs {name}", "bold"), f" not compared: {v.outcome.value}: {v.error}")
    if m.summary is None:
        return styled((f"vs {name}", "bold"), f" {_ms(v.summary.p50_ms)} p50; nothing to compare")
    vs, ms = v.summary, m.summary
    return styled(
        (f"vs {name}", "bold"),
        f" {_ms(vs.p50_ms)} p50, {_ms(vs.p99_ms)} p99 (rel_l2 {_number(v.rel_l2_error)}): "
        f"{vs.p50_ms / ms.p50_ms:.3f}x p50, {vs.p99_ms / ms.p99_ms:.3f}x p99 "
        "(vendor over candidate, one process each: `ctune search` gives intervals)",
    )


def _table(
    spec: KernelSpec,
    problem: Problem,
    candidate: Candidate,
    build: Build,
    measurement: Measurement | None,
) -> None:
    """Printed line by line in reading order; long because it is that text."""
    from rich.table import Table

    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")
    table.add_row("kernel", f"{spec.name} ({spec.source_path.name}, entry {spec.entry_symbol})")
    table.add_row("problem", problem.name)
    changed = {k: v for k, v in candidate.genes if spec.space.default_values().get(k) != v}
    genes = " ".join(f"{k}={v}" for k, v in changed.items()) or "(default build)"
    table.add_row("candidate", f"{candidate.key()}  {genes}")
    cached = " (cached)" if build.cache_hit else ""
    table.add_row("build", f"{build.outcome.value}{cached}, {build.compile_s:.2f} s")
    if measurement is None:
        console.print(table)
        if build.log_tail:
            log_block("compiler output (tail)", build.log_tail[-1500:])
        return
    m = measurement
    colour = "green" if m.outcome.is_ok else "red"
    table.add_row("outcome", styled((m.outcome.value, colour)))
    if m.device is not None:
        label = gpu_label(m.device)
        table.add_row("device", f"{label}, driver {m.device.driver}  {m.device.uuid}")
    if m.rel_l2_error is not None:
        table.add_row(
            "correctness",
            f"rel_l2 {m.rel_l2_error:.3g}, max_abs {m.max_abs_error:.3g} "
            f"(tolerance {spec.tolerance_for(spec.outputs()[0].name).rel_l2:g} / "
            f"{spec.tolerance_for(spec.outputs()[0].name).max_abs:g})",
        )
    if m.summary is not None:
        s = m.summary
        table.add_row("p50", f"{_ms(s.p50_ms)}  95% CI {_ci(s.p50_ci_ms)}")
        table.add_row("p95", f"{_ms(s.p95_ms)}  95% CI {_ci(s.p95_ci_ms)}")
        table.add_row("p99", f"{_ms(s.p99_ms)}  95% CI {_ci(s.p99_ci_ms)}")
        table.add_row(
            "mean / min / max",
            f"{_ms(s.mean_ms)} / {_ms(s.min_ms)} / {_ms(s.max_ms)}  (stdev {_ms(s.stdev_ms)})",
        )
        table.add_row("samples", f"{s.n} kept, {m.excluded_samples} excluded, warm-up {m.n_warmup}")
    if m.samples_ms or m.summary is not None:
        flush = f", flush {m.l2_flush_bytes / 2**20:.0f} MiB" if m.l2_flush_bytes else ""
        per = f" ({m.launches_per_sample} launches per sample)" if m.launches_per_sample > 1 else ""
        table.add_row("L2", f"{m.l2_policy}{flush}; timing {m.timing_method}{per}")
        clock = f"{m.sm_clock_mhz:.0f} MHz" if m.sm_clock_mhz else "?"
        temp = f", {m.temperature_c:.0f} °C" if m.temperature_c is not None else ""
        capped = ", SW power cap" if m.sw_power_capped else ""
        table.add_row("clock", f"SM {clock}, reasons {m.throttle_reasons:#x}{capped}{temp}")
    if m.energy_j is not None:
        table.add_row(
            "energy",
            f"{m.energy_j * 1e3:.4g} mJ per call, {m.avg_power_w:.1f} W average "
            f"({m.energy_window_s:.2f} s window, {m.energy_launches} launches)",
        )
        table.add_row("energy method", m.energy_method)
    if m.other_processes:
        table.add_row(
            styled(("warning", "yellow")), f"{m.other_processes} other process(es) on the GPU"
        )
    if m.sampling_note:
        table.add_row("sampling", m.sampling_note)
    table.add_row("wall", f"{m.wall_s:.2f} s")
    console.print(table)
    if m.error:
        log_block("evidence" if not m.outcome.is_ok else "note", m.error[-2000:])
