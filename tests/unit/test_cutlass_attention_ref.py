"""kernels/cutlass_attention_ref.py: grouped-query and decode shapes through the hand
kernel's reference agree with a per-head softmax written out here."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

KERNELS = Path(__file__).parents[2] / "kernels"


def _reference():
    spec = importlib.util.spec_from_file_location("ref", KERNELS / "cutlass_attention_ref.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.attention


def _per_head(q, k, v, causal: bool) -> np.ndarray:
    group = q.shape[1] // k.shape[1]
    out = np.empty_like(q)
    for b in range(q.shape[0]):
        for h in range(q.shape[1]):
            scores = q[b, h] @ k[b, h // group].T / np.sqrt(q.shape[3])
            if causal:
                scores[np.triu_indices(scores.shape[0], 1, scores.shape[1])] = -np.inf
            p = np.exp(scores - scores.max(axis=1, keepdims=True))
            out[b, h] = (p / p.sum(axis=1, keepdims=True)) @ v[b, h // group]
    return out


@pytest.mark.parametrize(
    ("heads", "kv_heads", "seq", "seq_k", "causal"),
    [(8, 2, 13, 13, True), (8, 2, 13, 13, False), (6, 6, 9, 9, True), (8, 2, 1, 37, False)],
    ids=["gqa-causal", "gqa", "mha-causal", "decode"],
)
def test_matches_per_head_softmax(heads, kv_heads, seq, seq_k, causal) -> None:
    rng = np.random.default_rng(7)
    q = rng.standard_normal((2, heads, seq, 16), dtype=np.float32)
    k = rng.standard_normal((2, kv_heads, seq_k, 16), dtype=np.float32)
    v = rng.standard_normal((2, kv_heads, seq_k, 16), dtype=np.float32)
    dims = {"D": 16, "CAUSAL": int(causal)}
    got = _reference()(np, {"Q": q, "K": k, "V": v}, dims)["O"]
    np.testing.assert_allclose(got, _per_head(q, k, v, causal), rtol=1e-5, atol=1e-5)


def test_causal_needs_as_many_keys_as_queries() -> None:
    q = np.zeros((1, 2, 3, 16), np.float32)
    kv = np.zeros((1, 1, 5, 16), np.float32)
    with pytest.raises(ValueError, match="S == SK"):
        _reference()(np, {"Q": q, "K": kv, "V": kv}, {"D": 16, "CAUSAL": 1})
