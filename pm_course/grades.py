"""``course/grades.csv``: the table every step reads and writes, one row per student and assignment.

``grade`` writes it; ``review``, ``export`` and ``feedback`` read it. It lives here, apart
from grading, so that what reads it never imports the grader.
"""
from __future__ import annotations

import csv
from pathlib import Path

from .course import COURSE

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
    """Write grades.csv: :data:`COLUMNS`, sorted by student and assignment."""
    with out.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, COLUMNS)
        writer.writeheader()
        writer.writerows(rows[k] for k in sorted(rows))
