"""bench/own_kernels.py's compile-only part: every kernel, as written, drafted by
`ctune init`, shown by `ctune space` (draft and reviewed sidecar) and compiled."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = [pytest.mark.nvcc, pytest.mark.timeout(900)]

ROOT = Path(__file__).parents[2]


def test_every_kernel_is_drafted_shown_and_compiled_unmodified(
    tmp_path: Path, bench_module
) -> None:
    bench = bench_module("own_kernels")
    assert len(bench.CASES) >= 5
    before = {c.source: (bench.KERNELS_DIR / c.source).read_bytes() for c in bench.CASES}
    assert bench.main(["--set", "own", "--compile-only", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "own_kernels-compile-only.json").read_text())
    assert data["compile_only"] and data["tuned_unmodified"] == 0
    assert data["compiled_unmodified"] == len(bench.CASES)
    records = {r["kernel"]: r for r in data["kernels"]}
    for case in bench.CASES:
        record = records[case.name]
        assert record["draft"]["init"] and record["draft"]["space"], record["draft"]
        assert record["compiled"] and record["source_unchanged"], record
        assert 0 < record["spec_lines"] == data["spec_lines"][case.name]
        assert (bench.KERNELS_DIR / case.source).read_bytes() == before[case.source]
    # C++ names resolved to their symbols; a template instantiated from its genes
    assert records["vecadd"]["entry_symbol"] == "_Z6vecaddPKfS0_Pfi"
    assert records["block_sum"]["entry_symbol"] == "_Z9block_sumILi256ELi1EfEvPKT1_PS0_i"
    assert records["softmax_rows"]["entry_symbol"].startswith("_ZN2nn12softmax_rows")
    assert records["stencil7"]["entry_symbol"] == "stencil7"
    # the Kernel Tuner-style bare macros were found by compiling, as genes
    genes = set(records["stencil7"]["draft"]["draft_genes"])
    assert {"block_size_x", "block_size_y", "block_size_z", "tile_size_z"} <= genes
    # 2-D blocks: TILE_DIM x BLOCK_ROWS up to 64 x 32 threads; the device rules some out
    assert records["transpose_coalesced"]["ruled_out_by_device"] > 0
