"""What ``--dispatch-vendor`` chooses on finished problem sets: per shape the vendor call's
time beside the best tuned build's (the same cross phase: fresh processes, alternating), and
the cover at several margins, with the kernels each would ship.

Reads only the sets' folders (``matrix.json``, ``winners.json``) and covers them again, as
``ctune search --problem-set SET --dispatch-vendor --dispatch-margin M`` does without a GPU;
writes ``dispatch_vendor-<kernel>-<gpu>.json`` with the GPU and toolchain fingerprint of the
run.

    python bench/dispatch_vendor.py --kernel kernels/gemm.cu --fingerprint FP.json \
        --set t128-fp16=DIR --set t2048-fp16=DIR --out bench/results
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MARGINS = (0.0, 0.01, 0.03)


def summarize(kernel: Path, set_name: str, set_dir: Path) -> dict[str, Any]:
    from ctune.sets.dispatch import greedy_cover
    from ctune.sets.problem_set import finalists, to_matrix
    from ctune.sets.set_layout import MATRIX, VENDOR_BUILD, SetOptions, read_rows
    from ctune.spec import load_spec

    spec = load_spec(kernel.with_suffix(".yaml"))
    problems = [spec.problem(n) for n in spec.problem_sets[set_name]]
    opts = SetOptions(set_name, set_dir, vendor=True)
    rows = read_rows(set_dir / MATRIX)
    matrix = to_matrix(spec, problems, finalists(spec, opts, problems), rows, vendor=True)
    covers = {m: greedy_cover(matrix, m, {VENDOR_BUILD}) for m in MARGINS}
    shapes = []
    for p in problems:
        vendor = matrix.value(p.name, VENDOR_BUILD)
        tuned = [matrix.value(p.name, b) for b in matrix.builds if b != VENDOR_BUILD]
        best = min((v for v in tuned if v is not None), default=None)
        shapes.append(
            {
                "problem": p.name,
                "vendor_ms": vendor,
                "best_tuned_ms": best,
                # above 1: the best tuned build is faster than the vendor call
                "vendor_over_tuned": vendor / best if vendor and best else None,
                "served_by": {f"{m:.0%}": c.assignment.get(p.name) for m, c in covers.items()},
            }
        )
    return {
        "set": set_name,
        "shapes": shapes,
        "covers": {
            f"{m:.0%}": {
                "kernels_shipped": [b for b in c.builds if b != VENDOR_BUILD],
                "shapes_to_vendor": sorted(s for s, b in c.assignment.items() if b == VENDOR_BUILD),
                "max_loss_vs_per_shape_best": c.max_loss,
            }
            for m, c in covers.items()
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--kernel", type=Path, required=True)
    parser.add_argument("--set", action="append", required=True, metavar="NAME=DIR")
    parser.add_argument("--fingerprint", type=Path, required=True, help="the run's machine")
    parser.add_argument("--note", default="", help="what else the record should say")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--command", default="", help="the search command that measured the sets (recorded)"
    )
    args = parser.parse_args(argv)

    from ctune.evidence.identity import gpu_id

    fingerprint = json.loads(args.fingerprint.read_text())
    sets = []
    for item in args.set:
        name, _, folder = item.partition("=")
        sets.append(summarize(args.kernel, name, Path(folder)))
    data = {
        "kernel": args.kernel.stem,
        "command": args.command,
        **({"note": args.note} if args.note else {}),
        "fingerprint": fingerprint,
        "sets": sets,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"dispatch_vendor-{args.kernel.stem}-{gpu_id(fingerprint)}.json"
    path.write_text(json.dumps(data, indent=1) + "\n")
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
