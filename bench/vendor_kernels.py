"""Call each row's vendor function once, in an NVTX range named after the row, for a profiler.

What tile, cluster, stages and grid cuBLAS or SDPA picked for a shape says where a tuned
build may still be short of it: run under Nsight Compute, which names each kernel and its
launch, e.g.

    ncu --nvtx --metrics launch__grid_size,launch__cluster_dim_x,launch__cluster_dim_y \\
        python bench/vendor_kernels.py --case gemm:sq4096 --case attention:prefill-s1024-d64

The calls are ``kernels_vs_vendor.VendorTimer``'s (the same inputs and library entry points
as ``vendor_rounds.py`` times), one each after one warm-up call outside the range.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--case", action="append", required=True, help="KERNEL:PROBLEM")
    args = parser.parse_args(argv)

    from kernels_vs_vendor import VendorTimer

    timer = VendorTimer()
    torch = timer.torch
    for case in args.case:
        kernel, problem_name = case.split(":", 1)
        name, launch = timer.launch(kernel, problem_name)
        launch()  # library start-up (heuristics, workspace) outside the range
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_push(case)
        launch()
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
        print(f"{case}: {name}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
