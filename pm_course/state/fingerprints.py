"""Fingerprints: what each result was made from, so that an output made from stale state is refused.

``grade`` records, for each notebook graded, the SHA-256 of the collected
notebook and of its assignment's source (``course/graded.json``). From that
and the course folder's files, :func:`stale` tells which rows of grades.csv no
longer say what the course folder holds:

- collected again since graded (a resubmission), or no longer collected
  (``collect --undo``, a download without the student's notebook);
- the assignment's source changed since (a fixed hidden test);
- the feedback page's score differs from grades.csv's (a ``review --apply``
  that recorded points but was stopped before it remade the pages).

``pm-course status`` lists them; ``export`` and ``feedback`` refuse while a
row they would write is stale (``--force`` writes the rest, listing what was
left out).
"""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from pm_course.state.course import Course, expected_notebooks, source_hash
from pm_course.state.submissions import FAILED, GRADED, MISSING

PAGE_SCORE = re.compile(r"\(Score:\s*([\d.]+)\s*/\s*([\d.]+)\)")


def digest(path: Path) -> str:
    """The SHA-256 of a file ("" when there is none)."""
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else ""


def graded_hashes(course: Course) -> dict[str, dict[str, str]]:
    """What each notebook was when last graded: ``student/assignment`` -> submission and source hashes."""
    try:
        return json.loads(course.graded_hashes.read_text())
    except (FileNotFoundError, ValueError):
        return {}


def page_score(path: Path) -> float | None:
    """The notebook's total a feedback page states (None when it has none)."""
    try:
        found = PAGE_SCORE.search(path.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return None
    return float(found.group(1)) if found else None


def stale(course: Course, rows: dict, manifest: dict) -> dict[tuple[str, str], str]:
    """The rows of grades.csv that no longer say what the course folder holds, and why.

    Parameters
    ----------
    course : Course
        The course whose folder it reads.
    rows : dict
        grades.csv's rows by (student, assignment) (:func:`pm_course.state.grades_csv.read_grades`).
    manifest : dict
        What is collected now: entries by (student, assignment) (:func:`pm_course.state.submissions.read_manifest`).
    """
    hashes = graded_hashes(course)
    collected, page = course.collected, course.page
    sources: dict[str, str] = {}
    found = {}
    for key, row in sorted(rows.items()):
        student, assignment = key
        if assignment not in expected_notebooks():
            continue
        now = manifest.get(key)
        if row.get("status") != GRADED:
            if now is not None and now.status == GRADED and row.get("status") == MISSING:
                found[key] = "collected since the last grading, not graded yet"
            elif (now is not None and now.status == GRADED and row.get("status") == FAILED
                  and hashes.get(f"{student}/{assignment}", {}).get("submission")
                  != digest(collected(student, assignment))):
                found[key] = ("its collected notebook is not the one that could not be graded (collected again,"
                              " or a collection undone): grade again")
            continue
        if now is None or now.status != GRADED or not collected(student, assignment).is_file():
            found[key] = "graded, but no longer collected (an undone or replaced collection): grade again"
            continue
        was = hashes.get(f"{student}/{assignment}")
        if was is None:
            continue  # graded by an earlier version, which kept no fingerprint
        if was.get("submission") != digest(collected(student, assignment)):
            found[key] = "collected again since it was graded (a resubmission): grade again"
            continue
        if assignment not in sources:
            sources[assignment] = source_hash(assignment)
        if was.get("source") != sources[assignment]:
            found[key] = "the assignment's source changed since it was graded: grade again"
            continue
        said = page_score(page(student, assignment))
        if said is not None and row.get("score") not in ("", None) and abs(said - float(row["score"])) > 1e-6:
            found[key] = (f"its feedback page says {said:g} points, grades.csv {float(row['score']):g}: grade"
                          f" --student {student} --assignment {assignment} makes it again")
    return found
