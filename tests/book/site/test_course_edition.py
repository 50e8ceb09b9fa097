"""The course edition's site carries no solution and no hidden test.

``pm-course book`` builds it into ``course/book/_build/html`` (``make test`` does,
before this folder's tests run); every page and every downloadable notebook of
it is searched for each line of the assignments' solutions and hidden tests
that no student sees anyway.
"""
import os
from pathlib import Path

import nbformat
import pytest

import leaks  # tests/helpers

ROOT = Path(__file__).resolve().parents[3]
COURSE_SITE = Path(os.environ.get("PM_COURSE_SITE", ROOT / "course" / "book" / "_build" / "html"))
EXERCISES = sorted(p for p in (ROOT / "exercises").iterdir() if p.is_dir())

pytestmark = [pytest.mark.book,
              pytest.mark.skipif(not COURSE_SITE.joinpath("index.html").exists() and os.environ.get("CI") != "true",
                                 reason=f"no course edition at {COURSE_SITE}: pm-course book builds it")]


def test_the_course_edition_carries_no_solution_line():
    pages = list(COURSE_SITE.rglob("*.html")) + list(COURSE_SITE.rglob("*.ipynb"))
    exercise_pages = [p for p in pages if "exercises" in p.parts]
    assert len(exercise_pages) >= len(EXERCISES), exercise_pages
    # A line the book's chapters print for everyone (a plain loop header, say) is no secret.
    public = {line.strip() for nb in sorted((ROOT / "chapters").glob("*.ipynb"))
              for cell in nbformat.read(nb, as_version=4).cells for line in cell.source.splitlines()}
    every = set().union(*leaks.solution_lines([next(f.glob("*.ipynb")) for f in EXERCISES]).values())
    secrets = every - public
    assert len(secrets) >= 0.9 * len(every), every & public
    for page in pages:
        text = page.read_text(errors="replace")
        assert "BEGIN SOLUTION" not in text and "HIDDEN TESTS" not in text, page
        leaked = [line for line in secrets if line in text]
        assert not leaked, f"{page} shows solution lines: {leaked[:3]}"
