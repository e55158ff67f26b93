"""Why saxpy 1M timed with single launches is bimodal across processes: an experiment.

The A/A benchmark found the medians of saxpy 1M (events timing, cold L2) in two
clusters across fresh processes (about 8.2 and 8.8 µs) at the same SM clock. Two
suspects differ between processes: where the buffers land in device memory, and
the clocks. This holds the process, the clocks and the kernel fixed and varies
only the placement of x and y (a padding allocation of a different size before
them), measuring each placement twice (is a placement's time stable?) and one
placement several times (the control). If the medians split by placement and
repeat within it, placement explains the bimodality.

Writes ``bench/results/saxpy_placement-<gpu_id>.json`` with every placement's
addresses and medians and the spread within and between placements.

    python bench/saxpy_placement.py [--placements 16] [--out bench/results]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ctune.compile.nvcc import NvccCompiler  # noqa: E402
from ctune.compile.toolchain import probe_toolchain  # noqa: E402
from ctune.config import resolve  # noqa: E402
from ctune.evidence.identity import gpu_id  # noqa: E402
from ctune.measure import SamplingPlan  # noqa: E402
from ctune.spec import load_spec  # noqa: E402

MIB = 1 << 20


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--placements", type=int, default=16)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args()

    import cupy as cp

    from ctune.measure.arrays import make_buffers
    from ctune.measure.cupy_events import EventTimer, Helpers
    from ctune.measure.device import Telemetry, probe_device_info
    from ctune.measure.launch import load_candidate

    settings = resolve()
    toolchain = probe_toolchain(settings.nvcc)
    spec = load_spec(ROOT / "tests/data/kernels/saxpy.yaml", toolchain.help_text)
    problem = spec.problem("n1m")
    candidate = spec.default_candidate()
    with NvccCompiler(spec, toolchain, settings.cache_dir) as compiler:
        build = compiler.build(candidate, problem)
    assert build.outcome.is_ok and build.binary_path, build.log_tail

    cp.cuda.Device(0).use()
    stream = cp.cuda.Stream(non_blocking=True)
    stream.use()
    telemetry = Telemetry.open(str(cp.cuda.runtime.deviceGetPCIBusId(0)), 0)
    info = probe_device_info(cp, 0, telemetry)
    timer = EventTimer(cp, stream, Helpers(cp), info.l2_bytes, telemetry)
    smem = int(
        cp.cuda.runtime.deviceGetAttribute(
            cp.cuda.runtime.cudaDevAttrMaxSharedMemoryPerBlockOptin, 0
        )
    )
    launch = load_candidate(cp, spec, candidate.as_dict(), problem, build.binary_path, smem)
    plan = SamplingPlan(quantile=0.99, min_samples=1000, max_samples=1000, timing="events")

    def median_of(buffers: Any) -> tuple[float, float | None]:
        timing = timer.measure(launch.bind(buffers, stream), plan)
        return statistics.median(timing.samples_ms), timing.sm_clock_mhz

    rows = []
    keep = []  # padding stays allocated, so each placement lands somewhere new
    for index in range(args.placements):
        pad = cp.empty((index * 7 + 3) * MIB // 4 + index * 4096, dtype=cp.uint8)
        keep.append(pad)
        buffers = make_buffers(cp, spec, problem, seed=11)
        x, y = buffers.arrays["x"].data.ptr, buffers.arrays["y"].data.ptr
        first, clock = median_of(buffers)
        second, _ = median_of(buffers)
        rows.append(
            {
                "placement": index,
                "x_ptr": hex(x),
                "y_ptr": hex(y),
                "x_offset_in_2mib": x % (2 * MIB),
                "y_minus_x": y - x,
                "median_us": [round(first * 1e3, 3), round(second * 1e3, 3)],
                "sm_clock_mhz": clock,
            }
        )
        keep.append(buffers)
        print(rows[-1], flush=True)
    control_buffers = make_buffers(cp, spec, problem, seed=11)
    control = [round(median_of(control_buffers)[0] * 1e3, 3) for _ in range(6)]

    firsts = [r["median_us"][0] for r in rows]
    within = [abs(r["median_us"][0] - r["median_us"][1]) for r in rows]
    result = {
        "benchmark": "saxpy_placement",
        "gpu": info.name,
        "driver": info.driver,
        "nvcc": toolchain.describe(),
        "timing": "events, l2_policy cold, n=1000 per median",
        "placements": rows,
        "control_same_buffers_us": control,
        "between_placements_us": {"min": min(firsts), "max": max(firsts)},
        "within_placement_max_diff_us": max(within),
        "control_spread_us": max(control) - min(control),
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"saxpy_placement-{gpu_id(info)}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(
        f"between placements {min(firsts):.2f}..{max(firsts):.2f} us; within a placement "
        f"<= {max(within):.2f} us; control (same buffers x6) spread "
        f"{result['control_spread_us']:.2f} us -> {path}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
