"""attnlib against PyTorch's multi-head attention (skipped when torch is not installed)."""
import numpy as np
import pytest

import attnlib

torch = pytest.importorskip("torch", reason="torch is optional: pip install torch==2.13.0")
F = torch.nn.functional


def _torch_mha(X, w, causal):
    Xt = torch.from_numpy(X)[:, None, :]  # (T, batch = 1, d_model)
    mask = None
    if causal:
        mask = torch.from_numpy(~attnlib.causal_mask(X.shape[0]))  # True = not allowed
    with torch.inference_mode():
        out = F.multi_head_attention_forward(
            Xt, Xt, Xt, w.d_model, w.n_heads,
            torch.from_numpy(np.ascontiguousarray(w.W_QKV.T)), None, None, None, False, 0.0,
            torch.from_numpy(np.ascontiguousarray(w.W_O.T)), None,
            training=False, need_weights=False, attn_mask=mask)[0]
    return out[:, 0].numpy()


@pytest.mark.parametrize("dtype, tol", [(np.float32, 1e-5), (np.float64, 1e-12)])
@pytest.mark.parametrize("T, d_model, n_heads", [(1, 8, 2), (7, 24, 3), (64, 128, 8)])
@pytest.mark.parametrize("causal", [False, True])
def test_agrees_with_pytorch(dtype, tol, T, d_model, n_heads, causal):
    w = attnlib.random_weights(d_model, n_heads, seed=T, dtype=dtype)
    X = np.random.default_rng(T).standard_normal((T, d_model)).astype(dtype)
    want = _torch_mha(X, w, causal)
    got = attnlib.multihead_attention(X, w, causal=causal)
    assert got.dtype == dtype
    assert np.abs(got - want).max() <= tol * max(1.0, np.abs(want).max())
