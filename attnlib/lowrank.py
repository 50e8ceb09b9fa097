"""A matrix product kept as its two factors (chapters 5-7).

``W^P_i = W^Q_i (W^K_i)ᵀ`` is a ``d_model × d_model`` matrix of rank at most
``d_head``. Storing it as its factors costs ``2 · d_model · d_head`` numbers
instead of ``d_model²``, and every question we ask of it (products with X,
singular values, eigenvalues, norms) can be answered through the small
factors. This mirrors TransformerLens's ``FactoredMatrix``.
"""
from __future__ import annotations

import numbers

import numpy as np

from ._validate import as_float_array, check_finite, check_result, leading_shape


def _as_stack(x, name) -> np.ndarray:
    x = as_float_array(x, name, min_ndim=2)
    check_finite(x, name)  # a NaN would surface much later, as "SVD did not converge"
    return x


def _left_times_stack(X: np.ndarray, A: np.ndarray) -> np.ndarray:
    """``X @ A`` for a matrix ``X`` (k, m) and a stack ``A`` (..., m, r), as one product.

    ``X [A_1 … A_h] = [X A_1 … X A_h]``: placing the stack side by side turns
    ``h`` thin products into one wide one, which BLAS runs much faster. When
    the stack was cut from one matrix (as the heads' ``W^Q_i`` are cut from
    ``W^Q``), placing it side by side is free: a view, not a copy.
    """
    wide = np.moveaxis(A, -2, 0).reshape(A.shape[-2], -1)  # (m, ... * r)
    out = (X @ wide).reshape(X.shape[0], *A.shape[:-2], A.shape[-1])  # (k, ..., r)
    return np.moveaxis(out, 0, -2)  # (..., k, r)


def _stack_times_right(B: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """``B @ Y`` for a stack ``B`` (..., r, n) and a matrix ``Y`` (n, k), as one product.

    Stacking the ``B_i`` on top of each other, ``[B_1; …; B_h] Y = [B_1 Y; …; B_h Y]``.
    """
    tall = B.reshape(-1, B.shape[-1])  # (... * r, n)
    return (tall @ Y).reshape(*B.shape[:-1], Y.shape[-1])  # (..., r, k)


class LowRank:
    """The product ``A @ B``, never formed unless asked for.

    Parameters
    ----------
    A : (..., m, r) array_like
    B : (..., r, n) array_like
        Leading (head) axes broadcast, as in ``A @ B``.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> W = LowRank(rng.standard_normal((5, 2)), rng.standard_normal((2, 5)))
    >>> W.shape, W.rank_bound, int(np.linalg.matrix_rank(W.full()))
    ((5, 5), 2, 2)
    >>> bool(np.allclose(W.singular_values(), np.linalg.svd(W.full(), compute_uv=False)[:2]))
    True
    """

    __array_ufunc__ = None  # so that ndarray @ LowRank calls LowRank.__rmatmul__

    def __init__(self, A, B):
        A, B = _as_stack(A, "A"), _as_stack(B, "B")
        if A.shape[-1] != B.shape[-2]:
            raise ValueError(
                f"inner sizes differ: A has shape {A.shape} ({A.shape[-1]} columns)"
                f" but B has shape {B.shape} ({B.shape[-2]} rows)"
            )
        self._lead = leading_shape("A", A, "B", B)
        self.A, self.B = A, B

    @classmethod
    def _of(cls, A: np.ndarray, B: np.ndarray) -> "LowRank":
        """A product of factors that attnlib itself computed: shapes known, no checks."""
        new = cls.__new__(cls)
        new._lead = np.broadcast_shapes(A.shape[:-2], B.shape[:-2])
        new.A, new.B = A, B
        return new

    # --- shape ----------------------------------------------------------------
    @property
    def shape(self) -> tuple:
        """Shape of the full product, ``(..., m, n)``."""
        return (*self._lead, self.A.shape[-2], self.B.shape[-1])

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def rank_bound(self) -> int:
        """The inner size ``r``: the product's rank is at most this."""
        return self.A.shape[-1]

    @property
    def dtype(self) -> np.dtype:
        return np.result_type(self.A, self.B)

    def __repr__(self) -> str:
        return f"LowRank(shape={self.shape}, rank_bound={self.rank_bound}, dtype={self.dtype})"

    # --- algebra --------------------------------------------------------------
    def full(self) -> np.ndarray:
        """The product ``A @ B`` as an ndarray of shape ``(..., m, n)``."""
        return self.A @ self.B

    @property
    def T(self) -> "LowRank":
        """Transpose of the product: ``(AB)ᵀ = Bᵀ Aᵀ``."""
        return LowRank._of(np.swapaxes(self.B, -1, -2), np.swapaxes(self.A, -1, -2))

    def __matmul__(self, other):
        m, n = self.shape[-2:]
        if isinstance(other, LowRank):
            if other.shape[-2] != n:
                raise ValueError(
                    f"cannot multiply LowRank {self.shape} by LowRank {other.shape}:"
                    f" {n} columns against {other.shape[-2]} rows"
                )
            middle = self.B @ other.A  # (..., r1, r2): small
            # Attach the middle to whichever side keeps the inner size smaller.
            if self.rank_bound <= other.rank_bound:
                return LowRank._of(self.A, middle @ other.B)
            return LowRank._of(self.A @ middle, other.B)
        other = as_float_array(other, "other", min_ndim=1)
        rows = other.shape[0] if other.ndim == 1 else other.shape[-2]
        if rows != n:
            raise ValueError(
                f"cannot multiply LowRank {self.shape} by an array of shape"
                f" {other.shape}: {n} columns against {rows} rows"
            )
        if other.ndim == 1:
            return (self.A @ (self.B @ other)[..., None])[..., 0]  # a vector: (..., m)
        if other.ndim == 2 and self.B.ndim > 2:
            return LowRank._of(self.A, _stack_times_right(self.B, other))
        return LowRank._of(self.A, self.B @ other)

    def __rmatmul__(self, other):
        other = as_float_array(other, "other", min_ndim=1)
        m = self.shape[-2]
        if other.shape[-1] != m:
            raise ValueError(
                f"cannot multiply an array of shape {other.shape} by LowRank"
                f" {self.shape}: {other.shape[-1]} columns against {m} rows"
            )
        if other.ndim == 1:
            return ((other @ self.A)[..., None, :] @ self.B)[..., 0, :]  # a vector: (..., n)
        if other.ndim == 2 and self.A.ndim > 2:
            return LowRank._of(_left_times_stack(other, self.A), self.B)
        return LowRank._of(other @ self.A, self.B)

    def __mul__(self, c):
        """Scale by a number (applied to the smaller-looking factor ``A``)."""
        if not isinstance(c, numbers.Real):
            raise TypeError(f"a LowRank can be scaled by a real number, not {type(c).__name__}")
        if not np.isfinite(c):
            raise ValueError(f"a LowRank can be scaled by a finite number, not {c}")
        return LowRank._of(self.A * c, self.B)

    __rmul__ = __mul__

    def __getitem__(self, index) -> "LowRank":
        """Index the leading (head) axes: ``W_P[3]`` is head 3's matrix."""
        if not self._lead:
            raise IndexError(f"this LowRank {self.shape} has no head axis to index")
        idx = index if isinstance(index, tuple) else (index,)
        if len(idx) > len(self._lead) or any(i is Ellipsis or i is None for i in idx):
            raise IndexError(
                f"index {index!r} reaches past the head axes {self._lead} of a LowRank {self.shape}"
            )
        for i, n in zip(idx, self._lead):
            if isinstance(i, slice):
                continue
            if isinstance(i, bool) or not isinstance(i, (int, np.integer)):
                raise IndexError(f"index {index!r}: a LowRank's head axes take integers or slices, got {i!r}")
            if not -n <= i < n:
                raise IndexError(f"head index {i} is out of range for {n} heads (LowRank of shape {self.shape})")
        A = np.broadcast_to(self.A, (*self._lead, *self.A.shape[-2:]))
        B = np.broadcast_to(self.B, (*self._lead, *self.B.shape[-2:]))
        return LowRank._of(A[idx], B[idx])

    def sum_heads(self) -> "LowRank":
        """``Σ_i A_i B_i`` over the first head axis, as one product.

        Placing the ``A_i`` side by side and stacking the ``B_i`` gives
        ``[A_1 … A_h] [B_1; …; B_h] = Σ_i A_i B_i``: a sum of ``h`` rank-``r``
        products is one product of inner size ``h · r``.
        """
        if not self._lead:
            raise ValueError(f"this LowRank {self.shape} has no head axis to sum over")
        h = self._lead[0]
        A = np.broadcast_to(self.A, (*self._lead, *self.A.shape[-2:]))
        B = np.broadcast_to(self.B, (*self._lead, *self.B.shape[-2:]))
        A = np.moveaxis(A, 0, -2)  # (..., m, h, r)
        A = A.reshape(*A.shape[:-2], h * self.rank_bound)  # (..., m, h * r)
        B = np.moveaxis(B, 0, -3)  # (..., h, r, n)
        B = B.reshape(*B.shape[:-3], h * self.rank_bound, B.shape[-1])  # (..., h * r, n)
        return LowRank._of(A, B)

    # --- spectra and norms, through the small factors ---------------------------
    def singular_values(self) -> np.ndarray:
        """The ``min(m, n, r)`` largest singular values, descending.

        With ``A = Q_A R_A`` and ``Bᵀ = Q_B R_B`` (thin QR), ``AB = Q_A (R_A R_Bᵀ) Q_Bᵀ``
        and the orthonormal ``Q``'s do not change singular values, so only a
        small ``r × r`` matrix is decomposed.

        Returns
        -------
        (..., min(m, n, r)) ndarray
        """
        _, R_A = np.linalg.qr(self.A)
        _, R_B = np.linalg.qr(np.swapaxes(self.B, -1, -2))
        return np.linalg.svd(R_A @ np.swapaxes(R_B, -1, -2), compute_uv=False)

    def eigenvalues(self) -> np.ndarray:
        """Eigenvalues of a square product, from the small ``B A``.

        ``AB`` and ``BA`` have the same non-zero eigenvalues. When ``r < m``
        this returns the ``r`` eigenvalues of ``BA`` (``AB``'s remaining
        ``m - r`` are zero); otherwise all ``m`` eigenvalues of ``AB``.
        Sorted by decreasing magnitude; complex in general.

        Returns
        -------
        (..., min(m, r)) ndarray
        """
        m, n = self.shape[-2:]
        if m != n:
            raise ValueError(f"eigenvalues need a square matrix, this LowRank is {self.shape}")
        small = self.B @ self.A if self.rank_bound < m else self.full()
        ev = np.linalg.eigvals(small)
        order = np.argsort(-np.abs(ev), axis=-1, kind="stable")
        return np.take_along_axis(ev, order, axis=-1)

    def trace(self) -> np.ndarray:
        """``tr(AB) = tr(BA)``, for square products."""
        m, n = self.shape[-2:]
        if m != n:
            raise ValueError(f"the trace needs a square matrix, this LowRank is {self.shape}")
        return np.einsum("...ij,...ji->...", self.A, self.B)

    def norm(self) -> np.ndarray:
        """Frobenius norm, ``‖AB‖_F² = tr((AᵀA)(BBᵀ))``: two ``r × r`` Gram matrices.

        The factors are scaled to a largest entry of 1 first, so that the
        squares cannot overflow while the norm itself fits the dtype.
        """
        s_A = np.abs(self.A).max(axis=(-1, -2), keepdims=True)  # (..., 1, 1)
        s_B = np.abs(self.B).max(axis=(-1, -2), keepdims=True)
        s_A[s_A == 0], s_B[s_B == 0] = 1, 1
        A, B = self.A / s_A, self.B / s_B
        G_A = np.swapaxes(A, -1, -2) @ A  # (..., r, r)
        G_B = B @ np.swapaxes(B, -1, -2)  # (..., r, r)
        unit = np.sqrt(np.maximum((G_A * G_B).sum(axis=(-1, -2)), 0.0))
        with np.errstate(over="ignore"):
            return check_result(unit * (s_A * s_B)[..., 0, 0], "the norm", "A and B")
