"""Write bench/results/dispatch/<kernel>-<set>.h again from each set's committed table
(bench/results/dispatch-<kernel>-<set>-<gpu>.json), its entries' ranges worked out from
today's spec (tables written before entries recorded them).

    python bench/dispatch_headers.py
"""

from __future__ import annotations

import json
from pathlib import Path

from ctune.sets.dispatch_table import from_json, header, with_bounds
from ctune.spec import load_spec

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
#: the GPU whose table a header ships, where a set ran on several
GPU = "sm90-nvidia-h200"


def source_of(path: Path) -> Path:
    """The table a header is written from, named by the header's file name."""
    kernel, _, set_name = path.stem.removeprefix("cutlass_").partition("-")
    return RESULTS / f"dispatch-{kernel}-{set_name}-{GPU}.json"


def render(path: Path) -> str:
    """The header's text from its set's table and today's spec."""
    data = json.loads(source_of(path).read_text())
    kernel, set_name = str(data["kernel"]), str(data["problem_set"])
    table = from_json(with_bounds(data, load_spec(ROOT / "kernels" / f"{kernel}.yaml")))
    origin = f"the problem-set search {set_name} of {kernel}"
    device = data.get("device") or ""
    return header(table, origin + (f" on {device}" if device else ""), set_name)


def regenerate(path: Path) -> Path:
    """One header written again; the table it came from."""
    path.write_text(render(path))
    return source_of(path)


def main() -> None:
    for path in sorted((RESULTS / "dispatch").glob("*.h")):
        print(f"{path.relative_to(ROOT)} <- {regenerate(path).relative_to(ROOT)}")


if __name__ == "__main__":
    main()
