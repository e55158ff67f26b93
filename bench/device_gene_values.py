"""What ``--device-genes`` would offer on this GPU, read only: nothing is ever set.

The lent GPU machines must never have their clocks or power limit changed, so
this script reads NVML through a proxy that raises on any setter or reset: it
checks, on a real driver, the calls ctune's device genes read (supported
graphics clocks at the top memory clock, the power-limit range and default,
MIG mode, other compute processes) and the gene values ctune derives from
them. The permission probe (which writes the current values back) is NOT run.

Writes bench/results/device_gene_values-<gpu>.json with the machine's fingerprint.
Usage: python bench/device_gene_values.py [--device N] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


class ReadOnlyNvml:
    """pynvml with every call that changes the device refused."""

    def __init__(self, lib: Any) -> None:
        self._lib = lib

    def __getattr__(self, name: str) -> Any:
        if name.startswith(("nvmlDeviceSet", "nvmlDeviceReset")):
            raise RuntimeError(f"{name}: this benchmark never changes the GPU")
        return getattr(self._lib, name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--nvml", default="pynvml", help="NVML library (tests: the stand-in)")
    args = parser.parse_args(argv)
    from ctune.errors import CtuneError
    from ctune.evidence.identity import gpu_id, probe_gpu_machine
    from ctune.identity_probe import probe_toolchain
    from ctune.measure.device_genes import device_genes
    from ctune.measure.device_settings import NvmlDevice, load_nvml

    try:
        device = NvmlDevice(ReadOnlyNvml(load_nvml(args.nvml)), args.device)
    except CtuneError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 3
    try:
        limits = device.limits()
        observed = {
            "mig_enabled": device.mig_enabled(),
            "compute_processes": device.compute_processes(),
            "power_limit_w": device.power_limit_mw() / 1000.0,
            "sm_clock_mhz": device.sm_clock_mhz(),
        }
    finally:
        device.close()
    genes = device_genes(("clocks", "power_limit"), limits)
    gpu = probe_gpu_machine()
    result = {
        "benchmark": "device_gene_values",
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "fingerprint": {**(gpu or {}), **probe_toolchain()},
        "supported_sm_clocks_mhz": list(limits.sm_clocks_mhz),
        "power_range_w": [limits.power_min_w, limits.power_max_w],
        "power_default_w": limits.power_default_w,
        "observed": observed,
        "genes": {g.name: list(g.values) for g in genes},
        "note": "read only: no clock or power limit was set, reset or probed",
    }
    out = args.out / f"device_gene_values-{gpu_id(gpu)}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: result[k] for k in ("genes", "observed")}, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
