"""Reference for kernels/attention.cu (CUTLASS FMHA): kernels/attention_ref.py per KV-head group.

Q arrives as [B, H, S, D] and K, V as [B, HKV, SK, D] (float32 copies of the kernel's
inputs); query head h reads KV head h // (H // HKV). Each group's query heads go through the
hand kernel's reference with its K and V broadcast (a view, not H / HKV copies: a decode
problem's K is 128 MiB in float32). SK may differ from S when CAUSAL is 0 (decode).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any


def _hand_reference() -> Any:
    """attention_ref.attention, loaded by path: this file is imported by path, not package."""
    path = Path(__file__).with_name("attention_ref.py")
    spec = importlib.util.spec_from_file_location("ctune_kernels_attention_ref", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.attention


def attention(xp: Any, inputs: dict[str, Any], dims: dict[str, int]) -> dict[str, Any]:
    q, k, v = inputs["Q"], inputs["K"], inputs["V"]
    n_batch, n_head, seq, head_dim = q.shape
    n_kv, seq_k = k.shape[1], k.shape[2]
    if dims["CAUSAL"] == 1 and seq != seq_k:
        raise ValueError(f"causal attention needs S == SK (S={seq}, SK={seq_k})")
    group = n_head // n_kv
    hand = _hand_reference()
    out = xp.empty(q.shape, dtype=xp.float32)
    shape = (n_batch, group, seq_k, head_dim)
    for kv in range(n_kv):
        heads = slice(kv * group, (kv + 1) * group)
        part = hand(
            xp,
            {
                "Q": q[:, heads],
                "K": xp.broadcast_to(k[:, kv : kv + 1], shape),
                "V": xp.broadcast_to(v[:, kv : kv + 1], shape),
            },
            dims,
        )
        out[:, heads] = part["O"]
    return {"O": out}
