"""Values handed from a graded notebook to the grader, which judges them itself.

The exercises' hidden tests run in the student's kernel, where the student's
code could have replaced ``np.allclose`` or anything else a test relies on. So
each hidden test also hands the values it checks to :func:`probe`, which writes
them as plain ``.npy`` files (no pickles) for the grader. The grader computes
the same values with the instructor's solutions in its own process and compares
them there: nothing in the kernel can make a wrong value pass.

Outside grading (``PM_PROBES`` unset), :func:`probe` does nothing.
"""
from __future__ import annotations

import os
import re

import numpy as np

_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,80}$")


def probe(name: str, value, judge=None) -> None:
    """Hand ``value`` to the grader under ``name``.

    Parameters
    ----------
    name : str
        Unique within the notebook: letters, digits, ``_ . -``.
    value : array_like of numbers (or bool)
        What the student's code computed.
    judge : callable, optional
        For the grader only: ``judge(value) -> bool`` decides instead of a
        comparison with the instructor's value (e.g. for random samples).

    Examples
    --------
    >>> probe("weights-1", [0.5, 0.5])   # does nothing outside grading
    """
    if not _NAME.match(name):
        raise ValueError(f"probe name {name!r} must be 1-80 letters, digits, '_', '.' or '-'")
    folder = os.environ.get("PM_PROBES")
    if not folder:
        return
    path = os.path.join(folder, name + ".npy")
    try:
        array = np.asarray(value)
        if array.dtype.kind not in "biuf":
            raise TypeError(f"not an array of numbers (dtype {array.dtype})")
        np.save(path, array, allow_pickle=False)
    except Exception as err:  # noqa: BLE001 -- whatever the student returned, the grader hears why
        with open(path + ".error", "w") as f:
            f.write(f"{type(err).__name__}: {err}"[:300])
