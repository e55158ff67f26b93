"""The README's numbers are the committed results' numbers, and it stays a short page.

Every ratio written as ``1.031x`` outside a transcript must be listed in ``CLAIMS`` with the
committed result it comes from, so a re-run benchmark or an edited README that disagree
fail here instead of drifting apart."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
README = ROOT / "README.md"
VENDOR = "bench/results/kernels_vs_vendor-sm90-nvidia-h200.json"

#: README text around a ratio -> (result file, target name) it is read from
CLAIMS: dict[str, tuple[str, str]] = {
    "x cuBLAS, geomean of 82 LLM shapes": (VENDOR, "tuned CUTLASS vs cuBLAS, geomean"),
    "x cuBLAS in the main job's row": (
        VENDOR,
        "the main job (CUTLASS GEMM at 4096^3) vs cuBLAS (cupy.matmul), p50",
    ),
    "x PyTorch SDPA, geomean of the prefill problems": (
        VENDOR,
        "tuned CUTLASS attention vs SDPA, geomean over prefill",
    ),
    "x cuBLAS at 4096^3": (VENDOR, "hand-written GEMM vs cuBLAS at 4096^3"),
}
#: README text around a ratio -> a ``bench/vendor_rounds.py`` result: the geometric mean,
#: over its cases, of vendor over ctune at p99 (each case's own geomean over its rounds)
ROUND_CLAIMS: dict[str, str] = {
    "x SDPA (p99, with": "bench/results/vendor_rounds-hand-attention-acf-sm90-nvidia-h200.json",
}
RATIO = re.compile(r"(\d+\.\d+)(x[^\n]*)")
TRANSCRIPT = re.compile(r"<!-- regen[^>]*-->\n```text\n.*?```", re.S)


def _prose() -> str:
    """The README without its transcripts (real output, checked by docs/regen.py)."""
    return TRANSCRIPT.sub("", README.read_text())


def _target(file: str, name: str) -> float:
    targets = json.loads((ROOT / file).read_text())["targets"]
    return next(float(t["value"]) for t in targets if t["target"] == name)


def _written(context: str) -> str:
    """The one ratio the README writes before ``context``."""
    written = [value for value, rest in RATIO.findall(_prose()) if rest.startswith(context)]
    assert len(written) == 1, f"README: {context!r} should follow exactly one ratio"
    return written[0]


@pytest.mark.parametrize("context", list(CLAIMS))
def test_each_claimed_ratio_is_the_committed_result(context: str) -> None:
    file, name = CLAIMS[context]
    written = _written(context)
    assert f"{_target(file, name):.3f}" == written, f"README {written}x vs {file}"


def _rounds_geomean(file: str) -> float:
    cases = json.loads((ROOT / file).read_text())["cases"]
    logs = [math.log(c["vendor_over_ctune_p99"]["geomean"]) for c in cases]
    return math.exp(sum(logs) / len(logs))


@pytest.mark.parametrize("context", list(ROUND_CLAIMS))
def test_each_ratio_from_vendor_rounds_is_the_committed_result(context: str) -> None:
    file = ROUND_CLAIMS[context]
    written = _written(context)
    assert f"{_rounds_geomean(file):.3f}" == written, f"README {written}x vs {file}"


def test_every_ratio_in_the_readme_is_a_checked_claim() -> None:
    unchecked = [
        value + rest[:40]
        for value, rest in RATIO.findall(_prose())
        if not any(rest.startswith(context) for context in (*CLAIMS, *ROUND_CLAIMS))
    ]
    assert not unchecked, f"ratios with no committed source in CLAIMS: {unchecked}"


def test_the_readme_is_a_short_page_with_the_two_setup_commands() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= 120
    assert 'pip install -e ".[cuda13]" && ctune search kernels/gemm.cu --objective p99' in text
    assert 'pip install -e ".[dev]" && make test' in text


def test_every_local_link_in_the_readme_resolves() -> None:
    links = re.findall(r"\]\(([^)#]+)\)", README.read_text())
    missing = [link for link in links if "://" not in link and not (ROOT / link).exists()]
    assert not missing, f"README links to files that do not exist: {missing}"
