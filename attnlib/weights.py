"""The parameters of one multi-head attention layer (chapter 2).

As in Vaswani et al. (2017), head ``i`` owns column block ``i`` of ``W_Q``,
``W_K`` and ``W_V`` and row block ``i`` of ``W_O``. Storing the heads side by
side is how real implementations (PyTorch, TransformerLens) do it; the
``per_head`` view gives the paper's ``W^Q_i`` as a stack.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

import numpy as np

from ._validate import as_float_array, check_finite, check_positive_int, check_seed


class PerHead(NamedTuple):
    """The weights split by head (views, read-only)."""

    W_Q: np.ndarray  #: (n_heads, d_model, d_head)
    W_K: np.ndarray  #: (n_heads, d_model, d_head)
    W_V: np.ndarray  #: (n_heads, d_model, d_head)
    W_O: np.ndarray  #: (n_heads, d_head, d_model)


@dataclass(frozen=True, eq=False)
class Weights:
    """Weights of a multi-head attention layer, heads stored side by side.

    Parameters
    ----------
    W_Q, W_K, W_V : (d_model, n_heads * d_head) array_like
        Query, key and value projections; head ``i`` is the column block
        ``i * d_head : (i + 1) * d_head``.
    W_O : (n_heads * d_head, d_model) array_like
        Output projection; head ``i`` owns the matching row block.
    n_heads : int

    The arrays are copied and made read-only, so derived quantities (the
    fused projection, the per-head views) can never go stale.

    Examples
    --------
    >>> w = random_weights(d_model=8, n_heads=2, seed=0)
    >>> w.d_model, w.n_heads, w.d_head, w.per_head.W_O.shape
    (8, 2, 4, (2, 4, 8))
    """

    W_Q: np.ndarray
    W_K: np.ndarray
    W_V: np.ndarray
    W_O: np.ndarray
    n_heads: int

    def __post_init__(self):
        n_heads = check_positive_int(self.n_heads, "n_heads")
        arrays = {}
        for name in ("W_Q", "W_K", "W_V", "W_O"):
            arr = as_float_array(getattr(self, name), name)
            if arr.ndim != 2:
                raise ValueError(f"{name} must be a matrix (2 axes), got shape {arr.shape}")
            check_finite(arr, name)
            arrays[name] = arr
        # The shape most of W_Q, W_K, W_V and W_Oᵀ agree on is (d_model, n_heads * d_head):
        # blame the odd one out (a transposed W_Q, say), not its neighbour.
        shapes = [arrays[n].shape for n in ("W_Q", "W_K", "W_V")] + [arrays["W_O"].shape[::-1]]
        d_model, width = max(shapes, key=shapes.count)
        if d_model == 0 or width == 0:
            raise ValueError(
                f"the weights have zero size: W_Q has shape {arrays['W_Q'].shape}, expected"
                f" (d_model, n_heads * d_head) with d_model >= 1 and d_head >= 1"
            )
        if width % n_heads:
            raise ValueError(
                f"W_Q has {width} columns, which n_heads = {n_heads} does not"
                f" divide: expected n_heads * d_head columns"
            )
        for name in ("W_Q", "W_K", "W_V"):
            if arrays[name].shape != (d_model, width):
                hint = "; is it transposed?" if arrays[name].shape == (width, d_model) else ""
                raise ValueError(
                    f"{name} has shape {arrays[name].shape}, expected (d_model, n_heads * d_head)"
                    f" = {(d_model, width)} like the other weights{hint}"
                )
        rows, cols = arrays["W_O"].shape
        if rows != width:
            raise ValueError(
                f"W_O has {rows} rows, expected n_heads * d_head ="
                f" {n_heads} * {width // n_heads} = {width}"
                + ("; is it transposed?" if (rows, cols) == (d_model, width) else "")
            )
        if cols != d_model:
            raise ValueError(
                f"W_O has {cols} columns, expected d_model = {d_model} (the rows of W_Q)"
                + ("; is it transposed?" if (rows, cols) == (d_model, width) else "")
            )
        dtype = np.result_type(*arrays.values())
        for name, arr in arrays.items():
            arr = np.array(arr, dtype=dtype)  # a private copy ...
            arr.setflags(write=False)  # ... that nobody can change under us
            object.__setattr__(self, name, arr)
        object.__setattr__(self, "n_heads", n_heads)

    @property
    def d_model(self) -> int:
        """Width of the residual stream (rows of ``W_Q``)."""
        return self.W_Q.shape[0]

    @property
    def d_head(self) -> int:
        """Size of one head, ``d_k`` in the paper."""
        return self.W_Q.shape[1] // self.n_heads

    @property
    def dtype(self) -> np.dtype:
        return self.W_Q.dtype

    @cached_property
    def per_head(self) -> PerHead:
        """The paper's ``W^Q_i, W^K_i, W^V_i, W^O_i`` stacked over heads."""
        h, d, D = self.n_heads, self.d_head, self.d_model

        def by_column_block(W):
            return W.reshape(D, h, d).swapaxes(0, 1)  # (n_heads, d_model, d_head)

        return PerHead(
            by_column_block(self.W_Q),
            by_column_block(self.W_K),
            by_column_block(self.W_V),
            self.W_O.reshape(h, d, D),  # (n_heads, d_head, d_model)
        )

    # The per-head stacks under their own names, apart from the fused matrices
    # ``W_Q`` (d_model, n_heads * d_head): ``W_Q_heads`` is (n_heads, d_model, d_head).
    @property
    def W_Q_heads(self) -> np.ndarray:
        """The stack of ``W^Q_i``, ``(n_heads, d_model, d_head)`` (``per_head.W_Q``).

        Examples
        --------
        >>> w = random_weights(d_model=8, n_heads=2, seed=0)
        >>> w.W_Q.shape, w.W_Q_heads.shape, w.W_O_heads.shape
        ((8, 8), (2, 8, 4), (2, 4, 8))
        """
        return self.per_head.W_Q

    @property
    def W_K_heads(self) -> np.ndarray:
        """The stack of ``W^K_i``, ``(n_heads, d_model, d_head)`` (``per_head.W_K``)."""
        return self.per_head.W_K

    @property
    def W_V_heads(self) -> np.ndarray:
        """The stack of ``W^V_i``, ``(n_heads, d_model, d_head)`` (``per_head.W_V``)."""
        return self.per_head.W_V

    @property
    def W_O_heads(self) -> np.ndarray:
        """The stack of ``W^O_i``, ``(n_heads, d_head, d_model)`` (``per_head.W_O``)."""
        return self.per_head.W_O

    @cached_property
    def W_QKV(self) -> np.ndarray:
        """``[W_Q | W_K | W_V]``: one matmul projects queries, keys and values."""
        W = np.concatenate([self.W_Q, self.W_K, self.W_V], axis=1)  # (d_model, 3 * n_heads * d_head)
        W.setflags(write=False)
        return W

    def astype(self, dtype) -> "Weights":
        """The same weights in another floating dtype."""
        return Weights(*(W.astype(dtype) for W in (self.W_Q, self.W_K, self.W_V, self.W_O)), self.n_heads)

    def __repr__(self) -> str:
        return (
            f"Weights(d_model={self.d_model}, n_heads={self.n_heads},"
            f" d_head={self.d_head}, dtype={self.dtype})"
        )


def check_weights(weights) -> Weights:
    """Raise ``TypeError`` unless ``weights`` is a :class:`Weights`."""
    if not isinstance(weights, Weights):
        raise TypeError(
            f"weights must be an attnlib.Weights, got {type(weights).__name__}"
            " (build one with attnlib.Weights(...) or attnlib.random_weights(...))"
        )
    return weights


def random_weights(d_model: int, n_heads: int, seed=0, *, d_head: int | None = None,
                   dtype=np.float64) -> Weights:
    """Random Gaussian weights, scaled so that projections keep unit variance.

    Parameters
    ----------
    d_model : int
    n_heads : int
    seed : int or numpy.random.Generator
        Same seed, same weights.
    d_head : int, optional
        Head size; by default ``d_model // n_heads`` (which must divide).
    dtype : float32 or float64

    Returns
    -------
    Weights

    Examples
    --------
    >>> random_weights(768, 12).d_head
    64
    """
    d_model = check_positive_int(d_model, "d_model")
    n_heads = check_positive_int(n_heads, "n_heads")
    if d_head is None:
        if d_model % n_heads:
            raise ValueError(
                f"d_model = {d_model} is not divisible by n_heads = {n_heads};"
                f" pass d_head explicitly"
            )
        d_head = d_model // n_heads
    d_head = check_positive_int(d_head, "d_head")
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"dtype must be float32 or float64, got {dtype!r}") from None
    if dtype not in (np.float32, np.float64):
        raise TypeError(f"dtype must be float32 or float64, got {dtype}")
    seed = check_seed(seed)
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    width = n_heads * d_head
    W_Q, W_K, W_V = (rng.standard_normal((d_model, width)) / np.sqrt(d_model) for _ in range(3))
    W_O = rng.standard_normal((width, d_model)) / np.sqrt(width)
    return Weights(W_Q, W_K, W_V, W_O, n_heads).astype(dtype)
