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
