"""Multi-head attention as in Vaswani et al.: heads side by side, then W_O.

``MultiHead(X) = Concat(head_1, ..., head_h) W^O`` with
``head_i = Attention(X W^Q_i, X W^K_i, X W^V_i)``. This is the reference form
(chapter 2) that every refactored form in :mod:`attnlib.forms` must equal.
"""
from __future__ import annotations

import numpy as np

from ._checks import as_float_array, check_bool, check_finite, result_dtype
from .attention import _attend
from .heads import merge_heads
from .weights import Weights, check_weights


def check_layer_input(X, weights) -> np.ndarray:
    """Validate ``X`` against ``weights`` and return it as a float array."""
    check_weights(weights)
    X = as_float_array(X, "X", min_ndim=2)
    if X.shape[-1] != weights.d_model:
        raise ValueError(
            f"X has shape {X.shape}: its last axis ({X.shape[-1]}) must be"
            f" d_model = {weights.d_model} of the weights"
        )
    if X.shape[-2] == 0:
        raise ValueError(f"X has shape {X.shape}: it needs at least one token")
    check_finite(X, "X")
    return X


def multihead_attention(X, weights: Weights, causal: bool = False) -> np.ndarray:
    """Multi-head self-attention in the concat form.

    Parameters
    ----------
    X : (..., T, d_model) array_like
        One token per row.
    weights : Weights
    causal : bool
        Token ``t`` attends only to tokens ``s <= t``.

    Returns
    -------
    (..., T, d_model) ndarray
        float32 if ``X`` and the weights are float32, else float64.

    Examples
    --------
    >>> w = random_weights(d_model=8, n_heads=2, seed=0)
    >>> X = np.random.default_rng(1).standard_normal((5, 8))
    >>> multihead_attention(X, w).shape
    (5, 8)
    """
    causal = check_bool(causal, "causal")
    X = check_layer_input(X, weights)
    dtype = result_dtype(X, weights.W_O)
    X = X.astype(dtype, copy=False)
    W_QKV = weights.W_QKV.astype(dtype, copy=False)
    h, d = weights.n_heads, weights.d_head
    *lead, T, _ = X.shape
    QKV = X @ W_QKV  # (..., T, 3 * n_heads * d_head): one fused projection
    QKV = QKV.reshape(*lead, T, 3 * h, d).swapaxes(-3, -2)  # (..., 3 * n_heads, T, d_head)
    Q, K, V = QKV[..., :h, :, :], QKV[..., h:2 * h, :, :], QKV[..., 2 * h:, :, :]
    heads = _attend(Q, K, V, causal)  # (..., n_heads, T, d_head)
    return merge_heads(heads) @ weights.W_O.astype(dtype, copy=False)  # (..., T, d_model)
