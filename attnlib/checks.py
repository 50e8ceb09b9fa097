"""Friendly checks for the exercises: say what is wrong, never what is right.

Each check raises ``AssertionError`` with a sentence a student can act on
(a wrong shape, weights that do not sum to one, a value that is not finite).
They test properties only; the exercises' hidden tests compare values.

What the grader does around them (:class:`~attnlib.grader.judging`, the
withheld library answers) is :mod:`attnlib.grader`; its names are given here
too, for the notebooks (``from attnlib.checks import check_array, judging``) and
the grader's cells (``attnlib.checks._offer``), which import them from here.
"""
from __future__ import annotations

import numpy as np

from .grader import (  # noqa: F401  (the names notebooks and the grader's cells import from attnlib.checks)
    HIDDEN_BEGIN,
    HIDDEN_END,
    HIDDEN_PRINTS,
    Withheld,
    _called_as,
    _hidden,
    _offer,
    answer_of,
    asked,
    judging,
)


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


def check_close(x, want, name: str, what: str, rtol: float = 1e-5, atol: float = 1e-8,
                shown: int = 3) -> np.ndarray:
    """``x`` must equal ``want`` entry by entry (``np.isclose``'s tolerances).

    The message names the entries that differ most and what they should be,
    so a student sees where the mistake lies, not only how large it is.

    Examples
    --------
    >>> check_close([1.0, 2.5], [1.0, 2.0], "out", "the sum")
    Traceback (most recent call last):
    AssertionError: out should equal the sum, but 1 of its 2 entries differ: at [1] it is 2.5 and should be 2
    """
    want = np.asarray(want, dtype=float)
    arr = check_array(x, name, want.shape)
    bad = ~np.isclose(arr, want, rtol=rtol, atol=atol)
    if bad.any():
        where = np.argwhere(bad)
        worst = where[np.argsort(-np.abs(arr - want)[bad], kind="stable")[:shown]]

        def entry(idx):
            idx = tuple(int(i) for i in idx)
            return f"at [{', '.join(map(str, idx))}] it is {arr[idx]:.4g} and should be {want[idx]:.4g}"

        more = f" (and {len(where) - shown} more)" if len(where) > shown else ""
        raise AssertionError(f"{name} should equal {what}, but {len(where)} of its {arr.size} entries"
                             f" differ: {'; '.join(map(entry, worst))}{more}")
    return arr
