"""Multi-head attention as in Vaswani et al.: heads side by side, then W_O.

``MultiHead(X) = Concat(head_1, ..., head_h) W^O`` with
``head_i = Attention(X W^Q_i, X W^K_i, X W^V_i)``. This is the reference form
(chapter 2) that every refactored form in :mod:`attnlib.forms` must equal.
"""
from __future__ import annotations

import numpy as np

from ._validate import as_float_array, check_bool, check_finite, check_result, leading_shape, result_dtype
from .attention import _attend
from .heads import merge_heads, split_heads
from .weights import Weights, check_weights


def check_layer_input(X, weights, name: str = "X") -> np.ndarray:
    """Validate ``X`` against ``weights`` and return it as a float array."""
    check_weights(weights)
    X = as_float_array(X, name, min_ndim=2)
    if X.shape[-1] != weights.d_model:
        raise ValueError(
            f"{name} has shape {X.shape}: its last axis ({X.shape[-1]}) must be"
            f" d_model = {weights.d_model} of the weights"
        )
    if X.shape[-2] == 0:
        raise ValueError(f"{name} has shape {X.shape}: it needs at least one token")
    check_finite(X, name)
    return X


def check_sources(X, X_kv, weights) -> tuple[np.ndarray, np.ndarray | None]:
    """Validate the query source ``X`` and the optional key/value source ``X_kv``.

    Returns both as float arrays (``X_kv`` stays None for self-attention);
    their leading (batch) axes must broadcast.
    """
    X = check_layer_input(X, weights)
    if X_kv is None:
        return X, None
    X_kv = check_layer_input(X_kv, weights, "X_kv")
    leading_shape("X", X, "X_kv", X_kv)
    return X, X_kv


def project(X, W, inputs: str) -> np.ndarray:
    """``X @ W``, with an overflow reported by the inputs' names."""
    with np.errstate(over="ignore", invalid="ignore"):
        return check_result(X @ W, "a projection", inputs)


def multihead_attention(X, weights: Weights, causal: bool = False, X_kv=None) -> np.ndarray:
    """Multi-head attention in the concat form: self-attention, or cross-attention with ``X_kv``.

    Parameters
    ----------
    X : (..., T_q, d_model) array_like
        One token per row: the queries' source (and the keys' and values'
        too, unless ``X_kv`` is given).
    weights : Weights
    causal : bool
        Query ``t`` attends only to keys ``s <= t + T_kv - T_q`` (with one
        sequence, ``s <= t``).
    X_kv : (..., T_kv, d_model) array_like, optional
        Cross-attention: the keys and values come from this other sequence
        (an encoder's output, another modality), ``T_kv`` may differ from ``T_q``.

    Returns
    -------
    (..., T_q, d_model) ndarray
        float32 if the inputs and the weights are float32, else float64.

    Examples
    --------
    >>> w = random_weights(d_model=8, n_heads=2, seed=0)
    >>> X = np.random.default_rng(1).standard_normal((5, 8))
    >>> multihead_attention(X, w).shape
    (5, 8)
    >>> multihead_attention(X, w, X_kv=np.ones((3, 8))).shape  # 5 queries read 3 tokens
    (5, 8)
    """
    causal = check_bool(causal, "causal")
    X, X_kv = check_sources(X, X_kv, weights)
    dtype = result_dtype(X, weights.W_O) if X_kv is None else result_dtype(X, X_kv, weights.W_O)
    X = X.astype(dtype, copy=False)
    W_QKV = weights.W_QKV.astype(dtype, copy=False)
    h, d = weights.n_heads, weights.d_head
    inputs = "X and weights" if X_kv is None else "X, X_kv and weights"
    if X_kv is None:
        QKV = project(X, W_QKV, inputs)  # (..., T, 3 * n_heads * d_head): one fused projection
        QKV = split_heads(QKV, 3 * h)  # (..., 3 * n_heads, T, d_head)
        Q, K, V = QKV[..., :h, :, :], QKV[..., h:2 * h, :, :], QKV[..., 2 * h:, :, :]
    else:
        Q = split_heads(project(X, W_QKV[:, :h * d], inputs), h)  # (..., n_heads, T_q, d_head)
        KV = project(X_kv.astype(dtype, copy=False), W_QKV[:, h * d:], inputs)  # (..., T_kv, 2 * n_heads * d_head)
        KV = split_heads(KV, 2 * h)  # (..., 2 * n_heads, T_kv, d_head)
        K, V = KV[..., :h, :, :], KV[..., h:, :, :]
        if causal and K.shape[-2] < Q.shape[-2]:
            raise ValueError(f"causal cross-attention needs at least as many keys as queries: X has"
                             f" shape {X.shape}, X_kv has shape {X_kv.shape}")
    heads = _attend(Q, K, V, causal, (inputs, inputs))  # (..., n_heads, T_q, d_head)
    return project(merge_heads(heads), weights.W_O.astype(dtype, copy=False), inputs)  # (..., T_q, d_model)
