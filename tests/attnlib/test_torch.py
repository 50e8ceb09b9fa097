"""attnlib against PyTorch's multi-head attention (skipped when torch is not installed; fails so under CI=true)."""
import numpy as np
import pytest

import attnlib
import needs

torch = needs.module("torch", "torch is optional: pip install torch==2.13.0 (make test-deps)")
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


def test_backward_agrees_with_autograd():
    """attnlib.backward.gradients against PyTorch's autograd on a random model with smeared keys."""
    from attnlib.backward import gradients
    from attnlib.model import Model

    rng = np.random.default_rng(5)
    d, vocab, h, T = 12, 9, 3, 7
    layers = [attnlib.random_weights(d, h, seed=l) for l in range(3)]
    smear = [rng.uniform(0.3, 1.0, h) for _ in range(3)]
    m = Model(rng.standard_normal((vocab, d)), rng.standard_normal((8, d)), rng.standard_normal((d, vocab)),
              layers, {}, smear=smear)
    toks = rng.integers(0, vocab, (2, T))
    direction = rng.standard_normal((2, T, vocab))
    g = gradients(m, toks, direction)

    t = lambda a: torch.from_numpy(np.array(a))  # noqa: E731  (a writable copy)
    x = (t(m.W_E)[t(toks)] + t(m.W_pos)[:T]).requires_grad_()
    keep = {"embed": x}
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for l, w in enumerate(m.layers):
        Wq, Wk, Wv, Wo = (t(a) for a in w.per_head)
        q = torch.einsum("btd,hde->bhte", x, Wq)
        k = torch.einsum("btd,hde->bhte", x, Wk)
        s = t(smear[l])[:, None, None]
        k = s * k + (1 - s) * torch.cat([k[..., :1, :], k[..., :-1, :]], dim=-2)
        v = torch.einsum("btd,hde->bhte", x, Wv)
        A = torch.softmax((q @ k.transpose(-1, -2) / np.sqrt(w.d_head)).masked_fill(~mask, -torch.inf), dim=-1)
        out = torch.einsum("bhte,hed->bhtd", A @ v, Wo)
        for name, a in (("q", q), ("k", k), ("v", v), ("A", A), ("out", out)):
            a.retain_grad()
            keep[name, l] = a
        x = x + out.sum(1)
        x.retain_grad()
        keep["stream", l + 1] = x
    metric = (t(direction) * (x @ t(m.W_U))).sum()
    metric.backward()

    def close(ours, theirs):
        theirs = theirs.grad.numpy()
        assert np.abs(ours - theirs).max() <= 1e-10 * max(1.0, np.abs(theirs).max())

    assert np.isclose(g.metric, metric.item(), rtol=1e-12)
    close(g.stream[0], keep["embed"])
    for l in range(3):
        close(g.queries[l], keep["q", l])
        close(g.keys[l], keep["k", l])
        close(g.values[l], keep["v", l])
        close(g.weights[l], keep["A", l])
        close(np.broadcast_to(g.write(l)[:, None], (2, h, T, d)), keep["out", l])
        close(g.stream[l + 1], keep["stream", l + 1])
