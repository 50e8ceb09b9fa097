"""Friendly checks for the exercises: say what is wrong, never what is right.

Each check raises ``AssertionError`` with a sentence a student can act on
(a wrong shape, weights that do not sum to one, a value that is not finite).
They test properties only; the exercises' hidden tests compare values.
"""
from __future__ import annotations

import numpy as np


def check_array(x, name: str, shape: tuple | None = None) -> np.ndarray:
    """``x`` must be a finite real array, of ``shape`` if given."""
    if x is None:
        raise AssertionError(f"{name} is None: did the function forget to `return` its result?")
    try:
        arr = np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        raise AssertionError(f"{name} should be an array of numbers, got {type(x).__name__}") from None
    if shape is not None and arr.shape != tuple(shape):
        raise AssertionError(f"{name} should have shape {tuple(shape)}, but it has shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise AssertionError(f"there is inf or nan in {name}: is an exponential overflowing?")
    return arr


def check_distribution(p, name: str = "the weights", n: int | None = None) -> np.ndarray:
    """``p`` must be non-negative and sum to one (over its last axis)."""
    p = check_array(p, name, None if n is None else (n,))
    if (p < 0).any():
        raise AssertionError(f"{name} should be non-negative, but the smallest is {p.min():.3g}")
    total = p.sum(axis=-1)
    if not np.allclose(total, 1.0):
        raise AssertionError(f"{name} should sum to 1, but they sum to {np.round(total, 4)}")
    return p


def check_scalar(x, name: str) -> float:
    """``x`` must be one finite real number."""
    arr = check_array(x, name)
    if arr.shape != ():
        raise AssertionError(f"{name} should be a single number, but it has shape {arr.shape}")
    return float(arr)
