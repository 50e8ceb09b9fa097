"""The refactor, one function per step (chapters 2-7).

Each entry of :data:`FORMS` computes the same multi-head attention layer,
``f(X, weights, causal=False) -> (T, d_model)``, written the way one chapter
of the book writes it. In float64 they all agree to about 1e-12; the tests
check this over random shapes, and each chapter checks its own step.

Per head ``i`` (row vectors, ``A_i`` the ``T × T`` pattern):

==========================  ====================================================
``concat``                  ``Concat(A_i X W^V_i) W^O``               (Vaswani)
``sum_of_heads``            ``Σ_i (A_i X W^V_i) W^O_i``               (split W^O)
``values``                  ``Σ_i A_i (X W^V_i W^O_i)``               (pull out values)
``messages``                ``Σ_i A_i X W^M_i``, ``W^M_i = W^V_i W^O_i``
``patterns_and_messages``   ``Σ_i softmax(X W^P_i Xᵀ/√d_k) X W^M_i``, both materialised
``factored``                the same, with ``W^P_i, W^M_i`` kept as factors
==========================  ====================================================
"""
from __future__ import annotations

import math

import numpy as np

from ._checks import check_bool, result_dtype
from .attention import attention, attention_pattern
from .circuits import ov_circuit, qk_circuit
from .lowrank import LowRank
from .multihead import check_layer_input, multihead_attention
from .normalize import causal_mask, exp_shifted_, softmax


def _prepare(X, weights, causal):
    causal = check_bool(causal, "causal")
    X = check_layer_input(X, weights)
    if X.ndim != 2:
        raise ValueError(f"X must be one sequence (T, d_model), got shape {X.shape}")
    return X.astype(result_dtype(X, weights.W_O), copy=False), causal


def concat(X, weights, causal=False):
    """Vaswani et al.: heads side by side, then one ``W^O`` (chapter 2)."""
    X, causal = _prepare(X, weights, causal)
    return multihead_attention(X, weights, causal)


def sum_of_heads(X, weights, causal=False):
    """Split ``W^O`` by rows: ``Concat(head_i) W^O = Σ_i head_i W^O_i`` (chapter 3)."""
    X, causal = _prepare(X, weights, causal)
    W_Q, W_K, W_V, W_O = weights.per_head
    heads = attention(X @ W_Q, X @ W_K, X @ W_V, causal)  # (n_heads, T, d_head)
    return (heads @ W_O).sum(axis=0)  # Σ over heads of (T, d_model)


def values(X, weights, causal=False):
    """Pull ``W^O_i`` inside: ``(A_i X W^V_i) W^O_i = A_i (X W^V_i W^O_i)`` (chapter 4)."""
    X, causal = _prepare(X, weights, causal)
    W_Q, W_K, W_V, W_O = weights.per_head
    A = attention_pattern(X @ W_Q, X @ W_K, causal)  # (n_heads, T, T)
    V_out = (X @ W_V) @ W_O  # (n_heads, T, d_model): values already in model space
    return (A @ V_out).sum(axis=0)


def messages(X, weights, causal=False):
    """Messages: ``W^M_i = W^V_i W^O_i``, ``M_i = X W^M_i`` (chapter 5)."""
    X, causal = _prepare(X, weights, causal)
    W_Q, W_K, W_V, W_O = weights.per_head
    A = attention_pattern(X @ W_Q, X @ W_K, causal)  # (n_heads, T, T)
    W_M = W_V @ W_O  # (n_heads, d_model, d_model), rank <= d_head
    M = X @ W_M  # (n_heads, T, d_model)
    return (A @ M).sum(axis=0)


def patterns_and_messages(X, weights, causal=False):
    """Patterns too: ``W^P_i = W^Q_i W^K_iᵀ``, logits ``X W^P_i Xᵀ / √d_k`` (chapters 6-7).

    Materialises two ``d_model × d_model`` matrices per head: the clearest
    form, and the most expensive one.
    """
    X, causal = _prepare(X, weights, causal)
    W_Q, W_K, W_V, W_O = weights.per_head
    W_P = W_Q @ np.swapaxes(W_K, -1, -2)  # (n_heads, d_model, d_model)
    W_M = W_V @ W_O  # (n_heads, d_model, d_model)
    logits = (X @ W_P) @ X.T / math.sqrt(weights.d_head)  # (n_heads, T, T)
    T = X.shape[0]
    A = softmax(logits, where=causal_mask(T) if causal else None)  # (n_heads, T, T)
    return (A @ (X @ W_M)).sum(axis=0)


def factored(X, weights, causal=False):
    """The patterns-and-messages form with ``W^P_i, W^M_i`` kept as factors (chapter 7).

    ``X W^P_i Xᵀ`` is evaluated as ``(X W^Q_i)(X W^K_i)ᵀ`` and ``A_i X W^M_i``
    as ``(A_i X W^V_i) W^O_i``: the cheap association order, so the cost is
    the concat form's and no ``d_model × d_model`` matrix is ever formed.
    """
    X, causal = _prepare(X, weights, causal)
    W_P, W_M = qk_circuit(weights), ov_circuit(weights)  # LowRank (n_heads, d_model, d_model)
    logits = ((X @ W_P) * (1.0 / math.sqrt(weights.d_head))) @ X.T  # LowRank (n_heads, T, T)
    logits = logits.full()  # (n_heads, T, T): (X W^Q_i)(X W^K_i)ᵀ, d_head inside
    if causal:
        logits[:, ~causal_mask(X.shape[0])] = -np.inf  # mask before the softmax
    E, sums = exp_shifted_(logits)  # softmax short of its division: A_i = E_i / sums_i
    read = E @ (X @ W_M)  # LowRank: factors (n_heads, T, d_head), (n_heads, d_head, d_model)
    read = LowRank(read.A / sums, read.B)  # A_i X W^M_i, normalised on the small factor
    return read.sum_heads().full()  # Σ_i as one (T, h·d_head) @ (h·d_head, d_model) product


FORMS = {
    "concat": concat,
    "sum_of_heads": sum_of_heads,
    "values": values,
    "messages": messages,
    "patterns_and_messages": patterns_and_messages,
    "factored": factored,
}
"""Step name → ``f(X, weights, causal=False) -> (T, d_model)``, in chapter order."""
