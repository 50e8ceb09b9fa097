"""Patterns and messages as low-rank matrices: the QK and OV circuits (chapters 5-7).

For head ``i``:

* ``W^P_i = W^Q_i (W^K_i)ᵀ`` (``d_model × d_model``): the *pattern* matrix.
  ``x_t W^P_i x_sᵀ`` is how strongly token ``t`` looks for token ``s``.
* ``W^M_i = W^V_i W^O_i`` (``d_model × d_model``): the *message* matrix.
  ``x_s W^M_i`` is what token ``s`` writes into the residual stream when read.

These are TransformerLens's ``QK.AB`` and ``OV.AB``, and the transposes of
the ``W_QK`` and ``W_OV`` of Elhage et al. (2021), who use column vectors.
"""
from __future__ import annotations

import numpy as np

from .lowrank import LowRank
from .weights import Weights, check_weights


def qk_circuit(weights: Weights) -> LowRank:
    """Pattern matrices ``W^P_i = W^Q_i (W^K_i)ᵀ`` for every head, as factors.

    Returns
    -------
    LowRank of shape (n_heads, d_model, d_model), rank at most d_head

    Examples
    --------
    >>> W_P = qk_circuit(random_weights(8, 2, seed=0))
    >>> W_P.shape, W_P.rank_bound
    ((2, 8, 8), 4)
    """
    W_Q, W_K, _, _ = check_weights(weights).per_head
    return LowRank(W_Q, np.swapaxes(W_K, -1, -2))  # (n_heads, d_model, d_head) @ (n_heads, d_head, d_model)


def ov_circuit(weights: Weights) -> LowRank:
    """Message matrices ``W^M_i = W^V_i W^O_i`` for every head, as factors.

    Returns
    -------
    LowRank of shape (n_heads, d_model, d_model), rank at most d_head

    Examples
    --------
    >>> ov_circuit(random_weights(8, 2, seed=0))[1].shape
    (8, 8)
    """
    _, _, W_V, W_O = check_weights(weights).per_head
    return LowRank(W_V, W_O)  # (n_heads, d_model, d_head) @ (n_heads, d_head, d_model)
