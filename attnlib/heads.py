"""Splitting the model dimension into heads and merging it back (chapter 2)."""
from __future__ import annotations

import numpy as np

from ._validate import as_float_array, check_positive_int


def split_heads(X, n_heads: int) -> np.ndarray:
    """Split the last axis into ``n_heads`` blocks, heads first.

    Parameters
    ----------
    X : (..., T, n_heads * d_head) array_like
    n_heads : int

    Returns
    -------
    (..., n_heads, T, d_head) ndarray
        A view where possible; head ``i`` holds columns
        ``i * d_head : (i + 1) * d_head`` of ``X``.

    Examples
    --------
    >>> split_heads(np.arange(6.0).reshape(1, 6), 3)[:, 0]
    array([[0., 1.],
           [2., 3.],
           [4., 5.]])
    """
    n_heads = check_positive_int(n_heads, "n_heads")
    X = as_float_array(X, "X", min_ndim=2)
    *lead, T, width = X.shape
    if width % n_heads:
        raise ValueError(
            f"X's last axis ({width}) is not divisible by n_heads = {n_heads}"
            f" (X has shape {X.shape})"
        )
    X = X.reshape(*lead, T, n_heads, width // n_heads)  # (..., T, n_heads, d_head)
    return np.swapaxes(X, -3, -2)  # (..., n_heads, T, d_head)


def merge_heads(H) -> np.ndarray:
    """Concatenate heads along the last axis: the inverse of :func:`split_heads`.

    Parameters
    ----------
    H : (..., n_heads, T, d_head) array_like

    Returns
    -------
    (..., T, n_heads * d_head) ndarray

    Examples
    --------
    >>> X = np.arange(12.0).reshape(2, 6)
    >>> bool((merge_heads(split_heads(X, 3)) == X).all())
    True
    """
    H = as_float_array(H, "H", min_ndim=3)
    *lead, n_heads, T, d_head = H.shape
    H = np.swapaxes(H, -3, -2)  # (..., T, n_heads, d_head)
    return H.reshape(*lead, T, n_heads * d_head)  # (..., T, n_heads * d_head)
