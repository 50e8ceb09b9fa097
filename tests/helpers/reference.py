"""An independent, deliberately plain reference: loops over heads, queries and keys.

Nothing here calls attnlib, so the tests compare two separate implementations.
"""
import math

import numpy as np


def ref_softmax(row):
    """Softmax of a 1-d list of (possibly -inf) scores; all -inf gives zeros."""
    finite = [s for s in row if s != -math.inf]
    if not finite:
        return np.zeros(len(row))
    m = max(finite)
    e = np.array([0.0 if s == -math.inf else math.exp(s - m) for s in row])
    return e / e.sum()


def ref_multihead(X, W_Q, W_K, W_V, W_O, n_heads, causal=False, X_kv=None):
    """Vaswani et al.'s formula, head by head, row by row, in float64.

    With ``X_kv`` the keys and values come from that sequence (cross-attention);
    a causal query ``t`` then sees keys ``s <= t + T_kv - T_q``.
    """
    X = np.asarray(X, dtype=np.float64)
    X_kv = X if X_kv is None else np.asarray(X_kv, dtype=np.float64)
    T, T_kv = X.shape[0], X_kv.shape[0]
    d_head = W_Q.shape[1] // n_heads
    heads = []
    for i in range(n_heads):
        cols = slice(i * d_head, (i + 1) * d_head)
        Q, K, V = X @ W_Q[:, cols], X_kv @ W_K[:, cols], X_kv @ W_V[:, cols]
        out = np.zeros((T, d_head))
        for t in range(T):
            scores = [
                (float(Q[t] @ K[s]) / math.sqrt(d_head)) if (s <= t + T_kv - T or not causal) else -math.inf
                for s in range(T_kv)
            ]
            out[t] = ref_softmax(scores) @ V
        heads.append(out)
    return np.concatenate(heads, axis=1) @ W_O


def ref_model_run(model, tokens, add=None, freeze=None, drop=()):
    """Logits, with ``add[name]`` added to the named activation (head by head, written without attnlib's forward).

    Names: ``"embed"``; ``("in", l, i, c)`` what head i's input c reads; ``("q" | "k" | "v", l, i)``
    (keys after smearing); ``("A", l, i)`` attention weights; ``("write", l, i)``; ``"final"``
    what the unembedding reads. ``freeze[l][i]``, if given, replaces head i's attention weights and
    ``drop`` is a set of (layer, head) whose writes leave the stream.
    """
    add = add or {}
    T = tokens.shape[-1]
    x = model.W_E[tokens] + model.W_pos[:T] + add.get("embed", 0)
    for l, w in enumerate(model.layers):
        Wq, Wk, Wv, Wo = w.per_head
        total = x
        for i in range(w.n_heads):
            xs = {c: x + add.get(("in", l, i, c), 0) for c in "qkv"}
            q = xs["q"] @ Wq[i] + add.get(("q", l, i), 0)
            k = xs["k"] @ Wk[i]
            if model.smear is not None:
                s = model.smear[l][i]
                k = s * k + (1 - s) * np.concatenate([k[..., :1, :], k[..., :-1, :]], axis=-2)
            k = k + add.get(("k", l, i), 0)
            v = xs["v"] @ Wv[i] + add.get(("v", l, i), 0)
            S = q @ np.swapaxes(k, -1, -2) / np.sqrt(w.d_head)
            S = np.where(np.tril(np.ones((T, T), bool)), S, -np.inf)
            A = np.exp(S - S.max(-1, keepdims=True))
            A = A / A.sum(-1, keepdims=True) if freeze is None else freeze[l][i]
            A = A + add.get(("A", l, i), 0)
            if (l, i) not in drop:
                total = total + (A @ v) @ Wo[i] + add.get(("write", l, i), 0)
        x = total
    return (x + add.get("final", 0)) @ model.W_U
