"""What pushing to an LMS's API takes, whichever the LMS: its answers (rate limits, broken connections), the cell it
holds for a student (:class:`Cell`), grades compared and written as it keeps them.

The clients themselves: :mod:`pm_course.lms.canvas` (canvasapi) and :mod:`pm_course.lms.moodle` (web services).
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass

from pm_course.state.lms_cells import number


def backoff() -> float:
    """Seconds before the first retry after a rate limit (``$PM_PUSH_BACKOFF``, else 2)."""
    return float(os.environ.get("PM_PUSH_BACKOFF", "2"))


TRIES = 6


class RateLimited(Exception):
    """The LMS said: too many requests (nothing was done); wait and send the same request again."""


class Interrupted(Exception):
    """The connection failed mid-push: what was read back is journalled, the next push finishes the rest."""


class StillRateLimited(Interrupted):
    """The LMS kept answering "too many requests" through every retry: nothing more is sent this run."""


# --- what the LMS holds ---------------------------------------------------------
@dataclass
class Cell:
    """One student's grade in the LMS: ``grade`` as written to it ("" for none), ``excused``; ``deducted``:
    the points the LMS's own late policy takes off what was written (Canvas's ``points_deducted``)."""

    grade: str = ""
    excused: bool = False
    deducted: float = 0.0


def folded(name: str) -> str:
    """A full name compared as people write it: case and spacing aside ("Núñez, José" is not "José Núñez")."""
    return " ".join(str(name).split()).casefold()


def same(a, b) -> bool:
    """Two grades equal as the LMS keeps them (to a hundredth of a point)."""
    x, y = number(a), number(b)
    return x is not None and y is not None and abs(x - y) < 0.005


def points(x: float) -> str:
    """A grade as it is posted: ``8.5``, ``7``."""
    return f"{x:.2f}".rstrip("0").rstrip(".")


def retry(call, what: str):
    """``call()``, waiting out rate limits (doubling from :func:`backoff` s, :data:`TRIES` times)."""
    wait = first = backoff()
    for attempt in range(TRIES):
        try:
            return call()
        except RateLimited as err:
            if attempt == TRIES - 1:
                waited = first * (2 ** (TRIES - 1) - 1)
                raise StillRateLimited(f"{what}: still rate limited after {TRIES} tries over {waited:g} s ({err})"
                                       ) from None
            print(f"  rate limited ({err}): waiting {wait:g} s, then {what} again")
            time.sleep(wait)
            wait *= 2
    raise AssertionError("unreachable")
