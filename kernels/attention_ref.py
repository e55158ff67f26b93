"""Reference for kernels/hand_attention.cu: O = softmax(Q K^T / sqrt(D)) V in float32.

kernels/attention.cu's reference (cutlass_attention_ref.py) applies it per KV-head group.

Q, K, V arrive as float32 copies of the kernel's inputs, shaped [B, H, S, D].
dims["D"] is the head dim and dims["CAUSAL"] == 1 masks keys after the query.
"""

from __future__ import annotations

import math
from typing import Any


def attention(xp: Any, inputs: dict[str, Any], dims: dict[str, int]) -> dict[str, Any]:
    q, k, v = inputs["Q"], inputs["K"], inputs["V"]
    n_batch, n_head, seq, _ = q.shape
    scale = 1.0 / math.sqrt(dims["D"])
    above_diagonal = xp.triu(xp.ones((seq, seq), dtype=bool), k=1) if dims["CAUSAL"] == 1 else None
    out = xp.empty(q.shape, dtype=xp.float32)
    # One (batch, head) at a time: the whole [B, H, S, S] score tensor would be
    # 8 GiB at S = 8192, H = 32; one head's is 256 MiB.
    for b in range(n_batch):
        for h in range(n_head):
            scores = (q[b, h] @ k[b, h].T) * xp.float32(scale)
            if above_diagonal is not None:
                scores[above_diagonal] = -xp.inf
            scores -= scores.max(axis=1, keepdims=True)
            xp.exp(scores, out=scores)
            out[b, h] = (scores @ v[b, h]) / scores.sum(axis=1, keepdims=True)
    return {"O": out}
