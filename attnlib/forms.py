"""The refactor, one function per step (chapters 2-7).

Each entry of :data:`FORMS` computes the same multi-head attention layer,
``f(X, weights, causal=False, X_kv=None) -> (T, d_model)``, written the way
one chapter of the book writes it. With ``X_kv`` (``T_kv × d_model``) the same
layer is cross-attention: queries from ``X``, keys and values from ``X_kv``,
``softmax(X W^P_i X_kvᵀ/√d_k) X_kv W^M_i``, and the result has ``X``'s ``T_q`` rows. In float64 they all agree to about 1e-12; the tests
check this over random shapes, and each chapter checks its own step.

Per head ``i`` (row vectors, ``A_i`` the ``T × T`` attention weights):

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

from ._validate import check_bool, check_result, result_dtype
from .attention import _attend, _attention_weights
from .circuits import ov_circuit, qk_circuit
from .lowrank import LowRank, _left_times_stack, _stack_times_right
from .multihead import check_sources, multihead_attention
from .normalize import causal_mask, exp_shifted_, softmax


def _prepare(X, weights, causal, X_kv):
    """Check the inputs; return ``X``, ``X_kv`` (``X`` itself for self-attention), ``causal``."""
    causal = check_bool(causal, "causal")
    X, X_kv = check_sources(X, X_kv, weights)
    for name, arr in (("X", X), ("X_kv", X_kv)):
        if arr is not None and arr.ndim != 2:
            raise ValueError(f"{name} must be one sequence (T, d_model), got shape {arr.shape}")
    dtype = result_dtype(X, weights.W_O) if X_kv is None else result_dtype(X, X_kv, weights.W_O)
    X = X.astype(dtype, copy=False)
    X_kv = X if X_kv is None else X_kv.astype(dtype, copy=False)
    if causal and X_kv.shape[0] < X.shape[0]:
        raise ValueError(f"causal cross-attention needs at least as many keys as queries: X has"
                         f" shape {X.shape}, X_kv has shape {X_kv.shape}")
    return X, X_kv, causal


def _mask(X, X_kv, causal):
    """The causal mask for ``T_q`` queries against ``T_kv`` keys, or None."""
    return causal_mask(X.shape[0], X_kv.shape[0]) if causal else None


def _inputs(X, X_kv):
    """How an overflow names the inputs."""
    return "X and weights" if X is X_kv else "X, X_kv and weights"


def _finite(out, X, X_kv):
    return check_result(out, "the layer's output", _inputs(X, X_kv))


def concat(X, weights, causal=False, X_kv=None):
    """Vaswani et al.: heads side by side, then one ``W^O`` (chapter 2)."""
    X, X_kv, causal = _prepare(X, weights, causal, X_kv)
    return multihead_attention(X, weights, causal, X_kv=None if X_kv is X else X_kv)


def sum_of_heads(X, weights, causal=False, X_kv=None):
    """Split ``W^O`` by rows: ``Concat(head_i) W^O = Σ_i head_i W^O_i`` (chapter 3)."""
    X, X_kv, causal = _prepare(X, weights, causal, X_kv)
    W_Q, W_K, W_V, W_O = weights.per_head
    with np.errstate(over="ignore", invalid="ignore"):
        inputs = _inputs(X, X_kv)
        heads = _attend(X @ W_Q, X_kv @ W_K, X_kv @ W_V, causal, (inputs, inputs))  # (n_heads, T_q, d_head)
        return _finite((heads @ W_O).sum(axis=0), X, X_kv)  # Σ over heads of (T_q, d_model)


def values(X, weights, causal=False, X_kv=None):
    """Pull ``W^O_i`` inside: ``(A_i X W^V_i) W^O_i = A_i (X W^V_i W^O_i)`` (chapter 4)."""
    X, X_kv, causal = _prepare(X, weights, causal, X_kv)
    W_Q, W_K, W_V, W_O = weights.per_head
    with np.errstate(over="ignore", invalid="ignore"):
        A = _attention_weights(X @ W_Q, X_kv @ W_K, causal, _inputs(X, X_kv))  # (n_heads, T_q, T_kv)
        V_out = (X_kv @ W_V) @ W_O  # (n_heads, T_kv, d_model): values already in model space
        return _finite((A @ V_out).sum(axis=0), X, X_kv)


def messages(X, weights, causal=False, X_kv=None):
    """Messages: ``W^M_i = W^V_i W^O_i``, ``M_i = X W^M_i`` (chapter 5)."""
    X, X_kv, causal = _prepare(X, weights, causal, X_kv)
    W_Q, W_K, W_V, W_O = weights.per_head
    with np.errstate(over="ignore", invalid="ignore"):
        A = _attention_weights(X @ W_Q, X_kv @ W_K, causal, _inputs(X, X_kv))  # (n_heads, T_q, T_kv)
        W_M = W_V @ W_O  # (n_heads, d_model, d_model), rank <= d_head
        M = X_kv @ W_M  # (n_heads, T_kv, d_model): what each key token would write
        return _finite((A @ M).sum(axis=0), X, X_kv)


def patterns_and_messages(X, weights, causal=False, X_kv=None):
    """Patterns too: ``W^P_i = W^Q_i W^K_iᵀ``, logits ``X W^P_i X_kvᵀ / √d_k`` (chapters 6-7).

    Materialises two ``d_model × d_model`` matrices per head: the clearest
    form, and the most expensive one.
    """
    X, X_kv, causal = _prepare(X, weights, causal, X_kv)
    W_Q, W_K, W_V, W_O = weights.per_head
    with np.errstate(over="ignore", invalid="ignore"):
        W_P = W_Q @ np.swapaxes(W_K, -1, -2)  # (n_heads, d_model, d_model)
        W_M = W_V @ W_O  # (n_heads, d_model, d_model)
        logits = (X @ W_P) @ X_kv.T / math.sqrt(weights.d_head)  # (n_heads, T_q, T_kv)
        check_result(logits, "the scores X W^P_i X_kvᵀ/√d_k", _inputs(X, X_kv))
        A = softmax(logits, where=_mask(X, X_kv, causal))  # (n_heads, T_q, T_kv)
        return _finite((A @ (X_kv @ W_M)).sum(axis=0), X, X_kv)


def factored(X, weights, causal=False, X_kv=None):
    """The patterns-and-messages form with ``W^P_i, W^M_i`` kept as factors (chapter 7).

    ``X W^P_i X_kvᵀ`` is evaluated as ``(X W^Q_i)(X_kv W^K_i)ᵀ`` and ``A_i X_kv W^M_i``
    as ``(A_i X_kv W^V_i) W^O_i``: the cheap association order, so the cost is
    the concat form's and no ``d_model × d_model`` matrix is ever formed.
    """
    X, X_kv, causal = _prepare(X, weights, causal, X_kv)
    inputs = _inputs(X, X_kv)
    W_P, W_M = qk_circuit(weights), ov_circuit(weights)  # LowRank (n_heads, d_model, d_model)
    with np.errstate(over="ignore", invalid="ignore"):
        queries = check_result(_left_times_stack(X, W_P.A), "a projection", inputs)  # (n_heads, T_q, d_head)
        keys_T = check_result(_stack_times_right(W_P.B, X_kv.T), "a projection", inputs)  # (n_heads, d_head, T_kv)
        logits = LowRank._of(queries * (1.0 / math.sqrt(weights.d_head)), keys_T).full()  # (n_heads, T_q, T_kv)
        check_result(logits, "the scores X W^P_i X_kvᵀ/√d_k", inputs)  # (X W^Q_i)(X_kv W^K_i)ᵀ, d_head inside
        if causal:
            logits[:, ~_mask(X, X_kv, causal)] = -np.inf  # mask before the softmax
        E, sums = exp_shifted_(logits)  # softmax short of its division: A_i = E_i / sums_i
        read = E @ (X_kv @ W_M)  # LowRank: factors (n_heads, T_q, d_head), (n_heads, d_head, d_model)
        read = LowRank._of(read.A / sums, read.B)  # A_i X_kv W^M_i, normalised on the small factor
        return _finite(read.sum_heads().full(), X, X_kv)  # Σ_i as one (T_q, h·d_head) @ (h·d_head, d_model) product


FORMS = {
    "concat": concat,
    "sum_of_heads": sum_of_heads,
    "values": values,
    "messages": messages,
    "patterns_and_messages": patterns_and_messages,
    "factored": factored,
}
"""Step name → ``f(X, weights, causal=False, X_kv=None) -> (T_q, d_model)``, in chapter order."""
