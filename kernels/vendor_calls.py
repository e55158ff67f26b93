"""The library calls the kernels here would replace, for the specs' ``vendor`` key: cuBLAS
for the GEMMs, PyTorch's SDPA for the attentions. Each runs on the kernel's own buffers and
on CuPy's current stream (docs/spec-format.md, "vendor")."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def _torch_on_current_stream(xp: Any) -> tuple[Any, Any]:
    """PyTorch, and CuPy's current stream (and device) as a PyTorch stream."""
    import torch

    stream = torch.cuda.ExternalStream(
        xp.cuda.get_current_stream().ptr, device=torch.device("cuda", xp.cuda.Device().id)
    )
    return torch, stream


def _as_torch(torch: Any, array: Any, dtype: str) -> Any:
    """A buffer as a tensor of its spec dtype (a bfloat16 buffer's storage is uint16)."""
    tensor = torch.from_dlpack(array)
    return tensor.view(torch.bfloat16) if dtype == "bfloat16" else tensor


def cublas_gemm(
    xp: Any, arrays: dict[str, Any], dims: dict[str, int], dtypes: dict[str, str]
) -> Callable[[], None]:
    """C = A @ B^T (B is [N, K]) by cuBLAS: CuPy's matmul in fp16; PyTorch's in bf16,
    which CuPy's matmul does not take."""
    a, b, c = arrays["A"], arrays["B"], arrays["C"]
    if dtypes["C"] == "float16":
        return lambda: xp.matmul(a, b.T, out=c)
    torch, stream = _torch_on_current_stream(xp)
    ta, tb, tc = (_as_torch(torch, x, dtypes[n]) for x, n in ((a, "A"), (b, "B"), (c, "C")))

    def call() -> None:
        with torch.cuda.stream(stream):
            torch.matmul(ta, tb.t(), out=tc)

    return call


def sdpa(
    xp: Any, arrays: dict[str, Any], dims: dict[str, int], dtypes: dict[str, str]
) -> Callable[[], dict[str, Any]]:
    """PyTorch's scaled_dot_product_attention (cuDNN or flash on Hopper) with the kernel's
    causal flag and, where K and V have fewer heads, grouped-query attention. SDPA writes a
    tensor of its own, so the call returns it: the check reads it, the timing does not copy
    it."""
    torch, stream = _torch_on_current_stream(xp)
    fn = torch.nn.functional.scaled_dot_product_attention
    q, k, v = (_as_torch(torch, arrays[n], dtypes[n]) for n in ("Q", "K", "V"))
    causal = bool(dims.get("CAUSAL", 0))
    grouped = {"enable_gqa": True} if k.shape[1] != q.shape[1] else {}
    bits = dtypes["O"] == "bfloat16"

    def call() -> dict[str, Any]:
        with torch.cuda.stream(stream):
            out = fn(q, k, v, is_causal=causal, **grouped)
        return {"O": out.view(torch.uint16) if bits else out}

    return call
