"""bench/ptxas_relink.py on a small launcher kernel with the real nvcc: the relinked
library carries exactly the SASS of the whole nvcc run with the same ptxas option."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).parents[2]

LAUNCHER = r"""
__global__ void scale(float *x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    for (; i < n; i += gridDim.x * blockDim.x) x[i] = a * x[i] + __sinf(x[i]);
}
extern "C" int launch(float *x, float a, int n) {
    scale<<<(n + 255) / 256, 256>>>(x, a, n);
    return (int)cudaGetLastError();
}
"""


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ptxas_relink", ROOT / "bench/ptxas_relink.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("ptxas_relink", module)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_a_relinked_variant_has_the_sass_of_the_whole_build(tmp_path: Path) -> None:
    source = tmp_path / "src" / "scale.cu"
    source.parent.mkdir()
    source.write_text(LAUNCHER)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    argv = [
        "nvcc", "--generate-code=arch=compute_90a,code=sm_90a", "-shared", "-Xcompiler",
        "-fPIC", "--no-compress", "-Xptxas", "-v", "-o", "kernel.so", str(source),
    ]  # fmt: skip
    row = _bench().relink_argv(argv, "-O0", scratch)
    assert row["option_changes_sass"], row["sass_digest"]  # else the test proves nothing
    assert row["variant_same_sass_as_reference"], row["sass_digest"]
    assert row["variant_loads"]


def test_the_fatbin_object_exports_its_data_hidden() -> None:
    bench = _bench()
    text = (
        'asm(\n".section .nv_fatbin, \\"a\\"\\n"\n".align 8\\n"\n"fatbinData:\\n"\n'
        '".quad 0x1\\n"\n".text\\n");\nextern const unsigned long long fatbinData[1];\n'
    )
    block, rest = bench.split_fatbin(text)
    assert "fatbinData:" in block and "asm(" not in rest
    source = bench.fatbin_object_source(block)
    assert source.index(".globl fatbinData") < source.index(".hidden fatbinData")
    assert source.index(".hidden fatbinData") < source.index('"fatbinData:')
    assert 'visibility("hidden")' in bench.host_side(rest)
