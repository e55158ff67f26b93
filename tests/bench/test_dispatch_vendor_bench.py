"""bench/dispatch_vendor.py on the committed H200 sets: the margin-0 cover is the table the
search wrote, the vendor call serves exactly the shapes it was fastest on, and a wider
margin ships no more kernels."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).parents[2]
SETS = ROOT / "bench" / "results" / "dispatch-vendor"


CASES = [
    ("gemm", "t128-fp16"),
    ("gemm", "t2048-fp16"),
    ("attention", "prefill-noncausal"),
    ("attention", "prefill-causal"),
]


@pytest.mark.parametrize(("kernel", "set_name"), CASES)
def test_the_summary_agrees_with_the_table_the_search_wrote(
    bench_module: Callable[[str], ModuleType], kernel: str, set_name: str
) -> None:
    bench = bench_module("dispatch_vendor")
    folder = SETS / f"{kernel}-{set_name}"
    summary = bench.summarize(ROOT / "kernels" / f"{kernel}.cu", set_name, folder)
    table = json.loads((folder / "dispatch.json").read_text())
    written = {s["problem"]: s["build"] for s in table["shapes"]}
    assert {s["problem"]: s["served_by"]["0%"] for s in summary["shapes"]} == written
    for shape in summary["shapes"]:
        vendor_fastest = shape["vendor_ms"] <= shape["best_tuned_ms"]
        assert (shape["served_by"]["0%"] == "vendor") is vendor_fastest, shape
    shipped = [len(summary["covers"][m]["kernels_shipped"]) for m in ("0%", "1%", "3%")]
    assert shipped == sorted(shipped, reverse=True)
    assert summary["covers"]["0%"]["max_loss_vs_per_shape_best"] == 0.0


@pytest.mark.parametrize("kernel", ["gemm", "attention"])
def test_the_committed_summary_is_the_one_the_script_writes(
    bench_module: Callable[[str], ModuleType], tmp_path: Path, kernel: str
) -> None:
    bench = bench_module("dispatch_vendor")
    path = ROOT / "bench" / "results" / f"dispatch_vendor-{kernel}-sm90-nvidia-h200.json"
    committed = json.loads(path.read_text())
    args = ["--kernel", str(ROOT / "kernels" / f"{kernel}.cu"), "--out", str(tmp_path)]
    args += ["--fingerprint", str(SETS / "fingerprint.json"), "--command", committed["command"]]
    args += ["--note", committed.get("note", "")]
    for s in committed["sets"]:
        args += ["--set", f"{s['set']}={SETS / (kernel + '-' + s['set'])}"]
    assert bench.main(args) == 0
    (written,) = tmp_path.iterdir()
    assert json.loads(written.read_text()) == committed
