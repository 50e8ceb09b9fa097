"""Scaled dot-product attention for one head, or a stack of heads (chapter 1).

Row-vector convention: each row of ``Q``, ``K`` and ``V`` is one token.
Leading axes (heads, batches) broadcast, so the same code serves one head
and all of them at once.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from ._validate import as_float_array, check_bool, check_finite, check_result, leading_shape, result_dtype
from .normalize import causal_mask, exp_shifted_, softmax_


def _check_qk(Q, K):
    Q = as_float_array(Q, "Q", min_ndim=2)
    K = as_float_array(K, "K", min_ndim=2)
    if Q.shape[-1] != K.shape[-1]:
        raise ValueError(
            f"Q and K must have the same head size (last axis): Q has shape"
            f" {Q.shape}, K has shape {K.shape}"
        )
    if Q.shape[-1] == 0:
        raise ValueError(f"Q and K have head size d_k = 0 (Q has shape {Q.shape}, K has shape {K.shape}): nothing to compare")
    if K.shape[-2] == 0:
        raise ValueError(f"K has shape {K.shape}: there must be at least one key to attend to")
    leading_shape("Q", Q, "K", K)
    check_finite(Q, "Q")
    check_finite(K, "K")
    return Q, K


def _scores(Q: np.ndarray, K: np.ndarray, causal: bool, inputs: str = "Q and K") -> np.ndarray:
    """Scaled (and causally masked) scores ``Q Kᵀ / √d_k``, in one dtype."""
    dtype = result_dtype(Q, K)
    # Scale the (T, d_k) queries, not the (T, T) scores: fewer multiplications.
    # A Python float keeps float32 as float32 (an np.float64 would upcast).
    scale = 1.0 / math.sqrt(Q.shape[-1])
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is reported below, by name
        scores = (Q.astype(dtype, copy=False) * scale) @ np.swapaxes(K, -1, -2).astype(dtype, copy=False)  # (..., T_q, T_k)
    check_result(scores, "the scores Q Kᵀ/√d_k", inputs)
    if causal:
        T_q, T_k = scores.shape[-2:]
        scores[..., ~causal_mask(T_q, T_k)] = -np.inf
    return scores


def _attention_weights(Q: np.ndarray, K: np.ndarray, causal: bool, inputs: str = "Q and K") -> np.ndarray:
    """Attention weights softmax(Q Kᵀ / √d_k) for checked float arrays."""
    return softmax_(_scores(Q, K, causal, inputs), axis=-1)


def _attend(Q: np.ndarray, K: np.ndarray, V: np.ndarray, causal: bool,
            inputs: tuple = ("Q and K", "V")) -> np.ndarray:
    """softmax(Q Kᵀ / √d_k) V, normalising after the product with V (same result, less work)."""
    E, sums = exp_shifted_(_scores(Q, K, causal, inputs[0]), axis=-1)  # (..., T_q, T_k), (..., T_q, 1)
    V = V.astype(E.dtype, copy=False)
    with np.errstate(over="ignore", invalid="ignore"):
        out = E @ V  # (..., T_q, d_v)
        out /= sums
        if not np.isfinite(out).all():  # values near the dtype's limit: average, then sum
            out = (E / sums) @ V
    return check_result(out, "the weighted values", inputs[1])


def attention_weights(Q, K, causal: bool = False) -> np.ndarray:
    """Attention weights ``A = softmax(Q Kᵀ / √d_k)``, one row per query.

    The book keeps *pattern* for the rows of ``X W^P_i`` (what a token looks
    for); the softmax's output is the *attention weights*.

    Parameters
    ----------
    Q : (..., T_q, d_k) array_like
        Queries.
    K : (..., T_k, d_k) array_like
        Keys; leading axes broadcast against ``Q``'s.
    causal : bool
        If True, query ``i`` sees only keys ``j <= i + T_k - T_q`` (so with
        ``T_q = T_k`` a token sees itself and the past).

    Returns
    -------
    (..., T_q, T_k) ndarray
        Each row is a probability distribution over the keys.

    Examples
    --------
    >>> Q = np.array([[1.0, 0.0]]); K = np.array([[1.0, 0.0], [-1.0, 0.0]])
    >>> attention_weights(Q, K).round(3)  # softmax([1, -1] / sqrt(2))
    array([[0.804, 0.196]])
    """
    causal = check_bool(causal, "causal")
    Q, K = _check_qk(Q, K)
    return _attention_weights(Q, K, causal)


def attention_pattern(Q, K, causal: bool = False) -> np.ndarray:
    """Deprecated name of :func:`attention_weights` (the same function, the same result).

    The circuits paper and TransformerLens call ``softmax(Q Kᵀ / √d_k)`` the
    attention pattern; this book keeps *pattern* for the rows of ``X W^P_i``,
    so the library's name is :func:`attention_weights`. This alias keeps code
    written against the old name running. It issues a
    ``PendingDeprecationWarning``, which Python and Jupyter hide by default:
    a notebook cell (or a graded test cell) that calls it writes nothing to
    stderr. Run with ``-W error::PendingDeprecationWarning`` to find old uses.

    Examples
    --------
    >>> import warnings
    >>> Q = np.array([[1.0, 0.0]]); K = np.array([[1.0, 0.0], [-1.0, 0.0]])
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     np.array_equal(attention_pattern(Q, K), attention_weights(Q, K))
    True
    """
    warnings.warn("attnlib.attention_pattern is the old name of attnlib.attention_weights"
                  " (the book's 'pattern' is a row of X W^P); call attention_weights",
                  PendingDeprecationWarning, stacklevel=2)
    return attention_weights(Q, K, causal)


def attention(Q, K, V, causal: bool = False) -> np.ndarray:
    """Scaled dot-product attention ``softmax(Q Kᵀ / √d_k) V``.

    Parameters
    ----------
    Q : (..., T_q, d_k) array_like
    K : (..., T_k, d_k) array_like
    V : (..., T_k, d_v) array_like
        Values, one row per key.
    causal : bool
        Mask future keys before the softmax (see :func:`attention_weights`).

    Returns
    -------
    (..., T_q, d_v) ndarray
        Row ``i`` is the average of the values weighted by query ``i``'s
        row of attention weights.

    Examples
    --------
    >>> K = np.eye(2); V = np.array([[1.0, 2.0], [3.0, 4.0]])
    >>> attention(100 * K[:1], K, V).round(3)  # the query picks key 0
    array([[1., 2.]])
    """
    causal = check_bool(causal, "causal")
    Q, K = _check_qk(Q, K)
    V = as_float_array(V, "V", min_ndim=2)
    if V.shape[-2] != K.shape[-2]:
        raise ValueError(
            f"V must have one row per key: K has shape {K.shape} ({K.shape[-2]}"
            f" keys) but V has shape {V.shape} ({V.shape[-2]} rows)"
        )
    leading_shape("K", K, "V", V)
    leading_shape("Q", Q, "V", V)
    check_finite(V, "V")
    return _attend(Q, K, V, causal)  # (..., T_q, d_v)
