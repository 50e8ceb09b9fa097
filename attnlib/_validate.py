"""Input validation shared by every module: clear errors instead of numpy's.

Every public function validates its arguments here first, so that a reader
sees ``W_O has 96 rows, expected n_heads * d_head = 64`` rather than a
broadcasting error from deep inside a matmul.
"""
from __future__ import annotations

import numbers

import numpy as np


def as_float_array(x, name: str, min_ndim: int = 0) -> np.ndarray:
    """Return ``x`` as a floating ndarray, keeping float32 as float32.

    Integer and other floating inputs (float16, long double) become float64;
    boolean, complex, object and string inputs are rejected (a boolean array
    where numbers belong is usually a mask passed by mistake), as are arrays
    with too few axes.
    """
    if isinstance(x, np.ndarray):
        arr = x
    else:
        try:
            arr = np.asarray(x)
        except (ValueError, TypeError) as err:  # ragged nested lists
            raise TypeError(f"{name} must be an array of numbers: {err}") from None
    if arr.dtype.kind == "b":
        raise TypeError(f"{name} must hold real numbers, got booleans (shape {arr.shape}); is it a mask?")
    if arr.dtype.kind in "iu" or (arr.dtype.kind == "f" and arr.dtype not in (np.float32, np.float64)):
        arr = arr.astype(np.float64)
    elif arr.dtype.kind != "f":
        raise TypeError(
            f"{name} must hold real numbers, got dtype {arr.dtype} (shape {arr.shape})"
        )
    if arr.ndim < min_ndim:
        raise ValueError(
            f"{name} must have at least {min_ndim} axes, got shape {arr.shape}"
        )
    return arr


def check_finite(arr: np.ndarray, name: str, allow_neg_inf: bool = False) -> None:
    """Raise ``ValueError`` if ``arr`` holds NaN or infinities."""
    if np.isfinite(arr).all():  # the common case, in one pass
        return
    bad = np.isnan(arr) | (arr == np.inf)
    if not allow_neg_inf:
        bad |= arr == -np.inf
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(
            f"{name} must be finite, but {name}[{', '.join(map(str, where))}]"
            f" = {arr[where]}"
        )


def check_seed(seed, name: str = "seed"):
    """Return ``seed`` if numpy's ``default_rng`` takes it, else raise naming it."""
    if isinstance(seed, np.random.Generator) or seed is None:
        return seed
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise TypeError(
            f"{name} must be a non-negative integer or a numpy.random.Generator, got {seed!r}"
        )
    if seed < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {seed}")
    return int(seed)


def check_result(out: np.ndarray, what: str, inputs: str) -> np.ndarray:
    """Raise if finite inputs gave a non-finite result (an overflow), naming the inputs."""
    if not np.isfinite(out).all():
        raise ValueError(
            f"{what} overflowed {out.dtype} (entries became inf or NaN) although"
            f" {inputs} are finite: their values are too large for {out.dtype};"
            f" rescale them{' or use float64' if out.dtype == np.float32 else ''}"
        )
    return out


def check_positive_int(n, name: str) -> int:
    """Return ``n`` as an int if it is a positive integer, else raise."""
    if isinstance(n, bool) or not isinstance(n, numbers.Integral):
        raise TypeError(f"{name} must be a positive integer, got {n!r}")
    if n < 1:
        raise ValueError(f"{name} must be a positive integer, got {n}")
    return int(n)


def check_bool(flag, name: str) -> bool:
    """Reject truthy non-booleans such as the string ``"False"``."""
    if not isinstance(flag, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {flag!r}")
    return bool(flag)


def leading_shape(name_a: str, a: np.ndarray, name_b: str, b: np.ndarray) -> tuple:
    """Broadcast the leading (head or batch) axes of two stacks of matrices."""
    try:
        return np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise ValueError(
            f"leading axes of {name_a} {a.shape} and {name_b} {b.shape} do not"
            f" broadcast: {a.shape[:-2]} vs {b.shape[:-2]}"
        ) from None


def result_dtype(*arrays: np.ndarray) -> np.dtype:
    """float32 only if every input is float32; otherwise float64."""
    if all(a.dtype == np.float32 for a in arrays):
        return np.dtype(np.float32)
    return np.dtype(np.float64)
