"""Softmax and the causal mask: turning scores into attention weights."""
from __future__ import annotations

import numpy as np

from ._validate import as_float_array, check_finite, check_positive_int


def softmax(x, axis: int = -1, where=None) -> np.ndarray:
    """Numerically stable softmax along ``axis``, optionally over a mask.

    Parameters
    ----------
    x : (..., n) array_like
        Scores (logits). ``-inf`` means "not allowed", like a False in
        ``where``; NaN and ``+inf`` are rejected.
    axis : int
        The axis that sums to one.
    where : (..., n) array_like of bool, optional
        Broadcastable to ``x``; False entries get weight 0.

    Returns
    -------
    (..., n) ndarray
        float32 if ``x`` is float32, else float64. Along ``axis`` the
        entries sum to one, except where nothing is allowed: such a slice is
        all zeros (PyTorch's convention), never NaN.

    Examples
    --------
    >>> softmax([0.0, 0.0, np.log(2.0)]).round(2)
    array([0.25, 0.25, 0.5 ])
    >>> softmax([1.0, 2.0], where=[False, False])
    array([0., 0.])
    """
    x = as_float_array(x, "x", min_ndim=1)
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)) or not -x.ndim <= axis < x.ndim:
        raise ValueError(f"axis must be an int in [-{x.ndim}, {x.ndim}), got {axis!r} for x of shape {x.shape}")
    check_finite(x, "x", allow_neg_inf=True)
    if where is not None:
        where = np.asarray(where)
        if where.dtype != bool:
            raise TypeError(f"where must be a boolean mask, got dtype {where.dtype}")
        try:
            where = np.broadcast_to(where, x.shape)
        except ValueError:
            raise ValueError(
                f"where of shape {where.shape} does not broadcast to x of shape {x.shape}"
            ) from None
        x = np.where(where, x, -np.inf).astype(x.dtype, copy=False)
    else:
        x = x.copy()
    if x.size == 0:  # nothing to normalise: an empty slice is "nothing allowed"
        return x
    return softmax_(x, axis)


def softmax_(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """In-place softmax of a float array, no checks (the fast path).

    ``x`` is overwritten and returned; masked entries are ``-inf``. The
    subtraction of the row maximum makes ``exp`` overflow-free (logits of
    ``1e4`` are fine), and fully masked rows come out as zeros.
    """
    x, sums = exp_shifted_(x, axis)
    np.divide(x, sums, out=x)
    return x


def exp_shifted_(x: np.ndarray, axis: int = -1) -> tuple[np.ndarray, np.ndarray]:
    """Softmax without its last division: ``x ← exp(x - max)``, in place.

    Returns ``x`` and its sums along ``axis`` (kept as a length-1 axis; a
    fully masked slice's sum is reported as 1, so dividing leaves it zero).
    Attention divides *after* mixing the values, ``(E V) / sums``: that is
    ``T × d_head`` divisions per head instead of ``T × T``.
    """
    m = x.max(axis=axis, keepdims=True)
    m[~np.isfinite(m)] = 0  # an all -inf row: exp(-inf - 0) = 0, not NaN
    with np.errstate(over="ignore", under="ignore"):  # x - max <= 0: at worst -inf, whose exp is 0
        np.subtract(x, m, out=x)
        np.exp(x, out=x)
    sums = x.sum(axis=axis, keepdims=True)
    sums[sums == 0] = 1
    return x, sums


def causal_mask(T_q: int, T_k: int | None = None) -> np.ndarray:
    """Boolean mask, True where query ``i`` may attend to key ``j``.

    Queries are aligned with the *last* ``T_q`` keys, so a single new token
    (``T_q = 1``) sees every cached key, and ``T_q = T_k`` gives the usual
    lower-triangular mask (``j <= i``).

    Parameters
    ----------
    T_q : int
        Number of queries.
    T_k : int, optional
        Number of keys (default ``T_q``); must be at least ``T_q``.

    Returns
    -------
    (T_q, T_k) ndarray of bool

    Examples
    --------
    >>> causal_mask(3).astype(int)
    array([[1, 0, 0],
           [1, 1, 0],
           [1, 1, 1]])
    """
    T_q = check_positive_int(T_q, "T_q")
    T_k = T_q if T_k is None else check_positive_int(T_k, "T_k")
    if T_k < T_q:
        raise ValueError(f"causal attention needs at least as many keys as queries, got T_q={T_q} queries and T_k={T_k} keys")
    return np.tri(T_q, T_k, k=T_k - T_q, dtype=bool)


__all__ = ["softmax", "softmax_", "exp_shifted_", "causal_mask"]
