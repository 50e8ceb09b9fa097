"""``course/grades.csv``: the table every step reads and writes, one row per student and assignment.

``grade`` writes it; ``review``, ``export`` and ``feedback`` read it. It lives here, apart
from grading, so that what reads it never imports the grader.
"""
from __future__ import annotations

import csv
import io
from pathlib import Path

from .course import COURSE
from .state import write_text

GRADES = COURSE / "grades.csv"
COLUMNS = ("student_id", "assignment", "status", "reason", "score", "max_score",
           "late", "submitted", "name", "lms", "lms_id")
COLUMNS += ("written_score", "written_max", "awaiting_review")  # the written answers (pm_course/review.py)


def read_grades(path: Path = GRADES) -> dict[tuple[str, str], dict]:
    """grades.csv's rows by (student, assignment) ({} when there is none)."""
    if not path.is_file():
        return {}
    with path.open(newline="", encoding="utf-8") as f:
        return {(r["student_id"], r["assignment"]): {c: r.get(c) or "" for c in COLUMNS} for r in csv.DictReader(f)}


def write_grades(rows: dict, out: Path) -> None:
    """Write grades.csv whole (:func:`pm_course.state.write_text`): :data:`COLUMNS`, sorted by student and assignment."""
    buffer = io.StringIO(newline="")
    writer = csv.DictWriter(buffer, COLUMNS, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows[k] for k in sorted(rows))
    write_text(out, buffer.getvalue())
